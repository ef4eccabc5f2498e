"""Step-time calibration: how many steps fit a time budget (`auto_steps`).

`calibrate_steps` times a few forward+backward passes before the run and sizes the schedule;
`recalibrate`, called after every step of a fresh auto_steps run, fits it again (twice) from the
loop's own speed. Both act on a Trainer (minibert/train/trainer.py): they read its config, model,
data, step counters and elapsed time, keep their measurements in `trainer._calibration`, and set
`trainer.total_steps` (and the short phase's length, `trainer._short_steps`). The Trainer's
methods of the same names (`calibrate_steps`, `_recalibrate`, ...) call these; the RECALIBRATE_*
settings below are read through the trainer (Trainer.RECALIBRATE_* are these), so a test can
change them on one trainer.
"""
from __future__ import annotations

import collections
import time
from pathlib import Path

import numpy as np

from minibert.optim import clip_by_global_norm

RECALIBRATE_FIRST, RECALIBRATE_WINDOW, RECALIBRATE_LONG_WINDOW = 100, 80, 400
RECALIBRATE_MARGIN = 0.98  # of the budget left: the loop keeps slowing after the last refit


def calibrate_steps(trainer, budget_seconds: float, passes: int = 16) -> int:
    """Choose the schedule length so the loop fits the budget: time a few forward+backward
    passes on a held-aside batch (parameters untouched), then divide the budget by the
    measured step time plus the evaluation cost. The first passes compile Numba kernels and
    warm the allocator (measured: the first 4 ran ~20% slower than the run's average, so a
    budget of 9 minutes left 1.5 unused), so only the last half are timed.

    Erring long costs more than erring short: a schedule the budget cuts off never runs the
    end of its learning-rate decay, where held-out NSP accuracy still climbs. With 10 passes
    and +8% for the optimizer and data, four 9-minute runs measured 202-214 ms/step for a loop
    that then ran at 209-229 ms/step (two were cut off, 137 and 118 steps short); hence 16
    passes and +12%; `recalibrate` then fits the schedule again from the loop's own speed.
    With a short phase, both lengths are timed and the step time is their average weighted
    by short_seq_fraction."""
    full = time_step(trainer, trainer.data.train, trainer.cfg.batch_size, passes)
    short = full
    if trainer.short_iterator is not None:
        short = time_step(trainer, trainer.data.short_train, trainer.cfg.short_phase()[1], passes)
    eval_time = 0.0
    if trainer.heldout is not None:
        per_batch = full / trainer.cfg.accumulation_steps  # a step computes accumulation_steps batches
        eval_time = per_batch / 3 * trainer.heldout["input_ids"].shape[0] / trainer.cfg.batch_size
    trainer._calibration = {"short": short, "full": full, "eval": eval_time, "budget": budget_seconds,
                            "times": collections.deque(maxlen=trainer.RECALIBRATE_LONG_WINDOW), "sum": 0.0,
                            "next": trainer.RECALIBRATE_FIRST}
    steps, step_time, n_evals = fit_steps(trainer, budget_seconds, 1.0)
    trainer.say(f"calibration: {step_time * 1000:.0f} ms/step, eval {eval_time:.1f} s x {n_evals}: "
                f"{steps} steps fit {budget_seconds / 60:.1f} min")
    return steps


def fit_steps(trainer, seconds: float, scale: float, overhead: float = 0.0) -> tuple[int, float, int]:
    """-> (total steps, mean step time of the steps left, evaluations left) so that `seconds`
    more of loop after the current step fit, with the calibrated times multiplied by `scale`
    and `overhead` seconds per step added (logging, checkpoints, curves). Once the short
    phase is fixed, its remaining steps are counted at their own time."""
    c = trainer._calibration
    f = trainer.cfg.short_seq_fraction if trainer.short_iterator is not None else 0.0
    short_left = 0
    if trainer._short_steps is not None:
        short_left, f = max(0, trainer._short_steps - trainer.step), 0.0
    seconds -= short_left * (scale * c["short"] + overhead)
    step_time = scale * (f * c["short"] + (1 - f) * c["full"]) + overhead
    steps, n_evals = max(1, int(seconds / step_time)), 1
    for _ in range(3):  # evaluations run every eval_interval steps and once at the end
        n_evals = 1 + (short_left + steps) // trainer.cfg.eval_interval
        steps = max(1, int((seconds - n_evals * scale * c["eval"]) / step_time))
    return trainer.step + short_left + steps, step_time, n_evals


