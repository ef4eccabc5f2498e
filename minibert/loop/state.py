"""What the loop owns: the settings a run gives it (`LoopSettings`, plain data) and the state it
keeps while it trains (`LoopState`: the step, the time spent, the log window, the schedule (a
loop/budget.Schedule, fixed or a Budget that refits itself), the dropout Generator, the
checkpoint and evaluation bookkeeping, early stopping's best score and count), with the loop's
part of trainer_state.json.

    settings = LoopSettings(dir=out, vocab=tokens, resume_command="...", total_steps=1000, lr=1e-3,
                            warmup_steps=100, log_interval=20, eval_interval=250, ...)
    state = LoopState.start(settings)        # a fresh run, its schedule fixed or a budget (loop/budget.py)
    state = checkpoints.load_checkpoint(run, settings)   # or the state a checkpoint saved

A run (loop/engine.py's protocol) never reads or writes this state: it is told the step where it
needs it (next_batch(step, short), evaluate(step)).
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Callable

import numpy as np

from minibert.loop.budget import Budget, Schedule
from minibert.loop.rundir import LAYOUT
from minibert.optim import SCHEDULES


@dataclasses.dataclass(frozen=True)
class Curves:
    """curves.png: its panels (loop/curves.py), the x axes (a row of panels each), the evaluations'
    legend label, and how often it is redrawn after an evaluation (seconds)."""
    panels: tuple  # of Panel
    axes: tuple = (("step", "step"),)
    every: float = 30.0


@dataclasses.dataclass(kw_only=True)
class LoopSettings:
    """What a run tells the loop, all of it plain data: where it writes, the schedule, the
    cadences, the time budget and what the log shows."""

    # the run directory and its messages
    dir: Path
    vocab: list  # the tokens saved beside every checkpoint's model (save_pretrained's vocab)
    resume_command: str  # what the messages say to continue the run
    verbose: bool = True
    # the schedule (optim.lr_at) and the step (loop/step.training_step)
    total_steps: int  # the schedule's length; with fit_steps, a placeholder until the budget's first fit
    lr: float
    warmup_steps: int
    schedule: str = "bert"
    clip_norm: float = 1.0
    seed: int = 0  # the dropout Generator is default_rng([seed, 1]), saved with every checkpoint
    dropout: bool = False  # give the Generator to loss_grads_metrics (dropout, ELECTRA's samples)
    # the time: a limit, or (fit_steps) the budget the schedule is fitted to (loop/budget.py)
    minutes: float = 0.0  # 0: no limit
    fit_steps: bool = False
    probe: Callable[[], tuple] | None = None  # -> (full step, evaluation, short step) seconds, timed before the first step
    short_fraction: float = 0.0  # the first share of the schedule takes short steps (next_batch(step, short=True))
    phase: dict = dataclasses.field(default_factory=dict)  # what the "phase" record at the switch to full steps adds
    min_evals: int = 0  # the first fit makes eval_interval small enough for this many evaluations
    # cadences
    log_interval: int = 20
    log_grad_norm: bool = False  # records carry the window's mean gradient norm
    eval_interval: int = 0  # steps between two evaluations (0: by eval_per_epoch)
    steps_per_epoch: int = 0  # > 0: records carry "epoch", and eval_per_epoch counts in epochs
    eval_per_epoch: int = 0
    eval_at: tuple = ()  # evaluate at these steps instead (a study's few evaluations, evenly spaced)
    checkpoint_interval: int = 0  # steps between two checkpoints (0: none between the end and Ctrl-C ...)
    checkpoint_after_eval: bool = False  # ... unless after each evaluation
    # early stopping: stop after `patience` evaluations in a row whose `patience_metric` (higher is
    # better) did not beat the best so far (0: never)
    patience: int = 0
    patience_metric: str = ""
    publish_checkpoints: bool = True  # a checkpoint's model is also the run's top level (else the run keeps its own there)
    # what the progress and evaluation lines show: metric name -> its label (empty show_eval: every number)
    show_train: dict = dataclasses.field(default_factory=lambda: {"loss": "loss"})
    show_eval: dict = dataclasses.field(default_factory=dict)
    eval_label: str = "held-out"  # the evaluation line's first word and the curves' legend for evaluations
    curves: Curves | None = None

    @classmethod
    def of(cls, cfg, *, dir: Path, vocab: list, command: str, home: Path | None = None, **own) -> "LoopSettings":
        """The one place a run's settings become the loop's: the names every command shares
        (loop/settings.RunSettings: steps is the schedule's length, lr, warmup_steps, minutes,
        the three intervals, seed) read from `cfg`; `own` is what the run adds or derives (a
        fine-tuning run's steps from its epochs, a cap on the warmup, what the lines show).
        `dir` is where the run writes; `command` continues it: `python -m minibert COMMAND --resume
        HOME` (`home`: the folder the run ends in, when it is built elsewhere; default `dir`)."""
        shared = dict(total_steps=cfg.steps, lr=cfg.lr, warmup_steps=cfg.warmup_steps, minutes=cfg.minutes,
                      log_interval=cfg.log_interval, eval_interval=cfg.eval_interval,
                      checkpoint_interval=cfg.checkpoint_interval, seed=cfg.seed)
        return cls(dir=Path(dir), vocab=vocab, resume_command=f"python -m minibert {command} --resume {home or dir}",
                   **{**shared, **own})

    def __post_init__(self) -> None:
        """Every number the loop and its step will use, checked when a run makes its settings: a
        run makes them in its constructor, before it writes anything (rundir.start_run, which
        clears what an earlier run left, comes after), so a bad value is refused while the old
        run is still whole: `finetune --overwrite` with clip_norm=0 keeps the old model
        (docs/safety.md)."""
        bad = [f"{name}={value!r} must be {what}" for name, value, ok, what in (
            ("lr", self.lr, _finite(self.lr) and self.lr > 0, "a finite number > 0"),
            ("clip_norm", self.clip_norm, _finite(self.clip_norm) and self.clip_norm > 0,
             "a finite number > 0 (the largest global gradient norm)"),
            ("total_steps", self.total_steps, _whole(self.total_steps) and (self.total_steps >= 1 or self.fit_steps),
             "an integer >= 1 (unless the steps are fitted to the time budget)"),
            ("warmup_steps", self.warmup_steps, _whole(self.warmup_steps) and self.warmup_steps >= 0, "an integer >= 0"),
            ("schedule", self.schedule, self.schedule in SCHEDULES, f"one of {SCHEDULES}"),
            ("seed", self.seed, _whole(self.seed) and self.seed >= 0, "an integer >= 0"),
            ("minutes", self.minutes, _finite(self.minutes) and self.minutes >= 0 and (self.minutes > 0 or not self.fit_steps),
             "a finite number >= 0 (> 0 when the steps are fitted to it)"),
            ("log_interval", self.log_interval, _whole(self.log_interval) and self.log_interval >= 1, "an integer >= 1"),
            *((name, getattr(self, name), _whole(getattr(self, name)) and getattr(self, name) >= 0, "an integer >= 0")
              for name in ("eval_interval", "checkpoint_interval", "steps_per_epoch", "eval_per_epoch", "min_evals")),
            ("short_fraction", self.short_fraction, _finite(self.short_fraction) and 0 <= self.short_fraction < 1,
             "in [0, 1)")) if not ok]
        if bad:
            raise ValueError("; ".join(bad))


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _whole(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


@dataclasses.dataclass
class Entry:
    """One step in the log window: its metrics {name: (sum, count)}, its learning rate and
    gradient norm (before clipping)."""
    metrics: dict
    lr: float
    grad_norm: float


@dataclasses.dataclass
class LoopState:
    step: int
    elapsed: float  # seconds in the loop, over every process of the run
    rng: np.random.Generator  # dropout (and ELECTRA's samples)
    schedule: Schedule  # its length, lr anchor, short phase, evaluation interval: fixed, or a Budget refitting itself
    window: list = dataclasses.field(default_factory=list)  # Entries since the last log line
    last_checkpoint: int | None = None
    last_eval_step: int | None = None
    status: str = "new"  # how the last run() ended: done | budget | paused | interrupted
    last_plot: float = -math.inf  # perf_counter of the last curves.png
    best_score: float | None = None  # early stopping: the best patience_metric so far ...
    stale_evals: int = 0  # ... and the evaluations since it, none better

    @property
    def total_steps(self) -> int:
        """The schedule's length (the schedule's own field: a budget's refit changes it)."""
        return self.schedule.total_steps

    def out_of_patience(self, s: "LoopSettings") -> bool:
        """Early stopping: `patience` evaluations in a row did not improve on the best."""
        return s.patience > 0 and self.stale_evals >= s.patience

    def observe_score(self, s: "LoopSettings", scores: dict) -> None:
        """Early stopping's count after an evaluation: a score above the best so far resets it
        (strictly above, as the run keeps its best model), anything else adds one."""
        if not s.patience or s.patience_metric not in scores:
            return
        value = float(scores[s.patience_metric])
        if self.best_score is None or value > self.best_score:
            self.best_score, self.stale_evals = value, 0
        else:
            self.stale_evals += 1

    @classmethod
    def start(cls, s: LoopSettings, schedule: Schedule | None = None) -> "LoopState":
        """A fresh run's state, with its schedule: fixed, or (fit_steps) a Budget fitted to the
        minutes, which the run's probe (s.probe) fits before the first step (Budget.fit)."""
        schedule = schedule or new_schedule(s, s.fit_steps, s.probe)
        return cls(step=0, elapsed=0.0, rng=np.random.default_rng([s.seed, 1]), schedule=schedule)

    # --- trainer_state.json ------------------------------------------------------------------------

    def state_dict(self, s: LoopSettings, status: str, finished: bool) -> dict:
        """The loop's part of trainer_state.json (the run's own part stands beside it)."""
        state = {"layout": LAYOUT, "step": self.step, "status": status, "elapsed_seconds": self.elapsed,
                 "dropout_rng": self.rng.bit_generator.state, "last_eval_step": self.last_eval_step,
                 **self.schedule.state_dict()}
        if not finished and self.window:  # the resumed run logs it whole
            state["window"] = [{"metrics": {k: [plain(v) for v in sc] for k, sc in e.metrics.items()},
                                "lr": plain(e.lr), "grad_norm": plain(e.grad_norm)} for e in self.window]
        if s.patience:  # the count goes on where it stopped: a resumed run stops at the same step
            state["early_stopping"] = {"best": self.best_score, "stale_evals": self.stale_evals}
        return state

    @classmethod
    def load(cls, s: LoopSettings, state: dict, path: Path) -> "LoopState":
        """The state a checkpoint saved (`state`, checked by checkpoints.check_state)."""
        # a resumed run keeps its schedule: a budget's, when it saved one (no new probe), else a fixed one
        loop = cls.start(s, new_schedule(s, s.fit_steps and bool(state.get("budget"))))
        try:
            loop.rng.bit_generator.state = state["dropout_rng"]
        except (TypeError, ValueError, KeyError) as e:
            raise ValueError(f"{path}: dropout_rng is not a random generator's state "
                             f"({type(e).__name__}: {e})") from None
        loop.step, loop.elapsed = int(state["step"]), float(state["elapsed_seconds"])
        # the budget's first fit may have shortened the evaluation interval: the saved one holds
        loop.schedule.load_state_dict(state, saved_interval=bool(s.min_evals))
        loop.last_eval_step = state.get("last_eval_step")
        if s.patience:
            loop.best_score, loop.stale_evals = early_stopping_state(state.get("early_stopping"), path)
        loop.window = [Entry({k: tuple(v) for k, v in e["metrics"].items()}, e["lr"], e["grad_norm"])
                       for e in state.get("window", [])]
        loop.last_checkpoint = loop.step
        return loop


def new_schedule(s: LoopSettings, budgeted: bool, probe: Callable[[], tuple] | None = None) -> Schedule:
    """The schedule of a run's settings: a Budget fitted to s.minutes (with the run's probe), or fixed."""
    if budgeted:
        return Budget(s.minutes, s.total_steps, s.eval_interval, s.short_fraction, lr=s.lr,
                      warmup_steps=s.warmup_steps, schedule=s.schedule, min_evals=s.min_evals, probe=probe)
    return Schedule(s.total_steps, s.eval_interval, s.short_fraction)


def early_stopping_state(saved, path: Path) -> tuple[float | None, int]:
    """trainer_state.json's "early_stopping" -> (best score or None, evaluations since it). A
    checkpoint saved without it (patience was off) starts the count afresh."""
    if saved is None:
        return None, 0
    best, stale = (saved.get("best"), saved.get("stale_evals")) if isinstance(saved, dict) else (None, None)
    if not (best is None or isinstance(best, (int, float)) and not isinstance(best, bool) and math.isfinite(best)) \
            or not isinstance(stale, int) or isinstance(stale, bool) or stale < 0:
        raise ValueError(f"{path}: early_stopping is {saved!r:.200}, expected {{\"best\": a number or null, "
                         f"\"stale_evals\": a count}}")
    return (None if best is None else float(best)), stale


def plain(x):
    """A number as JSON: NumPy numbers as Python's."""
    return x.item() if isinstance(x, np.generic) else x
