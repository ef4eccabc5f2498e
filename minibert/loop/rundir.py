"""A run directory on disk, with checkpoints that are never half-written.

    runs/<name>/
        run.json                     the command that made the run and its settings (its
                                     identity), written at the start
        metrics.jsonl, curves.png    one JSON record per log line and evaluation; their plot
        config.json, model.safetensors, vocab.txt, tokenizer_config.json
                                     the newest model in transformers' format (copies of the
                                     newest checkpoint's files, so a tool that rewrites them in
                                     place cannot touch the checkpoint)
        checkpoints/step-000250/     everything a resume needs: the four files above,
                                     optimizer.safetensors and trainer_state.json

Why one directory per checkpoint: a checkpoint is six files, and a crash between two of them
would leave a model of one step beside the optimizer of another. So a checkpoint is written into
a hidden directory (`checkpoints/.step-000250.tmp-<pid>`) and then renamed to its final name.
A rename is atomic: at every instant a `step-NNNNNN` directory is either absent or complete, and
the newest complete one is the run's checkpoint. Older checkpoints are deleted only after the new
one is in place; a kill at any moment loses at most the steps since the last complete
checkpoint. What an interrupted save leaves behind (the hidden directory, a temporary file of
a top-level copy) is removed by `clean_interrupted_saves` when the run starts again.

The operations that touch the disk are the small functions `_rename`, `_copy` and `_remove`
(and the file writers of minibert.checkpoint), so tests can interrupt a save after any one of
them (tests/loop/test_faults.py).
"""
from __future__ import annotations

import ctypes
import errno
import json
import math
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any, Callable, NamedTuple

from minibert.io import jsonfile, outputs
from minibert.io.jsonfile import Field, check_fields, read_json, read_json_object, text_field
from minibert.io.atomic import atomic_write, write_error, write_text_atomic
from minibert.checkpoint import CONFIG_NAME, TOKENIZER_CONFIG_NAME, VOCAB_NAME, WEIGHTS_NAME
from minibert.io.textio import read_text, shown_value

CHECKPOINTS = "checkpoints"
# a run's own files: its settings (written once at the start), the metrics log, their plot
RUN_FILE, METRICS_FILE, CURVES_FILE = "run.json", "metrics.jsonl", "curves.png"
STATE_FILE = "trainer_state.json"
OPTIM_FILE = "optimizer.safetensors"
# the files a transformers directory needs, copied to the run's top level after every save
PUBLISHED = (CONFIG_NAME, VOCAB_NAME, TOKENIZER_CONFIG_NAME, WEIGHTS_NAME)
PUBLISHED_DIRS = ("generator",)  # a second model of the checkpoint (ELECTRA's generator), published the same way
_STEP_DIR = re.compile(r"step-(\d+)(?:\.(\d+))?$")  # step-000250, or step-000250.1 for a second save
_TMP_DIR = re.compile(r"\.step-\d+(\.\d+)?\.tmp-\d+$")  # a checkpoint being written
_TMP_FILE = re.compile(r"\..+\.tmp$")  # atomic_write's .NAME.XXXX.tmp


class CheckpointError(OSError):
    """A checkpoint could not be written; the previous one is intact (the message says where)."""


def step_dir_name(step: int, again: int = 0) -> str:
    """step-000250; a second save of the same step (a finished run resumed and saved again)
    gets a new name, step-000250.1, so it too is switched in by a rename, never over a
    directory that would first have to be deleted."""
    return f"step-{step:06d}" + (f".{again}" if again else "")


def checkpoint_step(directory: str | Path) -> int | None:
    """The step a checkpoint directory's name says (step-000250 -> 250), None for another name."""
    m = _STEP_DIR.match(Path(directory).name)
    return int(m.group(1)) if m else None


def checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """The complete checkpoints of a run, as (step, directory), oldest first."""
    root = own_entry(run_dir, Path(run_dir) / CHECKPOINTS)  # a link: never read, written or pruned
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), int(m.group(2) or 0), p) for p in root.iterdir()
             if p.is_dir() and not p.is_symlink() and (m := _STEP_DIR.match(p.name))]
    return [(step, p) for step, _, p in sorted(found)]


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The directory of the newest complete checkpoint; None if the run has no checkpoint."""
    found = checkpoints(run_dir)
    return found[-1][1] if found else None


def clean_interrupted_saves(run_dir: str | Path) -> list[Path]:
    """Remove what a save cut off by a crash left behind: hidden step directories and temporary
    files (`.name.XXXX.tmp`) at the top level, in checkpoints/ and generator/. Returns
    what was removed."""
    run_dir = Path(run_dir)
    removed = []
    for folder in (run_dir, run_dir / CHECKPOINTS, *(run_dir / d for d in PUBLISHED_DIRS)):
        if not folder.is_dir() or folder.is_symlink():
            continue
        for p in folder.iterdir():
            if _TMP_DIR.match(p.name) or (p.is_file() and _TMP_FILE.match(p.name)):
                _remove(p)
                removed.append(p)
    return removed


def write_checkpoint(run_dir: str | Path, step: int, write_files: Callable[[Path], None],
                     publish: bool = True) -> Path:
    """Write the checkpoint of `step` as one unit and make it the run's newest.

    write_files(directory) fills a fresh hidden directory; then it is renamed to
    checkpoints/step-NNNNNN, the transformers files are copied to the top level, and older
    checkpoints are deleted. If anything fails before the rename, the hidden directory is
    removed and the previous checkpoint stays the newest; the error names both (a
    CheckpointError for a failing disk)."""
    run_dir = Path(run_dir)
    root = run_dir / CHECKPOINTS
    own_entry(run_dir, root)
    again = 0
    while (root / step_dir_name(step, again)).exists():
        again += 1
    final = root / step_dir_name(step, again)
    tmp = root / f".{final.name}.tmp-{os.getpid()}"
    previous = latest_checkpoint(run_dir)
    try:
        root.mkdir(parents=True, exist_ok=True)
        if tmp.exists():
            _remove(tmp)
        tmp.mkdir()
        write_files(tmp)
        _fsync_dir(tmp)
        _rename(tmp, final)
        _fsync_dir(root)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):
            kept = (f"the previous checkpoint {previous} is intact" if previous is not None
                    else "no earlier checkpoint exists")
            raise CheckpointError(e.errno, f"could not save the checkpoint of step {step}: "
                                           f"{e.strerror or e}; {kept}") from None
        raise
    if publish:
        _publish(run_dir, final)
    for _, old in checkpoints(run_dir)[:-1]:
        _remove(old)
    return final


def _publish(run_dir: Path, checkpoint: Path) -> None:
    """Copy the checkpoint's config.json, model.safetensors, ... (and those of its generator/) to
    the top level (each replaced atomically: a reader sees the old file or the new one). A failure
    here leaves the checkpoint itself complete, so it is an error that says so."""
    names = [*PUBLISHED, *(f"{d}/{name}" for d in PUBLISHED_DIRS if (checkpoint / d).is_dir() for name in PUBLISHED)]
    for name in names:
        src = checkpoint / name
        own_entry(run_dir, run_dir / name)
        if src.is_file():
            try:
                _copy(src, run_dir / name)
            except OSError as e:
                raise CheckpointError(e.errno, f"the checkpoint {checkpoint} is complete, but its {name} could not "
                                               f"be copied to {run_dir}: {e.strerror or e}") from None


def own_entry(run_dir: str | Path, path: str | Path) -> Path:
    """`path` (inside `run_dir`) if no folder on the way to it, nor itself, is a symbolic link: a
    run writes and deletes only its own entries, never through a link to somewhere else. A link
    is an error that names it."""
    run_dir, path = Path(run_dir), Path(path)
    p = path
    while p != run_dir and p != p.parent:
        if p.is_symlink():
            raise ValueError(f"{p} is a symbolic link; a run writes only its own files, never through a link "
                             f"(remove the link, or choose another --out)")
        p = p.parent
    return path


def _copy(src: Path, dest: Path) -> None:
    """dest becomes a copy of src, atomically (temporary file, fsync, os.replace)."""
    atomic_write(dest, lambda tmp: shutil.copyfile(src, tmp))


def _rename(src: Path, dest: Path) -> None:
    os.replace(src, dest)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _fsync_dir(path: Path) -> None:
    """Flush a directory's entries (the names of new files, a rename) to disk, where possible."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot fsync a directory; the rename is still atomic
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# the run's identity (run.json) and the guard a fresh run passes

