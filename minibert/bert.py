"""BertForPreTraining: the class a user holds, over the functions of minibert/model.py.

    model = BertForPreTraining(BertConfig(vocab_size=8192, hidden_size=128, ...))
    out = model.forward(input_ids)                 # sequence_output, pooled, mlm_logits, nsp_logits
    loss, grads, metrics = model.loss_grads_metrics(batch)
    model.save_pretrained("runs/x"); BertForPreTraining.from_pretrained("runs/x")  # transformers format
    token_vectors, sentence_vectors = model.encode(["a sentence", ...])

It sits above the model's math (minibert/model.py), the checkpoint formats
(minibert/checkpoint.py) and the tokenizer, and brings them together; none of them imports it.
"""
from __future__ import annotations

import warnings

import numpy as np

from minibert.backend import get_ops
from minibert import checkpoint
from minibert.model import (HEAD_GROUPS, BertConfig, LossGradsMetrics, Output, train_rng, bert_backward, bert_forward,
                            check_inputs, check_objective, check_params, encoder_forward, init_params,
                            mlm_transform_forward, param_shapes, pooler_forward)
from minibert.text.tokenizer import BertTokenizer


class BertForPreTraining:
    """BERT with the MLM and NSP heads. `params` is a flat dict of named arrays.

    >>> model = BertForPreTraining(BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1,
    ...                                       num_attention_heads=2, intermediate_size=32))
    >>> out = model.forward(np.array([[2, 7, 3]]))
    >>> out.mlm_logits.shape, out.nsp_logits.shape
    ((1, 3, 100), (1, 2))
    """

    encoder_forward = staticmethod(encoder_forward)  # the model's encoder (inspect.attention_maps reads its cache)

    def __init__(self, config: BertConfig, seed: int = 0, dtype=np.float32, params=None):
        """`params` may lack whole head groups (pool.*, mlm.*, nsp.*), as checkpoints of
        transformers' BertModel / BertForMaskedLM do; `self.heads` lists the groups present and
        forward returns None for the outputs of missing ones."""
        self.config = config
        self.dtype = np.dtype(dtype)
        self.params = init_params(config, seed, self.dtype) if params is None else params
        self.heads = tuple(g for g in HEAD_GROUPS if any(k.startswith(g + ".") for k in self.params))
        if "nsp" in self.heads and "pool" not in self.heads:
            raise ValueError("an NSP head (nsp.*) needs the pooler (pool.*)")
        expected = {k: s for k, s in param_shapes(config).items()
                    if k.split(".", 1)[0] not in HEAD_GROUPS or k.split(".", 1)[0] in self.heads}
        check_params(self.params, expected)
        self.vocab_path = None  # set by from_pretrained; encode() builds its tokenizer from it
        self.do_lower_case = True

    @property
    def num_parameters(self) -> int:
        return sum(p.size for p in self.params.values())

    @property
    def ops(self):
        """The module of layer functions this model runs: minibert.kernels (Numba) by default,
        minibert.layers (the NumPy reference) with MINIBERT_BACKEND=numpy (read once per process)."""
        return get_ops()

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, train=False, rng=None, causal=False):
        """-> Output(sequence_output (B,T,C), pooled_output (B,C), mlm_logits (B,T,V), nsp_logits (B,2)).
        Outputs of heads the model does not have (see `self.heads`) are None.
        causal=True runs the encoder left to right, as a model pretrained with objective "ltr"
        reads: mlm_logits[:, t] is then its prediction of token t + 1 from tokens 0..t."""
        ops = self.ops
        ids, tt, am = check_inputs(self.config, input_ids, token_type_ids, attention_mask)
        rng = train_rng(train, rng)
        seq, _ = encoder_forward(self.params, self.config, ids, tt, am, rng, ops, causal=causal)  # (B, T, C)
        pooled = nsp_logits = mlm_logits = None
        if "pool" in self.heads:
            pooled, _ = pooler_forward(self.params, seq, ops)  # (B, C)
        if "nsp" in self.heads:
            nsp_logits, _ = ops.linear_forward(pooled, self.params["nsp.w"], self.params["nsp.b"])  # (B, 2)
        B, T, C = seq.shape
        if "mlm" in self.heads:
            mlm_logits, _ = mlm_transform_forward(self.params, self.config, seq.reshape(B * T, C), ops)  # (B*T, V)
            mlm_logits = mlm_logits.reshape(B, T, -1)  # (B*T, V) -> (B, T, V)
        return Output(seq, pooled, mlm_logits, nsp_logits)

    __call__ = forward

    def loss_grads_metrics(self, batch, train=False, rng=None, compute_grads=True,
                           objective: str = "mlm_nsp", loss_weights=(1.0, 1.0)) -> LossGradsMetrics:
        """-> (loss, grads, metrics): the pretraining loss of `batch` (the original feature names,
        docs/bert-notes.md §3.7), every parameter's gradient (None with compute_grads=False) and
        the batch's Metrics (losses, hits and counts for the accuracies).
        `objective` (model.OBJECTIVES): "mlm_nsp" (BERT), "mlm" (No NSP) or "ltr" (left-to-right
        LM); the last two need only the MLM head, and their grads hold only the parameters they
        train (model.trained_params: no pool.*, nsp.*).
        `loss_weights` (MLM, NSP): the grads are those of w_mlm * mlm_loss + w_nsp * nsp_loss (for
        gradient accumulation, minibert/train/pretraining_step.py); the loss and metrics are unweighted."""
        check_objective(objective)
        needed = HEAD_GROUPS if objective == "mlm_nsp" else ("mlm",)
        if any(g not in self.heads for g in needed):
            missing = [g for g in needed if g not in self.heads]
            what = "the pooler, MLM and NSP heads" if objective == "mlm_nsp" else "the MLM head"
            raise ValueError(f"the pretraining loss needs {what} (objective {objective!r}); this model has "
                             f"no {missing} (loaded from a BertModel or BertForMaskedLM checkpoint?)")
        ops = self.ops
        loss, metrics, cache = bert_forward(self.params, self.config, batch, train_rng(train, rng), ops,
                                            objective=objective)
        grads = (bert_backward(self.params, self.config, cache, ops, *loss_weights) if compute_grads
                 else None)
        return LossGradsMetrics(loss, grads, metrics)

    def loss_and_grads(self, batch, train=False, rng=None, compute_grads=True, objective: str = "mlm_nsp"):
        """-> (loss, grads): loss_grads_metrics without the metrics."""
        loss, grads, _ = self.loss_grads_metrics(batch, train, rng, compute_grads, objective)
        return loss, grads

    # -- Hugging Face checkpoints (minibert.checkpoint knows the names and layouts) -----------
    def save_pretrained(self, directory, vocab=None):
        """Write a transformers-readable directory: config.json, model.safetensors, vocab.txt."""
        return checkpoint.save_pretrained(self, directory, vocab)

    @classmethod
    def from_pretrained(cls, directory, dtype=np.float32, verify: bool = True) -> "BertForPreTraining":
        """Read a transformers BertForPreTraining / BertForMaskedLM / BertModel directory. With
        `verify` the weights must be finite and match the digest minibert recorded (if any)."""
        return load_pretrained(directory, dtype, verify)

    def encode(self, texts, tokenizer=None, batch_size: int = 32, max_length: int = 128):
        """Texts -> (token_vectors, sentence_vectors): per text the last-layer vectors of its
        tokens ([CLS] ... [SEP]), a list of (T_i, C) arrays, and their mean (N, C).

        The tokenizer defaults to one built from `self.vocab_path` (set by from_pretrained).
        """
        if isinstance(texts, str):
            texts = [texts]
        if tokenizer is None:
            if self.vocab_path is None:
                raise ValueError("encode needs a tokenizer: pass tokenizer=BertTokenizer(vocab) or load the "
                                 "model with from_pretrained from a directory holding vocab.txt")
            tokenizer = BertTokenizer(self.vocab_path, do_lower_case=self.do_lower_case)
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be at least 1")
        max_length = min(max_length, self.config.max_position_embeddings)
        encoded = [tokenizer.encode(t, max_length=max_length) for t in texts]
        token_vectors = []
        for start in range(0, len(encoded), batch_size):
            chunk = encoded[start:start + batch_size]
            T = max(len(ids) for ids, _ in chunk)
            ids = np.zeros((len(chunk), T), np.int64)  # (b, T), padded with [PAD] = 0
            seg = np.zeros((len(chunk), T), np.int64)  # (b, T)
            mask = np.zeros((len(chunk), T), np.int64)  # (b, T)
            for i, (tok_ids, seg_ids) in enumerate(chunk):
                ids[i, :len(tok_ids)], seg[i, :len(tok_ids)], mask[i, :len(tok_ids)] = tok_ids, seg_ids, 1
            ids, seg, mask = check_inputs(self.config, ids, seg, mask)
            seq, _ = encoder_forward(self.params, self.config, ids, seg, mask, ops=self.ops)  # (b, T, C)
            token_vectors += [seq[i, :len(tok_ids)].copy() for i, (tok_ids, _) in enumerate(chunk)]  # (T_i, C)
        C = self.config.hidden_size
        sentence_vectors = np.stack([v.mean(axis=0) for v in token_vectors]) if token_vectors \
            else np.zeros((0, C), self.dtype)  # (N, C)
        return token_vectors, sentence_vectors


