"""The exam room: a process of its own where your exercise runs, and where the library does not exist.

Why it holds, in one screen:

- The room is a separate Python process (`python -I`, once per lesson run, reused for its
  exercises), in a folder of its own made for the run and removed after it, with an environment
  built from an allow-list. `minibert`, `lessons`, `course` and the solutions are never imported
  there: it starts with NumPy and the standard library (Numba when your cell names it).
- Before any of your code runs, an audit hook (`sys.addaudithook`: it cannot be removed, and what
  it decides by sits in its own closure, out of your code's reach) refuses in that process:
  importing `minibert`, `lessons`, `course` or `solutions` (also through importlib's finders);
  reading any file outside Python's installation (the standard library, NumPy, Numba), the room's
  own folder and a few device and system files, and by name the repository's `minibert/`,
  `lessons/` and git folders and the installed package; writing outside its own folder; symbolic
  links, hard links and renames from outside its folder or through a folder descriptor, a relative
  path with `..` (a folder descriptor the event does not show could anchor it), and leaving its
  folder as the working folder (a path that changes between the check and the open); new processes, sockets, databases; the
  garbage collector's views of every object and other threads' frames; native libraries from
  outside Python's installation, and native functions other than the compiler's and the
  interpreter's own (`LLVMPY_*`, `Py*`). On Linux a seccomp filter, set before anything else,
  makes starting any program fail however it is asked for.
- Your exercise cell is executed there from its SOURCE (the function and whatever the cell
  defines: helpers, constants, classes, decorators), in a namespace of its own for each exercise.
  What it builds on crosses as source too: the lesson's imports of NumPy/standard-library names,
  your answers to the lesson's earlier exercises that the cell calls, and, where an exercise allows
  library pieces, copies of exactly those made from their source (`layers.gelu_forward` in 01,
  ...), under the names the lesson uses and, while your code runs, under the library's own
  (`from minibert.layers import gelu_forward` finds the copy). Never a file of the library's or
  the solutions' as a cell. Nothing else of the library.
- Inputs cross as plain data: arrays in NumPy's own format (np.save / np.load, allow_pickle=False),
  numbers, strings, lists, tuples, dicts, named tuples (as field names and values) and a NumPy
  random Generator (as its bit generator's state, handed back after the call). What comes back
  (your results, your calls of a function the grader hands you) is data only: the lesson's process
  runs nothing the room sends. The grader draws the inputs, compares the results and writes its
  diagnoses in the lesson's own process.

So no library object can be in your function's reach, whatever route it takes: there is none in the
process, and no copy of the library made anywhere else (by your cell's own top-level code, which
the lesson's process runs first, say) has a place to be read from.

What the room does not stop: typing (or pasting) the library's code by hand, which is the one
honest way left to cheat; a program run in the lesson's own process (the same user) that writes the
library into Python's installation, or into the room's folder while it runs, or that changes the
grader there; native code that reads or writes the interpreter's memory (ctypes through Numba's own
compiler handles). Only the operating system could keep the lesson's process and the room apart."""
from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOM_VERSION = "2"  # in the names of the cell files: a change of how cells run gives Numba a fresh cache
FORBIDDEN_MODULES = ("minibert", "lessons", "course", "solutions", "room")


class NotPlain(TypeError):
    """A value that cannot cross into the room as plain data (a function, an object)."""


class Source:
    """A function handed to the room as its source text (`name` defined by `text`), with plain-data
    bindings: a piece the lesson gives, which runs in the room beside your code (lesson 00's pretend
    loss `f`, over the very array your function nudges)."""

    def __init__(self, text: str, name: str, **bindings):
        self.text, self.name, self.bindings = text, name, bindings
        self._here = None

    def __call__(self, *args, **kwargs):  # in the lesson's process (a reference solution graded there)
        if self._here is None:
            import numpy as np

            ns = {"np": np, **self.bindings}
            exec(compile(self.text, f"<the lesson's {self.name}>", "exec"), ns)
            self._here = ns[self.name]
        return self._here(*args, **kwargs)


