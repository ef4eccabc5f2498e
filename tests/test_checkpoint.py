"""minibert.checkpoint without torch: names and layouts, safetensors files, atomic writes, errors."""
from __future__ import annotations

import errno
import json
import os
import pickle
import struct

import numpy as np
import pytest

from minibert.bert import BertForPreTraining
from minibert import checkpoint as ck
from minibert.io import tensorfile
from minibert.model import BertConfig, param_shapes

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "dog", "##s", "a", ".",
         "ran", "red"]


def tiny_config(**kw):
    d = dict(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=32, max_position_embeddings=24)
    d.update(kw)
    return BertConfig(**d)


def random_model(config=None, dtype=np.float32, seed=0, drop=()):
    """Random non-trivial parameters (LayerNorm w != 1, biases != 0), optionally without head groups."""
    config = config or tiny_config()
    rng = np.random.default_rng(seed)
    is_ln_w = lambda k: k.endswith(".w") and "ln" in k.split(".")[-2]  # noqa: E731
    params = {k: (rng.standard_normal(s) * 0.1 + (1.0 if is_ln_w(k) else 0.0)).astype(dtype)
              for k, s in param_shapes(config).items() if k.split(".")[0] not in drop}
    return BertForPreTraining(config, dtype=dtype, params=params)


def ids_batch():
    ids = np.array([[2, 5, 6, 7, 3, 0, 0], [2, 10, 14, 3, 12, 9, 3]])  # (2, 7), row 0 padded
    seg = np.array([[0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1]])
    return ids, seg, (ids != 0).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# names and layouts

LAYER_KEYS = ["attention.self.query.weight", "attention.self.query.bias", "attention.self.key.weight",
              "attention.self.key.bias", "attention.self.value.weight", "attention.self.value.bias",
              "attention.output.dense.weight", "attention.output.dense.bias", "attention.output.LayerNorm.weight",
              "attention.output.LayerNorm.bias", "intermediate.dense.weight", "intermediate.dense.bias",
              "output.dense.weight", "output.dense.bias", "output.LayerNorm.weight", "output.LayerNorm.bias"]
OTHER_KEYS = ["bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
              "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
              "bert.embeddings.LayerNorm.bias", "bert.pooler.dense.weight", "bert.pooler.dense.bias",
              "cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
              "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias",
              "cls.predictions.bias", "cls.seq_relationship.weight", "cls.seq_relationship.bias"]


def test_to_hf_state_dict_names_cover_every_param_spec_7_1():
    model = random_model()
    state = ck.to_hf_state_dict(model.params)
    expected = set(OTHER_KEYS) | {f"bert.encoder.layer.{l}.{k}" for l in range(2) for k in LAYER_KEYS}
    assert set(state) == expected  # no decoder keys, no position_ids
    assert sum(a.size for a in state.values()) == model.num_parameters


def test_to_hf_state_dict_layouts_transpose_and_split_qkv():
    model = random_model()
    p, s, C = model.params, ck.to_hf_state_dict(model.params), 16
    q, k, v = (f"bert.encoder.layer.1.attention.self.{n}" for n in ("query", "key", "value"))
    np.testing.assert_array_equal(s[q + ".weight"], p["h1.attn.qkv.w"][:, :C].T)
    np.testing.assert_array_equal(s[k + ".weight"], p["h1.attn.qkv.w"][:, C:2 * C].T)
    np.testing.assert_array_equal(s[v + ".bias"], p["h1.attn.qkv.b"][2 * C:])
    np.testing.assert_array_equal(s["bert.encoder.layer.0.intermediate.dense.weight"], p["h0.ffn.in.w"].T)  # (FF, C)
    assert s["cls.seq_relationship.weight"].shape == (2, C)
    np.testing.assert_array_equal(s["cls.seq_relationship.weight"], p["nsp.w"].T)
    np.testing.assert_array_equal(s["cls.predictions.bias"], p["mlm.bias"])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_from_hf_state_dict_inverts_to_hf(dtype):
    model = random_model(dtype=dtype)
    back = ck.from_hf_state_dict(ck.to_hf_state_dict(model.params), model.config, dtype)
    assert list(back) == list(model.params)
    for k in model.params:
        assert back[k].dtype == dtype and back[k].flags.c_contiguous
        np.testing.assert_array_equal(back[k], model.params[k], err_msg=k)


