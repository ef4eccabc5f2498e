"""Where a command may write: never onto one of its inputs, never into a run directory
it does not hold the lock of, never over a run's own files, never a directory where a file is
meant, and never a device, a FIFO or a socket (an output is a regular file or a new one); and no
link of either kind in a run is followed out of it (minibert/io/outputs.py, loop/rundir.py).

The method is test_bad_input.py's (exit code, no traceback, one `error:` line naming the file,
the sha256 of every file in the work folder unchanged except what the command was told to write),
and every case also hashes a decoy folder outside the work folder: what a link points to, or a
folder the command should never touch.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path


from refusals import FT, listing, qa_model, refused

from minibert.__main__ import main
from minibert.loop.rundir import LAYOUT


PREDICT = ["predict", "{w}/cls", "--format", "glue-single", "--file", "{w}/sst/dev.tsv", "--out"]


def _labelled(work: Path) -> Path:
    """A TSV with the classifier's own label names (cls was saved with LABEL_0, LABEL_1)."""
    rows = ["sentence\tlabel", "the film was good\tLABEL_1", "the plot was dull\tLABEL_0"]
    (work / "lab.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return work / "lab.tsv"


# --- outputs onto inputs --------------------------------------------------------------------------

def test_predict_onto_its_own_input_file_is_refused(work, decoy, capsys):
    refused(work, decoy, [*PREDICT, "{w}/sst/dev.tsv"], "is an input of this command", capsys)
    os.symlink(work / "sst/dev.tsv", work / "link.tsv")  # the same file through a link
    refused(work, decoy, [*PREDICT, "{w}/link.tsv"], "is an input of this command", capsys)
    os.link(work / "sst/dev.tsv", work / "hard.tsv")  # and through a hard link
    refused(work, decoy, [*PREDICT, "{w}/hard.tsv"], "is an input of this command", capsys)


def test_predict_over_the_model_it_reads_is_refused(work, decoy, capsys):
    refused(work, decoy, [*PREDICT, "{w}/cls/model.safetensors"], "a file of the input", capsys)
    refused(work, decoy, [*PREDICT, "{w}/cls/vocab.txt"], "a file of the input", capsys)


def test_squad_predictions_into_the_model_directory_or_over_the_input_are_refused(work, decoy, capsys):
    qa_model(work / "qa")
    (work / "qa" / "run.json").write_text(json.dumps({"command": "finetune", "settings": {}, "layout": LAYOUT}), encoding="utf-8")
    argv = ["predict", "{w}/qa", "--file", "{w}/squad/dev-v2.0.json", "--out"]
    refused(work, decoy, [*argv, "{w}/qa"], "is a run directory", capsys)
    refused(work, decoy, [*argv, "{w}/qa/preds"], "lies inside the run directory", capsys)
    shutil.copy(work / "squad/dev-v2.0.json", work / "squad/predictions.json")
    refused(work, decoy, ["predict", "{w}/qa", "--file", "{w}/squad/predictions.json", "--out", "{w}/squad"],
            "is an input of this command", capsys)
    assert main([a.format(w=work) for a in [*argv, "{w}/preds"]]) == 0
    assert json.loads((work / "preds/predictions.json").read_text()).keys() == {"q1"}


def test_a_failed_squad_write_leaves_no_empty_folder(work, decoy, capsys, monkeypatch):
    from minibert.finetune import evaluate

    qa_model(work / "qa")

    def full(path, content):
        raise OSError(errno.ENOSPC, f"cannot write {path}: No space left on device (the disk is full)")

    monkeypatch.setattr(evaluate, "write_output", full)  # predict's SQuAD path writes through evaluate's
    refused(work, decoy, ["predict", "{w}/qa", "--file", "{w}/squad/dev-v2.0.json", "--out", "{w}/new/preds"],
            "the disk is full", capsys)
    assert not (work / "new").exists()


def test_squad_eval_vocab_and_finetune_do_not_write_over_their_inputs(work, decoy, capsys):
    (work / "squad/pred.json").write_text(json.dumps({"q1": "john"}), encoding="utf-8")
    refused(work, decoy, ["squad-eval", "{w}/squad/dev-v2.0.json", "{w}/squad/pred.json", "--out-file",
                          "{w}/squad/pred.json"], "is an input of this command", capsys)
    refused(work, decoy, ["vocab", "--files", "{w}/sst/train.tsv", "--out", "{w}/sst/train.tsv", "--vocab-size", "40"],
            "is an input of this command", capsys)
    refused(work, decoy, ["finetune", "custom", "--format", "glue-single", "--data", "{w}/sst", "--init", "{w}/pre",
                          "--out", "{w}/pre", "--overwrite", "--quiet"], "is an input of this command", capsys)


# --- outputs into a run the command does not hold ------------------------------------------------

def test_evaluate_and_predict_do_not_write_into_a_fine_tuning_run(paused, decoy, capsys):
    w = paused.parent
    refused(w, decoy, ["evaluate", "{w}/cls", "--data", "{w}/sst/dev.tsv", "--out", "{w}/ft/run.json"],
            f"choose an --out outside {paused.resolve()}", capsys)
    refused(w, decoy, ["predict", "{w}/cls", "--format", "glue-single", "--file", "{w}/sst/dev.tsv", "--out",
                       "{w}/ft/pred.tsv"],
            "lies inside the run directory", capsys)
    refused(w, decoy, ["evaluate", "{w}/cls", "--data", "{w}/sst/dev.tsv", "--format", "glue-single", "--out",
                       "{w}/ft/metrics.jsonl"], "lies inside the run directory", capsys)
    refused(w, decoy, ["evaluate", "{w}/cls", "--data", "{w}/sst/dev.tsv", "--out", "{w}/sst"], "is a directory",
            capsys)
    assert main(["finetune", "--resume", str(paused), "--quiet"]) == 0  # the run is whole


def test_predict_into_a_live_run_is_refused_and_the_run_goes_on(paused, decoy, capsys):
    """The run is held by another writer (a flock on its .lock, as a training process holds it)."""
    w = paused.parent
    with open(paused / ".lock", "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        refused(w, decoy, ["predict", "{w}/cls", "--format", "glue-single", "--file", "{w}/sst/dev.tsv", "--out",
                           "{w}/ft/metrics.jsonl"], "lies inside the run directory", capsys)
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    assert main(["finetune", "--resume", str(paused), "--quiet"]) == 0


