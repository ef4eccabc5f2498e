"""Fault injection: a checkpoint save cut off at every one of its disk operations (by an
exception, by SIGKILL, by a second Ctrl-C, by a full disk) leaves a run that resumes to the same
bytes as a run that was never interrupted.

The run: 12 steps, checkpoints every 4. Each case copies a run paused at step 4, resumes it for
4 steps and interrupts the save of step 8 at operation k, then resumes to the end and compares
the final model and optimizer files byte for byte with the uninterrupted run's.
"""
from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from corpora import REPO, small_config

from minibert.io import atomic, tensorfile
from minibert.loop import engine
from minibert.loop import rundir as rd
from minibert.loop.curves import read_metrics
from minibert.train import commands
from minibert.train import config as train_config
from minibert.train import curves, evaluation, pretrain
from minibert.train import runs as train_runs
from minibert.train import trainer as trainer_mod
from minibert.train.trainer import Trainer
from minibert.__main__ import main

ROOT = REPO
FINAL_FILES = ("model.safetensors", "optimizer.safetensors")


class Crash(BaseException):
    """The process dies here: no except clause of minibert's catches it (as with SIGKILL), only
    `finally` blocks and `except BaseException` clean-ups run."""


class Faults:
    """Counts the disk operations of a save and acts at the k-th (1-based): after each file is
    written, renamed or deleted, and half-way through the bytes of each tensor file."""

    def __init__(self, monkeypatch, at: int = 0, action=None):
        self.at, self.action, self.events, self.active = at, action, [], False
        real_replace, real_remove, real_write = os.replace, rd._remove, atomic.write_bytes_synced

        def replace(src, dst, *a, **kw):
            real_replace(src, dst, *a, **kw)
            self.hit(f"replace -> {Path(dst).name}")

        def remove(path):
            real_remove(path)
            self.hit(f"remove {Path(path).name}")

        def write(path, data):
            if self.active and len(self.events) + 1 == self.at:
                with open(path, "wb") as f:
                    f.write(data[:len(data) // 2])  # half the file is on disk when it stops
            else:
                real_write(path, data)
            self.hit(f"write {_final_name(path)}")

        monkeypatch.setattr(os, "replace", replace)
        monkeypatch.setattr(rd, "_remove", remove)
        monkeypatch.setattr(tensorfile, "write_bytes_synced", write)

    def hit(self, what: str) -> None:
        if self.active:
            self.events.append(what)
            if len(self.events) == self.at:
                self.action(what)


def _final_name(path) -> str:
    """The file a temporary file of atomic_write stands for: .model.safetensors.k2j3.tmp -> model.safetensors"""
    name = Path(path).name
    return name[1:-len(".tmp")].rsplit(".", 1)[0] if name.startswith(".") and name.endswith(".tmp") else name


def _only_during_saves(monkeypatch, faults: Faults) -> None:
    real = engine.save_checkpoint

    def save(run, *a, **kw):
        faults.active = True
        try:
            return real(run, *a, **kw)
        finally:
            faults.active = False

    monkeypatch.setattr(engine, "save_checkpoint", save)


@pytest.fixture(scope="module")
def runs(corpus, tmp_path_factory):  # noqa: F811
    d = tmp_path_factory.mktemp("faults")
    full = pretrain.train(small_config(corpus, d / "full"), verbose=False)
    assert full.loop.status == "done" and full.loop.step == 12
    paused = pretrain.train(small_config(corpus, d / "paused"), verbose=False, max_steps_this_run=4)
    assert paused.loop.status == "paused" and [s for s, _ in rd.checkpoints(d / "paused")] == [4]
    return {"full": d / "full", "paused": d / "paused"}


def _copy_paused(runs, dest: Path) -> Path:
    shutil.copytree(runs["paused"], dest)
    return dest


def _resume(run: Path, **kw) -> trainer_mod.Trainer:
    return pretrain.train(train_runs.resume_config(run, {}), resume=True, verbose=False, **kw)


def _assert_resumes_to_the_uninterrupted_bytes(run: Path, runs) -> None:
    step = rd.run_state(run)["step"]
    assert step in (4, 8), step
    trainer = _resume(run)
    assert trainer.loop.status == "done" and trainer.loop.step == 12
    assert [s for s, _ in rd.checkpoints(run)] == [12]
    for f in FINAL_FILES:
        assert (run / "checkpoints/step-000012" / f).read_bytes() == \
            (runs["full"] / "checkpoints/step-000012" / f).read_bytes(), f
    assert (run / "model.safetensors").read_bytes() == (runs["full"] / "model.safetensors").read_bytes()
    assert not [p for p in run.rglob(".*") if p.name != rd.LOCK_FILE], "leftovers of the interrupted save were not cleaned up"


def _count_save_events(runs, tmp_path, monkeypatch) -> list[str]:
    faults = Faults(monkeypatch, at=0)
    _only_during_saves(monkeypatch, faults)
    _resume(_copy_paused(runs, tmp_path / "count"), max_steps_this_run=4)
    monkeypatch.undo()
    return faults.events


def test_a_save_is_the_disk_operations_we_interrupt(runs, tmp_path, monkeypatch):
    events = _count_save_events(runs, tmp_path, monkeypatch)
    # six files into the hidden directory (two tensor files written, then each renamed into
    # place), the directory renamed, four files copied to the top level, the old checkpoint gone
    assert events[:2] == ["write model.safetensors", "replace -> model.safetensors"]
    assert "replace -> step-000008" in events and events[-1] == "remove step-000004"
    assert len(events) == 14, events


def test_a_save_cut_off_after_any_operation_resumes_to_the_same_bytes(runs, tmp_path, monkeypatch):
    events = _count_save_events(runs, tmp_path, monkeypatch)
    renamed = events.index("replace -> step-000008") + 1  # from this operation on, step 8 is complete
    for k in range(1, len(events) + 1):
        def crash(what):
            raise Crash(what)

        with monkeypatch.context() as m:
            faults = Faults(m, at=k, action=crash)
            _only_during_saves(m, faults)
            run = _copy_paused(runs, tmp_path / f"cut{k}")
            with pytest.raises(Crash):
                _resume(run, max_steps_this_run=4)
        assert faults.events == events[:k]
        assert rd.run_state(run)["step"] == (8 if k >= renamed else 4), (k, events)
        _assert_resumes_to_the_uninterrupted_bytes(run, runs)


def test_a_final_save_cut_off_anywhere_leaves_one_record_per_step(runs, tmp_path, monkeypatch):
    """The final save (step 12, after the final evaluation is logged) cut after each of its disk
    operations, then resumed to the end: metrics.jsonl holds the records of the uninterrupted run,
    each (type, step) once (issue 56 named a duplicate eval record after a kill at the last save;
    docs/safety.md, "Reading run files and models")."""
    at8 = _copy_paused(runs, tmp_path / "at8")
    _resume(at8, max_steps_this_run=4)
    faults = Faults(monkeypatch, at=0)
    _only_during_saves(monkeypatch, faults)
    shutil.copytree(at8, tmp_path / "count")
    _resume(tmp_path / "count")
    monkeypatch.undo()
    events = faults.events
    expected = [(r["type"], r["step"]) for r in read_metrics(runs["full"] / "metrics.jsonl")]
    assert ("eval", 12) in expected and len(set(expected)) == len(expected)
    for k in range(1, len(events) + 1):
        def crash(what):
            raise Crash(what)

        run = tmp_path / f"cut{k}"
        shutil.copytree(at8, run)
        with monkeypatch.context() as m:
            _only_during_saves(m, Faults(m, at=k, action=crash))
            with pytest.raises(Crash):
                _resume(run)
        assert _resume(run).loop.status == "done"
        assert [(r["type"], r["step"]) for r in read_metrics(run / "metrics.jsonl")] == expected, (k, events[k - 1])


KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    sys.path[:0] = [{tests!r}, {here!r}]  # corpora.py; this file
    from pathlib import Path
    import pytest
    from minibert.train import pretrain
    from minibert.train import runs as train_runs
    import test_faults as F

    mp = pytest.MonkeyPatch()
    faults = F.Faults(mp, at={k}, action=lambda what: os.kill(os.getpid(), signal.SIGKILL))
    F._only_during_saves(mp, faults)
    pretrain.train(train_runs.resume_config(Path({run!r}), {{}}), resume=True, verbose=False, max_steps_this_run=4)
    print("the save finished; no kill happened")
""")


@pytest.mark.parametrize("where", ["write model.safetensors", "replace -> trainer_state.json",
                                   "replace -> step-000008", "replace -> model.safetensors#2",
                                   "remove step-000004"])
def test_sigkill_during_a_save_loses_at_most_the_steps_since_the_last_checkpoint(runs, tmp_path, monkeypatch,
                                                                                where):
    events = _count_save_events(runs, tmp_path, monkeypatch)
    name, _, nth = where.partition("#")
    k = [i + 1 for i, e in enumerate(events) if e == name][int(nth or 1) - 1]
    run = _copy_paused(runs, tmp_path / "killed")
    script = KILL_SCRIPT.format(tests=str(ROOT / "tests"), here=str(Path(__file__).resolve().parent), k=k, run=str(run))
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout, proc.stderr)
    if where == "write model.safetensors":  # killed mid-file: the hidden directory is left behind
        assert [p.name for p in (run / "checkpoints").iterdir() if p.name.startswith(".step-000008.tmp-")]
    _assert_resumes_to_the_uninterrupted_bytes(run, runs)


def test_double_ctrl_c_during_a_save_aborts_with_one_message_and_keeps_the_last_checkpoint(
        runs, tmp_path, monkeypatch, capsys):
    run = _copy_paused(runs, tmp_path / "ctrl-c")
    steps = engine.train_step

    def step_then_ctrl_c(run, state):
        out = steps(run, state)
        if state.step == 6:
            os.kill(os.getpid(), signal.SIGINT)  # the first: finish the step, then save
        return out

    monkeypatch.setattr(engine, "train_step", step_then_ctrl_c)
    faults = Faults(monkeypatch, at=3, action=lambda what: os.kill(os.getpid(), signal.SIGINT))  # the second
    _only_during_saves(monkeypatch, faults)
    assert commands.cli(["--resume", str(run)]) == 130
    err = capsys.readouterr().err
    assert f"aborted at step 6 by a second Ctrl-C without saving; the last complete checkpoint is step 4 in {run}" in err
    assert "Traceback" not in err and "interrupted before training started" not in err
    monkeypatch.undo()
    _assert_resumes_to_the_uninterrupted_bytes(run, runs)


def test_ctrl_c_during_the_final_save_still_saves(runs, tmp_path, monkeypatch):
    run = _copy_paused(runs, tmp_path / "final")
    faults = Faults(monkeypatch, at=2, action=lambda what: os.kill(os.getpid(), signal.SIGINT))
    _only_during_saves(monkeypatch, faults)
    trainer = _resume(run, max_steps_this_run=4)
    assert trainer.loop.status == "paused" and rd.run_state(run)["step"] == 8  # the save was finished
    monkeypatch.undo()
    _assert_resumes_to_the_uninterrupted_bytes(run, runs)


def test_full_disk_during_a_save_keeps_the_previous_checkpoint_and_prints_one_line(
        runs, tmp_path, monkeypatch, capsys):
    run = _copy_paused(runs, tmp_path / "full-disk")

    def no_space(path, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    real = engine.save_checkpoint

    def save(run, *a, **kw):
        with monkeypatch.context() as m:
            m.setattr(tensorfile, "write_bytes_synced", no_space)
            return real(run, *a, **kw)

    monkeypatch.setattr(engine, "save_checkpoint", save)
    assert commands.cli(["--resume", str(run), "--max-steps-this-run", "4"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: [Errno {errno.ENOSPC}] could not save the checkpoint of step 8: cannot write "
                   f"{run}/checkpoints/.step-000008.tmp-{os.getpid()}/model.safetensors: No space left on device "
                   f"(the disk is full); the previous checkpoint {run}/checkpoints/step-000004 is intact"]
    monkeypatch.undo()
    _assert_resumes_to_the_uninterrupted_bytes(run, runs)


@pytest.fixture
def tmpfs(tmp_path):
    """A 1 MB tmpfs mounted at tmp_path/tmpfs (Linux, as root), unmounted afterwards."""
    if sys.platform != "linux" or os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs Linux and root")
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("mount -t tmpfs is not permitted here")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_real_full_disk_keeps_the_previous_checkpoint(runs, tmpfs, capsys):
    run = _copy_paused(runs, tmpfs / "run")
    ballast = tmpfs / "ballast"
    with open(ballast, "wb", buffering=0) as f:  # fill the disk to the last byte
        for size in (65536, 4096, 512, 64, 8, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError as e:
                assert e.errno == errno.ENOSPC
    assert commands.cli(["--resume", str(run), "--max-steps-this-run", "4"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: [Errno 28] ") and str(run) in err[0], err
    assert "No space left on device" in err[0]
    assert rd.run_state(run)["step"] == 4
    ballast.unlink()
    _assert_resumes_to_the_uninterrupted_bytes(run, runs)


# --- the run directory around the checkpoints ------------------------------------------------

def test_a_metrics_line_cut_short_by_a_crash_does_not_block_resume(runs, tmp_path):
    run = _copy_paused(runs, tmp_path / "metrics")
    with open(run / "metrics.jsonl", "a", encoding="utf-8") as f:
        f.write('{"type": "train", "step": 5, "lo')  # the process died mid-write
    _assert_resumes_to_the_uninterrupted_bytes(run, runs)
    steps = [r["step"] for r in read_metrics(run / "metrics.jsonl") if r["type"] == "train"]
    assert steps == sorted(set(steps)) and steps[-1] == 12


def test_a_bad_metrics_line_in_the_middle_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2, oops\n{"step": 3}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=f"{path} line 2 is not a JSON record"):
        rd.read_jsonl(path)


def test_train_tiny_replaces_its_finished_run_but_keeps_an_unfinished_one(runs, corpus, tmp_path):  # noqa: F811
    unfinished = _copy_paused(runs, tmp_path / "tiny")
    json_path = unfinished / "run.json"
    json_path.write_text(json.dumps({**json.loads(json_path.read_text()), "command": "train-tiny"}))
    cfg = small_config(corpus, unfinished)
    with pytest.raises(ValueError, match="already holds an unfinished train-tiny run \\(stopped at step 4 of 12\\).*"
                                         f"Continue it with `python -m minibert train-tiny --resume {unfinished}`"):
        pretrain.pretraining_job(cfg, created_by="train-tiny").guard()
    pretrain.pretraining_job(cfg, overwrite=True, created_by="train-tiny").guard()  # --overwrite may
    pretrain.train(train_runs.resume_config(unfinished, {}), resume=True, verbose=False)  # now finished
    pretrain.pretraining_job(cfg, created_by="train-tiny").guard()  # a finished train-tiny run is replaced


def test_out_pointing_at_a_file_is_refused_before_anything_runs(corpus, tmp_path):  # noqa: F811
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="output directory .*afile is a file"):
        pretrain.train(small_config(corpus, tmp_path / "afile"), verbose=False)


@pytest.mark.parametrize("setting,message", [
    ("clip_norm=-1", "clip_norm=-1.0 must be > 0"), ("lr=inf", "lr=.inf. is not a valid finite number"),
    ("masked_lm_prob=2", "masked_lm_prob=2.0 must be in \\(0, 1\\]"),
    ("max_predictions_per_seq=1000", "max_predictions_per_seq=1000 must be at most max_seq_length - 3 = 29")])
def test_bad_settings_fail_before_anything_is_written(runs, corpus, tmp_path, capsys, setting, message):  # noqa: F811
    old = _copy_paused(runs, tmp_path / "old")
    before = {p.relative_to(old): p.read_bytes() for p in old.rglob("*") if p.is_file()}
    argv = ["--out", str(old), "--overwrite", "--corpus", *corpus["corpus"], "--vocab", corpus["vocab"],
            "--set", "max_seq_length=32", "--set", setting]
    assert main(["train", *argv]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert re.search(message, err), err
    assert {p.relative_to(old): p.read_bytes() for p in old.rglob("*") if p.is_file()} == before


def test_perplexity_of_a_diverged_model_is_printed_short():
    assert evaluation.fmt_perplexity(213.71) == "213.7"
    assert evaluation.fmt_perplexity(float(np.exp(700.0))) == "1.01e+304"


def test_the_summary_names_the_step_of_its_evaluation():
    from types import SimpleNamespace

    r = evaluation.EvalResult(0.18, 5.4, 221.4, 0.72, 0.55, 1718, 0.57, 0.83)
    trainer = SimpleNamespace(last_eval=r, settings=SimpleNamespace(verbose=True), evaluator=None, dir=Path("runs/x"),
                              cfg=train_config.TrainConfig(), family=SimpleNamespace(published_dirs=""))
    out = "\n".join(Trainer.finish(trainer, SimpleNamespace(last_eval_step=100, step=115, elapsed=30.0)))
    assert "at step 100 (the last evaluation; training stopped at step 115)" in out and "after 115" not in out
    out = "\n".join(Trainer.finish(trainer, SimpleNamespace(last_eval_step=115, step=115, elapsed=30.0)))
    assert "held-out (1718 sequences) after 115 steps" in out


def test_cleaning_up_removes_only_what_a_cut_off_save_leaves(tmp_path):
    (tmp_path / "checkpoints" / ".step-000008.tmp-123").mkdir(parents=True)
    (tmp_path / "checkpoints" / "step-000004").mkdir()
    for name in (".model.safetensors.k2j3x9.tmp", ".curves.png.a8b2c1.tmp", "notes.txt", ".hidden", "model.safetensors"):
        (tmp_path / name).write_text("x")
    removed = rd.clean_interrupted_saves(tmp_path)
    assert sorted(p.name for p in removed) == [".curves.png.a8b2c1.tmp", ".model.safetensors.k2j3x9.tmp",
                                               ".step-000008.tmp-123"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".hidden", "checkpoints", "model.safetensors", "notes.txt"]
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step-000004"]


def test_saving_the_same_step_again_never_deletes_the_checkpoint_first(runs, tmp_path, monkeypatch):
    """A finished run resumed (or Ctrl-C right after a resume) saves its step again: under a new
    name, step-000012.1, renamed into place like any other; only then does step-000012 go."""
    run = tmp_path / "again"
    shutil.copytree(runs["full"], run)

    def crash(what):
        raise Crash(what)

    with monkeypatch.context() as m:  # cut off right after the rename: both are complete
        faults = Faults(m, at=9, action=crash)  # six files (two written, then renamed), the rename
        _only_during_saves(m, faults)
        with pytest.raises(Crash):
            _resume(run)
    assert faults.events[-1] == "replace -> step-000012.1"
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-000012", "step-000012.1"]
    assert rd.latest_checkpoint(run).name == "step-000012.1"
    trainer = _resume(run)
    assert trainer.loop.status == "done" and trainer.loop.step == 12
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["step-000012.2"]
    for f in FINAL_FILES:
        assert (run / "checkpoints/step-000012.2" / f).read_bytes() == \
            (runs["full"] / "checkpoints/step-000012" / f).read_bytes()
