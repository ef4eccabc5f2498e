"""Where a training step's time and memory go: `python -m minibert bench --only profile`.

The step of `bench --only step` (forward, backward, clipping, AdamW on the tiny and small
configs, B=32 T=128 P=20, dropout on), run with the layer functions wrapped by `TimedOps`, which
adds each call's wall time to its layer: a table of forward and backward milliseconds per layer
kind (attention core, linear, LayerNorm, GELU, dropout, embedding, cross-entropy, head split and
merge), the optimizer, and "the rest": what model.py computes itself, above all the tied MLM
decoder's three (M, C) x (C, V) matmuls (a quarter of the tiny step's FLOPs), then the residual
adds, the qkv split and concatenation, packing the real tokens. Then the step's peak memory: the largest amount of
NumPy memory allocated at once during a step beyond what was allocated before it (tracemalloc,
which NumPy reports its buffers to), and the arithmetic bound: the step's matmul FLOPs at the
machine's measured matmul rate.

Also here: the fine-tuning step of question answering at T = 384 (`bench --only finetune`), as
minibert's and transformers' BertForQuestionAnswering.
"""
from __future__ import annotations

import statistics
import time
import tracemalloc
from collections import defaultdict

import numpy as np

QA_SHAPE = dict(B=8, T=384)  # a SQuAD window (max_seq_length 384), 8 windows per step
PHASES = ("forward", "backward")


class TimedOps:
    """The module of layer functions `ops`, with every `*_forward` / `*_backward` /
    `split_heads` / `merge_heads` call timed: times[(layer, phase)] += seconds."""

    def __init__(self, ops):
        self._ops = ops
        self.times = defaultdict(float)
        self.calls = defaultdict(int)

    def __getattr__(self, name):
        fn = getattr(self._ops, name)
        if not callable(fn) or not (name.endswith(("_forward", "_backward")) or name in ("split_heads", "merge_heads")):
            return fn
        layer, _, phase = name.rpartition("_")
        key = (layer, phase) if phase in PHASES else ("heads " + name.split("_")[0], "forward")

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.times[key] += time.perf_counter() - t0
                self.calls[key] += 1

        return timed

    def reset(self):
        self.times.clear()
        self.calls.clear()


def _step_parts(cfg, shape: dict, backend: str = "numba"):
    """(forward+backward fn, clip+update fn, TimedOps) for the bench's training step: BertConfig
    `cfg`, a random batch of shape["B"] x shape["T"] with shape["P"] predictions per sequence."""
    from minibert import optim
    from minibert.backend import get_ops
    from minibert.bert import BertForPreTraining
    from minibert.gradcheck import random_batch
    from minibert.model import bert_backward, bert_forward

    batch = random_batch(cfg, shape["B"], shape["T"], shape["P"], np.random.default_rng(0))
    model = BertForPreTraining(cfg, seed=0, dtype=np.float32)
    opt = optim.AdamW(model.params, lr=1e-4)
    ops = TimedOps(get_ops(backend))
    rng = np.random.default_rng(0)
    state = {}

    def fwd_bwd():
        _, _, cache = bert_forward(model.params, cfg, batch, rng, ops)
        state["grads"] = bert_backward(model.params, cfg, cache, ops)

    def update():
        grads, _ = optim.clip_by_global_norm(state.pop("grads"), 1.0)
        opt.step(model.params, grads)

    return fwd_bwd, update, ops


def profile_step(cfg, shape: dict, reps: int) -> dict:
    """Median seconds per layer and phase over `reps` steps (after one warm-up), the optimizer's,
    the whole step's, and the step's peak NumPy memory in bytes."""
    fwd_bwd, update, ops = _step_parts(cfg, shape)
    fwd_bwd()
    update()
    per_rep, steps, updates, glue = [], [], [], []
    for _ in range(reps):
        ops.reset()
        t0 = time.perf_counter()
        fwd_bwd()
        t1 = time.perf_counter()
        update()
        t2 = time.perf_counter()
        per_rep.append(dict(ops.times))
        steps.append(t2 - t0)
        updates.append(t2 - t1)
        glue.append(t1 - t0 - sum(ops.times.values()))  # forward + backward outside the layer functions
    keys = sorted({k for r in per_rep for k in r})
    layers = {f"{layer} {phase}": statistics.median(r.get((layer, phase), 0.0) for r in per_rep)
              for layer, phase in keys}
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    fwd_bwd()
    update()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return {"layers_s": layers, "update_s": statistics.median(updates), "step_s": statistics.median(steps),
            "glue_s": statistics.median(glue),
            "peak_bytes": peak}


