"""Compile the Numba kernels ahead of their first call, in several processes at once.

A process whose Numba cache is empty (a fresh clone; an edited kernels.py) compiles each kernel
on its first call, one after another: about 30 s of one core for a tiny training step
(docs/speed.md, "Cold start"). Numba compiles one function at a time per process, but its
cache is files, so N processes can compile N kernels at once and any process loads them after:

    python -m minibert compile-ahead            # what `make venv` runs after installing
    python -m minibert compile-ahead --workers 4 --plans step

A plan is a run whose kernels to compile: "step", one tiny training step as train-tiny takes it
(B 32, T 64, 10 predictions, no dropout, through `loop.step.training_step`, the function every
trainer calls, so with the argument types train-tiny's steps use); "dropout", the same step with
dropout on (the lessons, fine-tuning); "attention", the grid attention in float64 and float32
that lesson 06 and the gradient checks call. Each worker (`--worker CLAIMS`) lists the
plans' kernel calls without running them (kernels.record_calls), then compiles the ones it
claims first (kernels.compile_claimed). `train-tiny` starts workers for "step" in the background
when the cache is cold (`in_background`) and builds its corpus meanwhile; before its first step
it joins them (claims and compiles what is left itself) and waits for them.

Whether the cache is cold is read from a small marker this module writes beside Numba's cache
when every worker has finished (`MARKER`): the plans compiled, and the hash of kernels.py, the
Numba and Python versions and the CPU, the things Numba's cache depends on. A stale or missing
marker only costs the workers' start (~1.5 s of CPU each, loading from the cache); a wrong one,
a first step that compiles as before. MINIBERT_BACKEND=numpy compiles nothing, so nothing starts.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MARKER = "minibert-compile-ahead.json"
MAX_WORKERS = 4  # a tiny step has ~20 kernels, the largest ~3 s of compiling: more processes gain little
TIMEOUT_S = 600


def tiny_training_step(B: int = 32, T: int = 64, P: int = 10, dropout: float = 0.1) -> float:
    """One training step of a tiny BERT on a random batch -> its loss."""
    from minibert import optim
    from minibert.bert import BertForPreTraining
    from minibert.analysis.gradcheck import random_batch
    from minibert.loop.step import training_step
    from minibert.model import MODEL_SIZES, BertConfig

    cfg = BertConfig(**MODEL_SIZES["tiny"], vocab_size=8192, max_position_embeddings=128,  # train-tiny's model
                     hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    rng = np.random.default_rng(0)
    model = BertForPreTraining(cfg, seed=0, dtype=np.float32)
    opt = optim.AdamW(model.params, lr=1e-4)
    batch = random_batch(cfg, B, T, P, rng)
    return training_step(model, opt, batch, 0, lr=1e-4, warmup_steps=10, total_steps=100, rng=rng).loss


def grid_attention() -> None:
    """kernels.attention_forward and _backward (the grid version: q, k, v given apart) in float64
    and float32, on one thread and on all (below and above kernels.PARALLEL_MIN_WORK): what
    lesson 06 and the float64 gradient checks call, and the tiny step does not."""
    from minibert import kernels

    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.float32):
        for shape in ((2, 3, 17, 8), (4, 2, 64, 16)):  # (B, NH, T, HS): serial, parallel
            q, k, v, dout = (rng.standard_normal(shape).astype(dtype) for _ in range(4))
            attn_mask = np.ones(shape[:1] + shape[2:3], dtype=np.int64)  # (B, T)
            attn_mask[-1, shape[2] // 2:] = 0
            _, cache = kernels.attention_forward(q, k, v, attn_mask)
            kernels.attention_backward(dout, cache)


def tiny_step_without_dropout() -> None:
    tiny_training_step(dropout=0.0)  # train-tiny's recipe has none


PLANS = {"step": tiny_step_without_dropout, "dropout": tiny_training_step,  # what each plan runs (dry, to list its calls)
         "attention": grid_attention}


def kernel_calls(plans=tuple(PLANS)) -> list:
    """[(kernel name, argument types)] of the plans' runs, without compiling anything."""
    from minibert import kernels

    with kernels.record_calls() as calls:
        for name in plans:
            PLANS[name]()
    return calls


def worker(claims: str, plans) -> int:
    from minibert import kernels

    kernels.compile_claimed(kernel_calls(plans), claims)
    return 0


def default_workers() -> int:
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


def marker_path() -> Path:
    """Beside Numba's cache of kernels.py: NUMBA_CACHE_DIR if set, else minibert/__pycache__."""
    from minibert import kernels

    base = os.environ.get("NUMBA_CACHE_DIR")
    return Path(base) / MARKER if base else Path(kernels.__file__).parent / "__pycache__" / MARKER


def cache_key() -> dict:
    """What Numba's cache of the kernels depends on: their source, Numba, Python and the CPU."""
    import llvmlite.binding as ll
    import numba

    from minibert import kernels

    return {"kernels.py sha256": hashlib.sha256(Path(kernels.__file__).read_bytes()).hexdigest(),
            "numba": numba.__version__, "python": sys.version.split()[0], "cpu": ll.get_host_cpu_name()}


