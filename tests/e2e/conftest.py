"""The e2e tests' fixtures: a work folder of small model directories and task files (`base`, and
`work`, a fresh copy for each case), a fine-tuning run paused half way (`paused`), a pretraining
run paused half way (`pretrained_run`, and `run_copy`), and a folder outside the work folder that
no command may touch (`decoy`)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from corpora import small_config, tiny_pretrained
from refusals import FT, VOCAB, WORDS, squad_json

from minibert.__main__ import main
from minibert.loop import engine
from minibert.finetune.models import BertForSequenceClassification, BertForTokenClassification
from minibert.train import pretrain


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A pretrained directory, a fine-tuned classifier and tagger, SST-style data and a SQuAD file."""
    d = tmp_path_factory.mktemp("base")
    cfg = tiny_pretrained(d / "pre", VOCAB)
    BertForSequenceClassification(cfg, 2, seed=0).save_pretrained(d / "cls", vocab=VOCAB)
    BertForTokenClassification(cfg, 3, seed=0).save_pretrained(d / "tag", vocab=VOCAB)
    sst = d / "sst"
    sst.mkdir()
    rng = np.random.default_rng(0)
    for split, n in (("train", 32), ("dev", 8)):
        rows = ["sentence\tlabel"] + [f"the film was {rng.choice(WORDS[:6])}\t{rng.integers(2)}" for _ in range(n)]
        (sst / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    squad = d / "squad"
    squad.mkdir()
    for split in ("train", "dev"):
        (squad / f"{split}-v2.0.json").write_text(json.dumps(squad_json([("q1", "who visited paris", "john visited "
                                                                       "paris", "john", 0)])), encoding="utf-8")
    return d


@pytest.fixture
def work(base, tmp_path):
    """A fresh copy of the fixtures for one case (it may damage them)."""
    shutil.copytree(base, tmp_path / "w")
    return tmp_path / "w"


@pytest.fixture
def paused(work, capsys, monkeypatch):
    """A fine-tuning run paused after 2 of its 4 steps (its checkpoint is the one a resume reads)."""
    real = engine.run
    with monkeypatch.context() as m:
        m.setattr(engine, "run", lambda run, state, max_steps=None: real(run, state,
                                                                         2 if max_steps is None else max_steps))
        assert main([a.format(w=work) for a in FT]) == 0
    capsys.readouterr()
    return work / "ft"


@pytest.fixture
def decoy(tmp_path):
    """A folder outside the work folder, with a file and a checkpoint-like folder a link may point at."""
    d = tmp_path / "decoy"
    (d / "step-000001").mkdir(parents=True)
    (d / "step-000001" / "model.safetensors").write_bytes(b"not yours")
    (d / "target.txt").write_text("precious\n", encoding="utf-8")
    return d


@pytest.fixture(scope="module")
def pretrained_run(corpus, tmp_path_factory):
    """A pretraining run paused at step 4 of 8, with its checkpoint and its shards."""
    d = tmp_path_factory.mktemp("pretrain")
    pretrain.train(small_config(corpus, d / "run", steps=8, checkpoint_interval=4, eval_interval=4),
                   verbose=False, max_steps_this_run=4)
    return d / "run"


@pytest.fixture
def run_copy(pretrained_run, tmp_path):
    """A copy of the paused run (a case may damage it) in a work folder of its own."""
    shutil.copytree(pretrained_run, tmp_path / "w" / "run")
    return tmp_path / "w" / "run"
