"""Run directories written before trainer_state.json's layout 2 still resume: the loop's fields
sat beside the run's, each run saved its log window as its own tuples (pretraining: the model's
Metrics fields, grad norm, lr, tokens), and no "layout" was written. An interrupted run's state turned
back into that layout resumes to the same bits and the same metrics.jsonl as the run that never
stopped (tests/finetune/test_finetune_train.py does the same for fine-tuning)."""
from __future__ import annotations

import json
import os
import signal

import numpy as np
from corpora import small_config

from minibert.io.tensorfile import load_tensors
from minibert.loop import engine, rundir
from minibert.loop.state import LAYOUT
from minibert.train import pretrain
from minibert.train import runs as train_runs


def as_layout_1(state: dict) -> dict:
    """trainer_state.json as minibert wrote it before layout 2 (a pretraining run's)."""
    old = {k: v for k, v in state.items() if k not in ("layout", "eval_interval")}
    sha = {f: h for f, h in state["sha256"].items() if f in ("model.safetensors", rundir.OPTIM_FILE)}
    old["sha256"] = sha
    window = []
    for e in state.get("window", []):
        m = e["metrics"]
        fields = [m["loss"][0], m["mlm_loss"][0], m["nsp_loss"][0], *m["mlm_acc"], *m["nsp_acc"], 0, 0]
        window.append([fields, e["grad_norm"], e["lr"], m["tokens"][0]])
    old["window"] = window
    return old


def records(run) -> list[dict]:
    recs = rundir.read_jsonl(run / rundir.METRICS_FILE)[0]
    return [{k: v for k, v in r.items() if k not in ("time", "tokens_per_s")} for r in recs]


def test_an_interrupted_pretraining_run_of_layout_1_resumes_bit_exactly(corpus, tmp_path, monkeypatch):
    straight = pretrain.train(small_config(corpus, tmp_path / "straight", log_interval=4), verbose=False)
    part = tmp_path / "part"
    original = engine.train_step

    def step_then_ctrl_c(run, state):
        out = original(run, state)
        if state.step == 6:
            os.kill(os.getpid(), signal.SIGINT)  # the loop finishes the step, saves its window and stops
        return out

    with monkeypatch.context() as m:
        m.setattr(engine, "train_step", step_then_ctrl_c)
        assert pretrain.train(small_config(corpus, part, log_interval=4), verbose=False).loop.status == "interrupted"
    ckpt = rundir.latest_checkpoint(part)
    state = json.loads((ckpt / rundir.STATE_FILE).read_text())
    assert state["layout"] == LAYOUT and len(state["window"]) == 2  # steps 5 and 6, not logged yet
    (ckpt / rundir.STATE_FILE).write_text(json.dumps(as_layout_1(state)))
    resumed = pretrain.train(train_runs.resume_config(part, {}), resume=True, verbose=False)
    assert resumed.loop.status == "done" and resumed.loop.step == 12
    for name in ("model.safetensors", rundir.OPTIM_FILE):
        a = load_tensors(rundir.latest_checkpoint(tmp_path / "straight") / name)[0]
        b = load_tensors(rundir.latest_checkpoint(part) / name)[0]
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a), name
    assert records(part) == records(tmp_path / "straight")  # the saved window logged whole, as it was
    assert straight.run.last_eval == resumed.run.last_eval
