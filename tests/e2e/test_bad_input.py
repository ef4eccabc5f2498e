"""Hostile and corrupt files, handed to every command as a careless or hostile user would: each
ends in one `error:` line (exit 1; 2 for a usage error, argparse's convention), no traceback, and
nothing written outside the directory the command was told to write in.

Each case builds its bad input from small fixtures in tmp_path, runs the command through the
command line's own entry point (minibert.__main__.main) and compares a listing of tmp_path (every
file's sha256) before and after: only the run directory the case names may change.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from refusals import FT, edit_json, listing, read_json, run_refused, squad_json

from minibert.__main__ import main
from minibert.io import tensorfile

DEEP = "[" * 100_000 + "]" * 100_000  # JSON nested deeper than Python's parser recurses
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000  # the same, starting as an object (a header must)


def _header(path: Path, edit) -> None:
    """Rewrite a safetensors file's JSON header with edit(header) -> header (data bytes kept)."""
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = edit(json.loads(raw[8:8 + n]))
    text = json.dumps(header).encode() if not isinstance(header, bytes) else header
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + raw[8 + n:])


# --- config.json and safetensors of a model a command loads ---------------------------------------

CONFIG_CASES = {
    "nested config.json": (lambda w: (w / "cls/config.json").write_text(DEEP), "nested too deeply"),
    "hidden_act a list": (lambda w: edit_json(w / "cls/config.json", hidden_act=["gelu"]), "hidden_act"),
    "architectures [[x]]": (lambda w: edit_json(w / "cls/config.json", architectures=[["x"]]), "architectures"),
    "architectures [{}]": (lambda w: edit_json(w / "cls/config.json", architectures=[{}]), "architectures"),
    "id2label a list": (lambda w: edit_json(w / "cls/config.json", id2label=["a", "b"]), "id2label"),
    "layer_norm_eps text": (lambda w: edit_json(w / "cls/config.json", layer_norm_eps="x"), "layer_norm_eps"),
    "layer_norm_eps -1": (lambda w: edit_json(w / "cls/config.json", layer_norm_eps=-1),
                          "layer_norm_eps=-1 must be > 0"),
    "a million layers": (lambda w: edit_json(w / "cls/config.json", num_hidden_layers=1_000_000),
                         "num_hidden_layers=1000000 is more than minibert builds"),
    "more layers than the file": (lambda w: edit_json(w / "cls/config.json", num_hidden_layers=3),
                                  "num_hidden_layers=3"),
    "nested tokenizer_config.json": (lambda w: (w / "cls/tokenizer_config.json").write_text(DEEP), "nested too deeply"),
    "nested safetensors header": (lambda w: _header(w / "cls/model.safetensors", lambda h: DEEP_OBJECT.encode()),
                                  "nested too deeply"),
    "safetensors dtype a list": (lambda w: _header(w / "cls/model.safetensors",
                                                   lambda h: {k: ({**v, "dtype": ["F32"]} if k != "__metadata__" else v)
                                                              for k, v in h.items()}), "dtype"),
}


@pytest.mark.parametrize("case", CONFIG_CASES, ids=list(CONFIG_CASES))
def test_predict_refuses_a_bad_model_directory_in_one_line(case, work, capsys):
    damage, expected = CONFIG_CASES[case]
    damage(work)
    run_refused(work, ["predict", "{w}/cls", "a good film"], expected, capsys)


