"""Where --init finds a model (minibert/io/hub.py, checkpoint.py): a hub id from a cache laid
out by hand (no network), a sentence-transformers folder, a checkpoint saved in shards, and the
casing read from what the folder says."""
from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest

from minibert import checkpoint
from minibert.bert import BertForPreTraining
from minibert.finetune.models import BertForSequenceClassification
from minibert.io import hub, tensorfile
from minibert.model import BertConfig

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "was", "good", "bad", "##s"]
pytestmark = pytest.mark.filterwarnings("ignore:.*newly initialised")
CONFIG = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=32)


@pytest.fixture
def model_dir(tmp_path):
    BertForPreTraining(CONFIG, seed=3).save_pretrained(tmp_path / "model", vocab=VOCAB)
    return tmp_path / "model"


def _same_encoder(a, b):
    shared = [k for k in a.params if k in b.params and not k.startswith(("cls.", "pool."))]
    assert len(shared) > 10
    for k in shared:
        np.testing.assert_array_equal(a.params[k], b.params[k], err_msg=k)


def test_a_hub_id_reads_the_cache_laid_out_by_hand(model_dir, tmp_path, monkeypatch):
    cache = tmp_path / "hf"
    snapshot = cache / "models--someone--tiny-bert" / "snapshots" / "0123abcd"
    shutil.copytree(model_dir, snapshot)
    (cache / "models--someone--tiny-bert" / "refs").mkdir()
    (cache / "models--someone--tiny-bert" / "refs" / "main").write_text("0123abcd\n")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.chdir(tmp_path)  # no folder named someone/tiny-bert here
    assert hub.resolve_model_dir("someone/tiny-bert") == snapshot
    loaded = BertForSequenceClassification.from_pretrained("someone/tiny-bert", num_labels=2)
    _same_encoder(loaded, BertForSequenceClassification.from_pretrained(model_dir, num_labels=2))
    # a ref that is not a commit hash is refused, not followed
    (cache / "models--someone--tiny-bert" / "refs" / "main").write_text("../../elsewhere\n")
    with pytest.raises(ValueError, match="not a commit hash"):
        hub.resolve_model_dir("someone/tiny-bert")


def test_a_hub_id_not_cached_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if it were not installed
    with pytest.raises(ValueError, match="pip install huggingface_hub.*config.json, model.safetensors, vocab.txt"):
        hub.resolve_model_dir("google/bert_uncased_L-4_H-256_A-4")


def test_offline_download_fails_in_one_error(tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="could not download it from the Hugging Face hub"):
        hub.resolve_model_dir("google/bert_uncased_L-4_H-256_A-4")


@pytest.mark.parametrize("sub", ["", "0_Transformer"])
def test_a_sentence_transformers_folder_gives_its_transformer_module(model_dir, tmp_path, sub):
    folder = tmp_path / "st"
    shutil.copytree(model_dir, folder / sub if sub else folder)
    (folder / "1_Pooling").mkdir()
    modules = [{"idx": 0, "name": "0", "path": sub, "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    (folder / "modules.json").write_text(json.dumps(modules))
    assert hub.resolve_model_dir(folder) == (folder / sub if sub else folder)
    loaded = BertForSequenceClassification.from_pretrained(folder, num_labels=2)
    _same_encoder(loaded, BertForSequenceClassification.from_pretrained(model_dir, num_labels=2))
    if sub:
        modules[0]["path"] = "../elsewhere"
        (folder / "modules.json").write_text(json.dumps(modules))
        with pytest.raises(ValueError, match="must be a folder inside"):
            hub.resolve_model_dir(folder)


def _shard(model_dir, out, overlap=False, name2="model-00002-of-00002.safetensors"):
    """Split model.safetensors into two shards with an index, as transformers saves big models."""
    shutil.copytree(model_dir, out)
    tensors, _ = tensorfile.load_tensors(out / "model.safetensors")
    (out / "model.safetensors").unlink()
    names = sorted(tensors)
    halves = {"model-00001-of-00002.safetensors": names[:len(names) // 2 + overlap], name2: names[len(names) // 2:]}
    weight_map = {}
    for file, part in halves.items():
        if "/" not in file:
            tensorfile.save_tensors_atomic({k: tensors[k] for k in part}, out / file, {"format": "pt"})
        weight_map.update({k: file for k in part})
    (out / checkpoint.INDEX_NAME).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return out


def test_a_checkpoint_in_shards_reads_as_one(model_dir, tmp_path):
    whole = BertForPreTraining.from_pretrained(model_dir)
    sharded = BertForPreTraining.from_pretrained(_shard(model_dir, tmp_path / "sharded"))
    assert whole.params.keys() == sharded.params.keys()
    for k in whole.params:
        np.testing.assert_array_equal(whole.params[k], sharded.params[k], err_msg=k)


def test_shards_that_overlap_or_leave_the_folder_are_refused(model_dir, tmp_path):
    with pytest.raises(ValueError, match="is in both"):
        BertForPreTraining.from_pretrained(_shard(model_dir, tmp_path / "overlap", overlap=True))
    with pytest.raises(ValueError, match="must be a .safetensors file in"):
        BertForPreTraining.from_pretrained(_shard(model_dir, tmp_path / "escape", name2="../x.safetensors"))


def test_casing_is_read_from_what_the_folder_says(model_dir, tmp_path):
    assert checkpoint.read_casing(model_dir) is True  # minibert writes tokenizer_config.json
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    assert checkpoint.read_casing(bare) is True  # an uncased vocabulary: no capitals
    (bare / "vocab.txt").write_text("\n".join(VOCAB + ["The", "Film", "Paris", "##S"]) + "\n")
    assert checkpoint.read_casing(bare) is False  # a cased one
    (bare / "tokenizer.json").write_text(json.dumps({"normalizer": {"type": "BertNormalizer", "lowercase": True}}))
    assert checkpoint.read_casing(bare) is True  # the fast tokenizer's file says so
    (bare / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    assert checkpoint.read_casing(bare) is False  # and tokenizer_config.json wins


def test_finetune_takes_a_hub_id_and_its_random_init_control(model_dir, tmp_path, monkeypatch, capsys):
    from minibert.__main__ import main

    cache = tmp_path / "hf" / "models--someone--tiny-bert"
    shutil.copytree(model_dir, cache / "snapshots" / "0123abcd")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sst").mkdir()
    rows = ["sentence\tlabel"] + [f"the film was {w}\t{int(w == 'good')}" for w in ("good", "bad") * 8]
    for split in ("train", "dev"):
        (tmp_path / "sst" / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    common = ["finetune", "custom", "--format", "glue-single", "--data", "sst", "--epochs", "1", "--batch-size", "8",
              "--max-seq-length", "16", "--quiet"]
    assert main([*common, "--init", "someone/tiny-bert", "--out", "ft"]) == 0
    settings = json.loads((tmp_path / "ft" / "run.json").read_text())["settings"]
    assert settings["init"] == str(cache / "snapshots" / "0123abcd")  # the folder it read, recorded
    assert main([*common, "--init", "none", "--like", "someone/tiny-bert", "--out", "control"]) == 0
    control = json.loads((tmp_path / "control" / "config.json").read_text())
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size"):
        assert control[key] == getattr(CONFIG, key), key
    assert (tmp_path / "control" / "vocab.txt").read_text().split() == VOCAB
    assert main([*common, "--init", "someone/tiny-bert", "--like", "someone/tiny-bert", "--out", "x"]) == 1
    assert "--like goes with --init none" in capsys.readouterr().err
