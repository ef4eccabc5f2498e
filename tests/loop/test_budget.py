"""The time budget (minibert/loop/budget.py), driven with made-up step and evaluation times: a
fake clock, so every number below is computed by hand from the policy in the module docstring."""
from __future__ import annotations

import pytest

from minibert.loop.budget import FULL, SHORT, StepBudget
from minibert.optim import lr_at


def run_steps(budget, state, last, seconds_each, kind=lambda step: FULL):
    """Steps up to `last`, each `seconds_each` long, reported as the engine does; -> the fits."""
    fits = []
    while state["step"] < last:
        state["step"] += 1
        state["elapsed"] += seconds_each
        fit = budget.observe(state["step"], state["elapsed"], seconds_each, kind(state["step"] - 1))
        if fit is not None:
            state["total"] = fit.total_steps
            fits.append((state["step"], fit))
    return fits


def test_the_probe_sizes_the_schedule_and_the_first_refit_uses_the_loops_own_speed():
    budget = StepBudget(60.01, eval_interval=1000, step_seconds=0.02, eval_seconds=0.5, short_fraction=0.5,
                        short_step_seconds=0.02)
    budget.MARGIN = 1.0  # (the default keeps 2% of the time left in reserve)
    # the probe: 60.01 s at 0.02 s per step with 4 evaluations of 0.5 s (every 1000 steps and the end)
    assert budget.initial().total_steps == int((60.01 - 3 * 0.5) / 0.02) == 2925
    state = {"step": 0, "elapsed": 0.0, "total": 2900}
    short = lambda step: SHORT if step < 1450 else FULL  # noqa: E731 (the trainer's switch: 0.5 of 2900)
    (at, fit), = run_steps(budget, state, 100, 0.04, short)  # the loop runs twice as slow as the probe said
    # left: 60.01 - 4 s; 2 evaluations (step 1000, end) at 2 x 0.5 s; 0.04 s per step
    assert at == 100 and fit.total_steps == 100 + int((56.01 - 2 * 1.0) / 0.04) == 1450 and fit.scale == 2.0
    assert budget.short_steps == 725  # 0.5 of the new schedule, now fixed
    assert budget.next == 725 + 80  # 80 full-length steps after the switch
    state["elapsed"] += 2.0  # 2 s of the loop outside the steps (say, drawing curves)
    (at, fit), = run_steps(budget, state, 805, 0.01, lambda step: SHORT if step < 725 else FULL)
    # left: 60.01 - 4 - 2 - 7.05 s; 4 evaluations (steps 1000-3000, end) at 0.5 x 0.5 s;
    # 0.01 s per step + 2 s / 805 steps
    assert abs(fit.total_steps - (805 + (46.96 - 4 * 0.25) / (0.01 + 2.0 / 805))) <= 1
    assert budget.stage == "done" and run_steps(budget, state, 1200, 0.01) == []  # twice per run


def test_the_second_refit_times_400_steps_so_a_passing_slowdown_does_not_cut_the_schedule():
    budget = StepBudget(60.0, eval_interval=10000, step_seconds=0.01, eval_seconds=0.0)
    budget.MARGIN = 1.0
    assert budget.initial().total_steps == 6000
    state = {"step": 0, "elapsed": 0.0, "total": 6000}
    (_, fit), = run_steps(budget, state, 100, 0.01)  # as the probe said: 60 s fit 6000 steps
    assert fit.total_steps == 6000 and budget.next == 3080
    run_steps(budget, state, 3000, 0.01)
    (_, fit), = run_steps(budget, state, 3080, 0.03)  # a passing slowdown: the last 80 steps three times as slow
    # timed over the last 400 steps (320 x 0.01 + 80 x 0.03 = 5.6 s): 0.014 s per step for the
    # 60 - 32.4 s left, not 0.03 as the last 80 steps alone would say (920 steps)
    assert abs(fit.total_steps - (3080 + 27.6 / 0.014)) <= 1