# what a run writes besides run.json; a fresh run clears what an earlier run left of these
RUN_OUTPUTS = (METRICS_FILE, CURVES_FILE, "eval_results.json", CHECKPOINTS, *PUBLISHED,
               *PUBLISHED_DIRS)
FINISHED = ("done", "budget")  # trainer_state.json "status" of a run that ran to its end
# the entries of a run no other output may replace, even one written by the run's own lock holder
RUN_OWNED = (RUN_FILE, ".lock", *RUN_OUTPUTS)


class RunInfo(NamedTuple):
    command: str  # the command that made the run: train, train-tiny, train-t5, train-xlnet, finetune, ...
    settings: dict  # its settings, as the command's settings class writes them (to_dict)
    extra: dict  # the rest of run.json (the data it read, the task, ...)


# the form of a run's files (run.json, trainer_state.json), written in each as "layout"; a run
# folder of another layout was written by another format of minibert and is refused (check_layout)
LAYOUT = 2


class OtherFormat(ValueError):
    """A run file written by another format of minibert (check_layout)."""


def check_layout(d: dict, path: Path) -> None:
    """Refuse, in one line naming the file, a run file whose "layout" is not this minibert's."""
    layout = d.get("layout")
    if type(layout) is not int or layout != LAYOUT:
        what = "no layout" if layout is None else f"layout {shown_value(layout, 40)}"
        raise OtherFormat(f"{path}: the run was written by another format of minibert ({what}; this one writes "
                          f"layout {LAYOUT}) and must be started again (--overwrite replaces it)")


# the fields of run.json minibert reads, typed (io/jsonfile.check_fields): a wrong type is one error
# naming the file and the field, whichever command reads it (a resume, evaluate, nsp-baseline, a card)
_COMMAND = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
RUN_FIELDS = {
    "command": Field(str, "the name of the minibert command that made the run (train, finetune, ...)",
                     lambda v: _COMMAND.fullmatch(v) is not None, required=True),
    "settings": Field(dict, "an object of the run's settings", required=True),
    "data": Field((dict, type(None)), "null or an object {name: path} of the data the run read",
                  lambda v: v is None or all(isinstance(x, str) and text_field()(x) for x in v.values())),
    "task": Field(dict, "an object describing the fine-tuning task"),
    "preset": Field(str, "a preset's name", text_field(100)),
    "architecture": Field(str, "a model class's name", text_field(100)),
    "total_steps": Field(int, "an integer >= 0", lambda v: v >= 0),
    "best": Field((dict, type(None)), "null or an object of the best dev scores"),
}
# the task of a fine-tuning run.json (evaluate and predict read it; model_card shows it)
TASK_FIELDS = {
    "name": Field(str, "a task's name", text_field(100)), "format": Field(str, "a file format's name", text_field(100)),
    "kind": Field(str, "a task kind's name", text_field(100)),
    "main_metric": Field(str, "a metric's name", text_field(100)),
    "labels": Field((list, type(None)), "null or a list of label names (strings)",
                    lambda v: v is None or all(isinstance(x, str) for x in v)),
    "max_seq_length": Field(int, "an integer >= 1", lambda v: v >= 1),
    **{f"{split}_{what}": Field(int, "an integer >= 0", lambda v: v >= 0)
       for split in ("train", "dev") for what in ("examples", "features")},
    **{f"{split}_file": Field(str, "a path", text_field()) for split in ("train", "dev")},
}
# what a fine-tuning run's recipe chose (finetune/commands.py), and where patience stopped it (finetune/run.py):
# read back by --resume, the done line and the model card
RECIPE_FIELDS = {
    "name": Field(str, "the recipe's name", text_field(100)),
    "settings": Field(dict, "an object {setting: value} of what the recipe chose",
                      lambda v: all(isinstance(k, str) and len(k) <= 100 for k in v)
                      and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                              for x in v.values())),
    "epochs_raised_from": Field(float, "a positive number (the recipe's epochs before a small data set raised them)",
                                lambda v: 0 < v < math.inf),
}
EARLY_STOP_FIELDS = {
    "step": Field(int, "an integer >= 0", lambda v: v >= 0, required=True),
    "total_steps": Field(int, "an integer >= 1", lambda v: v >= 1, required=True),
    "patience": Field(int, "an integer >= 1", lambda v: v >= 1, required=True),
    "metric": Field(str, "a metric's name", text_field(100), required=True),
    "best_step": Field((int, type(None)), "null or an integer >= 0", lambda v: v is None or v >= 0),
}
# the objects inside run.json and their schemas ("task." prefixes a field in an error)
RUN_OBJECTS = {"task": TASK_FIELDS, "recipe": RECIPE_FIELDS, "early_stop": EARLY_STOP_FIELDS}
RUN_FIELDS.update(
    recipe=Field(dict, "an object of what the recipe chose"),
    early_stop=Field(dict, "an object saying where patience stopped the run"),
    class_weights=Field(dict, "an object {label: weight} of positive finite numbers",
                        lambda v: all(isinstance(w, (int, float)) and not isinstance(w, bool) and 0 < w < math.inf
                                      for w in v.values())),
)


