"""Every kind of route around the grader that issue 60's learner found, written as a learner's
exercise cell for one toy exercise that the library answers: GELU's backward
(`layers.gelu_backward(dout, GeluCache(x, "none"))`). tests/lessons/test_room.py grades each cell
in the exam room (lessons/room.py) and asserts that every one fails: the room's process has no
minibert and refuses reading its files, so there is no library object or text for any route to
hold. Each cell is one route; its function is `my_gelu_backward__<route>`."""
# %% a closure cell holding the library function
def _make():
    from minibert import layers
    f = layers.gelu_backward

    def inner(dout, x):
        return f(dout, layers.GeluCache(x, "none"))
    return inner


_closed = _make()


def my_gelu_backward__closure_cell(dout, x):
    return _closed(dout, x)


# %% a class attribute (staticmethod) holding the library function
from minibert import layers  # noqa: E402


class _Holder:
    f = staticmethod(layers.gelu_backward)


def my_gelu_backward__staticmethod(dout, x):
    return _Holder.f(dout, (x, "none"))


# %% a metaclass __call__ that hands the grader a class
class _Meta(type):
    def __call__(cls, dout, x):
        import minibert.layers as L
        return L.gelu_backward(dout, (x, "none"))


class my_gelu_backward__metaclass(metaclass=_Meta):
    pass


# %% a decorator that hands the grader a class
def _as_class(fn):
    import minibert.layers as L

    class Graded:
        def __new__(cls, dout, x):
            return L.gelu_backward(dout, (x, "none"))
    return Graded


@_as_class
def my_gelu_backward__decorator_class(dout, x):
    return dout


# %% a thread started before grading, holding the library's answer
import queue  # noqa: E402
import threading  # noqa: E402

_jobs, _answers = queue.Queue(), queue.Queue()


def _serve():
    import minibert.layers as L
    while True:
        dout, x = _jobs.get()
        _answers.put(L.gelu_backward(dout, (x, "none")))


threading.Thread(target=_serve, daemon=True).start()


def my_gelu_backward__thread_before(dout, x):
    _jobs.put((dout, x))
    return _answers.get(timeout=1)  # (in the room the thread dies at its import: nothing comes)


# %% a code object copied with another file name and line number
def _copy():
    import minibert.layers as L
    code = L.gelu_backward.__code__.replace(co_filename="<mine>", co_firstlineno=1)
    import types
    return types.FunctionType(code, L.__dict__)


def my_gelu_backward__code_copy(dout, x):
    return _copy()(dout, (x, "none"))


# %% the library's source through os.link to a .txt, then exec with shifted lines
def my_gelu_backward__os_link(dout, x):
    import os
    import tempfile
    here = os.environ.get("MINIBERT_ROOM_FORBIDDEN", "[]")
    import json
    src = os.path.join(json.loads(here)[0], "layers.py")
    dst = os.path.join(tempfile.mkdtemp(), "layers.txt")
    os.link(src, dst)
    ns = {}
    exec(compile("\n" * 7 + open(dst).read(), "<mine>", "exec"), ns)
    return ns["gelu_backward"](dout, (x, "none"))


# %% libc's open through ctypes
def my_gelu_backward__ctypes_libc(dout, x):
    import ctypes
    import json
    import os
    libc = ctypes.CDLL(None)
    path = os.path.join(json.loads(os.environ["MINIBERT_ROOM_FORBIDDEN"])[0], "layers.py").encode()
    fd = libc.open(path, 0)
    buf = ctypes.create_string_buffer(1 << 20)
    n = libc.read(fd, buf, 1 << 20)
    ns = {}
    exec(buf.raw[:n].decode(), ns)
    return ns["gelu_backward"](dout, (x, "none"))


# %% ctypes.pythonapi (already loaded) asked for a native function
def my_gelu_backward__pythonapi_symbol(dout, x):
    import ctypes
    ctypes.pythonapi.open  # libc's open, through the interpreter's own handle
    return dout