def profile_rows(p: dict) -> list[list[str]]:
    """The table of one profile_step result: layer, forward, backward, total ms, share of the step."""
    ms = lambda t: f"{t * 1e3:.1f}"  # noqa: E731
    step = p["step_s"]
    names = sorted({k.rsplit(" ", 1)[0] for k in p["layers_s"]})
    rows = []
    for name in names:
        f, b = p["layers_s"].get(f"{name} forward", 0.0), p["layers_s"].get(f"{name} backward", 0.0)
        rows.append([name, ms(f), ms(b), ms(f + b), f"{100 * (f + b) / step:.0f}%"])
    rows.sort(key=lambda r: -float(r[3]))
    glue = p["glue_s"]
    rows.append(["clip + AdamW", "", "", ms(p["update_s"]), f"{100 * p['update_s'] / step:.0f}%"])
    rows.append(["the rest: tied MLM decoder, adds, gathers", "", "", ms(glue), f"{100 * glue / step:.0f}%"])
    rows.append(["step (median; the rows are medians too)", "", "", ms(step), "100%"])
    return rows


def cpu_description() -> str:
    """The CPU every table was measured on: model name, its widest SIMD (from the kernel's flags,
    as `lscpu` shows them) and the kernel OpenBLAS picked, e.g. "AMD EPYC; avx512f avx2 fma;
    OpenBLAS SkylakeX"."""
    import ctypes

    from minibert import blas

    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model == "unknown CPU":
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    simd = " ".join(f for f in ("avx512f", "avx512_bf16", "avx2", "fma") if f in flags) or "flags unknown"
    lib, core = blas.openblas(), "no OpenBLAS"
    if lib is not None:
        fn = lib._fn("openblas_get_corename")
        fn.restype = ctypes.c_char_p
        core = "OpenBLAS " + fn().decode()
    return f"{model}; {simd}; {core}"


# ---------------------------------------------------------------------------------------------
# question answering at T = 384: a fine-tuning step (fwd + bwd + clip + AdamW, dropout 0.1)

def qa_step_fn(config: dict, name: str, torch=None):
    """One fine-tuning step of BertForQuestionAnswering on B x 384-token windows (every token
    real, as in a full SQuAD window): minibert's ("numba"/"numpy") or transformers' ("torch",
    given the imported `torch` module). `config`: BertConfig fields (max_position_embeddings
    is raised to 512)."""
    from minibert.model import BertConfig

    cfg = BertConfig(**{**config, "max_position_embeddings": 512},
                     hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    rng = np.random.default_rng(0)
    B, T = QA_SHAPE["B"], QA_SHAPE["T"]
    ids = rng.integers(5, cfg.vocab_size, (B, T))
    seg = np.zeros_like(ids)
    seg[:, T // 4:] = 1  # question, then context
    start = rng.integers(T // 4, T - 8, B)
    batch = dict(input_ids=ids, segment_ids=seg, input_mask=np.ones_like(ids), start_positions=start,
                 end_positions=start + rng.integers(0, 8, B))
    return task_step_fn("BertForQuestionAnswering", cfg, batch, name, rng, torch)


def task_step_fn(architecture: str, cfg, batch: dict, name: str, rng, torch=None, **task):
    """One fine-tuning step of the class `architecture` (forward, backward, clipping to 1.0,
    AdamW at lr 1e-4) on `batch` (input_ids, segment_ids, input_mask and the labels, the same
    every call): minibert's ("numba"/"numpy": the backend, dropout drawn from `rng`) or
    transformers' ("torch", given the imported `torch` module). `task`: the class's keyword
    arguments (num_labels), given to both."""
    if name == "torch":
        import transformers

        torch.manual_seed(0)
        model = getattr(transformers, architecture)(transformers.BertConfig(**cfg.to_dict(), **task))
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
        t = {k: torch.tensor(v) for k, v in batch.items()}
        labels = {k: v for k, v in t.items() if k not in ("input_ids", "segment_ids", "input_mask")}

        def step():
            opt.zero_grad(set_to_none=True)
            loss = model(input_ids=t["input_ids"], token_type_ids=t["segment_ids"], attention_mask=t["input_mask"],
                         **labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return loss.item()

        return step
    import os

    from minibert import optim
    from minibert.finetune.models import CLASSES

    os.environ["MINIBERT_BACKEND"] = name
    model = CLASSES[architecture](cfg, **task)
    opt = optim.AdamW(model.params, lr=1e-4)

    def step():
        loss, grads = model.loss_and_grads(batch, train=True, rng=rng)
        grads, _ = optim.clip_by_global_norm(grads, 1.0)
        opt.step(model.params, grads)
        return loss

    return step
