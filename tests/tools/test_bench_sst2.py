"""minibert.tools.bench_sst2: SST-2's files, the batches both contenders get, and one contender's
epoch (on a few made-up sentences here; `bench --only sst2 --data DIR` runs the real one)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from minibert.tools import bench_sst2  # noqa: E402

SENTENCES = ["a good film", "a bad film , really bad", "good", "bad bad bad", "the best film of the year",
             "not good at all"]


def write_sst2(d, header="label\tsentence"):
    for name, n in (("train.tsv", 6), ("dev.tsv", 4)):
        rows = [f"{int('good' in s or 'best' in s)}\t{s}" for s in SENTENCES[:n]]
        (d / name).write_text(header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted({w for s in SENTENCES for w in s.split()})
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")


def test_read_tsv_takes_either_text_column_name_and_a_limit(tmp_path):
    write_sst2(tmp_path, header="label\tcontent")
    sentences, labels = bench_sst2.read_tsv(tmp_path / "train.tsv", limit=4)
    assert sentences == SENTENCES[:4] and labels.tolist() == [1, 0, 1, 0]
    (tmp_path / "bad.tsv").write_text("x\ty\tz\n", encoding="utf-8")
    with pytest.raises(ValueError, match="header"):
        bench_sst2.read_tsv(tmp_path / "bad.tsv")


def test_batches_are_padded_to_their_longest_sentence(tmp_path):
    write_sst2(tmp_path)
    info = bench_sst2.prepare(tmp_path, None, None, tmp_path)
    data = np.load(info["npz"])
    assert info["steps"] == 1 and info["real_tokens"] == int(data["train_len"].sum())
    order = data["order"]
    (b,) = bench_sst2.batches(data["train_ids"], data["train_len"], data["train_y"], [order[:3]])
    T = int(data["train_len"][order[:3]].max())
    assert b["input_ids"].shape == (3, T) and b["input_mask"].sum() == data["train_len"][order[:3]].sum()
    assert (b["input_ids"][:, 0] == 2).all()  # [CLS]


def test_minibert_contender_runs_an_epoch_and_scores_dev(tmp_path, monkeypatch):
    write_sst2(tmp_path)
    info = bench_sst2.prepare(tmp_path, None, None, tmp_path)
    monkeypatch.setitem(bench_sst2.MODELS, "test", dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                                        intermediate_size=32))
    init = bench_sst2.make_init(bench_sst2.MODELS["test"], info["vocab"], tmp_path / "init")
    monkeypatch.setattr("minibert.backend.chosen", "numba")
    got = bench_sst2.run_contender({"npz": info["npz"], "init": str(init), "lr": 1e-3}, "numba")
    assert got["steps"] == 1 and 0.0 <= got["dev_accuracy"] <= 1.0 and got["train_s"] > 0