# %% loader.get_code of the library's file
def my_gelu_backward__loader_get_code(dout, x):
    import importlib.machinery
    import json
    import os
    path = os.path.join(json.loads(os.environ["MINIBERT_ROOM_FORBIDDEN"])[0], "layers.py")
    code = importlib.machinery.SourceFileLoader("layers_copy", path).get_code("layers_copy")
    ns = {}
    exec(code, ns)
    return ns["gelu_backward"](dout, (x, "none"))


# %% spec_from_file_location + exec_module
def my_gelu_backward__spec_from_file(dout, x):
    import importlib.util
    import json
    import os
    path = os.path.join(json.loads(os.environ["MINIBERT_ROOM_FORBIDDEN"])[0], "layers.py")
    spec = importlib.util.spec_from_file_location("layers_copy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.gelu_backward(dout, (x, "none"))


# %% a new process that prints the file (cat), or runs the library
def my_gelu_backward__subprocess(dout, x):
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", "import minibert"], capture_output=True)
    return dout * 0 + out.returncode


def my_gelu_backward__os_system(dout, x):
    import os
    os.system("true")
    return dout


def my_gelu_backward__posix_spawn(dout, x):
    import os
    os.posix_spawn("/bin/true", ["true"], {})
    return dout


# %% an @njit closure over a library kernel
import numba  # noqa: E402
from minibert import kernels  # noqa: E402


@numba.njit
def _jit(d, a):
    kernels.softmax_backward_head(d, a, a, 0, 0, False, 1.0)
    return d


def my_gelu_backward__njit_library(dout, x):
    _jit(dout.copy(), x.copy())
    return dout


# %% a __subclasses__ walk to the live grader
def my_gelu_backward__subclasses_walk(dout, x):
    rooms = [c for c in object.__subclasses__() if c.__name__ in ("CleanRoom", "Exercises", "Room")]
    return rooms[0].library_answer(dout, x)


# %% default arguments, generators, np.frompyfunc / np.vectorize
def my_gelu_backward__default_argument(dout, x, f=__import__("minibert.layers").layers.gelu_backward):
    return f(dout, (x, "none"))


def _gen():
    from minibert import layers as L
    while True:
        dout, x = yield
        yield L.gelu_backward(dout, (x, "none"))


def my_gelu_backward__generator(dout, x):
    g = _gen()
    next(g)
    return g.send((dout, x))


def my_gelu_backward__vectorize(dout, x):
    import numpy as np
    from minibert import layers as L
    f = np.vectorize(lambda d, v: L.gelu_backward(np.array(d), (np.array(v), "none")))
    return f(dout, x)


# %% a stash in builtins, sys.modules, importlib
def my_gelu_backward__builtins_stash(dout, x):
    import builtins
    return builtins.__dict__["_minibert_layers"].gelu_backward(dout, (x, "none"))


def my_gelu_backward__sys_modules(dout, x):
    import sys
    return sys.modules["minibert.layers"].gelu_backward(dout, (x, "none"))


def my_gelu_backward__importlib(dout, x):
    import importlib
    return importlib.import_module("minibert.layers").gelu_backward(dout, (x, "none"))


# %% pickle / deepcopy of functions, traceback frames
def my_gelu_backward__pickle(dout, x):
    import pickle
    f = pickle.loads(b"\x80\x04\x95\x1e\x00\x00\x00\x00\x00\x00\x00\x8c\x0fminibert.layers\x94\x8c\rgelu_backward\x94\x93\x94.")
    return f(dout, (x, "none"))


def my_gelu_backward__traceback_frame(dout, x):
    import sys
    try:
        raise RuntimeError
    except RuntimeError:
        frame = sys.exc_info()[2].tb_frame
    while frame is not None:  # up to the grader's frames: in the room, the room's own loop
        if "layers" in frame.f_globals:
            return frame.f_globals["layers"].gelu_backward(dout, (x, "none"))
        frame = frame.f_back
    raise LookupError("no frame holds the library")


# %% a subclass of a library model
from minibert.family.albert import AlbertForPreTraining  # noqa: E402


class _Mine(AlbertForPreTraining):
    pass


def my_gelu_backward__library_subclass(dout, x):
    return _Mine.__mro__[1].__module__ and dout


# %% the lesson's own variable holding the answer (it is in another cell of the lesson)
def my_gelu_backward__lesson_variable(dout, x):
    return ANSWER  # noqa: F821 - the lesson's, defined in the test's namespace


# %% a thread pool, __wrapped__, importlib.reload, inspect.getsource + exec
def my_gelu_backward__thread_pool(dout, x):
    from concurrent.futures import ThreadPoolExecutor

    def job():
        import minibert.layers as L
        return L.gelu_backward(dout, (x, "none"))
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(job).result()


def my_gelu_backward__wrapped(dout, x):
    import functools
    from minibert import layers as L
    return functools.wraps(L.gelu_backward)(lambda *a: None).__wrapped__(dout, (x, "none"))


def my_gelu_backward__reload(dout, x):
    import importlib
    import sys
    module = importlib.reload(sys.modules.get("minibert.layers") or importlib.import_module("minibert.layers"))
    return module.gelu_backward(dout, (x, "none"))


def my_gelu_backward__getsource_exec(dout, x):
    import inspect
    import json
    import os
    import types
    path = os.path.join(json.loads(os.environ["MINIBERT_ROOM_FORBIDDEN"])[0], "layers.py")
    module = types.ModuleType("layers_copy")
    module.__file__ = path
    ns = {}
    exec(inspect.getsource(module), ns)
    return ns["gelu_backward"](dout, (x, "none"))


# %% routes nobody listed: where the package says it lives, the git objects that hold every version
def my_gelu_backward__find_spec_origin(dout, x):
    import importlib.util
    spec = importlib.util.find_spec("minibert.layers")
    ns = {}
    exec(open(spec.origin).read(), ns)
    return ns["gelu_backward"](dout, (x, "none"))


def my_gelu_backward__git_objects(dout, x):
    import json
    import os
    import zlib
    lessons = json.loads(os.environ["MINIBERT_ROOM_FORBIDDEN"])[1]
    objects = os.path.join(os.path.dirname(lessons), ".git", "objects")
    for folder, _, files in os.walk(objects):
        for name in files:
            data = zlib.decompress(open(os.path.join(folder, name), "rb").read())
            if b"def gelu_backward(" in data:
                ns = {}
                exec(data.split(b"\0", 1)[1].decode(), ns)
                return ns["gelu_backward"](dout, (x, "none"))
    raise LookupError("no object holds it")


def my_gelu_backward__repository_walk(dout, x):
    import json
    import os
    root = os.path.dirname(json.loads(os.environ["MINIBERT_ROOM_FORBIDDEN"])[1])
    for folder, dirs, files in os.walk(root):  # any readable copy of the function's text in the repository
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("runs", "data")]  # (not the venv)
        for name in files:
            try:
                text = open(os.path.join(folder, name), encoding="utf-8").read()
            except (OSError, UnicodeDecodeError, PermissionError):
                continue
            if "def gelu_backward(" in text and "GeluCache" in text and "my_gelu_backward" not in text:
                ns = {}
                exec(text, ns)
                return ns["gelu_backward"](dout, (x, "none"))
    raise LookupError("no readable copy")


