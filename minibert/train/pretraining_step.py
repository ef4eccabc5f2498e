"""What a pretraining step of BERT and ALBERT has of its own, for the Trainer (train/trainer.py):
gradient accumulation over micro-batches (weighted by what each loss is a mean over), the
objective passed to the model, and the control run's label shuffle.

    loss, grads, metrics = pretraining_loss(model, batches, rng, objective)   # metrics: model.Metrics
"""
from __future__ import annotations

import numpy as np

from minibert.model import Metrics


def loss_counts(batch: dict[str, np.ndarray], objective: str = "mlm_nsp") -> tuple[int, int]:
    """(predictions, pairs): what a batch's two losses are means over. Predictions are the real
    MLM predictions (masked_lm_weights > 0), or for "ltr" the real tokens with a real successor
    (model.ltr_targets); pairs are the sequences (the NSP/SOP loss is a mean over them)."""
    mask = batch["input_mask"]  # (B, T)
    if objective == "ltr":
        n = int(((mask[:, :-1] > 0) & (mask[:, 1:] > 0)).sum())
    else:
        n = int((batch["masked_lm_weights"] > 0).sum())
    return n, int(mask.shape[0])


def accumulate_gradients(model, batches: list[dict[str, np.ndarray]], rng: np.random.Generator | None = None,
                         objective: str | None = None):
    """The loss, gradients and Metrics of the micro-batches `batches` taken as one batch (gradient
    accumulation; docs/bert-notes.md §10.2). -> (loss, grads, metrics).

    The MLM loss is a mean over predictions and the NSP (SOP) loss a mean over pairs, so the big
    batch's loss is sum_i (M_i / M) mlm_loss_i + (N_i / N) nsp_loss_i, with M_i, N_i micro-batch
    i's predictions and pairs (loss_counts) and M, N their sums. Each micro-batch's backward
    starts from those two weights (loss_weights) and the gradients are summed: the step's
    gradient is the big batch's (to float rounding; tests/train/test_family_training.py), whatever
    the micro-batches' prediction counts. Only one micro-batch's activations are held at a time.
    Dropout draws from `rng` micro-batch after micro-batch."""
    counts = [loss_counts(b, objective or "mlm_nsp") for b in batches]
    M, N = max(sum(c[0] for c in counts), 1), max(sum(c[1] for c in counts), 1)
    kw = {} if objective is None else {"objective": objective}
    total: dict[str, np.ndarray] = {}
    parts = []
    for batch, (m, n) in zip(batches, counts):
        w = (m / M, n / N)  # this micro-batch's share of the step's predictions and pairs
        _, grads, metrics = model.loss_grads_metrics(batch, train=rng is not None, rng=rng, loss_weights=w, **kw)
        for k, g in grads.items():
            if k in total:
                total[k] += g  # the micro-batches' gradients add up
            else:
                total[k] = g.copy()
        parts.append((w, metrics))
    mlm_loss = sum(w[0] * m.mlm_loss for w, m in parts)
    nsp_loss = sum(w[1] * m.nsp_loss for w, m in parts)
    ms = [m for _, m in parts]
    summed = (sum(getattr(m, f) for m in ms) for f in Metrics._fields[3:])  # hits and counts add up
    metrics = Metrics(mlm_loss + nsp_loss, mlm_loss, nsp_loss, *summed)
    return metrics.loss, total, metrics


def shuffle_mlm_labels(batch: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Control run: permute the MLM targets among the real predictions of the batch, so the labels
    keep their frequencies but lose any relation to the input. A model that learns only from
    labels like these stays near the unigram baseline; if it did better, the data would leak."""
    ids = batch["masked_lm_ids"].copy()  # (B, P)
    real = batch["masked_lm_weights"] > 0  # (B, P)
    ids[real] = rng.permutation(ids[real])
    return {**batch, "masked_lm_ids": ids}


def pretraining_loss(model, batch, rng: np.random.Generator | None = None, objective: str | None = None):
    """(loss, grads, Metrics) of one batch, or of a list of micro-batches taken as one batch
    (accumulate_gradients; a list of one is that batch). `objective` is passed on when given.
    Dropout (and ELECTRA's samples) draw from `rng`; none without one."""
    if isinstance(batch, (list, tuple)) and len(batch) == 1:
        batch = batch[0]
    if isinstance(batch, (list, tuple)):
        return accumulate_gradients(model, list(batch), rng, objective)
    if objective is None:
        return model.loss_grads_metrics(batch, train=rng is not None, rng=rng)
    return model.loss_grads_metrics(batch, train=rng is not None, rng=rng, objective=objective)
