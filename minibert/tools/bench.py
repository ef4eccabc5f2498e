"""`python -m minibert bench` (make bench): how fast minibert is, next to PyTorch, in one run.

Sections (select with --only, comma-separated; they run in the order step, profile, sst2,
attention, finetune, startup, coldstart, text, data, so that --time-limit drops the least needed ones):
    step       one full pretraining step (forward, backward, clipping, AdamW) on the tiny, small,
               minilm (the shape of all-MiniLM-L6-v2: 6 layers, hidden 384, 12 heads, vocabulary
               30,522) and base (one layer of BERT-base: hidden 768, FF 3072) configs: minibert
               (numba and numpy backends) vs transformers' BertForPreTraining in PyTorch eager (MLM
               logits only at the masked positions); tokens/s, achieved matmul GFLOP/s and the
               float32 matmul peak at the same thread count; with several thread counts, the
               speed-up from 1 thread and the serial part it implies (Amdahl)
    attention  attention forward+backward: Numba kernels (v4 default, v3, v2, v1) vs NumPy reference vs
               PyTorch eager
    finetune   a fine-tuning step: sequence classification (B=32, T=128) on every config and question
               answering (B=8, T=384) on the small ones, minibert's class vs transformers' of the same name
    profile    where the step's time goes, part by part, at 1 thread and at the most threads asked
               for, the speed-up of each part and the serial milliseconds it implies, next to
               PyTorch's step cut by operator kind (torch.profiler) (minibert.tools.bench_profile)
    sst2       a fine-tuning epoch of SST-2 with real sentence lengths (--data DIR with train.tsv,
               dev.tsv): minibert (its unpadded path) vs transformers with dynamic padding, the same
               batches in the same order; wall time and dev accuracy (minibert.tools.bench_sst2)
    startup    Numba compile time on a cold cache; import + first step on a warm cache
    coldstart  seconds to train-tiny's first step and to the end of lesson 06 in a fresh copy of the
               repository, cold (Numba's cache empty) and warm (minibert.tools.bench_coldstart)
    text       WordPiece training and tokenizer speed (minibert.tools.bench_text)
    data       pretraining-data throughput (minibert.tools.bench_data) vs what training consumes

Threads: `--threads 1,2,4,8,16` runs the step, attention and finetune sections at each count
(the counts above the machine's cores are left out; profile runs at 1 and the most, sst2 at the
most), every contender in its own worker
processes with NUMBA_NUM_THREADS, OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and MKL_NUM_THREADS set
and torch.set_num_threads(n); every table names its thread count. Without --threads, one count:
the machine's cores. `--quick` keeps a run on a 16-core machine within about 8 minutes: one
round of at most 3 repetitions (or 4 s) per worker, the fast contenders only, the fine-tuning
steps at the most threads, a 2,048-sentence SST-2 subset.

Every figure is the median of several repetitions (after one warm-up); ratios are computed
from the medians. The attention and step contenders each run in their own worker processes,
taking turns (see `isolated_medians`), so that one library's idle threads do not slow another.
The figures go to a JSON file (default bench/results.json, git-ignored), rewritten after every
section, so an interrupted run keeps what it measured. torch and transformers are optional:
their columns say "n/a" when they are not installed.

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

from minibert.tools import attention_v1, bench_coldstart, bench_sst2
from minibert.tools.bench_profile import QA_SHAPE, run_times, task_step_fn

ROOT = Path(__file__).resolve().parents[2]  # the repository
SECTIONS = ("step", "attention", "finetune", "profile", "sst2", "startup", "coldstart", "text", "data")
ATTENTION_SHAPES = [(32, 2, 128, 64), (8, 12, 128, 64)]  # (B, NH, T, HS)
CONFIGS = {
    "tiny": dict(vocab_size=8192, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=512, max_position_embeddings=128),
    "small": dict(vocab_size=8192, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                  intermediate_size=1024, max_position_embeddings=128),
    # the shape of sentence-transformers' all-MiniLM-L6-v2 (a 6-layer BERT)
    "minilm": dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                   intermediate_size=1536, max_position_embeddings=512),
    # one layer of BERT-base, with its vocabulary: a real BERT's layer and MLM head
    "base": dict(vocab_size=30522, hidden_size=768, num_hidden_layers=1, num_attention_heads=12,
                 intermediate_size=3072, max_position_embeddings=512),
}
STEP_SHAPE = dict(B=32, T=128, P=20)
THREAD_VARIABLES = ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


# ---------------------------------------------------------------------------------------------
# timing helpers

def median_time(fn, reps: int, warmup: int = 1) -> float:
    """Median wall time of fn() in seconds over `reps` runs, after `warmup` untimed runs."""
    return statistics.median(run_times(fn, reps, warmup))


ROUNDS = 3  # worker processes per contender, run in turn (numba, torch, numba, torch, ...)


def _have(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def isolated_medians(kind: str, spec, names, reps: int, rounds: int | None = None, warmup: int = 1,
                     threads: int | None = None) -> dict:
    """Median seconds of each contender, each timed in fresh worker processes (`reps` timed runs
    after `warmup` in each), the contenders taking turns `rounds` times, at `threads` threads
    (None: the machine's default).

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
            got = run_worker(kind, spec, reps, name, warmup, threads)
            times[name] += got["times"]
            per_round[name].append(statistics.median(got["times"]))
            rss[name].append(got["step_rss_bytes"])
    medians = {n: statistics.median(ts) for n, ts in times.items()}
    isolated_medians.last_rounds = per_round
    isolated_medians.last_rss = {n: max(r, default=None) if None not in r else None
                                 for n, r in rss.items()}  # the peak step memory of each contender
    return medians


def checkpoint() -> None:
    """Write what has been measured so far (cli sets it to rewrite the JSON file): the sections
    call it after every row, so that a run cut short keeps its numbers."""


def thread_environment(threads: int | None) -> dict:
    """The environment of a worker process at `threads` threads: every library's thread variable
    (Numba's, OpenBLAS's, OpenMP's for torch, MKL's) and MINIBERT_BENCH_THREADS, which the worker
    hands to torch.set_num_threads. None: the environment as it is."""
    env = dict(os.environ)
    if threads is not None:
        env.update({v: str(threads) for v in THREAD_VARIABLES}, MINIBERT_BENCH_THREADS=str(threads))
    return env


def run_worker(kind: str, spec, reps: int, name: str = "-", warmup: int = 0, threads: int | None = None) -> dict:
    """Run `python -m minibert.tools.bench --worker kind spec name reps warmup` in a fresh process
    (at `threads` threads) and return the JSON it prints last (`worker` below; "profile" and
    "peak" take no contender name)."""
    cmd = [sys.executable, "-m", "minibert.tools.bench", "--worker", kind, json.dumps(spec), name, str(reps), str(warmup)]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=thread_environment(threads))
    if res.returncode != 0:
        raise RuntimeError(f"bench worker {kind} {spec} {name} ({threads} threads) failed:\n{res.stderr[-2000:]}")
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
    if kind == "torch-profile":
        from minibert.tools.bench_profile import torch_profile_step

        print(json.dumps(torch_profile_step(step_parts_torch(spec), reps)))
        return
    if kind == "peak":
        print(json.dumps({"gflops": matmul_peak(reps, int(spec)), "threads": n_threads()}))
        return
    if kind == "sst2":
        print(json.dumps(bench_sst2.run_contender(spec, name)))
        return
    fn = (attention_fn(tuple(spec), name) if kind == "attention" else
          finetune_step_fn(spec, name) if kind == "finetune" else
          qa_step(spec, name) if kind == "qa" else step_fn(spec, name))
    try:
        with open("/proc/self/statm") as f:  # Linux: current resident pages
            before = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        before = None  # elsewhere the column says n/a
    budget = os.environ.get("MINIBERT_BENCH_BUDGET_S")  # --quick: the timed runs of a worker stop after this
    times = run_times(fn, reps, warmup, float(budget) if budget else None)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"times": times, "step_rss_bytes": None if before is None else max(0, peak - before)}))


