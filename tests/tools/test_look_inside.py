"""fill-mask and attention on any BERT directory: a model without an MLM head is one error line
that says why, attention reads a fine-tuned classifier's encoder, and its pictures go under the
current directory by default, never beside the model."""
from __future__ import annotations

import pytest
from corpora import tiny_pretrained

from minibert.bert import HEAD_GROUPS, BertForPreTraining
from minibert.finetune.models import BertForSequenceClassification
from minibert.tools.look_inside import attention_cli, fill_mask_cli

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    cfg = tiny_pretrained(d / "pre", VOCAB)
    BertForSequenceClassification(cfg, 2, seed=0).save_pretrained(d / "cls", vocab=VOCAB)
    full = BertForPreTraining(cfg, seed=0)  # the encoder alone, as a BertModel (sentence-transformers) is saved
    BertForPreTraining(cfg, params={k: v for k, v in full.params.items() if k.split(".")[0] not in HEAD_GROUPS}
                       ).save_pretrained(d / "encoder", vocab=VOCAB)
    return d


def test_fill_mask_on_a_model_without_an_mlm_head_says_why_in_one_line(models, capsys):
    assert fill_mask_cli([str(models / "cls"), "the [MASK] sat"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot fill in [MASK]" in err
    # a fine-tuned classifier is named as one, with what runs it; it is not an encoder alone
    assert "is a fine-tuned BertForSequenceClassification" in err and "encoder only" not in err
    assert f"python -m minibert predict {models / 'cls'}" in err
    assert fill_mask_cli([str(models / "encoder"), "the [MASK] sat"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "(BertModel) has no MLM head" in err and "encoder only" in err
    assert fill_mask_cli([str(models / "pre"), "the [MASK] sat"]) == 0


@pytest.mark.parametrize("name", ["pre", "cls"])
def test_attention_defaults_to_a_folder_under_the_current_directory(models, tmp_path, monkeypatch, capsys, name):
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in (models / name).iterdir())
    assert attention_cli([str(models / name), "the cat sat on the mat"]) == 0
    assert sorted(p.name for p in (models / name).iterdir()) == before  # nothing beside the model
    pictures = sorted((tmp_path / "attention" / name).glob("*.png"))
    assert pictures and (tmp_path / "attention" / name / "layer0.png") in pictures
