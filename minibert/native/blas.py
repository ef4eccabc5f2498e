"""NumPy's own OpenBLAS, reached through ctypes: a batched matmul, gemm for Numba kernels, threads.

What NumPy does not offer, taken from the OpenBLAS library that NumPy has already
loaded (found in /proc/self/maps, as threadpoolctl finds it; no second copy is loaded):

`matmul(a, b, out)`, out[i] = a[i] @ b[i] over stacks of small matrices, as ONE call of
OpenBLAS's `cblas_?gemm_batch` (OpenBLAS >= 0.3.27), which splits the stack over its threads
and runs each product on one thread. np.matmul on a stack calls a multi-threaded gemm once per
matrix, and for the attention core's (T, T) @ (T, HS) products at T = 128 that wastes most of the
time waking threads and splitting 2-MFLOP products in two (measured on 2 cores, (32, 2, 128, 64):
q @ k^T as 64 products, about 5x faster batched; numbers in docs/speed.md).
The operands may be any strided views whose last two axes are BLAS-shaped (one of them
contiguous): q, k, v as views of the (B, T, 3C) projection go in without a copy. Without a
usable OpenBLAS (another BLAS, macOS's Accelerate, an OpenBLAS before 0.3.27, a non-Linux
system) `matmul` is np.matmul, so results never depend on the library, only the speed does.

`gemm_for_kernels(dtype)`: the address of the plain cblas_sgemm / cblas_dgemm, which attention
v4's Numba kernels call from their own threads (minibert/kernels/attention.py), inside
`with single_threaded():` (OpenBLAS's thread count at 1, so each call runs on the thread that
makes it; the count is restored after). MINIBERT_BLAS_BATCH=0 turns this off as well.

Threads: `apply_thread_timeout()` sets OPENBLAS_THREAD_TIMEOUT (how long OpenBLAS's idle threads
spin before they sleep) in a process where NumPy loaded OpenBLAS before minibert could set the
variable. OpenBLAS reads its environment once, when it loads, and reads the timeout again only
when it starts its thread pool; so this re-reads the environment (`openblas_read_env`) and stops
the pool (`blas_thread_shutdown_`, what OpenBLAS itself runs after a fork); the next BLAS call
starts the pool again with the new timeout. What cannot be changed after load: the number of
threads OpenBLAS was built for (MAX_THREADS) and the pool size below it only grows.
`blas_threads()` / `set_blas_threads(n)` read and set OpenBLAS's thread count, as
threadpoolctl does.
"""
from __future__ import annotations

import ctypes
import os
from functools import lru_cache

import numpy as np

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112  # the CBLAS enum values
# OpenBLAS's batch interface sends products of M*N*K <= 100**3 to its "small matrix" kernels, and
# in the DYNAMIC_ARCH builds that NumPy ships (0.3.31 measured) that path calls a bad address and
# crashes the process. So only larger products are batched (T = 128, HS = 64: 128*128*64 = 1.05e6);
# smaller ones take np.matmul. MINIBERT_BLAS_BATCH=0 turns batching off altogether.
SMALL_LIMIT = 100**3
TIMEOUT_ENV = "OPENBLAS_THREAD_TIMEOUT"
TIMEOUT = "4"  # 2**4 cycles of spinning (the minimum): see minibert/__init__.py