def n_threads() -> int:
    import numba

    return numba.get_num_threads()


def try_torch():
    """(torch, None) when torch is importable with our thread count set (MINIBERT_BENCH_THREADS,
    else Numba's count), else (None, reason)."""
    try:
        import torch
    except ImportError as e:  # torch is optional
        return None, f"torch not installed ({e})"
    torch.set_num_threads(int(os.environ.get("MINIBERT_BENCH_THREADS") or n_threads()))
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

def attention_inputs(shape, rng, dtype=np.float32):
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

    q, k, v, mask, dout = attention_inputs(shape, np.random.default_rng(0))
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


QUICK_ATTENTION = ("numba", "numba v3", "torch explicit", "torch sdpa")  # --quick: the default and the references


def bench_attention(report: dict, reps: int, threads_list, quick: bool = False) -> None:
    torch_ok = _have("torch")
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
    print(f"\n== attention forward+backward, float32, padded keys; ms (median of {ROUNDS} processes x {reps}), "
          f"threads {_threads_label(threads_list)}")
    print(fmt_table(["threads", "B x NH x T x HS", "numba", "numba v3", "numba v2", "numba v1", "numpy", "torch",
                     "numpy/numba", "torch/numba", "per round"], rows))
    print("target: torch/numba >= 1x (torch = the faster of explicit and sdpa); per round: the lowest and highest "
          "torch/numba of the rounds' own medians, the machine's noise; numba = v4 (the default: per head, "
          "OpenBLAS gemm called from Numba's threads, softmax on the head's block in cache), v3 = batched OpenBLAS "
          "matmuls + a fused Numba softmax pass, v2 = np.matmul + the same softmax, v1 = all-Numba"
          + ("; --quick: v4, v3 and torch only" if quick else ""))