def test_without_a_probe_the_first_fit_times_the_loops_first_steps_but_not_the_first():
    """T5's and XLNet's runs: the first step compiles the kernels; steps 2-10 are the probe, and
    the evaluation is timed once when none has been measured."""
    budget = StepBudget(100.0, eval_interval=50, max_steps=10_000)
    budget.MARGIN = 1.0
    timed = []
    state = {"step": 0, "elapsed": 0.0, "total": 10_000}
    state["step"], state["elapsed"] = 1, 5.0  # the compiling step: 5 s
    assert budget.observe(1, 5.0, 5.0, time_eval=lambda: timed.append(1) or 1.0) is None
    fits = []
    while state["step"] < 10:
        state["step"] += 1
        state["elapsed"] += 0.1
        fit = budget.observe(state["step"], state["elapsed"], 0.1, time_eval=lambda: timed.append(1) or 1.0)
        fits += [fit] if fit else []
    (fit,) = fits
    assert timed == [1]  # one evaluation, to time it
    # 100 - 5.9 s left at 0.1 s per step, an evaluation of 1 s every 50 steps and at the end
    steps = int(94.1 / 0.1)
    for _ in range(3):
        steps = int((94.1 - (1 + steps // 50) * 1.0) / 0.1)
    assert abs(fit.total_steps - (10 + steps)) <= 1 and budget.next == 100  # (the mean of 0.1 s is 0.0999...)


def test_max_steps_caps_the_fit_and_a_fit_never_ends_the_run_before_the_next_step():
    budget = StepBudget(1000.0, eval_interval=10, step_seconds=0.01, max_steps=20)
    assert budget.initial().total_steps == 20
    tight = StepBudget(0.5, eval_interval=10, step_seconds=1.0)
    assert tight.fit(step=7, seconds_left=-3.0).total_steps == 8


def test_a_resumed_budget_does_the_fits_it_has_not_done_on_its_own_steps():
    budget = StepBudget(60.0, eval_interval=10000, step_seconds=0.01, eval_seconds=0.0)
    budget.MARGIN = 1.0
    state = {"step": 0, "elapsed": 0.0, "total": 6000}
    run_steps(budget, state, 50, 0.01)
    saved = budget.state_dict()
    resumed = StepBudget(60.0, eval_interval=10000)
    resumed.MARGIN = 1.0
    resumed.load_state_dict(saved)
    assert (resumed.stage, resumed.next, resumed.probe) == ("first refit", 100, budget.probe)
    # the resumed process: its first step compiles (not timed), then 0.02 s per step
    state["step"], state["elapsed"] = 51, 0.5 + 3.0
    assert resumed.observe(51, 3.5, 3.0) is None
    (_, fit), = run_steps(resumed, state, 100, 0.02)
    assert fit.scale == pytest.approx(2.0)  # timed on the resumed process's own 49 steps
    with pytest.raises(ValueError, match="stage"):
        resumed.load_state_dict({**saved, "stage": "halfway"})


@pytest.mark.parametrize("schedule", ["bert", "hf"])
def test_a_refit_bends_the_lr_decay_instead_of_making_it_jump(schedule):
    """The engine's rule (loop/budget.Budget.observe): past the warmup, a refit at step s keeps the
    rate of step s and re-spreads the rest of the decay to the new end."""
    peak, warmup, before, after, s = 1e-3, 200, 2868, 2450, 1448
    rate = lr_at(s, peak, warmup, before, schedule)
    anchor = (s, rate)
    assert lr_at(s, peak, warmup, after, schedule, anchor) == pytest.approx(rate)
    assert abs(lr_at(s, peak, warmup, after, schedule) - rate) > 0.05 * rate  # without the anchor: a jump
    steps = [lr_at(t, peak, warmup, after, schedule, anchor) for t in range(s, after + 1)]
    assert steps[-1] == 0.0 and all(a >= b for a, b in zip(steps, steps[1:]))
    assert max(a - b for a, b in zip(steps, steps[1:])) <= rate / (after - s) * 1.0001  # a straight line