class RoomError(Exception):
    """Your code raised in the room: type name, message and the line of your cell."""

    def __init__(self, kind: str, message: str, line: int | None, text: str, missing: str | None = None):
        super().__init__(f"{kind}: {message}")
        self.kind, self.message, self.line, self.text, self.missing = kind, message, line, text, missing


# ---------------------------------------------------------------------------------------------
# plain data, both ways


def encode(value, arrays: list, rngs: list | None = None, calls: list | None = None, expose: tuple = ()):
    """`value` as a JSON tree (arrays by their index in `arrays`, the same array object once);
    `rngs` collects random generators (their state comes back), `calls` the functions that the
    room may call back (the grader's own, which run in the lesson's process on plain data)."""
    import dataclasses

    import numpy as np

    def again(v):
        return encode(v, arrays, rngs, calls, expose)

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and not isinstance(value, np.generic):
        return {"f": repr(value)}  # nan, inf and every bit kept
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise NotPlain("an array of Python objects")
        seen = next((i for i, a in enumerate(arrays) if a is value), None)
        if seen is None:
            arrays.append(value)
            seen = len(arrays) - 1
        return {"a": seen}
    if isinstance(value, np.generic):
        arrays.append(np.asarray(value))
        return {"s": len(arrays) - 1}
    if isinstance(value, np.random.Generator) and rngs is not None:
        rngs.append(value)
        return {"rng": type(value.bit_generator).__name__, "state": value.bit_generator.state,
                "i": len(rngs) - 1}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {"nt": type(value).__name__, "fields": list(value._fields), "v": [again(v) for v in value]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # its fields, as a named tuple
        fields = [f.name for f in dataclasses.fields(value)]
        return {"nt": type(value).__name__, "fields": fields, "v": [again(getattr(value, f)) for f in fields]}
    if isinstance(value, tuple):
        return {"t": [again(v) for v in value]}
    if isinstance(value, list):
        return [again(v) for v in value]
    if isinstance(value, dict):
        return {"d": [[again(k), again(v)] for k, v in value.items()]}
    if isinstance(value, Source):
        return {"src": value.text, "name": value.name, "bind": again(value.bindings)}
    if callable(value) and calls is not None:
        calls.append(value)
        return {"cb": len(calls) - 1}
    members = [m for m in expose if hasattr(type(value), m)] if calls is not None else []
    if members:  # an object of which the exercise allows these members: they alone cross (methods called back)
        return {"obj": type(value).__name__, "attrs": {m: again(getattr(value, m)) for m in members}}
    raise NotPlain(f"a {type(value).__name__}")


def decode(tree, arrays: list, rngs: list | None = None, inert: bool = False):
    """The value `encode` made. `inert`: what comes back from the room (your results, the arguments
    of your calls of the grader's functions) is data only: source, callbacks, objects and random
    generators are refused there, since the room's side is yours and the lesson's process must run
    nothing it sends."""
    if inert:
        _check_inert(tree)
    return _decode(tree, arrays, rngs)


def _check_inert(tree) -> None:
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            kinds = set(node) & {"src", "cb", "obj", "rng"}
            if kinds or not set(node) <= {"f", "a", "s", "t", "nt", "fields", "v", "d"}:
                raise NotPlain(f"a value of kind {sorted(kinds or set(node))} sent back from the exam room (only "
                               f"data crosses that way)")
            for key in ("t", "v", "d"):
                if key in node:
                    stack.append(node[key])


def _decode(tree, arrays: list, rngs: list | None = None):
    import numpy as np

    if isinstance(tree, list):
        return [_decode(v, arrays, rngs) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if "f" in tree:
        return float(tree["f"])
    if "a" in tree:
        return arrays[tree["a"]]
    if "s" in tree:
        return arrays[tree["s"]][()]
    if "t" in tree:
        return tuple(_decode(v, arrays, rngs) for v in tree["t"])
    if "nt" in tree:
        from collections import namedtuple

        return namedtuple(tree["nt"], tree["fields"])(*(_decode(v, arrays, rngs) for v in tree["v"]))
    if "src" in tree:
        ns = {"np": np, **_decode(tree["bind"], arrays, rngs)}
        exec(compile(tree["src"], "<the lesson's " + tree["name"] + ">", "exec"), ns)
        return ns[tree["name"]]
    if "cb" in tree:
        return _callback(tree["cb"])
    if "obj" in tree:
        import types

        return types.SimpleNamespace(**{k: _decode(v, arrays, rngs) for k, v in tree["attrs"].items()})
    if "rng" in tree:
        bits = getattr(np.random, tree["rng"])()
        bits.state = tree["state"]
        rng = np.random.Generator(bits)
        if rngs is not None:
            rngs.append(rng)
        return rng
    return {_decode(k, arrays, rngs): _decode(v, arrays, rngs) for k, v in tree["d"]}


def _write(stream, header: dict, arrays: list) -> None:
    import numpy as np

    blobs = []
    for a in arrays:
        buf = io.BytesIO()
        np.save(buf, a, allow_pickle=False)
        blobs.append(buf.getvalue())
    head = json.dumps({**header, "sizes": [len(b) for b in blobs]}).encode()
    stream.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))
    stream.flush()