def _threads_label(threads_list) -> str:
    return ", ".join(str(t) for t in threads_list)


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


def torch_step_parts(torch, cfg, batch):
    """transformers' BertForPreTraining, PyTorch eager, train mode (dropout on), MLM logits only
    at the masked positions (gather before model.cls), loss = MLM CE + NSP CE: (forward+backward
    fn, clip+AdamW fn), as the step's two halves."""
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

    def fwd_bwd():
        opt.zero_grad(set_to_none=True)
        seq, pooled = model.bert(input_ids=ids, attention_mask=mask, token_type_ids=seg, return_dict=False)[:2]
        h = seq[rows, pos]  # (B, P, C) hidden states at the masked positions only
        mlm_logits, nsp_logits = model.cls(h, pooled)  # (B, P, V), (B, 2)
        loss = ce(mlm_logits.reshape(-1, mlm_logits.shape[-1]), labels.reshape(-1)) + ce(nsp_logits, nsp)
        loss.backward()
        return loss

    def update():
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return fwd_bwd, update


def torch_step_fn(torch, cfg, batch):
    """One training step of transformers' BertForPreTraining (torch_step_parts, both halves)."""
    fwd_bwd, update = torch_step_parts(torch, cfg, batch)

    def step():
        loss = fwd_bwd()
        update()
        return loss.item()

    return step


def step_parts_torch(config: str):
    """torch_step_parts for `config`'s bench batch (in a worker process)."""
    from minibert.gradcheck import random_batch
    from minibert.model import BertConfig

    torch, why = try_torch()
    if torch is None:
        raise RuntimeError(why)
    cfg = BertConfig(**CONFIGS[config])
    batch = random_batch(cfg, STEP_SHAPE["B"], STEP_SHAPE["T"], STEP_SHAPE["P"], np.random.default_rng(0))
    return torch, torch_step_parts(torch, cfg, batch)