def test_a_million_layers_is_refused_at_once_with_little_memory(work, tmp_path):
    """In a fresh process: refused in under a second of its own work, peak memory under 200 MB."""
    import subprocess
    import sys

    edit_json(work / "cls/config.json", num_hidden_layers=1_000_000)
    script = ("import resource, sys, time\nfrom minibert.__main__ import main\nimport minibert.finetune.commands\n"
              "import minibert.train.xlnet_command\n"
              "peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
              "before, t = peak(), time.perf_counter()\nrc = main(sys.argv[1:])\n"
              "print(rc, time.perf_counter() - t, before, peak())")
    for argv in (["predict", str(work / "cls"), "a good film"],
                 ["train-xlnet", "--set", "num_hidden_layers=1000000", "--out", str(tmp_path / "x")]):
        res = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=300)
        rc, seconds, before_kib, peak_kib = res.stdout.split()
        assert rc == "1" and "is more than minibert builds" in res.stderr, res.stderr
        # the command's own work: under a second and no memory to speak of (the imports, NumPy and
        # Numba's compiler, take about 150 MB before it starts)
        grown = int(peak_kib) - int(before_kib)
        assert float(seconds) < 1.0 and grown < 20 * 1024, (argv[0], seconds, before_kib, peak_kib)
        assert int(peak_kib) < 200 * 1024 or grown == 0, (argv[0], before_kib, peak_kib, sorted(os.environ))
    assert not (tmp_path / "x").exists()


def test_nan_weights_name_no_verify_and_predict_takes_it(work, capsys):
    path = work / "cls/model.safetensors"
    tensors, meta = tensorfile.load_tensors(path)
    tensors["classifier.bias"] = np.array([np.nan, 0.0], np.float32)
    tensorfile.save_tensors_atomic(tensors, path, {k: v for k, v in meta.items() if k == "format"})
    run_refused(work, ["predict", "{w}/cls", "a good film"], "pass --no-verify", capsys)
    assert main(["predict", str(work / "cls"), "a good film", "--no-verify"]) == 0


# --- a fine-tuning run's own files ---------------------------------------------------------------

RUN_FILE_CASES = {
    "run.json nested": (lambda r: (r / "run.json").write_text(DEEP), "nested too deeply"),
    "run.json truncated": (lambda r: (r / "run.json").write_text((r / "run.json").read_text()[:11]), "run.json"),
    "run.json a list": (lambda r: (r / "run.json").write_text("[1]"), "must hold a JSON object"),
    "settings a string": (lambda r: edit_json(r / "run.json", settings="x"), "run.json: settings is 'x'; expected an object"),
    "an unknown setting": (lambda r: edit_json(r / "run.json",
                                               settings={**read_json(r / "run.json")["settings"], "oops": 1}),
                           "unknown settings ['oops']"),
    "batch_size text": (lambda r: edit_json(r / "run.json", settings={**read_json(r / "run.json")["settings"],
                                                                       "batch_size": "8"}), "batch_size is '8'"),
    "lr null": (lambda r: edit_json(r / "run.json", settings={**read_json(r / "run.json")["settings"], "lr": None}),
                "lr is None"),
    "optimizer file is a model": (lambda r: shutil.copy(next(r.glob("checkpoints/step-*")) / "model.safetensors",
                                                        next(r.glob("checkpoints/step-*")) / "optimizer.safetensors"),
                                  "optimizer"),
    "state step text": (lambda r: edit_json(next(r.glob("checkpoints/step-*")) / "trainer_state.json", step="abc"),
                        "step"),
}


@pytest.mark.parametrize("case", RUN_FILE_CASES, ids=list(RUN_FILE_CASES))
def test_a_damaged_fine_tuning_run_is_refused_on_resume_in_one_line(case, paused, capsys):
    damage, expected = RUN_FILE_CASES[case]
    damage(paused)
    run_refused(paused.parent, ["finetune", "--resume", "{w}/ft", "--quiet"], expected, capsys, writes="ft")


