"""In-domain pretraining: a task's training text as a corpus (minibert/train/task_corpus.py) and
`train-tiny --corpus-from-task`."""
from __future__ import annotations

import json

import pytest

from minibert.train import task_corpus
from minibert.train.commands import train_tiny_cli


def _sst2(d, n=40):
    d.mkdir()
    words = ["a", "fine", "film", "dull", "plot", "with", "the", "actors", "and", "music"]
    rows = ["sentence\tlabel"] + [f"{' '.join(words[(i + k) % 10] for k in range(4 + i % 3))}\t{i % 2}"
                                  for i in range(n)]
    (d / "train.tsv").write_text("\n".join(rows) + "\n")
    (d / "dev.tsv").write_text("sentence\tlabel\nsecret dev words\t1\n")
    return d


def test_each_format_becomes_documents_without_labels(tmp_path):
    sst = _sst2(tmp_path / "sst2", n=20)
    docs = task_corpus.documents("sst2", str(sst))
    assert len(docs) == 20 and all(len(d) == 2 for d in docs)  # each sentence: a document of its two halves
    assert " ".join(docs[1]) == "fine film dull plot with" and docs[1] == ["fine film", "dull plot with"]
    assert all("\t" not in s and not s.endswith(("0", "1")) for d in docs for s in d)
    assert task_corpus.halves("film") == ["film"] and task_corpus.halves("a b c d") == ["a b", "c d"]
    (tmp_path / "rte").mkdir()
    (tmp_path / "rte" / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\tA cat sat.\tAn animal sat.\t"
                                                "entailment\n1\tIt rains.\tIt is dry.\tnot_entailment\n")
    assert task_corpus.documents("rte", str(tmp_path / "rte")) == [["A cat sat.", "An animal sat."],
                                                                    ["It rains.", "It is dry."]]
    (tmp_path / "squad").mkdir()
    squad = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [
        {"context": "Paris is big. It is in France.", "qas": [
            {"id": "a", "question": "Where is Paris?", "answers": [{"text": "France", "answer_start": 23}]}]}]}]}
    (tmp_path / "squad" / "train-v2.0.json").write_text(json.dumps(squad))
    assert task_corpus.documents("squad2", str(tmp_path / "squad")) == [["Paris is big.", "It is in France.",
                                                                          "Where is Paris?"]]
    with pytest.raises(ValueError, match="choose one of"):
        task_corpus.documents("mnli", None)


def test_train_tiny_pretrains_on_the_task_text_never_its_dev_file(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MINIBERT_FAST", raising=False)
    monkeypatch.delenv("CORPUS", raising=False)
    sst = _sst2(tmp_path / "sst2")
    small = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32,
             "max_seq_length": 32, "max_position_embeddings": 32, "max_predictions_per_seq": 5, "batch_size": 4,
             "steps": 2, "minutes": 0, "eval_interval": 2, "checkpoint_interval": 2, "curves": 0,
             "data_cache": tmp_path / "cache", "out": tmp_path / "run", "warmup_steps": 1, "dupe_factor": 1}
    argv = ["--fast", "--corpus-from-task", "sst2", "--data", str(sst), *(a for k, v in small.items()
                                                               for a in ("--set", f"{k}={v}"))]
    assert train_tiny_cli(argv) == 0
    settings = json.loads((tmp_path / "run" / "run.json").read_text())["settings"]
    assert settings["objective"] == "mlm_nsp" and settings["packing"] == "segment_pair"
    corpus = "".join(open(p).read() for p in (*settings["corpus"], *settings["heldout"]))
    assert "film" in corpus and "secret" not in corpus  # the training text, not the dev file's
    vocab = open(settings["vocab"]).read().split()
    assert "film" in vocab and "secret" not in vocab
    assert train_tiny_cli(["--data", str(sst)]) == 1  # --data alone is a mistake
    assert "--data goes with --corpus-from-task" in capsys.readouterr().err


def test_in_domain_pretraining_runs_30000_steps_unless_told(tmp_path, monkeypatch):
    """The longer run is what pays on SST-2 (task_corpus.LENGTH); --minutes fits the steps to a
    budget instead, --set steps=N runs N."""
    from minibert.train import commands

    monkeypatch.delenv("MINIBERT_FAST", raising=False)
    monkeypatch.delenv("CORPUS", raising=False)
    sst = _sst2(tmp_path / "sst2")
    budgets = []

    def no_training(cfg, **kwargs):  # the settings the run would start with, then stop
        budgets.append((cfg.minutes, cfg.steps))
        raise RuntimeError("stopped before training")

    monkeypatch.setattr(commands, "launch_pretraining", no_training)
    base = ["--corpus-from-task", "sst2", "--data", str(sst), "--set", f"data_cache={tmp_path / 'cache'}",
            "--set", f"out={tmp_path / 'run'}", "--set", "dupe_factor=1"]
    for argv in (base, [*base, "--minutes", "5"], [*base, "--set", "steps=700"]):
        with pytest.raises(RuntimeError, match="stopped before training"):
            train_tiny_cli(argv)
    assert budgets == [(0.0, 30_000), (5.0, 0), (0.0, 700)]  # steps 0: fitted to the 5 minutes
