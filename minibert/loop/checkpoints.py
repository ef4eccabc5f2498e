"""A training run's checkpoint: written as one unit, restored bit-exactly.

    save_checkpoint(run, state, status)   # -> checkpoints/step-NNNNNN/ (loop/rundir.write_checkpoint)
    state = load_checkpoint(run)          # the newest complete one, every piece checked -> the loop's state

A checkpoint holds the model (the run's save_pretrained), AdamW's moments
(optimizer.safetensors) and trainer_state.json: the run's own part (run.state_dict: its batch
source, its last evaluation, ...), the loop's (loop/state.LoopState.state_dict: the dropout RNG,
the step, the time spent, the budget, the lr anchor, early stopping's count, and the log window
of a run that stopped between two log lines) and the sha256 of every tensor file.
The learning rate is a function of the step, so an interrupted and resumed run ends with the
same bits as one that never stopped.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from minibert.io.jsonfile import Field, check_fields, has_type, read_json, text_field
from minibert.io.textio import shown_value
from minibert.io.tensorfile import load_tensors, save_tensors_atomic, sha256_file
from minibert.loop import rundir
from minibert.loop.state import LoopState


def _count(v) -> bool:
    return v >= 0


# trainer_state.json's loop fields (the run's own ones, its batch source's and its results, are
# checked by the run's load_state_dict), typed by io/jsonfile.check_fields
STATE_FIELDS = {
    "step": Field(int, "a non-negative integer", _count, required=True),
    "elapsed_seconds": Field(float, "a non-negative number", lambda v: 0 <= v < math.inf, required=True),
    "dropout_rng": Field(dict, "a random generator's state (an object)", required=True),
    "total_steps": Field(int, "a positive integer", lambda v: v >= 1, required=True),
    "status": Field(str, "a run's status (running, done, budget, paused, interrupted)", text_field(40)),
    "eval_interval": Field(int, "a non-negative integer", _count, required=True),
    "last_eval_step": Field((int, type(None)), "null or a non-negative integer", lambda v: v is None or v >= 0),
    "short_steps": Field((int, type(None)), "null or a non-negative integer", lambda v: v is None or v >= 0),
    "budget": Field((dict, type(None)), "null or the time budget's state (an object)"),
    "lr_anchor": Field((list, type(None)), "null or [step, learning rate]",
                       lambda v: v is None or (len(v) == 2 and has_type(v[0], int) and has_type(v[1], float))),
    "window": Field(list, "a list of log entries"),
}


def check_state(state, path: Path) -> dict:
    """trainer_state.json's loop fields, checked before any is used: one error naming the file
    and the field, not a TypeError three calls later."""
    if not isinstance(state, dict):
        raise ValueError(f"{path} must hold a JSON object, not {type(state).__name__}")
    rundir.check_layout(state, path)
    check_fields(state, STATE_FIELDS, str(path))
    if state["step"] > state["total_steps"]:
        raise ValueError(f"{path}: step {state['step']} is past total_steps {state['total_steps']}")
    named = rundir.checkpoint_step(path.parent)  # checkpoints/step-NNNNNN/trainer_state.json
    if named is not None and named != state["step"]:
        raise ValueError(f"{path}: step is {state['step']}, but the checkpoint directory is {path.parent.name}")
    return state


def tensor_files(ckpt: Path) -> list[str]:
    """The tensor files of a checkpoint (the models' and the optimizer's), relative to it."""
    return sorted(p.relative_to(ckpt).as_posix() for p in ckpt.rglob("*.safetensors"))


def save_checkpoint(run, state: LoopState, status: str = "running") -> Path:
    """Model (transformers' format), optimizer and the run's and the loop's state at this step,
    as one unit: written into a new checkpoint directory that a single rename makes the newest
    (minibert/loop/rundir.py). `status` records how the run stood."""
    s = run.settings

    def write_files(ckpt: Path) -> None:
        run.model.save_pretrained(ckpt, vocab=s.vocab)
        save_tensors_atomic(run.optimizer.state_dict(), ckpt / rundir.OPTIM_FILE, metadata={"step": str(state.step)})
        own, loop = run.state_dict(), state.state_dict(s, status, status in rundir.FINISHED)
        if own.keys() & {*loop, "sha256"}:
            raise ValueError(f"the run's state has the loop's keys {sorted(own.keys() & {*loop, 'sha256'})}")
        hashes = {f: sha256_file(ckpt / f) for f in tensor_files(ckpt)}
        rundir.write_json(ckpt / rundir.STATE_FILE, {**own, **loop, "sha256": hashes})

    ckpt = rundir.write_checkpoint(s.dir, state.step, write_files, publish=s.publish_checkpoints)
    state.last_checkpoint = state.step
    return ckpt


def check_hashes(state: dict, ckpt: Path) -> None:
    """Every tensor file the state names is in the checkpoint and has the sha256 saved beside it:
    a file changed after the save is refused."""
    state_file = ckpt / rundir.STATE_FILE
    hashes, own = state.get("sha256"), set(tensor_files(ckpt))
    if not isinstance(hashes, dict) or not hashes or not all(isinstance(h, str) for h in hashes.values()) \
            or not all(isinstance(f, str) and f.endswith(".safetensors") and ".." not in Path(f).parts
                       and not Path(f).is_absolute() for f in hashes):  # only the checkpoint's own files
        raise ValueError(f"{state_file}: sha256 is {shown_value(hashes)}, expected the sha256 of each of "
                         f"{', '.join(sorted(own))}")
    for f, sha in hashes.items():
        if not (ckpt / f).is_file():
            raise ValueError(f"checkpoint {ckpt} is incomplete: {f} is missing")
        if sha256_file(ckpt / f) != sha:
            raise ValueError(f"checkpoint {ckpt} is inconsistent: {f} does not match {rundir.STATE_FILE} "
                             f"(the file was changed after the save)")


def load_checkpoint(run, no_checkpoint: str = "") -> LoopState:
    """Restore everything from the run's newest complete checkpoint (bit-exact resume) -> the
    loop's state. `no_checkpoint`: what the error adds when the run has none."""
    s = run.settings
    ckpt = rundir.latest_checkpoint(s.dir)  # what a save cut off by a kill left was cleaned (loop/launch.py)
    if ckpt is None:
        raise ValueError(f"{s.dir} has no checkpoint to resume from{no_checkpoint}; start it again with "
                         f"--overwrite")
    state_file = ckpt / rundir.STATE_FILE
    state = check_state(read_json(state_file), state_file)
    check_hashes(state, ckpt)
    try:
        run.load_state_dict(state, ckpt)  # the model, the batch source, the run's results
        loop = LoopState.load(s, state, state_file)
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
        run.optimizer.load_state_dict(optim)
    except ValueError as e:
        raise ValueError(f"{optim_path}: {e}") from None
    path = s.dir / rundir.METRICS_FILE
    if rundir.truncate_jsonl(path, loop.step):  # metrics of the lost part of the run
        if s.verbose:
            print(f"note: {path}: dropped its last line, cut short by a crash mid-write")
    return loop