# %% a copy of the library made by the cell itself in the lesson's own process (where the cell's
# top-level code runs first, as the lesson script runs), read in the room: from the temporary
# folder, from the room's own folder of cells, from shared memory; or served over a socket
import os as _os  # noqa: E402
import tempfile as _tempfile  # noqa: E402

_COPIES = [_os.path.join(_tempfile.gettempdir(), "minibert_route_layers_copy.py"),
           _os.path.join(_tempfile.gettempdir(), f"minibert-exam-room-{_os.getuid()}", "planted_layers.py"),
           _os.path.join(_tempfile.gettempdir(), f"minibert-exam-room-{_os.getuid()}", "cell_0123456789abcdef.py"),
           "/dev/shm/minibert_route_layers_copy.py"]
try:  # in the lesson's process: the library is there to copy; in the room this fails, and the paths stay
    import shutil as _shutil

    import minibert.layers as _L
    for _where in _COPIES:
        if _os.path.isdir(_os.path.dirname(_where)):
            _shutil.copy(_L.__file__, _where)
except Exception:  # noqa: BLE001 - the room
    pass


def _from_copies(dout, x, which):
    ns = {}
    exec(open(_COPIES[which]).read().replace("from minibert import philox", "philox = None"), ns)
    return ns["gelu_backward"](dout, ns["GeluCache"](x, "none"))


