"""The time budget: how many steps fit `minutes`, fitted from the loop's own speed.

One policy for every run that sizes its schedule to a budget (steps 0: pretraining,
ELECTRA, T5, XLNet). The learning-rate decay then runs to its end instead of being cut off by the
clock. A fit needs the time of a step and of an evaluation:

    probe      a run may time a few steps before the loop starts (pretraining does: 16
               forward+backward passes on a held-aside batch, minibert/train/trainer.py); without
               one, the first fit waits for the loop's own first PROBE_STEPS steps (the first
               step of a process pays Numba's compilation and is not counted).
    refits     at step FIRST_REFIT, and WINDOW full-length steps after the later of the middle of
               the run and the switch from short to full-length sequences, from the speed of the
               last WINDOW steps (the second refit: up to LONG_WINDOW full-length ones, so a
               passing slowdown on a shared machine does not cut the schedule), scaled against the
               probe, plus the loop's other costs per step so far (logging, checkpoints, curves)
               and the evaluations still to come; each aims at MARGIN of the time left, because
               the loop keeps slowing after the last fit.
    resume     a resumed run keeps its schedule and does the fits it has not done yet, timed on
               the steps of the resumed process.

Why each number (measured on the train-tiny recipe, 2 cores): the probe misses part of the loop's
cost and the loop slows as training goes on (2-13% slower than the probe's estimate); without
the margin three 9-minute runs ended 5-24 steps short of their refitted schedule; 80 steps
(~15 s) can fall in a passing slowdown (once 214 ms/step against ~185 before and after).

A refit changes the schedule's length, not its current rate: `refit` re-spreads what is left
of the decay from the rate of the step where the refit happened (optim.lr_at's `anchor`).

Everything about the budget is here: StepBudget knows no trainer and no clock: it is told the
duration of every step and evaluation (tests/loop/test_budget.py drives it with made-up
durations); `probe_seconds` times a run's step before the loop; `refit` applies a fit to the
loop's state (loop/state.LoopState: the schedule's length, the lr anchor, the switch to
full-length steps, the evaluation interval) and says what changed; `fit_message` is that line.
"""
from __future__ import annotations

import collections
import time
from typing import Callable, NamedTuple

import numpy as np

from minibert.optim import lr_at

FULL, SHORT = "full", "short"  # the kinds of step: full-length sequences, or the short phase's


class Fit(NamedTuple):
    total_steps: int  # the schedule's new length
    step_seconds: float  # the predicted time of one of the steps left (overhead included)
    evals: int  # evaluations still to come (every eval_interval steps, and one at the end)
    scale: float  # the loop's measured speed against the probe (1.0 at a fit from the probe)


