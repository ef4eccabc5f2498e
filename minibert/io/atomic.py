"""Files that are never half-written: write into a temporary file beside the target, fsync, then
os.replace it into place. An interrupted write leaves the old file (or none), never a torn one;
a checkpoint of several files is made atomic one level up (minibert/loop/rundir.py)."""
from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path
from typing import Callable


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call write(tmp_path) on a temporary file next to `path`, then os.replace it into place.
    If write raises, the temporary file is removed and an existing `path` is left untouched.
    An OSError (a full disk, a read-only directory) comes out naming `path`. A symbolic link at
    `path` is refused (ValueError), neither written through nor replaced: the rename would put a
    file where a person made a link (io/outputs.py has the rest of the rule)."""
    path = Path(path)
    if path.is_symlink():
        raise ValueError(f"{path} is a symbolic link (to {os.readlink(path)}); minibert never writes through a "
                         f"link: remove it, or choose another output")
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmp = Path(name)
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; give the usual permissions
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and not getattr(e, "minibert_named", False):
            raise write_error(path, e) from None
        raise
    return path


def write_error(path: Path, e: OSError) -> OSError:
    """The OSError `e` met while writing `path`, as one line that names the file (a write that
    fails half-way reports no file name of its own)."""
    reason = e.strerror or str(e)
    hint = " (the disk is full)" if e.errno == errno.ENOSPC else ""
    err = OSError(e.errno, f"cannot write {path}: {reason}{hint}")
    err.minibert_named = True  # already says which file: callers up the stack leave it as it is
    return err


def write_bytes_synced(path: Path, data: bytes) -> None:
    """Write `data` to `path` and fsync it, so a rename that follows publishes complete bytes."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _umask() -> int:
    mask = os.umask(0o022)  # the only portable way to read it is to set it and restore it
    os.umask(mask)
    return mask


def write_text_atomic(path: str | Path, text: str) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