def my_gelu_backward__copy_in_tmp(dout, x):
    return _from_copies(dout, x, 0)


def my_gelu_backward__copy_in_cells_folder(dout, x):
    return _from_copies(dout, x, 1)


def my_gelu_backward__copy_as_a_cell_file(dout, x):
    return _from_copies(dout, x, 2)


def my_gelu_backward__copy_in_shared_memory(dout, x):
    return _from_copies(dout, x, 3)


try:  # in the lesson's process: a thread that serves the library's file on a local port
    import socket as _socket
    import threading as _threading

    import minibert.layers as _L2
    _server = _socket.socket()
    _server.bind(("127.0.0.1", 0))
    _server.listen(1)
    _PORT = _server.getsockname()[1]
    with open(_os.path.join(_tempfile.gettempdir(), "minibert_route_port"), "w") as _f:
        _f.write(str(_PORT))

    def _serve_file():
        conn, _ = _server.accept()
        conn.sendall(open(_L2.__file__, "rb").read())
        conn.close()
    _threading.Thread(target=_serve_file, daemon=True).start()
except Exception:  # noqa: BLE001 - the room
    pass


def my_gelu_backward__socket_to_the_lesson(dout, x):
    import socket
    port = int(open(_os.path.join(_tempfile.gettempdir(), "minibert_route_port")).read())
    conn = socket.create_connection(("127.0.0.1", port))
    data = b""
    while chunk := conn.recv(1 << 16):
        data += chunk
    ns = {}
    exec(data.decode().replace("from minibert import philox", "philox = None"), ns)
    return ns["gelu_backward"](dout, ns["GeluCache"](x, "none"))


# %% found by a fresh reader: a directory descriptor and a path relative to it (the repository's root,
# or the lesson process's working folder through /proc), the cells of other runs left in the room's
# folder (the tests' answers typed in), importlib.import_module (the finders, not the import event)
def my_gelu_backward__dir_fd(dout, x):
    import json
    import os
    root = os.path.dirname(json.loads(os.environ["MINIBERT_ROOM_FORBIDDEN"])[1])
    fd = os.open("minibert/layers.py", os.O_RDONLY, dir_fd=os.open(root, os.O_RDONLY))
    ns = {}
    exec(os.fdopen(fd, encoding="utf-8").read().replace("from minibert import philox", "philox = None"), ns)
    return ns["gelu_backward"](dout, ns["GeluCache"](x, "none"))


def my_gelu_backward__parent_cwd(dout, x):
    import os
    fd = os.open("minibert/layers.py", os.O_RDONLY, dir_fd=os.open(f"/proc/{os.getppid()}/cwd", os.O_RDONLY))
    ns = {}
    exec(os.fdopen(fd, encoding="utf-8").read().replace("from minibert import philox", "philox = None"), ns)
    return ns["gelu_backward"](dout, ns["GeluCache"](x, "none"))


_OTHER_RUN = ("import math\nimport numpy as np\n\n\ndef _impl_gelu_backward(dout, x):\n"
              "    erf = np.vectorize(math.erf)\n"
              "    return dout * (0.5 * (1 + erf(x / math.sqrt(2))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi))\n")
try:  # in the lesson's process: an answer left in the room's folder by another run, under its true digest
    import hashlib as _hashlib
    _digest = _hashlib.sha1(("2\0" + _OTHER_RUN).encode()).hexdigest()[:16]
    _folder = _os.path.join(_tempfile.gettempdir(), f"minibert-exam-room-{_os.getuid()}")
    if _os.path.isdir(_folder) and "minibert" in __import__("sys").modules:
        with open(_os.path.join(_folder, f"cell_{_digest}.py"), "w") as _f:
            _f.write(_OTHER_RUN)
        _COPIES.append(_os.path.join(_folder, f"cell_{_digest}.py"))
except Exception:  # noqa: BLE001 - the room
    pass