def _loaded_openblas_paths() -> list[str]:
    """Paths of the OpenBLAS libraries mapped into this process (Linux), NumPy's own first (another
    package may bring a second copy); [] elsewhere."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower() and ".so" in line}
    except OSError:
        return []
    return sorted((p for p in paths if os.path.isfile(p)), key=lambda p: ("numpy" not in p, p))


class _OpenBLAS:
    """The entry points of one loaded OpenBLAS, resolved by the symbol names its build uses:
    NumPy >= 2's wheels prefix them with `scipy_` and, with 64-bit integers, suffix `64_`."""

    def __init__(self, path: str):
        self.path = path
        self.lib = lib = ctypes.CDLL(path)
        self.int = None
        self.prefix = self.suffix = ""
        for prefix, suffix, int_t in (("scipy_", "64_", ctypes.c_int64), ("", "64_", ctypes.c_int64),
                                      ("scipy_", "", ctypes.c_int32), ("", "", ctypes.c_int32)):
            if hasattr(lib, f"{prefix}openblas_get_num_threads{suffix}"):
                self.prefix, self.suffix, self.int = prefix, suffix, int_t
                break
        if self.int is None:
            raise OSError(f"{path}: no openblas_get_num_threads symbol")
        self.np_int = np.int64 if self.int is ctypes.c_int64 else np.int32
        self.gemm_batch = {}
        for dtype, letter in ((np.float32, "s"), (np.float64, "d")):
            name = f"{self.prefix}cblas_{letter}gemm_batch{self.suffix}"
            if hasattr(lib, name):
                fn = getattr(lib, name)
                fn.restype = None
                fn.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 13 + [self.int, ctypes.c_void_p]
                self.gemm_batch[np.dtype(dtype)] = fn
        # the plain cblas_?gemm, by address: Numba kernels call it from their own threads
        # (kernels.attention_forward), one (T, T) or (T, HS) product per call
        self.gemm_address = {}
        for dtype, letter in ((np.float32, "s"), (np.float64, "d")):
            name = f"{self.prefix}cblas_{letter}gemm{self.suffix}"
            if hasattr(lib, name):
                self.gemm_address[np.dtype(dtype)] = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value

    def _fn(self, name):
        return getattr(self.lib, f"{self.prefix}{name}{self.suffix}")

    def get_num_threads(self) -> int:
        return int(self._fn("openblas_get_num_threads")())

    def set_num_threads(self, n: int) -> None:
        self._fn("openblas_set_num_threads")(ctypes.c_int(int(n)))


@lru_cache(maxsize=None)
def openblas():
    """The OpenBLAS that NumPy uses, or None (NumPy links it, so importing NumPy mapped it)."""
    for path in _loaded_openblas_paths():
        try:
            return _OpenBLAS(path)
        except OSError:
            continue
    return None


def batched_available(dtype) -> bool:
    lib = openblas()
    return lib is not None and np.dtype(dtype) in lib.gemm_batch


# ---------------------------------------------------------------------------------------------
# batched matmul

