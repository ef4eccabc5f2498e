"""What every kernel module of minibert.kernels stands on: the process-wide settings the kernels
run best with (`setup()`, `threads()`), `kernel_jit` (numba.njit with the kernels' options, and
the registry `KERNELS` that compile-ahead lists), the serial twin of a parallel kernel
(`serial_version`), the note printed when a kernel compiles, the work sizes the parallel passes
cut their arrays into, and the one freshness stamp of the kernels' Numba cache (`source_stamp`).

Threads: Numba uses NUMBA_NUM_THREADS (default: the number of cores) on its `workqueue` threading
layer (`setup()` below), OpenBLAS its own count (OPENBLAS_NUM_THREADS, default the cores too);
the two take turns, never run at once (a Numba pass waits for the matmul before it and the other
way round; inside attention v4's kernels OpenBLAS is at one thread and runs on Numba's), so
neither needs fewer threads, as long as the idle ones sleep: Numba's workqueue threads do, and
OpenBLAS's after OPENBLAS_THREAD_TIMEOUT, which `setup()` makes OpenBLAS read even when NumPy was
imported before minibert (blas.apply_thread_timeout).
"""
from __future__ import annotations

import hashlib
import os
import sys
import types
from pathlib import Path

import numba
from numba.core import caching
from numba.core import event as numba_event

from minibert.native import blas, malloc


# ---------------------------------------------------------------------------------------------
# The process-wide settings the kernels are measured with. Importing this module changes nothing
# in the process; `setup()` makes the three settings, once. The model's backend switch calls it
# when it hands out the kernels (backend.get_ops, and optim's fused passes through backend), so
# every training, fine-tuning or lesson step that runs the kernels runs with them; code that
# calls a kernel directly (a test, a benchmark) calls setup() itself when its
# speed matters. Each setting yields to an explicit choice in the environment.

_SETUP_DONE = False


def setup() -> None:
    """Make the process-wide settings the kernels run best with (once; later calls do nothing):

    1. Numba's threading layer: `workqueue` (unless NUMBA_THREADING_LAYER is set). Numba's
       parallel loops and OpenBLAS's matmuls take turns on the same cores; Numba's default
       (OpenMP) threads keep spinning after each parallel loop and steal cycles from the BLAS
       threads that run next: a tiny-config training step took 0.75 s with it and 0.58 s with the
       workqueue, whose threads sleep (2 cores, median of 5). Read by Numba at its first parallel
       loop, so this must come before one.
    2. OpenBLAS's idle threads sleep at once too (OPENBLAS_THREAD_TIMEOUT, set by
       minibert/__init__.py): OpenBLAS reads the variable when NumPy loads it, so in a program that
       imported NumPy before minibert, blas.apply_thread_timeout() has it read the variable again
       and restart its (idle) thread pool. A no-op when it is in force.
    3. glibc keeps a step's freed memory for the next step (minibert/native/malloc.py;
       MINIBERT_KEEP_MEMORY=0 turns it off): by default it gives the freed arrays back to the
       kernel and the next step pays a page fault per 4 KiB page again (tiny step: ~7,100 faults,
       60-90 ms of system time per ~200 ms step).
    """
    global _SETUP_DONE
    if _SETUP_DONE:
        return
    _SETUP_DONE = True
    if "NUMBA_THREADING_LAYER" not in os.environ:
        numba.config.THREADING_LAYER = "workqueue"
    blas.apply_thread_timeout()
    malloc.keep_freed_memory()


def threads() -> int:
    """The threads Numba's parallel loops run on (NUMBA_NUM_THREADS, default: the cores)."""
    return numba.get_num_threads()


# Work sizes: the parallel passes cut their arrays into pieces of a fixed size, not one per
# thread, so that results do not depend on the number of threads.
CHUNK = 4096  # elements per parallel work item of the element-wise passes
ROWS_MIN = 1 << 14  # elements per parallel work item of the row-chunked passes


# ---------------------------------------------------------------------------------------------
# One freshness stamp for the whole kernels' cache. Numba keys a function's cached machine code
# by the hash of the function's own source file, but a kernel here compiles in helpers of other
# files (vector_math's building blocks, dropout's random bits, the attention heads that dev/'s
# versions call): with the per-file stamp, an edited vector_math.py would leave attention.py's
# cached kernels holding the old helper. So the cache of every kernel in minibert/kernels/ and
# minibert/dev/ is stamped with its own file's hash and the hash of all the kernel sources
# (`source_stamp`): editing any kernel source recompiles every kernel, as when they were one
# file. compile_ahead's marker keys the warm cache with the same hash.

KERNEL_DIR = Path(__file__).resolve().parent
_STAMPED_DIRS = (KERNEL_DIR, KERNEL_DIR.parent / "dev")


def kernel_sources() -> list[Path]:
    """The kernel modules (every .py of minibert/kernels/ but compile_ahead.py, which has none)."""
    return sorted(p for p in KERNEL_DIR.glob("*.py") if p.name != "compile_ahead.py")


def source_stamp() -> str:
    """sha256 of the kernel sources together (names and bytes, in name order)."""
    files = tuple((p, p.stat().st_mtime_ns, p.stat().st_size) for p in kernel_sources())
    return _hash_sources(files)


_stamps: dict = {}


