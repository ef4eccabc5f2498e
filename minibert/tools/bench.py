"""`python -m minibert bench` (make bench): how fast minibert is, next to PyTorch, in one run.

Sections (select with --only, comma-separated):
    attention  attention forward+backward: Numba kernels (v4 default, v3, v2, v1) vs NumPy reference vs
               PyTorch eager
    step       one full pretraining step (forward, backward, clipping, AdamW) on the tiny and
               small configs: minibert (numba and numpy backends) vs transformers'
               BertForPreTraining in PyTorch eager (MLM logits only at the masked positions);
               tokens/s, achieved matmul GFLOP/s and the machine's float32 matmul peak
    finetune   a fine-tuning step: sequence classification (T=128) and question answering (T=384),
               minibert's class vs transformers' of the same name
    profile    where the step's time goes, layer by layer, and its peak memory (minibert.tools.bench_profile)
    startup    Numba compile time on a cold cache; import + first step on a warm cache
    text       WordPiece training and tokenizer speed (minibert.tools.bench_text)
    data       pretraining-data throughput (minibert.tools.bench_data) vs what training consumes

Every figure is the median of several repetitions (after one warm-up); ratios are computed
from the medians. The attention and step contenders each run in their own worker processes,
taking turns (see `isolated_medians`), so that one library's idle threads do not slow another.
Torch uses as many threads as Numba and OpenBLAS (the core count). The
figures go to a JSON file (default bench/results.json, git-ignored) so runs can be compared.
torch and transformers are optional: their columns say "n/a" when they are not installed.

Why this module is over 500 lines: every section runs its contenders in worker processes of this
module (`python -m minibert.tools.bench --worker KIND ...`) and shares its tables; a section in a
module of its own would be reached from the worker by name, an import the layering test cannot see.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from minibert.tools import attention_v1
from minibert.tools.bench_profile import QA_SHAPE, run_times, task_step_fn

ROOT = Path(__file__).resolve().parents[2]  # the repository
SECTIONS = ("attention", "step", "finetune", "profile", "startup", "text", "data")
ATTENTION_SHAPES = [(32, 2, 128, 64), (8, 12, 128, 64)]  # (B, NH, T, HS)
CONFIGS = {
    "tiny": dict(vocab_size=8192, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=512, max_position_embeddings=128),
    "small": dict(vocab_size=8192, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                  intermediate_size=1024, max_position_embeddings=128),
}
STEP_SHAPE = dict(B=32, T=128, P=20)


# ---------------------------------------------------------------------------------------------
# timing helpers

def median_time(fn, reps: int, warmup: int = 1) -> float:
    """Median wall time of fn() in seconds over `reps` runs, after `warmup` untimed runs."""
    return statistics.median(run_times(fn, reps, warmup))


ROUNDS = 3  # worker processes per contender, run in turn (numba, torch, numba, torch, ...)


def _have(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def isolated_medians(kind: str, spec, names, reps: int, rounds: int | None = None, warmup: int = 1) -> dict:
    """Median seconds of each contender, each timed in fresh worker processes (`reps` timed runs
    after `warmup` in each), the contenders taking turns `rounds` times.

    One process per contender because thread pools interfere: PyTorch's OpenMP threads, OpenBLAS's
    and Numba's all spin for a while after their work. Timed in one process, each slowed the
    others down (measured: the tiny step 0.78 s for minibert and 0.54 s for torch in one process,
    0.48 s and 0.44-0.49 s each alone). Taking turns spreads background load over all alike.
    """
    times = {n: [] for n in names}
    rss = {n: [] for n in names}
    per_round = {n: [] for n in names}  # the median of each worker process, in turn order
    for _ in range(ROUNDS if rounds is None else rounds):
        for name in names:
            got = run_worker(kind, spec, reps, name, warmup)
            times[name] += got["times"]
            per_round[name].append(statistics.median(got["times"]))
            rss[name].append(got["step_rss_bytes"])
    medians = {n: statistics.median(ts) for n, ts in times.items()}
    isolated_medians.last_rounds = per_round
    isolated_medians.last_rss = {n: max(r, default=None) if None not in r else None
                                 for n, r in rss.items()}  # the peak step memory of each contender
    return medians


def run_worker(kind: str, spec, reps: int, name: str = "-", warmup: int = 0) -> dict:
    """Run `python -m minibert.tools.bench --worker kind spec name reps warmup` in a fresh process and
    return the JSON it prints last (`worker` below; "profile" takes no contender name)."""
    cmd = [sys.executable, "-m", "minibert.tools.bench", "--worker", kind, json.dumps(spec), name, str(reps), str(warmup)]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"bench worker {kind} {spec} {name} failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def worker(argv: list[str]) -> None:
    """Inside a worker process: build one contender, time it, print the seconds as JSON, with the
    memory its steps took: the process's peak resident set size minus its size before the first
    call (the model, optimizer and inputs already built; Linux ru_maxrss is in KiB)."""
    import resource

    kind, spec, name, reps, warmup = argv[0], json.loads(argv[1]), argv[2], int(argv[3]), int(argv[4])
    if kind == "profile":
        print(json.dumps(profile_worker(spec, reps)))
        return
    fn = (attention_fn(tuple(spec), name) if kind == "attention" else
          finetune_step_fn(spec, name) if kind == "finetune" else
          qa_step(spec, name) if kind == "qa" else step_fn(spec, name))
    try:
        with open("/proc/self/statm") as f:  # Linux: current resident pages
            before = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        before = None  # elsewhere the column says n/a
    times = run_times(fn, reps, warmup)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"times": times, "step_rss_bytes": None if before is None else max(0, peak - before)}))


def n_threads() -> int:
    import numba

    return numba.get_num_threads()


def try_torch():
    """(torch, None) when torch is importable with our thread count set, else (None, reason)."""
    try:
        import torch
    except ImportError as e:  # torch is optional
        return None, f"torch not installed ({e})"
    torch.set_num_threads(n_threads())
    return torch, None


def fmt_table(headers, rows) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def ms(s) -> str:
    return "n/a" if s is None else f"{s * 1e3:.1f}"


def mib(b) -> str:
    return "n/a" if b is None else f"{b / 2**20:.0f}"


def ratio(a, b) -> str:
    return "n/a" if a is None or b is None else f"{a / b:.2f}x"


# ---------------------------------------------------------------------------------------------
# 1. attention forward + backward

def _attention_inputs(shape, rng, dtype=np.float32):
    """q, k, v as the model makes them (strided views of one (B, T, 3C) projection), a padding
    mask with a padded tail in every other sequence, and dout."""
    from minibert.layers import split_heads

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
    from minibert import kernels, layers

    q, k, v, mask, dout = _attention_inputs(shape, np.random.default_rng(0))
    if name.startswith("torch"):
        torch, why = try_torch()
        if torch is None:
            raise RuntimeError(why)
        return _torch_attention_fns(torch, q, k, v, mask, dout)[name]
    forward, backward = {"numba": (kernels.attention_forward, kernels.attention_backward),
                         "numba v3": (kernels.attention_forward_v3, kernels.attention_backward_v3),
                         "numba v2": (kernels.attention_forward_v2, kernels.attention_backward_v2),
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


def bench_attention(report: dict, reps: int) -> None:
    torch_ok = _have("torch")
    names = [n for n in ATTENTION_CONTENDERS if torch_ok or not n.startswith("torch")]
    rows, out = [], {}
    for shape in ATTENTION_SHAPES:
        # 10 untimed runs first: a fresh process's first several runs are slower (seen for every
        # contender, v3, v4 and torch alike: 10-14 ms before settling at 7-9 ms), and one warm-up
        # left that start-up in the medians
        t = isolated_medians("attention", list(shape), names, reps, warmup=ATTENTION_WARMUP)
        t_torch = min((t[n], n) for n in t if n.startswith("torch")) if torch_ok else (None, "torch not installed")
        spread = round_ratios(isolated_medians.last_rounds, [n for n in t if n.startswith("torch")], "numba") \
            if torch_ok else []
        res = {"numba_s": t["numba"], "numba_v3_s": t["numba v3"], "numba_v2_s": t["numba v2"],
               "numba_v1_s": t["numba v1"], "numpy_s": t["numpy"],
               "torch_s": t_torch[0],
               "torch_variant": t_torch[1], "speedup_vs_numpy": t["numpy"] / t["numba"],
               "speedup_vs_torch": None if t_torch[0] is None else t_torch[0] / t["numba"],
               "speedup_vs_torch_per_round": spread, "all_s": t}
        out["x".join(map(str, shape))] = res
        rows.append(["x".join(map(str, shape)), ms(t["numba"]), ms(t["numba v3"]), ms(t["numba v2"]), ms(t["numba v1"]),
                     ms(t["numpy"]), ms(t_torch[0]), ratio(t["numpy"], t["numba"]), ratio(t_torch[0], t["numba"]),
                     f"{min(spread):.2f}-{max(spread):.2f}x" if spread else "n/a"])
    report["attention"] = out
    print(f"\n== attention forward+backward, float32, padded keys; ms (median of {ROUNDS} processes x {reps}), "
          f"{n_threads()} threads")
    print(fmt_table(["B x NH x T x HS", "numba", "numba v3", "numba v2", "numba v1", "numpy", "torch", "numpy/numba",
                     "torch/numba", "per round"], rows))
    print("target: torch/numba >= 1x (torch = the faster of explicit and sdpa); per round: the lowest and highest "
          "torch/numba of the rounds' own medians, the machine's noise; numba = v4 (the default: per head, "
          "OpenBLAS gemm called from Numba's threads, softmax on the head's block in cache), v3 = batched OpenBLAS "
          "matmuls + a fused Numba softmax pass, v2 = np.matmul + the same softmax, v1 = all-Numba")


# ---------------------------------------------------------------------------------------------
# 2. full pretraining step

def matmul_flops(cfg, B, T, P) -> float:
    """Matmul FLOPs of one training step (forward + backward), counted analytically.

    Forward: 2*m*n*k per matmul. Backward of a matmul with a weight costs two matmuls of the
    same size (dx and dw); the attention matmuls also need two each. So a step is 3x forward.
    """
    C, FF, V, L, NH = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.num_hidden_layers, cfg.num_attention_heads
    N = B * T
    per_layer = 2 * N * C * 3 * C + 2 * N * C * C + 2 * 2 * N * C * FF  # qkv, out, ffn in + out
    per_layer += 2 * 2 * B * NH * T * T * (C // NH)  # q @ k^T and att @ v
    heads = 2 * B * C * C + 2 * B * C * 2 + 2 * B * P * C * C + 2 * B * P * C * V  # pooler, nsp, mlm dense, decoder
    return 3.0 * (L * per_layer + heads)


def matmul_peak(reps: int, n: int = 2048) -> float:
    """The machine's float32 matmul rate in GFLOP/s: a large np.matmul (OpenBLAS, all cores)."""
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    t = median_time(lambda: a @ a, reps)
    return 2.0 * n**3 / t / 1e9


