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
durations); `probe_seconds` times a run's step before the loop; `Schedule` is what the loop asks
each step (the schedule's length, the lr anchor, the switch to full-length steps, the
evaluation interval), fixed, or a `Budget` that applies each fit to its own fields and says what
changed (`fit_message`). The loop's state holds one of them and never writes their fields.
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


# --- the schedule the loop asks --------------------------------------------------------------

class Schedule:
    """What the loop asks of its schedule: its length (`total_steps`), where a refit re-spread
    the lr decay (`lr_anchor`, optim.lr_at's anchor), the short phase's steps and the evaluation
    interval. This one is fixed (a run with a step count); a `Budget` refits itself from the
    step times the loop reports. Either keeps its own fields: nothing outside writes them."""

    def __init__(self, total_steps: int, eval_interval: int, short_fraction: float = 0.0):
        self.total_steps, self.eval_interval, self.short_fraction = total_steps, eval_interval, short_fraction
        self.lr_anchor: tuple[int, float] | None = None
        self.short_fixed: int | None = None  # the switch to full-length steps, once fixed (a refit, a checkpoint)

    def short_steps(self) -> int:
        """Steps of the short phase: the first short_fraction of the schedule (fixed once a refit
        fixed it, so a later refit cannot move the switch)."""
        if not self.short_fraction:
            return 0
        if self.short_fixed is not None:
            return self.short_fixed
        return int(round(self.short_fraction * self.total_steps))

    def kind(self, step: int) -> str:
        return SHORT if step < self.short_steps() else FULL

    def observe(self, step: int, elapsed: float, seconds: float, time_eval: Callable[[], float]) -> str | None:
        """Step `step` (the count after it) took `seconds`: a fixed schedule does not change -> None."""
        return None

    def observe_eval(self, seconds: float) -> None:
        pass

    def state_dict(self) -> dict:
        """The schedule's part of trainer_state.json."""
        state = {"total_steps": self.total_steps, "eval_interval": self.eval_interval}
        if self.short_fraction:
            state["short_steps"] = self.short_steps()
        if self.lr_anchor is not None:
            state["lr_anchor"] = list(self.lr_anchor)
        return state

    def load_state_dict(self, state: dict, saved_interval: bool) -> None:
        """A checkpoint's schedule (checked by loop/checkpoints.check_state). `saved_interval`:
        the saved evaluation interval holds (a budget's first fit may have shortened it)."""
        self.total_steps = int(state["total_steps"])
        if saved_interval:
            self.eval_interval = int(state["eval_interval"])
        if self.short_fraction and state.get("short_steps") is not None:
            self.short_fixed = int(state["short_steps"])
        anchor = state.get("lr_anchor")
        self.lr_anchor = (int(anchor[0]), float(anchor[1])) if anchor else None


class Budget(Schedule):
    """A schedule fitted to `minutes` (StepBudget does the arithmetic): a fit applied keeps the
    learning rate continuous (past the warmup, the rest of the decay is re-spread from the rate of
    the step of the refit: lr_anchor), the first refit fixes the switch to full-length steps, and
    the first fit makes the evaluations frequent enough for `min_evals`. `probe()` (the run's, or
    None) times a step and an evaluation before the loop -> (full step, evaluation, short step)
    seconds; `fit()` asks it once, before the first step, so the schedule starts fitted."""

    def __init__(self, minutes: float, placeholder: int, eval_interval: int, short_fraction: float, *,
                 lr: float, warmup_steps: int, schedule: str, min_evals: int = 0,
                 probe: Callable[[], tuple] | None = None):
        super().__init__(placeholder, eval_interval, short_fraction)
        self.lr, self.warmup_steps, self.schedule, self.min_evals, self.probe = lr, warmup_steps, schedule, min_evals, probe
        self.fitter = StepBudget(minutes * 60.0, eval_interval, short_fraction=short_fraction)

    def fit(self) -> str | None:
        """A fresh run's first fit, from the run's probe (None without one: the loop's first steps
        are the probe) -> the line that says so."""
        if self.probe is None:
            return None
        full, evaluation, short = self.probe()
        self.fitter = StepBudget(self.fitter.seconds, self.eval_interval, full, evaluation, self.short_fraction, short)
        fit = self.fitter.initial()
        self.total_steps = fit.total_steps
        return fit_message(self.fitter, fit, self.total_steps, first=True)

    def observe(self, step: int, elapsed: float, seconds: float, time_eval: Callable[[], float]) -> str | None:
        """Report the step that took `seconds`; when it fits the schedule anew, apply the new
        length -> the line that says what changed, or None when no fit was due."""
        first = self.fitter.stage == "probe"
        fit = self.fitter.observe(step, elapsed, seconds, self.kind(step - 1), time_eval)
        if fit is None:
            return None
        before = self.total_steps
        if fit.total_steps != before:
            if step >= self.warmup_steps:
                self.lr_anchor = (step, lr_at(step, self.lr, self.warmup_steps, before, self.schedule, self.lr_anchor))
            self.total_steps = fit.total_steps
        if self.short_fixed is None and self.fitter.short_steps is not None and self.short_fraction:
            self.short_fixed = self.fitter.short_steps  # the first refit fixed the switch to full length
        if first and self.min_evals:  # evaluate often enough to draw a curve
            self.eval_interval = self.fitter.eval_interval = max(1, min(self.eval_interval,
                                                                        self.total_steps // self.min_evals))
        return fit_message(self.fitter, fit, before, first, step)

    def observe_eval(self, seconds: float) -> None:
        self.fitter.observe_eval(seconds)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "budget": self.fitter.state_dict()}

    def load_state_dict(self, state: dict, saved_interval: bool) -> None:
        super().load_state_dict(state, saved_interval)
        self.fitter.load_state_dict(state["budget"])
        self.fitter.eval_interval = self.eval_interval


def fit_message(budget: StepBudget, fit: Fit, before: int, first: bool, step: int = 0) -> str:
    """The line a fit prints."""
    if first:
        return (f"calibration: {fit.step_seconds * 1000:.0f} ms/step, eval "
                f"{budget.eval_seconds(fit.scale):.1f} s x {fit.evals}: {fit.total_steps} steps fit "
                f"{budget.seconds / 60:.1f} min")
    return (f"recalibration at step {step}: the loop runs at {fit.scale:.2f}x the calibrated time; "
            f"{fit.step_seconds * 1000:.0f} ms/step, {fit.total_steps} steps fit the budget (was {before})")
