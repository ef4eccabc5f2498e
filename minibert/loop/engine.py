"""The training loop, one function: `run(task, max_steps)`, what every trainer runs.

    status = run(task, max_steps)   # -> "done" | "budget" | "paused" | "interrupted"

`run` reads top to bottom: stop on Ctrl-C or the time budget; one gradient step
(`train_step`: lr from the schedule, clipping, AdamW, a NaN/inf loss stops the run); report it
to the budget (`fit_budget`); a progress line and a metrics.jsonl record per log interval
(`log_window`); an evaluation every so often; a checkpoint every so often (loop/checkpoints.py:
model, optimizer moments, the task's state, the dropout RNG, written as one unit); at the end
the last evaluation, the last save and curves.png.

The task is a plain object (no base class) that the loop reads and calls:

    state       dir, model (params, loss_grads_metrics, save_pretrained), optimizer, tokenizer,
                rng (dropout), step, total_steps, elapsed, minutes (0: no budget), log_interval,
                verbose, budget (a loop/budget.StepBudget, or None), lr_anchor, window (the log
                entries since the last log line), last_checkpoint, last_eval_step
    batch       next_batch() -> the step's batch, or a list of micro-batches
                step_options() -> train/step.training_step's lr, warmup_steps, schedule,
                clip_norm, objective, rng (the dropout Generator, or None: no dropout)
    log         window_entry(result, batch) -> what one step adds to the window; optional, with
                the defaults of a run with one loss and one accuracy (entries (loss, correct,
                counted, tokens, lr)): window_record(window, seconds) -> its metrics.jsonl record
                (loss_acc_record), progress_fields(record) -> (text after "step s/T", fields)
                (loss_acc_fields), decode_window_entry(entry) (a paused run saves its window, so
                the resumed run logs the same records; default: the tuple)
    evaluate    is_eval_step(step); evaluate() (logs, shows, sets last_eval_step)
    checkpoint  is_checkpoint_step(step, stop_at); state_dict(status, ckpt) -> its part of
                trainer_state.json; load_state_dict(state, ckpt) (the model and its batch source)
    messages    resume_command(), diverged_hint() (what the NaN/inf message adds)
    curves      curve_panels(records) -> the Panels of curves.png (None: none); curve_axes,
                eval_label, curves_every (seconds between redraws)
    settings    log_partial_window (log the steps since the last line when a run ends between
                two), publish_checkpoints (a checkpoint's model is also the run's top level)
    budget      with a budget only: time_eval() -> seconds or None; optional: step_kind(step)
                (FULL, or SHORT in a short phase; default FULL), after_fit(fit, first), called
                after every fit

The tasks: train/trainer.py's Trainer (BERT, ALBERT, and ELECTRA with train/electra.py's
family), finetune/run.py's FinetuneRun, train/t5.py's T5Run, train/xlnet.py's XLNetRun.
"""
from __future__ import annotations

import math
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

from minibert.io.progress import fmt_seconds
from minibert.loop import rundir
from minibert.loop.budget import FULL, Fit
from minibert.loop.checkpoints import save_checkpoint
from minibert.loop.curves import draw_curves, read_metrics
from minibert.loop.step import TrainingAborted, TrainingDiverged, install_sigint, restore_sigint, training_step
from minibert.optim import lr_at


class StopFlag:
    """Set by the first Ctrl-C (loop/step.install_sigint): finish the step, save, stop."""
    requested = False


