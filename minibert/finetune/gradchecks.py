"""Gradient checks of the fine-tuning half: the heads' own layers, every task class of every encoder
(BERT's, causal and + BiLSTM variants, ELECTRA's), and the BiLSTM tagger, in float64. `python -m minibert
gradcheck` prints them with the rest (tools/gradcheck_table.py)."""
from __future__ import annotations

import numpy as np

from minibert.analysis.gradcheck import compare, layer_check, numerical_grad_scalar, rand_array, sampled_loss_checks, head_batch
from minibert import layers
from minibert.backend import get_ops
from minibert.finetune import bilstm, electra_tasks as ef, heads
from minibert.finetune.models import (BertForMultipleChoice, BertForQuestionAnswering, BertForSequenceClassification,
                                      BertForTokenClassification)
from minibert.model import BertConfig, dense_act_backward, dense_act_forward


def check_heads(rng, verbose=True):
    """The fine-tuning heads' own layers: dropout -> linear (with a fixed dropout mask) and MSE."""
    x, w, b = rand_array(rng, 5, 6), rand_array(rng, 6, 3), rand_array(rng, 3)
    mask_rng = lambda: np.random.default_rng(7)  # noqa: E731 (same dropout mask every call)
    checks = layer_check("classifier (dropout 0.3 -> linear)",
                          lambda x, w, b: heads.classifier_forward(x, w, b, 0.3, mask_rng()),
                          dict(x=x, w=w, b=b), lambda d, c: heads.classifier_backward(d, c), rng, verbose)
    pred, target = rand_array(rng, 7), rand_array(rng, 7)
    loss, c = heads.mse_forward(pred, target)
    num = numerical_grad_scalar(lambda: heads.mse_forward(pred, target)[0], pred)
    checks.append(compare("mse: dpred", heads.mse_backward(1.0, c), num, verbose=verbose))
    return checks


def check_weighted_classifier(rng, verbose=True, samples_per_tensor=3, rtol=1e-5, atol=1e-8):
    """The class-weighted cross-entropy (--set class_weights) in float64: (1) the loss layer
    alone, (2) a sequence classifier whole, its batch carrying the weights. The weights are
    random and far from equal, so a backward that forgot the normalisation by sum w[y] (or took
    the plain mean) fails."""
    logits, targets = rand_array(rng, 6, 3), np.array([0, 2, 1, 2, 2, 0])
    weights = rng.uniform(0.2, 5.0, 3)
    _, c = layers.cross_entropy_forward(logits, targets, class_weights=weights)
    num = numerical_grad_scalar(lambda: layers.cross_entropy_forward(logits, targets, class_weights=weights)[0], logits)
    checks = [compare("weighted cross-entropy: dlogits", layers.cross_entropy_backward(1.0, c), num, rtol,
                      atol, verbose)]
    cfg = BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=16, max_position_embeddings=16, type_vocab_size=2)
    model = BertForSequenceClassification(cfg, 3, int(rng.integers(1 << 30)), np.float64)
    for p in model.params.values():
        p += 0.1 * rng.standard_normal(p.shape)
    batch = head_batch("sequence", cfg, rng, B=4, num_labels=3)
    batch["class_weights"] = rng.uniform(0.2, 5.0, 3)
    _, grads = model.loss_and_grads(batch)
    loss = lambda: model.loss_and_grads(batch, compute_grads=False)[0]  # noqa: E731 (reads the params)
    return checks + sampled_loss_checks("SequenceClassification (class weights)", loss, model.params, grads, rng,
                                        samples_per_tensor, rtol, atol, verbose)


def check_task_models(rng, verbose=True, samples_per_tensor=3, rtol=1e-5, atol=1e-8):
    """Each fine-tuning class, whole, in float64: sampled entries of every parameter tensor against
    centered differences of the loss (dropout off; the heads' dropout is checked in check_heads)."""
    cfg = BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=16, max_position_embeddings=16, type_vocab_size=2)
    seed = int(rng.integers(1 << 30))
    models = [("sequence", BertForSequenceClassification(cfg, 3, seed, np.float64)),
              ("regression", BertForSequenceClassification(cfg, 1, seed, np.float64)),
              ("token", BertForTokenClassification(cfg, 3, seed, np.float64)),
              ("choice", BertForMultipleChoice(cfg, seed, np.float64)),
              ("qa", BertForQuestionAnswering(cfg, seed, np.float64)),
              # left to right, as the LTR ablation fine-tunes (the pooled heads read the last real token)
              ("sequence, causal", BertForSequenceClassification(cfg, 3, seed, np.float64).make_causal()),
              ("token, causal", BertForTokenClassification(cfg, 3, seed, np.float64).make_causal()),
              ("choice, causal", BertForMultipleChoice(cfg, seed, np.float64).make_causal()),
              ("sequence, causal + BiLSTM", BertForSequenceClassification(cfg, 3, seed, np.float64).make_causal(True)),
              ("token, causal + BiLSTM", BertForTokenClassification(cfg, 3, seed, np.float64).make_causal(True))]
    checks = []
    for label, model in models:
        checks += check_task_model(f"{type(model).__name__[7:]} ({label})", model, cfg, rng, verbose,
                                   samples_per_tensor, rtol, atol)
    return checks


