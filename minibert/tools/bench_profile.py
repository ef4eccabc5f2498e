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
from typing import NamedTuple

import numpy as np

QA_SHAPE = dict(B=8, T=384)  # a SQuAD window (max_seq_length 384), 8 windows per step
QA_SHAPES = ((QA_SHAPE["B"], QA_SHAPE["T"]), (32, 256))  # (B, T) of the fine-tuning bench: those; 32 shorter windows
PHASES = ("forward", "backward")


def run_times(fn, reps: int, warmup: int = 1, budget_s: float | None = None) -> list[float]:
    """Wall times of fn() in seconds over `reps` runs, after `warmup` untimed runs; with
    `budget_s`, fewer runs (at least one) once the timed ones have taken that long."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if budget_s is not None and sum(times) >= budget_s:
            break
    return times


class TimedOps:
    """The module of layer functions `ops`, with every `*_forward` / `*_backward` /
    `split_heads` / `merge_heads` call timed: times[(layer, phase)] += seconds."""

    def __init__(self, ops):
        self._ops = ops
        self.times = defaultdict(float)  # wall seconds
        self.cpu = defaultdict(float)  # CPU seconds of the process (every thread), the same calls
        self.calls = defaultdict(int)

    def __getattr__(self, name):
        fn = getattr(self._ops, name)
        if not callable(fn) or not (name.endswith(("_forward", "_backward")) or name in ("split_heads", "merge_heads")):
            return fn
        layer, _, phase = name.rpartition("_")
        layer = layer.removesuffix("_packed")  # the unpadded encoder's attention is attention too
        key = (layer, phase) if phase in PHASES else ("heads " + name.split("_")[0], "forward")

        def timed(*args, **kwargs):
            c0, t0 = time.process_time(), time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.times[key] += time.perf_counter() - t0
                self.cpu[key] += time.process_time() - c0
                self.calls[key] += 1

        return timed

    def reset(self):
        self.times.clear()
        self.cpu.clear()
        self.calls.clear()


def _step_parts(cfg, shape: dict, backend: str = "numba"):
    """(forward+backward fn, clip+update fn, TimedOps) for the bench's training step: BertConfig
    `cfg`, a random batch of shape["B"] x shape["T"] with shape["P"] predictions per sequence."""
    from minibert import optim
    from minibert.backend import get_ops
    from minibert.bert import BertForPreTraining
    from minibert.analysis.gradcheck import random_batch
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


def _part_totals(p: dict) -> dict:
    """{part: seconds per step} of a profile_step result: each layer's forward + backward, the
    optimizer, the rest, and the step."""
    parts = defaultdict(float)
    for key, t in p["layers_s"].items():
        parts[key.rsplit(" ", 1)[0]] += t
    parts["clip + AdamW"] = p["update_s"]
    parts["the rest: tied MLM decoder, adds, gathers"] = p["glue_s"]
    return dict(parts)


def _amdahl(t1: float, tn: float, n: int) -> float:
    """Serial seconds S of t(n) = S + (t1 - S) / n, from t(1) and t(n) (never below 0)."""
    return max(0.0, (n * tn - t1) / (n - 1))


def _scaling_table(one: dict, many: dict, n: int, step1: float, stepn: float):
    """Rows part | 1 thread ms | n threads ms | speed-up | serial ms, biggest at n threads first,
    then the step; and the sum of the parts' serial seconds."""
    fmt = lambda t: f"{t * 1e3:.1f}"  # noqa: E731
    rows, serial = [], 0.0
    for name in sorted(set(one) | set(many), key=lambda k: -many.get(k, 0.0)):
        t1, tn = one.get(name, 0.0), many.get(name, 0.0)
        s = _amdahl(t1, tn, n)
        serial += s
        rows.append([name, fmt(t1), fmt(tn), f"{t1 / tn:.2f}x" if tn > 0 else "n/a", fmt(s)])
    rows.append(["step (median)", fmt(step1), fmt(stepn), f"{step1 / stepn:.2f}x", fmt(_amdahl(step1, stepn, n))])
    return rows, serial


def scaling_rows(one: dict, many: dict, n: int):
    """The table of minibert's parts at 1 and n threads (two profile_step results) and the sum of
    their serial seconds (Amdahl)."""
    return _scaling_table(_part_totals(one), _part_totals(many), n, one["step_s"], many["step_s"])


def torch_scaling_rows(one: dict, many: dict, n: int):
    """The same table for two torch_profile_step results."""
    return _scaling_table(one["parts_s"], many["parts_s"], n, one["step_s"], many["step_s"])


