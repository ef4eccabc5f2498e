"""Where a command may write: one rule for every output path, checked before any work is done.

    out = outputs.check_output(args.out, inputs=[args.file, args.model_dir])   # refuses, or returns the path
    outputs.write_output(out, text)                                           # atomic, or direct for /dev/null

An output is refused when
- it is one of the command's inputs (the same file after resolving links, or a hard link to it),
  or an existing file inside an input directory (predict RUN --out RUN/model.safetensors);
- it lies inside a run directory (a folder with run.json) whose lock this
  process does not hold: a run belongs to its one writer (loop/rundir.RunLock), so
  `predict --out runs/R/metrics.jsonl` cannot kill a live run or damage a finished one;
- it lies inside a run this process does hold, but is one of that run's own files (its
  run.json, metrics, model, checkpoints/): `export-data R --out R/model.safetensors`;
- it is a directory where a file is meant (or a file where a directory is meant), or anything
  but a regular file: a device (/dev/stdout, /dev/null), a FIFO or a socket. An output is a
  regular file or a new one: a command derives other names from it (evaluate's
  NAME.confusion.png) and writes it whole by a rename, neither of which a device allows;
- it is itself a symbolic link: minibert never writes through a link, and never replaces one a
  person made;
- it is a folder (`kind="dir"`) holding an input under a name the command writes there (`names`,
  glob patterns: `data --corpus D/meta.json --out D`).
Every file is written by `write_output` (or `save_figure`, `save_arrays`, `make_dir`), whatever
the path came from (a flag, `--set`, a run.json). A file a command writes inside an output folder
it was given (`root=`) is written only if no folder between the two, nor the file, is a symbolic
link or a special file (a FIFO there would hang the command, a link would send the bytes
elsewhere): `inside_output` checks it at the moment of writing, for names nobody listed ahead.
tests/meta/test_one_door.py walks the package's source for writes that bypass this module.

The run directories this process holds are registered here by RunLock (`hold` / `release`), so
this module knows no more about runs than the names that mark one.
"""
from __future__ import annotations

import fnmatch
import os
import shutil
import stat
from pathlib import Path
from typing import Callable, Iterable

from minibert.io.atomic import atomic_write

# a folder holding one of these is a run directory (not .lock alone: other tools, pytest among them, make one)
RUN_MARKERS = ("run.json",)

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
                 flag: str = "--out", names: Iterable[str] = ()) -> Path:
    """Refuse `path` as an output of the command (kind "file", "dir", or "run": the directory of a
    run the caller is about to lock; the module docstring lists the rule), with one line that says
    what to do instead. `names`: glob patterns of the files a "dir" output gets (an input there
    under such a name is refused). Returns the path as given."""
    given = Path(path)
    real = _resolve(given)
    _check_kind(given, real, kind, flag)
    inputs = [item for item in inputs if item is not None]
    if kind == "dir" and real.is_dir() and is_run_dir(real) and real not in _held:
        raise ValueError(f"{flag} {given} is a run directory, which belongs to the command that made it: choose "
                         f"another {flag}")
    for item in inputs:
        inp = _resolve(item)
        if real == inp or _same_file(real, inp):
            raise ValueError(f"{flag} {given} is an input of this command ({item}); writing it would destroy the "
                             f"input: choose another {flag}")
        if inp.is_dir() and inp in real.parents and real.is_file():
            raise ValueError(f"{flag} {given} would replace {real.relative_to(inp)}, a file of the input {item}: "
                             f"choose an {flag} outside {item}")
        if kind == "dir" and inp.parent == real and any(fnmatch.fnmatchcase(inp.name, n) for n in names):
            raise ValueError(f"{flag} {given} would replace its input {item} (this command writes "
                             f"{', '.join(names)} there): choose another {flag}")
    _check_not_a_link(given, flag)
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


def _check_not_a_link(given: Path, flag: str) -> None:
    """A symbolic link is never written through nor replaced."""
    if given.is_symlink():
        raise ValueError(f"{flag} {given} is a symbolic link (to {os.readlink(given)}); minibert never writes "
                         f"through a link: remove it, or give another {flag}")


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
    if not stat.S_ISREG(mode):
        raise ValueError(f"{flag} {given} is a special file ({_special_kind(mode)}), not a regular file: give a file "
                         f"to write (a command that prints writes to stdout without {flag})")


