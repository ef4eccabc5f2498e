"""An `electra-tiny` pretraining run's directory is two transformers checkpoints: the top level
loads as transformers' ElectraForPreTraining (the discriminator), generator/ as ElectraForMaskedLM,
with one word-embedding table, and both compute what minibert's networks compute."""
from __future__ import annotations

import numpy as np
import pytest
from corpora import SPECIALS, word_corpus, write_vocab

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from minibert.train import config as train_config  # noqa: E402
from minibert.train import pretrain  # noqa: E402

WORDS = [f"w{i}" for i in range(35)]


def _corpus(path, n_docs, seed):
    return str(word_corpus(path, n_docs, seed, WORDS, group=None, sentences=(3, 6)))


def test_electra_run_directory_loads_in_transformers(tmp_path):
    write_vocab(tmp_path / "vocab.txt", SPECIALS + WORDS)
    cfg = train_config.make_config("electra-tiny", corpus=(_corpus(tmp_path / "train.txt", 40, 0),),
                        heldout=(_corpus(tmp_path / "heldout.txt", 8, 1),), vocab=str(tmp_path / "vocab.txt"),
                        data_cache=str(tmp_path / "cache"), out=str(tmp_path / "run"), hidden_size=16,
                        num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, embedding_size=16,
                        max_position_embeddings=32, max_seq_length=32, max_predictions_per_seq=5, batch_size=8,
                        dupe_factor=2, warmup_steps=1, steps=3, eval_interval=3, checkpoint_interval=3,
                        eval_examples=16, curves=False)
    trainer = pretrain.train(cfg, verbose=False)
    run = tmp_path / "run"
    disc = transformers.ElectraForPreTraining.from_pretrained(run).eval()
    gen = transformers.ElectraForMaskedLM.from_pretrained(run / "generator").eval()
    assert torch.equal(disc.electra.embeddings.word_embeddings.weight, gen.electra.embeddings.word_embeddings.weight)
    ids = np.array([[2, 7, 8, 4, 9, 3, 0]])
    mask = (ids > 0).astype(np.int64)
    with torch.no_grad():
        d = disc(torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()  # (1, T)
        g = gen(torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()  # (1, T, V)
    ours_d = trainer.run.model.disc.forward(ids, attention_mask=mask)
    ours_g = trainer.run.model.gen.forward(ids, attention_mask=mask)
    real = mask[0] > 0
    np.testing.assert_allclose(d[0, real], ours_d[0, real], atol=1e-5)
    np.testing.assert_allclose(g[0, real], ours_g[0, real], atol=1e-5)
