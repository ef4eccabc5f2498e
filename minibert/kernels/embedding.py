"""The embedding sum (token + segment + position) and its backward's scatter-add, in parallel with
the reference's bits; `zeros`, a parallel np.zeros."""
from __future__ import annotations

import numba
import numpy as np

from minibert import layers
from minibert.kernels.runtime import ROWS_MIN, kernel_jit
from minibert.kernels.vector_math import _add_into, _copy_into


# ---------------------------------------------------------------------------------------------
# embedding: the sum of the three lookups row by row in parallel; the backward's scatter-add in
# parallel over the distinct ids, each id's rows added in their order (as np.add.at adds them),
# so both give the reference's bits

_COLS = 16  # columns per work item of the scatter-add (times 4)


@kernel_jit(parallel=True)
def _embedding_forward_kernel(ids, segs, tok, seg, pos, out):
    """out[r] = (tok[ids[r]] + seg[segs[r]]) + pos[r % T] for the rows r of out (B*T, C)."""
    N, C = out.shape
    T = ids.shape[1]
    per = max(1, ROWS_MIN // max(C, 1))
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
    per = max(1, ROWS_MIN // max(C, 1))
    for c in numba.prange((N + per - 1) // per):
        for r in range(c * per, min(N, (c + 1) * per)):
            xr = x[r]
            for j in range(C):
                xr[j] = 0


def zeros(shape, dtype):
    """np.zeros(shape, dtype) (2-D), filled in parallel when it is big."""
    x = np.empty(shape, dtype=dtype)
    if x.size < ROWS_MIN:
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


