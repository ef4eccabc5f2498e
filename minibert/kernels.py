"""Numba versions of the hot layers, with the same signatures and caches as `minibert.layers`
(the exceptions keep less: GELU's cache holds the derivative (`GeluGradCache`), dropout's and
attention v4's the dropout key instead of the mask (`DropoutKey`), the packed attention's the
heads' blocks (`PackedHeadsCache`)).

This module is what the model runs when MINIBERT_BACKEND=numba (the default; see
minibert/backend.py): it has every function name of `minibert.layers` that the model uses, the
ones that pay compiled below, the rest imported from the reference at the bottom of this file, so
`kernels.split_heads is layers.split_heads`. Everything of a training step that is more than a
few kilobytes runs in parallel here, on Numba's threads or OpenBLAS's: what stays on one thread
costs the same at 16 cores as at 2 (docs/speed.md, "Many cores"). Dropout's masks come from
Philox4x32-10, the counter-based stream of `minibert/philox.py` that the reference's masks come
from too, computed inside the passes that use them (`_philox_block`).
`minibert/layers.py` stays the source of truth; tests/test_kernels.py checks every kernel here
against it (float64 to 1e-10 relative, float32 scaled to magnitude).

The attention core (docs/speed.md tells the story of the versions v1-v4, with the measurements;
the development versions the model does not run, v1 and v3, are in minibert/dev/):
    `attention_forward` / `attention_backward` (v4, the default): one Numba pass per (b, h) head
        that calls OpenBLAS's cblas_?gemm itself (its address is a kernel argument, `_gemm_call`),
        with OpenBLAS at one thread while the kernel runs (`blas.single_threaded`): q @ k^T, the
        softmax while the head's (T, T) block is in the core's cache, att @ v.
        `attention_packed_forward` is v4 on the unpadded encoder's (N, 3C) rows: each sequence's
        block of rows as it is, L x L scores, no grid.
    `attention_forward_fallback` / `attention_backward_fallback` (v2), what attention_forward runs
        without OpenBLAS (NumPy built on MKL or Apple's Accelerate) or with MINIBERT_BLAS_BATCH=0:
        the matmuls through np.matmul over the b*NH stack, everything between them (scale, mask,
        softmax, dropout; the softmax backward) one fused Numba pass, `prange` over b*NH, with the
        vectorizing `_exp` below.
    Every version takes `causal=True` (the "ltr" objective's mask) as one more argument of the
    fused softmax pass. The probabilities are kept, not recomputed flash-style: at T = 128 a
    head's (T, T) block fits in L2, and recomputing q @ k^T would add a third matmul.

This module is the backend's contract: every public name is the compiled twin of the
`minibert.layers` function of the same name (`kernels.split_heads is layers.split_heads` where
nothing pays compiling). What is not the model's (the development versions of attention,
compiling ahead) lives elsewhere.

Rules: no fastmath (everything here is gradient-checked), `cache=True` (the second run does not
compile again; the cache lives in __pycache__), parallel loops only over independent outputs
(each (b, h) owns its rows of att, out, dq, dk, dv). Sums that would be serial reductions are
split into 8 partial sums so they vectorize; this changes the summation order, not the math.
Work is cut into pieces of a fixed size, not one per thread, so results do not depend on the
number of threads (layernorm_backward's weight sums excepted).

Threads: Numba uses NUMBA_NUM_THREADS (default: the number of cores) on its `workqueue` threading
layer (`setup()` below), OpenBLAS its own count (OPENBLAS_NUM_THREADS, default
the cores too); the two take turns, never run at once (a Numba pass waits for the matmul before
it and the other way round; inside attention v4's kernels OpenBLAS is at one thread and runs on
Numba's), so neither needs fewer threads, as long as the idle ones sleep:
Numba's workqueue threads do, and OpenBLAS's after OPENBLAS_THREAD_TIMEOUT, which `setup()` makes
OpenBLAS read even when NumPy was imported before minibert (blas.apply_thread_timeout).
For debugging, run with
NUMBA_DISABLE_JIT=1: every kernel then runs as plain Python (slow) and can be stepped through.
"""
from __future__ import annotations

import math
import os
import sys
import types
from typing import NamedTuple

import numba
import numpy as np
from llvmlite import ir
from numba.core import event as numba_event
from numba.extending import intrinsic, overload

from minibert import layers, philox
from minibert.layers import MASK_VALUE, AttentionCache
from minibert.native import blas, malloc

# ---------------------------------------------------------------------------------------------
# The process-wide settings the kernels are measured with. Importing this module changes nothing
# in the process; `setup()` makes the three settings, once. The model's backend switch calls it
# when it hands out this module (backend.get_ops, and optim's fused passes through backend), so
# every training, fine-tuning or lesson step that runs the kernels runs with them; code that
# calls a kernel of this module directly (a test, a benchmark) calls setup() itself when its
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


# Every kernel of this module (and of minibert/dev/'s versions) by its function's name, filled by
# `kernel_jit`: what minibert/compile_ahead.py lists and compiles ahead.
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
        kernel = numba.njit(**options)(f)
        KERNELS[f.__name__] = kernel
        return kernel

    return register if fn is None else register(fn)


# ---------------------------------------------------------------------------------------------
# Compile time. A process whose Numba cache is empty (a fresh clone; a changed kernels.py)
# compiles each kernel on its first call: a tiny training step needs about 20 of them, about 30 s
# of one core (docs/speed.md, "Cold start"), cached in __pycache__ afterwards (`make venv` fills
# it ahead, in several processes: minibert/compile_ahead.py). What costs is `parallel=True`:
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


# ---------------------------------------------------------------------------------------------
# exp and erf that vectorize. Numba turns math.exp / math.erf into calls to the C library, one
# element at a time (erf through a slow generic path: ~30 ns per float32 element). LLVM can only
# vectorize a loop whose body is plain arithmetic, so for float32 the two functions are written
# out below; float64 keeps the C library, so the float64 checks against the reference stay at
# 1e-10. `_exp` and `_erf` pick the version by the argument's type when the kernel is compiled.

@intrinsic
def _int32_bits_as_float32(typingctx, bits):
    """The float32 whose bit pattern is the int32 `bits` (an LLVM bitcast, free, vectorizes)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(numba.types.float32))
    return numba.types.float32(numba.types.int32), codegen


@kernel_jit(inline="always")
def _pow2_32(k):
    """2**k for an integer-valued float32 k in [-127, 128]: k + 127 in the exponent field."""
    return _int32_bits_as_float32((np.int32(k) + np.int32(127)) << np.int32(23))


@kernel_jit(inline="always")
def _exp32(x):
    """exp(x) for float32, max relative error 8.2e-8 (< 1 ulp; measured against float64 exp on
    [-87, 88.7]). Cephes' expf: x = k ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, so r is
    exact), exp(r) by its degree-7 polynomial, times 2**k as two factors 2**k1 * 2**k2, each a
    normal float32, so that the product overflows to inf as it should. Below x = -87 the result
    (< 1.6e-38, the subnormal range) is flushed to 0: arithmetic on subnormals takes ~100x longer
    on x86, softmax feeds exactly such values (masked keys at -10000), and none of the callers
    can tell 1e-38 from 0. NaN in, NaN out."""
    f = np.float32
    xc = x if x > f(-87.0) else f(-87.0)
    xc = xc if xc < f(89.0) else f(89.0)  # exp(89) overflows to inf
    k = np.floor(xc * f(1.4426950408889634) + f(0.5))  # round(x / ln2)
    r = xc - k * f(0.693359375) - k * f(-2.12194440e-4)
    p = f(1.9875691500e-4)
    p = p * r + f(1.3981999507e-3)
    p = p * r + f(8.3334519073e-3)
    p = p * r + f(4.1665795894e-2)
    p = p * r + f(1.6666665459e-1)
    p = p * r + f(5.0000001201e-1)
    p = p * r * r + r + f(1.0)
    k1 = np.floor(k * f(0.5))
    y = p * _pow2_32(k1) * _pow2_32(k - k1)
    y = y if x >= f(-87.0) else f(0.0)
    return y if x == x else x


@kernel_jit(inline="always")
def _erf_gauss32(x):
    """(erf(x), exp(-x*x)) for float32: erf with max absolute error 6e-7 (Abramowitz & Stegun
    7.1.26, 1.5e-7, plus float32 rounding; measured against math.erf), odd: erf(-x) = -erf(x).
    The formula needs exp(-x*x) anyway, and GELU's derivative needs it too."""
    f = np.float32
    a = abs(x)
    g = _exp32(-a * a)
    t = f(1.0) / (f(1.0) + f(0.3275911) * a)
    y = f(1.061405429)
    y = y * t + f(-1.453152027)
    y = y * t + f(1.421413741)
    y = y * t + f(-0.284496736)
    y = y * t + f(0.254829592)
    y = f(1.0) - y * t * g
    return (y if x >= f(0.0) else -y), g


@kernel_jit(inline="always")
def _erf32(x):
    """erf(x) for float32 (see _erf_gauss32)."""
    return _erf_gauss32(x)[0]


def _exp(x):
    return math.exp(x)


def _erf(x):
    return math.erf(x)


@overload(_exp, inline="always")
def _exp_for_type(x):
    if x == numba.types.float32:
        return lambda x: _exp32(x)
    return lambda x: math.exp(x)


@overload(_erf, inline="always")
def _erf_for_type(x):
    if x == numba.types.float32:
        return lambda x: _erf32(x)
    return lambda x: math.erf(x)


def _erf_gauss(x):
    return math.erf(x), math.exp(-x * x)


@overload(_erf_gauss, inline="always")
def _erf_gauss_for_type(x):
    if x == numba.types.float32:
        return lambda x: _erf_gauss32(x)
    return lambda x: (math.erf(x), math.exp(-x * x))


# ---------------------------------------------------------------------------------------------
# small building blocks (compiled into the kernels that call them)


@kernel_jit(inline="always")
def _row_sum(x):
    """sum(x) over a contiguous row (n >= 1), as 8 partial sums in 8 local variables, which LLVM
    keeps in one vector register (vectorizable without fastmath; the summation order differs
    from a serial loop, the math does not)."""
    n = x.shape[0]
    if n < 8:
        s = x[0]
        for j in range(1, n):
            s += x[j]
        return s
    s0, s1, s2, s3, s4, s5, s6, s7 = x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]
    j = 8
    while j + 8 <= n:
        s0 += x[j]
        s1 += x[j + 1]
        s2 += x[j + 2]
        s3 += x[j + 3]
        s4 += x[j + 4]
        s5 += x[j + 5]
        s6 += x[j + 6]
        s7 += x[j + 7]
        j += 8
    s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while j < n:
        s += x[j]
        j += 1
    return s


@kernel_jit(inline="always")
def _softmax_row(src, dst):
    """dst <- softmax(src) over one contiguous row (dst may be src), shifted by the row max for a
    stable exp. -> (max, sum of exp(src - max)), from which log softmax follows."""
    n = src.shape[0]
    m = _row_max(src)
    for j in range(n):
        dst[j] = _exp(src[j] - m)
    s = _row_sum(dst)
    for j in range(n):
        dst[j] /= s
    return m, s


