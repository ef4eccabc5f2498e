"""Compile the Numba kernels ahead of their first call, in several processes at once.

A process whose Numba cache is empty (a fresh clone; an edited kernel source) compiles each kernel
on its first call, one after another: about 30 s of one core for a tiny training step
(docs/speed.md, "Cold start"). Numba compiles one function at a time per process (a global
compiler lock), but its cache is files, so N processes can compile N kernels at once and any
process loads them after:

    python -m minibert compile-ahead            # what `make venv` runs after installing
    python -m minibert compile-ahead --workers 4 --plans step

A plan is a run whose kernels to compile (`PLANS`): "step", one tiny training step as train-tiny
takes it (B 32, T 64, 10 predictions, no dropout: the model's loss_grads_metrics, clipping and
AdamW, the calls of `loop.step.training_step`, so with the argument types train-tiny's steps use;
tests/kernels/test_compile_ahead.py checks the list against a real training_step); "dropout", the same
step with dropout on (fine-tuning); "attention", the grid attention in float64 and float32 that
the gradient checks and lesson 06 call; and a plan for each other lesson whose calls the step
does not make ("lesson10", "lesson11", "lesson13"). Each worker (`--worker CLAIMS`) lists the
plans' kernel calls without running them (`record_calls`: each kernel of kernels.KERNELS records
its argument types instead of compiling), then compiles the ones it claims first
(`compile_claimed`). The argument types are all Numba's cache is keyed by (not shapes or
values), so the real run later loads every kernel from the cache. `train-tiny` starts workers
for "step" in the background when the cache is cold (`in_background`) and builds its corpus
meanwhile; before its first step it joins them (claims and compiles what is left itself) and
waits for them.

Whether the cache is cold is read from a small marker this module writes beside Numba's cache
when every worker has finished (`MARKER`): the plans compiled, and the hash of the kernel sources
(runtime.source_stamp), the Numba and Python versions and the CPU, the things Numba's cache
depends on. A stale or missing
marker only costs the workers' start (~1.5 s of CPU each, loading from the cache); a wrong one,
a first step that compiles as before. MINIBERT_BACKEND=numpy compiles nothing, so nothing starts.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import llvmlite.binding as ll
import numba
import numpy as np
from numba.core import dispatcher

from minibert import kernels, optim
from minibert.kernels import runtime
from minibert.backend import backend_name
from minibert.bert import BertForPreTraining
from minibert.io import outputs
from minibert.io.atomic import atomic_write
from minibert.io.jsonfile import Field, read_json_object
from minibert.io.textio import capped_message
from minibert.io.cli import command_parser
from minibert.model import MODEL_SIZES, BertConfig

MARKER = "minibert-compile-ahead.json"
MAX_WORKERS = 4  # a tiny step has ~20 kernels, the largest ~3 s of compiling: more processes gain little
TIMEOUT_S = 600


def tiny_batch(cfg: BertConfig, B: int, T: int, P: int, rng: np.random.Generator, pad: bool = True) -> dict:
    """A random pretraining batch in the types and layout of the data's batches: int64 ids, padding
    at the end of the last sequence when `pad` (padding decides which attention path runs: the
    packed rows with it, the grid without), float weights with one unused prediction slot."""
    input_ids = rng.integers(5, cfg.vocab_size, size=(B, T))  # (B, T)
    input_mask = np.ones((B, T), dtype=np.int64)  # (B, T)
    if pad:
        input_mask[-1, T - 2:] = 0  # a padded tail
    input_ids *= input_mask
    segment_ids = np.zeros((B, T), dtype=np.int64)  # (B, T)
    segment_ids[:, T // 2:] = 1
    segment_ids *= input_mask
    positions = np.stack([np.sort(rng.choice(np.arange(1, T - 2), size=P, replace=False)) for _ in range(B)])  # (B, P)
    weights = np.ones((B, P))  # (B, P)
    weights[0, -1] = 0.0
    return dict(input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids, masked_lm_positions=positions,
                masked_lm_ids=rng.integers(0, cfg.vocab_size, size=(B, P)), masked_lm_weights=weights,
                next_sentence_labels=rng.integers(0, 2, size=B))


def tiny_training_step(B: int = 32, T: int = 64, P: int = 10, dropout: float = 0.1, pad: bool = True) -> float:
    """One training step of a tiny BERT on a random batch, the calls of loop.step.training_step
    (forward + backward, clipping by the global norm, AdamW) -> its loss."""
    cfg = BertConfig(**MODEL_SIZES["tiny"], vocab_size=8192, max_position_embeddings=128,  # train-tiny's model
                     hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    rng = np.random.default_rng(0)
    model = BertForPreTraining(cfg, seed=0, dtype=np.float32)
    opt = optim.AdamW(model.params, lr=1e-4)
    loss, grads, _ = model.loss_grads_metrics(tiny_batch(cfg, B, T, P, rng, pad), train=True, rng=rng)
    grads, _ = optim.clip_by_global_norm(grads, 1.0)
    opt.step(model.params, grads, optim.lr_at(0, 1e-4, 10, 100))
    return float(loss)


def grid_attention() -> None:
    """kernels.attention_forward and _backward (the grid version: q, k, v given apart) in float64
    and float32, on one thread and on all (below and above kernels.PARALLEL_MIN_WORK), one head of
    one token too: what lesson 06 and the float64 gradient checks call, and the tiny step does not."""
    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.float32):
        for shape in ((2, 3, 17, 8), (1, 1, 1, 4), (4, 2, 64, 16)):  # (B, NH, T, HS): serial, one head, parallel
            q, k, v, dout = (rng.standard_normal(shape).astype(dtype) for _ in range(4))
            attn_mask = np.ones(shape[:1] + shape[2:3], dtype=np.int64)  # (B, T)
            attn_mask[-1, shape[2] // 2:] = 0
            _, cache = kernels.attention_forward(q, k, v, attn_mask)
            kernels.attention_backward(dout, cache)


# The lessons' own calls, beyond the step's: a lesson runs its models at sizes and in dtypes that
# train-tiny does not (a one-thread model, float64 checks, a batch without padding), and each of
# those is a kernel call of its own types. Which lesson calls what was read off Numba's list of
# the signatures each lesson's run compiled; lesson 06's are the "attention" plan's. After `make
# venv`, a lesson's first run in a fresh clone compiles nothing (docs/speed.md, "Cold start").

SMALL = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=32)  # lessons 10 and 13's model: small enough for the one-thread kernels


def small_model(dtype, pad: bool, grads: bool = True) -> None:
    """The loss (and gradients) of lessons 10 and 13's small BERT on a batch with or without padding."""
    cfg = BertConfig(**SMALL)
    model = BertForPreTraining(cfg, seed=1, dtype=dtype)
    model.loss_grads_metrics(tiny_batch(cfg, 4, 16, 4, np.random.default_rng(0), pad), compute_grads=grads)