def my_gelu_backward__cells_of_other_runs(dout, x):
    import glob
    import os
    for path in glob.glob(os.path.join(os.getcwd(), "cell_*.py")):
        try:
            text = open(path).read()
        except PermissionError:
            continue  # (refused: try the next)
        if text.startswith("import math\nimport numpy as np\n\n\ndef _impl_gelu_backward("):  # not this file's cell
            ns = {}
            exec(text, ns)
            return ns["_impl_gelu_backward"](dout, x)
    raise LookupError("no other run's cell")


def my_gelu_backward__import_module(dout, x):
    import importlib
    import sys
    sys.modules.pop("minibert", None)
    return importlib.import_module("minibert.layers").gelu_backward(dout, (x, "none"))


# %% found by an attacker: a value sent back that the lesson's process would run (the room's own
# Source class, reached through its frames or its garbage collector), or a reply forged on the
# room's data stream carrying source
def my_gelu_backward__source_sent_back(dout, x):
    import gc
    Source = next(o for o in gc.get_objects() if isinstance(o, type) and o.__name__ == "Source")
    text = "import minibert.layers as L\nanswer = L.gelu_backward(dout, L.GeluCache(x, 'none'))\n"
    return Source(text, "answer", dout=dout, x=x)


def my_gelu_backward__source_from_frames(dout, x):
    import sys
    frame = sys._getframe(1)
    while "Source" not in frame.f_globals:
        frame = frame.f_back
    text = "import minibert.layers as L\nanswer = L.gelu_backward(dout, L.GeluCache(x, 'none'))\n"
    return frame.f_globals["Source"](text, "answer", dout=dout, x=x)


def my_gelu_backward__forged_reply(dout, x):
    import io
    import json
    import struct
    import sys
    text = "import minibert.layers as L\nanswer = L.gelu_backward(dout, L.GeluCache(x, 'none'))\n"
    blobs = []
    for a in (dout, x):
        buf = io.BytesIO()
        np.save(buf, a, allow_pickle=False)  # noqa: F821 - the room's np
        blobs.append(buf.getvalue())
    head = json.dumps({"result": {"src": text, "name": "answer", "bind": {"d": [["dout", {"a": 0}], ["x", {"a": 1}]]}},
                       "inputs": 0, "sizes": [len(b) for b in blobs]}).encode()
    out = sys.__stdout__.buffer
    out.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))
    out.flush()
    return dout


# %% found by an attacker: the grader's own upstream gradient zeroed in place, so that what it
# compares with (computed from it after the call) is zero too
def my_gelu_backward__zeroed_inputs(dout, x):
    dout[...] = 0.0
    return dout.copy()


# %% found by a second attacker: a program started below the audit hook (`_posixsubprocess.fork_exec`),
# a symbolic link flipped between the check and the open, the working folder flipped the same way;
# and a file from elsewhere brought into the room's folder by a hard link or a rename
def my_gelu_backward__fork_exec(dout, x):
    import _posixsubprocess
    import json
    import os
    root = os.path.dirname(json.loads(os.environ["MINIBERT_ROOM_FORBIDDEN"])[1])
    r, w = os.pipe()
    er, ew = os.pipe()
    args = [b"/bin/cat", (root + "/minibert/layers.py").encode()]
    _posixsubprocess.fork_exec(args, [b"/bin/cat"], True, (w, ew), None, None, -1, -1, -1, w, -1, -1, er, ew, True,
                               False, -1, -1, None, -1, -1, None, False)
    os.close(w)
    os.close(ew)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    ns = {}
    exec(data.decode().replace("from minibert import philox", "philox = None"), ns)
    return ns["gelu_backward"](dout, ns["GeluCache"](x, "none"))


def _race(flip, path: str, tries: int = 3000):
    import threading
    stop = []

    def run():
        i = 0
        while not stop:
            i += 1
            flip(i)
    t = threading.Thread(target=run)
    t.start()
    try:
        for _ in range(tries):
            try:
                with open(path) as f:
                    text = f.read()
            except (PermissionError, FileNotFoundError, NotADirectoryError):
                continue
            if "def gelu_backward" in text:
                return text
    finally:
        stop.append(1)
        t.join()
    raise LookupError("the race was not won")