def _read(stream) -> tuple[dict, list]:
    import numpy as np

    raw = stream.read(8)
    if len(raw) < 8:
        raise EOFError("the exam room closed")
    head = json.loads(stream.read(struct.unpack("<Q", raw)[0]))
    arrays = [np.load(io.BytesIO(stream.read(n)), allow_pickle=False) for n in head.pop("sizes")]
    return head, arrays


# ---------------------------------------------------------------------------------------------
# the lesson's side


class Room:
    """The lesson's handle on its exam room process (started on first use, reused, closed at exit)."""

    def __init__(self, root: Path, package: Path | None = None, lesson: str = "lesson"):
        """`root`: the repository; `package`: where `minibert` is installed, when not in it; `lesson`:
        whose store of Numba's cache this room uses (below)."""
        self.root = Path(root).resolve()
        # Numba's cache of your kernels, kept between runs by this process (never by the room): before a cell
        # loads, the files cached for exactly that cell's text (its digest) are copied into the room's folder;
        # when the room closes, what it cached goes back. One store per lesson and user.
        uid = os.getuid() if hasattr(os, "getuid") else 0
        self.store = Path(tempfile.gettempdir()) / f"minibert-exam-cache-{uid}" / "".join(
            c if c.isalnum() or c in "_-" else "_" for c in lesson)
        # what the room refuses to read: the library, the lessons (and their solutions), the git objects
        # that hold every version of both, and the installed package wherever it is
        self.forbidden = [str(self.root / "minibert"), str(self.root / "lessons"), *_git_folders(self.root)]
        if package is not None and not str(Path(package).resolve()).startswith(self.forbidden[0]):
            self.forbidden.append(str(Path(package).resolve()))
        self.proc: subprocess.Popen | None = None

    def start(self, numba: bool = False) -> None:
        """Start the process now, if it is not running (a call starts it anyway); `numba`: it imports
        Numba at once (your cells will use it), while the lesson runs on."""
        if self.proc is None or self.proc.poll() is not None:
            self._start(numba)

    def _start(self, numba: bool = False) -> None:
        # the room's environment from an allow-list: nothing of the lesson's (a variable naming a folder to
        # read) reaches it; its folder is its own, made now and removed when it closes
        keep = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
        env = {k: v for k, v in os.environ.items() if k in keep or k.startswith(("OMP_", "OPENBLAS_", "MKL_", "NUMBA_"))}
        self.folder = tempfile.mkdtemp(prefix="minibert-exam-room-")
        env.pop("NUMBA_CACHE_DIR", None)  # Numba caches next to each cell's file, in the room's folder
        env.update(MINIBERT_ROOM_FORBIDDEN=json.dumps(self.forbidden), MINIBERT_ROOM_FOLDER=self.folder,
                   TMPDIR=self.folder, MINIBERT_ROOM_NUMBA="1" if numba else "0")
        self.proc = subprocess.Popen([sys.executable, "-I", "-c", _SERVER_START], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, cwd=self.folder, env=env)
        self.proc.stdin.write(Path(__file__).read_bytes())  # this file: the server's own code, as text
        self.proc.stdin.write(b"\n#END-OF-ROOM\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            import shutil

            cache = Path(self.folder) / "__pycache__"
            try:
                for digest in {f.name.split(".")[0][5:] for f in cache.glob("cell_*.nb[ic]")}:
                    self._cached(digest, cache, self.store)
            except OSError:
                pass  # a cache: losing it costs a compile
            shutil.rmtree(self.folder, ignore_errors=True)

    def request(self, header: dict, values: list) -> tuple[dict, list]:
        self.start()
        arrays: list = []
        rngs: list = []
        tree = encode(values, arrays, rngs)
        _write(self.proc.stdin, {**header, "values": tree}, arrays)
        head, out = _read(self.proc.stdout)
        for rng, state in zip(rngs, head.get("rngs", [])):  # the draws made in the room advance the lesson's rng
            rng.bit_generator.state = state
        return head, out

    def load(self, key: str, cell: str, prelude: str = "", earlier: tuple[str, ...] = ()) -> list[str]:
        """Execute a cell (from its source) as exercise `key`'s namespace, after `prelude` and the
        `earlier` cells it builds on (your answers to the lesson's earlier exercises); returns the
        errors of the cell's statements that could not run there (names of the lesson's, refused imports)."""
        self.start()
        self._cached(_cell_digest(cell), self.store, Path(self.folder) / "__pycache__")
        head, _ = self.request({"op": "load", "key": key, "cell": cell, "prelude": prelude, "earlier": list(earlier)},
                               [])
        return head["skipped"]

    @staticmethod
    def _cached(digest: str, source: Path, target: Path) -> None:
        """Copy Numba's cache files of the cell `digest` (`cell_<digest>.*.nbi|nbc`) from `source` to `target`."""
        import shutil

        files = sorted(source.glob(f"cell_{digest}.*.nb[ic]")) if source.is_dir() else []
        if files:
            target.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copy2(f, target / f.name)

    def call(self, key: str, name: str, args: tuple, kwargs: dict, expose: tuple = (), inplace: bool = False):
        """Your function `name` of exercise `key`, called in the room on plain data. `inplace`: the
        exercise asks for arrays changed in place (or restored), so the changes the call made to its
        input arrays are made to the lesson's arrays too; otherwise the grader's arrays stay as they
        were, whatever your function did to its copies."""
        self.start()
        inputs: list = []
        rngs: list = []
        calls: list = []
        tree = encode([list(args), kwargs], inputs, rngs, calls, expose)
        _write(self.proc.stdin, {"op": "call", "key": key, "name": name, "values": tree}, inputs)
        while True:
            head, arrays = _read(self.proc.stdout)
            if "callback" not in head:
                break
            try:  # the grader's function, run here on the room's plain data (lesson 07's block)
                cb_args, cb_kwargs = decode(head["values"], arrays, inert=True)
                out: list = []
                _write(self.proc.stdin, {"result": encode(calls[head["callback"]](*cb_args, **cb_kwargs), out)}, out)
            except Exception as e:  # noqa: BLE001 - raised in the room, in your function's call
                _write(self.proc.stdin, {"error": f"{type(e).__name__}: {e}"}, [])
        for rng, state in zip(rngs, head.get("rngs", [])):  # the draws made in the room advance the lesson's rng
            rng.bit_generator.state = state
        for mine, theirs in zip(inputs if inplace else [], arrays[len(arrays) - head.get("inputs", 0):]):
            if mine.flags.writeable and mine.shape == theirs.shape and not np_equal(mine, theirs):
                mine[...] = theirs  # changed in place in the room: changed here too, as a plain call would
        if "error" in head:
            e = head["error"]
            raise RoomError(e["kind"], e["message"], e.get("line"), e.get("text", ""), e.get("missing"))
        try:
            return decode(head["result"], arrays[:len(arrays) - head.get("inputs", 0)], inert=True)
        except NotPlain as e:
            raise RoomError("TypeError", f"your answer is {e}", None, "") from None

    def ask(self, op: str) -> dict:
        return self.request({"op": op}, [])[0]


def _git_folders(root: Path) -> list[str]:
    """The repository's git folder, and the shared one when `root` is a worktree (`.git` a file)."""
    git = root / ".git"
    if not git.is_file():
        return [str(git)]
    try:
        here = (root / git.read_text(encoding="utf-8").split("gitdir:", 1)[1].strip()).resolve()
        common = here / (here / "commondir").read_text(encoding="utf-8").strip()
        return [str(here), str(common.resolve())]
    except (OSError, IndexError):
        return []


def np_equal(a, b) -> bool:
    import numpy as np

    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def _callback(index: int):
    """In the room: a function that asks the lesson's process to run the grader's function `index`."""
    def call(*args, **kwargs):
        out: list = []
        _write(_STREAMS[1], {"callback": index, "values": encode([list(args), kwargs], out)}, out)
        head, arrays = _read(_STREAMS[0])
        if "error" in head:
            raise RuntimeError(f"the grader's function raised {head['error']}")
        return decode(head["result"], arrays)
    return call


_STREAMS: list = []  # the room's (stdin, stdout)


_SERVER_START = """
import sys
source = []
for line in iter(sys.stdin.buffer.readline, b''):
    if line == b'#END-OF-ROOM\\n':
        break
    source.append(line)
room = {'__name__': '_exam_room'}
exec(compile(b''.join(source), '<exam room>', 'exec'), room)
del source
room['serve']()
"""


# ---------------------------------------------------------------------------------------------
# the room's side (runs in the room process only)


def _install_hook(forbidden: list[str], folder: str) -> None:
    """The room's rules, as an audit hook (it cannot be removed). Everything it decides by is captured
    here, in its closure: no global, no object your code can reach changes it (the hook itself is
    reachable only through the garbage collector, which it refuses).

    - Importing minibert, the lessons or the grading code is refused (and a finder refuses them to
      importlib's own machinery too).
    - Reading is allowed in Python's installation (the standard library, NumPy, Numba), a few device
      and system files, and the room's own folder (made for this run: what it holds, this process
      wrote): nothing else, so no copy of the library made elsewhere can be read here. The
      library's and the lessons' files are refused by name as well.
    - Writing is allowed in the room's own folder only (made for this run, removed after it).
    - No new process, socket or database, no garbage collector's view of every object; no native
      library but those of Python's installation (Numba's compiler), and of native functions only
      the compiler's and the interpreter's own."""
    import os as _os
    import sys as _sys

    refused = tuple(FORBIDDEN_MODULES)
    roots = tuple(_os.path.realpath(p) + _os.sep for p in forbidden)
    own = _os.path.realpath(folder) + _os.sep
    installed = tuple({_os.path.realpath(p) + _os.sep for p in (_sys.prefix, _sys.base_prefix, _sys.exec_prefix,
                                                                 _sys.base_exec_prefix)})
    system = ("/proc/self/", "/proc/cpuinfo", "/proc/meminfo", "/sys/devices/system/cpu/", "/sys/fs/cgroup/")
    devices = ("/dev/null", "/dev/urandom", "/dev/random", "/dev/zero")
    processes = ("subprocess.Popen", "os.system", "os.posix_spawn", "os.fork", "os.forkpty", "os.exec", "os.spawn",
                 "pty.spawn", "os.startfile")
    reaching = ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames", "socket.__new__",
                "socket.connect", "socket.bind", "sqlite3.connect")

    def real(path) -> str:
        return _os.path.realpath(_os.fsdecode(path))

    def under(path, folders) -> bool:  # (a folder ends with the separator: "/a/b" is not under "/a/bc/")
        return (real(path) + _os.sep).startswith(folders)

    def inside(path) -> bool:
        try:
            if isinstance(path, int) or path is None:
                return False
            p = _os.fsdecode(path)
            return any((_os.path.realpath(p) + _os.sep).startswith(r) or
                       (_os.path.abspath(p) + _os.sep).startswith(r) for r in roots)
        except (TypeError, ValueError):
            return False

    def check_open(path, mode, flags) -> None:
        if isinstance(path, int) or path is None:
            return
        if not _os.path.isabs(path) and ".." in _os.fsdecode(path).split(_os.sep):
            # (the event does not say whether a folder descriptor, dir_fd, anchors it: `..` could leave it)
            raise PermissionError(f"a relative path with `..` ({_os.fsdecode(path)}) is refused in the exam room: "
                                  f"write it whole")
        writes = any(c in (mode or "") for c in "wax+") or bool((flags or 0) & (_os.O_WRONLY | _os.O_RDWR | _os.O_CREAT))
        if real(path) in devices:
            return
        if writes:
            if not under(path, own):
                raise PermissionError(f"writing {_os.fsdecode(path)} is refused in the exam room: it writes in its "
                                      f"own folder only")
        elif not under(path, installed + system + (own,)):
            raise PermissionError(f"reading {_os.fsdecode(path)} is refused in the exam room: it reads Python's "
                                  f"installation and its own folder, nothing else")

    def hook(event, args):
        if event == "import":
            if str(args[0]).split(".")[0] in refused:
                raise ImportError(f"importing `{args[0]}` is refused in the exam room: the library does not exist here")
        elif event == "open":
            if inside(args[0]):
                raise PermissionError(f"reading {args[0]} is refused in the exam room (the library's or the "
                                      f"lessons' files)")
            check_open(*args)
        elif event in ("os.link", "os.symlink", "os.rename", "shutil.copyfile", "shutil.copytree"):
            if inside(args[0]) or inside(args[1]):
                raise PermissionError(f"{event} of the library's or the lessons' files is refused in the exam room")
            if event == "os.symlink":  # a link is a path that changes under a check: nothing here needs one
                raise PermissionError("os.symlink is refused in the exam room")
            if any(isinstance(a, int) and a >= 0 for a in args[2:4]):  # src_dir_fd, dst_dir_fd: a real descriptor
                raise PermissionError(f"{event} relative to a folder descriptor is refused in the exam room")
            if event in ("os.link", "os.rename") and not (under(args[0], own) and under(args[1], own)):
                raise PermissionError(f"{event} is refused in the exam room outside its own folder (a file from "
                                      f"elsewhere would become readable here)")
        elif event == "os.chdir":  # relative paths are checked against the working folder: it stays the room's
            if isinstance(args[0], int) or not under(args[0], own):
                raise PermissionError("os.chdir out of its own folder is refused in the exam room")
        elif event in processes:
            raise PermissionError(f"{event}: starting a process is refused in the exam room")
        elif event in reaching:
            raise PermissionError(f"{event} is refused in the exam room (it reaches past your own code)")
        elif event == "ctypes.dlopen" and args[0] is not None and not under(args[0], installed):
            # (None: the interpreter's own symbols, ctypes.pythonapi; the lookups below are filtered)
            raise PermissionError(f"loading the native library {args[0]!r} is refused in the exam room")
        elif event == "ctypes.dlsym" and not str(args[1]).startswith(("LLVMPY_", "Py", "_Py")):
            raise PermissionError(f"looking up the native function {args[1]!r} is refused in the exam room")

    _sys.addaudithook(hook)

    class Refuse:  # importlib.import_module and friends go through the finders, not through the "import" event
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name.split(".")[0] in refused:
                raise ImportError(f"importing `{name}` is refused in the exam room: the library does not exist here")
            return None

    _sys.meta_path.insert(0, Refuse)