def write_run(directory: str | Path, command: str, settings: dict, **extra) -> None:
    """run.json: {"command": ..., "settings": {...}, "layout": ..., **extra}, atomically."""
    write_json(Path(directory) / RUN_FILE, {"command": command, "settings": settings, "layout": LAYOUT, **extra})


def read_run(directory: str | Path) -> RunInfo | None:
    """run.json of a run directory; None if it has none. One written by another format of
    minibert is refused (OtherFormat)."""
    path = Path(directory) / RUN_FILE
    if not path.is_file():
        return None
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must hold a JSON object, not {type(raw).__name__}")
    check_layout(raw, path)
    check_fields(raw, RUN_FIELDS, str(path))
    for key, schema in RUN_OBJECTS.items():
        if isinstance(raw.get(key), dict):
            check_fields(raw[key], schema, str(path), prefix=f"{key}.")
    raw = dict(raw)
    command, settings = raw.pop("command"), raw.pop("settings")
    raw.pop("layout")
    return RunInfo(command, settings, raw)


def run_state(directory: str | Path) -> dict | None:
    """trainer_state.json of a run's newest checkpoint, or None if it has none."""
    ckpt = latest_checkpoint(directory)
    return read_json_object(ckpt / STATE_FILE) if ckpt is not None else None


LOCK_FILE = ".lock"  # held by the process that writes the run (RunLock); not part of the run's outputs


class RunLock:
    """One writer per run directory: an exclusive `fcntl.flock` on DIR/.lock, taken before the
    first write and held to the end of the run. A second run on the same directory gets one error
    naming the holder's pid; the operating system releases the lock when the holder exits or is
    killed, so a stale lock file never blocks. (Where `fcntl` does not exist, on Windows, there
    is no lock.)

        with RunLock(out):
            check_run_dir(out, ...); start_run(out, ...); ...
    """

    def __init__(self, directory: str | Path):
        self.dir = Path(directory)
        self._file = None
        self._made = False  # the lock made the directory (then a run that fails before writing leaves none)

    def __enter__(self) -> "RunLock":
        try:
            # lazy: fcntl exists only on some platforms
            import fcntl
        except ImportError:  # pragma: no cover (Windows)
            return self
        if self.dir.exists() and not self.dir.is_dir():
            raise ValueError(f"output directory {self.dir} is a file; choose another --out")
        outputs.check_output(self.dir, kind="run")  # not inside another run
        self._made = not self.dir.exists()
        self.dir.mkdir(parents=True, exist_ok=True)
        f = _open_lock(self.dir / LOCK_FILE)
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read(40).strip() or "unknown"
            f.close()
            raise ValueError(f"{self.dir} is in use by another minibert process (pid {holder}); wait for it to "
                             f"finish, or choose another --out") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._file = f
        outputs.hold(self.dir, RUN_OWNED)
        return self

    def __exit__(self, kind, *exc) -> None:
        if self._file is None:
            return
        # lazy: fcntl exists only on some platforms
        import fcntl

        outputs.release(self.dir)
        if kind is not None and self._made and not holds_files(self.dir):  # refused before the first write
            (self.dir / LOCK_FILE).unlink(missing_ok=True)
            try:
                self.dir.rmdir()
            except OSError:
                pass
        fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
        self._file.close()
        self._file = None