def _decoy(own: str) -> str:
    import os
    fake = os.path.join(own, "fake")
    os.makedirs(os.path.join(fake, "minibert"), exist_ok=True)
    with open(os.path.join(fake, "minibert", "layers.py"), "w") as f:
        f.write("# decoy\n")
    return fake


def my_gelu_backward__symlink_race(dout, x):
    import os
    own = os.getcwd()
    fake, q = _decoy(own), os.path.join(own, "q")

    def flip(i):
        try:
            os.unlink(q)
        except FileNotFoundError:
            pass
        os.symlink(f"/proc/{os.getppid()}/cwd" if i % 2 else fake, q)
    text = _race(flip, os.path.join(q, "minibert", "layers.py"))
    ns = {}
    exec(text.replace("from minibert import philox", "philox = None"), ns)
    return ns["gelu_backward"](dout, ns["GeluCache"](x, "none"))


def my_gelu_backward__chdir_race(dout, x):
    import json
    import os
    own = os.getcwd()
    root = os.path.dirname(json.loads(os.environ["MINIBERT_ROOM_FORBIDDEN"])[1])
    fake = _decoy(own)
    try:
        text = _race(lambda i: os.chdir(root if i % 2 else fake), "minibert/layers.py")
    finally:
        os.chdir(own)
    ns = {}
    exec(text.replace("from minibert import philox", "philox = None"), ns)
    return ns["gelu_backward"](dout, ns["GeluCache"](x, "none"))


def my_gelu_backward__hard_link_in(dout, x):
    import os
    import tempfile
    mine = os.path.join(os.getcwd(), "linked.py")
    os.link(os.path.join(tempfile.gettempdir(), "..", "minibert_route_layers_copy.py"), mine)
    ns = {}
    exec(open(mine).read().replace("from minibert import philox", "philox = None"), ns)
    return ns["gelu_backward"](dout, ns["GeluCache"](x, "none"))


def my_gelu_backward__rename_in(dout, x):
    import os
    import tempfile
    mine = os.path.join(os.getcwd(), "moved.py")
    os.rename(os.path.join(tempfile.gettempdir(), "..", "minibert_route_layers_copy.py"), mine)
    ns = {}
    exec(open(mine).read().replace("from minibert import philox", "philox = None"), ns)
    return ns["gelu_backward"](dout, ns["GeluCache"](x, "none"))


# %% found by a third attacker: a relative path with `..` read through a folder descriptor (dir_fd) of
# Python's installation, which the open event does not show, from deep inside the room's own folder;
# the same through os.link's src_dir_fd
def _deep_relative():
    import json
    import os
    import sys
    root = os.path.dirname(json.loads(os.environ["MINIBERT_ROOM_FORBIDDEN"])[1])
    own = os.getcwd()
    inst = os.path.realpath(sys.base_prefix)
    deep = os.path.join(own, *["d"] * 12)
    os.makedirs(deep, exist_ok=True)
    os.chdir(deep)
    return own, os.open(inst, os.O_RDONLY), "../" * inst.count("/") + (root + "/minibert/layers.py").lstrip("/")


def my_gelu_backward__dir_fd_dotdot(dout, x):
    import os
    own, base, rel = _deep_relative()
    try:
        text = os.fdopen(os.open(rel, os.O_RDONLY, dir_fd=base), encoding="utf-8").read()
    finally:
        os.chdir(own)
    ns = {}
    exec(text.replace("from minibert import philox", "philox = None"), ns)
    return ns["gelu_backward"](dout, ns["GeluCache"](x, "none"))


def my_gelu_backward__link_src_dir_fd(dout, x):
    import os
    own, base, rel = _deep_relative()
    mine = os.path.join(own, "linked2.py")
    try:
        os.link(rel, mine, src_dir_fd=base)
    finally:
        os.chdir(own)
    ns = {}
    exec(open(mine).read().replace("from minibert import philox", "philox = None"), ns)
    return ns["gelu_backward"](dout, ns["GeluCache"](x, "none"))