def lesson10() -> None:
    """lessons/10_bert_model.py: its small BERT in float32 (the one-thread kernels), the loss alone
    and with gradients, on padded batches."""
    small_model(np.float32, pad=True, grads=False)
    small_model(np.float32, pad=True)


def lesson11() -> None:
    """lessons/11_pretrain_tiny.py: AdamW and clipping on float64 arrays (its first sections), then
    training steps on batches without padding (every sequence full: the grid attention, in the
    parallel kernels)."""
    p, g = {"w": np.zeros(3)}, {"w": np.array([0.5, -3.0, 0.05])}  # (3,) as the lesson's
    optim.AdamW(p, lr=1.0, weight_decay=0.0).step(p, g)
    optim.clip_by_global_norm({"a": np.array([3.0, 0.0]), "b": np.array([[4.0]])}, 1.0)  # norm 5: clipped
    tiny_training_step(dropout=0.0, pad=False)


def lesson13() -> None:
    """lessons/13_finetuning_heads.py: its task models' gradient checks in float64 (the small model
    with and without padding: the packed rows and the grid) and their fine-tuning steps in float32
    on the grid."""
    for dtype in (np.float64, np.float32):
        small_model(dtype, pad=True)
        small_model(dtype, pad=False)


def tiny_step_without_dropout() -> None:
    tiny_training_step(dropout=0.0)  # train-tiny's recipe has none


# what each plan runs (dry, to list its calls)
PLANS = {"step": tiny_step_without_dropout, "dropout": tiny_training_step,
         "attention": grid_attention, "lesson10": lesson10, "lesson11": lesson11, "lesson13": lesson13}


