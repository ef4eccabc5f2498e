"""The small building blocks compiled into the kernels of the other modules (all inlined, none
called from Python): exp and erf that vectorize in float32 (an llvmlite bitcast underneath), and
the row reductions (sum, max, dot, softmax) as 8 partial results that LLVM keeps in one vector
register."""
from __future__ import annotations

import math

import numba
import numpy as np
from numba.extending import intrinsic, overload

from minibert.kernels.runtime import kernel_jit


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


@kernel_jit(inline="always")
def _copy_into(dst, src):
    for j in range(dst.shape[0]):
        dst[j] = src[j]


@kernel_jit(inline="always")
def _add_into(dst, src):
    """dst += src over a row (slices in, plain indices: the loop vectorizes)."""
    for j in range(dst.shape[0]):
        dst[j] += src[j]