def _hash_sources(files: tuple) -> str:
    if files not in _stamps:  # read again only when a file's time or size changed
        h = hashlib.sha256()
        for path, _, _ in files:
            h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
        _stamps[files] = h.hexdigest()
    return _stamps[files]


def _stamped(locator: type) -> type:
    """`locator` (a Numba cache locator of functions with a source file) for the kernels' files
    only, with the freshness stamp above added to the file's own."""

    class Stamped(locator):
        @classmethod
        def from_function(cls, py_func, py_file):
            if Path(py_file).resolve().parent not in _STAMPED_DIRS:
                return None
            return super().from_function(py_func, py_file)

        def get_source_stamp(self):
            return super().get_source_stamp(), source_stamp()

    Stamped.__name__ = Stamped.__qualname__ = f"Stamped{locator.__name__}"
    return Stamped


def _numba_caching(name: str):
    """A class of numba.core.caching by its name (public in recent Numba, `_`-prefixed in older ones)."""
    return getattr(caching, name, None) or getattr(caching, "_" + name)


STAMPED_LOCATORS = tuple(_stamped(_numba_caching(name)) for name in
                         ("UserProvidedCacheLocator", "InTreeCacheLocator", "UserWideCacheLocator"))
_numba_caching("CacheImpl")._locator_classes[:0] = STAMPED_LOCATORS  # tried first, in Numba's own order


# Every kernel of minibert.kernels (and of minibert/dev/'s versions) by its function's name,
# filled by `kernel_jit`: what compile_ahead.py lists and compiles ahead.
KERNELS: dict = {}


def kernel_jit(fn=None, **options):
    """numba.njit with the options every kernel here uses: cache=True, and NumPy's error model
    (x / 0 gives inf or nan, as in NumPy). Numba's default Python error model puts a
    ZeroDivisionError check in front of every division, and that branch alone stops LLVM from
    vectorizing a loop that divides. Neither changes a result that the reference computes."""
    options = {"cache": True, "error_model": "numpy", **options}
    # inline="always" (for the small helpers called per element in inner loops) inlines at
    # Numba's level: a helper that LLVM does not inline on its own is a call per element that
    # stops the loop from vectorizing (measured: GELU 4x slower when _erf32 stayed a call).
    # The attention and LayerNorm kernels' per-head and per-row functions are not inlined
    # (see "Compile time" below).

    def register(f):
        if f.__name__ in KERNELS:  # compile-ahead's workers find a kernel by its name
            raise ValueError(f"a kernel named {f.__name__} exists already ({KERNELS[f.__name__].py_func.__module__})")
        kernel = numba.njit(**options)(f)
        KERNELS[f.__name__] = kernel
        return kernel

    return register if fn is None else register(fn)


# ---------------------------------------------------------------------------------------------
# Compile time. A process whose Numba cache is empty (a fresh clone; a changed kernel source)
# compiles each kernel on its first call: a tiny training step needs about 20 of them, about 30 s
# of one core (docs/speed.md, "Cold start"), cached in __pycache__ afterwards (`make venv` fills
# it ahead, in several processes: minibert/kernels/compile_ahead.py). What costs is `parallel=True`:
# Numba compiles the body of a prange loop a second time as its own function, through its own
# passes and LLVM, so each parallel kernel costs 0.5-1 s however small, and a big inlined body
# many seconds (the packed attention forward and backward: 12 and 9 s with the whole head in the
# loop). So the attention and LayerNorm kernels hand each head or row to a plain compiled
# function (`_attention_packed_forward_head`, `_layernorm_forward_row`, ...): it compiles once,
# is shared by the serial twin, and the parallel loop around it stays small (attention: 21 s ->
# 10 s of compiling). Same float operations in the same order, the same bits. The chunk helpers
# of the element-wise kernels stay inlined: out of line, `_drop_mask_into` made dropout 3x slower.
# The first kernel that compiles says so on stderr (`_CompileNotice`), so a cold start is not a
# minute of silence.


class _CompileNotice(numba_event.Listener):
    """Prints "compiling Numba kernel NAME (first run only; cached afterwards)" on stderr when a
    kernel of minibert starts to compile (not when it loads from the cache), for the outermost
    compilation only (not the helpers a kernel compiles on its way)."""

    def __init__(self):
        self.depth = 0

    def on_start(self, event):
        self.depth += 1
        fn = getattr(event.data.get("dispatcher"), "py_func", None)
        if self.depth == 1 and fn is not None and fn.__module__.startswith("minibert"):
            name = fn.__name__.strip("_").removesuffix("_kernel").removesuffix("_kernel_serial")
            print(f"compiling Numba kernel {name} (first run only; cached afterwards)", file=sys.stderr,
                  flush=True)

    def on_end(self, event):
        self.depth -= 1


numba_event.register("numba:compile", _CompileNotice())



def serial_version(kernel):
    """The same Python function compiled without threads and without the GIL, under its own
    name. The name matters: Numba's cache is keyed by the function's name and signature, not by
    its compile options, so compiling `kernel.py_func` itself a second time would share the
    parallel version's cache entries (and load whichever was compiled first)."""
    f = kernel.py_func
    g = types.FunctionType(f.__code__, f.__globals__, f.__name__ + "_serial", f.__defaults__, f.__closure__)
    g.__qualname__ = f.__qualname__ + "_serial"
    g.__doc__ = f.__doc__
    return kernel_jit(g, nogil=True)


