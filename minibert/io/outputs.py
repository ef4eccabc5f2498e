"""Where a command may write: one rule for every output path, checked before any work is done.

    out = outputs.check_output(args.out, inputs=[args.file, args.model_dir])   # refuses, or returns the path
    outputs.write_output(out, text)                                           # atomic, or direct for /dev/null

An output is refused when
- it is one of the command's inputs (the same file after resolving links, or a hard link to it),
  or an existing file inside an input directory (predict RUN --out RUN/model.safetensors);
- it lies inside a run directory (a folder with run.json, or finetune.json of older runs) whose lock this
  process does not hold: a run belongs to its one writer (loop/rundir.RunLock), so
  `predict --out runs/R/metrics.jsonl` cannot kill a live run or damage a finished one;
- it lies inside a run this process does hold, but is one of that run's own files (its
  run.json, metrics, model, checkpoints/): `export-data R --out R/model.safetensors`;
- it is a directory where a file is meant (or a file where a directory is meant), or a special
  file other than a character device or a FIFO.
A character device or a FIFO (`/dev/null`, `/dev/stdout`, a named pipe) is written directly:
an atomic write would rename a regular file over it.

The run directories this process holds are registered here by RunLock (`hold` / `release`), so
this module knows no more about runs than the names that mark one.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable, Iterable

from minibert.io.atomic import atomic_write, write_error

# a folder holding one of these is a run directory (not .lock alone: other tools, pytest among them, make one)
RUN_MARKERS = ("run.json", "finetune.json")

STREAMS = ("/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/self/fd/")  # a stream even where it ends in a file

_held: dict[Path, tuple[str, ...]] = {}  # run directory (resolved) -> the names of its own entries


def hold(run_dir: str | Path, owned: Iterable[str]) -> None:
    """This process holds the lock of `run_dir`; `owned` are its entries no other output may replace."""
    _held[_resolve(run_dir)] = tuple(owned)


def release(run_dir: str | Path) -> None:
    _held.pop(_resolve(run_dir), None)


def _resolve(path: str | Path) -> Path:
    return Path(os.path.realpath(Path(path).expanduser()))


def is_run_dir(path: Path) -> bool:
    return any(os.path.lexists(path / name) for name in RUN_MARKERS)


def inside(path: str | Path, directory: str | Path) -> bool:
    """Whether `path` is `directory` or lies below it (links resolved)."""
    d = _resolve(directory)
    p = _resolve(path)
    return p == d or d in p.parents


def enclosing_run(path: str | Path) -> Path | None:
    """The nearest run directory strictly above `path` (resolved), or None."""
    p = _resolve(path)
    for parent in p.parents:
        if is_run_dir(parent):
            return parent
    return None


def check_output(path: str | Path, inputs: Iterable[str | Path | None] = (), kind: str = "file",
                 flag: str = "--out") -> Path:
    """Refuse `path` as an output of the command (kind "file", "dir", or "run": the directory of a
    run the caller is about to lock; the module docstring lists the rule), with one line that says
    what to do instead. Returns the path as given."""
    given = Path(path)
    real = _resolve(given)
    _check_kind(given, real, kind, flag)
    if kind == "dir" and real.is_dir() and is_run_dir(real) and real not in _held:
        raise ValueError(f"{flag} {given} is a run directory, which belongs to the command that made it: choose "
                         f"another {flag}")
    for item in inputs:
        if item is None:
            continue
        inp = _resolve(item)
        if real == inp or _same_file(real, inp):
            raise ValueError(f"{flag} {given} is an input of this command ({item}); writing it would destroy the "
                             f"input: choose another {flag}")
        if inp.is_dir() and inp in real.parents and real.is_file():
            raise ValueError(f"{flag} {given} would replace {real.relative_to(inp)}, a file of the input {item}: "
                             f"choose an {flag} outside {item}")
    run = enclosing_run(real)
    while run is not None:
        if run not in _held:
            raise ValueError(f"{flag} {given} lies inside the run directory {run}, which belongs to the command that "
                             f"made it: choose an {flag} outside {run}")
        top = real.relative_to(run).parts[0]
        if top in _held[run] or top in RUN_MARKERS or top == ".lock":
            raise ValueError(f"{flag} {given} is {run.name}/{top}, a file of the run itself: choose an {flag} "
                             f"elsewhere (a new name inside {run}, or outside it)")
        run = enclosing_run(run)
    return given


def _check_kind(given: Path, real: Path, kind: str, flag: str) -> None:
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return
    except OSError as e:
        raise ValueError(f"{flag} {given}: {e.strerror or e}") from None
    mode = st.st_mode
    if kind in ("dir", "run"):
        if not stat.S_ISDIR(mode):
            raise ValueError(f"{flag} {given} is a file; give a directory (this command writes several files)")
        return
    if stat.S_ISDIR(mode):
        raise ValueError(f"{flag} {given} is a directory; give the file to write")
    if not (stat.S_ISREG(mode) or stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        raise ValueError(f"{flag} {given} is a special file (a socket or a block device); give a regular file")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def is_special(path: str | Path) -> bool:
    """Whether `path` (links followed) is a character device or a FIFO: written directly, not by rename."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or str(path).startswith(STREAMS)


def write_output(path: str | Path, content: str | Callable[[Path], None]) -> Path:
    """Write an output that check_output accepted: `content` is the text, or write(path) that
    fills the file. Atomically (temporary file, fsync, rename) for a file; directly for a
    character device or a FIFO (/dev/null, /dev/stdout, a named pipe), which a rename would replace."""
    path = Path(path)
    write = content if callable(content) else lambda p: p.write_text(content, encoding="utf-8")
    if not is_special(path):
        return atomic_write(path, write)
    try:
        write(path)
    except OSError as e:
        raise write_error(path, e) from None
    return path
