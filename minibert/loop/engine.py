"""The one training loop: what pretraining (train/trainer.py's Trainer) and fine-tuning
(finetune/run.py's FinetuneRun) both run.

    loop.run(max_steps)   # -> "done" | "budget" | "paused" | "interrupted"

`TrainingLoop` owns what every run does the same way: the steps up to the schedule's end, the
time budget, a pause after `max_steps` or Ctrl-C; one gradient step through
train/step.training_step (lr from the schedule, clipping, AdamW, a NaN/inf loss stops the run);
a progress line (step, loss, the objective's accuracies, tokens/s, lr, ETA) and a metrics.jsonl
record per log interval; periodic evaluation; atomic checkpoints (model, optimizer moments,
batch-source state, dropout RNG: run_dir.write_checkpoint) and their bit-exact restore; the save
on Ctrl-C (a second Ctrl-C aborts without saving); curves.png.

A user of the loop is a subclass that sets the attributes below and fills in the hooks:

    attributes   dir (the run directory), model (params, loss_grads_metrics, save_pretrained),
                 optimizer (AdamW), tokenizer, rng (dropout), step, total_steps, elapsed, verbose,
                 minutes (the time budget, 0 = none)
    batch source next_batches()            -> the step's batch, or a list of micro-batches
                 step_options()            -> training_step's lr, warmup_steps, schedule, clip_norm, objective
                 dropout_on()              -> whether the step draws dropout masks from self.rng
    window       window_entry(result, batches) -> what one step adds to the log window
                 window_record(window, seconds) -> the metrics.jsonl record of the window
                 decode_window_entry(entry) -> an entry as window_entry made it, from its JSON form
                 (a paused run saves its unfinished window, so the resumed run logs the same
                 records as one that never stopped)
                 progress_fields(record)   -> (text after "step s/T", fields of the progress line)
    evaluator    is_eval_step(step), run_eval() (sets last_eval_step; the Trainer's calls its
                 evaluator object, loop.HeldoutEvaluator or electra.ElectraEvaluator; FinetuneRun's
                 its TaskSource's evaluate(model))
    checkpoints  is_checkpoint_step(step, stop_at), checkpoint_state(status, ckpt) -> the JSON state,
                 restore_state(state, ckpt) (the model and everything but optimizer, RNG, step, time)
    messages     diverged_hint(), resume_command()
    budget       `budget`: a loop/budget.StepBudget when the schedule is fitted to the time budget
                 (the engine reports every step and evaluation to it, applies its refits and keeps
                 the learning rate continuous across them), step_kind(step), on_fit(fit, before, first),
                 time_eval() (one evaluation's seconds, for a fit that has none measured)
    curves       curve_panels(records) -> the Panels of curves.png (loop/curves.py; None: no
                 curves), class settings curve_axes, eval_label
    optional     after_step(seconds), on_budget(), optimizer_metadata(),
                 aborted_where(), interrupted_saved(), no_checkpoint_message(); class settings
                 log_partial_window, curves_every, publish_checkpoints

How pretraining plugs in: train/trainer.py (the data iterators and their sequence-length phases,
MLM/NSP evaluation, a probe of the step time for the budget); an ELECTRA run is the same Trainer
with train/electra.py's model and evaluator. How fine-tuning plugs in: finetune/run.py (a
TaskSource's rows of the step, the dev metric and the best model kept beside the checkpoints).
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

from minibert.io.progress import fmt_seconds
from minibert.loop import rundir as run_dir_mod
from minibert.loop.budget import FULL, Fit, StepBudget
from minibert.loop.curves import draw_curves, read_metrics
from minibert.loop.step import TrainingAborted, TrainingDiverged, install_sigint, restore_sigint, training_step
from minibert.optim import lr_at


def check_state(state, path: Path) -> dict:
    """trainer_state.json's loop fields, checked before any is used: one error naming the file
    and the field, not a TypeError three calls later."""
    if not isinstance(state, dict):
        raise ValueError(f"{path} must hold a JSON object, not {type(state).__name__}")
    for key, kinds, what in (("step", (int,), "a non-negative integer"),
                             ("elapsed_seconds", (int, float), "a non-negative number"),
                             ("dropout_rng", (dict,), "a random generator's state (an object)")):
        value = state.get(key)
        if not isinstance(value, kinds) or isinstance(value, bool) or \
                (kinds != (dict,) and not 0 <= value < math.inf):  # NaN and Infinity parse as JSON floats
            raise ValueError(f"{path}: {key} is {value!r}, expected {what}")
    if "total_steps" in state:  # every trainer but fine-tuning records it
        total = state["total_steps"]
        if not isinstance(total, int) or isinstance(total, bool) or total < 1:
            raise ValueError(f"{path}: total_steps is {total!r}, expected a positive integer")
        if state["step"] > total:
            raise ValueError(f"{path}: step {state['step']} is past total_steps {total}")
    named = run_dir_mod.checkpoint_step(path.parent)  # checkpoints/step-NNNNNN/trainer_state.json
    if named is not None and named != state["step"]:
        raise ValueError(f"{path}: step is {state['step']}, but the checkpoint directory is {path.parent.name}")
    return state


def _plain(x):
    """A window entry's field as JSON: NamedTuples (a step's metrics) as lists, NumPy numbers as Python's."""
    if isinstance(x, tuple):
        return [_plain(v) for v in x]
    return x.item() if hasattr(x, "item") else x


