"""One optimizer step, the whole of it (tests/interop/test_train_parity.py checks it against
transformers + a PyTorch port of the optimizer), for any model; the two ways a run stops early.
What is a model's own (BERT's gradient accumulation over micro-batches, its objectives) is in the
run's loss_grads_metrics (train/pretraining_step.py for BERT and ALBERT)."""
from __future__ import annotations

import math
import signal
import sys
import threading
from typing import Any, Callable, NamedTuple

import numpy as np

from minibert.optim import AdamW, clip_by_global_norm, lr_at


class TrainingDiverged(RuntimeError):
    """The loss became NaN or inf; the message names the step and the last good checkpoint."""


class TrainingAborted(RuntimeError):
    """A second Ctrl-C stopped the run without saving; the message names the last checkpoint."""


class StepResult(NamedTuple):
    loss: float
    metrics: Any  # what the loss function returned with the loss (the loop's runs: {name: (sum, count)})
    grad_norm: float  # global gradient norm before clipping
    lr: float  # learning rate used for this update


def training_step(model, optimizer: AdamW, batch, step: int, *, lr: float, warmup_steps: int, total_steps: int,
                  schedule: str = "bert", clip_norm: float = 1.0, rng: np.random.Generator | None = None,
                  lr_anchor: tuple[int, float] | None = None,
                  loss_fn: Callable | None = None) -> StepResult:
    """forward + backward -> clip by global norm -> lr for this step -> AdamW update (in place).

    `loss_fn(batch, rng)` -> (loss, grads, metrics) is the forward and backward; by default the
    model's own, model.loss_grads_metrics(batch, train=rng is not None, rng=rng). Dropout runs
    when `rng` is given. `step` is the global step before this update (the schedule's t);
    `lr_anchor`: where a refit of the schedule re-spread the decay (optim.lr_at). Raises
    TrainingDiverged (before touching any parameter) on a NaN/inf loss or gradient. Gradients
    for only some of the parameters (a pretraining objective without NSP, a frozen encoder)
    update only those; the optimizer must then have been built over the same ones.
    """
    if loss_fn is None:
        loss, grads, metrics = model.loss_grads_metrics(batch, train=rng is not None, rng=rng)
    else:
        loss, grads, metrics = loss_fn(batch, rng)
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
