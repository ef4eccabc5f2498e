"""Replace, don't delete first (docs/safety.md): a fresh run where another one lies is built in a
sibling folder, trained to its first checkpoint, then swapped in by one atomic exchange
(loop/launch.py). Until the exchange the old folder's bytes stay as they were, whatever stops the
new run: a setting, the data, NaN at the first step, a crash, a kill. Nothing of the old run
survives in the new one, and an input inside the folder to be replaced is refused first."""
from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from corpora import REPO
from refusals import FT, read_json, refused

from minibert.__main__ import main
from minibert.loop import engine, rundir


def tree(d: Path) -> dict[str, str]:
    """Every file's sha256 under `d`, but the lock file (it holds the pid of the last process that
    locked the run)."""
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file() and p.name != rundir.LOCK_FILE}


def no_staging_left(d: Path) -> bool:
    return not any(p.name.startswith(f".{d.name}.") for p in d.parent.iterdir())


def ft(work: Path, *extra: str) -> list[str]:
    return [a.format(w=work) for a in FT] + list(extra)


# --- the cases ----------------------------------------------------------------------

def test_weights_infinite_in_float32_stop_the_new_run_and_keep_the_old_one(paused, work, decoy, capsys):
    """1e39 is finite in float64 and infinite in float32: the loss is NaN at the first step, which
    no check of the settings can know; the old run (its model, its checkpoints) is kept."""
    refused(work, decoy, [*FT, "--overwrite", "--set", "class_weights=0:1e39,1:1e39"], "loss is nan", capsys)
    assert no_staging_left(paused)
    assert main(["finetune", "--resume", str(paused), "--quiet"]) == 0  # the old run goes on


def test_a_tagger_written_over_a_classifier_keeps_nothing_of_it(work, capsys):
    assert main(ft(work)) == 0
    old = work / "ft"
    assert (old / "dev_report.json").is_file() and "macro" in (old / "README.md").read_text(encoding="utf-8")
    conll = work / "ner"
    conll.mkdir()
    for split in ("train", "dev"):
        (conll / f"{split}.conll").write_text("john\tB-person\nvisited\tO\nparis\tB-location\n\n" * 8,
                                              encoding="utf-8")
    capsys.readouterr()
    assert main(["finetune", "custom", "--format", "conll", "--data", str(conll), "--init", str(work / "pre"),
                 "--out", str(old), "--overwrite", "--epochs", "1", "--batch-size", "8", "--quiet"]) == 0
    done = capsys.readouterr().out.strip().splitlines()[-1]
    assert "macro-F1" not in done and "best dev" in done and "f1" in done
    assert not (old / "dev_report.json").exists()  # the classifier's per-class report is gone with it
    assert read_json(old / "run.json")["task"]["kind"] == "token"
    card = (old / "README.md").read_text(encoding="utf-8")
    assert "B-person" in card and "macro" not in card
    assert no_staging_left(old)


def test_an_init_checkpoint_inside_the_run_to_replace_is_refused(paused, work, decoy, capsys):
    ckpt = rundir.latest_checkpoint(paused)
    assert ckpt is not None and ckpt.parent.parent == paused
    refused(work, decoy, [*FT, "--overwrite", "--init", str(ckpt)], "lies inside", capsys)


@pytest.mark.parametrize("inside", ["vocab", "data"])
def test_a_vocabulary_or_data_inside_the_folder_to_replace_is_refused(inside, work, decoy, capsys):
    d = work / "sst"
    (d / "vocab.txt").write_bytes((work / "pre" / "vocab.txt").read_bytes())
    argv = ["finetune", "custom", "--format", "glue-single", "--data", "{w}/sst", "--init", "none", "--vocab",
            "{w}/sst/vocab.txt" if inside == "vocab" else "{w}/pre/vocab.txt", "--out", "{w}/sst", "--overwrite"]
    refused(work, decoy, argv, "lies inside", capsys)


def test_pretraining_refuses_a_vocabulary_inside_its_out(run_copy, capsys):
    saved = read_json(run_copy / "run.json")["settings"]
    (run_copy / "vocab.txt").write_bytes(Path(saved["vocab"]).read_bytes())
    before = tree(run_copy)
    argv = ["train", "--out", str(run_copy), "--overwrite", "--corpus", *saved["corpus"], "--heldout",
            *saved["heldout"], "--vocab", str(run_copy / "vocab.txt")]
    assert main(argv) == 1
    assert "--vocab" in capsys.readouterr().err
    assert tree(run_copy) == before