# PyTorch's step cut into the same kinds of work, by the operator names torch.profiler reports
# (their self time: the time in the operator itself, not in the operators it calls)
TORCH_PARTS = (
    ("matmuls (linear, attention, decoder)", ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addmv",
                                             "aten::dot", "aten::mv")),
    ("attention softmax", ("aten::_softmax", "aten::_softmax_backward_data", "aten::_scaled_dot_product")),
    ("layernorm", ("aten::native_layer_norm", "aten::native_layer_norm_backward")),
    ("gelu", ("aten::gelu", "aten::gelu_backward")),
    ("dropout", ("aten::native_dropout", "aten::native_dropout_backward", "aten::bernoulli", "aten::bernoulli_")),
    ("embedding", ("aten::embedding", "aten::embedding_backward", "aten::embedding_dense_backward",
                   "aten::index_select", "aten::index_add_")),
    ("cross_entropy", ("aten::_log_softmax", "aten::_log_softmax_backward_data", "aten::nll_loss")),
)


def torch_part(op_name: str) -> str:
    """The kind of work of a torch operator (TORCH_PARTS), else "elementwise and other ops"."""
    for part, prefixes in TORCH_PARTS:
        if op_name.startswith(prefixes):
            return part
    return "elementwise and other ops"


def torch_profile_step(torch_and_parts, reps: int) -> dict:
    """PyTorch's training step cut like minibert's profile: forward + backward under
    torch.profiler for `reps` steps (after one warm-up), each operator's self time added to its
    kind (torch_part), what the operators do not cover as "framework: Python, autograd, dispatch";
    clip + AdamW timed apart; the whole step timed without the profiler. -> {"parts_s": {part:
    seconds per step}, "step_s": median seconds of a step, "threads": torch's thread count}.
    torch_and_parts: (torch, (forward+backward fn, clip+AdamW fn))."""
    torch, (fwd_bwd, update) = torch_and_parts
    fwd_bwd()
    update()
    steps, updates = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        fwd_bwd()
        t1 = time.perf_counter()
        update()
        t2 = time.perf_counter()
        steps.append(t2 - t0)
        updates.append(t2 - t1)
    parts = defaultdict(float)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for _ in range(reps):
            fwd_bwd()
        wall = (time.perf_counter() - t0) / reps
    covered = 0.0
    for event in prof.key_averages():
        if not event.key.startswith("aten::"):
            continue  # record_function ranges and autograd nodes: their ops are counted below them
        t = event.self_cpu_time_total / 1e6 / reps
        parts[torch_part(event.key)] += t
        covered += t
    parts["framework: Python, autograd, dispatch"] = max(0.0, wall - covered)
    parts["clip + AdamW"] = statistics.median(updates)
    return {"parts_s": dict(parts), "step_s": statistics.median(steps), "threads": torch.get_num_threads(),
            "profiled_forward_backward_s": wall}


class Matmul(NamedTuple):
    """One matmul of a training step: out (M, N) = a (M, K) @ b (K, N), `batch` of them side by
    side (attention's heads), done `count` times per step; a_t / b_t: the operand is stored
    transposed and passed as a transposed view, as the layer does (w.T in dx, x.T in dw)."""
    group: str  # the layer: "qkv", "ffn in", "attention core", "decoder", ...
    what: str  # which of its matmuls: "fwd", "dx", "dw", "q @ k^T", ...
    count: int
    M: int
    K: int
    N: int
    a_t: bool = False
    b_t: bool = False
    batch: int = 0  # 0: one 2-D product; > 0: a (batch, M, N) stack through blas.matmul

    @property
    def name(self) -> str:
        return f"{self.group} {self.what}"

    @property
    def flops(self) -> float:
        return 2.0 * self.M * self.K * self.N * max(1, self.batch) * self.count


def _linear_matmuls(group, count, n, c_in, c_out) -> list[Matmul]:
    """x (n, c_in) @ w (c_in, c_out), and its backward: dx = dout @ w.T, dw = x.T @ dout."""
    return [Matmul(group, "fwd", count, n, c_in, c_out), Matmul(group, "dx", count, n, c_out, c_in, b_t=True),
            Matmul(group, "dw", count, c_in, n, c_out, a_t=True)]