class record_calls:
    """with record_calls() as calls: run_something() -> calls: [(kernel name, argument types)],
    the distinct calls of kernels.KERNELS made from Python, in order of first call. Inside, no
    kernel runs and none compiles: each kernel's dispatcher is asked to record instead of
    compiling (a `_compile_for_args` of its own, the method Numba calls when no compiled version
    matches the arguments), and its call writes 1 into its writable float arrays (its outputs), so
    what runs after it meets finite numbers (a loss of 1, a gradient norm above the clip: the
    clip's kernel is called too). Only argument *types* are recorded; values are nonsense. A
    kernel already compiled in this process for those types runs as usual and is not listed:
    it needs no compiling."""

    def __enter__(self) -> list:
        self.calls: dict = {}
        for name, dispatcher in kernels.KERNELS.items():
            dispatcher._compile_for_args = self._recorder(name, dispatcher)
        self.listed: list = []
        return self.listed

    def _recorder(self, name, dispatcher):
        def record(*args, **kwargs):
            self.calls.setdefault((name, tuple(dispatcher.typeof_pyval(a) for a in args)), None)
            return _fill_outputs
        return record

    def __exit__(self, *exc) -> None:
        for dispatcher in kernels.KERNELS.values():
            vars(dispatcher).pop("_compile_for_args", None)
        self.listed.extend(self.calls)


def _fill_outputs(*args) -> None:
    for a in args:
        if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.flags.writeable:
            a.fill(1)


def kernel_calls(plans=tuple(PLANS)) -> list:
    """[(kernel name, argument types)] of the plans' runs, without compiling anything."""
    with record_calls() as calls:
        for name in plans:
            PLANS[name]()
    return calls


