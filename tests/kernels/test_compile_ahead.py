"""Compiling the kernels ahead in several processes: the dry run that lists a step's kernel calls,
the claims that share them out, the marker that says the cache is warm, and (slow) the whole
thing on an empty cache."""
import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numba
import numpy as np
import pytest
from numba.core import dispatcher

from minibert import kernels
from minibert.kernels import compile_ahead, runtime


def test_record_calls_lists_types_runs_nothing_and_restores_the_kernels():
    base = np.full((3, 8), 7.0, dtype=np.float32)  # (rows, cols)
    x = base[:, ::2]  # a strided view: a layout ('A') no other test compiles the kernel for
    x64 = base.astype(np.float64)[:, ::2]
    ids = np.arange(3)
    assert (numba.typeof(x),) not in kernels.embedding._zero_kernel.signatures  # so its calls are recorded
    with compile_ahead.record_calls() as calls:
        kernels.embedding._zero_kernel(x)
        kernels.embedding._zero_kernel(x)  # the same types: listed once
        kernels.embedding._zero_kernel(x64)
        kernels.elementwise._column_sum_kernel(x, np.zeros(4, dtype=np.float32)[::1])
        kernels.embedding._position_sum_kernel(np.ones((2, 3, 8), np.float32)[:, :, ::2], ids)  # nonsense values are fine
    assert "_compile_for_args" not in vars(kernels.embedding._zero_kernel)  # the dispatcher is itself again
    assert (numba.typeof(x),) not in kernels.embedding._zero_kernel.signatures  # nothing compiled
    assert np.all(x == 1.0)  # not zeroed: the recorder writes 1 into writable float arrays
    assert [name for name, _ in calls] == ["_zero_kernel", "_zero_kernel", "_column_sum_kernel",
                                          "_position_sum_kernel"]
    assert calls[0][1] == (numba.typeof(x),) and calls[1][1] == (numba.typeof(x64),)
    assert calls[3][1][1] == numba.typeof(ids)


FAMILIES = [p.stem for p in runtime.kernel_sources() if p.stem != "__init__"]


def test_every_kernel_is_in_the_registry():
    """kernel_jit lists every kernel of every family module in kernels.KERNELS, under its
    function's name (compile-ahead finds them there)."""
    found = {}
    for family in FAMILIES:
        module = importlib.import_module(f"minibert.kernels.{family}")
        found |= {obj.py_func.__name__: obj for obj in vars(module).values()
                  if isinstance(obj, numba.core.registry.CPUDispatcher)}
    assert len(found) > 40 and all(kernels.KERNELS[name] is kernel for name, kernel in found.items())
    assert {"attention", "dropout", "elementwise", "embedding", "normalisation", "cross_entropy", "optimizer"} <= \
        {kernel.py_func.__module__.rsplit(".", 1)[1] for kernel in found.values()}


def test_two_kernels_of_one_name_are_refused():
    """The registry is keyed by name (a worker compiles a call by its kernel's name): a second
    kernel of a name already there would take the first one's calls."""
    def _zero_kernel(x):  # the name of embedding's
        x[:] = 0

    with pytest.raises(ValueError, match="_zero_kernel"):
        runtime.kernel_jit(_zero_kernel)
    assert kernels.KERNELS["_zero_kernel"].py_func.__module__ == "minibert.kernels.embedding"


def test_every_kernel_cache_is_stamped_with_all_the_kernel_sources():
    """A kernel compiles in helpers from other files of the folder (vector_math's rows, dropout's
    bits), so its cached code is fresh only while every kernel source is unchanged: each kernel's
    cache carries the stamp of them all, not only its own file's hash as Numba's default does."""
    stamp = runtime.source_stamp()
    for kernel in kernels.KERNELS.values():
        locator = kernel._cache._impl._locator
        assert isinstance(locator, runtime.STAMPED_LOCATORS), (kernel.py_func.__qualname__, type(locator))
        assert locator.get_source_stamp()[1] == stamp