def test_export_data_never_writes_over_the_run_it_exports(run_copy, decoy, capsys):
    w = run_copy.parent
    for target in ("run/model.safetensors", "run/checkpoints/step-000004/trainer_state.json", "run/run.json",
                   "run/metrics.jsonl"):
        refused(w, decoy, ["export-data", "{w}/run", "--out", "{w}/" + target], "a file", capsys)
    # a new file inside the run it holds is still fine (docs/interop.md writes runs/tiny/export/train.jsonl)
    assert main(["export-data", str(run_copy), "--out", str(run_copy / "export/train.jsonl"), "--limit", "4"]) == 0
    assert len((run_copy / "export/train.jsonl").read_text().splitlines()) == 4


def test_other_commands_do_not_write_into_a_run(run_copy, decoy, capsys, corpus):
    w = run_copy.parent
    refused(w, decoy, ["notebooks", "01", "--out", "{w}/run/nb"], "lies inside the run directory", capsys)
    refused(w, decoy, ["bench", "--only", "text", "--json", "{w}/run/bench.json"], "lies inside the run directory",
            capsys)
    refused(w, decoy, ["data", "--corpus", corpus["corpus"][0], "--vocab", corpus["vocab"], "--out", "{w}/run/shards"],
            "lies inside the run directory", capsys)
    refused(w, decoy, ["nsp-baseline", "{w}/run", "--data-cache", "{w}/run/cache"], "lies inside the run directory",
            capsys)
    refused(w, decoy, ["train-xlnet", "--out", "{w}/run/xl"], "lies inside the run directory", capsys)
    refused(w, decoy, ["squad-eval", corpus["vocab"], corpus["vocab"], "--out-file", "{w}/run/eval.json"],
            "lies inside the run directory", capsys)


def test_attention_writes_into_the_run_only_under_its_lock(run_copy, decoy, capsys):
    w = run_copy.parent
    with open(run_copy / ".lock", "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        refused(w, decoy, ["attention", "{w}/run", "the cat sleeps", "--out", "{w}/run/attention"],
                "is in use by another minibert process", capsys)
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    assert main(["attention", str(run_copy), "the cat sleeps", "--out", str(run_copy / "attention")]) == 0
    assert (run_copy / "attention/layer0.png").is_file()


# --- an output is a regular file or a new one: never a device, a FIFO or a socket ------------------