def _operand(x):
    """(transpose flag, leading dimension) of the last two axes of x for a row-major gemm, or
    None if neither of them is contiguous (BLAS needs one unit stride)."""
    m, n = x.shape[-2:]
    s_row, s_col = (s // x.itemsize for s in x.strides[-2:])
    if x.strides[-1] % x.itemsize or x.strides[-2] % x.itemsize:
        return None
    if s_col == 1 and s_row >= max(1, n):
        return NO_TRANS, s_row
    if s_row == 1 and s_col >= max(1, m):
        return TRANS, s_col
    return None


def _pointers(x, lead):
    """(n,) addresses of the matrices x[i0, i1, ...] over the leading axes `lead`."""
    offsets = np.zeros((), dtype=np.int64)
    for size, stride in zip(lead, x.strides[:-2]):
        offsets = offsets[..., None] + np.arange(size, dtype=np.int64) * stride
    return (x.ctypes.data + offsets).reshape(-1)


def matmul(a, b, out=None, alpha=1.0):
    """out[...] = alpha * a[...] @ b[...] over the leading axes, which must be equal (no
    broadcasting). Shapes: a (..., M, K), b (..., K, N) -> out (..., M, N), all of one dtype.
    One batched OpenBLAS call when it can (see the module docstring), np.matmul otherwise."""
    lead, (M, K), N = a.shape[:-2], a.shape[-2:], b.shape[-1]
    if out is None:
        out = np.empty((*lead, M, N), dtype=np.result_type(a, b))  # (..., M, N)
    dt = out.dtype
    lib = openblas()
    fn = None if lib is None else lib.gemm_batch.get(dt)
    ops = [_operand(x) for x in (a, b)]
    usable = (fn is not None and a.dtype == dt and b.dtype == dt and b.shape[:-2] == lead
              and b.shape[-2] == K and out.shape == (*lead, M, N) and None not in ops
              and out.strides[-1] == dt.itemsize and out.strides[-2] % dt.itemsize == 0
              and out.strides[-2] // dt.itemsize >= max(1, N) and M * N * K > SMALL_LIMIT
              and not np.may_share_memory(out, a) and not np.may_share_memory(out, b)
              and os.environ.get("MINIBERT_BLAS_BATCH", "1") != "0")
    if not usable:
        np.matmul(a, b, out=out)
        if alpha != 1.0:
            out *= dt.type(alpha)
        return out
    count = int(np.prod(lead, dtype=np.int64))
    (ta, lda), (tb, ldb) = ops
    ints = np.array([M, N, K, lda, ldb, out.strides[-2] // dt.itemsize, count], dtype=lib.np_int)
    trans = np.array([ta, tb], dtype=np.int32)
    scalars = np.array([alpha, 0.0], dtype=dt)  # alpha, beta
    pa, pb, pc = _pointers(a, lead), _pointers(b, lead), _pointers(out, lead)
    isz = ints.itemsize
    base, tbase, sbase = ints.ctypes.data, trans.ctypes.data, scalars.ctypes.data
    fn(ROW_MAJOR, tbase, tbase + 4, base, base + isz, base + 2 * isz, sbase,
       pa.ctypes.data, base + 3 * isz, pb.ctypes.data, base + 4 * isz, sbase + dt.itemsize,
       pc.ctypes.data, base + 5 * isz, 1, base + 6 * isz)
    return out


def gemm_for_kernels(dtype):
    """(address of cblas_sgemm or cblas_dgemm for `dtype`, a zero of OpenBLAS's integer type) for
    a Numba kernel that calls the gemm itself, or None without a usable OpenBLAS. The kernel
    must run with OpenBLAS at one thread (`single_threaded`), so each call stays on the Numba
    thread that makes it."""
    lib = openblas()
    if lib is None or os.environ.get("MINIBERT_BLAS_BATCH", "1") == "0":
        return None
    address = lib.gemm_address.get(np.dtype(dtype))
    return None if address is None else (address, lib.np_int(0))


class single_threaded:
    """with single_threaded(): OpenBLAS runs every call on the calling thread (its thread count
    at 1), and gets its thread count back afterwards. A no-op without OpenBLAS."""

    def __enter__(self):
        self.n = blas_threads()
        if self.n not in (None, 1):
            set_blas_threads(1)
        return self

    def __exit__(self, *exc):
        if self.n not in (None, 1):
            set_blas_threads(self.n)
        return False


# ---------------------------------------------------------------------------------------------
# thread settings after NumPy has loaded OpenBLAS

def blas_threads() -> int | None:
    """OpenBLAS's current thread count (None without OpenBLAS)."""
    lib = openblas()
    return None if lib is None else lib.get_num_threads()


def set_blas_threads(n: int) -> None:
    """Set OpenBLAS's thread count (no-op without OpenBLAS)."""
    lib = openblas()
    if lib is not None:
        lib.set_num_threads(n)


def thread_timeout_read() -> int | None:
    """The OPENBLAS_THREAD_TIMEOUT value OpenBLAS last read from the environment (0: unset), or
    None when the library does not say (no OpenBLAS, or a build without the entry point)."""
    lib = openblas()
    if lib is None or not hasattr(lib.lib, "openblas_thread_timeout"):
        return None
    return int(lib.lib.openblas_thread_timeout())


def apply_thread_timeout(value: str = TIMEOUT) -> bool:
    """Make OpenBLAS's idle threads sleep after `value` (2**value cycles of spinning) even though
    it was loaded before the variable was set. An explicit OPENBLAS_THREAD_TIMEOUT in the
    environment wins (it was read at load and is kept). True if the setting is in force."""
    os.environ.setdefault(TIMEOUT_ENV, value)
    want = int(os.environ[TIMEOUT_ENV]) if os.environ[TIMEOUT_ENV].strip().isdigit() else 0
    lib = openblas()
    if lib is None:
        return False
    raw = lib.lib
    if not all(hasattr(raw, n) for n in ("openblas_read_env", "openblas_thread_timeout", "blas_thread_shutdown_")):
        return False
    if int(raw.openblas_thread_timeout()) == want:
        return True  # read at load already
    raw.openblas_read_env()  # re-reads every OPENBLAS_* variable into OpenBLAS's globals
    raw.blas_thread_shutdown_()  # joins the idle threads; the next BLAS call starts them again
    return int(raw.openblas_thread_timeout()) == want
