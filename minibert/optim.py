"""Optimizer, learning-rate schedule and gradient clipping, as the original BERT did them.

Three pieces, used in this order by the training loop every step:

1. `clip_by_global_norm(grads, 1.0)`: scale all gradients together so their joint L2 norm is at
   most 1 (docs/bert-notes.md §6.2).
2. `lr_at(step, peak_lr, warmup_steps, total_steps)`: the learning rate for this step (docs/bert-notes.md §6.1).
3. `AdamW.step(params, grads, lr)`: Google's `AdamWeightDecayOptimizer` (docs/bert-notes.md §6.3), updating the
   parameter arrays in place.

Two details of Google's recipe surprise people who know PyTorch; both are kept on purpose and
both have a PyTorch/Hugging Face-style alternative behind a flag:

- **No Adam bias correction** (google-research/bert#153). Adam's moments start at 0, so early
  on `m` and `v` are too small; Kingma & Ba divide them by `1 - beta**t` to fix that. BERT
  skips it. Devlin: "mostly an oversight, but doesn't really matter when using a reasonable
  learning rate warmup": while the moments are biased, warmup keeps the learning rate near 0.
  The visible effect: the first update with a constant gradient is m/(sqrt(v)+eps) =
  0.1g/(sqrt(0.001)|g|) ~= 3.16, not ~= 1. `AdamW(..., bias_correction=True)` gives the
  `torch.optim.AdamW` form instead.
- **Warmup and decay overlap** (google-research/bert#193). The linear decay runs from step 0,
  *at the same time* as warmup; warmup simply overrides it while t < W. So the peak is never
  reached: at t = W the rate drops from peak*(W-1)/W to peak*(1 - W/T). Hugging Face's
  `get_linear_schedule_with_warmup` starts the decay at the peak instead: `schedule="hf"`.

Parameters and gradients are flat dicts `{name: ndarray}` with identical keys (see
`minibert.model`). Nothing here allocates per step beyond a fixed scratch buffer per parameter.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from minibert import backend
from minibert.io import outputs

SCHEDULES = ("bert", "hf")


# -----------------------------------------------------------------------------------------------
# weight-decay exclusion


def is_decayed(name: str) -> bool:
    """Whether weight decay applies to the parameter called `name` (minibert's names).

    Google decays every variable except those whose TF name matches the regex
    `LayerNorm|layer_norm|bias` (`exclude_from_weight_decay` in `run_pretraining.py` /
    `optimization.py`). In TF names that excludes every LayerNorm gamma/beta
    (`.../LayerNorm/gamma`), every dense `.../bias`, and `cls/predictions/output_bias`.
    minibert's names map onto that as:

    - last component `b` (`h0.attn.qkv.b`, `pool.b`, `nsp.b`, `emb_ln.b`, ...)  -> bias   -> False
    - last component `bias` (`mlm.bias`, the MLM output bias)                 -> bias   -> False
    - a component starting with `ln` or ending in `_ln` (`h0.ln1.w`, `mlm.ln.w`, `emb_ln.w`)
                                                                       -> LayerNorm -> False
    - everything else -> True: dense weights, the pooler and NSP weights, and also the word,
      position and segment embeddings (Google decays them; their TF names match nothing).

    >>> is_decayed("h0.attn.qkv.w"), is_decayed("h0.ln1.w"), is_decayed("tok_emb")
    (True, False, True)
    """
    parts = name.split(".")
    if parts[-1] in ("b", "bias"):
        return False
    return not any(p.startswith("ln") or p.endswith("_ln") for p in parts)


# -----------------------------------------------------------------------------------------------
# learning-rate schedule


def lr_at(step: int, peak_lr: float, warmup_steps: int, total_steps: int, schedule: str = "bert",
          anchor: tuple[int, float] | None = None) -> float:
    """Learning rate for global step `step` (the counter value BEFORE this update: 0, 1, 2, ...).

    schedule="bert" (Google, docs/bert-notes.md §6.1): decay from step 0, warmup overriding it while t < W:
        decayed(t) = peak * (1 - min(t, T)/T);  lr(t) = peak * t/W if t < W else decayed(t)
        e.g. peak 1e-4, W 10, T 100: t=0->0, 5->5e-5, 9->9e-5, 10->9e-5 (the drop), 50->5e-5, 100->0
    schedule="hf" (`get_linear_schedule_with_warmup`): same warmup, then decay from the peak:
        lr(t) = peak * max(0, (T - t)/max(1, T - W)) for t >= W, so lr(W) == peak exactly.

    Both give lr 0 for the first update (t = 0) when W > 0.

    `anchor` = (s, rate): the schedule was refitted to a new length at step s >= W, where the
    rate was `rate` (a time budget's refit, minibert/loop/budget.py). From s on the rate decays
    linearly from `rate` to 0 at the new T, so a refit bends the line instead of making it jump:
        lr(t) = rate * max(0, (T - t)/(T - s)) for t >= s
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule={schedule!r} is not one of {SCHEDULES}")
    if step < 0:
        raise ValueError(f"step={step} must be >= 0")
    if total_steps <= 0:
        raise ValueError(f"total_steps={total_steps} must be > 0")
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps={warmup_steps} must be >= 0")
    if warmup_steps > 0 and step < warmup_steps:
        return peak_lr * step / warmup_steps  # linear warmup, identical in both schedules
    if anchor is not None and step >= anchor[0]:  # the rest of the decay, re-spread at a refit
        return anchor[1] * max(0.0, (total_steps - step) / max(1, total_steps - anchor[0]))
    if schedule == "bert":
        return peak_lr * (1.0 - min(step, total_steps) / total_steps)  # decay that began at t=0
    return peak_lr * max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def plot_schedule(path: str | Path, peak_lr: float, warmup_steps: int, total_steps: int) -> Path:
    """Save a PNG comparing the "bert" and "hf" schedules; returns the path.

    Uses matplotlib's object API with the Agg canvas: no window, no global pyplot state.
    """
    # lazy: keeps matplotlib out of the start of `python -m minibert ablate` and 26 more
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    steps = np.arange(total_steps + 1)  # (T+1,)
    fig = Figure(figsize=(7, 3.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for schedule, style in (("bert", "-"), ("hf", "--")):
        lrs = [lr_at(int(t), peak_lr, warmup_steps, total_steps, schedule) for t in steps]  # (T+1,)
        ax.plot(steps, lrs, style, label=f'schedule="{schedule}"')
    if warmup_steps > 0:
        ax.axvline(warmup_steps, color="grey", lw=0.8, ls=":", label=f"end of warmup (t={warmup_steps})")
    ax.set_xlabel("global step t")
    ax.set_ylabel("learning rate")
    ax.set_title("BERT's overlapping warmup/decay vs Hugging Face's linear schedule")
    ax.legend()
    fig.tight_layout()
    return outputs.save_figure(fig, Path(path), dpi=100)  # atomic; a link at `path` is refused


# -----------------------------------------------------------------------------------------------
# gradient clipping


def global_norm(grads: Mapping[str, np.ndarray]) -> float:
    """sqrt(sum over all tensors of sum(g**2)), accumulated in float64."""
    total = 0.0
    for g in grads.values():
        g64 = np.asarray(g, dtype=np.float64).ravel()  # (N,) a copy only if g is not float64
        total += float(np.dot(g64, g64))
    return math.sqrt(total)


def clip_by_global_norm(
    grads: Mapping[str, np.ndarray], clip_norm: float = 1.0
) -> tuple[dict[str, np.ndarray], float]:
    """Scale every gradient by clip_norm / max(global_norm, clip_norm) (TF `clip_by_global_norm`).

    Returns `(clipped, global_norm)`. The norm is the one BEFORE clipping. Gradients keep their
    dtype; the input arrays are never modified (when no clipping is needed the returned dict
    holds the same array objects, otherwise fresh arrays). A non-finite norm gives non-finite
    gradients, as in TF: the caller should check `math.isfinite(global_norm)`.
    """
    if not clip_norm > 0:
        raise ValueError(f"clip_norm={clip_norm} must be > 0")
    kernels = _kernels()
    if kernels is None:
        norm = global_norm(grads)
    else:  # the same sum in one parallel pass over every gradient (the order of the adds differs)
        norm = math.sqrt(kernels.sum_of_squares(list(grads.values())))
    if norm <= clip_norm:
        return dict(grads), norm
    scale = clip_norm / norm if math.isfinite(norm) else float("nan")
    if kernels is not None:  # g * scale for every g, one parallel pass (the same bits)
        return dict(zip(grads, kernels.scaled(list(grads.values()), scale))), norm
    return {k: (g * g.dtype.type(scale)) for k, g in grads.items()}, norm


def _kernels():
    """minibert.kernels when the backend is Numba's (the default), None for MINIBERT_BACKEND=numpy."""
    return backend.numba_kernels() if backend.backend_name() == "numba" else None


# -----------------------------------------------------------------------------------------------
# AdamW (Google's AdamWeightDecayOptimizer)


class AdamW:
    """BERT's `AdamWeightDecayOptimizer` (default) or PyTorch's `AdamW` (bias_correction=True).

    Default (Google, docs/bert-notes.md §6.3), for every parameter p with gradient g, every step:
        m <- b1*m + (1-b1)*g;  v <- b2*v + (1-b2)*g**2
        update = m / (sqrt(v) + eps)            # no bias correction; eps outside the sqrt
        update += wd * p   if is_decayed(name)  # decoupled decay: not in the loss, not in m/v
        p <- p - lr * update
    bias_correction=True (`torch.optim.AdamW`, one param group with decay and one without):
        p <- p * (1 - lr*wd)   if is_decayed(name)   # decay first, with the same lr*wd factor
        m, v as above; m_hat = m/(1-b1**t), v_hat = v/(1-b2**t)
        p <- p - lr * m_hat / (sqrt(v_hat) + eps)    # eps still outside the sqrt
    Differences to PyTorch to remember: PyTorch's default eps is 1e-8 (here 1e-6, BERT's), and
    PyTorch decays every parameter of a group (here `is_decayed` picks them by name).

    `step` updates `params` in place (the training loop holds references to those arrays).
    State: `m`, `v` (dicts like params, same dtypes) and `t` (number of steps taken).
    """

    def __init__(
        self,
        params: Mapping[str, np.ndarray],
        lr: float = 1e-4,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-6,
        weight_decay: float = 0.01,
        bias_correction: bool = False,
        is_decayed: Callable[[str], bool] = is_decayed,
        fused: bool | None = None,
    ):
        if not 0.0 <= beta1 < 1.0:
            raise ValueError(f"beta1={beta1} must be in [0, 1)")
        if not 0.0 <= beta2 < 1.0:
            raise ValueError(f"beta2={beta2} must be in [0, 1)")
        if not eps >= 0.0:
            raise ValueError(f"eps={eps} must be >= 0")
        if not weight_decay >= 0.0:
            raise ValueError(f"weight_decay={weight_decay} must be >= 0")
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.weight_decay, self.bias_correction = weight_decay, bias_correction
        self.decayed = {k: bool(is_decayed(k)) for k in params}
        self.m = {k: np.zeros_like(p) for k, p in params.items()}  # first moment, like p
        self.v = {k: np.zeros_like(p) for k, p in params.items()}  # second moment, like p
        self._buf, self._buf2 = {}, {}  # scratch like p, made on first use by the NumPy passes below
        self.t = 0
        # fused: the same update as one compiled parallel pass over every parameter
        # (minibert.kernels.adamw_update_all, identical bits); None = when MINIBERT_BACKEND is
        # numba (the default)
        if fused is None:
            fused = backend.backend_name() == "numba"
        self._fused = backend.numba_kernels().adamw_update_all if fused else None

    def _check(self, params: Mapping[str, np.ndarray], grads: Mapping[str, np.ndarray]) -> None:
        for what, d in (("params", params), ("grads", grads)):
            if d.keys() != self.m.keys():
                missing = sorted(self.m.keys() - d.keys())
                extra = sorted(d.keys() - self.m.keys())
                raise ValueError(f"{what} keys differ from the optimizer's: missing {missing}, unexpected {extra}")
        for k, m in self.m.items():
            if params[k].shape != m.shape or grads[k].shape != m.shape:
                raise ValueError(
                    f"{k!r}: param shape {params[k].shape}, grad shape {grads[k].shape}, "
                    f"optimizer state shape {m.shape}"
                )

    def step(self, params: Mapping[str, np.ndarray], grads: Mapping[str, np.ndarray], lr: float | None = None) -> None:
        """One update of every parameter, in place. `lr` defaults to the constructor's `lr`."""
        self._check(params, grads)
        lr = self.lr if lr is None else float(lr)
        b1, b2, eps, wd = self.beta1, self.beta2, self.eps, self.weight_decay
        self.t += 1
        if self.bias_correction:
            step_size = lr / (1.0 - b1**self.t)  # lr / bias_correction1
            bc2_sqrt = math.sqrt(1.0 - b2**self.t)  # sqrt(bias_correction2)
        rest = params
        if self._fused is not None:  # every contiguous parameter in one compiled pass (the same bits)
            fused = [k for k, p in params.items() if p.flags.c_contiguous]
            self._fused([params[k] for k in fused], [grads[k] for k in fused], [self.m[k] for k in fused],
                        [self.v[k] for k in fused], [self.decayed[k] and wd != 0.0 for k in fused],
                        b1=b1, b2=b2, eps=eps, lr=lr, wd=wd, bias_correction=self.bias_correction,
                        step_size=step_size if self.bias_correction else 0.0,
                        bc2_sqrt=bc2_sqrt if self.bias_correction else 1.0)
            rest = {k: p for k, p in params.items() if not p.flags.c_contiguous}
        for k, p in rest.items():
            g, m, v = grads[k], self.m[k], self.v[k]
            u = self._buf.get(k)
            if u is None:
                u = self._buf[k] = np.empty_like(p)
            decay = self.decayed[k] and wd != 0.0
            if self.bias_correction and decay:
                p *= 1.0 - lr * wd  # torch: decoupled decay applied to p before the Adam step
            # m <- b1*m + (1-b1)*g : running mean of the gradient (first moment)
            m *= b1
            np.multiply(g, 1.0 - b1, out=u)
            m += u
            # v <- b2*v + (1-b2)*g*g : running mean of the squared gradient (second moment)
            v *= b2
            np.multiply(g, g, out=u)
            u *= 1.0 - b2
            v += u
            # u <- sqrt(v) + eps : per-element scale (eps outside the sqrt, as in Google and torch)
            np.sqrt(v, out=u)
            if self.bias_correction:
                u /= bc2_sqrt  # sqrt(v_hat) = sqrt(v) / sqrt(1 - b2**t)
            u += eps
            # u <- m / u : the Adam direction (BERT: no bias correction of m or v)
            np.divide(m, u, out=u)
            if self.bias_correction:
                u *= step_size  # lr * m_hat / (sqrt(v_hat) + eps)
            else:
                if decay:
                    u += np.multiply(p, wd, out=self._buf2.setdefault(k, np.empty_like(p)))  # + wd*p : decoupled weight decay
                u *= lr
            # p <- p - lr * update
            p -= u

    # --- state (flat dict of arrays: safetensors-friendly, no pickle) ---------------------------

    def state_dict(self) -> dict[str, np.ndarray]:
        """Copies of the state: `m.<name>`, `v.<name>` (like the params) and `t` (int64 scalar)."""
        out = {f"m.{k}": a.copy() for k, a in self.m.items()}
        out.update({f"v.{k}": a.copy() for k, a in self.v.items()})
        out["t"] = np.array(self.t, dtype=np.int64)
        return out

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        """Restore `state_dict()` output; ValueError on missing/unexpected keys, shapes, dtypes."""
        expected = {f"{s}.{k}" for s in ("m", "v") for k in self.m} | {"t"}
        if state.keys() != expected:
            missing = sorted(expected - state.keys())
            extra = sorted(state.keys() - expected)
            raise ValueError(f"optimizer state keys do not match the model: missing {missing}, unexpected {extra}")
        t = np.asarray(state["t"])
        if t.shape != () or not np.issubdtype(t.dtype, np.integer) or int(t) < 0:
            raise ValueError(f"optimizer state 't' must be a non-negative integer scalar, got {t!r}")
        for s, store in (("m", self.m), ("v", self.v)):
            for k, a in store.items():
                new = np.asarray(state[f"{s}.{k}"])
                if new.shape != a.shape or new.dtype != a.dtype:
                    raise ValueError(
                        f"optimizer state {s}.{k!r}: got {new.dtype}{list(new.shape)}, "
                        f"expected {a.dtype}{list(a.shape)}"
                    )
        for s, store in (("m", self.m), ("v", self.v)):
            for k, a in store.items():
                np.copyto(a, state[f"{s}.{k}"])
        self.t = int(t)