def test_a_resume_writes_only_into_the_directory_named_and_equals_a_run_that_never_stopped(paused, work, capsys):
    """A copied run resumes in its copy, even with a run.json whose `out` names another directory
    (here: the original, and a decoy with a checkpoints/ folder and a metrics.jsonl)."""
    copy = work / "copy"
    shutil.copytree(paused, copy)
    decoy = work / "decoy"
    (decoy / "checkpoints").mkdir(parents=True)
    (decoy / "metrics.jsonl").write_text("mine\n")
    edit_json(copy / "run.json", settings={**read_json(copy / "run.json")["settings"], "out": str(decoy)})
    before = listing(work)
    assert main(["finetune", "--resume", str(copy), "--quiet"]) == 0
    after = listing(work)
    assert {k for k in set(before) | set(after) if before.get(k) != after.get(k) and not k.startswith("copy/")} == set()
    assert main([a.format(w=work).replace(str(work / "ft"), str(work / "whole")) for a in FT]) == 0
    for name in ("model.safetensors", f"checkpoints/step-{4:06d}/model.safetensors",
                 f"checkpoints/step-{4:06d}/optimizer.safetensors"):
        assert (copy / name).read_bytes() == (work / "whole" / name).read_bytes(), name
    records = [_read_jsonl(d / "metrics.jsonl") for d in (copy, work / "whole")]
    assert records[0] == records[1]  # the log as exact as the model: the same records, step for step


def _read_jsonl(path: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in ("time", "tokens_per_s")}
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_resume_removes_what_a_killed_save_left(paused, capsys):
    leftover = paused / "checkpoints" / ".step-000004.tmp-99999"
    leftover.mkdir()
    (leftover / "model.safetensors").write_bytes(b"half")
    assert main(["finetune", "--resume", str(paused), "--quiet"]) == 0
    assert not leftover.exists()