def _open_lock(path: Path):
    """The lock file, opened without following a link (a `.lock` that is a symbolic link would
    have the pid written into the file it points to, outside the run), only if it is a regular
    file (a FIFO would block, a device is not a lock) with one name (a hard link's other name may
    be any file outside the run, which the pid would overwrite); checked on the opened file, so
    nothing is truncated or written before."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as e:
        if os.path.islink(path):
            raise ValueError(f"{path} is a symbolic link, not minibert's lock file; remove it (nothing outside the "
                             f"run is written through it)") from None
        raise ValueError(f"cannot open the lock file {path}: {e.strerror or e}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ValueError(f"{path} is not a regular file (a FIFO, a device or a directory), so it cannot be the "
                         f"run's lock; remove it")
    if st.st_nlink != 1:
        os.close(fd)
        raise ValueError(f"{path} has {st.st_nlink} names (a hard link to a file elsewhere), so it cannot be the "
                         f"run's lock: writing the pid would change that file; remove {path}")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "r+", encoding="utf-8")


def holds_files(d: Path) -> bool:
    """Whether a directory holds anything besides the lock file (False for one that is gone)."""
    return d.is_dir() and any(p.name != LOCK_FILE for p in d.iterdir())


def staging_dir(directory: str | Path) -> Path:
    """The sibling folder a fresh run is built in when `directory` holds something it replaces
    (loop/launch.py): hidden, named after it, emptied of what a killed replacement left (the
    caller holds `directory`'s lock, so no other process owns it)."""
    d = Path(directory)
    staging = d.parent / f".{d.name}.replacing"
    if os.path.lexists(staging):
        _remove(staging)
    return staging


def discard(path: str | Path) -> None:
    """Remove a folder (a link: the link only); nothing if it is gone."""
    if os.path.lexists(path):
        _remove(Path(path))


_RENAME_EXCHANGE = 2  # renameat2's flag: swap two paths atomically (Linux 3.15)


def exchange(a: str | Path, b: str | Path) -> None:
    """Swap two folders' names in one step, so that a kill at any moment leaves each folder whole
    under one of the two names (renameat2 with RENAME_EXCHANGE). Where the system has no such call,
    three renames, `b` out of the way first."""
    a, b = Path(a), Path(b)
    rename2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if rename2 is not None:
        at_cwd = -100  # AT_FDCWD
        if rename2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
            _fsync_dir(a.parent)
            return
        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EINVAL):
            raise OSError(err, f"cannot swap {a} and {b}: {os.strerror(err)}")
    aside = b.with_name(f".{b.name}.replaced")
    discard(aside)
    os.rename(b, aside)
    os.rename(a, b)
    os.rename(aside, a)
    _fsync_dir(a.parent)