def test_from_hf_state_dict_accepts_tied_decoder_and_position_ids_and_no_prefix():
    model = random_model()
    state = ck.to_hf_state_dict(model.params)
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"].copy()
    state["cls.predictions.decoder.bias"] = state["cls.predictions.bias"].copy()
    state["bert.embeddings.position_ids"] = np.arange(24)[None]
    back = ck.from_hf_state_dict(state, model.config)
    np.testing.assert_array_equal(back["tok_emb"], model.params["tok_emb"])
    bare = {k.removeprefix("bert."): v for k, v in ck.to_hf_state_dict(model.params).items()
            if not k.startswith(("bert.pooler", "cls."))}  # a BertModel file without pooler
    back = ck.from_hf_state_dict(bare, model.config)
    assert not any(k.startswith(("pool.", "mlm.", "nsp.")) for k in back)


def test_from_hf_state_dict_rejects_untied_decoder():
    model = random_model()
    state = ck.to_hf_state_dict(model.params)
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"] + 1
    with pytest.raises(ValueError, match="cls.predictions.decoder.weight.*untied"):
        ck.from_hf_state_dict(state, model.config)


def test_from_hf_state_dict_missing_tensor_names_key():
    model = random_model()
    state = ck.to_hf_state_dict(model.params)
    del state["bert.encoder.layer.1.attention.self.key.bias"]
    with pytest.raises(ValueError, match=r"missing tensor 'bert.encoder.layer.1.attention.self.key.bias' \(shape \(16,\)\)"):
        ck.from_hf_state_dict(state, model.config)


def test_from_hf_state_dict_shape_mismatch_names_key_and_both_shapes():
    model = random_model()
    state = ck.to_hf_state_dict(model.params)
    state["bert.encoder.layer.0.intermediate.dense.weight"] = np.zeros((16, 32), np.float32)  # not transposed
    with pytest.raises(ValueError, match=r"intermediate.dense.weight.*\(16, 32\).*\(32, 16\)"):
        ck.from_hf_state_dict(state, model.config)


def test_from_hf_state_dict_unexpected_key_and_required_heads():
    model = random_model()
    state = ck.to_hf_state_dict(model.params)
    with pytest.raises(ValueError, match="classifier.weight"):
        ck.from_hf_state_dict({**state, "classifier.weight": np.zeros((2, 16), np.float32)}, model.config)
    no_nsp = {k: v for k, v in state.items() if not k.startswith("cls.seq_relationship")}
    with pytest.raises(ValueError, match="cls.seq_relationship.weight"):
        ck.from_hf_state_dict(no_nsp, model.config, required_heads=("pool", "mlm", "nsp"))


# ---------------------------------------------------------------------------------------------
# save / load directories

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_save_load_roundtrip_is_bit_exact(tmp_path, dtype):
    model = random_model(dtype=dtype)
    model.save_pretrained(tmp_path, vocab=VOCAB)
    assert sorted(os.listdir(tmp_path)) == ["config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt"]
    loaded = BertForPreTraining.from_pretrained(tmp_path, dtype=dtype)
    assert loaded.config == model.config and loaded.heads == ("pool", "mlm", "nsp")
    for k, a in model.params.items():
        assert loaded.params[k].dtype == dtype
        assert loaded.params[k].tobytes() == a.tobytes(), k
    ids, seg, mask = ids_batch()
    a, b = model(ids, seg, mask), loaded(ids, seg, mask)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert (tmp_path / "vocab.txt").read_text().split("\n")[:-1] == VOCAB
    assert loaded.vocab_path == tmp_path / "vocab.txt"