def recalibrate(trainer, step_seconds: float) -> None:
    """Called after every step of a fresh auto_steps run with that step's duration. The probe
    misses part of the loop's cost, and the loop slows as training goes on (measured: 2-13%
    slower than the probe's estimate, and full-length steps 8% slower than short ones where
    the probe saw 4%), which let the budget cut off the end of the lr decay. So the schedule
    is fitted again to the remaining budget from the last RECALIBRATE_WINDOW steps' own
    speed plus the loop's other costs so far (logging, checkpoints, curves), twice: at step
    100 (with the default 200 warmup steps still inside the warmup, where the learning rate
    does not depend on the schedule length; the switch from short to full-length sequences
    is fixed here) and 80 full-length steps after the later of the switch and the middle of
    the run, each aiming at 98% of the budget left (without that margin, three 9-minute runs
    ended 5-24 steps short of their refitted schedule, one finished with 4 s to spare). The
    second refit shows as a kink in the lr curve: shortening a 2404-step schedule to 2225 at
    step 1282 lowered the learning rate there by 9%. The first refit times the last 80
    steps; the second the last 400 full-length ones (or all since the switch, if fewer): on
    a shared machine 80 steps (~15 s) can fall in a passing slowdown (once: 214 ms/step
    there against ~185 before and after, and the run ended 23 s early). A resumed run keeps
    its saved schedule."""
    c = trainer._calibration
    c["times"].append(step_seconds)  # the last RECALIBRATE_LONG_WINDOW steps
    c["sum"] += step_seconds  # all steps so far
    if trainer.step != c["next"]:
        return
    W = trainer.RECALIBRATE_WINDOW
    if trainer._short_steps is not None:  # the second refit: full-length steps only
        W = max(W, min(trainer.RECALIBRATE_LONG_WINDOW, trainer.step - trainer._short_steps))
    predicted = sum(c["short"] if s < trainer.short_steps else c["full"]
                    for s in range(trainer.step - W, trainer.step))
    scale = sum(list(c["times"])[-W:]) / predicted
    overhead = max(0.0, trainer.elapsed - c["sum"] - trainer._eval_seconds) / trainer.step  # per step
    left = (c["budget"] - trainer.elapsed) * trainer.RECALIBRATE_MARGIN
    total, step_time, _ = fit_steps(trainer, left, scale, overhead)
    trainer.say(f"recalibration at step {trainer.step}: the loop runs at {scale:.2f}x the calibrated time; "
                f"{step_time * 1000:.0f} ms/step, {total} steps fit the budget (was {trainer.total_steps})")
    trainer.total_steps = max(total, trainer.step + 1)
    if trainer._short_steps is None:  # the first refit: fix the switch, plan the second
        trainer._short_steps = trainer.short_steps
        c["next"] = max(trainer._short_steps, trainer.total_steps // 2) + W
    else:
        trainer._calibration = None


def time_step(trainer, data_dir: Path, batch_size: int, passes: int) -> float:
    """Seconds per training step (x 1.12 for the optimizer, data and checkpoints), from the
    last half of `passes` forward+backward passes on one batch of `data_dir` (times the
    accumulation_steps micro-batches a step computes)."""
    from minibert.shards import BatchIterator

    probe = BatchIterator(str(data_dir), batch_size, trainer.cfg.seed + 99, masking=trainer.cfg.masking,
                          vocab=trainer.cfg.vocab, mask_shares=trainer.cfg.mask_shares).next_batch()
    times = []
    for _ in range(passes):
        t0 = time.perf_counter()
        _, grads = trainer.model.loss_and_grads(probe, train=trainer._dropout_on(), rng=np.random.default_rng(0),
                                                objective=trainer.cfg.objective)
        clip_by_global_norm(grads, trainer.cfg.clip_norm)
        times.append(time.perf_counter() - t0)
    return float(np.median(times[passes // 2:])) * 1.12 * trainer.cfg.accumulation_steps
