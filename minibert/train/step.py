"""One optimizer step, the whole of it (tests/interop/test_train_parity.py checks it against
transformers + a PyTorch port of the optimizer); the control run's label shuffle; the two ways a
run stops early."""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from minibert.bert import BertForPreTraining
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


def training_step(model: BertForPreTraining, optimizer: AdamW, batch: dict[str, np.ndarray], step: int, *,
                  lr: float, warmup_steps: int, total_steps: int, schedule: str = "bert",
                  clip_norm: float = 1.0, rng: np.random.Generator | None = None,
                  objective: str | None = None) -> StepResult:
    """forward + backward -> clip by global norm -> lr for this step -> AdamW update (in place).

    `step` is the global step before this update (the schedule's t). Dropout runs when `rng` is
    given. Raises TrainingDiverged (before touching any parameter) on a NaN/inf loss or gradient.
    `objective` (a pretraining model's; model.OBJECTIVES) is passed on when given. An objective
    that trains only some parameters ("mlm", "ltr": not the NSP head) returns grads for those
    only; the optimizer must then have been built over the same ones (model.trained_params), and
    only they are updated.
    """
    if objective is None:
        loss, grads, metrics = model.loss_grads_metrics(batch, train=rng is not None, rng=rng)
    else:
        loss, grads, metrics = model.loss_grads_metrics(batch, train=rng is not None, rng=rng, objective=objective)
    grads, norm = clip_by_global_norm(grads, clip_norm)
    if not (math.isfinite(loss) and math.isfinite(norm)):
        raise TrainingDiverged(f"loss is {loss} (gradient norm {norm}) at step {step}")
    step_lr = lr_at(step, lr, warmup_steps, total_steps, schedule)
    params = model.params if grads.keys() == model.params.keys() else {k: model.params[k] for k in grads}
    optimizer.step(params, grads, step_lr)
    return StepResult(float(loss), metrics, norm, step_lr)


def shuffle_mlm_labels(batch: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Control run: permute the MLM targets among the real predictions of the batch, so the labels
    keep their frequencies but lose any relation to the input. A model that learns only from
    labels like these stays near the unigram baseline; if it did better, the data would leak."""
    ids = batch["masked_lm_ids"].copy()  # (B, P)
    real = batch["masked_lm_weights"] > 0  # (B, P)
    ids[real] = rng.permutation(ids[real])
    return {**batch, "masked_lm_ids": ids}
