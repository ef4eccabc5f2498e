"""One door for every write (minibert/io/outputs.py): files a command writes, whatever the path
came from (a flag, `--set`, a run.json on --resume), are never written through a symbolic link,
into another run or over an input, and a full disk leaves one error line naming the file and no
temporary file. Each case hashes the work folder and a decoy outside it before and after
(refusals.refused); tests/meta/test_one_door.py checks the source for writes that bypass the door.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from refusals import listing, refused, run_refused

from minibert.__main__ import main

ATTENTION = ["attention", "{w}/pre", "good film", "--out"]


# --- attention's PNGs ----------------------------------------------------------------------------

def test_attention_never_writes_through_a_linked_png(work, decoy, capsys):
    (work / "att").mkdir()
    os.symlink(decoy / "target.txt", work / "att" / "layer0_head0.png")
    refused(work, decoy, [*ATTENTION, "{w}/att"], "is a symbolic link", capsys)
    assert os.listdir(work / "att") == ["layer0_head0.png"]  # no other PNG drawn before the refusal


def test_attention_into_a_linked_folder_is_refused(work, decoy, capsys):
    os.symlink(decoy, work / "att")
    refused(work, decoy, [*ATTENTION, "{w}/att"], "is a symbolic link", capsys)


def test_attention_into_a_runs_linked_attention_folder_is_refused(run_copy, decoy, capsys):
    os.symlink(decoy, run_copy / "attention")
    refused(run_copy.parent, decoy, ["attention", "{w}/run", "the cat sleeps", "--out", "{w}/run/attention"],
            "is a symbolic link", capsys)


def test_attention_on_a_full_disk_names_the_file_and_leaves_no_partial_png(work, decoy, capsys, monkeypatch):
    def full(self, fname, **kw):  # half a PNG written, then the disk is full
        with open(fname, "wb") as f:
            f.write(b"\x89PNG half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", full)
    refused(work, decoy, [*ATTENTION, "{w}/att"], "att/layer0.png", capsys, writes="att")
    assert sorted(p.name for p in (work / "att").iterdir()) == []  # no 0-byte PNG, no temporary file
    monkeypatch.undo()
    capsys.readouterr()


def test_attention_still_writes_its_pngs(work, capsys):
    assert main([a.format(w=work) for a in [*ATTENTION, "{w}/att"]]) == 0
    assert sorted(p.name for p in (work / "att").iterdir()) == ["layer0.png", "layer0_head0.png", "layer0_head1.png"]
    assert (work / "att" / "layer0.png").read_bytes()[:4] == b"\x89PNG"


# --- the data cache of train, from --set or a run.json --------------------------------------------

def _train(corpus, out="{w}/t", *flags):
    return ["train", "--corpus", corpus["corpus"][0], "--heldout", corpus["heldout"][0], "--vocab", corpus["vocab"],
            "--out", out, "--steps", "2", "--set", "hidden_size=16", "--set", "num_hidden_layers=1",
            "--set", "num_attention_heads=2", "--set", "intermediate_size=32", "--set", "max_seq_length=32",
            "--set", "max_position_embeddings=32", "--set", "batch_size=8", "--set", "checkpoint_interval=2", *flags]


@pytest.mark.parametrize("cache", ["{w}/run", "{w}/run/checkpoints", "{w}/run/cache"])
def test_train_refuses_a_data_cache_in_another_run(run_copy, decoy, capsys, corpus, cache):
    w = run_copy.parent
    expected = "is a run directory" if cache == "{w}/run" else "lies inside the run directory"
    refused(w, decoy, _train(corpus, "{w}/t", "--set", f"data_cache={cache}"), expected, capsys)
    assert not (w / "t").exists()


def test_train_resume_refuses_a_data_cache_its_run_json_puts_in_another_run(run_copy, decoy, capsys, corpus):
    w = run_copy.parent
    assert main([a.format(w=w) for a in _train(corpus, "{w}/t", "--set", f"data_cache={w / 'cache'}")]) == 0
    capsys.readouterr()
    d = json.loads((w / "t" / "run.json").read_text(encoding="utf-8"))
    d["settings"]["data_cache"] = str(run_copy / "checkpoints")
    shutil.rmtree(w / "cache")  # the shards are gone: a resume would generate them again there
    (w / "t" / "run.json").write_text(json.dumps(d), encoding="utf-8")
    refused(w, decoy, ["train", "--resume", "{w}/t"], "lies inside the run directory", capsys)


def test_train_refuses_a_linked_data_cache(work, decoy, capsys, corpus):
    os.symlink(decoy, work / "cache")
    refused(work, decoy, _train(corpus, "{w}/t", "--set", "data_cache={w}/cache"), "is a symbolic link", capsys)


@pytest.mark.parametrize("argv", [["export-data", "{w}/run", "--out", "{w}/x.jsonl", "--data-cache"],
                                  ["nsp-baseline", "{w}/run", "--data-cache"]])
def test_export_data_and_nsp_baseline_refuse_the_same_caches(run_copy, decoy, capsys, argv):
    w = run_copy.parent
    (w / "other").mkdir()
    (w / "other" / "run.json").write_text("{}", encoding="utf-8")
    refused(w, decoy, [*argv, "{w}/other/cache"], "lies inside the run directory", capsys)
    os.symlink(decoy, w / "cache")
    refused(w, decoy, [*argv, "{w}/cache"], "is a symbolic link", capsys)


# --- data: the output folder holds an input -------------------------------------------------------

def test_data_never_replaces_its_input_corpus_in_the_output_folder(work, decoy, capsys, corpus):
    (work / "d").mkdir()
    shutil.copy(corpus["corpus"][0], work / "d" / "meta.json")  # a corpus file named like the output's meta
    refused(work, decoy, ["data", "--corpus", "{w}/d/meta.json", "--vocab", corpus["vocab"], "--out", "{w}/d"],
            "would replace its input", capsys)
    shutil.copy(corpus["corpus"][0], work / "d" / "shard_00000.npz")
    refused(work, decoy, ["data", "--corpus", "{w}/d/shard_00000.npz", "--vocab", corpus["vocab"], "--out", "{w}/d"],
            "would replace its input", capsys)


def test_data_beside_its_input_in_the_output_folder_still_works(work, capsys, corpus):
    (work / "d").mkdir()
    shutil.copy(corpus["corpus"][0], work / "d" / "corpus.txt")
    before = (work / "d" / "corpus.txt").read_bytes()
    assert main(["data", "--corpus", str(work / "d" / "corpus.txt"), "--vocab", corpus["vocab"], "--out",
                 str(work / "d"), "--dupe-factor", "1"]) == 0
    assert (work / "d" / "corpus.txt").read_bytes() == before and (work / "d" / "meta.json").is_file()


def test_data_never_writes_a_shard_through_a_link(work, decoy, capsys, corpus):
    (work / "d").mkdir()
    os.symlink(decoy / "target.txt", work / "d" / "meta.json")
    before = listing(decoy)
    rc = main(["data", "--corpus", corpus["corpus"][0], "--vocab", corpus["vocab"], "--out", str(work / "d"),
               "--dupe-factor", "1"])
    err = capsys.readouterr().err
    assert rc == 1 and "is a symbolic link" in err.splitlines()[-1], err
    assert listing(decoy) == before and (work / "d" / "meta.json").is_symlink()
    assert os.listdir(work / "d") == ["meta.json"]  # refused before the first shard


def test_corpus_refuses_a_link_where_it_writes_before_building(work, decoy, capsys):
    (work / "c").mkdir()
    os.symlink(decoy / "target.txt", work / "c" / "train.txt")
    refused(work, decoy, ["corpus", "--out", "{w}/c"], "is a symbolic link", capsys)
    assert os.listdir(work / "c") == ["train.txt"] and (work / "c" / "train.txt").is_symlink()


# --- other commands' plots and files --------------------------------------------------------------

def test_evaluate_confusion_png_is_never_written_through_a_link(work, decoy, capsys):
    rows = ["sentence\tlabel", "the film was good\tLABEL_1", "the plot was dull\tLABEL_0"]
    (work / "lab.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    os.symlink(decoy / "target.txt", work / "m.confusion.png")
    refused(work, decoy, ["evaluate", "{w}/cls", "--data", "{w}/lab.tsv", "--format", "glue-single", "--out",
                          "{w}/m.json"], "is a symbolic link", capsys)


def test_outputs_given_as_links_are_refused(work, decoy, capsys):
    """predict, evaluate and vocab: an --out that is a link to a file elsewhere (it was replaced by
    the atomic rename, silently) is one error line, and the link and its target stay."""
    os.symlink(decoy / "target.txt", work / "out.tsv")
    refused(work, decoy, ["predict", "{w}/cls", "--format", "glue-single", "--file", "{w}/sst/dev.tsv", "--out",
                          "{w}/out.tsv"], "is a symbolic link", capsys)
    refused(work, decoy, ["vocab", "--files", "{w}/sst/train.tsv", "--vocab-size", "40", "--out", "{w}/out.tsv"],
            "is a symbolic link", capsys)
    assert (work / "out.tsv").is_symlink()


def test_notebooks_into_a_linked_folder_or_over_a_linked_notebook_are_refused(tmp_path, decoy, capsys):
    w = tmp_path / "nbw"
    w.mkdir()
    os.symlink(decoy, w / "nb")
    refused(w, decoy, ["notebooks", "01", "--out", "{w}/nb"], "is a symbolic link", capsys)
    (w / "nb").unlink()
    (w / "nb").mkdir()
    name = next(p.stem for p in (sys.modules["minibert.tools.notebooks"].LESSONS).glob("01_*.py"))
    os.symlink(decoy / "target.txt", w / "nb" / f"{name}.ipynb")
    refused(w, decoy, ["notebooks", "01", "--out", "{w}/nb"], "is a symbolic link", capsys)


def test_a_fifo_inside_the_notebooks_folder_is_refused_not_waited_on(tmp_path, decoy, capsys):
    """A FIFO found inside an output folder is refused (as one given as --out is): nobody reads
    it, and the command hung."""
    from minibert.tools import notebooks

    w = tmp_path / "nbw"
    (w / "nb").mkdir(parents=True)
    name = next(p.stem for p in notebooks.LESSONS.glob("01_*.py"))
    os.mkfifo(w / "nb" / f"{name}.ipynb")
    result = []
    t = threading.Thread(target=lambda: result.append(main(["notebooks", "01", "--out", str(w / "nb")])), daemon=True)
    t.start()
    t.join(timeout=60)
    if t.is_alive():  # hung on the FIFO: let it go, then fail
        open(w / "nb" / f"{name}.ipynb", "rb").close()
        t.join(timeout=10)
        pytest.fail("notebooks waited for a reader of the FIFO")
    err = capsys.readouterr().err
    assert result == [1] and "is a special file" in err.splitlines()[-1], err


def test_schedule_plot_refuses_a_link(tmp_path, decoy):
    from minibert.optim import plot_schedule

    os.symlink(decoy / "target.txt", tmp_path / "lr.png")
    with pytest.raises(ValueError, match="is a symbolic link"):
        plot_schedule(tmp_path / "lr.png", peak_lr=1e-3, warmup_steps=2, total_steps=10)
    assert (decoy / "target.txt").read_text(encoding="utf-8") == "precious\n"


# --- compile-ahead's hidden worker -----------------------------------------------------------------

def test_compile_ahead_worker_refuses_a_folder_it_did_not_make(work, decoy, capsys):
    run_refused(work, ["compile-ahead", "--worker", "{w}/sst", "--plans", "step"],
                "is not a claims folder compile-ahead made", capsys)
    (work / "sst" / "minibert-claims").write_text("0" * 32, encoding="ascii")  # a marker, but not this worker's
    run_refused(work, ["compile-ahead", "--worker", "{w}/sst", "--plans", "step"],
                "is not a claims folder compile-ahead made", capsys)
    assert sorted(os.listdir(work / "sst")) == ["dev.tsv", "minibert-claims", "train.tsv"]


def test_compile_ahead_worker_runs_in_the_folder_made_for_it(monkeypatch):
    from minibert import compile_ahead

    folder, token = compile_ahead.make_claims_dir()
    with folder:
        monkeypatch.setenv(compile_ahead.CLAIMS_TOKEN_ENV, token)
        monkeypatch.setattr(compile_ahead, "compile_claimed", lambda calls, claims, **how: [])
        monkeypatch.setattr(compile_ahead, "kernel_calls", lambda plans: [])
        assert compile_ahead.worker(folder.name, ["step"]) == 0


# --- `python -m minibert test` leaves no .hypothesis in the current directory ----------------------

ROOT = Path(__file__).resolve().parents[2]


def test_hypothesis_stores_its_files_in_the_repository():
    """tests/conftest.py points Hypothesis' storage at the repository's ignored .hypothesis/,
    wherever pytest runs from (the slow test below runs `test` from another folder)."""
    from hypothesis.configuration import storage_directory

    assert os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY") == str(ROOT / ".hypothesis")
    assert storage_directory("unicode_data").path.parent == ROOT / ".hypothesis"


@pytest.mark.slow
def test_the_test_command_leaves_nothing_in_the_current_directory(tmp_path):
    res = subprocess.run([sys.executable, "-m", "minibert", "test", "-p", "no:cacheprovider", "-q", "-k",
                          "any_unicode_tokenizes", str(ROOT / "tests" / "text" / "test_tokenizer.py")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert sorted(os.listdir(tmp_path)) == []


def test_training_curves_are_not_drawn_through_a_link(paused, decoy, capsys):
    (paused / "curves.png").unlink(missing_ok=True)
    os.symlink(decoy / "target.txt", paused / "curves.png")
    before = listing(decoy)
    assert main(["finetune", "--resume", str(paused), "--quiet"]) == 0  # a plot is not worth the run
    err = capsys.readouterr().err
    assert "could not draw" in err and "is a symbolic link" in err, err
    assert listing(decoy) == before and (paused / "curves.png").is_symlink()  # neither followed nor replaced


# --- other caches ---------------------------------------------------------------------------------

def test_the_task_corpus_is_never_written_into_a_run_or_through_a_linked_cache(paused, decoy):
    from minibert.train import task_corpus

    w = paused.parent
    with pytest.raises(ValueError, match="lies inside the run directory"):
        task_corpus.write_task_corpus("sst2", str(w / "sst"), paused / "cache")
    os.symlink(decoy, w / "cache")
    with pytest.raises(ValueError, match="is a symbolic link"):
        task_corpus.write_task_corpus("sst2", str(w / "sst"), w / "cache")
    assert not (paused / "cache").exists() and sorted(os.listdir(decoy)) == ["step-000001", "target.txt"]


def test_the_sst2_bench_cache_is_never_written_through_a_link(work, decoy):
    from minibert.tools import bench_sst2

    os.symlink(decoy / "target.txt", work / "sst2.npz")
    with pytest.raises(ValueError, match="is a symbolic link"):
        bench_sst2.prepare(work / "sst", None, work / "pre" / "vocab.txt", work)
    assert (decoy / "target.txt").read_text(encoding="utf-8") == "precious\n" and (work / "sst2.npz").is_symlink()
