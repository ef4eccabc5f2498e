"""What every section of `python -m minibert bench` shares: the configs and the step's shape,
timing in worker processes (`isolated_medians`, `run_worker`), the tables' formatting and the
--threads list. The sections (bench_step, bench_attention, bench_finetune, bench_startup,
bench_profile, bench_sst2, bench_text, bench_data) import this module; the command,
minibert.tools.bench, imports the sections.

A worker is a fresh `python -m minibert.tools.bench --worker KIND SPEC NAME REPS WARMUP` process:
the command's module dispatches KIND to the section that builds the contender (its WORKERS table,
imported explicitly, so every arrow the layering test sees points down), and the contender is
timed here (`time_contender`).
"""
from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys

from minibert import kernels
from minibert.tools.bench_profile import run_times
from minibert.io.paths import repo_root

ROOT = repo_root()
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
WORKER_MODULE = "minibert.tools.bench"  # the command: `--worker` runs a section's contender (see above)
ROUNDS = 3  # worker processes per contender, run in turn (numba, torch, numba, torch, ...); --rounds sets it


# ---------------------------------------------------------------------------------------------
# timing helpers

def median_time(fn, reps: int, warmup: int = 1) -> float:
    """Median wall time of fn() in seconds over `reps` runs, after `warmup` untimed runs."""
    return statistics.median(run_times(fn, reps, warmup))



def have(module: str) -> bool:
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


SAVE = None  # the command's writer of the JSON file (bench.cli sets it)


def checkpoint() -> None:
    """Write what has been measured so far (SAVE): the sections call it after every row, so that
    a run cut short keeps its numbers."""
    if SAVE is not None:
        SAVE()


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
    (at `threads` threads) and return the JSON it prints last (minibert.tools.bench's `worker`; "profile" and
    "peak" take no contender name)."""
    cmd = [sys.executable, "-m", WORKER_MODULE, "--worker", kind, json.dumps(spec), name, str(reps), str(warmup)]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=thread_environment(threads))
    if res.returncode != 0:
        raise RuntimeError(f"bench worker {kind} {spec} {name} ({threads} threads) failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])



def time_contender(fn, reps: int, warmup: int) -> dict:
    """Inside a worker process: time fn() (`reps` runs after `warmup`), with the memory its steps
    took: the process's peak resident set size minus its size before the first call (the model,
    optimizer and inputs already built; Linux ru_maxrss is in KiB) -> the JSON a worker prints."""
    # lazy: resource exists only on some platforms
    import resource

    try:
        with open("/proc/self/statm") as f:  # Linux: current resident pages
            before = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        before = None  # elsewhere the column says n/a
    budget = os.environ.get("MINIBERT_BENCH_BUDGET_S")  # --quick: the timed runs of a worker stop after this
    times = run_times(fn, reps, warmup, float(budget) if budget else None)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"times": times, "step_rss_bytes": None if before is None else max(0, peak - before)}


def n_threads() -> int:
    return kernels.threads()


def try_torch():
    """(torch, None) when torch is importable with our thread count set (MINIBERT_BENCH_THREADS,
    else Numba's count), else (None, reason)."""
    try:
        # lazy: torch is optional (not in pyproject.toml's dependencies)
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



def threads_label(threads_list) -> str:
    return ", ".join(str(t) for t in threads_list)



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