def test_the_source_stamp_changes_with_any_kernel_source(tmp_path, monkeypatch):
    sources = {p.name for p in runtime.kernel_sources()}
    assert {"attention.py", "vector_math.py", "runtime.py", "__init__.py"} <= sources
    assert "compile_ahead.py" not in sources  # no kernel in it: editing it keeps the cache
    for name in ("attention.py", "vector_math.py"):
        (tmp_path / name).write_text("x = 1\n")
    monkeypatch.setattr(runtime, "kernel_sources", lambda: sorted(tmp_path.glob("*.py")))
    before = runtime.source_stamp()
    time.sleep(0.01)
    (tmp_path / "vector_math.py").write_text("x = 2\n")  # a helper's file, not the kernel's own
    assert runtime.source_stamp() != before
    (tmp_path / "vector_math.py").write_text("x = 1\n")
    os.utime(tmp_path / "vector_math.py", ns=(1, 1))
    assert runtime.source_stamp() == before  # the bytes decide, not the file's time


# In a fresh process: a real tiny step through loop.step.training_step, the function every trainer
# calls (its kernels load from the cache or compile), then each kernel it called from Python with
# the types it was called with (Numba's own list). The helpers that kernels call (a LayerNorm row,
# an attention head) compile inside their callers: left out.
REAL_STEP = """
import numpy as np
from minibert import kernels, optim
from minibert.bert import BertForPreTraining
from minibert.kernels.compile_ahead import tiny_batch
from minibert.loop.step import training_step
from minibert.model import MODEL_SIZES, BertConfig
cfg = BertConfig(**MODEL_SIZES["tiny"], vocab_size=8192, max_position_embeddings=128,
                 hidden_dropout_prob=DROPOUT, attention_probs_dropout_prob=DROPOUT)
rng = np.random.default_rng(0)
model = BertForPreTraining(cfg, seed=0, dtype=np.float32)
opt = optim.AdamW(model.params, lr=1e-4)
batch = tiny_batch(cfg, 32, 64, 10, rng)
result = training_step(model, opt, batch, 0, lr=1e-4, warmup_steps=10, total_steps=100, rng=rng)
print("loss", result.loss)
ds = kernels.KERNELS
helpers = {n for d in ds.values() for n in d.py_func.__code__.co_names if n in ds}
for name, d in ds.items():
    for sig in (d.signatures if name not in helpers else []):
        print(name, tuple(sig))
"""


