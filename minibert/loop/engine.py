"""The training loop, one function: `run(run, state, max_steps)`, what every trainer runs.

    state = LoopState.start(run.settings)                  # or checkpoints.load_checkpoint(run)
    status = engine.run(run, state, max_steps)   # -> "done" | "budget" | "paused" | "interrupted"

`run` reads top to bottom: stop on Ctrl-C or the time limit; one gradient step (`train_step`:
the run's batch, its loss, gradients and metrics, then loop/step.training_step: lr from the
schedule, clipping, AdamW, a NaN/inf loss stops the run); report it to the budget
(state.schedule.observe: a Budget refits itself); a progress line and a metrics.jsonl record per log interval (`log_window`); an
evaluation every so often; a checkpoint every so often (loop/checkpoints.py: the model, the
optimizer's moments, the run's and the loop's state, written as one unit); at the end the last
evaluation, the last save and curves.png.

The loop owns its state (loop/state.LoopState: the step, the time spent, the log window, the
schedule's length and lr anchor, the budget, the dropout Generator, when it last evaluated and
saved) and reports everything itself: the progress and evaluation lines, metrics.jsonl,
curves.png, the messages. What it trains, "the run", is a plain object (no base class) with
eight members, none optional:

    model                  .params (what the step's gradients update), .save_pretrained(dir, vocab)
    optimizer              AdamW: step(params, grads, lr), state_dict(), load_state_dict(state)
    settings               a loop/state.LoopSettings: plain data (directory, schedule, cadences,
                           budget, what the lines and curves show)
    next_batch(step, short) -> the batch of step `step` (short: the short phase's, when
                           settings.short_fraction gives the schedule one)
    loss_grads_metrics(batch, rng) -> (loss, grads, {name: (sum, count)}): the batch's loss, the
                           gradients (keyed as model.params, or a subset of them), and its metrics,
                           each a sum and what it is a mean over (a loss: (loss, 1); an accuracy:
                           (hits, counted)); "tokens": (real tokens, 1) gives the line's tokens/s.
                           `rng` is the dropout Generator, None when settings.dropout is False
    evaluate(step) -> {name: number}: the evaluation record's fields ({}: nothing evaluated)
    state_dict() -> the run's own part of trainer_state.json (its batch source, its results)
    load_state_dict(state, ckpt) the model's parameters from checkpoint `ckpt` and that part

A log record is {"type": "train", "step", "epoch" (with settings.steps_per_epoch), "time", each
metric's sum over the window divided by its count, "lr", "grad_norm" (settings.log_grad_norm),
"tokens_per_s"}; an evaluation record {"type": "eval", "step", "epoch", "time", **evaluate(step)}.

The runs: train/trainer.py's Trainer (BERT, ALBERT, and ELECTRA with train/electra.py's family),
finetune/run.py's FinetuneRun, train/t5.py's T5Run, train/xlnet.py's XLNetRun.
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

from minibert.io.progress import fmt_seconds
from minibert.loop import rundir
from minibert.loop.checkpoints import save_checkpoint
from minibert.loop.curves import draw_curves, read_metrics
from minibert.loop.state import Entry, LoopSettings, LoopState
from minibert.loop.step import TrainingAborted, TrainingDiverged, install_sigint, restore_sigint, training_step


class StopFlag:
    """Set by the first Ctrl-C (loop/step.install_sigint): finish the step, save, stop."""
    requested = False


def run(run, state: LoopState, max_steps: int | None = None) -> str:
    """Train `run` until the schedule's end, the time limit, `max_steps` more steps or Ctrl-C.

    -> "done" | "budget" (time ran out; evaluated and saved) | "paused" (max_steps; saved) |
    "interrupted" (Ctrl-C; saved); also kept as state.status. With settings.patience a run whose
    evaluations stopped improving ends early as "done" (a metrics.jsonl "early_stop" record). Raises TrainingDiverged on
    NaN/inf, and TrainingAborted on a second Ctrl-C (at any moment, a save included: the newest
    complete checkpoint stays as it was). Ctrl-C is caught until the final save is written."""
    s: LoopSettings = run.settings
    stop = StopFlag()
    previous = install_sigint(stop, "requested")
    try:
        limit = s.minutes * 60.0 if s.minutes > 0 else math.inf
        pause_at = math.inf if max_steps is None else state.step + max_steps
        stop_at = min(state.total_steps, pause_at)
        status = "done"
        t_run = t_window = time.perf_counter()
        elapsed0 = state.elapsed
        while state.step < stop_at:
            if stop.requested:
                status = "interrupted"
                break
            if state.out_of_patience(s):  # a run that stopped early, resumed: nothing left to do
                break
            if elapsed0 + (time.perf_counter() - t_run) >= limit:
                say(s, f"time budget of {s.minutes:g} min reached at step {state.step}")
                status = "budget"
                break
            t_step = time.perf_counter()
            state.window.append(train_step(run, state))
            state.elapsed = elapsed0 + time.perf_counter() - t_run
            line = state.schedule.observe(state.step, state.elapsed, time.perf_counter() - t_step,
                                          lambda: time_evaluation(run, state))  # a budget may refit itself
            if line:
                say(s, line)
            stop_at = min(state.total_steps, pause_at)
            if state.step % s.log_interval == 0 or state.step == state.total_steps:  # a pause keeps its window
                t_window = log_window(s, state, t_window)
            evaluated = is_eval_step(s, state.step, state.total_steps, state.schedule.eval_interval) \
                and state.step < state.total_steps
            if evaluated:
                t_eval = time.perf_counter()
                evaluate(run, state)
                state.schedule.observe_eval(time.perf_counter() - t_eval)
                t_window = time.perf_counter()  # tokens/s counts training time only
                if state.out_of_patience(s):
                    stop_early(s, state)
                    break
            if is_checkpoint_step(s, state, stop_at):
                save_checkpoint(run, state)
                t_window = time.perf_counter()
            if evaluated and s.curves is not None and time.perf_counter() - state.last_plot > s.curves.every:
                state.last_plot = time.perf_counter()
                write_curves(s)  # plotting costs a second or two: not after every evaluation
                t_window = time.perf_counter()
        else:
            status = "done" if state.step >= state.total_steps else "paused"
        if status in rundir.FINISHED:
            if state.window:
                log_window(s, state, t_window)  # the last steps of a run that ended between two lines
            if state.last_eval_step != state.step:
                evaluate(run, state)
        # a paused or interrupted run keeps its window: the checkpoint saves it, and the resumed
        # run logs it whole, so metrics.jsonl is the same as a run's that never stopped
        save_checkpoint(run, state, status)
        write_curves(s)
    except KeyboardInterrupt:
        last = (f"the last complete checkpoint is step {state.last_checkpoint} in {s.dir}; continue with "
                f"`{s.resume_command}`" if state.last_checkpoint is not None else "no checkpoint was written yet")
        raise TrainingAborted(f"aborted at step {state.step} by a second Ctrl-C without saving; {last}") from None
    finally:
        restore_sigint(previous)
    state.status = status
    if status == "interrupted":
        say(s, f"interrupted at step {state.step}: saved {s.dir}; continue with `{s.resume_command}`")
    return status


def train_step(run, state: LoopState) -> Entry:
    """One optimizer step on the run's next batch -> its log-window entry."""
    s = run.settings
    short = state.schedule.short_steps()
    if short and state.step == short:  # the switch from the short phase to full-length steps
        log(s, {"type": "phase", "step": state.step, "time": round(state.elapsed, 3), **s.phase})
        say(s, f"step {state.step}: short phase done, " + ", ".join(f"{k} {v}" for k, v in s.phase.items()))
    batch = run.next_batch(state.step, state.step < short)
    try:
        r = training_step(run.model, run.optimizer, batch, state.step, lr=s.lr, warmup_steps=s.warmup_steps,
                          total_steps=state.total_steps, schedule=s.schedule, clip_norm=s.clip_norm,
                          rng=state.rng if s.dropout else None, lr_anchor=state.schedule.lr_anchor,
                          loss_fn=run.loss_grads_metrics)
    except TrainingDiverged as e:
        raise TrainingDiverged(f"{e}; the run stopped without saving. Last good checkpoint: "
                               f"{last_good_checkpoint(s, state)}. Try a lower lr (now {s.lr:g}) or more warmup "
                               f"(now {s.warmup_steps} steps)") from None
    state.step += 1
    return Entry(r.metrics, r.lr, r.grad_norm)