def test_saved_config_has_transformers_keys(tmp_path):
    random_model(dtype=np.float64).save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["architectures"] == ["BertForPreTraining"] and cfg["model_type"] == "bert"
    assert cfg["pad_token_id"] == 0 and cfg["position_embedding_type"] == "absolute"
    assert cfg["classifier_dropout"] is None and cfg["use_cache"] is True
    assert cfg["layer_norm_eps"] == 1e-12 and cfg["hidden_act"] == "gelu"  # exact: a literal through JSON
    assert cfg["dtype"] == cfg["torch_dtype"] == "float64"
    tensors, meta = tensorfile.load_tensors(tmp_path / "model.safetensors")
    assert meta == {"format": "pt", "minibert_sha256": tensorfile.tensor_digest(tensors)}
    assert not any("decoder" in k or "position_ids" in k for k in tensors)


def test_float16_file_reads_into_float32(tmp_path):
    model = random_model()
    model.save_pretrained(tmp_path)
    half = {k: v.astype(np.float16) for k, v in ck.to_hf_state_dict(model.params).items()}
    tensorfile.save_tensors_atomic(half, tmp_path / "model.safetensors", {"format": "pt"})
    loaded = BertForPreTraining.from_pretrained(tmp_path, dtype=np.float32)
    assert loaded.params["h0.attn.qkv.w"].dtype == np.float32
    for k, a in model.params.items():
        np.testing.assert_array_equal(loaded.params[k], a.astype(np.float16).astype(np.float32), err_msg=k)


def test_do_lower_case_round_trips_through_tokenizer_config(tmp_path):
    model = random_model()
    model.do_lower_case = False
    model.save_pretrained(tmp_path, vocab=VOCAB)
    assert BertForPreTraining.from_pretrained(tmp_path).do_lower_case is False



def test_save_pretrained_accepts_a_tokenizer_as_vocab(tmp_path):
    from minibert.text.tokenizer import BertTokenizer

    model = random_model()
    model.save_pretrained(tmp_path, vocab=BertTokenizer(VOCAB, do_lower_case=False))
    assert (tmp_path / "vocab.txt").read_text().split("\n")[:-1] == VOCAB
    assert BertForPreTraining.from_pretrained(tmp_path).do_lower_case is False

@pytest.mark.parametrize("drop,arch,heads", [(("pool", "mlm", "nsp"), "BertModel", ()),
                                             (("mlm", "nsp"), "BertModel", ("pool",)),
                                             (("pool", "nsp"), "BertForMaskedLM", ("mlm",))])
def test_encoder_only_and_masked_lm_load(tmp_path, drop, arch, heads):
    full = random_model(seed=3)
    part = BertForPreTraining(full.config, params={k: v for k, v in full.params.items() if k.split(".")[0] not in drop})
    part.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["architectures"] == [arch]
    tensors, _ = tensorfile.load_tensors(tmp_path / "model.safetensors")
    assert any(k.startswith("bert.") for k in tensors) == (arch != "BertModel")  # BertModel keys have no prefix
    with pytest.warns(UserWarning, match="no .*forward returns None"):
        loaded = BertForPreTraining.from_pretrained(tmp_path)
    assert loaded.heads == heads
    ids, seg, mask = ids_batch()
    out, ref = loaded(ids, seg, mask), full(ids, seg, mask)
    np.testing.assert_array_equal(out.sequence_output, ref.sequence_output)
    assert out.nsp_logits is None
    assert (out.pooled_output is None) == ("pool" not in heads)
    assert (out.mlm_logits is None) == ("mlm" not in heads)
    if "mlm" in heads:
        np.testing.assert_array_equal(out.mlm_logits, ref.mlm_logits)
    with pytest.raises(ValueError, match="the pretraining loss needs the pooler, MLM and NSP heads"):
        loaded.loss_and_grads({})


def _write_dir(tmp_path, **config_changes):
    random_model().save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.update(config_changes)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path


def test_unknown_architecture_is_refused(tmp_path):
    _write_dir(tmp_path, architectures=["BertForNextSentencePrediction"])
    with pytest.raises(ValueError, match="BertForNextSentencePrediction.*not supported"):
        BertForPreTraining.from_pretrained(tmp_path)