@kernel_jit
def masked_softmax_row(row, adder_b, scale, last, masked):
    """In place on one row of scores (T,): row <- softmax(row * scale + adder_b). adder_b (T,) is
    0 for real keys and MASK_VALUE for padded ones. The keys after `last` get `masked`
    (MASK_VALUE in the row's dtype) in place of adder_b[j]: the causal mask, with last = the
    query's own position (a key both padded and in the future gets MASK_VALUE once, as
    layers.causal_visible says); without it last = T - 1 and no key is affected."""
    for j in range(row.shape[0]):
        row[j] = row[j] * scale + (adder_b[j] if j <= last else masked)
    _softmax_row(row, row)


@kernel_jit(inline="always")
def _row_max(x):
    """max(x) over a contiguous row (n >= 1), as 8 partial maxima (see _row_sum)."""
    n = x.shape[0]
    if n < 8:
        m = x[0]
        for j in range(1, n):
            m = max(m, x[j])
        return m
    m0, m1, m2, m3, m4, m5, m6, m7 = x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]
    j = 8
    while j + 8 <= n:
        m0 = max(m0, x[j])
        m1 = max(m1, x[j + 1])
        m2 = max(m2, x[j + 2])
        m3 = max(m3, x[j + 3])
        m4 = max(m4, x[j + 4])
        m5 = max(m5, x[j + 5])
        m6 = max(m6, x[j + 6])
        m7 = max(m7, x[j + 7])
        j += 8
    m = max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))
    while j < n:
        m = max(m, x[j])
        j += 1
    return m


@kernel_jit(inline="always")
def _row_dot(x, y):
    """sum(x * y) over contiguous rows (n >= 1), as 8 partial sums (see _row_sum)."""
    n = x.shape[0]
    if n < 8:
        s = x[0] * y[0]
        for j in range(1, n):
            s += x[j] * y[j]
        return s
    s0, s1, s2, s3 = x[0] * y[0], x[1] * y[1], x[2] * y[2], x[3] * y[3]
    s4, s5, s6, s7 = x[4] * y[4], x[5] * y[5], x[6] * y[6], x[7] * y[7]
    j = 8
    while j + 8 <= n:
        s0 += x[j] * y[j]
        s1 += x[j + 1] * y[j + 1]
        s2 += x[j + 2] * y[j + 2]
        s3 += x[j + 3] * y[j + 3]
        s4 += x[j + 4] * y[j + 4]
        s5 += x[j + 5] * y[j + 5]
        s6 += x[j + 6] * y[j + 6]
        s7 += x[j + 7] * y[j + 7]
        j += 8
    s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while j < n:
        s += x[j] * y[j]
        j += 1
    return s


# ---------------------------------------------------------------------------------------------
# dropout's random bits: Philox4x32-10, the counter-based stream of philox.philox4x32, element
# by element inside the kernels (no random array, no serial draw). Word i of a call is a pure
# function of (key, i), so every thread computes its own elements' bits, and they equal the
# reference's bit for bit (a test). The 32-bit words are held in uint64 (exact 32 x 32 products).

_U64 = np.uint64
_PM0, _PM1 = _U64(philox.PHILOX_M0), _U64(philox.PHILOX_M1)
_PW0, _PW1 = _U64(philox.PHILOX_W0), _U64(philox.PHILOX_W1)
_LOW32, _S32 = _U64(0xFFFFFFFF), _U64(32)


@kernel_jit(inline="always")
def _philox_block(j, k0, k1):
    """The four 32-bit words of Philox4x32-10 at counter (j low, j high, 0, 0), key (k0, k1)."""
    c0, c1, c2, c3 = j & _LOW32, j >> _S32, _U64(0), _U64(0)
    for r in range(philox.PHILOX_ROUNDS):
        p0 = c0 * _PM0
        p1 = c2 * _PM1
        c0, c1, c2, c3 = (p1 >> _S32) ^ c1 ^ k0, p1 & _LOW32, (p0 >> _S32) ^ c3 ^ k1, p0 & _LOW32
        k0 = (k0 + _PW0) & _LOW32
        k1 = (k1 + _PW1) & _LOW32
    return c0, c1, c2, c3


@kernel_jit(inline="always")
def _philox_word(i, k0, k1):
    """Word i of the stream: word i % 4 of block i // 4 (the head and tail of unaligned ranges)."""
    w = _philox_block(_U64(i) >> _U64(2), k0, k1)
    lane = i & 3
    return w[0] if lane == 0 else (w[1] if lane == 1 else (w[2] if lane == 2 else w[3]))


@kernel_jit(inline="always")
def _random_bits_into(bits, start, k0, k1):
    """bits[:] (uint32) <- the words start .. start + len(bits) - 1 (philox.random_bits)."""
    n = bits.shape[0]
    i = 0
    while i < n and (start + i) & 3:  # up to the first whole block
        bits[i] = np.uint32(_philox_word(start + i, k0, k1))
        i += 1
    j0 = (start + i) >> 2
    for jj in range((n - i) >> 2):  # whole blocks: four words each
        w0, w1, w2, w3 = _philox_block(_U64(j0 + jj), k0, k1)
        o = i + 4 * jj
        bits[o] = np.uint32(w0)
        bits[o + 1] = np.uint32(w1)
        bits[o + 2] = np.uint32(w2)
        bits[o + 3] = np.uint32(w3)
    i += 4 * ((n - i) >> 2)
    while i < n:  # the rest of the last block
        bits[i] = np.uint32(_philox_word(start + i, k0, k1))
        i += 1


@kernel_jit(inline="always")
def _drop_mask_into(m, start, k0, k1, threshold, keep_scale):
    """m[:] <- the dropout mask (0 or keep_scale = 1/(1-p), m's dtype) of the elements start ..
    start + len(m) - 1: kept where the element's bits >= threshold (philox.dropout_mask)."""
    n = m.shape[0]
    bits = np.empty(n, dtype=np.uint32)
    _random_bits_into(bits, start, k0, k1)
    zero = keep_scale - keep_scale
    for i in range(n):
        m[i] = keep_scale if bits[i] >= threshold else zero


@kernel_jit
def times_drop(a, drop, b, h):
    """One head's att * drop: a (T, T), drop (B, NH, T, T) -> a new (T, T) array."""
    T = a.shape[0]
    ad = np.empty((T, T), dtype=a.dtype)  # (T, T)
    for i in range(T):
        for j in range(T):
            ad[i, j] = a[i, j] * drop[b, h, i, j]
    return ad


@kernel_jit
def softmax_backward_head(datt, a, drop, b, h, use_drop, scale):
    """In place on one head's datt (T, T), the gradient of att * drop:
    datt <- a * (datt*drop - sum(datt*drop * a)) * scale, row by row (a = att (T, T); drop
    (B, NH, T, T) read at [b, h] only when use_drop). The gradient of the scaled scores."""
    T = a.shape[0]
    for i in range(T):
        drow = datt[i]
        arow = a[i]
        if use_drop:
            for j in range(T):
                drow[j] *= drop[b, h, i, j]
        s = _row_dot(drow, arow)
        for j in range(T):
            drow[j] = arow[j] * (drow[j] - s) * scale


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


PARALLEL_MIN_WORK = 1 << 18  # B * NH * T * T * HS below this runs on one thread


def pick_kernel(parallel_kernel, serial_kernel, shape):
    B, NH, T, HS = shape
    return parallel_kernel if B * NH * T * T * HS >= PARALLEL_MIN_WORK and B * NH > 1 else serial_kernel


def attention_inputs(q, k, v, attn_mask, dropout_p):
    """The argument checks of layers.attention_forward, and what both versions below need:
    -> (k, v in q's dtype, scale 1/sqrt(HS), adder (B, T) = (1 - mask) * MASK_VALUE)."""
    B, NH, T, HS = q.shape
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k, v shapes differ: {q.shape}, {k.shape}, {v.shape}")
    if attn_mask.shape != (B, T):
        raise ValueError(f"attn_mask has shape {attn_mask.shape}, expected {(B, T)}")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout probability {dropout_p} must be in [0, 1)")
    dt = q.dtype
    adder = np.ascontiguousarray((1.0 - attn_mask) * MASK_VALUE, dtype=dt)  # (B, T)
    return k.astype(dt, copy=False), v.astype(dt, copy=False), 1.0 / math.sqrt(HS), adder


class DropoutKey(NamedTuple):
    """The kernels' record of a dropout mask: the Philox key it was drawn with and p. The mask
    itself (philox.dropout_mask(key, shape, p, dtype)) is recomputed where it is needed instead
    of being kept: a (B, T, C) or (B, NH, T, T) array less per dropout in the step's memory."""
    key: np.ndarray  # (2,) uint64, two 32-bit words
    p: float

    def mask(self, shape, dtype):
        """The mask as an array (0 or 1/(1-p)), computed in parallel: philox.dropout_mask."""
        m = np.empty(math.prod(shape), dtype=dtype)
        _dropout_mask_kernel(m, *_dropout_args(self, dtype))
        return m.reshape(shape)


def _dropout_args(d: DropoutKey, dtype):
    """(k0, k1, threshold, keep scale) as the kernels take them."""
    dt = np.dtype(dtype)
    return (_U64(d.key[0]), _U64(d.key[1]), np.uint32(philox.dropout_threshold(d.p)),
            dt.type(1.0 / (1.0 - d.p)))


_NO_DROP = DropoutKey(np.zeros(2, dtype=np.uint64), 0.0)  # the arguments of a kernel that drops nothing


def _draw_dropout(rng, dropout_p):
    """None for p = 0, else a DropoutKey with a fresh key from `rng` (philox.draw_dropout_key:
    the reference's one draw, so the same rng gives the same masks)."""
    if dropout_p == 0.0:
        return None
    return DropoutKey(philox.draw_dropout_key(rng), float(dropout_p))


def attention_dropout_mask(rng, shape, dropout_p, dt):
    """The attention dropout mask (keep / (1 - p), in dtype dt) of `shape`, or None for p = 0:
    exactly layers.dropout_forward's mask, so the same rng gives the same mask (the fallback and
    minibert/dev's versions keep it as an array; v4 keeps the key and computes the mask inside
    its kernels)."""
    drop = _draw_dropout(rng, dropout_p)
    return None if drop is None else drop.mask(shape, dt)


def mask_array(drop, shape, dtype):
    """An attention cache's `drop` as an array: None, the array itself (the reference, the
    fallback, minibert/dev's versions) or a DropoutKey's mask (v4)."""
    return drop.mask(shape, dtype) if isinstance(drop, DropoutKey) else drop


@kernel_jit(parallel=True)
def _softmax_rows_kernel(a, adder, drop, use_drop, scale, att_d, causal, masked):
    """In place on a (B, NH, T, T): a <- softmax(a * scale + adder[b]); att_d <- a * drop.
    causal: row i also gets `masked` (MASK_VALUE) at the keys j > i."""
    B, NH, T, _ = a.shape
    for bh in numba.prange(B * NH):
        b, h = bh // NH, bh % NH
        for i in range(T):
            row = a[b, h, i]
            masked_softmax_row(row, adder[b], scale, i if causal else T - 1, masked)
            if use_drop:
                drow = att_d[b, h, i]
                for j in range(T):
                    drow[j] = row[j] * drop[b, h, i, j]


@kernel_jit(parallel=True)
def _softmax_rows_backward_kernel(datt, att, drop, use_drop, scale):
    """In place on datt (B, NH, T, T): datt <- att * (datt*drop - sum(datt*drop * att)) * scale."""
    B, NH, T, _ = att.shape
    for bh in numba.prange(B * NH):
        b, h = bh // NH, bh % NH
        softmax_backward_head(datt[b, h], att[b, h], drop, b, h, use_drop, scale)