def _special_kind(mode: int) -> str:
    return ("a character device" if stat.S_ISCHR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def inside_output(root: str | Path, path: str | Path) -> Path:
    """`path`, a file a command writes inside its output folder `root`, if neither `root`, nor a
    folder between the two, nor `path` is a symbolic link, and `path` is not a special file or a
    folder: the check made at the moment of writing, for every name (those nobody listed ahead
    too). A link or a FIFO there is one error line naming it."""
    path = _no_link_between(Path(root), Path(path))
    if os.path.lexists(path) and not path.is_file():
        what = "a folder" if path.is_dir() else "a special file (a FIFO, socket or device)"
        raise ValueError(f"{path} is {what}, where this command writes a file: remove it, or choose another "
                         f"output folder")
    return path


def make_dir(path: str | Path, root: str | Path | None = None) -> Path:
    """mkdir -p `path`, refusing a symbolic link at `path` or (with `root`, the output folder it
    lies in) anywhere between `root` and it: checked before and after making it."""
    path = Path(path)
    root = path if root is None else Path(root)
    _no_link_between(root, path)
    path.mkdir(parents=True, exist_ok=True)
    return _no_link_between(root, path)


def _no_link_between(root: Path, path: Path) -> Path:
    """`path` if it lies in `root` (by name) and neither `root` nor anything on the way to `path`,
    `path` included, is a symbolic link."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        raise ValueError(f"{path} lies outside {root}, the folder this command writes into") from None
    if ".." in rel.parts:
        raise ValueError(f"{path} leaves {root}, the folder this command writes into")
    p = root
    for part in ("", *rel.parts):
        p = p / part if part else p
        if p.is_symlink():
            raise ValueError(f"{p} is a symbolic link (to {os.readlink(p)}); minibert never writes through a "
                             f"link: remove it, or choose another output folder")
    return path


def write_output(path: str | Path, content: str | Callable[[Path], None], root: str | Path | None = None) -> Path:
    """Write an output that check_output accepted: `content` is the text, or write(path) that
    fills the file, atomically (temporary file, fsync, rename). A link, a device, a FIFO or a
    socket at `path` is refused (check_output's rule, again at the moment of writing). `root`:
    the output folder `path` lies in (inside_output's check, and its missing folders made)."""
    path = Path(path)
    write = content if callable(content) else lambda p: p.write_text(content, encoding="utf-8")
    if root is not None:
        inside_output(root, path)
        make_dir(path.parent, root)
        return atomic_write(path, write)
    if path.is_symlink():
        raise ValueError(f"{path} is a symbolic link (to {os.readlink(path)}); minibert never writes through a "
                         f"link: remove it, or choose another output")
    if os.path.lexists(path) and not path.is_file():
        raise ValueError(f"{path} is not a regular file (a device, a FIFO, a socket or a folder); give a file to "
                         f"write")
    return atomic_write(path, write)


def save_figure(fig, path: str | Path, root: str | Path | None = None, **savefig) -> Path:
    """A matplotlib figure written by write_output (its format from the name's suffix, since the
    temporary file's name ends in .tmp)."""
    fmt = Path(path).suffix.lstrip(".") or "png"
    return write_output(path, lambda tmp: fig.savefig(tmp, format=fmt, **savefig), root)


def save_arrays(path: str | Path, arrays: dict, root: str | Path | None = None) -> Path:
    """NumPy arrays in one .npz (np.savez), written by write_output."""
    # lazy: keeps NumPy out of the start of `python -m minibert corpus` and 5 more
    import numpy as np

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
    return write_output(path, write, root)


def replace_dir(tmp: str | Path, final: str | Path, root: str | Path) -> Path:
    """Put the folder `tmp`, filled under a temporary name inside the output folder `root`, in
    place of `final` (an older `final` is removed first: not atomic for a reader, but a folder
    is complete whenever it has its final name). No link is followed on the way to either."""
    tmp, final, root = Path(tmp), Path(final), Path(root)
    _no_link_between(root, tmp)
    _no_link_between(root, final)
    if final.is_dir():
        shutil.rmtree(final)
    elif os.path.lexists(final):
        final.unlink()
    os.replace(tmp, final)
    return final