def test_a_task_architecture_without_its_head_is_refused(tmp_path):
    _write_dir(tmp_path, architectures=["BertForSequenceClassification"])
    with pytest.raises(ValueError, match="says BertForSequenceClassification but the file has no classifier"):
        BertForPreTraining.from_pretrained(tmp_path)


def test_unknown_activation_is_refused(tmp_path):
    _write_dir(tmp_path, hidden_act="relu")
    with pytest.raises(ValueError, match="hidden_act 'relu' is not supported"):
        BertForPreTraining.from_pretrained(tmp_path)


def test_architecture_missing_a_required_head_is_refused(tmp_path):
    model = random_model()
    model.save_pretrained(tmp_path)
    state = {k: v for k, v in ck.to_hf_state_dict(model.params).items() if not k.startswith("cls.seq")}
    tensorfile.save_tensors_atomic(state, tmp_path / "model.safetensors", {"format": "pt"})
    with pytest.raises(ValueError, match="model.safetensors: checkpoint is missing tensor 'cls.seq_relationship"):
        BertForPreTraining.from_pretrained(tmp_path)


def test_pickle_checkpoint_is_refused_without_unpickling(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("minibert tried to unpickle")

    monkeypatch.setattr(pickle, "load", boom)
    monkeypatch.setattr(pickle, "loads", boom)
    monkeypatch.setattr(pickle, "Unpickler", boom)
    (tmp_path / "config.json").write_text(json.dumps(tiny_config().to_dict()))
    (tmp_path / "pytorch_model.bin").write_bytes(pickle.dumps({"weight": [1.0, 2.0]}, protocol=2))
    with pytest.raises(FileNotFoundError, match="pytorch_model.bin.*never unpickles.*safetensors"):
        BertForPreTraining.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="never unpickles.*safetensors"):
        tensorfile.load_tensors(tmp_path / "pytorch_model.bin")
    renamed = tmp_path / "weights.data"
    renamed.write_bytes((tmp_path / "pytorch_model.bin").read_bytes())
    with pytest.raises(ValueError, match="never unpickles.*safetensors"):  # found by the pickle magic byte
        tensorfile.load_tensors(renamed)


def test_missing_directory_and_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        BertForPreTraining.from_pretrained(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="has no model.safetensors"):
        BertForPreTraining.from_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="nope.safetensors does not exist"):
        tensorfile.load_tensors(tmp_path / "nope.safetensors")


# ---------------------------------------------------------------------------------------------
# safetensors files

def test_safetensors_worked_vector_spec_7_4(tmp_path):
    path = tensorfile.save_tensors_atomic({"a": np.array([1.0, 2.0], np.float32)}, tmp_path / "a.safetensors",
                                  {"format": "pt"}, digest=False)
    raw = path.read_bytes()
    compact = b'{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    assert len(compact) == 85
    assert len(raw) == 104
    assert raw[:8] == bytes([0x58, 0, 0, 0, 0, 0, 0, 0])  # 88 little-endian
    assert raw[8:96] == compact + b"   "
    assert raw[96:] == np.array([1.0, 2.0], "<f4").tobytes()
    tensors, meta = tensorfile.load_tensors(path)
    assert meta == {"format": "pt"}
    np.testing.assert_array_equal(tensors["a"], [1.0, 2.0])


def _handmade(path, header: bytes, data: bytes = b""):
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


def test_truncated_file_is_named(tmp_path):
    good = tensorfile.save_tensors_atomic({"w": np.arange(12, dtype=np.float32).reshape(3, 4)}, tmp_path / "w.safetensors")
    raw = good.read_bytes()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(raw[:-5])
    with pytest.raises(ValueError, match="cut.safetensors is truncated: the header describes 48 data bytes but the file holds 43"):
        tensorfile.load_tensors(cut)
    cut.write_bytes(raw[:5])
    with pytest.raises(ValueError, match="truncated.*8-byte header length"):
        tensorfile.load_tensors(cut)
    cut.write_bytes(raw[:20])
    with pytest.raises(ValueError, match="truncated: header says"):
        tensorfile.load_tensors(cut)