def test_a_fifo_output_is_refused_not_written(work, decoy, capsys):
    fifo = work / "pipe"
    os.mkfifo(fifo)
    refused(work, decoy, ["evaluate", "{w}/cls", "--data", str(_labelled(work)), "--format", "glue-single",
                          "--out", "{w}/pipe"], "is a special file (a FIFO)", capsys)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_evaluate_and_predict_refuse_a_device_as_out(work, decoy, capsys):
    """`evaluate --out /dev/stdout` wrote /dev/stdout.confusion.png: a name derived from a device.
    Every device is refused before the model is read; without --out predict prints to stdout."""
    for device, why in (("/dev/null", "is a special file (a character device)"),
                        ("/dev/stdout", "--out /dev/stdout is a")):  # a link to the stream: refused either way
        refused(work, decoy, ["evaluate", "{w}/cls", "--data", str(_labelled(work)), "--format", "glue-single",
                              "--out", device], why, capsys)
        refused(work, decoy, [*PREDICT, device], why, capsys)
    assert not os.path.lexists("/dev/stdout.confusion.png")


def test_predict_to_stdout_without_out_prints_a_line_each(work):
    argv = ["predict", str(work / "cls"), "--format", "glue-single", "--file", str(_labelled(work))]
    res = subprocess.run([sys.executable, "-m", "minibert", *argv], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("LABEL_") and lines[0].endswith("\tthe film was good"), lines


def test_a_socket_is_refused(work, decoy, capsys):
    import socket

    s = socket.socket(socket.AF_UNIX)
    s.bind(str(work / "sock"))
    try:
        refused(work, decoy, [*PREDICT, "{w}/sock"], "is a special file", capsys)
    finally:
        s.close()


# --- no link followed out of a run --------------------------------------------------------------

def test_a_symlinked_lock_is_refused_and_its_target_untouched(work, decoy, capsys):
    argv = [a.replace("{w}/ft", "{w}/ft2") for a in FT]
    (work / "ft2").mkdir()
    os.symlink(decoy / "target.txt", work / "ft2" / ".lock")
    refused(work, decoy, argv, "is a symbolic link", capsys)
    (work / "ft2" / ".lock").unlink()
    os.symlink(decoy / "made-by-minibert", work / "ft2" / ".lock")  # dangling: must not create it
    refused(work, decoy, argv, "is a symbolic link", capsys)


def test_a_hard_linked_lock_is_refused_and_its_other_name_untouched(work, decoy, capsys):
    """O_NOFOLLOW stops a symbolic link only: a `.lock` that is a hard link to a file outside the
    run was truncated and given the pid."""
    argv = [a.replace("{w}/ft", "{w}/ft2") for a in FT]
    (work / "ft2").mkdir()
    os.link(decoy / "target.txt", work / "ft2" / ".lock")
    refused(work, decoy, argv, "has 2 names (a hard link", capsys)
    assert (decoy / "target.txt").read_text(encoding="utf-8") == "precious\n"


def test_a_fifo_lock_is_refused_not_waited_on(work, decoy, capsys):
    argv = [a.replace("{w}/ft", "{w}/ft2") for a in FT]
    (work / "ft2").mkdir()
    os.mkfifo(work / "ft2" / ".lock")
    refused(work, decoy, argv, "is not a regular file", capsys)


def test_a_symlinked_checkpoints_folder_is_never_written_or_pruned(paused, decoy, capsys):
    shutil.move(paused / "checkpoints", paused.parent / "moved")
    os.symlink(decoy, paused / "checkpoints")
    refused(paused.parent, decoy, ["finetune", "--resume", "{w}/ft", "--quiet"], "is a symbolic link", capsys)


def test_a_symlinked_metrics_file_is_not_appended_to(paused, decoy, capsys):
    (paused / "metrics.jsonl").unlink(missing_ok=True)
    os.symlink(decoy / "target.txt", paused / "metrics.jsonl")
    before = listing(decoy)
    main(["finetune", "--resume", str(paused), "--quiet"])
    capsys.readouterr()
    assert listing(decoy) == before


def test_vocab_refuses_a_fifo_and_ablate_leaves_no_folder_in_a_run(paused, decoy, capsys):
    w = paused.parent
    os.mkfifo(w / "pipe")
    refused(w, decoy, ["vocab", "--files", "{w}/sst/train.tsv", "--vocab-size", "40", "--out", "{w}/pipe"],
            "is a special file (a FIFO)", capsys)
    refused(w, decoy, ["ablate", "tasks", "--steps", "1", "--seeds", "1", "--tasks", "nextsent", "--out",
                       "{w}/ft/ab"], "lies inside the run directory", capsys)
    assert not (paused / "ab").exists()  # not even an empty folder