def _no_programs() -> bool:
    """On Linux (x86-64, arm64): a seccomp filter, which no code in this process can lift, makes
    starting a program (execve, execveat) fail, whichever way it is asked for (an audit hook sees
    `subprocess` and `os.exec*`, not every native route to them, e.g. `_posixsubprocess.fork_exec`).
    Returns whether it is in place; elsewhere the hook's refusals are all."""
    import ctypes
    import platform
    import struct

    numbers = {"x86_64": (0xC000003E, 59, 322), "aarch64": (0xC00000B7, 221, 281)}.get(platform.machine())
    if sys.platform != "linux" or numbers is None:
        return False
    arch, execve, execveat = numbers
    program = [(0x20, 0, 0, 4),  # load the architecture
               (0x15, 0, 3, arch),  # another one: allow
               (0x20, 0, 0, 0),  # load the system call's number
               (0x15, 2, 0, execve), (0x15, 1, 0, execveat),  # execve, execveat: refuse (EPERM)
               (0x06, 0, 0, 0x7FFF0000), (0x06, 0, 0, 0x00050001)]
    code = b"".join(struct.pack("HBBI", *op) for op in program)
    buf = ctypes.create_string_buffer(code)

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Prog(len(program), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS (needed to install a filter unprivileged)
        return False
    return libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER


def _cell_digest(cell: str) -> str:
    import hashlib

    return hashlib.sha1((ROOM_VERSION + "\0" + cell).encode()).hexdigest()[:16]


def _cell_file(cells_dir: str, cell: str) -> str:
    """The cell's text as a file of its own in the room's folder, named by its contents (Numba's
    `cache=True` needs a file behind a function, and caches next to it for this run)."""
    digest = _cell_digest(cell)
    path = os.path.join(cells_dir, f"cell_{digest}.py")
    if not os.path.exists(path):
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(cell)
        os.utime(tmp, (1e9, 1e9))  # one time for every run: Numba's cache index checks the file's time and size
        os.replace(tmp, path)
    return path


def _run_cell(cell: str, prelude: str, path: str, earlier: list[str]) -> tuple[dict, list[str]]:
    """Execute `prelude` (the lesson's imports, the allowed copies), the `earlier` cells, then each
    top-level statement of the cell; a statement of the cell that fails (it needs a name of the
    lesson's, or a refused import) is skipped and reported."""
    import ast
    import linecache

    import types

    module = types.ModuleType(os.path.splitext(os.path.basename(path))[0])  # a module of its own: Numba caches by it
    module.__file__ = path
    sys.modules[module.__name__] = module
    ns = vars(module)
    skipped = []
    for block in prelude.split("\n\n"):  # one import, or one allowed copy, at a time
        try:
            exec(compile(block, "<the lesson's imports>", "exec"), ns)
        except Exception as e:  # noqa: BLE001 - reported
            skipped.append(f"the lesson's import or allowed copy: {type(e).__name__}: {e}")
    linecache.cache[path] = (len(cell), None, cell.splitlines(True), path)
    tree = ast.parse(cell, path)
    with _Copies(ns):
        for i, text in enumerate(earlier):  # what this cell builds on: its failures are that cell's, not reported
            _run_statements(ast.parse(text), f"<an earlier exercise's cell {i + 1}>", ns, [])
        _run_statements(tree, path, ns, skipped)
    return ns, skipped


def _run_statements(tree, path: str, ns: dict, skipped: list[str]) -> None:
    import ast

    for stmt in tree.body:
        if isinstance(stmt, ast.Expr) and not isinstance(stmt.value, ast.Constant):
            continue  # a call or an expression of the lesson's (ex.grade(...), a print): not part of the answer
        module = ast.Module(body=[stmt], type_ignores=[])
        try:
            exec(compile(module, path, "exec"), ns)
        except Exception as e:  # noqa: BLE001 - reported: the function may not need it
            skipped.append(f"line {stmt.lineno}: {type(e).__name__}: {e}")


class _Copies:
    """While your cell loads and your function runs: the copies of the pieces this exercise allows,
    under their library names in sys.modules (`minibert.layers` holding `gelu_forward` alone), so
    that `from minibert.layers import gelu_forward` finds the copy, wherever the import is written.
    Anything else of `minibert` is not there, and importing it is refused by the hook."""

    def __init__(self, ns: dict):
        import types

        self.modules = {}
        for value in list(ns.values()):
            name = getattr(value, "__library_name__", None) if getattr(value, "__allowed_copy__", False) else None
            if not isinstance(name, str):
                continue
            self.modules[name] = value
            parts = name.split(".")
            for i in range(len(parts) - 1, 0, -1):  # the packages above it: stubs holding only the copies
                parent = ".".join(parts[:i])
                stub = self.modules.setdefault(parent, types.ModuleType(parent))
                setattr(stub, parts[i], self.modules[".".join(parts[:i + 1])])

    def __enter__(self):
        sys.modules.update(self.modules)

    def __exit__(self, *exc):
        for name in self.modules:
            sys.modules.pop(name, None)


def serve() -> None:
    import traceback

    forbidden = json.loads(os.environ["MINIBERT_ROOM_FORBIDDEN"])
    cells_dir = os.environ["MINIBERT_ROOM_FOLDER"]
    _no_programs()
    _install_hook(forbidden, cells_dir)
    import numpy as np  # noqa: F401 - the one library the room has from the start
    if os.environ.get("MINIBERT_ROOM_NUMBA") == "1":
        try:
            import numba  # noqa: F401 - now, while the lesson runs up to its first exercise
        except ImportError:
            pass

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    _STREAMS[:] = [stdin, stdout]
    sys.stdout = sys.stderr  # your prints go to the lesson's stderr, never into the data stream
    spaces: dict[str, tuple[dict, str]] = {}
    while True:
        try:
            head, arrays = _read(stdin)
        except EOFError:
            return
        op = head["op"]
        if op == "load":
            path = _cell_file(cells_dir, head["cell"])
            ns, skipped = _run_cell(head["cell"], head["prelude"], path, head.get("earlier", []))
            spaces[head["key"]] = (ns, path)
            _write(stdout, {"skipped": skipped}, [])
        elif op == "modules":  # what the room has loaded (the tests' proof of the property)
            _write(stdout, {"modules": sorted(sys.modules)}, [])
        elif op == "call":
            ns, path = spaces[head["key"]]
            rngs: list = []
            args, kwargs = decode(head["values"], arrays, rngs)
            try:
                if head["name"] not in ns:
                    raise NameError(f"name {head['name']!r} is not defined", name=head["name"])
                with _Copies(ns):
                    result = ns[head["name"]](*args, **kwargs)
                out: list = []
                tree = encode(result, out)
                _write(stdout, {"result": tree, "rngs": [r.bit_generator.state for r in rngs],
                                "inputs": len(arrays)}, out + list(arrays))  # the inputs too: changed in place?
            except BaseException as e:  # noqa: BLE001 - every error goes back to the grader, named
                frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == path]
                error = {"kind": type(e).__name__, "message": str(e)}
                if isinstance(e, NotPlain):
                    error = {"kind": "TypeError", "message": f"the answer is {e}: return arrays, numbers, strings, "
                                                             f"lists, tuples or dicts of them"}
                if frames:
                    error.update(line=frames[-1].lineno, text=frames[-1].line or "")
                if isinstance(e, NameError):
                    error["missing"] = getattr(e, "name", None)
                _write(stdout, {"error": error, "rngs": [r.bit_generator.state for r in rngs]}, [])
        else:
            _write(stdout, {"error": {"kind": "ValueError", "message": f"unknown op {op}"}}, [])