def test_one_writer_per_directory_and_a_killed_holder_never_blocks(work):
    """Two real processes on one --out: exactly one runs; after a SIGKILL of the holder the
    next run starts."""
    import signal
    import subprocess
    import sys
    import time

    argv = [a.format(w=work) for a in FT]
    hold = ("import sys, time\nfrom minibert.loop.rundir import RunLock\nwith RunLock(sys.argv[1]):\n"
            "    print('locked', flush=True)\n    time.sleep(120)\n")
    holder = subprocess.Popen([sys.executable, "-c", hold, str(work / "ft")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    second = subprocess.run([sys.executable, "-m", "minibert", *argv], capture_output=True, text=True, timeout=300)
    assert second.returncode == 1 and f"is in use by another minibert process (pid {holder.pid})" in second.stderr
    assert "Traceback" not in second.stderr and not (work / "ft" / "run.json").exists()
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    t0 = time.perf_counter()
    third = subprocess.run([sys.executable, "-m", "minibert", *argv], capture_output=True, text=True, timeout=300)
    assert third.returncode == 0, third.stderr
    assert (work / "ft" / "run.json").is_file() and time.perf_counter() - t0 < 300
    # two started together: one runs, the other is refused (either order)
    procs = [subprocess.Popen([sys.executable, "-m", "minibert", *argv, "--overwrite"], stderr=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, text=True) for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert sorted(rc for rc, _ in results) == [0, 1], results
    assert any("is in use by another minibert process" in err for rc, err in results if rc == 1)


# --- commands that check their settings before writing anything ---------------------------------

SETTINGS_CASES = {
    "t5 negative warmup": (["train-t5", "--out", "{w}/t5", "--warmup-steps", "-5"], "warmup_steps=-5"),
    "t5 lr nan": (["train-t5", "--out", "{w}/t5", "--lr", "nan"], "lr=nan must be a finite number"),
    "t5 seed -1": (["train-t5", "--out", "{w}/t5", "--seed", "-1"], "seed=-1"),
    "xlnet a million layers": (["train-xlnet", "--out", "{w}/x", "--set", "num_hidden_layers=1000000"],
                               "num_hidden_layers=1000000"),
    "xlnet lr text": (["train-xlnet", "--out", "{w}/x", "--set", "lr=fast"], "lr='fast' is not a valid"),
    "xlnet pred_k beyond the window": (["train-xlnet", "--out", "{w}/x", "--set", "pred_k=999"], "pred_k=999"),
    "ablate finetune batch 0": (["ablate", "tasks", "--out", "{w}/ab", "--finetune-set", "batch_size=0"],
                                "batch_size=0"),
    "ablate finetune lr -1": (["ablate", "tasks", "--out", "{w}/ab", "--finetune-set", "lr=-1"], "lr"),
    "ablate hidden 7": (["ablate", "tasks", "--out", "{w}/ab", "--set", "hidden_size=7"], "hidden_size"),
    "predict an empty text": (["predict", "{w}/cls", ""], "predict needs the text"),
}


@pytest.mark.parametrize("case", SETTINGS_CASES, ids=list(SETTINGS_CASES))
def test_settings_are_checked_before_anything_is_written(case, work, capsys):
    argv, expected = SETTINGS_CASES[case]
    run_refused(work, argv, expected, capsys)


# --- SQuAD files --------------------------------------------------------------------------------

def test_squad_without_a_usable_question_and_with_a_huge_context(work, capsys):
    squad = work / "squad"
    off = squad_json([("q1", "who visited paris", "john visited paris", "john", 40)])  # answer_start off the context
    (squad / "train-v2.0.json").write_text(json.dumps(off), encoding="utf-8")
    argv = ["finetune", "squad2", "--data", "{w}/squad", "--init", "{w}/pre", "--out", "{w}/sq", "--quiet"]
    run_refused(work, argv, "no training question", capsys)
    huge = squad_json([("q1", "who", "word " * 2_000_000, "word", 0)])  # 10 MB, one context of two million words
    (squad / "train-v2.0.json").write_text(json.dumps(huge), encoding="utf-8")
    run_refused(work, argv, "words", capsys)
    (squad / "train-v2.0.json").write_text(DEEP, encoding="utf-8")
    run_refused(work, argv, "nested too deeply", capsys)
    twice = squad_json([("q1", "who visited paris", "john visited paris", "john", 0)] * 2)  # one id, two questions
    (squad / "train-v2.0.json").write_text(json.dumps(twice), encoding="utf-8")
    run_refused(work, argv, "q1", capsys)
    (squad / "pred.json").write_text(DEEP, encoding="utf-8")
    run_refused(work, ["squad-eval", "{w}/squad/dev-v2.0.json", "{w}/squad/pred.json"], "nested too deeply", capsys)


# --- export-data: a run file decides what is read, never where anything is written ---------------

def test_export_data_writes_only_where_the_command_line_says(corpus, tmp_path, capsys):
    from corpora import small_config

    from minibert.train import pretrain

    work = tmp_path / "w"
    files = {**corpus, "data_cache": str(work / "cache")}
    pretrain.train(small_config(files, work / "run", steps=2, eval_interval=2, checkpoint_interval=2),
                   verbose=False)
    (work / "README.md").write_text("# not a corpus\n\nsome words .\n", encoding="utf-8")
    run_file = work / "run" / "run.json"
    saved = json.loads(run_file.read_text(encoding="utf-8"))
    shutil.rmtree(work / "cache")  # the shards are gone: export-data must make them again
    # the run file now names another corpus and a data cache outside the run
    hostile = {**saved, "settings": {**saved["settings"], "corpus": [str(work / "README.md")],
                                     "data_cache": str(work / "elsewhere")}}
    run_file.write_text(json.dumps(hostile), encoding="utf-8")
    argv = ["export-data", "{w}/run", "--out", "{w}/run/x.jsonl", "--data-cache", "{w}/cache"]
    run_refused(work, argv, "are not the ones the run trained on", capsys)
    # the run's own corpus again, the cache still named outside: the shards go where --data-cache says
    run_file.write_text(json.dumps({**hostile, "settings": {**hostile["settings"],
                                                            "corpus": saved["settings"]["corpus"]}}),
                        encoding="utf-8")
    assert main([a.format(w=work) for a in argv]) == 0, capsys.readouterr().err
    assert not (work / "elsewhere").exists()
    regenerated = sorted(p.name for p in (work / "cache").iterdir() if p.is_dir())
    assert regenerated == sorted(Path(p).name for p in saved["data"].values())
    assert len((work / "run" / "x.jsonl").read_text().splitlines()) > 0