_softmax_rows_serial = serial_version(_softmax_rows_kernel)
_softmax_rows_backward_serial = serial_version(_softmax_rows_backward_kernel)


def attention_forward_fallback(q, k, v, attn_mask, dropout_p=0.0, rng=None, causal=False, matmul=np.matmul):
    """Attention where v4 cannot call OpenBLAS (see attention_forward): the two matmuls by
    `matmul` over the b*NH stack, scale, mask, softmax and dropout between them one fused Numba
    pass (v2 of docs/speed.md; minibert/dev/attention_v3.py passes OpenBLAS's batched gemm as
    `matmul`). Same contract as layers.attention_forward, and the same dropout mask for the
    same rng.

    `out` is a (B, NH, T, HS) view of a (B, T, NH, HS) array, so merge_heads is a free reshape.
    """
    B, NH, T, HS = q.shape
    dt = q.dtype
    k, v, scale, adder = attention_inputs(q, k, v, attn_mask, dropout_p)
    att = np.empty((B, NH, T, T), dtype=dt)  # (B, NH, T, T)
    matmul(q, k.swapaxes(-1, -2), out=att)  # (B, NH, T, HS) @ (B, NH, HS, T) -> (B, NH, T, T) raw scores
    drop = attention_dropout_mask(rng, (B, NH, T, T), dropout_p, dt)  # (B, NH, T, T) or None
    att_d = att if drop is None else np.empty_like(att)  # (B, NH, T, T)
    dummy = np.empty((1, 1, 1, 1), dtype=dt)
    softmax = pick_kernel(_softmax_rows_kernel, _softmax_rows_serial, q.shape)
    softmax(att, adder, dummy if drop is None else drop, drop is not None, dt.type(scale), att_d,
            bool(causal), dt.type(MASK_VALUE))
    out = np.empty((B, T, NH, HS), dtype=dt).transpose(0, 2, 1, 3)  # (B, T, NH, HS) -> (B, NH, T, HS)
    matmul(att_d, v, out=out)  # (B, NH, T, T) @ (B, NH, T, HS) -> (B, NH, T, HS)
    return out, AttentionCache(q, k, v, att, drop, scale)


def merge_qkv(dq, dk, dv):
    """Same contract as layers.merge_qkv; when dq, dk, dv are the views of one (B, T, 3, NH, HS)
    array that the attention backward passes return (_qkv_gradient_views), that array is already
    the (B, T, 3C) result: it is returned reshaped, no copy."""
    base = dq.base
    B, NH, T, HS = dq.shape
    isz = dq.itemsize
    if (isinstance(base, np.ndarray) and base.shape == (B, T, 3, NH, HS) and base.flags.c_contiguous
            and dk.base is base and dv.base is base and dq.dtype == base.dtype
            and [x.ctypes.data - base.ctypes.data for x in (dq, dk, dv)] == [0, NH * HS * isz, 2 * NH * HS * isz]
            and dq.strides == dk.strides == dv.strides == base[:, :, 0].transpose(0, 2, 1, 3).strides):
        return base.reshape(B, T, 3 * NH * HS)
    return layers.merge_qkv(dq, dk, dv)


def _qkv_gradient_views(B, NH, T, HS, dt):
    """dq, dk, dv (B, NH, T, HS) as views of one new (B, T, 3, NH, HS) array, side by side: the
    (B, T, 3C) layout of the qkv projection whose gradient they are, so the caller's merge is a
    copy of contiguous rows."""
    dqkv = np.empty((B, T, 3, NH, HS), dtype=dt)  # (B, T, 3, NH, HS)
    return tuple(dqkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))  # 3 x (B, NH, T, HS) views


def attention_backward_fallback(dout, cache: AttentionCache, matmul=np.matmul):
    """Mirror of attention_forward_fallback. Same contract as layers.attention_backward: -> dq,
    dk, dv, each (B, NH, T, HS), views of one (B, T, 3, NH, HS) array. The causal mask needs
    nothing here: the future keys' att is exactly 0, as the padded keys'."""
    q, k, v, att, drop, scale = cache
    B, NH, T, HS = q.shape
    dt = q.dtype
    drop = mask_array(drop, att.shape, dt)  # (B, NH, T, T) or None
    dout = dout.astype(dt, copy=False)
    att_d = att if drop is None else att * drop  # (B, NH, T, T) what multiplied v
    dq, dk, dv = _qkv_gradient_views(B, NH, T, HS, dt)  # 3 x (B, NH, T, HS)
    # forward was: out = att_d @ v
    matmul(att_d.swapaxes(-1, -2), dout, out=dv)  # (B, NH, T, T) @ (B, NH, T, HS) -> (B, NH, T, HS)
    datt = np.empty((B, NH, T, T), dtype=dt)  # (B, NH, T, T)
    matmul(dout, v.swapaxes(-1, -2), out=datt)  # (B, NH, T, HS) @ (B, NH, HS, T) -> (B, NH, T, T)
    # forward was: att = softmax(q @ k^T * scale + adder), then att_d = att * drop
    dummy = np.empty((1, 1, 1, 1), dtype=dt)
    softmax_backward = pick_kernel(_softmax_rows_backward_kernel, _softmax_rows_backward_serial, q.shape)
    softmax_backward(datt, att, dummy if drop is None else drop, drop is not None, dt.type(scale))
    matmul(datt, k, out=dq)  # (B, NH, T, T) @ (B, NH, T, HS) -> (B, NH, T, HS)
    matmul(datt.swapaxes(-1, -2), q, out=dk)  # (B, NH, T, T) @ (B, NH, T, HS) -> (B, NH, T, HS)
    return dq, dk, dv


# ---------------------------------------------------------------------------------------------
# attention v4 (the default): one pass per (b, h) head, in Numba's threads, that calls OpenBLAS's
# plain gemm itself (OpenBLAS at one thread, so each call runs on the Numba thread that makes
# it): q @ k^T into the head's (T, T) block, the softmax on that block while it is still in the
# core's cache, then att @ v. The backward likewise: four gemms and the softmax backward per
# head. v3 (minibert/dev/attention_v3.py) made the same products in batched calls, but wrote the
# (B, NH, T, T) scores to memory, read them back for the softmax, wrote them again and read them
# for att @ v.

_NO_TRANS, _TRANS, _ROW_MAJOR = blas.NO_TRANS, blas.TRANS, blas.ROW_MAJOR


@intrinsic
def _gemm_call(typingctx, address, like, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """cblas_?gemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) through its
    `address` (an integer, so kernels that use it stay cacheable: the address is an argument,
    not a constant of the compiled code). The enums go as C ints, m..ldc as OpenBLAS's integer
    (the type of `like`: int64 or int32 by build), a, b, c are addresses, alpha and beta
    float32 for sgemm, float64 for dgemm."""
    sig = numba.types.void(address, like, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
    enums, ints, pointers = (2, 3, 4), (5, 6, 7, 10, 12, 15), (9, 11, 14)  # positions in the signature

    def codegen(context, builder, signature, args):
        tys = signature.args
        voidp = ir.IntType(8).as_pointer()
        vals, lltypes = [], []
        for i in range(2, len(args)):
            if i in enums:
                vals.append(context.cast(builder, args[i], tys[i], numba.types.int32))
                lltypes.append(ir.IntType(32))
            elif i in ints:
                vals.append(context.cast(builder, args[i], tys[i], tys[1]))
                lltypes.append(context.get_value_type(tys[1]))
            elif i in pointers:
                vals.append(builder.inttoptr(args[i], voidp))
                lltypes.append(voidp)
            else:  # alpha, beta: the gemm's float type
                vals.append(args[i])
                lltypes.append(context.get_value_type(tys[i]))
        fnty = ir.FunctionType(ir.VoidType(), lltypes)
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), vals)
        return context.get_dummy_value()

    return sig, codegen


_GEMM_SMALL = blas.SMALL_LIMIT  # m * n * k up to this: OpenBLAS's small-matrix kernels (no packing)


@kernel_jit(inline="always")
def _gemm(gemm, like, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, one):
    """c (m, n) = op(a) @ op(b), row-major; op(x) = x, or x^T when its flag is _TRANS. a, b, c
    are the arrays (views) whose first element starts each matrix, with row strides lda, ldb,
    ldc in elements. Inlined, it only takes the addresses: `_gemm_at` makes the product, one
    compiled function for every kernel that calls it."""
    _gemm_at(gemm, like, ta, tb, m, n, k, a.ctypes.data, lda, b.ctypes.data, ldb, c.ctypes.data, ldc, c.itemsize,
             one)