# --- cadences ----------------------------------------------------------------------------------

def is_eval_step(s: LoopSettings, step: int, total_steps: int, eval_interval: int | None = None) -> bool:
    """At the steps of settings.eval_at when it names some; else every eval_interval steps (the
    loop's, which a budget's first fit may have shortened), or after the step that completes each
    1/eval_per_epoch of an epoch."""
    interval = s.eval_interval if eval_interval is None else eval_interval
    if s.eval_at:
        return step in s.eval_at
    if not interval:
        k, spe = s.eval_per_epoch, s.steps_per_epoch
        return step == total_steps or (step * k) // spe > ((step - 1) * k) // spe
    return step % interval == 0


def is_checkpoint_step(s: LoopSettings, state: LoopState, stop_at: float) -> bool:
    """Every checkpoint_interval steps (or after each evaluation), not at the step the run stops
    at: the final save writes that one."""
    if s.checkpoint_after_eval:
        due = is_eval_step(s, state.step, state.total_steps, state.schedule.eval_interval)
    else:
        due = bool(s.checkpoint_interval) and state.step % s.checkpoint_interval == 0
    return due and state.step < stop_at


# --- what the loop reports ---------------------------------------------------------------------

def say(s: LoopSettings, *args) -> None:
    if s.verbose:
        print(*args, flush=True)


def log(s: LoopSettings, record: dict) -> None:
    rundir.append_jsonl(s.dir / rundir.METRICS_FILE, record)