def warm_plans() -> list:
    """The plans whose kernels the marker says are in the cache (none if it is stale or missing)."""
    try:
        marker = json.loads(marker_path().read_text())
    except (OSError, ValueError):
        return []
    return list(marker.get("plans", [])) if isinstance(marker, dict) and marker.get("key") == cache_key() else []


def is_warm(plans) -> bool:
    return set(plans) <= set(warm_plans())


def mark_warm(plans) -> None:
    from minibert.io.atomic import atomic_write

    marker = {"key": cache_key(), "plans": sorted(set(warm_plans()) | set(plans))}
    try:
        atomic_write(marker_path(), lambda tmp: tmp.write_text(json.dumps(marker, indent=1)))
    except OSError:  # a read-only install: Numba then caches elsewhere; the workers start each time
        pass


class Workers:
    """N worker processes compiling the plans' kernels into Numba's cache. wait() joins them: this
    process claims and compiles what is left too, then waits for them -> whether every one finished
    cleanly (then the marker is written); close() stops those still running."""

    def __init__(self, n: int, plans):
        self.dir = tempfile.TemporaryDirectory(prefix="minibert-compile-")
        self.plans = list(plans)
        self.t0 = time.perf_counter()
        env = {**os.environ, "MINIBERT_BACKEND": "numba"}
        cmd = [sys.executable, "-m", "minibert", "compile-ahead", "--worker", self.dir.name, "--plans", ",".join(plans)]
        self.procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
                      for _ in range(n)]
        self.ok: bool | None = None

    def wait(self, timeout: float = TIMEOUT_S) -> bool:
        if self.ok is None:
            errors = []
            try:  # one process fewer to start: this one has minibert imported already
                from minibert import kernels

                kernels.compile_claimed(kernel_calls(self.plans), self.dir.name)
            except Exception as e:  # noqa: BLE001 - the step compiles what is missing; say why below
                errors.append(f"{type(e).__name__}: {e}")
            for p in self.procs:
                try:
                    _, err = p.communicate(timeout=max(1.0, timeout - (time.perf_counter() - self.t0)))
                except subprocess.TimeoutExpired:
                    p.kill()
                    _, err = p.communicate()
                    errors.append(f"timed out after {timeout:.0f} s")
                    continue
                if p.returncode:
                    lines = err.decode(errors="replace").strip().splitlines()
                    errors.append(lines[-1] if lines else f"exit status {p.returncode}")
            self.ok = not errors
            if self.ok:
                mark_warm(self.plans)
            else:
                print(f"warning: compiling the Numba kernels ahead failed ({errors[0]}); the first step compiles "
                      f"what is missing", file=sys.stderr, flush=True)
            self.dir.cleanup()
        return self.ok

    def seconds(self) -> float:
        return time.perf_counter() - self.t0

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.dir.cleanup()


class in_background:
    """with in_background() as ahead: ...; ahead.wait() - when the cache lacks the plans' kernels,
    start compiling them in worker processes and say so; wait() (a no-op when nothing started)
    blocks until they are done. Leaving the block stops workers still running."""

    def __init__(self, plans=("step",), workers: int | None = None):
        from minibert.backend import backend_name

        self.workers = None
        if backend_name() == "numba" and not is_warm(plans):
            n = max(1, (workers or default_workers()) - 1)  # and this process, once it waits
            print(f"compiling the Numba kernels in {n} background process{'es' if n > 1 else ''}, then here too "
                  f"(first run only; cached afterwards) ...", file=sys.stderr, flush=True)
            self.workers = Workers(n, plans)

    def __enter__(self) -> "in_background":
        return self

    def wait(self) -> None:
        if self.workers is not None and self.workers.ok is None:
            if self.workers.wait():
                print(f"Numba kernels compiled in {self.workers.seconds():.0f} s", file=sys.stderr, flush=True)

    def __exit__(self, *exc) -> None:
        if self.workers is not None:
            self.workers.close()


def cli(argv: list[str]) -> int:
    """Compile the Numba kernels ahead of their first call, in several processes at once."""
    import argparse

    from minibert.io.cli import command_parser

    p = command_parser("compile-ahead", cli.__doc__)
    p.add_argument("--workers", type=int, default=default_workers(), help="processes (default: cores, at most 4)")
    p.add_argument("--plans", default=",".join(PLANS), help=f"what to compile: {', '.join(PLANS)} (default: all)")
    p.add_argument("--worker", metavar="CLAIMS", help=argparse.SUPPRESS)  # one worker; CLAIMS: the claims directory
    args = p.parse_args(argv)
    plans = [x for x in args.plans.split(",") if x]
    if unknown := [x for x in plans if x not in PLANS]:
        p.error(f"--plans: {', '.join(unknown)} not one of {', '.join(PLANS)}")
    if args.worker:
        return worker(args.worker, plans)
    if args.workers < 1:
        p.error(f"--workers {args.workers}: give 1 or more")
    t0 = time.perf_counter()
    ok = True
    if not is_warm(plans):
        print(f"compiling the Numba kernels of {' and '.join(plans)} in {args.workers} process(es) (once, about "
              f"50 s of one core in all)", file=sys.stderr, flush=True)
        ok = Workers(args.workers - 1, plans).wait()  # and this process
    for name in plans:  # loads every kernel from the cache, and compiles any a worker missed
        PLANS[name]()
    print(f"Numba kernels compiled or loaded in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0 if ok else 1