def run(task, max_steps: int | None = None) -> str:
    """Train `task` until total_steps, the time budget, `max_steps` more steps or Ctrl-C.

    -> "done" | "budget" (time ran out; evaluated and saved) | "paused" (max_steps; saved) |
    "interrupted" (Ctrl-C; saved). Raises TrainingDiverged on NaN/inf, and TrainingAborted on
    a second Ctrl-C (at any moment, a save included: the newest complete checkpoint stays as
    it was). Ctrl-C is caught until the final save is written."""
    stop = StopFlag()
    previous = install_sigint(stop, "requested")
    try:
        budget = task.minutes * 60.0 if task.minutes > 0 else math.inf
        pause_at = math.inf if max_steps is None else task.step + max_steps
        stop_at = min(task.total_steps, pause_at)
        status, window, last_plot = "done", task.window, -math.inf
        t_run = t_window = time.perf_counter()
        elapsed0 = task.elapsed
        while task.step < stop_at:
            if stop.requested:
                status = "interrupted"
                break
            if elapsed0 + (time.perf_counter() - t_run) >= budget:
                say(task, f"time budget of {task.minutes:g} min reached at step {task.step}")
                status = "budget"
                break
            t_step = time.perf_counter()
            window.append(train_step(task))
            task.elapsed = elapsed0 + time.perf_counter() - t_run
            if task.budget is not None:  # the budget may refit the schedule
                fit_budget(task, time.perf_counter() - t_step)
            stop_at = min(task.total_steps, pause_at)
            if task.step % task.log_interval == 0 or task.step == (stop_at if task.log_partial_window
                                                                    else task.total_steps):
                t_window = log_window(task, window, t_window)
            evaluated = task.is_eval_step(task.step) and task.step < task.total_steps
            if evaluated:
                t_eval = time.perf_counter()
                task.evaluate()
                if task.budget is not None:
                    task.budget.observe_eval(time.perf_counter() - t_eval)
                t_window = time.perf_counter()  # tokens/s counts training time only
            if task.is_checkpoint_step(task.step, stop_at):
                save_checkpoint(task)
                t_window = time.perf_counter()
            if evaluated and time.perf_counter() - last_plot > task.curves_every:
                last_plot = time.perf_counter()
                write_curves(task)  # plotting costs a second or two: not after every evaluation
                t_window = time.perf_counter()
        else:
            status = "done" if task.step >= task.total_steps else "paused"
        if status in rundir.FINISHED:
            if window and task.log_partial_window:
                log_window(task, window, t_window)  # the last steps of the run
            if task.last_eval_step != task.step:
                task.evaluate()
        # a paused or interrupted run keeps its window: the checkpoint saves it, and the resumed
        # run logs it whole, so metrics.jsonl is the same as a run's that never stopped
        save_checkpoint(task, status)
        write_curves(task)
    except KeyboardInterrupt:
        where = (f"the last complete checkpoint is step {task.last_checkpoint} in {task.dir}; continue with "
                 f"`{task.resume_command()}`" if task.last_checkpoint is not None else "no checkpoint was written yet")
        raise TrainingAborted(f"aborted at step {task.step} by a second Ctrl-C without saving; {where}") from None
    finally:
        restore_sigint(previous)
    if status == "interrupted":
        say(task, f"interrupted at step {task.step}: saved {task.dir}; continue with `{task.resume_command()}`")
    return status


def train_step(task):
    """One optimizer step on the task's next batch -> the task's window entry of it."""
    batch = task.next_batch()
    options = task.step_options()
    try:
        r = training_step(task.model, task.optimizer, batch, task.step, total_steps=task.total_steps,
                          lr_anchor=task.lr_anchor, **options)
    except TrainingDiverged as e:
        raise TrainingDiverged(f"{e}{task.diverged_hint()}") from None
    task.step += 1
    return task.window_entry(r, batch)


# --- logging -----------------------------------------------------------------------------------

def say(task, *args) -> None:
    if task.verbose:
        print(*args, flush=True)


def log(task, record: dict) -> None:
    rundir.append_jsonl(task.dir / rundir.METRICS_FILE, record)