def check_task_model(label, model, cfg, rng, verbose=True, samples_per_tensor=3, rtol=1e-5, atol=1e-8):
    """One fine-tuning model (any encoder's), whole, in float64 with dropout off: its parameters
    moved away from the init's unit LayerNorms and zero biases, a head_batch, and sampled entries
    of every parameter tensor against centered differences of the loss; checks named `label: name`."""
    for p in model.params.values():
        p += 0.1 * rng.standard_normal(p.shape)
    batch = head_batch(model.head_shape, cfg, rng, num_labels=model.config.num_labels)
    _, grads = model.loss_and_grads(batch)
    return sampled_loss_checks(label, lambda: model.loss_and_grads(batch, compute_grads=False)[0], model.params,
                               grads, rng, samples_per_tensor, rtol, atol, verbose)


def check_electra_finetune(rng, verbose=True, samples_per_tensor=3, rtol=1e-5, atol=1e-8):
    """ELECTRA's fine-tuning classes (finetune/electra_tasks.py) in float64 on the backend of
    get_ops(): (1) their head's own layer, dropout -> dense -> GELU (model.dense_act_forward, BERT's
    pooler's layer: the classification head's first half and the multiple-choice summary), with a fixed dropout mask,
    exact and tanh GELU; (2) each class whole, sampled entries of every tensor (E 6 -> C 8, padding
    in the last row, dropout off)."""
    ops = get_ops()
    mask_rng = lambda: np.random.default_rng(5)  # noqa: E731 (same dropout mask every call)
    x, w, b = rand_array(rng, 5, 8), rand_array(rng, 8, 8), rand_array(rng, 8)
    checks = []
    for act, p in (("gelu", 0.3), ("gelu_new", 0.0)):
        checks += layer_check(f"electra dense -> {act} (dropout {p})",
                              lambda x, w, b: dense_act_forward(x, w, b, p, mask_rng(), act, ops),
                              dict(x=x, w=w, b=b), lambda d, c: dense_act_backward(d, c, ops), rng, verbose,
                              rtol, atol)
    cfg = ef.ElectraConfig(vocab_size=40, embedding_size=6, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=16, max_position_embeddings=16, hidden_act="gelu_new")
    seed = int(rng.integers(1 << 30))
    models = [("sequence", ef.ElectraForSequenceClassification(cfg, 3, seed, np.float64)),
              ("regression", ef.ElectraForSequenceClassification(cfg, 1, seed, np.float64)),
              ("token", ef.ElectraForTokenClassification(cfg, 3, seed, np.float64)),
              ("choice", ef.ElectraForMultipleChoice(cfg, seed, np.float64)),
              ("qa", ef.ElectraForQuestionAnswering(cfg, seed, np.float64))]
    for label, model in models:
        checks += check_task_model(f"{type(model).__name__} ({label})", model, cfg, rng, verbose, samples_per_tensor,
                                   rtol, atol)
    return checks


def check_bilstm(rng, verbose=True):
    """The BiLSTM tagger's layer (finetune/bilstm.py): x and the six tensors of both directions,
    rows padded after 4 tokens and after 1, random parameters and upstream gradient."""
    B, T, D, H = 3, 6, 5, 4
    mask = np.ones((B, T))
    mask[1, 4:] = 0
    mask[2, 1:] = 0
    shapes = bilstm.bilstm_shapes(D, H, "lstm")
    keys = list(shapes)

    def forward(x, **p):
        return bilstm.bilstm_forward(x, mask, {k: p[k.replace(".", "_")] for k in keys})

    def backward(dout, cache):
        dx, grads = bilstm.bilstm_backward(dout, cache)
        return (dx, *(grads[k] for k in keys))

    arrays = {"x": rand_array(rng, B, T, D)}
    arrays.update({k.replace(".", "_"): rand_array(rng, *shapes[k], scale=0.5) for k in keys})
    return layer_check("bilstm", forward, arrays, backward, rng, verbose)