def bench_step(report: dict, reps: int, numpy_reps: int, configs, threads_list) -> None:
    """The training step of every config at every thread count (numba vs torch in turns; the numpy
    backend once, at the most threads, with `numpy_reps` > 0), then the scaling table."""
    from minibert.model import BertConfig

    why = None if _have("torch") and _have("transformers") else "torch or transformers not installed"
    B, T, P = STEP_SHAPE["B"], STEP_SHAPE["T"], STEP_SHAPE["P"]
    out = report.setdefault("step", {"shape": STEP_SHAPE})
    rows, peaks = [], {}
    for threads in threads_list:
        peak = peaks[threads] = run_worker("peak", 2048, max(3, reps // 2), threads=threads)["gflops"]
        out.setdefault("matmul_peak_gflops", {})[str(threads)] = peak
        for name in configs:
            cfg = BertConfig(**CONFIGS[name])
            t = isolated_medians("step", name, ["numba"] + ([] if why else ["torch"]), reps, threads=threads)
            rss = dict(isolated_medians.last_rss)
            if numpy_reps and threads == max(threads_list):
                t.update(isolated_medians("step", name, ["numpy"], numpy_reps, rounds=1, threads=threads))
            flops = matmul_flops(cfg, B, T, P)
            t_torch = t.get("torch")
            res = {"threads": threads, "numba_s": t["numba"], "numpy_s": t.get("numpy"), "torch_s": t_torch,
                   "tokens_per_s_numba": B * T / t["numba"],
                   "tokens_per_s_torch": None if t_torch is None else B * T / t_torch,
                   "step_ratio_numba_over_torch": None if t_torch is None else t["numba"] / t_torch,
                   "matmul_gflop_per_step": flops / 1e9, "gflops_numba": flops / t["numba"] / 1e9,
                   "fraction_of_peak": flops / t["numba"] / 1e9 / peak, "torch_note": why,
                   "step_rss_bytes_numba": rss["numba"], "step_rss_bytes_torch": rss.get("torch")}
            out[f"{name}@{threads}"] = res
            rows.append([threads, name, ms(t["numba"]), ms(t.get("numpy")), ms(t_torch), f"{B * T / t['numba']:,.0f}",
                         "n/a" if t_torch is None else f"{B * T / t_torch:,.0f}",
                         "n/a" if t_torch is None else f"{t['numba'] / t_torch:.2f}",
                         f"{flops / t['numba'] / 1e9:.1f}", f"{100 * flops / t['numba'] / 1e9 / peak:.0f}%",
                         mib(rss["numba"]), mib(rss.get("torch"))])
            out[name] = res  # the last (most threads) under the config's name, for the data section
            checkpoint()
    print(f"\n== training step (fwd+bwd+clip+AdamW), B={B} T={T} P={P}, float32; ms (median of {ROUNDS} "
          f"processes x {reps}; numpy backend 1 x {numpy_reps} at {max(threads_list)} threads"
          f"{'' if numpy_reps else ': skipped'}), threads {_threads_label(threads_list)}")
    print(fmt_table(["threads", "config", "numba", "numpy", "torch", "tok/s numba", "tok/s torch", "numba/torch",
                     "GFLOP/s", "of peak", "step MiB numba", "step MiB torch"], rows))
    print("float32 matmul peak (2048^3 np.matmul) by threads: "
          + ", ".join(f"{n}: {g:.1f} GFLOP/s" for n, g in peaks.items()) + ("" if why is None else f"   [torch: {why}]"))
    print("targets: numba/torch <= 1.0 at every thread count, <= 0.9 at 2 threads. step MiB: the worker process's "
          "peak resident memory minus its size before the first step (model, optimizer, batch already built)")
    report["matmul_peak_gflops"] = peaks[max(threads_list)]
    if len(threads_list) > 1 and min(threads_list) == 1:
        print_scaling(out, configs, threads_list, "numba", "torch", "training step")


def amdahl_serial(t1: float, tn: float, n: int) -> float:
    """The serial part S of a time that takes t1 on one thread and tn on n, if it is S plus a
    part that divides perfectly: t(n) = S + (t1 - S) / n  ->  S = (n tn - t1) / (n - 1)."""
    return (n * tn - t1) / (n - 1)


def print_scaling(out: dict, configs, threads_list, mine: str, theirs: str, what: str) -> None:
    """Speed-up from 1 thread of minibert and torch, and the serial milliseconds each implies
    (Amdahl, from the 1-thread and n-thread medians), config by config."""
    rows = []
    for name in configs:
        one = out.get(f"{name}@1")
        for n in threads_list:
            res = out.get(f"{name}@{n}")
            if n == 1 or one is None or res is None:
                continue
            row = [name, n]
            for who in (mine, theirs):
                t1, tn = one.get(f"{who}_s"), res.get(f"{who}_s")
                row += (["n/a"] * 2 if t1 is None or tn is None else
                        [f"{t1 / tn:.2f}x", ms(max(0.0, amdahl_serial(t1, tn, n)))])
            rows.append(row)
            res["speedup_from_1_thread"] = {w: None if one.get(f"{w}_s") is None or res.get(f"{w}_s") is None
                                            else one[f"{w}_s"] / res[f"{w}_s"] for w in (mine, theirs)}
    if rows:
        print(f"\n== scaling of the {what}: speed-up from 1 thread and the serial ms it implies "
              "(Amdahl: t(n) = S + (t1 - S)/n)")
        print(fmt_table(["config", "threads", f"speed-up {mine}", f"serial ms {mine}", f"speed-up {theirs}",
                         f"serial ms {theirs}"], rows))


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


QA_CONFIGS = ("tiny", "small")  # T = 384 question answering: the small configs only (a step of base is seconds)


def bench_finetune(report: dict, reps: int, configs, threads_list, qa_configs=QA_CONFIGS) -> None:
    why = None if _have("torch") and _have("transformers") else "torch or transformers not installed"
    rows, out = [], report.setdefault("finetune_step", {})
    B, T = STEP_SHAPE["B"], STEP_SHAPE["T"]
    qa = f"BertForQuestionAnswering B={QA_SHAPE['B']} T={QA_SHAPE['T']}"
    for threads in threads_list:
        for kind, task in (("finetune", f"BertForSequenceClassification B={B} T={T}"), ("qa", qa)):
            for name in configs:
                if kind == "qa" and name not in qa_configs:
                    continue
                t = isolated_medians(kind, name, ["numba"] + ([] if why else ["torch"]), reps, threads=threads)
                rss = isolated_medians.last_rss
                t_torch = t.get("torch")
                out[f"{kind} {name}@{threads}"] = {
                    "threads": threads, "numba_s": t["numba"], "torch_s": t_torch, "task": task,
                    "ratio_numba_over_torch": None if t_torch is None else t["numba"] / t_torch,
                    "step_rss_bytes_numba": rss["numba"], "step_rss_bytes_torch": rss.get("torch")}
                checkpoint()
                rows.append([threads, task.split()[0][len("BertFor"):], task.split(" ", 1)[1], name, ms(t["numba"]),
                             ms(t_torch), "n/a" if t_torch is None else f"{t['numba'] / t_torch:.2f}",
                             mib(rss["numba"]), mib(rss.get("torch"))])
    print(f"\n== fine-tuning step (fwd+bwd+clip+AdamW, dropout 0.1); ms (median of {ROUNDS} processes x {reps}), "
          f"threads {_threads_label(threads_list)}")
    print(fmt_table(["threads", "task", "shape", "config", "minibert", "transformers", "minibert/torch",
                     "step MiB minibert", "step MiB torch"], rows) + ("" if why is None else f"\n[torch: {why}]"))
    print("target: minibert/torch <= 1.0 at every shape")


def qa_step(config: str, name: str):
    """A QA fine-tuning step at T=384 (minibert.tools.bench_profile.qa_step_fn) in a worker process."""
    from minibert.tools.bench_profile import qa_step_fn

    torch = None
    if name == "torch":
        torch, why = try_torch()
        if torch is None:
            raise RuntimeError(why)
    return qa_step_fn(CONFIGS[config], name, torch)


def profile_worker(spec, reps: int) -> dict:
    """Inside a worker process: the per-layer profile of a config's step (profile_step) and, unless
    spec says {"floor": false}, the step's matmuls timed one by one (matmul_floor), as JSON-ready
    values. spec: the config's name, or {"config": name, "floor": bool}."""
    from minibert.gradcheck import random_batch
    from minibert.model import BertConfig
    from minibert.tools.bench_profile import matmul_floor, profile_step

    spec = {"config": spec, "floor": True} if isinstance(spec, str) else spec
    cfg = BertConfig(**CONFIGS[spec["config"]])
    p = profile_step(cfg, STEP_SHAPE, reps)
    p["threads"] = n_threads()
    if spec.get("floor", True):
        B, T, P = (STEP_SHAPE[k] for k in "BTP")
        n_real = int(random_batch(cfg, B, T, P, np.random.default_rng(0))["input_mask"].sum())
        p["matmul_floor"] = matmul_floor(cfg, STEP_SHAPE, max(5, reps), n_real)
    return p


def bench_profile(report: dict, reps: int, configs, threads_list, floor: bool = True) -> None:
    """Where a step's time goes, part by part, at 1 thread and at the most threads of the run (each
    in a fresh worker process, like the step): each part's speed-up and the serial milliseconds
    it implies, beside PyTorch's step cut by operator kind at the same counts; with `floor`, the
    step's matmuls alone at the most threads (minibert.tools.bench_profile)."""
    from minibert.model import BertConfig
    from minibert.tools.bench_profile import profile_rows, scaling_rows, torch_scaling_rows

    B, T, P = (STEP_SHAPE[k] for k in "BTP")
    top = max(threads_list)
    counts = sorted({1, top})
    torch_ok = _have("torch") and _have("transformers")
    out = report.setdefault("profile", {})
    for name in configs:
        mine = {n: run_worker("profile", {"config": name, "floor": floor and n == top}, reps, threads=n)
                for n in counts}
        theirs = {n: run_worker("torch-profile", name, reps, threads=n) for n in counts} if torch_ok else {}
        out[name] = {"minibert": {str(n): p for n, p in mine.items()},
                     "torch": {str(n): p for n, p in theirs.items()}}
        checkpoint()
        flops = matmul_flops(BertConfig(**CONFIGS[name]), B, T, P)
        peak = report.get("step", {}).get("matmul_peak_gflops", {}).get(str(top))
        p = mine[top]
        print(f"\n== profile: training step, {name}, B={B} T={T} P={P}, numba backend, one worker process per "
              f"thread count; ms (median of {reps}), {top} threads")
        print(fmt_table(["layer", "forward", "backward", "total", "of step"], profile_rows(p)))
        print(f"peak NumPy memory in a step (tracemalloc, above what existed before it): "
              f"{p['peak_bytes'] / 2**20:.1f} MiB; matmul work {flops / 1e9:.2f} GFLOP"
              + ("" if peak is None else f" = {ms(flops / peak / 1e9)} ms at the measured {peak:.0f} GFLOP/s peak"))
        if len(counts) > 1:
            print(f"\n== profile: {name}, each part at 1 and at {top} threads, its speed-up and serial ms "
                  f"(Amdahl: S = ({top} t{top} - t1) / {top - 1}); minibert, numba backend")
            rows, serial = scaling_rows(mine[1], mine[top], top)
            print(fmt_table(["part", "1 thread ms", f"{top} threads ms", "speed-up", "serial ms"], rows))
            out[name]["serial_ms_minibert"] = serial * 1e3
            if theirs:
                print(f"== profile: {name}, PyTorch (transformers' BertForPreTraining) by operator kind "
                      f"(torch.profiler self times; profiler on), 1 and {top} threads")
                rows, serial_t = torch_scaling_rows(theirs[1], theirs[top], top)
                print(fmt_table(["part", "1 thread ms", f"{top} threads ms", "speed-up", "serial ms"], rows))
                out[name]["serial_ms_torch"] = serial_t * 1e3
            print(f"serial ms per step at {top} threads (sum of the parts' Amdahl estimates): minibert "
                  f"{serial * 1e3:.1f}" + (f", torch {serial_t * 1e3:.1f}" if theirs else ""))
        if "matmul_floor" in p:
            _print_matmul_floor(p, report.get("step", {}).get(f"{name}@{top}", {}).get("torch_s"))


def _print_matmul_floor(p: dict, torch_s) -> None:
    """The arithmetic behind the step target: the step's matmuls alone, each timed at its own
    shape through the BLAS calls the step makes (minibert.tools.bench_profile.matmul_floor), grouped,
    against the profiled step and the torch step of the `step` section at the same threads (when it ran)."""
    f = p["matmul_floor"]
    rows = [[g, f"{fl / 1e9:.2f}", ms(s), f"{fl / s / 1e9:.0f}"] for g, (s, fl) in f["groups"].items()]
    rows.append(["all matmuls", f"{f['flops'] / 1e9:.2f}", ms(f["floor_s"]), f"{f['flops'] / f['floor_s'] / 1e9:.0f}"])
    print(f"the step's matmuls alone, each timed at its own shape (the BLAS calls the step makes; ms per step), "
          f"{p.get('threads', '?')} threads:")
    print(fmt_table(["matmuls", "GFLOP", "ms", "GFLOP/s"], rows))
    print(f"this step: {ms(p['step_s'])} ms, of which the matmuls alone {ms(f['floor_s'])} ms and "
          f"{ms(max(0.0, p['step_s'] - f['floor_s']))} ms everything else")
    if torch_s is not None:
        f["torch_s"] = torch_s
        print(f"the torch step: {ms(torch_s)} ms; the matmuls alone take {ms(f['floor_s'])} ms, "
              f"{100 * f['floor_s'] / torch_s:.0f}% of it, leaving {ms(max(0.0, torch_s - f['floor_s']))} ms "
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

def parse_threads(text: str | None, cores: int) -> tuple[list[int], list[int]]:
    """--threads "1,2,4" -> (the counts to run, sorted, at most `cores`; the counts left out).
    None: [cores]."""
    if not text:
        return [cores], []
    try:
        asked = sorted({int(t) for t in text.split(",") if t.strip()})
    except ValueError:
        raise ValueError(f"--threads {text!r}: expected comma-separated thread counts, e.g. 1,2,4") from None
    if not asked or asked[0] < 1:
        raise ValueError(f"--threads {text!r}: thread counts must be >= 1")
    return [t for t in asked if t <= cores], [t for t in asked if t > cores]


def cli(argv: list[str]) -> int:
    global ROUNDS  # --rounds sets it for every section
    ap = argparse.ArgumentParser(prog="python -m minibert bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="1 round of at most 3 repetitions (4 s) per worker, v4/v3/torch attention only, the "
                         "fine-tuning steps at the most threads only (QA on tiny), a 2,048-sentence SST-2 subset, "
                         "no matmul floor or numpy backend (a 16-core machine: about 8 minutes at 1,2,4,8,16)")
    ap.add_argument("--only", default=None,
                    help=f"comma-separated sections to run (default: all of {','.join(SECTIONS)}; sst2 needs --data; "
                         "--quick: step,attention,finetune,profile,sst2)")
    ap.add_argument("--threads", default=None,
                    help="comma-separated thread counts, e.g. 1,2,4,8,16: the step, attention and finetune "
                         "sections run at each (default: the machine's cores); profile at 1 and the most; sst2 at "
                         "the most")
    ap.add_argument("--configs", default=None,
                    help=f"comma-separated configs of the step and finetune sections (default: all of "
                         f"{','.join(CONFIGS)}); profile: tiny and minilm of them")
    ap.add_argument("--data", default=None, help="a directory with SST-2's train.tsv and dev.tsv (the sst2 section)")
    ap.add_argument("--sst2-train", type=int, default=None,
                    help="sentences of SST-2's train.tsv to fine-tune on, the first ones (default: all; --quick 2048)")
    ap.add_argument("--vocab", default=None,
                    help="vocab.txt for SST-2 (default: vocab.txt in --data, else a WordPiece vocabulary learnt "
                         "from the training sentences)")
    ap.add_argument("--json", default=str(ROOT / "bench" / "results.json"), help="where to write the figures")
    ap.add_argument("--rounds", type=int, default=None,
                    help=f"worker processes per contender for attention, step and finetune, taking turns "
                         f"(default {ROUNDS}, --quick 1); more rounds, steadier medians on a noisy machine")
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions in each worker (default 7, --quick 3)")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="minutes after which no further section starts (the sections run in the order step, "
                         "profile, sst2, attention, finetune, startup, coldstart, text, data)")
    args = ap.parse_args(argv)
    ROUNDS = max(1, args.rounds if args.rounds is not None else (1 if args.quick else ROUNDS))
    default = "step,attention,finetune,profile,sst2" if args.quick else ",".join(SECTIONS)
    sections = [s.strip() for s in (args.only or default).split(",") if s.strip()]
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        ap.error(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}")
    configs = [c.strip() for c in (args.configs or ",".join(CONFIGS)).split(",") if c.strip()]
    if [c for c in configs if c not in CONFIGS]:
        ap.error(f"unknown config(s) {[c for c in configs if c not in CONFIGS]}; choose from {list(CONFIGS)}")
    cores = os.cpu_count() or 1
    try:
        threads_list, left_out = parse_threads(args.threads, cores)
    except ValueError as e:
        ap.error(str(e))
    if not threads_list:
        ap.error(f"--threads {args.threads}: every count is above this machine's {cores} cores")
    reps = args.reps or (3 if args.quick else 7)
    from minibert.io.outputs import check_output, write_output

    check_output(args.json, inputs=[args.data, args.vocab], flag="--json")  # before minutes of benchmarks
    started = time.perf_counter()
    report = {"machine": {"cores": cores, "threads": threads_list, "platform": platform.platform(),
                          "python": platform.python_version(), "numpy": np.__version__},
              "quick": args.quick, "started": time.strftime("%Y-%m-%d %H:%M:%S"), "sections_s": {}}
    from minibert.backend import backend_name
    from minibert.tools.bench_profile import cpu_description

    report["machine"]["cpu"] = cpu_description()
    print(f"minibert bench: {cores} cores, threads {_threads_label(threads_list)}"
          + (f" (left out, above the cores: {_threads_label(left_out)})" if left_out else "")
          + f", numpy {np.__version__}, MINIBERT_BACKEND={backend_name()}; every figure is a median"
          f"\nCPU: {report['machine']['cpu']}", flush=True)

    def save() -> Path:
        return write_output(args.json, json.dumps(report, indent=2, default=float) + "\n")

    global checkpoint
    checkpoint = save
    if args.quick:  # each worker's timed runs stop after 4 s (at least one run): the 1-thread steps of minilm
        os.environ.setdefault("MINIBERT_BENCH_BUDGET_S", "4")  # and base take seconds each

    def run(section, fn) -> None:
        if section not in sections:
            return
        if args.time_limit is not None and time.perf_counter() - started > 60 * args.time_limit:
            print(f"\n== {section}: skipped (--time-limit {args.time_limit:g} minutes reached)", flush=True)
            report["sections_s"][section] = None
            return
        t0 = time.perf_counter()
        fn()
        report["sections_s"][section] = time.perf_counter() - t0
        print(f"[{section}: {time.perf_counter() - t0:.0f} s]", flush=True)
        save()

    if any(sec in sections for sec in ("step", "attention", "finetune", "profile", "sst2")):
        # Numba compiles each kernel on its first call and caches it on disk: on a fresh checkout
        # the first worker would time the compiling. One untimed step of each kind first.
        t0 = time.perf_counter()
        for kind, spec in (("step", "tiny"), ("finetune", "tiny"), ("attention", list(ATTENTION_SHAPES[0]))):
            run_worker(kind, spec, 1, "numba", 0, threads=threads_list[0])
        print(f"[kernels compiled or loaded from Numba's cache: {time.perf_counter() - t0:.0f} s]", flush=True)
    quick_configs = [c for c in configs if c in ("tiny", "minilm")] or configs[:1]
    run("step", lambda: bench_step(report, reps, numpy_reps=0 if args.quick else 3, configs=configs,
                                   threads_list=threads_list))
    run("profile", lambda: bench_profile(report, reps, quick_configs if args.quick else configs, threads_list,
                                         floor=not args.quick))
    if "sst2" in sections:
        if args.data is None:
            print("\n== sst2: skipped (give --data DIR with SST-2's train.tsv and dev.tsv)")
        else:
            limit = args.sst2_train if args.sst2_train is not None else (2048 if args.quick else None)
            run("sst2", lambda: bench_sst2.bench_sst2(report, args.data, threads_list, limit=limit, vocab=args.vocab,
                                                      configs=("tiny", "minilm"), run_worker=run_worker,
                                                      fmt_table=fmt_table))
    run("attention", lambda: bench_attention(report, reps, threads_list, quick=args.quick))
    run("finetune", lambda: bench_finetune(report, reps, configs=configs,  # --quick: at the most threads only
                                           threads_list=threads_list[-1:] if args.quick else threads_list,
                                           qa_configs=("tiny",) if args.quick else QA_CONFIGS))
    run("startup", lambda: bench_startup(report, 2 if args.quick else 3))
    run("coldstart", lambda: bench_coldstart.bench_coldstart(report, fmt_table))
    if "text" in sections or "data" in sections:
        t0 = time.perf_counter()
        bench_text_and_data(report, sections)
        report["sections_s"]["text+data"] = time.perf_counter() - t0
    path = save()
    total = sum(v for v in report["sections_s"].values() if v)
    print(f"\nwrote {path} ({total:.0f} s of sections: "
          + ", ".join(f"{k} {v:.0f} s" if v is not None else f"{k} skipped" for k, v in report["sections_s"].items())
          + ")")
    return 0


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    worker(sys.argv[2:])