def step_matmuls(cfg, B: int, T: int, P: int, n_real: int) -> list[Matmul]:
    """Every matmul of one pretraining step (forward and backward) of config `cfg` on B x T
    sequences with `n_real` real tokens (the encoder's linears run on those only) and B*P
    predictions: the four linears of each layer, the six products of its attention core, the
    pooler, the NSP classifier, the MLM transform and the tied decoder (t @ E.T; dt = dl @ E;
    dE = dl.T @ t)."""
    C, FF, V, L = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.num_hidden_layers
    NH = cfg.num_attention_heads
    HS, M, BH = C // NH, B * P, B * NH
    mm = (_linear_matmuls("qkv", L, n_real, C, 3 * C) + _linear_matmuls("attention out", L, n_real, C, C)
          + _linear_matmuls("ffn in", L, n_real, C, FF) + _linear_matmuls("ffn out", L, n_real, FF, C))
    core = "attention core"
    mm += [Matmul(core, "q @ k^T", L, T, HS, T, b_t=True, batch=BH), Matmul(core, "att @ v", L, T, T, HS, batch=BH),
           Matmul(core, "dv = att^T @ dout", L, T, T, HS, a_t=True, batch=BH),
           Matmul(core, "datt = dout @ v^T", L, T, HS, T, b_t=True, batch=BH),
           Matmul(core, "dq = datt @ k", L, T, T, HS, batch=BH),
           Matmul(core, "dk = datt^T @ q", L, T, T, HS, a_t=True, batch=BH)]
    mm += (_linear_matmuls("pooler", 1, B, C, C) + _linear_matmuls("nsp", 1, B, C, 2)
           + _linear_matmuls("mlm dense", 1, M, C, C))
    mm += [Matmul("decoder", "t @ E.T", 1, M, C, V, b_t=True), Matmul("decoder", "dt = dl @ E", 1, M, V, C),
           Matmul("decoder", "dE = dl.T @ t", 1, V, M, C, a_t=True)]
    return mm


def time_matmul(m: Matmul, reps: int, rng=None) -> float:
    """Median seconds of one `m` (float32, random operands in the layout the step uses)."""
    from minibert.native import blas

    rng = np.random.default_rng(0) if rng is None else rng
    lead = (m.batch,) if m.batch else ()

    def operand(rows, cols, transposed):
        x = rng.standard_normal((*lead, cols, rows) if transposed else (*lead, rows, cols)).astype(np.float32)
        return x.swapaxes(-1, -2) if transposed else x

    a, b = operand(m.M, m.K, m.a_t), operand(m.K, m.N, m.b_t)
    out = np.empty((*lead, m.M, m.N), dtype=np.float32)
    run = (lambda: blas.matmul(a, b, out=out)) if m.batch else (lambda: np.matmul(a, b, out=out))
    return statistics.median(run_times(run, reps))


def matmul_floor(cfg, shape: dict, reps: int, n_real: int | None = None) -> dict:
    """The step's matmuls alone, each timed at its own shape through the same BLAS calls the
    step makes: what the step would take if everything between the matmuls cost nothing.
    -> {"floor_s", "flops", "rows": [(name, count, median seconds of one)],
        "groups": {layer: (seconds per step, FLOPs per step)}}."""
    B, T, P = shape["B"], shape["T"], shape["P"]
    mms = step_matmuls(cfg, B, T, P, B * T if n_real is None else n_real)
    rows = [(m.name, m.count, time_matmul(m, reps)) for m in mms]
    groups = {}
    for m, (_, count, t) in zip(mms, rows):
        s, fl = groups.get(m.group, (0.0, 0.0))
        groups[m.group] = (s + count * t, fl + m.flops)
    return {"floor_s": sum(c * t for _, c, t in rows), "flops": sum(m.flops for m in mms), "rows": rows,
            "groups": groups}


def cpu_description() -> str:
    """The CPU every table was measured on: model name, its widest SIMD (from the kernel's flags,
    as `lscpu` shows them) and the kernel OpenBLAS picked, e.g. "AMD EPYC; avx512f avx2 fma;
    OpenBLAS SkylakeX"."""
    import ctypes

    from minibert.native import blas

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

def qa_step_fn(config: dict, name: str, torch=None, B: int = QA_SHAPE["B"], T: int = QA_SHAPE["T"]):
    """One fine-tuning step of BertForQuestionAnswering on B windows of T tokens (every token
    real, as in a full SQuAD window): minibert's ("numba"/"numpy") or transformers' ("torch",
    given the imported `torch` module). `config`: BertConfig fields (max_position_embeddings
    is raised to 512)."""
    from minibert.model import BertConfig

    cfg = BertConfig(**{**config, "max_position_embeddings": 512},
                     hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    rng = np.random.default_rng(0)
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