class StepBudget:
    """Fits the number of steps to `seconds` (see the module docstring).

    `step_seconds`: the probe's time of a full-length step (None: measured on the loop's first
    PROBE_STEPS steps); `eval_seconds`: the probe's time of one evaluation (None: measured, or
    asked of `time_eval` at the first fit). `short_fraction`, `short_step_seconds`: the
    sequence-length warm-up (the first short_fraction of the steps are short; the switch is
    fixed at the first refit). `max_steps`: the schedule is never longer (a command's --steps).
    """

    FIRST_REFIT, WINDOW, LONG_WINDOW, MARGIN, PROBE_STEPS = 100, 80, 400, 0.98, 10
    STAGES = ("probe", "first refit", "second refit", "done")

    def __init__(self, seconds: float, eval_interval: int, step_seconds: float | None = None,
                 eval_seconds: float | None = None, short_fraction: float = 0.0,
                 short_step_seconds: float | None = None, max_steps: int | None = None):
        if not seconds > 0:
            raise ValueError(f"a time budget must be positive, got {seconds} s")
        self.seconds, self.eval_interval, self.max_steps = float(seconds), int(eval_interval), max_steps
        short = short_step_seconds if short_step_seconds is not None else step_seconds
        self.probe: dict[str, float | None] = {FULL: step_seconds, SHORT: short}
        self.probe_eval = eval_seconds
        self.short_fraction = short_fraction
        self.short_steps: int | None = None  # fixed at the first refit
        self.skip_first = step_seconds is None  # no probe compiled the kernels: the first step does
        self.stage = "probe" if step_seconds is None else "first refit"
        self.next = self.PROBE_STEPS if step_seconds is None else self.FIRST_REFIT  # the step of the next fit
        self._reset_process()

    def _reset_process(self) -> None:
        """What this process has measured: step times (and kinds), evaluations, where it began."""
        self.times: collections.deque = collections.deque(maxlen=self.LONG_WINDOW)
        self.step_sum = 0.0  # all steps timed by this process
        self.evals: list[float] = []  # evaluations timed by this process
        self.first: tuple[int, float] | None = None  # (step, elapsed) before this process's first timed step

    # --- the schedule ------------------------------------------------------------------------------

    def fit(self, step: int, seconds_left: float, scale: float = 1.0, overhead: float = 0.0) -> Fit:
        """The schedule that fits `seconds_left` more seconds after `step`: the step times of the
        probe times `scale` plus `overhead` per step; the short phase's steps left (once fixed)
        at their own time; then as many full-length (or mixed, before the switch is fixed) steps
        as fit with the evaluations they bring."""
        f = self.short_fraction
        short_left = 0
        if self.short_steps is not None:
            short_left, f = max(0, self.short_steps - step), 0.0
        seconds = seconds_left - short_left * (scale * self.probe[SHORT] + overhead)
        step_time = scale * (f * self.probe[SHORT] + (1 - f) * self.probe[FULL]) + overhead
        eval_time = self.eval_seconds(scale)
        steps, evals = max(1, int(seconds / step_time)), 1
        for _ in range(3):  # evaluations run every eval_interval steps and once at the end
            evals = 1 + (short_left + steps) // self.eval_interval
            steps = max(1, int((seconds - evals * eval_time) / step_time))
        total = step + short_left + steps
        if self.max_steps is not None:
            total = min(total, self.max_steps)
        return Fit(max(total, step + 1), step_time, evals, scale)

    def eval_seconds(self, scale: float) -> float:
        """One evaluation: the mean of those this process timed, else the probe's estimate at the
        loop's speed."""
        if self.evals:
            return sum(self.evals) / len(self.evals)
        return scale * (self.probe_eval or 0.0)

    def initial(self) -> Fit:
        """The schedule before the first step, from the probe (a run with a probe)."""
        if self.probe[FULL] is None:
            raise ValueError("no probe: the first fit waits for the loop's first steps")
        return self.fit(0, self.seconds)

    # --- what the loop reports ------------------------------------------------------------------

    def observe_eval(self, seconds: float) -> None:
        self.evals.append(seconds)

    def observe(self, step: int, elapsed: float, seconds: float, kind: str = FULL,
                time_eval: Callable[[], float] | None = None) -> Fit | None:
        """Step `step` (the count after it) took `seconds`, and the run has spent `elapsed`
        seconds (over all its processes): -> the new schedule when a fit is due, else None.
        `kind`: FULL or SHORT (the short phase's steps); `time_eval`: runs one evaluation and
        returns its seconds, for a fit that has no evaluation time yet."""
        if self.first is None:
            self.first = (step - 1, elapsed - seconds)
            if self.skip_first:  # this step compiled the kernels: not a measure of speed
                self.first = (step, elapsed)
                return None
        self.times.append((seconds, kind))
        self.step_sum += seconds
        if self.stage == "done" or step < self.next:
            return None
        if self.stage == "probe":  # the loop's own first steps are the probe
            measured = [t for t, _ in self.times]
            self.probe[FULL] = self.probe[SHORT] = sum(measured) / len(measured)
            if self.probe_eval is None and not self.evals and time_eval is not None:
                self.observe_eval(time_eval())
            scale = 1.0
        else:
            W = self.WINDOW
            if self.stage == "second refit":  # full-length steps only, up to LONG_WINDOW
                W = max(W, min(self.LONG_WINDOW, step - (self.short_steps or 0)))
            window = list(self.times)[-W:]
            scale = sum(t for t, _ in window) / sum(self.probe[k] for _, k in window)
        first_step, first_elapsed = self.first
        outside = (elapsed - first_elapsed) - self.step_sum - sum(self.evals)  # logging, checkpoints, curves
        overhead = max(0.0, outside) / max(step - first_step, 1)
        fit = self.fit(step, (self.seconds - elapsed) * self.MARGIN, scale, overhead)
        if self.stage == "probe":
            self.stage, self.next = "first refit", self.FIRST_REFIT
        elif self.stage == "first refit":  # fix the switch to full-length sequences, plan the second
            self.short_steps = int(round(self.short_fraction * fit.total_steps))
            self.stage, self.next = "second refit", max(self.short_steps, fit.total_steps // 2) + self.WINDOW
        else:
            self.stage = "done"
        return fit

    # --- checkpoints -------------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """JSON-ready: the probe, the fits done, the switch. Not the step times: a resumed
        process times its own steps."""
        return {"seconds": self.seconds, "probe": dict(self.probe), "probe_eval": self.probe_eval,
                "short_steps": self.short_steps, "stage": self.stage, "next": self.next}

    def load_state_dict(self, state: dict) -> None:
        if state["stage"] not in self.STAGES:
            raise ValueError(f"budget state has stage {state['stage']!r}, not one of {self.STAGES}")
        self.seconds = float(state["seconds"])
        self.probe = {FULL: state["probe"][FULL], SHORT: state["probe"][SHORT]}
        self.probe_eval, self.short_steps = state["probe_eval"], state["short_steps"]
        self.stage, self.next = state["stage"], int(state["next"])
        self.skip_first = True  # the resumed process compiles its kernels in its first step
        self._reset_process()


# --- the budget in the loop --------------------------------------------------------------------

def probe_seconds(step: Callable[[], object], passes: int = 16) -> float:
    """Seconds per training step from `passes` calls of `step` (a forward+backward on a
    held-aside batch): the median of the last half, x 1.12 for the optimizer, data and
    checkpoints. The first passes compile Numba's kernels and warm the allocator (measured: the
    first 4 ran ~20% slower than the run's average), so only the last half are timed. With 10
    passes and +8%, four 9-minute runs measured 202-214 ms/step for a loop that then ran at
    209-229: hence 16 passes and +12%; the refits correct the rest."""
    times = []
    for _ in range(passes):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return float(np.median(times[passes // 2:])) * 1.12


def refit(state, settings, seconds: float, time_eval: Callable[[], float]) -> str | None:
    """Report the step that took `seconds` to the loop's budget; when it fits the schedule anew,
    apply the new length with the learning rate continuous (past the warmup, the rest of the
    decay is re-spread from this step's rate: state.lr_anchor), fix the switch to full-length
    steps (the first refit), make the evaluations frequent enough for settings.min_evals (the
    first fit) -> the line that says so, or None when no fit was due."""
    budget = state.budget
    first = budget.stage == "probe"
    fit = budget.observe(state.step, state.elapsed, seconds, state.step_kind(settings, state.step - 1), time_eval)
    if fit is None:
        return None
    before = state.total_steps
    if fit.total_steps != before:
        warmup = settings.warmup_steps
        if state.step >= warmup:
            rate = lr_at(state.step, settings.lr, warmup, before, settings.schedule, state.lr_anchor)
            state.lr_anchor = (state.step, rate)
        state.total_steps = fit.total_steps
    if state.short_steps_fixed is None and budget.short_steps is not None and settings.short_fraction:
        state.short_steps_fixed = budget.short_steps  # the first refit fixed the switch to full length
    if first and settings.min_evals:  # evaluate often enough to draw a curve
        state.eval_interval = budget.eval_interval = max(1, min(state.eval_interval,
                                                                state.total_steps // settings.min_evals))
    return fit_message(budget, fit, before, first, state.step)


def fit_message(budget: StepBudget, fit: Fit, before: int, first: bool, step: int = 0) -> str:
    """The line a fit prints."""
    if first:
        return (f"calibration: {fit.step_seconds * 1000:.0f} ms/step, eval "
                f"{budget.eval_seconds(fit.scale):.1f} s x {fit.evals}: {fit.total_steps} steps fit "
                f"{budget.seconds / 60:.1f} min")
    return (f"recalibration at step {step}: the loop runs at {fit.scale:.2f}x the calibrated time; "
            f"{fit.step_seconds * 1000:.0f} ms/step, {fit.total_steps} steps fit the budget (was {before})")