# --- the property: whatever stops the new run before its first checkpoint --------------------

class Crash(RuntimeError):
    pass


@pytest.mark.parametrize("stage", ["make", "start", "step", "checkpoint"])
def test_an_overwrite_failing_at_any_stage_before_its_first_checkpoint_keeps_the_old_bytes(stage, paused, work,
                                                                                           monkeypatch, capsys):
    """A failure raised in-process at each stage of the new run's life before the exchange: the old
    folder's bytes are the same, and no staging folder is left."""
    before = tree(paused)
    target = {"make": (rundir, "clean_interrupted_saves"), "start": (rundir, "write_run"),
              "step": (engine, "train_step"), "checkpoint": (rundir, "write_checkpoint")}[stage]

    def crash(*a, **k):
        raise Crash(f"crashed at {stage}")

    monkeypatch.setattr(*target, crash)
    with pytest.raises(Crash):
        main(ft(work, "--overwrite"))
    assert tree(paused) == before and no_staging_left(paused)


KILLER = textwrap.dedent("""
    import importlib, os, signal, sys
    module, name, after = sys.argv[1], sys.argv[2], sys.argv[3] == "after"
    m = importlib.import_module(module)
    real = getattr(m, name)
    def kill(*a, **k):
        if after:
            real(*a, **k)
        os.kill(os.getpid(), signal.SIGKILL)
    setattr(m, name, kill)
    from minibert.__main__ import main
    sys.exit(main(sys.argv[4:]))
""")


def killed(module: str, name: str, when: str, argv: list[str]) -> int:
    """Run `python -m minibert ARGV` in a process that kills itself (SIGKILL) before or after
    `module.name` is first called."""
    return subprocess.run([sys.executable, "-c", KILLER, module, name, when, *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=300).returncode


@pytest.mark.parametrize("module, name, when", [
    ("minibert.loop.launch", "begin", "before"),  # the run made, nothing written
    ("minibert.loop.rundir", "write_run", "after"),  # the new run.json written (beside the old one)
    ("minibert.loop.engine", "train_step", "before"),  # in the first step
    ("minibert.loop.checkpoints", "save_tensors_atomic", "before"),  # in the first checkpoint's save
    ("minibert.loop.rundir", "exchange", "before"),  # the first checkpoint complete, not yet swapped in
])
def test_an_overwrite_killed_before_the_exchange_keeps_the_old_bytes(module, name, when, paused, work):
    before = tree(paused)
    assert killed(module, name, when, ft(work, "--overwrite")) == -9
    assert tree(paused) == before
    assert main(ft(work, "--overwrite")) == 0  # what the kill left beside it is cleared by the next run
    assert no_staging_left(paused) and tree(paused) != before


def test_an_overwrite_killed_after_the_exchange_leaves_the_new_run_resumable(paused, work, capsys):
    before = tree(paused)
    assert killed("minibert.loop.rundir", "discard", "before", ft(work, "--overwrite")) == -9
    assert tree(paused) != before and rundir.latest_checkpoint(paused).name == "step-000001"
    assert main(["finetune", "--resume", str(paused), "--quiet"]) == 0
    assert rundir.run_state(paused)["status"] == "done"
    assert main(ft(work, "--overwrite")) == 0 and no_staging_left(paused)


@pytest.mark.parametrize("atomic", [True, False])
def test_exchange_swaps_two_folders_whole(atomic, tmp_path, monkeypatch):
    """renameat2's exchange, and the three renames where the system lacks it."""
    if not atomic:
        monkeypatch.setattr(rundir.ctypes, "CDLL", lambda *a, **k: object())  # no renameat2
    a, b = tmp_path / "a", tmp_path / "b"
    for d, text in ((a, "new"), (b, "old")):
        (d / "sub").mkdir(parents=True)
        (d / "sub" / "f.txt").write_text(text, encoding="utf-8")
    rundir.exchange(a, b)
    assert (b / "sub" / "f.txt").read_text(encoding="utf-8") == "new"
    assert (a / "sub" / "f.txt").read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