def test_corrupt_headers_are_named(tmp_path):
    p = tmp_path / "bad.safetensors"
    with pytest.raises(ValueError, match="bad.safetensors: corrupt safetensors header"):
        tensorfile.load_tensors(_handmade(p, b'{"a": {"dtype": "F32", '))
    with pytest.raises(ValueError, match="corrupt safetensors header"):
        tensorfile.load_tensors(_handmade(p, b"\xff\xfe{}"))
    p.write_bytes(struct.pack("<Q", 2 ** 40) + b"{}")
    with pytest.raises(ValueError, match="header length 1099511627776 exceeds the safetensors limit"):
        tensorfile.load_tensors(p)
    hdr = b'{"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}'
    with pytest.raises(ValueError, match="'a' has dtype 'BF16'"):
        tensorfile.load_tensors(_handmade(p, hdr, b"\0" * 4))
    hdr = b'{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}'
    with pytest.raises(ValueError, match=r"'a' spans \[0, 8\].*needs 12 bytes"):
        tensorfile.load_tensors(_handmade(p, hdr, b"\0" * 8))
    hdr = b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}'
    with pytest.raises(ValueError, match="'b' starts at byte 8, expected 4"):
        tensorfile.load_tensors(_handmade(p, hdr, b"\0" * 12))


# ---------------------------------------------------------------------------------------------
# atomic writes

def test_atomic_write_leaves_no_temp_files(tmp_path):
    model = random_model()
    model.save_pretrained(tmp_path, vocab=VOCAB)
    model.save_pretrained(tmp_path, vocab=tmp_path / "vocab.txt")  # saving over itself, vocab copied from itself
    assert sorted(os.listdir(tmp_path)) == ["config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt"]
    (tmp_path / "plain.txt").write_text("x")  # permissions of an ordinary new file (umask applied)
    assert (tmp_path / "model.safetensors").stat().st_mode == (tmp_path / "plain.txt").stat().st_mode


@pytest.mark.parametrize("error", [KeyboardInterrupt(), OSError(errno.ENOSPC, "No space left on device")])
def test_interrupted_write_keeps_old_file(tmp_path, monkeypatch, error):
    path = tensorfile.save_tensors_atomic({"w": np.ones(4, np.float32)}, tmp_path / "opt.safetensors", {"step": "1"})
    before = path.read_bytes()

    def crash(filename, data):
        with open(filename, "wb") as f:
            f.write(data[:20])  # a partial write, then the process "dies" or the disk is full
        raise error

    monkeypatch.setattr(tensorfile, "write_bytes_synced", crash)
    with pytest.raises(type(error)) as e:
        tensorfile.save_tensors_atomic({"w": np.zeros(4, np.float32)}, path, {"step": "2"})
    if isinstance(error, OSError):  # one line naming the file, not safetensors' own error type
        assert str(e.value) == f"[Errno {errno.ENOSPC}] cannot write {path}: No space left on device (the disk is full)"
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["opt.safetensors"]
    tensors, meta = tensorfile.load_tensors(path)
    assert meta["step"] == "1" and tensors["w"].tolist() == [1.0] * 4


# ---------------------------------------------------------------------------------------------
# verification on load: the recorded digest and finite weights

def test_flipped_bytes_are_refused_and_no_verify_loads_them(tmp_path):
    model = random_model()
    model.save_pretrained(tmp_path, vocab=VOCAB)
    path = tmp_path / "model.safetensors"
    raw = bytearray(path.read_bytes())
    _, start = tensorfile.read_safetensors_header(path)
    rng = np.random.default_rng(0)
    for i in rng.choice(np.arange(start, len(raw)), size=200, replace=False):  # 200 data bytes flipped
        raw[i] ^= 0x01  # a low mantissa bit: every value stays finite
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=f"{path} is corrupt: its tensors do not match the sha256.*--no-verify"):
        BertForPreTraining.from_pretrained(tmp_path)
    loaded = BertForPreTraining.from_pretrained(tmp_path, verify=False)
    assert any(not np.array_equal(loaded.params[k], model.params[k]) for k in model.params)