class TrainingLoop:
    """The loop, its logging, checkpoints and Ctrl-C; subclasses plug in the rest (module docstring)."""

    METRICS_FILE = "metrics.jsonl"
    log_partial_window = True  # log the steps since the last log line when the run ends mid-interval
    curves_every = 60.0  # seconds: after an evaluation in the loop, redraw curves.png at most this often
    publish_checkpoints = True  # a checkpoint's model files are also the run's top-level model
    verbose = True
    last_checkpoint: int | None = None
    last_eval_step: int | None = None
    budget: StepBudget | None = None  # the schedule is fitted to the time budget (loop/budget.py)
    lr_anchor: tuple[int, float] | None = None  # where a refit re-spread the lr decay (optim.lr_at)
    _stop_requested = False
    _last_plot = -math.inf

    # --- hooks (see the module docstring) --------------------------------------------------------

    def next_batches(self):
        raise NotImplementedError

    def step_options(self) -> dict:
        raise NotImplementedError

    def dropout_on(self) -> bool:
        raise NotImplementedError

    def window_entry(self, result, batches):
        raise NotImplementedError

    def window_record(self, window: list, seconds: float) -> dict:
        """The log line of a window whose entries are (loss, correct, counted, tokens, lr): the
        default of the trainers with one loss and one accuracy (T5, XLNet)."""
        return {"type": "train", "step": self.step, "time": round(self.elapsed, 3),
                "loss": float(np.mean([w[0] for w in window])),
                "acc": sum(w[1] for w in window) / max(sum(w[2] for w in window), 1), "lr": window[-1][4],
                "tokens_per_s": sum(w[3] for w in window) / max(seconds, 1e-9)}

    def decode_window_entry(self, entry: list):
        """A window entry from its JSON form (tuples of plain numbers by default)."""
        return tuple(entry)

    def progress_fields(self, rec: dict) -> tuple[str, list[str]]:
        """(a prefix, the fields) of a progress line for window_record's record."""
        return "", [f"loss {rec['loss']:.3f}", f"acc {rec['acc']:.3f}"]

    def is_eval_step(self, step: int) -> bool:
        raise NotImplementedError

    def run_eval(self):
        raise NotImplementedError

    def is_checkpoint_step(self, step: int, stop_at: float) -> bool:
        raise NotImplementedError

    def checkpoint_state(self, status: str, ckpt: Path) -> dict:
        raise NotImplementedError

    def restore_state(self, state: dict, ckpt: Path) -> None:
        raise NotImplementedError

    def optimizer_metadata(self) -> dict | None:
        return None

    lr_option, warmup_option = "lr", "warmup"  # how the run's command names the two settings (diverged_hint)

    def diverged_hint(self) -> str:
        """What the NaN/inf message adds: where the run can continue from, and what to change."""
        options = self.step_options()
        return (f"; the run stopped without saving. Last good checkpoint: {self.last_good_checkpoint()}. Try a lower "
                f"{self.lr_option} (now {options['lr']:g}) or more {self.warmup_option} (now {options['warmup_steps']})")

    def resume_command(self) -> str:
        raise NotImplementedError

    def after_step(self, seconds: float) -> None:
        """Called after every step with its duration."""

    def step_kind(self, step: int) -> str:
        """The budget's kind of step `step` (loop/budget.py: FULL, or SHORT in a short phase)."""
        return FULL

    def time_eval(self) -> float | None:
        """Run one evaluation and return its seconds (a budget's first fit without a probe)."""
        return None

    def on_fit(self, fit: Fit, before: int, first: bool) -> None:
        """Called when the budget fitted the schedule anew (total_steps is already fit.total_steps);
        `first`: the fit from the loop's own first steps (a run without a probe)."""
        self.say(self.fit_message(fit, before, first))

    # --- curves ------------------------------------------------------------------------------------

    curve_axes = (("step", "step"),)  # the x axes of curves.png, a row of panels each
    eval_label = "held-out"  # what the evaluation records are called in the legends

    def curve_panels(self, records: list[dict]) -> list | None:
        """The panels of curves.png (loop/curves.py's Panel), from the run's records; None: no curves."""
        return None

    def write_curves(self) -> Path | None:
        """Redraw curves.png from metrics.jsonl. A plot that cannot be written (a full disk) is a
        warning, not the end of the run: the checkpoints are what must not be lost."""
        self._last_plot = time.perf_counter()
        path = self.dir / run_dir_mod.METRICS_FILE
        if not path.exists():
            return None
        records = read_metrics(path)
        panels = self.curve_panels(records)
        if panels is None:
            return None
        out = self.dir / run_dir_mod.CURVES_FILE
        try:
            return draw_curves(records, out, panels, self.curve_axes, self.eval_label)
        except OSError as e:
            print(f"warning: could not draw {out}: {e}", file=sys.stderr)
            return None

    # --- logging ---------------------------------------------------------------------------------

    def log(self, record: dict) -> None:
        run_dir_mod.append_jsonl(self.dir / self.METRICS_FILE, record)

    def say(self, *args) -> None:
        if self.verbose:
            print(*args, flush=True)

    def _log_train(self, window: list, seconds: float) -> None:
        rec = self.window_record(window, seconds)
        self.log(rec)
        eta = (self.total_steps - self.step) * self.elapsed / max(self.step, 1)
        if self.minutes > 0:
            eta = min(eta, max(0.0, self.minutes * 60 - self.elapsed))
        where, fields = self.progress_fields(rec)
        self.say(f"step {self.step}/{self.total_steps}{where} | " + " | ".join(
            [*fields, f"{rec['tokens_per_s']:,.0f} tok/s", f"lr {rec['lr']:.2e}", f"ETA {fmt_seconds(eta)}"]))

    # --- one step ----------------------------------------------------------------------------------

    def train_step(self):
        """One optimizer step on the batch source's next batch -> window_entry(...)."""
        batches = self.next_batches()
        options = self.step_options()
        if self.lr_anchor is not None:
            options["lr_anchor"] = self.lr_anchor
        try:
            r = training_step(self.model, self.optimizer, batches, self.step, total_steps=self.total_steps,
                              rng=self.rng if self.dropout_on() else None, **options)
        except TrainingDiverged as e:
            raise TrainingDiverged(f"{e}{self.diverged_hint()}") from None
        self.step += 1
        return self.window_entry(r, batches)

    # --- checkpoints -------------------------------------------------------------------------------

    def save_checkpoint(self, status: str = "running") -> Path:
        """Model (transformers' format), optimizer and the loop's state of this step, as one unit:
        written into a new checkpoint directory that a single rename makes the newest
        (minibert/loop/rundir.py). `status` records how the run stood."""
        from minibert.io.tensorfile import save_tensors_atomic

        def write_files(ckpt: Path) -> None:
            self.model.save_pretrained(ckpt, vocab=self.tokenizer.ids_to_tokens)
            save_tensors_atomic(self.optimizer.state_dict(), ckpt / run_dir_mod.OPTIM_FILE,
                                metadata=self.optimizer_metadata())
            run_dir_mod.write_json(ckpt / run_dir_mod.STATE_FILE, {**self.checkpoint_state(status, ckpt),
                                                                   **self._loop_state(status)})

        ckpt = run_dir_mod.write_checkpoint(self.dir, self.step, write_files, publish=self.publish_checkpoints)
        self.last_checkpoint = self.step
        return ckpt

    def load_checkpoint(self) -> None:
        """Restore everything from the run's newest complete checkpoint (bit-exact resume)."""
        from minibert.io.tensorfile import load_tensors

        for p in run_dir_mod.clean_interrupted_saves(self.dir):  # what a save cut off by a kill left
            self.say(f"removed {p}, left by a save that was cut off")
        ckpt = run_dir_mod.latest_checkpoint(self.dir)
        if ckpt is None:
            raise ValueError(self.no_checkpoint_message())
        state_file = ckpt / run_dir_mod.STATE_FILE
        state = check_state(run_dir_mod.read_json(state_file), state_file)
        try:
            self.restore_state(state, ckpt)  # the model, the batch source, the evaluator's last result
        except (KeyError, TypeError, AttributeError, IndexError) as e:  # a field missing or of the wrong type
            raise ValueError(f"{state_file} is damaged: {type(e).__name__}: {e}; the run cannot continue "
                             f"from it") from e
        optim_path = ckpt / run_dir_mod.OPTIM_FILE
        optim, _ = load_tensors(optim_path)
        if "t" not in optim:
            raise ValueError(f"{optim_path} holds no optimizer state (no step count 't'; {len(optim)} tensors "
                             f"such as {sorted(optim)[:2]}): is it a model file?")
        optim["t"] = np.asarray(optim["t"]).reshape(())  # stored as a 1-element tensor
        try:
            self.optimizer.load_state_dict(optim)
        except ValueError as e:
            raise ValueError(f"{optim_path}: {e}") from None
        try:
            self.rng.bit_generator.state = state["dropout_rng"]
        except (TypeError, ValueError, KeyError) as e:
            raise ValueError(f"{ckpt / run_dir_mod.STATE_FILE}: dropout_rng is not a random generator's "
                             f"state ({type(e).__name__}: {e})") from None
        self.step, self.elapsed = int(state["step"]), float(state["elapsed_seconds"])
        self._restore_loop_state(state)
        self.last_checkpoint = self.step
        path = self.dir / self.METRICS_FILE
        if run_dir_mod.truncate_jsonl(path, self.step):  # metrics of the lost part of the run
            self.say(f"note: {path}: dropped its last line, cut short by a crash mid-write")

    @property
    def _window(self) -> list:
        """The entries of the steps since the last log line."""
        if "_window_entries" not in self.__dict__:
            self._window_entries = []
        return self._window_entries

    def _loop_state(self, status: str = "running") -> dict:
        """The engine's own part of trainer_state.json: the budget and the lr anchor, when a run has
        them, and the log window of a run that stops before its end."""
        state = {}
        if status not in run_dir_mod.FINISHED and self._window:
            state["window"] = [[_plain(x) for x in entry] for entry in self._window]
        if self.budget is not None:
            state["budget"] = self.budget.state_dict()
        if self.lr_anchor is not None:
            state["lr_anchor"] = list(self.lr_anchor)
        return state

    def _restore_loop_state(self, state: dict) -> None:
        if self.budget is not None and state.get("budget"):
            self.budget.load_state_dict(state["budget"])
        elif self.budget is not None:  # saved by a run without a budget, or by an older minibert: keep the schedule
            self.budget = None
        anchor = state.get("lr_anchor")
        self.lr_anchor = (int(anchor[0]), float(anchor[1])) if anchor else None
        self._window[:] = [self.decode_window_entry(entry) for entry in state.get("window", [])]

    def no_checkpoint_message(self) -> str:
        return f"{self.dir} has no checkpoint to resume from; start again with --overwrite"

    def last_good_checkpoint(self) -> str:
        """Where a run that stops now can be continued from, for the messages."""
        return (f"{self.dir} (step {self.last_checkpoint})" if self.last_checkpoint is not None
                else "none (no checkpoint was written yet)")

    # --- the loop ----------------------------------------------------------------------------------

    def run(self, max_steps: int | None = None) -> str:
        """Train until total_steps, the time budget, `max_steps` more steps or Ctrl-C.

        -> "done" | "budget" (time ran out; evaluated and saved) | "paused" (max_steps; saved) |
        "interrupted" (Ctrl-C; saved). Raises TrainingDiverged on NaN/inf, and TrainingAborted on
        a second Ctrl-C (at any moment, a save included: the newest complete checkpoint stays as
        it was). Ctrl-C is caught until the final save is written.
        """
        self._stop_requested = False
        previous = install_sigint(self, "_stop_requested")
        try:
            status = self._loop(max_steps)
            if status in run_dir_mod.FINISHED and self.last_eval_step != self.step:
                self.run_eval()
            self.save_checkpoint(status)
            self.write_curves()
        except KeyboardInterrupt:
            raise TrainingAborted(f"aborted at step {self.step} by a second Ctrl-C without saving; "
                                  f"{self.aborted_where()}") from None
        finally:
            restore_sigint(previous)
        if status == "interrupted":
            self.say(f"interrupted at step {self.step}: {self.interrupted_saved()}; continue with "
                     f"`{self.resume_command()}`")
        return status

    def aborted_where(self) -> str:
        return f"the last complete checkpoint in {self.dir}/checkpoints is kept"

    def interrupted_saved(self) -> str:
        return f"saved {self.dir}"

    def _loop(self, max_steps: int | None) -> str:
        """The training steps with their logging, evaluations and checkpoints -> how they ended."""
        budget = self.minutes * 60.0 if self.minutes > 0 else math.inf
        pause_at = math.inf if max_steps is None else self.step + max_steps
        stop_at = min(self.total_steps, pause_at)
        status = "done"
        window = self._window  # the steps since the last log line (a resumed run's, restored)
        t_run = time.perf_counter()
        t_window = t_run
        elapsed0 = self.elapsed
        while self.step < stop_at:
            if self._stop_requested:
                status = "interrupted"
                break
            if elapsed0 + (time.perf_counter() - t_run) >= budget:
                self.on_budget()
                status = "budget"
                break
            t_step = time.perf_counter()
            window.append(self.train_step())
            self.elapsed = elapsed0 + time.perf_counter() - t_run
            self.after_step(time.perf_counter() - t_step)
            if self.budget is not None:
                self._fit_budget(time.perf_counter() - t_step)
            stop_at = min(self.total_steps, pause_at)  # the budget may have refitted the schedule
            last = stop_at if self.log_partial_window else self.total_steps
            if self.step % self.log_interval == 0 or self.step == last:
                now = time.perf_counter()
                self._log_train(window, now - t_window)
                window.clear()
                t_window = now
            evaluated = False
            if self.is_eval_step(self.step) and self.step < self.total_steps:
                t_eval = time.perf_counter()
                self.run_eval()
                if self.budget is not None:
                    self.budget.observe_eval(time.perf_counter() - t_eval)
                evaluated = True
                t_window = time.perf_counter()  # tokens/s counts training time only
            if self.is_checkpoint_step(self.step, stop_at):
                self.save_checkpoint()
                t_window = time.perf_counter()
            if evaluated and time.perf_counter() - self._last_plot > self.curves_every:
                self.write_curves()  # plotting costs a second or two: not after every evaluation
                t_window = time.perf_counter()
        else:
            status = "done" if self.step >= self.total_steps else "paused"
        if window and self.log_partial_window and status in run_dir_mod.FINISHED:
            self._log_train(window, time.perf_counter() - t_window)  # the last steps of the run
            window.clear()
        # a paused or interrupted run keeps its window: the checkpoint saves it, and the resumed run
        # logs it whole, so metrics.jsonl is the same as a run's that never stopped
        return status

    def on_budget(self) -> None:
        """Called when the time budget stops the loop."""

    # --- the time budget -------------------------------------------------------------------------

    def _fit_budget(self, seconds: float) -> None:
        """Report the step to the budget; when it fits the schedule anew, apply the new length with
        the learning rate continuous: past the warmup, the rest of the decay is re-spread from
        this step's rate (lr_anchor)."""
        first = self.budget.stage == "probe"
        fit = self.budget.observe(self.step, self.elapsed, seconds, self.step_kind(self.step - 1), self.time_eval)
        if fit is None:
            return
        before = self.total_steps
        if fit.total_steps != before:
            options = self.step_options()
            warmup = options["warmup_steps"]
            if self.step >= warmup:
                rate = lr_at(self.step, options["lr"], warmup, before, options["schedule"], self.lr_anchor)
                self.lr_anchor = (self.step, rate)
            self.total_steps = fit.total_steps
        self.on_fit(fit, before, first)

    def fit_message(self, fit: Fit, before: int, first: bool) -> str:
        """The line a fit prints."""
        if first:
            return (f"calibration: {fit.step_seconds * 1000:.0f} ms/step, eval "
                    f"{self.budget._eval_time(fit.scale):.1f} s x {fit.evals}: {fit.total_steps} steps fit "
                    f"{self.budget.seconds / 60:.1f} min")
        return (f"recalibration at step {self.step}: the loop runs at {fit.scale:.2f}x the calibrated time; "
                f"{fit.step_seconds * 1000:.0f} ms/step, {fit.total_steps} steps fit the budget (was {before})")
