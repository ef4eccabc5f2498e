"""A training task's checkpoint: written as one unit, restored bit-exactly.

    save_checkpoint(task, status)   # -> checkpoints/step-NNNNNN/ (loop/rundir.write_checkpoint)
    load_checkpoint(task)           # the newest complete one, every piece checked

A checkpoint holds the model (the task's save_pretrained), AdamW's moments
(optimizer.safetensors) and trainer_state.json: the task's own part (task.state_dict: its batch
source, its last evaluation, ...) and the loop's (the dropout RNG, the step, the time spent,
the budget, the lr anchor, and the log window of a run that stopped between two log lines).
The learning rate is a function of the step, so an interrupted and resumed run ends with the
same bits as one that never stopped.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from minibert.io.jsonfile import read_json
from minibert.io.tensorfile import load_tensors, save_tensors_atomic
from minibert.loop import rundir


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
    named = rundir.checkpoint_step(path.parent)  # checkpoints/step-NNNNNN/trainer_state.json
    if named is not None and named != state["step"]:
        raise ValueError(f"{path}: step is {state['step']}, but the checkpoint directory is {path.parent.name}")
    return state


def plain(x):
    """A window entry's field as JSON: NamedTuples (a step's metrics) as lists, NumPy numbers as Python's."""
    if isinstance(x, tuple):
        return [plain(v) for v in x]
    return x.item() if hasattr(x, "item") else x


def save_checkpoint(task, status: str = "running") -> Path:
    """Model (transformers' format), optimizer and the run's state at this step, as one unit:
    written into a new checkpoint directory that a single rename makes the newest
    (minibert/loop/rundir.py). `status` records how the run stood."""
    def write_files(ckpt: Path) -> None:
        task.model.save_pretrained(ckpt, vocab=task.tokenizer.ids_to_tokens)
        save_tensors_atomic(task.optimizer.state_dict(), ckpt / rundir.OPTIM_FILE, metadata=task.optimizer_metadata())
        rundir.write_json(ckpt / rundir.STATE_FILE, {**task.state_dict(status, ckpt), **loop_state(task, status)})

    ckpt = rundir.write_checkpoint(task.dir, task.step, write_files, publish=task.publish_checkpoints)
    task.last_checkpoint = task.step
    return ckpt


def loop_state(task, status: str) -> dict:
    """The loop's own part of trainer_state.json: the budget and the lr anchor, when a run has
    them, and the log window of a run that stops before its end."""
    state = {}
    if status not in rundir.FINISHED and task.window:
        state["window"] = [[plain(x) for x in entry] for entry in task.window]
    if task.budget is not None:
        state["budget"] = task.budget.state_dict()
    if task.lr_anchor is not None:
        state["lr_anchor"] = list(task.lr_anchor)
    return state


def load_checkpoint(task, no_checkpoint: str = "") -> None:
    """Restore everything from the run's newest complete checkpoint (bit-exact resume).
    `no_checkpoint`: what the error adds when the run has none."""
    for p in rundir.clean_interrupted_saves(task.dir):  # what a save cut off by a kill left
        if task.verbose:
            print(f"removed {p}, left by a save that was cut off")
    ckpt = rundir.latest_checkpoint(task.dir)
    if ckpt is None:
        raise ValueError(f"{task.dir} has no checkpoint to resume from{no_checkpoint}; start it again with "
                         f"--overwrite")
    state_file = ckpt / rundir.STATE_FILE
    state = check_state(read_json(state_file), state_file)
    try:
        task.load_state_dict(state, ckpt)  # the model, the batch source, the evaluator's last result
    except (KeyError, TypeError, AttributeError, IndexError) as e:  # a field missing or of the wrong type
        raise ValueError(f"{state_file} is damaged: {type(e).__name__}: {e}; the run cannot continue "
                         f"from it") from e
    optim_path = ckpt / rundir.OPTIM_FILE
    optim, _ = load_tensors(optim_path)
    if "t" not in optim:
        raise ValueError(f"{optim_path} holds no optimizer state (no step count 't'; {len(optim)} tensors "
                         f"such as {sorted(optim)[:2]}): is it a model file?")
    optim["t"] = np.asarray(optim["t"]).reshape(())  # stored as a 1-element tensor
    try:
        task.optimizer.load_state_dict(optim)
    except ValueError as e:
        raise ValueError(f"{optim_path}: {e}") from None
    try:
        task.rng.bit_generator.state = state["dropout_rng"]
    except (TypeError, ValueError, KeyError) as e:
        raise ValueError(f"{state_file}: dropout_rng is not a random generator's state "
                         f"({type(e).__name__}: {e})") from None
    task.step, task.elapsed = int(state["step"]), float(state["elapsed_seconds"])
    if task.budget is not None and state.get("budget"):
        task.budget.load_state_dict(state["budget"])
    elif task.budget is not None:  # saved by a run without a budget, or by an older minibert: keep the schedule
        task.budget = None
    anchor = state.get("lr_anchor")
    task.lr_anchor = (int(anchor[0]), float(anchor[1])) if anchor else None
    decode = task.decode_window_entry if hasattr(task, "decode_window_entry") else tuple
    task.window[:] = [decode(entry) for entry in state.get("window", [])]
    task.last_checkpoint = task.step
    path = task.dir / rundir.METRICS_FILE
    if rundir.truncate_jsonl(path, task.step):  # metrics of the lost part of the run
        if task.verbose:
            print(f"note: {path}: dropped its last line, cut short by a crash mid-write")
