"""The optimizer step in one parallel pass each, over every parameter at once: the global
gradient norm (`sum_of_squares`), the clipping scale (`scaled`) and AdamW (`adamw_update_all`),
with the same bits as `minibert.optim`'s NumPy version."""
from __future__ import annotations

import math

import numba
import numpy as np
from numba.extending import intrinsic

from minibert.kernels.runtime import CHUNK, kernel_jit


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
# and sizes are the arguments; work items are (array, chunk of CHUNK elements)), instead of one
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
    """(array index, first element) of every chunk of CHUNK elements of arrays of `sizes`."""
    sizes = np.asarray(sizes, dtype=np.int64)
    per = (sizes + CHUNK - 1) // CHUNK  # chunks of each array
    item_array = np.repeat(np.arange(sizes.size, dtype=np.int64), per)  # (items,)
    first = np.cumsum(per) - per  # (arrays,) the index of each array's first item
    item_lo = (np.arange(item_array.size, dtype=np.int64) - first[item_array]) * CHUNK  # (items,)
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
        partial[it] = _sum_squares_chunk(x[lo:min(sizes[i], lo + CHUNK)])


@kernel_jit(parallel=True)
def _scale_kernel(like, src, dst, sizes, item_array, item_lo, factor):
    for it in numba.prange(item_array.shape[0]):
        i, lo = item_array[it], item_lo[it]
        hi = min(sizes[i], lo + CHUNK)
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
        hi = min(n, lo + CHUNK)
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