def log_window(task, window: list, t_window: float) -> float:
    """The window's metrics.jsonl record and progress line; empties the window -> the time now."""
    now = time.perf_counter()
    record = task.window_record if hasattr(task, "window_record") else partial(loss_acc_record, task)
    rec = record(window, now - t_window)
    log(task, rec)
    eta = (task.total_steps - task.step) * task.elapsed / max(task.step, 1)
    if task.minutes > 0:
        eta = min(eta, max(0.0, task.minutes * 60 - task.elapsed))
    where, fields = task.progress_fields(rec) if hasattr(task, "progress_fields") else loss_acc_fields(rec)
    say(task, f"step {task.step}/{task.total_steps}{where} | " + " | ".join(
        [*fields, f"{rec['tokens_per_s']:,.0f} tok/s", f"lr {rec['lr']:.2e}", f"ETA {fmt_seconds(eta)}"]))
    window.clear()
    return now


def loss_acc_record(task, window: list, seconds: float) -> dict:
    """The log record of a window whose entries are (loss, correct, counted, tokens, lr): the
    default, for the trainers with one loss and one accuracy (T5, XLNet)."""
    return {"type": "train", "step": task.step, "time": round(task.elapsed, 3),
            "loss": float(np.mean([w[0] for w in window])),
            "acc": sum(w[1] for w in window) / max(sum(w[2] for w in window), 1), "lr": window[-1][4],
            "tokens_per_s": sum(w[3] for w in window) / max(seconds, 1e-9)}


def loss_acc_fields(rec: dict) -> tuple[str, list[str]]:
    """The progress line's fields of loss_acc_record's record."""
    return "", [f"loss {rec['loss']:.3f}", f"acc {rec['acc']:.3f}"]


def last_good_checkpoint(task) -> str:
    """Where a run that stops now can be continued from, for the messages."""
    return (f"{task.dir} (step {task.last_checkpoint})" if task.last_checkpoint is not None
            else "none (no checkpoint was written yet)")


def write_curves(task) -> Path | None:
    """Redraw curves.png from metrics.jsonl. A plot that cannot be written (a full disk) is a
    warning, not the end of the run: the checkpoints are what must not be lost."""
    path = task.dir / rundir.METRICS_FILE
    if not path.exists():
        return None
    records = read_metrics(path)
    panels = task.curve_panels(records)
    if panels is None:
        return None
    out = task.dir / rundir.CURVES_FILE
    try:
        return draw_curves(records, out, panels, task.curve_axes, task.eval_label)
    except OSError as e:
        print(f"warning: could not draw {out}: {e}", file=sys.stderr)
        return None


# --- the time budget ---------------------------------------------------------------------------

def fit_budget(task, seconds: float) -> None:
    """Report the step to the budget; when it fits the schedule anew, apply the new length with
    the learning rate continuous: past the warmup, the rest of the decay is re-spread from
    this step's rate (lr_anchor)."""
    budget = task.budget
    first = budget.stage == "probe"
    kind = task.step_kind(task.step - 1) if hasattr(task, "step_kind") else FULL
    fit = budget.observe(task.step, task.elapsed, seconds, kind, task.time_eval)
    if fit is None:
        return
    before = task.total_steps
    if fit.total_steps != before:
        options = task.step_options()
        warmup = options["warmup_steps"]
        if task.step >= warmup:
            rate = lr_at(task.step, options["lr"], warmup, before, options.get("schedule", "bert"), task.lr_anchor)
            task.lr_anchor = (task.step, rate)
        task.total_steps = fit.total_steps
    if hasattr(task, "after_fit"):
        task.after_fit(fit, first)
    say(task, fit_message(task, fit, before, first))


def fit_message(task, fit: Fit, before: int, first: bool) -> str:
    """The line a fit prints."""
    if first:
        return (f"calibration: {fit.step_seconds * 1000:.0f} ms/step, eval "
                f"{task.budget.eval_seconds(fit.scale):.1f} s x {fit.evals}: {fit.total_steps} steps fit "
                f"{task.budget.seconds / 60:.1f} min")
    return (f"recalibration at step {task.step}: the loop runs at {fit.scale:.2f}x the calibrated time; "
            f"{fit.step_seconds * 1000:.0f} ms/step, {fit.total_steps} steps fit the budget (was {before})")