def check_run_dir(directory: str | Path, command: str, *, overwrite: bool = False, replaceable: bool = False,
                  resume: str = "", differs: Callable[[dict], list[str]] | None = None) -> None:
    """Before a fresh run writes anything: refuse a directory that holds something else, or a run
    that would be lost, unless `overwrite`. May start: a missing or empty directory; a run of
    `command` that saved nothing yet (no checkpoint, no model); a finished run of `command` when
    `replaceable` (train-tiny, train-t5 and train-xlnet re-run into their own directory).
    `resume` is the command that continues the run (for the message); `differs(settings)` lists
    the settings in which the saved run differs from the new one (for the message)."""
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise ValueError(f"output directory {d} is a file; choose another --out")
    if overwrite or not d.is_dir() or not holds_files(d):
        return
    info = read_run(d)
    if info is None or info.command != command:
        what = "files of its own" if info is None else f"a {info.command} run"
        raise ValueError(f"{d} already holds {what}, not a {command} run; nothing was written. Choose another "
                         f"--out, or pass --overwrite to replace it")
    state = run_state(d)
    if state is None and not (d / WEIGHTS_NAME).exists():
        return  # run.json (and perhaps metrics) of a run that never saved: nothing to lose
    finished = state is not None and state.get("status") in FINISHED
    if finished and replaceable:
        return
    diff = differs(info.settings) if differs is not None else []
    if state is None:  # a model (a fine-tuning run's best so far) but no checkpoint: killed before its first save
        what = f"a {command} run that stopped before its first checkpoint (its model is there; nothing to resume)"
    elif finished:
        what = f"a finished {command} run"
    else:
        what = (f"an unfinished {command} run (stopped at step {shown_value(state.get('step'), 40)} of "
                f"{shown_value(state.get('total_steps'), 40)})")
    if diff:
        what += f" with other settings ({', '.join(diff)})"
    how = f"continue it with `{resume}`, " if resume and state is not None and not finished else ""
    then = f"{how}replace it with --overwrite, or choose another --out"
    raise ValueError(f"{d} already holds {what}; nothing was written. {then[0].upper()}{then[1:]}")


def resumable_run(directory: str | Path, command: str) -> RunInfo:
    """The run a `--resume DIRECTORY` continues: run.json written by `command` and a checkpoint
    whose state can resume (what the command line may give beside it: `resume_changes`)."""
    d = Path(directory)
    info = read_run(d)
    if info is None or info.command != command:
        raise ValueError(f"{d} has no {RUN_FILE} written by {command}: not a {command} run to resume")
    ckpt = latest_checkpoint(d)
    if ckpt is None:
        raise ValueError(f"{d} has no checkpoint to resume from; start the run again with --overwrite")
    if "batches" not in read_json_object(ckpt / STATE_FILE):
        raise ValueError(f"{ckpt} was saved by a {command} without resume; start the run again with --overwrite")
    return info


def start_run(directory: str | Path, command: str, settings: dict, **extra) -> None:
    """A fresh run in `directory`, which holds nothing of another run (loop/launch.py builds a
    run that replaces one in a folder of its own): write run.json."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    write_run(d, command, settings, **extra)


# ---------------------------------------------------------------------------------------------
# small JSON files

def write_json(path: Path, obj: Any) -> None:
    """Write JSON atomically (temporary file, fsync, rename)."""
    write_text_atomic(path, json.dumps(obj, indent=2) + "\n")


def read_jsonl(path: Path) -> tuple[list[dict], int]:
    """The records of a JSON-lines file -> (records, lines dropped). A last line cut short by a
    crash mid-write is dropped (and counted); a bad line anywhere else is an error naming the
    file and the line."""
    lines = read_text(path).splitlines()  # a binary file is an error naming it, line and byte
    records, dropped = [], 0
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = jsonfile.parse_json(line, f"{path} line {i + 1}")
            if not isinstance(rec, dict):
                raise ValueError("not a JSON object")
        except ValueError as e:
            if i == len(lines) - 1:
                dropped += 1
                continue
            raise ValueError(f"{path} line {i + 1} is not a JSON record ({e}); fix or delete that line") from None
        records.append(rec)
    return records, dropped


def truncate_jsonl(path: Path, step: int) -> int:
    """Keep the records of a metrics file up to `step` (those after it belong to the part of a run
    that a resume repeats) -> the number of lines cut short by a crash that were dropped too."""
    path = Path(path)
    if not path.exists():
        return 0
    records, dropped = read_jsonl(path)
    for r in records:
        if not isinstance(r.get("step", 0), (int, float)) or isinstance(r.get("step"), bool):
            raise ValueError(f"{path}: a record has step {r['step']!r:.100}, expected a number; fix or delete "
                             f"that line")
    write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in records if r.get("step", 0) <= step))
    return dropped


def append_jsonl(path: Path, record: dict) -> None:
    """Append one record; a full disk is an error naming the file; a link is not followed."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        with open(fd, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
    except OSError as e:
        raise write_error(path, e) from None