@pytest.mark.parametrize("plan, dropout", [("step", 0.0), ("dropout", 0.1)])
def test_a_dry_step_lists_every_kernel_call_the_real_step_makes(plan, dropout):
    # the dry run in a fresh process too, as a worker makes it: in this one, kernels that earlier
    # tests compiled run as usual instead of being listed
    listed = subprocess.run([sys.executable, "-c", "from minibert.kernels import compile_ahead\n"
                             f"for name, sig in compile_ahead.kernel_calls([{plan!r}]): print(name, sig)"],
                            capture_output=True, text=True, timeout=600, env={**os.environ, "MINIBERT_BACKEND": "numba"})
    assert listed.returncode == 0, listed.stderr
    dry = set(listed.stdout.strip().splitlines())
    out = subprocess.run([sys.executable, "-c", f"DROPOUT = {dropout}\n" + REAL_STEP], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "MINIBERT_BACKEND": "numba"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("loss ") and np.isfinite(float(lines[0].split()[1]))
    real = set(lines[1:])
    assert len(real) >= 15  # embedding, LayerNorm, attention, GELU, loss, clip, AdamW, ...
    assert any(line.startswith("_dropout_kernel ") for line in real) == (dropout > 0)
    assert not real - dry, f"the dry run does not list {sorted(real - dry)}"


def test_compile_claimed_shares_the_calls_out_between_processes(tmp_path):
    calls = [("_zero_kernel", (numba.typeof(np.zeros((2, 2), np.float32)),)),
             ("_zero_kernel", (numba.typeof(np.zeros((2, 2), np.float64)),))]
    assert compile_ahead.compile_claimed(calls, str(tmp_path)) == ["_zero_kernel", "_zero_kernel"]
    assert len(os.listdir(tmp_path)) == 2  # one claim per call
    assert compile_ahead.compile_claimed(calls, str(tmp_path)) == []  # claimed already: another process's
    assert len(kernels.embedding._zero_kernel.signatures) >= 2


def test_the_marker_names_the_cache_and_the_plans(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert compile_ahead.marker_path() == tmp_path / compile_ahead.MARKER
    assert not compile_ahead.is_warm(["step"])
    compile_ahead.mark_warm(["step"])
    assert compile_ahead.is_warm(["step"]) and not compile_ahead.is_warm(["step", "attention"])
    compile_ahead.mark_warm(["attention"])  # adds to what is there
    assert compile_ahead.is_warm(["step", "attention"])
    marker = json.loads((tmp_path / compile_ahead.MARKER).read_text())
    marker["key"]["kernel sources sha256"] = "0" * 64  # a kernel source changed since: cold again
    (tmp_path / compile_ahead.MARKER).write_text(json.dumps(marker))
    assert compile_ahead.warm_plans() == [] and not compile_ahead.is_warm(["step"])
    (tmp_path / compile_ahead.MARKER).write_text("{not json")
    assert compile_ahead.warm_plans() == []


def test_nothing_starts_when_the_cache_is_warm_or_the_backend_is_numpy(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr("minibert.backend.chosen", "numpy")
    with compile_ahead.in_background() as ahead:
        assert ahead.workers is None
        ahead.wait()
    monkeypatch.setattr("minibert.backend.chosen", "numba")
    compile_ahead.mark_warm(["step"])
    with compile_ahead.in_background(["step"]) as ahead:
        assert ahead.workers is None
    assert capsys.readouterr().err == ""


def test_a_failing_worker_is_a_warning_and_no_marker(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    workers = compile_ahead.Workers(1, ["no-such-plan"])  # the worker's parser refuses it
    assert workers.wait() is False
    assert "compiling the Numba kernels ahead failed" in capsys.readouterr().err
    assert not (tmp_path / compile_ahead.MARKER).exists()


@pytest.mark.slow
def test_after_compiling_ahead_on_an_empty_cache_a_tiny_step_compiles_nothing(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "MINIBERT_BACKEND": "numba"}
    ahead = subprocess.run([sys.executable, "-m", "minibert", "compile-ahead", "--workers", "2", "--plans", "step"],
                           env=env, capture_output=True, text=True, timeout=600)
    assert ahead.returncode == 0, ahead.stderr
    assert json.loads((tmp_path / compile_ahead.MARKER).read_text())["plans"] == ["step"]
    step = subprocess.run([sys.executable, "-c", "from minibert.kernels.compile_ahead import tiny_training_step as s; "
                           "print(s(dropout=0.0))"], env=env, capture_output=True, text=True, timeout=600)
    assert step.returncode == 0, step.stderr
    assert "compiling Numba kernel" not in step.stderr  # every kernel loaded from the cache
    assert np.isfinite(float(step.stdout.strip().splitlines()[-1]))


def _fresh_function(module):
    """A new Python function (so nothing of it is compiled or cached) that claims `module`."""
    def add_one(x):
        return x + 1

    add_one.__module__ = module
    return numba.njit(add_one)  # no cache=True: it compiles in this process


def test_record_compiles_records_each_new_signature_once_and_restores_numba():
    compile_before = dispatcher.Dispatcher.compile
    f = _fresh_function("tests.tools")
    with compile_ahead.record_compiles() as records:
        assert f(1) == 2
        assert f(2.5) == pytest.approx(3.5)
        assert f(7) == 8  # int64 again: no new compilation
    assert [r["name"] for r in records] == ["_fresh_function.<locals>.add_one"] * 2
    assert all(r["compiled"] and r["cpu_s"] >= 0 for r in records)
    assert "int64" in records[0]["signature"] and "float64" in records[1]["signature"]
    assert dispatcher.Dispatcher.compile is compile_before


# --- what a killed run and an unbounded --workers left (issue 56) --------------------------------

def _claims_folder(folder, monkeypatch):
    """`folder` made a claims folder as Workers makes one: its marker, and the token in the
    worker's environment (a worker refuses any other folder)."""
    token = "0123456789abcdef" * 2
    (Path(folder) / compile_ahead.CLAIMS_MARKER).write_text(token, encoding="ascii")
    monkeypatch.setenv(compile_ahead.CLAIMS_TOKEN_ENV, token)
    return str(folder)


def test_a_worker_whose_parent_is_gone_stops_claiming_and_removes_the_claims_folder(monkeypatch):
    """A run killed with SIGKILL never runs Workers.close: its workers went on compiling and left
    /tmp/minibert-compile-*. Now a worker that finds itself re-parented claims nothing more and
    removes the folder (Workers' own temporary one only)."""
    import tempfile

    calls = [("_zero_kernel", ("a",)), ("_zero_kernel", ("b",))]
    monkeypatch.setattr(compile_ahead, "kernel_calls", lambda plans: calls)
    compiled = []
    monkeypatch.setattr(compile_ahead.kernels, "KERNELS", {"_zero_kernel": type("K", (), {
        "compile": staticmethod(lambda sig: compiled.append(sig))})})
    parents = iter([100, 100, 1, 1, 1, 1])  # the parent at the start, then init after it died
    monkeypatch.setattr(compile_ahead.os, "getppid", lambda: next(parents))
    claims = _claims_folder(tempfile.mkdtemp(prefix="minibert-compile-"), monkeypatch)
    assert compile_ahead.worker(claims, ["step"]) == 0
    assert compiled == [("a",)]  # the first claim, made while the parent lived; none after
    assert not os.path.exists(claims)


def test_a_worker_with_its_parent_removes_nothing_and_a_folder_of_another_name_is_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(compile_ahead, "kernel_calls", lambda plans: [])
    monkeypatch.setattr(compile_ahead.os, "getppid", lambda: 100)
    _claims_folder(tmp_path, monkeypatch)
    assert compile_ahead.worker(str(tmp_path), ["step"]) == 0 and tmp_path.is_dir()
    parents = iter([100, 1])
    monkeypatch.setattr(compile_ahead.os, "getppid", lambda: next(parents))
    assert compile_ahead.worker(str(tmp_path), ["step"]) == 0 and tmp_path.is_dir()  # not Workers' folder


@pytest.mark.parametrize("workers", ["0", "-3", "100000"])
def test_workers_out_of_range_is_refused_before_anything_starts(workers, monkeypatch, capsys):
    """--workers 100000 started that many processes."""
    monkeypatch.setattr(compile_ahead, "Workers", lambda *a: pytest.fail("workers started"))
    with pytest.raises(SystemExit) as e:
        compile_ahead.cli(["--workers", workers])
    assert e.value.code == 2
    assert f"--workers {workers}: give 1 to {compile_ahead.max_workers()}" in capsys.readouterr().err


def _cold_compile_ahead(tmp_path):
    """compile-ahead on an empty cache, in a session of its own with SIGINT as a terminal leaves
    it (not ignored), its output in a file -> (the process, that file)."""
    import signal

    log = tmp_path / "out.txt"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "MINIBERT_BACKEND": "numba"}
    with log.open("wb") as out:  # the child holds its own copy of the file
        proc = subprocess.Popen([sys.executable, "-m", "minibert", "compile-ahead", "--workers", "2", "--plans",
                                 "attention"], env=env, start_new_session=True, stdout=out, stderr=subprocess.STDOUT,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    for _ in range(600):  # until the workers have started
        if "compiling the Numba kernels" in log.read_text(errors="replace"):
            break
        time.sleep(0.1)
    return proc, log


def _workers_of(proc) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=,args=", "-s", str(proc.pid)], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines() if "--worker" in line]


@pytest.mark.slow
def test_ctrl_c_stops_compile_ahead_and_its_workers(tmp_path):
    """Ctrl-C in a terminal (SIGINT to the foreground group) during a cold compile: exit 130."""
    import signal

    proc, log = _cold_compile_ahead(tmp_path)
    time.sleep(3)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=120) == 130, log.read_text()
    time.sleep(1)
    assert _workers_of(proc) == []


@pytest.mark.slow
def test_a_killed_compile_ahead_leaves_no_workers_and_no_claims_folder(tmp_path):
    """SIGKILL to the parent alone: its workers notice at their next claim and leave, removing
    the claims folder (they went on compiling and left /tmp/minibert-compile-*)."""
    import signal

    proc, log = _cold_compile_ahead(tmp_path)
    workers = _workers_of(proc)
    claims = {line.split("--worker ")[1].split()[0] for line in subprocess.run(
        ["ps", "-o", "args=", "-s", str(proc.pid)], capture_output=True, text=True).stdout.splitlines()
        if "--worker " in line}
    assert workers and len(claims) == 1
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    for _ in range(1200):
        if not _workers_of(proc) and not os.path.exists(next(iter(claims))):
            break
        time.sleep(0.1)
    assert _workers_of(proc) == [] and not os.path.exists(next(iter(claims)))
