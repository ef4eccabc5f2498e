"""One optimizer step, the whole of it (tests/interop/test_train_parity.py checks it against
transformers + a PyTorch port of the optimizer), on one batch or accumulated over micro-batches;
the control run's label shuffle; the two ways a run stops early."""
from __future__ import annotations

import math
import signal
import sys
import threading
from typing import Any, NamedTuple

import numpy as np

from minibert.bert import BertForPreTraining
from minibert.model import Metrics
from minibert.optim import AdamW, clip_by_global_norm, lr_at


class TrainingDiverged(RuntimeError):
    """The loss became NaN or inf; the message names the step and the last good checkpoint."""


class TrainingAborted(RuntimeError):
    """A second Ctrl-C stopped the run without saving; the message names the last checkpoint."""


class StepResult(NamedTuple):
    loss: float
    metrics: Any  # minibert.model.Metrics of this batch
    grad_norm: float  # global gradient norm before clipping
    lr: float  # learning rate used for this update


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


def training_step(model: BertForPreTraining, optimizer: AdamW, batch: dict[str, np.ndarray] | list, step: int, *,
                  lr: float, warmup_steps: int, total_steps: int, schedule: str = "bert",
                  clip_norm: float = 1.0, rng: np.random.Generator | None = None,
                  objective: str | None = None, lr_anchor: tuple[int, float] | None = None) -> StepResult:
    """forward + backward -> clip by global norm -> lr for this step -> AdamW update (in place).

    `batch` is one batch, or a list of micro-batches whose gradients are accumulated into one
    step (accumulate_gradients; a list of one is the same as that batch).
    `step` is the global step before this update (the schedule's t); `lr_anchor`: where a refit
    of the schedule re-spread the decay (optim.lr_at). Dropout runs when `rng` is given. Raises TrainingDiverged (before touching any parameter) on a NaN/inf loss or gradient.
    `objective` (a pretraining model's; model.OBJECTIVES) is passed on when given. An objective
    that trains only some parameters ("mlm", "ltr": not the NSP head) returns grads for those
    only; the optimizer must then have been built over the same ones (model.trained_params), and
    only they are updated.
    """
    if isinstance(batch, (list, tuple)) and len(batch) == 1:
        batch = batch[0]
    if isinstance(batch, (list, tuple)):
        loss, grads, metrics = accumulate_gradients(model, list(batch), rng, objective)
    elif objective is None:
        loss, grads, metrics = model.loss_grads_metrics(batch, train=rng is not None, rng=rng)
    else:
        loss, grads, metrics = model.loss_grads_metrics(batch, train=rng is not None, rng=rng, objective=objective)
    grads, norm = clip_by_global_norm(grads, clip_norm)
    if not (math.isfinite(loss) and math.isfinite(norm)):
        raise TrainingDiverged(f"loss is {loss} (gradient norm {norm}) at step {step}")
    step_lr = lr_at(step, lr, warmup_steps, total_steps, schedule, lr_anchor)
    params = model.params if grads.keys() == model.params.keys() else {k: model.params[k] for k in grads}
    optimizer.step(params, grads, step_lr)
    return StepResult(float(loss), metrics, norm, step_lr)


def install_sigint(owner, flag: str):
    """Ctrl-C while training: the first sets `owner.<flag>` (the loop finishes its step, saves
    and stops), a second raises KeyboardInterrupt (stop now). -> the previous handler, for
    restore_sigint; None off the main thread, where Python delivers no signals."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        if getattr(owner, flag):  # second Ctrl-C: stop now
            raise KeyboardInterrupt
        setattr(owner, flag, True)
        print("\nCtrl-C: finishing this step, then saving (press again to abort without saving)",
              file=sys.stderr, flush=True)

    return signal.signal(signal.SIGINT, handler)


def restore_sigint(previous) -> None:
    if previous is not None:
        signal.signal(signal.SIGINT, previous)


def shuffle_mlm_labels(batch: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Control run: permute the MLM targets among the real predictions of the batch, so the labels
    keep their frequencies but lose any relation to the input. A model that learns only from
    labels like these stays near the unigram baseline; if it did better, the data would leak."""
    ids = batch["masked_lm_ids"].copy()  # (B, P)
    real = batch["masked_lm_weights"] > 0  # (B, P)
    ids[real] = rng.permutation(ids[real])
    return {**batch, "masked_lm_ids": ids}