def minibert_step_fn(cfg, batch, backend: str, seed: int = 0):
    """One training step of minibert with the given backend: loss_and_grads (dropout on),
    global-norm clipping to 1.0, AdamW."""
    from minibert import optim
    from minibert.backend import get_ops
    from minibert.bert import BertForPreTraining
    from minibert.model import bert_backward, bert_forward

    model = BertForPreTraining(cfg, seed=seed, dtype=np.float32)
    opt = optim.AdamW(model.params, lr=1e-4)
    ops = get_ops(backend)
    rng = np.random.default_rng(seed)

    def step():
        loss, _, cache = bert_forward(model.params, cfg, batch, rng, ops)
        grads = bert_backward(model.params, cfg, cache, ops)
        grads, _ = optim.clip_by_global_norm(grads, 1.0)
        opt.step(model.params, grads)
        return loss

    return step


def torch_step_fn(torch, cfg, batch):
    """transformers' BertForPreTraining, PyTorch eager, train mode (dropout on), MLM logits only
    at the masked positions (gather before model.cls), loss = MLM CE + NSP CE, torch AdamW."""
    import transformers

    hf_cfg = transformers.BertConfig(**cfg.to_dict())
    torch.manual_seed(0)
    model = transformers.BertForPreTraining(hf_cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
    ids = torch.tensor(batch["input_ids"])
    mask = torch.tensor(batch["input_mask"])
    seg = torch.tensor(batch["segment_ids"])
    pos = torch.tensor(batch["masked_lm_positions"])  # (B, P)
    labels = torch.tensor(np.where(batch["masked_lm_weights"] > 0, batch["masked_lm_ids"], -100))  # (B, P)
    nsp = torch.tensor(batch["next_sentence_labels"])
    rows = torch.arange(ids.shape[0])[:, None]  # (B, 1)
    ce = torch.nn.functional.cross_entropy

    def step():
        opt.zero_grad(set_to_none=True)
        seq, pooled = model.bert(input_ids=ids, attention_mask=mask, token_type_ids=seg, return_dict=False)[:2]
        h = seq[rows, pos]  # (B, P, C) hidden states at the masked positions only
        mlm_logits, nsp_logits = model.cls(h, pooled)  # (B, P, V), (B, 2)
        loss = ce(mlm_logits.reshape(-1, mlm_logits.shape[-1]), labels.reshape(-1)) + ce(nsp_logits, nsp)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    return step


def bench_step(report: dict, reps: int, numpy_reps: int, configs) -> None:
    from minibert.model import BertConfig

    why = None if _have("torch") and _have("transformers") else "torch or transformers not installed"
    peak = matmul_peak(max(3, reps // 2))
    B, T, P = STEP_SHAPE["B"], STEP_SHAPE["T"], STEP_SHAPE["P"]
    rows, out = [], {"matmul_peak_gflops": peak, "shape": STEP_SHAPE}
    for name in configs:
        cfg = BertConfig(**CONFIGS[name])
        t = isolated_medians("step", name, ["numba"] + ([] if why else ["torch"]), reps)
        rss = dict(isolated_medians.last_rss)
        t.update(isolated_medians("step", name, ["numpy"], numpy_reps, rounds=1))
        flops = matmul_flops(cfg, B, T, P)
        t_torch = t.get("torch")
        res = {"numba_s": t["numba"], "numpy_s": t["numpy"], "torch_s": t_torch,
               "tokens_per_s_numba": B * T / t["numba"], "tokens_per_s_numpy": B * T / t["numpy"],
               "tokens_per_s_torch": None if t_torch is None else B * T / t_torch,
               "step_ratio_numba_over_torch": None if t_torch is None else t["numba"] / t_torch,
               "matmul_gflop_per_step": flops / 1e9, "gflops_numba": flops / t["numba"] / 1e9,
               "fraction_of_peak": flops / t["numba"] / 1e9 / peak, "torch_note": why,
               "step_rss_bytes_numba": rss["numba"], "step_rss_bytes_torch": rss.get("torch")}
        out[name] = res
        rows.append([name, ms(t["numba"]), ms(t["numpy"]), ms(t_torch), f"{B * T / t['numba']:,.0f}",
                     "n/a" if t_torch is None else f"{B * T / t_torch:,.0f}",
                     "n/a" if t_torch is None else f"{t['numba'] / t_torch:.2f}",
                     f"{flops / t['numba'] / 1e9:.1f}", f"{100 * flops / t['numba'] / 1e9 / peak:.0f}%",
                     mib(rss["numba"]), mib(rss.get("torch"))])
    report["step"] = out
    print(f"\n== training step (fwd+bwd+clip+AdamW), B={B} T={T} P={P}, float32; ms (median of {ROUNDS} "
          f"processes x {reps}; numpy backend 1 x {numpy_reps}), {n_threads()} threads")
    print(fmt_table(["config", "numba", "numpy", "torch", "tok/s numba", "tok/s torch", "numba/torch",
                     "GFLOP/s", "of peak", "step MiB numba", "step MiB torch"], rows))
    print(f"float32 matmul peak (2048^3 np.matmul): {peak:.1f} GFLOP/s"
          + ("" if why is None else f"   [torch: {why}]"))
    print("targets: numba/torch <= 0.7 on both; >= 50% of peak on small. step MiB: the worker process's peak "
          "resident memory minus its size before the first step (model, optimizer, batch already built)")
    report["matmul_peak_gflops"] = peak


def step_fn(config: str, name: str):
    """A function running one training step of `config` with contender `name` (called inside a
    worker process; torch is imported only by the torch contender)."""
    from minibert.gradcheck import random_batch
    from minibert.model import BertConfig

    cfg = BertConfig(**CONFIGS[config])
    batch = random_batch(cfg, STEP_SHAPE["B"], STEP_SHAPE["T"], STEP_SHAPE["P"], np.random.default_rng(0))
    if name == "torch":
        torch, why = try_torch()
        if torch is None:
            raise RuntimeError(why)
        return torch_step_fn(torch, cfg, batch)
    return minibert_step_fn(cfg, batch, name)


def finetune_step_fn(config: str, name: str):
    """One fine-tuning step of sequence classification (2 labels, dropout on, clip, AdamW) on a
    batch of B=32 full-length T=128 sequences: minibert's class or transformers' of the same name."""
    from minibert.model import BertConfig

    cfg = BertConfig(**CONFIGS[config], hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    rng = np.random.default_rng(0)
    B, T = STEP_SHAPE["B"], STEP_SHAPE["T"]
    ids = rng.integers(5, cfg.vocab_size, (B, T))
    batch = dict(input_ids=ids, segment_ids=np.zeros_like(ids), input_mask=np.ones_like(ids), labels=rng.integers(0, 2, B))
    torch = None
    if name == "torch":
        torch, why = try_torch()
        if torch is None:
            raise RuntimeError(why)
    return task_step_fn("BertForSequenceClassification", cfg, batch, name, rng, torch, num_labels=2)


def bench_finetune(report: dict, reps: int, configs) -> None:
    why = None if _have("torch") and _have("transformers") else "torch or transformers not installed"
    rows, out = [], {}
    B, T = STEP_SHAPE["B"], STEP_SHAPE["T"]
    qa = f"BertForQuestionAnswering B={QA_SHAPE['B']} T={QA_SHAPE['T']}"
    for kind, task in (("finetune", f"BertForSequenceClassification B={B} T={T}"), ("qa", qa)):
        for name in configs:
            t = isolated_medians(kind, name, ["numba"] + ([] if why else ["torch"]), reps)
            rss = isolated_medians.last_rss
            t_torch = t.get("torch")
            out[f"{kind} {name}"] = {"numba_s": t["numba"], "torch_s": t_torch, "task": task,
                                     "ratio_numba_over_torch": None if t_torch is None else t["numba"] / t_torch,
                                     "step_rss_bytes_numba": rss["numba"], "step_rss_bytes_torch": rss.get("torch")}
            rows.append([task.split()[0][len("BertFor"):], task.split(" ", 1)[1], name, ms(t["numba"]), ms(t_torch),
                         "n/a" if t_torch is None else f"{t['numba'] / t_torch:.2f}", mib(rss["numba"]),
                         mib(rss.get("torch"))])
    report["finetune_step"] = out
    print(f"\n== fine-tuning step (fwd+bwd+clip+AdamW, dropout 0.1); ms (median of {ROUNDS} processes x {reps})")
    print(fmt_table(["task", "shape", "config", "minibert", "transformers", "minibert/torch", "step MiB minibert",
                     "step MiB torch"], rows) + ("" if why is None else f"\n[torch: {why}]"))


def qa_step(config: str, name: str):
    """A QA fine-tuning step at T=384 (minibert.tools.bench_profile.qa_step_fn) in a worker process."""
    from minibert.tools.bench_profile import qa_step_fn

    torch = None
    if name == "torch":
        torch, why = try_torch()
        if torch is None:
            raise RuntimeError(why)
    return qa_step_fn(CONFIGS[config], name, torch)


def profile_worker(config: str, reps: int) -> dict:
    """Inside a worker process: the per-layer profile of `config`'s step (profile_step) and the
    step's matmuls timed one by one (matmul_floor), as JSON-ready values."""
    from minibert.gradcheck import random_batch
    from minibert.model import BertConfig
    from minibert.tools.bench_profile import matmul_floor, profile_step

    cfg = BertConfig(**CONFIGS[config])
    p = profile_step(cfg, STEP_SHAPE, reps)
    B, T, P = (STEP_SHAPE[k] for k in "BTP")
    n_real = int(random_batch(cfg, B, T, P, np.random.default_rng(0))["input_mask"].sum())
    p["matmul_floor"] = matmul_floor(cfg, STEP_SHAPE, max(5, reps), n_real)
    return p


def bench_profile(report: dict, reps: int, configs) -> None:
    """Where a step's time goes, layer by layer, its peak memory (minibert.tools.bench_profile), and
    the step's matmuls alone; measured in a fresh worker process per config, like the step."""
    from minibert.model import BertConfig
    from minibert.tools.bench_profile import profile_rows

    peak = report.get("matmul_peak_gflops") or matmul_peak(max(3, reps // 2))
    B, T, P = (STEP_SHAPE[k] for k in "BTP")
    out = {}
    for name in configs:
        p = run_worker("profile", name, reps)
        flops = matmul_flops(BertConfig(**CONFIGS[name]), B, T, P)
        p["matmul_bound_s"] = flops / peak / 1e9
        out[name] = p
        print(f"\n== profile: training step, {name}, B={B} T={T} P={P}, numba backend, one worker process; ms "
              f"(median of {reps}), {n_threads()} threads")
        print(fmt_table(["layer", "forward", "backward", "total", "of step"], profile_rows(p)))
        print(f"peak NumPy memory in a step (tracemalloc, above what existed before it): "
              f"{p['peak_bytes'] / 2**20:.1f} MiB; matmul work {flops / 1e9:.2f} GFLOP = "
              f"{ms(p['matmul_bound_s'])} ms at the measured {peak:.0f} GFLOP/s matmul peak")
        _print_matmul_floor(p, report.get("step", {}).get(name, {}).get("torch_s"))
    report["profile"] = out


def _print_matmul_floor(p: dict, torch_s) -> None:
    """The arithmetic behind the step target: the step's matmuls alone, each timed at its own
    shape through the BLAS calls the step makes (minibert.tools.bench_profile.matmul_floor), grouped,
    against the profiled step and 0.7x the torch step of the `step` section (when it ran)."""
    f = p["matmul_floor"]
    rows = [[g, f"{fl / 1e9:.2f}", ms(s), f"{fl / s / 1e9:.0f}"] for g, (s, fl) in f["groups"].items()]
    rows.append(["all matmuls", f"{f['flops'] / 1e9:.2f}", ms(f["floor_s"]), f"{f['flops'] / f['floor_s'] / 1e9:.0f}"])
    print("the step's matmuls alone, each timed at its own shape (the BLAS calls the step makes; ms per step):")
    print(fmt_table(["matmuls", "GFLOP", "ms", "GFLOP/s"], rows))
    print(f"this step: {ms(p['step_s'])} ms, of which the matmuls alone {ms(f['floor_s'])} ms and "
          f"{ms(max(0.0, p['step_s'] - f['floor_s']))} ms everything else")
    if torch_s is not None:
        target = 0.7 * torch_s
        f["target_s"] = target
        print(f"0.7x the torch step = {ms(target)} ms; the matmuls alone take {ms(f['floor_s'])} ms, "
              f"{100 * f['floor_s'] / target:.0f}% of it, leaving {ms(max(0.0, target - f['floor_s']))} ms "
              "for everything else (attention softmax, LayerNorm, GELU, dropout, embeddings, loss, AdamW)")


# ---------------------------------------------------------------------------------------------
# 3. compile time and start-up

STARTUP_SCRIPT = """
import time
t0 = time.perf_counter()
import numpy as np
import minibert
from minibert import kernels  # loads (or compiles) the Numba functions
from minibert.tools import bench
from minibert.gradcheck import random_batch
from minibert.model import BertConfig
t1 = time.perf_counter()
cfg = BertConfig(**bench.CONFIGS["tiny"])
batch = random_batch(cfg, 32, 128, 20, np.random.default_rng(0))
bench.minibert_step_fn(cfg, batch, "numba")()
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def _run_startup(cache_dir: str) -> tuple[float, float, float]:
    """(wall seconds of the whole process, import seconds, first-step seconds) in a subprocess."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, MINIBERT_BACKEND="numba")
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", STARTUP_SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"start-up subprocess failed:\n{res.stderr[-2000:]}")
    t_import, t_step = map(float, res.stdout.split()[-2:])
    return wall, t_import, t_step


def bench_startup(report: dict, reps: int) -> None:
    with tempfile.TemporaryDirectory(prefix="minibert-numba-cache-") as cache:
        cold = _run_startup(cache)  # empty cache: every kernel compiles
        warm = [_run_startup(cache) for _ in range(reps)]  # the same cache, now filled
    warm_wall = statistics.median(w[0] for w in warm)
    warm_import = statistics.median(w[1] for w in warm)
    warm_step = statistics.median(w[2] for w in warm)
    out = {"cold_wall_s": cold[0], "cold_import_s": cold[1], "cold_first_step_s": cold[2],
           "warm_wall_s": warm_wall, "warm_import_s": warm_import, "warm_first_step_s": warm_step,
           "compile_s": cold[0] - warm_wall}
    report["startup"] = out
    print(f"\n== start-up (python process: import minibert + kernels, then the first tiny training step); "
          f"warm = median of {reps}")
    print(fmt_table(["cache", "process s", "import s", "first step s"],
                    [["cold (fresh NUMBA_CACHE_DIR)", f"{cold[0]:.2f}", f"{cold[1]:.2f}", f"{cold[2]:.2f}"],
                     ["warm", f"{warm_wall:.2f}", f"{warm_import:.2f}", f"{warm_step:.2f}"]]))
    print(f"Numba compile time (cold - warm): {out['compile_s']:.1f} s; target: warm process < 3 s")


# ---------------------------------------------------------------------------------------------
# 4. text and data (other modules; skipped with a note when missing)

def bench_text_and_data(report: dict, sections) -> None:
    if "text" in sections:
        try:
            from minibert.tools import bench_text
        except ImportError as e:
            print(f"\n== text: skipped (minibert.tools.bench_text not importable: {e})")
        else:
            print("\n== text")
            bench_text.bench_wordpiece(report)
            bench_text.bench_tokenizer(report)
    if "data" in sections:
        try:
            from minibert.tools import bench_data
        except ImportError as e:
            print(f"\n== data: skipped (minibert.tools.bench_data not importable: {e})")
            return
        print("\n== data")
        bench_data.bench_data(report)
        data, step = report.get("data") or {}, (report.get("step") or {}).get("tiny")
        if step is None:
            print("data vs training: run with the step section to get the ratio")
            return
        consume = step["tokens_per_s_numba"]
        ratios = {k: data[k] / consume for k in ("generation_tokens_per_s", "batch_dynamic_tokens_per_s") if k in data}
        report["data_vs_training"] = {"training_tokens_per_s": consume, **{f"ratio_{k}": v for k, v in ratios.items()}}
        for k, v in ratios.items():
            print(f"data vs training: {k} / tiny-step tokens/s ({consume:,.0f}) = {v:.1f}x   (target >= 5x)")


# ---------------------------------------------------------------------------------------------
# command line

def cli(argv: list[str]) -> int:
    global ROUNDS  # --rounds sets it for every section
    ap = argparse.ArgumentParser(prog="python -m minibert bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, tiny config only for the step")
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help=f"comma-separated sections to run (default: all of {','.join(SECTIONS)})")
    ap.add_argument("--json", default=str(ROOT / "bench" / "results.json"), help="where to write the figures")
    ap.add_argument("--rounds", type=int, default=ROUNDS,
                    help=f"worker processes per contender for attention, step and finetune, taking turns "
                         f"(default {ROUNDS}); more rounds, steadier medians on a noisy machine")
    args = ap.parse_args(argv)
    ROUNDS = max(1, args.rounds)
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        ap.error(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}")
    reps = 3 if args.quick else 7
    report = {"machine": {"cores": os.cpu_count(), "threads": n_threads(), "platform": platform.platform(),
                          "python": platform.python_version(), "numpy": np.__version__},
              "quick": args.quick, "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    from minibert.backend import backend_name
    from minibert.tools.bench_profile import cpu_description

    report["machine"]["cpu"] = cpu_description()
    print(f"minibert bench: {os.cpu_count()} cores, {n_threads()} threads, numpy {np.__version__}, "
          f"MINIBERT_BACKEND={backend_name()}; every figure is a median\nCPU: {report['machine']['cpu']}")
    if "attention" in sections:
        bench_attention(report, reps)
    if "step" in sections:
        bench_step(report, reps, numpy_reps=2 if args.quick else 3,
                   configs=["tiny"] if args.quick else ["tiny", "small"])
    if "finetune" in sections:
        bench_finetune(report, reps, configs=["tiny"] if args.quick else ["tiny", "small"])
    if "profile" in sections:
        bench_profile(report, reps, configs=["tiny"] if args.quick else ["tiny", "small"])
    if "startup" in sections:
        bench_startup(report, 2 if args.quick else 3)
    bench_text_and_data(report, sections)
    from minibert.io.atomic import write_text_atomic

    path = write_text_atomic(args.json, json.dumps(report, indent=2, default=float) + "\n")
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    worker(sys.argv[2:])