def compile_claimed(calls: list, claims: str, stop: Callable[[], bool] | None = None) -> list:
    """Compile (or load from Numba's cache) each call of `calls` that this process claims first:
    a claim is a file named by the call (a hash of its kernel and types), created in the directory
    `claims` with O_EXCL, which exactly one process wins. `stop()` true: claim no more (a worker
    whose parent is gone). -> the names compiled here."""
    done = []
    for name, signature in calls:
        if stop is not None and stop():
            break
        claim = hashlib.sha256(f"{name} {signature}".encode()).hexdigest()[:16]
        try:
            os.close(os.open(os.path.join(claims, claim), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        kernels.KERNELS[name].compile(signature)
        done.append(name)
    return done


# the file Workers puts in the claims folder it makes; its text is the token a worker gets in
# CLAIMS_TOKEN_ENV: a worker writes claims only into a folder that compile-ahead made for it
CLAIMS_MARKER = "minibert-claims"
CLAIMS_TOKEN_ENV = "MINIBERT_CLAIMS_TOKEN"


def make_claims_dir() -> tuple[tempfile.TemporaryDirectory, str]:
    """A fresh claims folder with its marker -> (the folder, the token its workers are given)."""
    folder = tempfile.TemporaryDirectory(prefix="minibert-compile-")
    token = secrets.token_hex(16)
    outputs.write_output(Path(folder.name) / CLAIMS_MARKER, token, root=folder.name)
    return folder, token


def check_claims_dir(claims: str) -> None:
    """A worker's --worker folder must be one Workers made for it: a real folder (not a link)
    holding the marker whose text is the token in the environment. Any other folder is refused
    (the hidden option wrote its claim files into whatever folder it was given)."""
    folder = Path(claims)
    marker = folder / CLAIMS_MARKER
    token = os.environ.get(CLAIMS_TOKEN_ENV, "")
    try:
        ok = (not folder.is_symlink() and folder.is_dir() and not marker.is_symlink() and marker.is_file()
              and len(token) == 32 and marker.read_text(encoding="ascii", errors="replace") == token)
    except OSError:
        ok = False
    if not ok:
        raise ValueError(f"--worker {claims} is not a claims folder compile-ahead made for this worker (--worker is "
                         f"internal: run `python -m minibert compile-ahead` without it)")


def worker(claims: str, plans) -> int:
    """One worker process: compile what it claims first. A worker whose parent is gone (killed:
    the parent's `close` never ran) stops at its next claim and removes the claims folder, so a
    killed run leaves neither processes nor a /tmp/minibert-compile-* folder behind for long."""
    check_claims_dir(claims)
    parent = os.getppid()
    orphaned = lambda: os.getppid() != parent  # noqa: E731 - the parent's death re-parents us (to init)
    compile_claimed(kernel_calls(plans), claims, stop=orphaned)
    folder = Path(claims)
    if orphaned() and folder.name.startswith("minibert-compile-") and folder.parent == Path(tempfile.gettempdir()):
        shutil.rmtree(folder, ignore_errors=True)  # only Workers' own temporary folder
    return 0


def default_workers() -> int:
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


def max_workers() -> int:
    """The most --workers compile-ahead starts: the machine's cores (at least MAX_WORKERS)."""
    return max(MAX_WORKERS, os.cpu_count() or 1)


def marker_path() -> Path:
    """Beside Numba's cache of the kernels: NUMBA_CACHE_DIR if set, else minibert/kernels/__pycache__."""
    base = os.environ.get("NUMBA_CACHE_DIR")
    return Path(base) / MARKER if base else runtime.KERNEL_DIR / "__pycache__" / MARKER


def cache_key() -> dict:
    """What Numba's cache of the kernels depends on: their source, Numba, Python and the CPU."""
    return {"kernel sources sha256": runtime.source_stamp(),
            "numba": numba.__version__, "python": sys.version.split()[0], "cpu": ll.get_host_cpu_name()}


# the marker's fields (io/jsonfile.check_fields): the cache's key and the plans compiled under it
MARKER_FIELDS = {"key": Field(dict, "the cache's key (an object)", required=True),
                 "plans": Field(list, f"a list of plan names ({', '.join(PLANS)})",
                                lambda v: all(isinstance(x, str) and x in PLANS for x in v), required=True)}
_noted: set = set()  # the bad markers already named in this process (one note each)


def warm_plans() -> list:
    """The plans whose kernels the marker says are in the cache (none if it is stale or missing).
    A marker minibert did not write as it writes them (a wrong type, not JSON, a FIFO or a device
    in its place) is read as absent, with a one-line note: it costs the workers' start, never a
    traceback or a wait; the next clean compile replaces it."""
    path = marker_path()
    if not path.exists():
        return []
    try:
        marker = read_json_object(path, MARKER_FIELDS)
    except ValueError as e:  # read_json: missing, unreadable, not JSON, a FIFO or a device, a wrong field
        if str(path) not in _noted:
            _noted.add(str(path))
            print(f"note: the compile-ahead marker is not readable, so the kernels' cache is taken as cold: "
                  f"{capped_message(str(e))}", file=sys.stderr, flush=True)
        return []
    return list(marker["plans"]) if marker["key"] == cache_key() else []


def is_warm(plans) -> bool:
    return set(plans) <= set(warm_plans())


def mark_warm(plans) -> None:
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
        self.dir, token = make_claims_dir()
        self.plans = list(plans)
        self.t0 = time.perf_counter()
        env = {**os.environ, "MINIBERT_BACKEND": "numba", CLAIMS_TOKEN_ENV: token}
        cmd = [sys.executable, "-m", "minibert", "compile-ahead", "--worker", self.dir.name, "--plans", ",".join(plans)]
        self.procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
                      for _ in range(n)]
        self.ok: bool | None = None

    def wait(self, timeout: float = TIMEOUT_S) -> bool:
        if self.ok is None:
            errors = []
            try:  # one process fewer to start: this one has minibert imported already
                compile_claimed(kernel_calls(self.plans), self.dir.name)
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
    if not 1 <= args.workers <= max_workers():
        p.error(f"--workers {args.workers}: give 1 to {max_workers()} (this machine's cores; more processes than "
                f"cores compile no faster)")
    t0 = time.perf_counter()
    ok = True
    if not is_warm(plans):
        print(f"compiling the Numba kernels of {' and '.join(plans)} in {args.workers} process(es) (once, about "
              f"90 s of one core in all)", file=sys.stderr, flush=True)
        ok = Workers(args.workers - 1, plans).wait()  # and this process
    for name in plans:  # loads every kernel from the cache, and compiles any a worker missed
        PLANS[name]()
    print(f"Numba kernels compiled or loaded in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0 if ok else 1


# ---------------------------------------------------------------------------------------------
# what compiled: every Numba compilation (or load from the cache) in this process, timed

@contextmanager
def record_compiles():
    """Within the block, record each first compilation (or cache load) of a Numba function in this
    process: {"name", "signature", "compiled" (False: loaded from the cache), "cpu_s" (its own
    process CPU seconds, without the functions it called that compiled meanwhile)}. Yields the
    list that fills up."""
    records, stack = [], []
    compile_one = dispatcher.Dispatcher.compile

    def timed_compile(self, sig):
        args = tuple(getattr(sig, "args", sig))
        if args in self.overloads:
            return compile_one(self, sig)
        misses = sum(self._cache_misses.values())
        c0 = time.process_time()
        stack.append(0.0)
        try:
            return compile_one(self, sig)
        finally:
            inner = stack.pop()
            cpu = time.process_time() - c0
            if stack:
                stack[-1] += cpu
            records.append({"name": self.py_func.__qualname__, "signature": str(args),
                            "compiled": sum(self._cache_misses.values()) > misses, "cpu_s": cpu - inner})

    dispatcher.Dispatcher.compile = timed_compile
    try:
        yield records
    finally:
        dispatcher.Dispatcher.compile = compile_one
