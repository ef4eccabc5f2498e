"""`python -m minibert bench --only attention`: attention forward+backward, the Numba kernels (v4,
the default; v2, its fallback without OpenBLAS; v3 and v1 of minibert/dev/) vs the NumPy reference
vs PyTorch eager, each contender in its own worker processes (minibert.tools.bench_common)."""
from __future__ import annotations

import numpy as np

from minibert import layers
from minibert.backend import numba_kernels
from minibert.dev import attention_v1, attention_v3
from minibert.layers import split_heads
from minibert.tools import bench_common
from minibert.tools.bench_common import checkpoint, fmt_table, have, isolated_medians, ms, ratio, threads_label, try_torch

ATTENTION_SHAPES = [(32, 2, 128, 64), (8, 12, 128, 64)]  # (B, NH, T, HS)


def attention_inputs(shape, rng, dtype=np.float32):
    """q, k, v as the model makes them (strided views of one (B, T, 3C) projection), a padding
    mask with a padded tail in every other sequence, and dout."""
    B, NH, T, HS = shape
    qkv = rng.standard_normal((B, T, 3 * NH * HS)).astype(dtype)  # (B, T, 3C)
    q, k, v = (split_heads(t, NH) for t in np.split(qkv, 3, axis=-1))  # 3 x (B, NH, T, HS)
    mask = np.ones((B, T), dtype=dtype)
    mask[::2, T - T // 8:] = 0
    dout = rng.standard_normal(shape).astype(dtype)  # (B, NH, T, HS)
    return q, k, v, mask, dout


def _torch_attention_fns(torch, q, k, v, mask, dout):
    """Two PyTorch eager versions: explicit matmul-softmax-matmul and F.scaled_dot_product_attention."""
    HS = q.shape[-1]
    tq, tk, tv = (torch.tensor(np.ascontiguousarray(a), requires_grad=True) for a in (q, k, v))
    adder = torch.tensor((1.0 - mask) * -10000.0)[:, None, None, :]  # (B, 1, 1, T)
    tdout = torch.tensor(dout)
    scale = 1.0 / np.sqrt(HS)

    def explicit():
        for t in (tq, tk, tv):
            t.grad = None
        att = torch.softmax(tq @ tk.transpose(-1, -2) * scale + adder, dim=-1)
        (att @ tv).backward(tdout)

    def sdpa():
        for t in (tq, tk, tv):
            t.grad = None
        torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=adder).backward(tdout)

    return {"torch explicit": explicit, "torch sdpa": sdpa}


ATTENTION_WARMUP = 10  # untimed runs in each worker process before the timed ones
ATTENTION_CONTENDERS = ("numba", "numba v3", "numba v2", "numba v1", "numpy", "torch explicit", "torch sdpa")


def attention_fn(shape, name: str):
    """A function running forward+backward once on `shape` with contender `name` (called inside
    a worker process; torch is imported only by the torch contenders)."""
    kernels = numba_kernels()  # with the process settings the model runs them with (kernels.setup)
    q, k, v, mask, dout = attention_inputs(shape, np.random.default_rng(0))
    if name.startswith("torch"):
        torch, why = try_torch()
        if torch is None:
            raise RuntimeError(why)
        return _torch_attention_fns(torch, q, k, v, mask, dout)[name]
    forward, backward = {"numba": (kernels.attention_forward, kernels.attention_backward),
                         "numba v3": (attention_v3.attention_forward_v3, attention_v3.attention_backward_v3),
                         "numba v2": (kernels.attention_forward_fallback, kernels.attention_backward_fallback),
                         "numba v1": (attention_v1.attention_forward_v1, attention_v1.attention_backward_v1),
                         "numpy": (layers.attention_forward, layers.attention_backward)}[name]

    def run():
        _, cache = forward(q, k, v, mask)
        backward(dout, cache)
    return run


def round_ratios(rounds: dict, slow: list[str], fast: str) -> list[float]:
    """Per round (one worker process each, taken in turn): the fastest of the `slow` contenders'
    medians over `fast`'s, e.g. torch/numba for each round: the spread of the ratio that the
    medians over all rounds hide."""
    return [min(rounds[n][r] for n in slow) / rounds[fast][r] for r in range(len(rounds[fast]))]


QUICK_ATTENTION = ("numba", "numba v3", "torch explicit", "torch sdpa")  # --quick: the default and the references


def bench_attention(report: dict, reps: int, threads_list, quick: bool = False) -> None:
    torch_ok = have("torch")
    contenders = QUICK_ATTENTION if quick else ATTENTION_CONTENDERS
    names = [n for n in contenders if torch_ok or not n.startswith("torch")]
    rows, out = [], report.setdefault("attention", {})
    for threads in threads_list:
        for shape in ATTENTION_SHAPES:
            # 10 untimed runs first: a fresh process's first several runs are slower (seen for every
            # contender, v3, v4 and torch alike: 10-14 ms before settling at 7-9 ms), and one warm-up
            # left that start-up in the medians
            t = isolated_medians("attention", list(shape), names, reps, warmup=ATTENTION_WARMUP, threads=threads)
            t_torch = min((t[n], n) for n in t if n.startswith("torch")) if torch_ok else (None, "torch not installed")
            spread = round_ratios(isolated_medians.last_rounds, [n for n in t if n.startswith("torch")], "numba") \
                if torch_ok else []
            res = {"threads": threads, "numba_s": t["numba"], "numba_v3_s": t.get("numba v3"),
                   "numba_v2_s": t.get("numba v2"), "numba_v1_s": t.get("numba v1"), "numpy_s": t.get("numpy"),
                   "torch_s": t_torch[0], "torch_variant": t_torch[1],
                   "speedup_vs_numpy": None if "numpy" not in t else t["numpy"] / t["numba"],
                   "speedup_vs_torch": None if t_torch[0] is None else t_torch[0] / t["numba"],
                   "speedup_vs_torch_per_round": spread, "all_s": t}
            out[f"{'x'.join(map(str, shape))}@{threads}"] = res
            checkpoint()
            rows.append([threads, "x".join(map(str, shape)), ms(t["numba"]), ms(t.get("numba v3")),
                         ms(t.get("numba v2")), ms(t.get("numba v1")), ms(t.get("numpy")), ms(t_torch[0]),
                         ratio(t.get("numpy"), t["numba"]), ratio(t_torch[0], t["numba"]),
                         f"{min(spread):.2f}-{max(spread):.2f}x" if spread else "n/a"])
    print(f"\n== attention forward+backward, float32, padded keys; ms (median of {bench_common.ROUNDS} processes x {reps}), "
          f"threads {threads_label(threads_list)}")
    print(fmt_table(["threads", "B x NH x T x HS", "numba", "numba v3", "numba v2", "numba v1", "numpy", "torch",
                     "numpy/numba", "torch/numba", "per round"], rows))
    print("target: torch/numba >= 1x (torch = the faster of explicit and sdpa); per round: the lowest and highest "
          "torch/numba of the rounds' own medians, the machine's noise; numba = v4 (the default: per head, "
          "OpenBLAS gemm called from Numba's threads, softmax on the head's block in cache), v3 = batched OpenBLAS "
          "matmuls + a fused Numba softmax pass, v2 = np.matmul + the same softmax (v4's fallback without OpenBLAS), "
          "v1 = all-Numba"
          + ("; --quick: v4, v3 and torch only" if quick else ""))