def record_start(s: LoopSettings, state: LoopState) -> dict:
    """The fields every record starts with: the step, the epoch (a run counted in epochs), the time."""
    epoch = {"epoch": round(state.step / s.steps_per_epoch, 3)} if s.steps_per_epoch else {}
    return {"step": state.step, **epoch, "time": round(state.elapsed, 3)}


def mean(sums: list, counts: list) -> float:
    """A window's value of one metric: the sum of its sums over the sum of its counts. A float
    sum is a NumPy reduction of the entries as np.mean makes it (so a mean of per-step losses
    has np.mean's bits); an integer one (hits) is exact."""
    total = np.add.reduce(np.asarray(sums))
    n = max(int(sum(counts)), 1)
    if total.dtype.kind == "f":
        return float(total.dtype.type(total / np.intp(n)))
    return int(total) / n


def window_record(s: LoopSettings, state: LoopState, window: list, seconds: float) -> dict:
    """The metrics.jsonl record of the log window's entries."""
    names = list(dict.fromkeys(k for e in window for k in e.metrics if k != "tokens"))  # in the order given
    values = {k: mean([e.metrics[k][0] for e in window if k in e.metrics],
                      [e.metrics[k][1] for e in window if k in e.metrics]) for k in names}
    grad_norm = {"grad_norm": float(np.mean([e.grad_norm for e in window]))} if s.log_grad_norm else {}
    tokens = sum(e.metrics["tokens"][0] for e in window if "tokens" in e.metrics)
    return {"type": "train", **record_start(s, state), **values, "lr": window[-1].lr, **grad_norm,
            "tokens_per_s": tokens / max(seconds, 1e-9)}


def log_window(s: LoopSettings, state: LoopState, t_window: float) -> float:
    """The window's metrics.jsonl record and progress line; empties the window -> the time now."""
    now = time.perf_counter()
    rec = window_record(s, state, state.window, now - t_window)
    log(s, rec)
    eta = (state.total_steps - state.step) * state.elapsed / max(state.step, 1)
    if s.minutes > 0:
        eta = min(eta, max(0.0, s.minutes * 60 - state.elapsed))
    epoch = f" (epoch {rec['epoch']:.2f})" if "epoch" in rec else ""
    fields = [f"{label} {rec[k]:.3f}" for k, label in s.show_train.items() if k in rec]
    say(s, f"step {state.step}/{state.total_steps}{epoch} | " + " | ".join(
        [*fields, f"{rec['tokens_per_s']:,.0f} tok/s", f"lr {rec['lr']:.2e}", f"ETA {fmt_seconds(eta)}"]))
    state.window.clear()
    return now


def evaluate(run, state: LoopState) -> dict:
    """The run's evaluation at this step: logged, shown."""
    s = run.settings
    t0 = time.perf_counter()
    scores = run.evaluate(state.step)
    state.last_eval_step = state.step
    if not scores:  # nothing to evaluate on (a pretraining run without held-out data)
        return scores
    state.observe_score(s, scores)
    log(s, {"type": "eval", **record_start(s, state), **scores})
    shown = s.show_eval or {k: k for k, v in scores.items() if isinstance(v, float)}
    values = ", ".join(f"{label} {scores[k]:.4f}" for k, label in shown.items() if k in scores)
    epoch = f" (epoch {state.step / s.steps_per_epoch:.2f})" if s.steps_per_epoch else ""
    say(s, f"eval step {state.step}{epoch}: {s.eval_label} {values} [{time.perf_counter() - t0:.1f}s]")
    return scores


def stop_early(s: LoopSettings, state: LoopState) -> None:
    """Early stopping: the record in metrics.jsonl and the one line that says why the run ends here."""
    log(s, {"type": "early_stop", **record_start(s, state), "patience": s.patience, "metric": s.patience_metric,
            "best": state.best_score})
    say(s, f"early stop at step {state.step}: {s.patience} evaluation(s) in a row without a better dev "
           f"{s.patience_metric} than {state.best_score:.4f} (patience {s.patience})")


def time_evaluation(run, state: LoopState) -> float:
    """Seconds of one evaluation, unlogged (the budget's first fit, for a run with no estimate)."""
    t0 = time.perf_counter()
    run.evaluate(state.step)
    return time.perf_counter() - t0


def last_good_checkpoint(s: LoopSettings, state: LoopState) -> str:
    """Where a run that stops now can be continued from, for the messages."""
    return (f"{s.dir} (step {state.last_checkpoint})" if state.last_checkpoint is not None
            else "none (no checkpoint was written yet)")


def write_curves(s: LoopSettings) -> Path | None:
    """Redraw curves.png from metrics.jsonl. A plot that cannot be written (a full disk) is a
    warning, not the end of the run: the checkpoints are what must not be lost."""
    path = s.dir / rundir.METRICS_FILE
    if s.curves is None or not path.exists():
        return None
    out = s.dir / rundir.CURVES_FILE
    try:
        return draw_curves(read_metrics(path), out, list(s.curves.panels), s.curves.axes, s.eval_label)
    except (OSError, ValueError) as e:  # a full disk, a link in its place
        print(f"warning: could not draw {out}: {e}", file=sys.stderr)
        return None