def test_nan_weights_are_refused_naming_the_tensor(tmp_path):
    model = random_model()
    model.params["h0.ffn.in.w"][3, 4] = np.nan
    model.save_pretrained(tmp_path, vocab=VOCAB)  # the digest matches: the NaN was there when saved
    with pytest.raises(ValueError, match="tensor 'bert.encoder.layer.0.intermediate.dense.weight' holds 1 NaN/inf"):
        BertForPreTraining.from_pretrained(tmp_path)
    assert np.isnan(BertForPreTraining.from_pretrained(tmp_path, verify=False).params["h0.ffn.in.w"][3, 4])


def test_tensor_digest_depends_on_names_shapes_and_bytes():
    a = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    assert tensorfile.tensor_digest(a) == tensorfile.tensor_digest({"w": a["w"].copy()})
    assert tensorfile.tensor_digest(a) != tensorfile.tensor_digest({"v": a["w"]})
    assert tensorfile.tensor_digest(a) != tensorfile.tensor_digest({"w": a["w"].reshape(3, 2)})
    assert tensorfile.tensor_digest(a) != tensorfile.tensor_digest({"w": a["w"].astype(np.float64)})
    b = a["w"].copy()
    b[1, 2] = 6.5
    assert tensorfile.tensor_digest(a) != tensorfile.tensor_digest({"w": b})


def test_save_tensors_atomic_rejects_non_string_metadata(tmp_path):
    with pytest.raises(ValueError, match="metadata must map str to str.*'step': 3"):
        tensorfile.save_tensors_atomic({"w": np.ones(2)}, tmp_path / "x.safetensors", {"step": 3})
    assert not os.listdir(tmp_path)


# ---------------------------------------------------------------------------------------------
# encode

def test_encode_token_and_mean_pooled_sentence_vectors(tmp_path):
    model = random_model(seed=5)
    model.save_pretrained(tmp_path, vocab=VOCAB)
    loaded = BertForPreTraining.from_pretrained(tmp_path)
    texts = ["The cat sat on the mat.", "Dogs ran", "a red cat"]
    tokens, sentences = loaded.encode(texts, batch_size=2)
    assert [t.shape for t in tokens] == [(9, 16), (5, 16), (5, 16)]  # [CLS] ... [SEP]; dogs -> dog ##s
    assert sentences.shape == (3, 16)
    np.testing.assert_allclose(sentences, np.stack([t.mean(0) for t in tokens]), rtol=1e-6)
    alone, _ = loaded.encode(texts[1:2])  # no padding: the padded batch must agree
    np.testing.assert_allclose(alone[0], tokens[1], atol=1e-5)
    ids = np.array([[2, 10, 11, 14, 3]])  # [CLS] dog ##s ran [SEP], by hand
    np.testing.assert_allclose(tokens[1], loaded(ids).sequence_output[0], atol=1e-6)
    from minibert.text.tokenizer import BertTokenizer

    vec, _ = model.encode(["dogs ran"], tokenizer=BertTokenizer(VOCAB))
    np.testing.assert_allclose(vec[0], tokens[1], atol=1e-6)
    with pytest.raises(ValueError, match="encode needs a tokenizer"):
        random_model().encode(["x"])


@pytest.mark.parametrize("flag", ["is_decoder", "add_cross_attention"])
@pytest.mark.parametrize("value, expected", [
    ("x", "{flag} is 'x' (str); it must be true or false"),  # was read as true: "{flag}=true is not supported"
    (1, "{flag} is 1 (int); it must be true or false"),
    (True, "{flag}=true is not supported (minibert is an encoder)"),
])
def test_config_decoder_flags_are_booleans_and_false(flag, value, expected, tmp_path):
    d = tiny_config().to_dict() | {flag: value}
    with pytest.raises(ValueError) as e:
        ck.read_config(tmp_path / "config.json", d)
    assert expected.format(flag=flag) in str(e.value)


def test_config_decoder_flags_false_load(tmp_path):
    d = tiny_config().to_dict() | {"is_decoder": False, "add_cross_attention": False}
    assert ck.read_config(tmp_path / "config.json", d)[0].hidden_size == d["hidden_size"]
