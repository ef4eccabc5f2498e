"""Checkpoints cross between minibert and transformers in both directions, and pickles are refused."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from minibert.bert import BertForPreTraining  # noqa: E402
from minibert import checkpoint as ck  # noqa: E402
from minibert.io import tensorfile
from minibert.model import BertConfig  # noqa: E402
from minibert.text.tokenizer import BertTokenizer  # noqa: E402

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "dog", "##s", "a", ".",
         "ran", "red", "Big", "big"] + [f"w{i}" for i in range(22)]
HF_KW = dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=48, max_position_embeddings=16)


def torch_inputs(ids, seg, mask):
    return dict(input_ids=torch.from_numpy(ids), token_type_ids=torch.from_numpy(seg),
                attention_mask=torch.from_numpy(mask))


def randomize(hf_model, seed):
    """transformers init leaves LayerNorm at 1/0 and biases at 0; perturb every tensor so a
    mix-up of any two is visible."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in hf_model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return hf_model.eval()


def hf_config(**kw):
    return transformers.BertConfig(**{**HF_KW, **kw}, attn_implementation="eager")


def test_minibert_save_then_transformers_from_pretrained(tmp_path, helpers):
    config = BertConfig(**HF_KW)
    model = BertForPreTraining(config, params=helpers.random_params(config, np.float32, seed=11))
    model.save_pretrained(tmp_path, vocab=VOCAB)
    theirs, info = transformers.BertForPreTraining.from_pretrained(tmp_path, output_loading_info=True,
                                                                    attn_implementation="eager")
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    theirs.eval()
    assert theirs.dtype == torch.float32
    ids, seg, mask = helpers.make_inputs(config, seed=12)
    ours = model(ids, seg, mask)
    with torch.no_grad():
        ref = theirs(**torch_inputs(ids, seg, mask), output_hidden_states=True)
    np.testing.assert_allclose(ours.sequence_output, ref.hidden_states[-1].numpy(), rtol=0, atol=1e-5)
    np.testing.assert_allclose(ours.mlm_logits, ref.prediction_logits.numpy(), rtol=0, atol=1e-5)
    np.testing.assert_allclose(ours.nsp_logits, ref.seq_relationship_logits.numpy(), rtol=0, atol=1e-5)
    # the tokenizer files we write are read by transformers' tokenizer the same way
    hf_tok = transformers.BertTokenizer.from_pretrained(tmp_path)
    text = "The big cat sat on the mat. Dogs ran!"
    ids_ours, _ = BertTokenizer(VOCAB).encode(text)
    assert hf_tok(text)["input_ids"] == ids_ours


def test_minibert_encoder_only_save_is_a_transformers_bert_model(tmp_path, helpers):
    config = BertConfig(**HF_KW)
    params = {k: v for k, v in helpers.random_params(config, np.float32, seed=13).items()
              if not k.startswith(("mlm.", "nsp."))}
    model = BertForPreTraining(config, params=params)
    model.save_pretrained(tmp_path)
    theirs, info = transformers.BertModel.from_pretrained(tmp_path, output_loading_info=True,
                                                           attn_implementation="eager")
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    ids, seg, mask = helpers.make_inputs(config, seed=14)
    with torch.no_grad():
        ref = theirs.eval()(**torch_inputs(ids, seg, mask))
    out = model(ids, seg, mask)
    np.testing.assert_allclose(out.sequence_output, ref.last_hidden_state.numpy(), rtol=0, atol=1e-5)
    np.testing.assert_allclose(out.pooled_output, ref.pooler_output.numpy(), rtol=0, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transformers_save_then_minibert_from_pretrained(tmp_path, helpers, dtype):
    theirs = randomize(transformers.BertForPreTraining(hf_config()), seed=21)
    if dtype == np.float64:
        theirs = theirs.double()
    theirs.save_pretrained(tmp_path)
    ours = BertForPreTraining.from_pretrained(tmp_path, dtype=dtype)
    assert ours.heads == ("pool", "mlm", "nsp")
    # bit-exact weights: every tensor transformers saved is in minibert, transposed/fused as documented
    back = ck.to_hf_state_dict(ours.params)
    for key, p in theirs.state_dict().items():
        if key.startswith("cls.predictions.decoder") or key.endswith("position_ids"):
            continue
        np.testing.assert_array_equal(back[key], p.numpy(), err_msg=key)
    ids, seg, mask = helpers.make_inputs(ours.config, seed=22)
    out = ours(ids, seg, mask)
    with torch.no_grad():
        ref = theirs(**torch_inputs(ids, seg, mask), output_hidden_states=True)
        pooled = theirs.bert(**torch_inputs(ids, seg, mask)).pooler_output
    atol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out.sequence_output, ref.hidden_states[-1].numpy(), rtol=0, atol=atol)
    np.testing.assert_allclose(out.pooled_output, pooled.numpy(), rtol=0, atol=atol)
    np.testing.assert_allclose(out.mlm_logits, ref.prediction_logits.numpy(), rtol=0, atol=atol)
    np.testing.assert_allclose(out.nsp_logits, ref.seq_relationship_logits.numpy(), rtol=0, atol=atol)