@kernel_jit(nogil=True)
def _gemm_at(gemm, like, ta, tb, m, n, k, a_at, lda, b_at, ldb, c_at, ldc, isz, one):
    """`_gemm` on addresses (isz: the bytes of an element).

    A product above OpenBLAS's small-matrix size (m * n * k > 100**3, e.g. a head's 128 x 128 x 64)
    is made as row blocks of op(a) and c that are each within it: OpenBLAS then runs its
    small-matrix kernels, which skip packing the operands into its buffers (10-20% faster per
    call at these sizes on one core, measured) and take no lock on its buffer pool, which every
    thread calling gemm at once would otherwise share. Each output element is the same sum over k."""
    pieces = max(1, (m * n * k + _GEMM_SMALL - 1) // _GEMM_SMALL)
    step = (m + pieces - 1) // pieces
    for i0 in range(0, m, step):
        rows = min(step, m - i0)
        a_i0 = a_at + (i0 * lda if ta == _NO_TRANS else i0) * isz  # row i0 of op(a)
        _gemm_call(gemm, like, _ROW_MAJOR, ta, tb, rows, n, k, one, a_i0, lda, b_at, ldb,
                   one - one, c_at + i0 * ldc * isz, ldc)


@kernel_jit
def _head_drop_mask(use_drop, bh, T, k0, k1, threshold, keep_scale, dtype_like):
    """Head bh's dropout mask (1, 1, T, T): its T*T elements of the (B, NH, T, T) mask, from
    their Philox words (element bh*T*T + i*T + j), or a (1, 1, 1, 1) dummy when not use_drop."""
    m = np.empty(T * T if use_drop else 1, dtype=dtype_like.dtype)
    if use_drop:
        _drop_mask_into(m, bh * T * T, k0, k1, threshold, keep_scale)
        return m.reshape((1, 1, T, T))
    return m.reshape((1, 1, 1, 1))


@kernel_jit(nogil=True)
def _attention_forward_gemm_head(bh, gemm, like, q, k, v, ld, adder, use_drop, k0, k1, threshold, keep_scale, scale,
                                 att, out, causal, masked, one):
    """Head bh (= b * NH + h) of `_attention_forward_gemm_kernel`."""
    B, NH, T, HS = q.shape
    b, h = bh // NH, bh % NH
    a = att[b, h]  # (T, T) this head's block, contiguous
    # raw scores: (T, HS) @ (HS, T) -> (T, T)
    _gemm(gemm, like, _NO_TRANS, _TRANS, T, T, HS, q[b, h], ld[0], k[b, h], ld[1], a, T, one)
    for i in range(T):
        masked_softmax_row(a[i], adder[b], scale, i if causal else T - 1, masked)
    m = _head_drop_mask(use_drop, bh, T, k0, k1, threshold, keep_scale, a)  # (1, 1, T, T)
    src = times_drop(a, m, 0, 0) if use_drop else a  # (T, T) att * drop: what multiplies v
    # (T, T) @ (T, HS) -> (T, HS)
    _gemm(gemm, like, _NO_TRANS, _NO_TRANS, T, HS, T, src, T, v[b, h], ld[2], out[b, h], ld[3], one)


@kernel_jit(parallel=True)
def _attention_forward_gemm_kernel(gemm, like, q, k, v, ld, adder, use_drop, k0, k1, threshold, keep_scale, scale,
                                   att, out, causal, masked, one):
    """q, k, v (B, NH, T, HS) with unit-stride rows whose row strides are ld[0..2] elements, out
    likewise (ld[3]); adder (B, T); dropout (use_drop) with Philox key (k0, k1), threshold and
    keep scale (DropoutKey); att (B, NH, T, T) contiguous.
    Writes att (the probabilities, before dropout) and out, one head per call of
    `_attention_forward_gemm_head` (see "Compile time" above)."""
    B, NH, T, HS = q.shape
    for bh in numba.prange(B * NH):
        _attention_forward_gemm_head(np.int64(bh), gemm, like, q, k, v, ld, adder, use_drop, k0, k1, threshold,
                                     keep_scale, scale, att, out, causal, masked, one)


@kernel_jit(nogil=True)
def _attention_backward_gemm_head(bh, gemm, like, dout, q, k, v, ld, att, use_drop, k0, k1, threshold, keep_scale,
                                  scale, dq, dk, dv, one):
    """Head bh of `_attention_backward_gemm_kernel`."""
    B, NH, T, HS = q.shape
    b, h = bh // NH, bh % NH
    a = att[b, h]  # (T, T)
    m = _head_drop_mask(use_drop, bh, T, k0, k1, threshold, keep_scale, a)  # (1, 1, T, T)
    ad = times_drop(a, m, 0, 0) if use_drop else a  # (T, T) att * drop: what multiplied v
    # forward was: out = ad @ v  ->  dv = ad^T @ dout, (T, T)^T @ (T, HS) -> (T, HS)
    _gemm(gemm, like, _TRANS, _NO_TRANS, T, HS, T, ad, T, dout[b, h], ld[0], dv[b, h], ld[4], one)
    # datt = dout @ v^T, (T, HS) @ (HS, T) -> (T, T)
    datt = np.empty((T, T), dtype=q.dtype)
    _gemm(gemm, like, _NO_TRANS, _TRANS, T, T, HS, dout[b, h], ld[0], v[b, h], ld[3], datt, T, one)
    # forward was: att = softmax(preatt); dpreatt = att * (datt - sum(datt * att)) * scale
    softmax_backward_head(datt, a, m, 0, 0, use_drop, scale)
    # forward was: preatt = q @ k^T * scale + adder
    _gemm(gemm, like, _NO_TRANS, _NO_TRANS, T, HS, T, datt, T, k[b, h], ld[2], dq[b, h], ld[4], one)
    _gemm(gemm, like, _TRANS, _NO_TRANS, T, HS, T, datt, T, q[b, h], ld[1], dk[b, h], ld[4], one)


@kernel_jit(parallel=True)
def _attention_backward_gemm_kernel(gemm, like, dout, q, k, v, ld, att, use_drop, k0, k1, threshold, keep_scale,
                                    scale, dq, dk, dv, one):
    """Mirror of the forward kernel (the dropout mask made again from its key). ld: row strides
    of dout, q, k, v and of dq, dk, dv (one stride: they are slices of one array). Each (b, h)
    owns its rows of dq, dk, dv."""
    B, NH, T, HS = q.shape
    for bh in numba.prange(B * NH):
        _attention_backward_gemm_head(np.int64(bh), gemm, like, dout, q, k, v, ld, att, use_drop, k0, k1, threshold,
                                      keep_scale, scale, dq, dk, dv, one)


_attention_forward_gemm_serial = serial_version(_attention_forward_gemm_kernel)
_attention_backward_gemm_serial = serial_version(_attention_backward_gemm_kernel)


def _row_stride(x):
    """The row stride of x (..., T, HS) in elements if its rows can go to BLAS as they are (unit
    stride within a row, rows at least HS apart, forward), else None."""
    isz = x.itemsize
    *_, T, HS = x.shape
    s_row, s_col = x.strides[-2:]
    if HS > 1 and s_col != isz:
        return None
    if T == 1:
        return max(1, HS)  # one row: BLAS never steps over it
    if s_row % isz or s_row < max(1, HS) * isz:
        return None
    return s_row // isz


def _blas_rows(x):
    """x with BLAS-usable rows and its row stride: x itself when it has them, else a copy."""
    ld = _row_stride(x)
    if ld is None:
        x = np.ascontiguousarray(x)
        ld = _row_stride(x)
    return x, ld


def attention_forward(q, k, v, attn_mask, dropout_p=0.0, rng=None, causal=False):
    """v4 (the default). Same contract as layers.attention_forward (and the same dropout mask for
    the same rng), causal mask included. Without a usable OpenBLAS (another BLAS, or
    MINIBERT_BLAS_BATCH=0) it is attention_forward_fallback.

    `out` is a (B, NH, T, HS) view of a (B, T, NH, HS) array, so merge_heads is a free reshape.
    """
    gemm = blas.gemm_for_kernels(q.dtype)
    if gemm is None:
        return attention_forward_fallback(q, k, v, attn_mask, dropout_p, rng, causal)
    B, NH, T, HS = q.shape
    dt = q.dtype
    k, v, scale, adder = attention_inputs(q, k, v, attn_mask, dropout_p)
    (q, lq), (k, lk), (v, lv) = (_blas_rows(x) for x in (q, k, v))
    drop = _draw_dropout(rng, dropout_p)  # DropoutKey or None: the mask is made inside the kernels
    att = np.empty((B, NH, T, T), dtype=dt)  # (B, NH, T, T)
    out = np.empty((B, T, NH, HS), dtype=dt).transpose(0, 2, 1, 3)  # (B, T, NH, HS) -> (B, NH, T, HS)
    ld = np.array([lq, lk, lv, _row_stride(out)], dtype=np.int64)
    kernel = pick_kernel(_attention_forward_gemm_kernel, _attention_forward_gemm_serial, q.shape)
    with blas.single_threaded():
        kernel(gemm[0], gemm[1], q, k, v, ld, adder, drop is not None, *_dropout_args(drop or _NO_DROP, dt),
               dt.type(scale), att, out, bool(causal), dt.type(MASK_VALUE), dt.type(1.0))
    return out, AttentionCache(q, k, v, att, drop, scale)


def attention_backward(dout, cache: AttentionCache):
    """v4. Same contract as layers.attention_backward: -> dq, dk, dv, each (B, NH, T, HS), views
    of one (B, T, 3, NH, HS) array (the layout of the qkv projection's gradient, so the model's
    merge is one copy). The causal mask needs nothing here: the future keys' att is exactly 0."""
    q, k, v, att, drop, scale = cache
    gemm = blas.gemm_for_kernels(q.dtype)
    if gemm is None:
        return attention_backward_fallback(dout, cache)
    B, NH, T, HS = q.shape
    dt = q.dtype
    (dout, ldo), (q, lq), (k, lk), (v, lv) = (_blas_rows(x) for x in (dout.astype(dt, copy=False), q, k, v))
    dq, dk, dv = _qkv_gradient_views(B, NH, T, HS, dt)  # 3 x (B, NH, T, HS)
    ld = np.array([ldo, lq, lk, lv, _row_stride(dq)], dtype=np.int64)
    kernel = pick_kernel(_attention_backward_gemm_kernel, _attention_backward_gemm_serial, q.shape)
    with blas.single_threaded():
        kernel(gemm[0], gemm[1], dout, q, k, v, ld, att, drop is not None, *_dropout_args(drop or _NO_DROP, dt),
               dt.type(scale), dq, dk, dv, dt.type(1.0))
    return dq, dk, dv


# ---------------------------------------------------------------------------------------------
# attention on packed rows (layers.attention_packed_forward): v4 on the rows of the real tokens.
# When every sequence's real tokens come first (a padded tail, the only padding a BERT batch
# has), sequence b's rows are the contiguous block starts[b]:starts[b + 1] of the (N, 3C) qkv
# projection, so each head's q, k and v are (L_b, HS) blocks of it with row stride 3C and go to
# gemm as they are: no grid, no copies in or out, and neither padded queries nor padded keys
# computed (L_b x L_b scores instead of T x T). The output rows and, backward, dq, dk, dv are
# written straight into their (N, C) and (N, 3C) places. The dropout mask of element (i, j) of
# head (b, h) is the grid's element ((b * NH + h) * T + i) * T + j, the reference's. Other masks
# take the grid path (kernels.attention_forward between the copies).


class PackedHeadsCache(NamedTuple):
    qkv: np.ndarray  # (N, 3C)
    starts: np.ndarray  # (B + 1,) the first row of each sequence, and N
    att: np.ndarray  # the heads' (L_b, L_b) probabilities, one after another
    att_at: np.ndarray  # (B * NH,) where each head's block starts in att
    drop: object  # DropoutKey or None
    scale: float
    num_heads: int
    T: int  # the grid's length (the dropout masks' element numbers)


@kernel_jit
def _drop_rows(use_drop, bh, T, L, k0, k1, threshold, keep_scale, like):
    """Head bh's dropout mask for its (L, L) block: row i is the grid's row ((bh * T) + i) * T, its
    first L elements. A (1, 1, L, L) array, or a (1, 1, 1, 1) dummy when not use_drop."""
    m = np.empty(L * L if use_drop else 1, dtype=like.dtype)
    if use_drop:
        for i in range(L):
            _drop_mask_into(m[i * L:(i + 1) * L], (bh * T + i) * T, k0, k1, threshold, keep_scale)
        return m.reshape((1, 1, L, L))
    return m.reshape((1, 1, 1, 1))


@kernel_jit(nogil=True)
def _attention_packed_forward_head(bh, gemm, like, qkv, starts, NH, HS, T, use_drop, k0, k1, threshold, keep_scale,
                                   scale, att, att_at, out, causal, masked, one, zero_adder):
    """Head bh (= b * NH + h) of `_attention_packed_forward_kernel`: its (L, L) block of att and its
    rows' columns of out."""
    C = NH * HS
    ld = qkv.shape[1]  # 3C
    b, h = bh // NH, bh % NH
    s, L = starts[b], starts[b + 1] - starts[b]
    if L == 0:
        return
    a = att[att_at[bh]:att_at[bh] + L * L].reshape((L, L))  # this head's block
    # raw scores: (L, HS) @ (HS, L) -> (L, L)
    _gemm(gemm, like, _NO_TRANS, _TRANS, L, L, HS, qkv[s, h * HS:], ld, qkv[s, C + h * HS:], ld, a, L, one)
    for i in range(L):
        masked_softmax_row(a[i], zero_adder, scale, i if causal else L - 1, masked)
    m = _drop_rows(use_drop, bh, T, L, k0, k1, threshold, keep_scale, a)  # (1, 1, L, L)
    src = times_drop(a, m, 0, 0) if use_drop else a  # (L, L) att * drop: what multiplies v
    # (L, L) @ (L, HS) -> (L, HS), into the rows' columns of head h
    _gemm(gemm, like, _NO_TRANS, _NO_TRANS, L, HS, L, src, L, qkv[s, 2 * C + h * HS:], ld, out[s, h * HS:], C, one)


@kernel_jit(parallel=True)
def _attention_packed_forward_kernel(gemm, like, qkv, starts, NH, HS, T, use_drop, k0, k1, threshold, keep_scale,
                                     scale, att, att_at, out, causal, masked, one):
    """Every head of the packed rows, in parallel: one call of `_attention_packed_forward_head`
    each (see "Compile time" above for why the head is a function of its own)."""
    B = starts.shape[0] - 1
    zero_adder = np.zeros(T, dtype=qkv.dtype)  # every key of a block is real
    for bh in numba.prange(B * NH):
        _attention_packed_forward_head(np.int64(bh), gemm, like, qkv, starts, NH, HS, T, use_drop, k0, k1, threshold,
                                       keep_scale, scale, att, att_at, out, causal, masked, one, zero_adder)


@kernel_jit(nogil=True)
def _attention_packed_backward_head(bh, gemm, like, dout, qkv, starts, NH, HS, T, att, att_at, use_drop, k0, k1,
                                    threshold, keep_scale, scale, dqkv, one):
    """Head bh of `_attention_packed_backward_kernel`: its rows' columns of dq, dk, dv in dqkv."""
    C = NH * HS
    ld = qkv.shape[1]  # 3C
    b, h = bh // NH, bh % NH
    s, L = starts[b], starts[b + 1] - starts[b]
    if L == 0:
        return
    a = att[att_at[bh]:att_at[bh] + L * L].reshape((L, L))
    m = _drop_rows(use_drop, bh, T, L, k0, k1, threshold, keep_scale, a)
    ad = times_drop(a, m, 0, 0) if use_drop else a  # (L, L) what multiplied v
    q, k, v = qkv[s, h * HS:], qkv[s, C + h * HS:], qkv[s, 2 * C + h * HS:]
    do = dout[s, h * HS:]
    # dv = ad^T @ dout: (L, L)^T @ (L, HS)
    _gemm(gemm, like, _TRANS, _NO_TRANS, L, HS, L, ad, L, do, C, dqkv[s, 2 * C + h * HS:], ld, one)
    datt = np.empty((L, L), dtype=qkv.dtype)  # dout @ v^T
    _gemm(gemm, like, _NO_TRANS, _TRANS, L, L, HS, do, C, v, ld, datt, L, one)
    softmax_backward_head(datt, a, m, 0, 0, use_drop, scale)
    _gemm(gemm, like, _NO_TRANS, _NO_TRANS, L, HS, L, datt, L, k, ld, dqkv[s, h * HS:], ld, one)  # dq
    _gemm(gemm, like, _TRANS, _NO_TRANS, L, HS, L, datt, L, q, ld, dqkv[s, C + h * HS:], ld, one)  # dk


@kernel_jit(parallel=True)
def _attention_packed_backward_kernel(gemm, like, dout, qkv, starts, NH, HS, T, att, att_at, use_drop, k0, k1,
                                      threshold, keep_scale, scale, dqkv, one):
    """Every head, in parallel: one call of `_attention_packed_backward_head` each."""
    B = starts.shape[0] - 1
    for bh in numba.prange(B * NH):
        _attention_packed_backward_head(np.int64(bh), gemm, like, dout, qkv, starts, NH, HS, T, att, att_at, use_drop, k0,
                                        k1, threshold, keep_scale, scale, dqkv, one)


_attention_packed_forward_serial = serial_version(_attention_packed_forward_kernel)
_attention_packed_backward_serial = serial_version(_attention_packed_backward_kernel)


def _prefix_starts(keep, grid, attn_mask):
    """(B + 1,) first rows of the sequences when `keep` holds each sequence's first L_b positions
    (real tokens first, then padding) and attn_mask agrees; else None."""
    B, T = grid
    mask = np.asarray(attn_mask).reshape(B, T) != 0
    lengths = mask.sum(axis=1)  # (B,)
    if not (mask == (np.arange(T)[None, :] < lengths[:, None])).all():
        return None  # padding before a real token: the grid path
    starts = np.zeros(B + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    expected = (np.arange(B)[:, None] * T + np.arange(T)[None, :])[mask]  # (N,) the real positions, in order
    if keep.shape != expected.shape or not np.array_equal(keep, expected):
        return None
    return starts


def attention_packed_forward(qkv, keep, grid, attn_mask, num_heads, dropout_p=0.0, rng=None, causal=False):
    """Same contract as layers.attention_packed_forward (the same masks for the same rng); the
    cache is a PackedHeadsCache on the fast path, the reference's on the grid path."""
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout probability {dropout_p} must be in [0, 1)")
    B, T = grid
    qkv = np.ascontiguousarray(qkv)
    gemm = blas.gemm_for_kernels(qkv.dtype)
    starts = None if gemm is None else _prefix_starts(np.asarray(keep), grid, attn_mask)
    if starts is None:  # the grid: the reference's copies around kernels.attention_forward
        x = np.zeros((B * T, qkv.shape[-1]), dtype=qkv.dtype)  # (B*T, 3C)
        x[keep] = qkv
        q, k, v = (layers.split_heads(t, num_heads) for t in np.split(x.reshape(B, T, -1), 3, axis=-1))
        out, cache = attention_forward(q, k, v, attn_mask, dropout_p, rng, causal)  # (B, NH, T, HS)
        return layers.merge_heads(out).reshape(B * T, -1)[keep], layers.PackedAttentionCache(cache, keep, grid)
    N, C3 = qkv.shape
    C = C3 // 3
    HS = C // num_heads
    dt = qkv.dtype
    lengths = np.diff(starts)  # (B,)
    att_at = np.zeros(B * num_heads + 1, dtype=np.int64)
    np.cumsum(np.repeat(lengths * lengths, num_heads), out=att_at[1:])
    att = np.empty(att_at[-1], dtype=dt)  # every head's (L_b, L_b) block
    out = np.empty((N, C), dtype=dt)  # (N, C)
    drop = _draw_dropout(rng, dropout_p)
    scale = 1.0 / math.sqrt(HS)
    kernel = pick_kernel(_attention_packed_forward_kernel, _attention_packed_forward_serial, (B, num_heads, T, HS))
    with blas.single_threaded():
        kernel(gemm[0], gemm[1], qkv, starts, num_heads, HS, T, drop is not None,
               *_dropout_args(drop or _NO_DROP, dt), dt.type(scale), att, att_at, out, bool(causal),
               dt.type(MASK_VALUE), dt.type(1.0))
    return out, PackedHeadsCache(qkv, starts, att, att_at, drop, scale, num_heads, T)


def attention_packed_backward(dout, cache):
    """Same contract as layers.attention_packed_backward: dout (N, C) -> dqkv (N, 3C)."""
    if not isinstance(cache, PackedHeadsCache):  # the grid path's cache
        attn, keep, (B, T) = cache
        d = np.zeros((B * T, dout.shape[-1]), dtype=dout.dtype)  # (B*T, C)
        d[keep] = dout
        grads = attention_backward(layers.split_heads(d.reshape(B, T, -1), attn.q.shape[1]), attn)  # 3 x (B, NH, T, HS)
        return merge_qkv(*grads).reshape(B * T, -1)[keep]  # (N, 3C)
    qkv, starts, att, att_at, drop, scale, NH, T = cache
    dt = qkv.dtype
    gemm = blas.gemm_for_kernels(dt)
    B = starts.shape[0] - 1
    HS = qkv.shape[1] // 3 // NH
    dout = np.ascontiguousarray(dout, dtype=dt)
    dqkv = np.empty_like(qkv)  # (N, 3C): every row and column is written by its head
    kernel = pick_kernel(_attention_packed_backward_kernel, _attention_packed_backward_serial, (B, NH, T, HS))
    with blas.single_threaded():
        kernel(gemm[0], gemm[1], dout, qkv, starts, NH, HS, T, att, att_at, drop is not None,
               *_dropout_args(drop or _NO_DROP, dt), dt.type(scale), dqkv, dt.type(1.0))
    return dqkv


# ---------------------------------------------------------------------------------------------
# linear: the reference, with the leading axes flattened first. x (B, T, C_in) @ w as one
# (B*T, C_in) @ (C_in, C_out) BLAS call instead of NumPy's loop of B small calls; the bias added
# in place by a parallel pass, and db summed by one (NumPy's `+=` and `sum(axis=0)` run on one
# thread whatever the core count). Both do each element's float operations in NumPy's order
# (db: the rows one after the other, as NumPy's axis-0 sum), so the results are NumPy's bits.

_ROWS_MIN = 1 << 14  # elements per parallel work item of the row-chunked passes below
_COLS = 16  # columns per work item of the scatter-add below (times 4)
_COLS_SUM = 128  # columns per work item of the column sums (512 bytes of float32)


@kernel_jit(parallel=True)
def _add_bias_kernel(out, b):
    """out (N, C) += b (C,), in place, chunks of rows in parallel."""
    N, C = out.shape
    per = max(1, _ROWS_MIN // max(C, 1))
    for c in numba.prange((N + per - 1) // per):
        for r in range(c * per, min(N, (c + 1) * per)):
            orow = out[r]
            for j in range(C):
                orow[j] += b[j]


@kernel_jit(inline="always")
def _copy_into(dst, src):
    for j in range(dst.shape[0]):
        dst[j] = src[j]


@kernel_jit(inline="always")
def _add_into(dst, src):
    """dst += src over a row (slices in, plain indices: the loop vectorizes)."""
    for j in range(dst.shape[0]):
        dst[j] += src[j]


@kernel_jit(parallel=True)
def _column_sum_kernel(x, out):
    """out (C,) = x (N >= 1, C).sum(axis=0) as NumPy sums it: the first row, plus each next row in
    order. Blocks of _COLS_SUM columns in parallel; each reads its part of every row, long enough
    (512 bytes) to keep the reads streaming."""
    N, C = x.shape
    for c in numba.prange((C + _COLS_SUM - 1) // _COLS_SUM):
        lo, hi = c * _COLS_SUM, min(C, (c + 1) * _COLS_SUM)
        acc = out[lo:hi]
        _copy_into(acc, x[0, lo:hi])
        for r in range(1, N):
            _add_into(acc, x[r, lo:hi])


def column_sum(x):
    """x (N, C) -> x.sum(axis=0) (C,), the same bits, in parallel when it is big enough to pay."""
    if x.size < _ROWS_MIN or not x.flags.c_contiguous or x.shape[1] < 2 * _COLS_SUM:
        return x.sum(axis=0)  # small, or too few columns to split
    out = np.empty(x.shape[1], dtype=x.dtype)  # (C,)
    _column_sum_kernel(x, out)
    return out


def add_bias(out, b):
    """out (N, C) += b (C,) in place (out C-contiguous), in parallel when it pays."""
    if out.size < _ROWS_MIN:
        out += b
    else:
        _add_bias_kernel(out, b.astype(out.dtype, copy=False))
    return out


def linear_forward(x, w, b):
    """Same contract as layers.linear_forward."""
    c_in, c_out = w.shape
    out = x.reshape(-1, c_in) @ w  # (N, C_in) @ (C_in, C_out) -> (N, C_out)
    add_bias(out, b)
    return out.reshape(*x.shape[:-1], c_out), layers.LinearCache(x, w)


def linear_backward(dout, cache):
    """Same contract as layers.linear_backward: -> dx, dw, db."""
    x, w = cache
    c_in, c_out = w.shape
    d2 = dout.reshape(-1, c_out)  # (N, C_out)
    dx = (d2 @ w.T).reshape(x.shape)  # (N, C_in) -> (..., C_in)
    dw = x.reshape(-1, c_in).T @ d2  # (C_in, N) @ (N, C_out) -> (C_in, C_out)
    db = column_sum(d2)  # (C_out,)
    return dx, dw, db


# ---------------------------------------------------------------------------------------------
# GELU, elementwise: one pass instead of NumPy's five temporaries. Constants arrive typed as the
# array's dtype so float32 stays float32 (a Python float literal would promote to float64).
#
# The one place where a kernel's cache differs from the reference's: `gelu_forward` keeps the
# derivative gelu'(x) (`GeluGradCache`) instead of x (`layers.GeluCache`). The forward pass has
# x in a register anyway, so one more exp there makes the backward a single multiply instead of
# a second erf + exp per element; the cache is still one array of x's size (x itself is not kept).
# Tiny training step, 2 cores: GELU forward + backward ~24 ms -> ~13 ms. `gelu_backward` takes
# either cache, so the reference's cache still works here.

_CHUNK = 4096  # elements per parallel work item


class GeluGradCache(NamedTuple):
    dgelu: np.ndarray  # (...,) gelu'(x), computed by the forward pass
    approximate: str  # "none" (erf) or "tanh"


# Each kernel hands its prange chunk to an inlined helper as slices: indexing the whole arrays
# inside the prange loop kept LLVM from vectorizing the loop (as for AdamW below). Measured on one
# thread, GELU forward over 3543 x 512 float32 (the tiny step's FFN): 6.9 ms before, 1.8 ms after.

@kernel_jit(inline="always")
def _gelu_erf_forward_chunk(x, out, dgelu, half, one, inv_sqrt2, inv_sqrt_2pi):
    for i in range(x.shape[0]):
        xi = x[i]
        e, g = _erf_gauss(xi * inv_sqrt2)  # erf(x / sqrt 2), exp(-x^2 / 2)
        cdf = half * (one + e)  # Phi(x)
        pdf = g * inv_sqrt_2pi  # phi(x)
        out[i] = xi * cdf  # 0.5 x (1 + erf(x / sqrt 2))
        dgelu[i] = cdf + xi * pdf


@kernel_jit(inline="always")
def _gelu_erf_backward_chunk(dout, x, dx, half, one, inv_sqrt2, inv_sqrt_2pi):
    for i in range(x.shape[0]):
        xi = x[i]
        cdf = half * (one + _erf(xi * inv_sqrt2))  # Phi(x)
        pdf = _exp(-half * xi * xi) * inv_sqrt_2pi  # phi(x)
        dx[i] = dout[i] * (cdf + xi * pdf)


@kernel_jit(inline="always")
def _gelu_tanh_forward_chunk(x, out, dgelu, half, one, c0, c1, three):
    for i in range(x.shape[0]):
        xi = x[i]
        t = math.tanh(c0 * (xi + c1 * xi * xi * xi))
        du = c0 * (one + three * c1 * xi * xi)
        out[i] = half * xi * (one + t)
        dgelu[i] = half * (one + t) + half * xi * (one - t * t) * du


@kernel_jit(inline="always")
def _gelu_tanh_backward_chunk(dout, x, dx, half, one, c0, c1, three):
    for i in range(x.shape[0]):
        xi = x[i]
        t = math.tanh(c0 * (xi + c1 * xi * xi * xi))
        du = c0 * (one + three * c1 * xi * xi)
        dx[i] = dout[i] * (half * (one + t) + half * xi * (one - t * t) * du)


@kernel_jit(parallel=True)
def _gelu_erf_forward_kernel(x, out, dgelu, half, one, inv_sqrt2, inv_sqrt_2pi):
    n = x.shape[0]
    for c in numba.prange((n + _CHUNK - 1) // _CHUNK):
        lo, hi = c * _CHUNK, min(n, (c + 1) * _CHUNK)
        _gelu_erf_forward_chunk(x[lo:hi], out[lo:hi], dgelu[lo:hi], half, one, inv_sqrt2, inv_sqrt_2pi)


@kernel_jit(parallel=True)
def _gelu_erf_backward_kernel(dout, x, dx, half, one, inv_sqrt2, inv_sqrt_2pi):
    n = x.shape[0]
    for c in numba.prange((n + _CHUNK - 1) // _CHUNK):
        lo, hi = c * _CHUNK, min(n, (c + 1) * _CHUNK)
        _gelu_erf_backward_chunk(dout[lo:hi], x[lo:hi], dx[lo:hi], half, one, inv_sqrt2, inv_sqrt_2pi)


@kernel_jit(parallel=True)
def _gelu_tanh_forward_kernel(x, out, dgelu, half, one, c0, c1, three):
    n = x.shape[0]
    for c in numba.prange((n + _CHUNK - 1) // _CHUNK):
        lo, hi = c * _CHUNK, min(n, (c + 1) * _CHUNK)
        _gelu_tanh_forward_chunk(x[lo:hi], out[lo:hi], dgelu[lo:hi], half, one, c0, c1, three)


@kernel_jit(parallel=True)
def _gelu_tanh_backward_kernel(dout, x, dx, half, one, c0, c1, three):
    n = x.shape[0]
    for c in numba.prange((n + _CHUNK - 1) // _CHUNK):
        lo, hi = c * _CHUNK, min(n, (c + 1) * _CHUNK)
        _gelu_tanh_backward_chunk(dout[lo:hi], x[lo:hi], dx[lo:hi], half, one, c0, c1, three)


@kernel_jit(inline="always")
def _multiply_chunk(a, b, out):
    for i in range(a.shape[0]):
        out[i] = a[i] * b[i]


@kernel_jit(parallel=True)
def _multiply_kernel(a, b, out):
    n = a.shape[0]
    for c in numba.prange((n + _CHUNK - 1) // _CHUNK):
        lo, hi = c * _CHUNK, min(n, (c + 1) * _CHUNK)
        _multiply_chunk(a[lo:hi], b[lo:hi], out[lo:hi])


@kernel_jit(inline="always")
def _add_chunk(a, b, out):
    for i in range(a.shape[0]):
        out[i] = a[i] + b[i]


@kernel_jit(parallel=True)
def _add_kernel(a, b, out):
    n = a.shape[0]
    for c in numba.prange((n + _CHUNK - 1) // _CHUNK):
        lo, hi = c * _CHUNK, min(n, (c + 1) * _CHUNK)
        _add_chunk(a[lo:hi], b[lo:hi], out[lo:hi])


def add(a, b):
    """Same contract as layers.add (a + b, one shape and dtype), in parallel when it pays: NumPy's bits."""
    if a.shape != b.shape or a.dtype != b.dtype or a.size < _ROWS_MIN:
        return a + b
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    out = np.empty_like(a)
    _add_kernel(a.reshape(-1), b.reshape(-1), out.reshape(-1))
    return out


def multiply(a, b):
    """a * b elementwise in b's dtype (a and b of one shape), a parallel pass: NumPy's bits."""
    a = np.ascontiguousarray(a, dtype=b.dtype)
    b = np.ascontiguousarray(b)
    out = np.empty_like(b)
    if b.size < _ROWS_MIN:
        np.multiply(a, b, out=out)
    else:
        _multiply_kernel(a.reshape(-1), b.reshape(-1), out.reshape(-1))
    return out


def _gelu_constants(f, approximate):
    if approximate == "none":
        return f(0.5), f(1.0), f(1.0 / math.sqrt(2.0)), f(1.0 / math.sqrt(2.0 * math.pi))
    return f(0.5), f(1.0), f(math.sqrt(2.0 / math.pi)), f(0.044715), f(3.0)


def gelu_forward(x, approximate="none"):
    """Same contract as layers.gelu_forward; the cache is a GeluGradCache (see above)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate={approximate!r}: expected 'none' (erf) or 'tanh'")
    x = np.ascontiguousarray(x)
    out = np.empty_like(x)  # (...)
    dgelu = np.empty_like(x)  # (...)
    kernel = _gelu_erf_forward_kernel if approximate == "none" else _gelu_tanh_forward_kernel
    kernel(x.reshape(-1), out.reshape(-1), dgelu.reshape(-1), *_gelu_constants(x.dtype.type, approximate))
    return out, GeluGradCache(dgelu, approximate)


def gelu_backward(dout, cache):
    """Same contract as layers.gelu_backward, for a GeluGradCache or the reference's GeluCache."""
    if isinstance(cache, GeluGradCache):
        return multiply(dout, cache.dgelu)  # (...) dout * gelu'(x)
    x, approximate = cache
    dout = np.ascontiguousarray(dout, dtype=x.dtype)
    dx = np.empty_like(x)  # (...)
    kernel = _gelu_erf_backward_kernel if approximate == "none" else _gelu_tanh_backward_kernel
    kernel(dout.reshape(-1), x.reshape(-1), dx.reshape(-1), *_gelu_constants(x.dtype.type, approximate))
    return dx


# ---------------------------------------------------------------------------------------------
# dropout: the mask of layers.dropout_forward (Philox bits, see _philox_block), made and applied
# in one parallel pass; the cache keeps the key (DropoutKey), and the backward makes the mask
# again instead of reading a stored one. Same bits as the reference: x * mask, mask 0 or 1/(1-p).


@kernel_jit(inline="always")
def _dropout_chunk(x, out, start, k0, k1, threshold, keep_scale):
    m = np.empty(x.shape[0], dtype=x.dtype)
    _drop_mask_into(m, start, k0, k1, threshold, keep_scale)
    for i in range(x.shape[0]):
        out[i] = x[i] * m[i]


@kernel_jit(parallel=True)
def _dropout_kernel(x, out, k0, k1, threshold, keep_scale):
    """out = x * mask, element i's mask from its Philox word i."""
    n = x.shape[0]
    for c in numba.prange((n + _CHUNK - 1) // _CHUNK):
        lo, hi = c * _CHUNK, min(n, (c + 1) * _CHUNK)
        _dropout_chunk(x[lo:hi], out[lo:hi], lo, k0, k1, threshold, keep_scale)


@kernel_jit(parallel=True)
def _dropout_mask_kernel(m, k0, k1, threshold, keep_scale):
    """m = the mask itself (DropoutKey.mask)."""
    n = m.shape[0]
    for c in numba.prange((n + _CHUNK - 1) // _CHUNK):
        lo, hi = c * _CHUNK, min(n, (c + 1) * _CHUNK)
        _drop_mask_into(m[lo:hi], lo, k0, k1, threshold, keep_scale)


def dropout_forward(x, p, rng):
    """Same contract as layers.dropout_forward, and the same output for the same rng; the cache is
    a DropoutKey (the mask is recomputed in the backward, not kept)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability {p} must be in [0, 1)")
    if p == 0.0:
        return x, layers.DropoutCache(None)
    drop = _draw_dropout(rng, p)
    x = np.ascontiguousarray(x)
    out = np.empty_like(x)  # (...)
    _dropout_kernel(x.reshape(-1), out.reshape(-1), *_dropout_args(drop, x.dtype))
    return out, drop


def dropout_backward(dout, cache):
    """Same contract as layers.dropout_backward, for a DropoutKey or the reference's DropoutCache."""
    if not isinstance(cache, DropoutKey):
        return layers.dropout_backward(dout, cache)
    dout = np.ascontiguousarray(dout)
    dx = np.empty_like(dout)  # (...)
    _dropout_kernel(dout.reshape(-1), dx.reshape(-1), *_dropout_args(cache, dout.dtype))
    return dx


# ---------------------------------------------------------------------------------------------
# layernorm over the last axis, one row per work item; the same cache as the reference


@kernel_jit
def _layernorm_forward_row(xr, w, b, eps, inv_c, one, nr, orow):
    """One row of `_layernorm_forward_kernel`: nr <- the normalized row, orow <- nr * w + b
    -> the row's rstd."""
    C = xr.shape[0]
    mean = _row_sum(xr) * inv_c
    for j in range(C):
        nr[j] = xr[j] - mean
    var = _row_dot(nr, nr) * inv_c
    rs = one / math.sqrt(var + eps)
    for j in range(C):
        nr[j] = nr[j] * rs
        orow[j] = nr[j] * w[j] + b[j]
    return rs


@kernel_jit(parallel=True)
def _layernorm_forward_kernel(x, w, b, eps, inv_c, one, out, norm, rstd):
    for r in numba.prange(x.shape[0]):
        rstd[r, 0] = _layernorm_forward_row(x[r], w, b, eps, inv_c, one, norm[r], out[r])


@kernel_jit
def _layernorm_backward_rows(dout, norm, w, rstd, inv_c, dx, dwp, dbp, lo, hi):
    """Rows lo..hi-1 of `_layernorm_backward_kernel`: their dx, their sums added into dwp, dbp."""
    C = dout.shape[1]
    g = np.empty(C, dtype=dout.dtype)  # (C,)
    for r in range(lo, hi):
        dr = dout[r]
        nr = norm[r]
        for j in range(C):
            dbp[j] += dr[j]
            dwp[j] += dr[j] * nr[j]
            g[j] = dr[j] * w[j]
        gmean = _row_sum(g) * inv_c
        gnmean = _row_dot(g, nr) * inv_c
        rs = rstd[r, 0]
        dxr = dx[r]
        for j in range(C):
            dxr[j] = rs * (g[j] - gmean - nr[j] * gnmean)


@kernel_jit(parallel=True)
def _layernorm_backward_kernel(dout, norm, w, rstd, inv_c, dx, dw_parts, db_parts):
    """dx row by row; dw, db as per-chunk partial sums (rows are split into dw_parts.shape[0]
    chunks, each chunk owns its row of dw_parts), summed by the caller."""
    N = dout.shape[0]
    n_chunks = dw_parts.shape[0]
    per = (N + n_chunks - 1) // n_chunks
    for c in numba.prange(n_chunks):
        _layernorm_backward_rows(dout, norm, w, rstd, inv_c, dx, dw_parts[c], db_parts[c], c * per,
                                 min(N, (c + 1) * per))


def layernorm_forward(x, w, b, eps=1e-12):
    """Same contract (and cache) as layers.layernorm_forward."""
    C = x.shape[-1]
    x2 = np.ascontiguousarray(x).reshape(-1, C)  # (N, C)
    dt = x.dtype
    out = np.empty_like(x2)  # (N, C)
    norm = np.empty_like(x2)  # (N, C)
    rstd = np.empty((x2.shape[0], 1), dtype=dt)  # (N, 1)
    _layernorm_forward_kernel(x2, w.astype(dt, copy=False), b.astype(dt, copy=False), dt.type(eps),
                              dt.type(1.0 / C), dt.type(1.0), out, norm, rstd)
    lead = x.shape[:-1]
    return out.reshape(x.shape), layers.LayerNormCache(norm.reshape(x.shape), w, rstd.reshape(*lead, 1))


def layernorm_backward(dout, cache):
    """Same contract as layers.layernorm_backward: -> dx, dw, db."""
    norm, w, rstd = cache
    C = norm.shape[-1]
    dt = norm.dtype
    d2 = np.ascontiguousarray(dout, dtype=dt).reshape(-1, C)  # (N, C)
    n2 = norm.reshape(-1, C)  # (N, C)
    N = d2.shape[0]
    n_chunks = max(1, min(4 * numba.get_num_threads(), N // 64))
    dw_parts = np.zeros((n_chunks, C), dtype=dt)  # (chunks, C)
    db_parts = np.zeros((n_chunks, C), dtype=dt)  # (chunks, C)
    dx = np.empty_like(d2)  # (N, C)
    _layernorm_backward_kernel(d2, n2, w.astype(dt, copy=False), rstd.reshape(-1, 1), dt.type(1.0 / C),
                               dx, dw_parts, db_parts)
    return dx.reshape(norm.shape), dw_parts.sum(axis=0), db_parts.sum(axis=0)


# ---------------------------------------------------------------------------------------------
# embedding: the sum of the three lookups row by row in parallel; the backward's scatter-add in
# parallel over the distinct ids, each id's rows added in their order (as np.add.at adds them),
# so both give the reference's bits


@kernel_jit(parallel=True)
def _embedding_forward_kernel(ids, segs, tok, seg, pos, out):
    """out[r] = (tok[ids[r]] + seg[segs[r]]) + pos[r % T] for the rows r of out (B*T, C)."""
    N, C = out.shape
    T = ids.shape[1]
    per = max(1, _ROWS_MIN // max(C, 1))
    for c in numba.prange((N + per - 1) // per):
        for r in range(c * per, min(N, (c + 1) * per)):
            b, t = r // T, r % T
            trow, srow, prow, orow = tok[ids[b, t]], seg[segs[b, t]], pos[t], out[r]
            for j in range(C):
                orow[j] = (trow[j] + srow[j]) + prow[j]


def embedding_forward(input_ids, segment_ids, tok_emb, seg_emb, pos_emb):
    """Same contract (and cache) as layers.embedding_forward."""
    B, T = input_ids.shape
    if segment_ids.shape != (B, T):
        raise ValueError(f"segment_ids has shape {segment_ids.shape}, expected {(B, T)} like input_ids")
    if T > pos_emb.shape[0]:
        raise ValueError(f"sequence length {T} exceeds max_position_embeddings {pos_emb.shape[0]}")
    layers._check_ids("input_ids", input_ids, tok_emb.shape[0])
    layers._check_ids("segment_ids", segment_ids, seg_emb.shape[0])
    dt = np.result_type(tok_emb, seg_emb, pos_emb)
    C = tok_emb.shape[1]
    out = np.empty((B * T, C), dtype=dt)  # (B*T, C)
    _embedding_forward_kernel(np.ascontiguousarray(input_ids, dtype=np.int64),
                              np.ascontiguousarray(segment_ids, dtype=np.int64), tok_emb.astype(dt, copy=False),
                              seg_emb.astype(dt, copy=False), pos_emb.astype(dt, copy=False), out)
    cache = layers.EmbeddingCache(input_ids, segment_ids, tok_emb.shape, seg_emb.shape, pos_emb.shape)
    return out.reshape(B, T, C), cache


@kernel_jit(parallel=True)
def _zero_kernel(x):
    """x (N, C) = 0, chunks of rows in parallel (pages first touched by the threads that fill them)."""
    N, C = x.shape
    per = max(1, _ROWS_MIN // max(C, 1))
    for c in numba.prange((N + per - 1) // per):
        for r in range(c * per, min(N, (c + 1) * per)):
            xr = x[r]
            for j in range(C):
                xr[j] = 0


def zeros(shape, dtype):
    """np.zeros(shape, dtype) (2-D), filled in parallel when it is big."""
    x = np.empty(shape, dtype=dtype)
    if x.size < _ROWS_MIN:
        x.fill(0)
    else:
        _zero_kernel(x)
    return x


@kernel_jit(parallel=True)
def _scatter_add_sorted_kernel(dtable, ids, order, starts, rows):
    """dtable[ids[n]] += rows[n] for every n: `order` lists the n sorted by id, keeping their
    order within an id (a stable sort), and the ids' groups start at starts[g]. Work items are
    (group, block of columns), so the few groups of the segment table still split; each item
    owns its rows and columns of dtable, and adds its n in order."""
    C = rows.shape[1]
    n_blocks = (C + _COLS * 4 - 1) // (_COLS * 4)
    n_groups = starts.shape[0] - 1
    for item in numba.prange(n_groups * n_blocks):
        g, blk = item // n_blocks, item % n_blocks
        lo, hi = blk * _COLS * 4, min(C, (blk + 1) * _COLS * 4)
        drow = dtable[ids[order[starts[g]]]]
        for k in range(starts[g], starts[g + 1]):
            r = rows[order[k]]
            for j in range(lo, hi):
                drow[j] += r[j]


def scatter_add_rows(dtable, ids, rows):
    """dtable[ids[n]] += rows[n] for every n, in place, as np.add.at(dtable, ids, rows) (the same
    bits: each row of dtable gets its rows in their order). ids (N,) int, rows (N, C)."""
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    order = np.argsort(ids, kind="stable")  # (N,) the n grouped by id, in order within each
    sorted_ids = ids[order]  # (N,)
    starts = np.flatnonzero(np.concatenate(([True], sorted_ids[1:] != sorted_ids[:-1], [True])))  # (groups + 1,)
    if ids.size:
        _scatter_add_sorted_kernel(dtable, ids, order, starts, np.ascontiguousarray(rows))


@kernel_jit(parallel=True)
def _position_sum_kernel(dout, dpos):
    """dpos[t] = sum over b of dout[b, t], the sequences in order (NumPy's axis-0 sum)."""
    B, T, _ = dout.shape
    for t in numba.prange(T):
        acc = dpos[t]
        _copy_into(acc, dout[0, t])
        for b in range(1, B):
            _add_into(acc, dout[b, t])


def embedding_backward(dout, cache):
    """Same contract as layers.embedding_backward: -> dtok_emb, dseg_emb, dpos_emb."""
    input_ids, segment_ids, tok_shape, seg_shape, pos_shape = cache
    T = input_ids.shape[1]
    C = dout.shape[-1]
    dout = np.ascontiguousarray(dout)
    rows = dout.reshape(-1, C)  # (B*T, C)
    dtok = zeros(tok_shape, dout.dtype)  # (V, C)
    scatter_add_rows(dtok, input_ids.reshape(-1), rows)
    dseg = zeros(seg_shape, dout.dtype)  # (TV, C)
    scatter_add_rows(dseg, segment_ids.reshape(-1), rows)
    dpos = zeros(pos_shape, dout.dtype)  # (MAXPOS, C)
    _position_sum_kernel(dout.reshape(-1, T, C), dpos[:T])  # every sequence uses positions 0..T-1 once
    return dtok, dseg, dpos


# ---------------------------------------------------------------------------------------------
# softmax cross-entropy: one parallel pass per row over the (N, K) logits (K = V for the MLM)


@kernel_jit(parallel=True)
def _softmax_xent_kernel(z, t, probs, logp_t):
    """probs = softmax(z) row by row; logp_t[r] = log softmax(z)[r, t[r]]."""
    for r in numba.prange(z.shape[0]):
        m, s = _softmax_row(z[r], probs[r])
        logp_t[r] = (z[r, t[r]] - m) - math.log(s)


@kernel_jit(parallel=True)
def _xent_backward_kernel(probs, t, scale, dz):
    """dz = scale[r] * (probs - onehot(t)) row by row."""
    N, K = probs.shape
    for r in numba.prange(N):
        sr = scale[r]
        pr = probs[r]
        dr = dz[r]
        for j in range(K):
            dr[j] = pr[j] * sr
        dr[t[r]] -= sr


def cross_entropy_forward(logits, targets, ignore_index=-100, class_weights=None):
    """Same contract (and cache) as layers.cross_entropy_forward."""
    K = logits.shape[-1]
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets have shape {targets.shape}, expected {logits.shape[:-1]}")
    z = np.ascontiguousarray(logits).reshape(-1, K)  # (N, K)
    t = targets.reshape(-1)  # (N,)
    valid = t != ignore_index  # (N,)
    bad = valid & ((t < 0) | (t >= K))
    if bad.any():
        raise ValueError(f"target {int(t[bad][0])} is outside [0, {K}) (and is not ignore_index {ignore_index})")
    layers.check_class_weights(class_weights, K)
    t = np.where(valid, t, 0).astype(np.int64)  # (N,)
    probs = np.empty_like(z)  # (N, K)
    logp_t = np.empty(z.shape[0], dtype=z.dtype)  # (N,)
    _softmax_xent_kernel(z, t, probs, logp_t)
    weight = layers.target_weights(valid, t, class_weights, logits.dtype)  # (N,)
    loss = -(logp_t * weight).sum()  # ()
    return logits.dtype.type(loss), layers.CrossEntropyCache(probs, t, weight, logits.shape)


def cross_entropy_backward(dloss, cache):
    """Same contract as layers.cross_entropy_backward: -> dlogits."""
    probs, t, weight, shape = cache
    dz = np.empty_like(probs)  # (N, K)
    _xent_backward_kernel(probs, t.astype(np.int64, copy=False), (weight * dloss).astype(probs.dtype), dz)
    return dz.reshape(shape)


# ---------------------------------------------------------------------------------------------
# AdamW: the update of `optim.AdamW.step` in one pass over each parameter instead of about ten
# NumPy passes (each a full read and write of the array). Every element goes through the same
# float operations in the same order as the NumPy version, with the constants rounded to the
# parameter's dtype as NumPy rounds a Python float, so the two give identical bits (a test).


@kernel_jit(inline="always")
def _adamw_chunk(p, g, m, v, b1, one_minus_b1, b2, one_minus_b2, eps, pre_decay, bc2_sqrt, wd, scale):
    # branch-free, so that LLVM vectorizes it; the factors that a mode does not use are exact
    # no-ops (x * 1, x / 1, x + p * 0), which keeps the bits of the NumPy version
    for i in range(p.shape[0]):
        gi = g[i]
        pi = p[i] * pre_decay  # torch form: p * (1 - lr*wd) before the Adam step
        mi = m[i] * b1 + gi * one_minus_b1  # first moment
        vi = v[i] * b2 + (gi * gi) * one_minus_b2  # second moment
        u = mi / (math.sqrt(vi) / bc2_sqrt + eps)  # the Adam direction
        u = (u + pi * wd) * scale  # + decoupled weight decay (Google form), times lr
        m[i] = mi
        v[i] = vi
        p[i] = pi - u


def adamw_update(p, g, m, v, *, b1, b2, eps, lr, wd, decay, bias_correction, step_size, bc2_sqrt):
    """One AdamW step of one parameter, in place on p, m, v (contiguous, same shape and dtype);
    the arguments are those of `optim.AdamW.step` (step_size and bc2_sqrt only matter with
    bias_correction). adamw_update_all does every parameter in one pass."""
    adamw_update_all([p], [g], [m], [v], [decay], b1=b1, b2=b2, eps=eps, lr=lr, wd=wd,
                     bias_correction=bias_correction, step_size=step_size, bc2_sqrt=bc2_sqrt)


# ---------------------------------------------------------------------------------------------
# the whole optimizer step in one parallel pass each: the global gradient norm, the clipping
# scale, and AdamW over every parameter. One kernel call covers all the arrays (their addresses
# and sizes are the arguments; work items are (array, chunk of _CHUNK elements)), instead of one
# call per parameter: a BERT has ~100 of them, most of them small (biases, LayerNorms), and a
# parallel call costs the same wake-up of every thread whatever its size. Chunks are fixed in
# size, so the results do not depend on the number of threads.


@intrinsic
def _typed_pointer(typingctx, address, like):
    """The integer `address` as a pointer to elements of like's dtype (like: an array)."""
    ptr = numba.types.CPointer(like.dtype)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(ptr))

    return ptr(address, like), codegen


@kernel_jit(inline="always")
def _view(address, n, like):
    """The n elements at `address` as a 1-D array of like's dtype."""
    return numba.carray(_typed_pointer(address, like), n)


def _work_items(sizes):
    """(array index, first element) of every chunk of _CHUNK elements of arrays of `sizes`."""
    sizes = np.asarray(sizes, dtype=np.int64)
    per = (sizes + _CHUNK - 1) // _CHUNK  # chunks of each array
    item_array = np.repeat(np.arange(sizes.size, dtype=np.int64), per)  # (items,)
    first = np.cumsum(per) - per  # (arrays,) the index of each array's first item
    item_lo = (np.arange(item_array.size, dtype=np.int64) - first[item_array]) * _CHUNK  # (items,)
    return item_array, item_lo


def _addresses(arrays):
    return np.array([a.ctypes.data for a in arrays], dtype=np.int64)


@kernel_jit(inline="always")
def _sum_squares_chunk(x):
    """sum(x * x) accumulated in float64, as 8 partial sums (see _row_sum)."""
    n = x.shape[0]
    s = np.zeros(8, dtype=np.float64)
    j = 0
    while j + 8 <= n:
        for k in range(8):
            v = np.float64(x[j + k])
            s[k] += v * v
        j += 8
    t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
    while j < n:
        v = np.float64(x[j])
        t += v * v
        j += 1
    return t


@kernel_jit(parallel=True)
def _sum_squares_kernel(like, addresses, sizes, item_array, item_lo, partial):
    for it in numba.prange(item_array.shape[0]):
        i, lo = item_array[it], item_lo[it]
        x = _view(addresses[i], sizes[i], like)
        partial[it] = _sum_squares_chunk(x[lo:min(sizes[i], lo + _CHUNK)])


@kernel_jit(parallel=True)
def _scale_kernel(like, src, dst, sizes, item_array, item_lo, factor):
    for it in numba.prange(item_array.shape[0]):
        i, lo = item_array[it], item_lo[it]
        hi = min(sizes[i], lo + _CHUNK)
        a, b = _view(src[i], sizes[i], like), _view(dst[i], sizes[i], like)
        for j in range(lo, hi):
            b[j] = a[j] * factor


def _by_dtype(arrays):
    """{dtype: [index, ...]} of a list of arrays."""
    groups = {}
    for i, a in enumerate(arrays):
        groups.setdefault(a.dtype, []).append(i)
    return groups


def sum_of_squares(arrays) -> float:
    """sum over every array of sum(a**2), accumulated in float64, in one parallel pass per dtype
    (optim.global_norm's sum; the summation order differs, the value to float64 rounding not)."""
    arrays = [np.ascontiguousarray(a) for a in arrays]
    total = 0.0
    for dt, idx in _by_dtype(arrays).items():
        group = [arrays[i] for i in idx if arrays[i].size]
        if not group:
            continue
        sizes = np.array([a.size for a in group], dtype=np.int64)
        item_array, item_lo = _work_items(sizes)
        partial = np.empty(item_array.size, dtype=np.float64)
        _sum_squares_kernel(np.empty(1, dtype=dt), _addresses(group), sizes, item_array, item_lo, partial)
        total += float(partial.sum())
    return total


def scaled(arrays, factor):
    """[a * a.dtype.type(factor) for a in arrays] as new arrays, in one parallel pass per dtype
    (NumPy's bits: one multiplication per element)."""
    arrays = [np.ascontiguousarray(a) for a in arrays]
    out = [np.empty_like(a) for a in arrays]
    for dt, idx in _by_dtype(arrays).items():
        idx = [i for i in idx if arrays[i].size]
        if not idx:
            continue
        sizes = np.array([arrays[i].size for i in idx], dtype=np.int64)
        item_array, item_lo = _work_items(sizes)
        _scale_kernel(np.empty(1, dtype=dt), _addresses([arrays[i] for i in idx]), _addresses([out[i] for i in idx]),
                      sizes, item_array, item_lo, dt.type(factor))
    return out


@kernel_jit(parallel=True)
def _adamw_all_kernel(like, p_at, g_at, m_at, v_at, sizes, item_array, item_lo, consts):
    """AdamW on every chunk of every parameter: consts[i] = (b1, 1-b1, b2, 1-b2, eps, pre_decay,
    bc2_sqrt, wd, scale) of parameter i, in its dtype."""
    for it in numba.prange(item_array.shape[0]):
        i, lo = item_array[it], item_lo[it]
        n = sizes[i]
        hi = min(n, lo + _CHUNK)
        c = consts[i]
        _adamw_chunk(_view(p_at[i], n, like)[lo:hi], _view(g_at[i], n, like)[lo:hi], _view(m_at[i], n, like)[lo:hi],
                     _view(v_at[i], n, like)[lo:hi], c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8])


def _adamw_constants(dt, *, b1, b2, eps, lr, wd, decay, bias_correction, step_size, bc2_sqrt):
    """The nine constants of _adamw_chunk for one parameter, as adamw_update makes them."""
    if bias_correction:  # p*(1-lr*wd) first; m/(sqrt(v)/bc2 + eps) * step_size
        pre, bc2, wd_in, scale = (1.0 - lr * wd if decay else 1.0), bc2_sqrt, 0.0, step_size
    else:  # (m/(sqrt(v) + eps) + wd*p) * lr
        pre, bc2, wd_in, scale = 1.0, 1.0, (wd if decay else 0.0), lr
    f = dt.type
    return [f(b1), f(1.0 - b1), f(b2), f(1.0 - b2), f(eps), f(pre), f(bc2), f(wd_in), f(scale)]


def adamw_update_all(ps, gs, ms, vs, decays, **hyper):
    """adamw_update on every parameter of the lists (contiguous p, m, v; g of any layout, taken in
    p's dtype), one parallel pass per dtype. hyper: adamw_update's keywords but `decay`."""
    gs = [np.ascontiguousarray(g, dtype=p.dtype) for p, g in zip(ps, gs)]
    for dt, idx in _by_dtype(ps).items():
        idx = [i for i in idx if ps[i].size]
        if not idx:
            continue
        sizes = np.array([ps[i].size for i in idx], dtype=np.int64)
        item_array, item_lo = _work_items(sizes)
        consts = np.array([_adamw_constants(dt, decay=decays[i], **hyper) for i in idx], dtype=dt)  # (params, 9)
        _adamw_all_kernel(np.empty(1, dtype=dt), *(_addresses([x[i] for i in idx]) for x in (ps, gs, ms, vs)),
                          sizes, item_array, item_lo, consts)


# ---------------------------------------------------------------------------------------------
# the rest of what the model uses: the NumPy reference itself (not worth compiling)

from minibert.layers import split_heads  # re-exported: kernels has every name of layers the model uses
from minibert.layers import merge_heads  # noqa: E402, F401
