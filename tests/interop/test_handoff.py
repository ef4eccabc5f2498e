"""Beyond the laptop: a minibert run -> its MLM/NSP data exported as JSON lines ->
transformers' Trainer continues pretraining for 5 steps on the CPU (examples/continue_pretraining.py,
the README's script) -> the saved model opens in minibert, and its loss on a fixed batch equals
transformers' on the same batch."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from corpora import TOPICS, topic_corpus

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # transformers' Trainer needs it

from minibert.bert import BertForPreTraining  # noqa: E402
from minibert.data.shards import BatchIterator  # noqa: E402
from minibert.tools.export_data import cli as export_cli  # noqa: E402
from minibert.tools.export_data import to_transformers  # noqa: E402
from minibert.train import config as train_config  # noqa: E402
from minibert.train import data as train_data  # noqa: E402
from minibert.train import pretrain  # noqa: E402
from minibert.train import runs as train_runs  # noqa: E402
from minibert.io.paths import repo_root

ROOT = repo_root()
HANDOFF_TOPICS = ["cats", "dogs", "ships"]


def _corpus(path: Path, n_docs: int, seed: int) -> Path:
    return topic_corpus(path, n_docs, seed, HANDOFF_TOPICS)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("handoff")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "on", "a", "with", "."]
    vocab += sorted({w for t in HANDOFF_TOPICS for w in TOPICS[t]})
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    cfg = train_config.make_config("tiny", corpus=(str(_corpus(d / "train.txt", 60, 0)),),
                        heldout=(str(_corpus(d / "heldout.txt", 9, 1)),), vocab=str(d / "vocab.txt"),
                        data_cache=str(d / "cache"), out=str(d / "run"), hidden_size=32,
                        num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=64, max_seq_length=32, max_predictions_per_seq=5,
                        batch_size=8, dupe_factor=2, steps=10, warmup_steps=2, lr=3e-3, curves=False)
    pretrain.train(cfg, verbose=False)
    return d / "run"


def _example():
    spec = importlib.util.spec_from_file_location("continue_pretraining", ROOT / "examples" / "continue_pretraining.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_export_data_writes_what_bert_for_pretraining_takes(run, tmp_path):
    out = tmp_path / "train.jsonl"
    assert export_cli([str(run), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    cfg = train_runs.resume_config(run, {})
    it = BatchIterator(str(train_data.prepare_data(cfg, verbose=False).train), cfg.batch_size, cfg.seed,
                       masking=cfg.masking, vocab=cfg.vocab)
    assert len(rows) == it.batches_per_epoch * cfg.batch_size  # the run's epoch, batch by batch
    first = it.next_batch()  # the first batch the run trained on, with its dynamic masks
    for b, row in enumerate(rows[:cfg.batch_size]):
        assert row["input_ids"] == first["input_ids"][b].tolist()
        assert row["token_type_ids"] == first["segment_ids"][b].tolist()
        assert row["attention_mask"] == first["input_mask"][b].tolist()
        assert row["next_sentence_label"] == int(first["next_sentence_labels"][b])
        real = first["masked_lm_weights"][b] > 0
        labelled = [i for i, t in enumerate(row["labels"]) if t != -100]
        assert labelled == sorted(first["masked_lm_positions"][b][real].tolist())
        assert [row["labels"][i] for i in first["masked_lm_positions"][b][real]] == \
            first["masked_lm_ids"][b][real].tolist()


def test_trainer_continues_a_minibert_run_and_minibert_reads_the_result(run, tmp_path):
    data = tmp_path / "train.jsonl"
    assert export_cli([str(run), "--out", str(data)]) == 0
    out = _example().main([str(run), str(data), "--out", str(tmp_path / "hf"), "--max-steps", "5",
                           "--batch-size", "8", "--lr", "1e-3", "--warmup-steps", "0"])
    before = BertForPreTraining.from_pretrained(run)
    after = BertForPreTraining.from_pretrained(out)  # verified: finite, every tensor named and shaped
    assert (out / "vocab.txt").read_text() == (run / "vocab.txt").read_text()
    assert not np.array_equal(after.params["h0.ffn.in.w"], before.params["h0.ffn.in.w"])  # it trained

    # a fixed batch: the run's held-out sequences with their stored masks
    cfg = train_runs.resume_config(run, {})
    batch = BatchIterator(str(train_data.prepare_data(cfg, verbose=False).heldout), 8, 0, vocab=cfg.vocab).next_batch()
    ours, _ = after.loss_and_grads(batch, compute_grads=False)
    rows = list(to_transformers(batch))
    tensors = {k: torch.tensor([r[k] for r in rows]) for k in rows[0]}
    theirs = transformers.BertForPreTraining.from_pretrained(out).eval()
    with torch.no_grad():
        loss = theirs(**tensors).loss.item()
    print(f"loss on a fixed held-out batch: minibert {ours:.7f}, transformers {loss:.7f}")
    assert abs(ours - loss) <= 1e-5, (ours, loss)