def load_pretrained(directory, dtype=np.float32, verify: bool = True,
                    encoder_of_task: bool = False) -> BertForPreTraining:
    """A transformers-format directory -> BertForPreTraining (possibly head-less: BertForMaskedLM
    files have no NSP head, BertModel files no heads at all; a warning says so). With `verify`
    (the default) the weights must be finite and match their recorded digest. A fine-tuned task
    model is refused unless `encoder_of_task`: then its encoder (and pooler) is loaded, its task
    head left out (what `attention` looks at)."""
    loaded = checkpoint.read_pretrained(directory, dtype, verify)
    params = loaded.params
    if loaded.architecture in checkpoint.TASK_HEADS:
        if not encoder_of_task:
            raise ValueError(f"{directory} holds a fine-tuned {loaded.architecture}; load it with "
                             f"minibert.{loaded.architecture}.from_pretrained")
        shapes = param_shapes(loaded.config)
        params = {name: value for name, value in params.items() if name in shapes}
    model = BertForPreTraining(loaded.config, dtype=dtype, params=params)
    missing = [g for g in HEAD_GROUPS if g not in model.heads]
    if missing and params is loaded.params:  # a task model's encoder was asked for: no surprise to warn of
        what = {"pool": "pooler (pooled_output)", "mlm": "MLM head (mlm_logits)", "nsp": "NSP head (nsp_logits)"}
        warnings.warn(f"{directory} ({loaded.architecture or 'no architecture given'}) has no "
                      f"{', '.join(what[g] for g in missing)}: forward returns None for them and "
                      f"loss_and_grads is unavailable"
                      + ("; the model runs as an encoder only" if not model.heads or model.heads == ("pool",) else ""),
                      stacklevel=2)
    model.vocab_path, model.do_lower_case = loaded.vocab_path, loaded.do_lower_case
    return model
