"""A bidirectional LSTM with its backward written out: the tagger the BERT paper put on frozen
features (§5.3, "a randomly initialized two-layer 768-dimensional BiLSTM before the
classification layer"), and the layer its Table 5 adds on top of the left-to-right model.

One direction, one step t (gates in PyTorch's order i, f, g, o):

    z   = x_t @ wx + h_prev @ wh + b             (B, 4H)   wx (D, 4H), wh (H, 4H), b (4H,)
    i, f, o = sigmoid(z_i), sigmoid(z_f), sigmoid(z_o);  g = tanh(z_g)
    c   = f * c_prev + i * g                      (B, H)
    h   = o * tanh(c)                             (B, H)

The forward direction runs t = 0 .. T-1, the backward one T-1 .. 0; the output at t is the two
h side by side, (B, T, 2H). Padding (mask 0) leaves the state as it was and outputs zeros, so a
row's real tokens see only each other in both directions, wherever its padding is.

The backward is backpropagation through time: walk the steps in the opposite order, carrying
dh and dc from step to step. x @ wx for all steps is one matrix product before the loop, and
its gradient one product after it; only the (B, H) @ (H, 4H) recurrence is per step.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from minibert.model import truncated_normal


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # = 1 / (1 + exp(-z)), without overflow warnings


class LSTMCache(NamedTuple):
    x: np.ndarray  # (B, T, D)
    mask: np.ndarray  # (B, T, 1) 0/1 in x's dtype
    wx: np.ndarray  # (D, 4H)
    wh: np.ndarray  # (H, 4H)
    gates: np.ndarray  # (T, B, 4H) i, f, g, o after their nonlinearities
    c: np.ndarray  # (T + 1, B, H) the cell state before step 0 (zeros) and after each step
    h: np.ndarray  # (T + 1, B, H) the hidden state likewise
    order: range  # the time steps in the order they ran


def lstm_forward(x, mask, wx, wh, b, reverse=False):
    """x (B, T, D), mask (B, T) -> h (B, T, H) (zeros at padding), cache. reverse=True runs the
    steps from T-1 down to 0 (the backward direction of a BiLSTM)."""
    B, T, _ = x.shape
    H = wh.shape[0]
    m = np.asarray(mask, dtype=x.dtype).reshape(B, T, 1)  # (B, T, 1)
    xw = x @ wx + b  # (B, T, 4H): every step's input part at once
    order = range(T - 1, -1, -1) if reverse else range(T)
    gates = np.empty((T, B, 4 * H), x.dtype)  # indexed by time, not by step number
    c = np.zeros((T + 1, B, H), x.dtype)  # c[k + 1]: after the k-th step that ran
    h = np.zeros((T + 1, B, H), x.dtype)
    out = np.zeros((B, T, H), x.dtype)  # (B, T, H)
    for k, t in enumerate(order):
        z = xw[:, t] + h[k] @ wh  # (B, 4H)
        i, f, g, o = _sigmoid(z[:, :H]), _sigmoid(z[:, H:2 * H]), np.tanh(z[:, 2 * H:3 * H]), _sigmoid(z[:, 3 * H:])
        gates[t] = np.concatenate([i, f, g, o], axis=1)
        c_new = f * c[k] + i * g  # (B, H)
        h_new = o * np.tanh(c_new)  # (B, H)
        mt = m[:, t]  # (B, 1): padding keeps the state
        c[k + 1] = mt * c_new + (1 - mt) * c[k]
        h[k + 1] = mt * h_new + (1 - mt) * h[k]
        out[:, t] = mt * h_new
    return out, LSTMCache(x, m, wx, wh, gates, c, h, order)


def lstm_backward(dout, cache: LSTMCache):
    """dout (B, T, H) -> dx (B, T, D), dwx (D, 4H), dwh (H, 4H), db (4H,)."""
    x, m, wx, wh, gates, c, h, order = cache
    B, T, _ = x.shape
    H = wh.shape[0]
    dz = np.zeros((B, T, 4 * H), x.dtype)  # (B, T, 4H): the pre-activation gradients, by time
    dwh = np.zeros_like(wh)
    dh_next = np.zeros((B, H), x.dtype)  # gradient reaching h[k + 1] from the later steps
    dc_next = np.zeros((B, H), x.dtype)
    for k in reversed(range(len(order))):
        t = order[k]
        mt = m[:, t]  # (B, 1)
        i, f, g, o = (gates[t][:, j * H:(j + 1) * H] for j in range(4))
        tanh_c = np.tanh(f * c[k] + i * g)  # (B, H) tanh of the unmasked new cell
        # h[k+1] = m * h_new + (1 - m) * h[k], and out[t] = m * h_new
        dh_new = mt * (dh_next + dout[:, t])  # (B, H)
        dc_new = mt * dc_next + dh_new * o * (1 - tanh_c * tanh_c)  # (B, H)
        dzt = np.concatenate([dc_new * g * i * (1 - i),  # i = sigmoid: di * i (1 - i)
                              dc_new * c[k] * f * (1 - f),  # f
                              dc_new * i * (1 - g * g),  # g = tanh
                              dh_new * tanh_c * o * (1 - o)], axis=1)  # o; (B, 4H)
        dz[:, t] = dzt
        dwh += h[k].T @ dzt  # (H, 4H)
        dh_next = dzt @ wh.T + (1 - mt) * dh_next  # into h[k]: through wh, and the kept state
        dc_next = dc_new * f + (1 - mt) * dc_next  # into c[k]
    D = x.shape[-1]
    dx = dz @ wx.T  # (B, T, D)
    dwx = x.reshape(-1, D).T @ dz.reshape(-1, 4 * H)  # (D, 4H)
    db = dz.reshape(-1, 4 * H).sum(axis=0)  # (4H,)
    return dx, dwx, dwh, db


# ---------------------------------------------------------------------------------------------
# bidirectional: both directions over the same input, their outputs side by side

NAMES = ("wx", "wh", "b")  # per direction: params[f"{prefix}.fwd.wx"], ...


def bilstm_shapes(D: int, H: int, prefix: str = "lstm") -> dict[str, tuple]:
    """The six tensors of a BiLSTM from D inputs to H units each way, in init order."""
    return {f"{prefix}.{d}.{n}": shape for d in ("fwd", "bwd")
            for n, shape in zip(NAMES, ((D, 4 * H), (H, 4 * H), (4 * H,)))}


def bilstm_params(rng, D: int, H: int, prefix: str = "lstm", dtype=np.float32, std: float = 0.02) -> dict:
    """wx, wh truncated normal(std), b zeros except the forget gate's, 1.0 (a common LSTM start:
    remember by default)."""
    params = {}
    for name, shape in bilstm_shapes(D, H, prefix).items():
        if name.endswith(".b"):
            params[name] = np.zeros(shape, dtype)
            params[name][H:2 * H] = 1.0
        else:
            params[name] = truncated_normal(rng, shape, std).astype(dtype)
    return params


def bilstm_forward(x, mask, params, prefix: str = "lstm"):
    """x (B, T, D), mask (B, T) -> (B, T, 2H): [forward h_t, backward h_t], cache."""
    out_f, cf = lstm_forward(x, mask, *(params[f"{prefix}.fwd.{n}"] for n in NAMES))  # (B, T, H)
    out_b, cb = lstm_forward(x, mask, *(params[f"{prefix}.bwd.{n}"] for n in NAMES), reverse=True)
    return np.concatenate([out_f, out_b], axis=-1), (cf, cb, prefix)


def bilstm_backward(dout, cache):
    """dout (B, T, 2H) -> dx (B, T, D), grads {f"{prefix}.fwd.wx": ...} of the six tensors."""
    cf, cb, prefix = cache
    H = cf.wh.shape[0]
    grads = {}
    dx = np.zeros_like(cf.x)
    for d, c, part in (("fwd", cf, dout[..., :H]), ("bwd", cb, dout[..., H:])):
        dxd, *g = lstm_backward(np.ascontiguousarray(part), c)
        dx += dxd
        grads.update({f"{prefix}.{d}.{n}": a for n, a in zip(NAMES, g)})
    return dx, grads