def test_minibert_to_minibert_through_transformers_is_bit_exact(tmp_path, helpers):
    config = BertConfig(**HF_KW)
    model = BertForPreTraining(config, params=helpers.random_params(config, np.float32, seed=31))
    model.save_pretrained(tmp_path / "a")
    transformers.BertForPreTraining.from_pretrained(tmp_path / "a").save_pretrained(tmp_path / "b")
    again = BertForPreTraining.from_pretrained(tmp_path / "b")
    for k, a in model.params.items():
        assert again.params[k].tobytes() == a.tobytes(), k


@pytest.mark.parametrize("cls_name,heads", [("BertModel", ("pool",)), ("BertForMaskedLM", ("mlm",))])
def test_transformers_base_and_masked_lm_files_load(tmp_path, helpers, cls_name, heads):
    theirs = randomize(getattr(transformers, cls_name)(hf_config()), seed=41)
    theirs.save_pretrained(tmp_path)
    with pytest.warns(UserWarning, match="forward returns None"):
        ours = BertForPreTraining.from_pretrained(tmp_path)
    assert ours.heads == heads
    ids, seg, mask = helpers.make_inputs(ours.config, seed=42)
    out = ours(ids, seg, mask)
    with torch.no_grad():
        ref = theirs(**torch_inputs(ids, seg, mask), output_hidden_states=True)
    assert out.nsp_logits is None
    np.testing.assert_allclose(out.sequence_output, ref.hidden_states[-1].numpy(), rtol=0, atol=1e-5)
    if cls_name == "BertModel":
        assert out.mlm_logits is None
        np.testing.assert_allclose(out.pooled_output, ref.pooler_output.numpy(), rtol=0, atol=1e-5)
    else:
        assert out.pooled_output is None  # BertForMaskedLM has no pooler
        np.testing.assert_allclose(out.mlm_logits, ref.logits.numpy(), rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="the pretraining loss needs"):
        ours.loss_and_grads({})


def test_float16_transformers_file_loads_into_float32(tmp_path, helpers):
    theirs = randomize(transformers.BertForPreTraining(hf_config()), seed=51).half()
    theirs.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["dtype"] == "float16"
    ours = BertForPreTraining.from_pretrained(tmp_path, dtype=np.float32)
    assert ours.params["tok_emb"].dtype == np.float32
    np.testing.assert_array_equal(ours.params["tok_emb"],
                                  theirs.bert.embeddings.word_embeddings.weight.detach().float().numpy())


def test_torch_save_pytorch_model_bin_is_refused(tmp_path, monkeypatch):
    theirs = transformers.BertForPreTraining(hf_config())
    theirs.config.save_pretrained(tmp_path)
    torch.save(theirs.state_dict(), tmp_path / "pytorch_model.bin")

    def no_unpickling(*a, **k):
        raise AssertionError("minibert must never unpickle")

    monkeypatch.setattr(torch, "load", no_unpickling)
    import pickle

    monkeypatch.setattr(pickle, "Unpickler", no_unpickling)
    monkeypatch.setattr(pickle, "load", no_unpickling)
    with pytest.raises(FileNotFoundError, match=r"pytorch_model\.bin.*never unpickles.*safetensors"):
        BertForPreTraining.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="never unpickles.*safetensors"):
        tensorfile.load_tensors(tmp_path / "pytorch_model.bin")
    # renamed to look like safetensors: the zip signature still gives it away
    (tmp_path / "model.safetensors").write_bytes((tmp_path / "pytorch_model.bin").read_bytes())
    with pytest.raises(ValueError, match="never unpickles.*safetensors"):
        BertForPreTraining.from_pretrained(tmp_path)
