"""Hugging Face checkpoints in and out: the one place that knows transformers' names and layouts.

A transformers BERT directory holds `config.json`, `model.safetensors` and `vocab.txt`
(docs/bert-notes.md §7.3). This module maps minibert's flat `params` dict to transformers'
`state_dict` names and back (§7.1 there), and reads and writes config.json and whole directories.

Layout differences (minibert -> transformers):
    weights are (C_in, C_out) here, (C_out, C_in) in PyTorch: every dense weight is transposed;
    h{l}.attn.qkv.w (C, 3C) is fused in q|k|v order: split into query/key/value, each (C, C).T;
    nsp.w (C, 2) -> cls.seq_relationship.weight (2, C);
    the MLM decoder is tied to tok_emb (and its bias to mlm.bias), so like transformers we
    write neither `cls.predictions.decoder.weight` nor `.bias`, and accept them when present.

The safetensors files themselves (digest, finite weights, no pickles) are io/tensorfile.py's;
every file is written atomically (io/atomic.py).

Public API:
    to_hf_state_dict(params) -> dict[str, ndarray]          (also for gradients)
    from_hf_state_dict(state, config, dtype=np.float32) -> params
    save_pretrained(model, directory, vocab=None)
    read_pretrained(directory, dtype=np.float32) -> Pretrained (minibert.bert.load_pretrained builds the model)
    model_tokenizer(directory, config, do_lower_case) -> BertTokenizer, its vocab.txt checked against the model

A checkpoint directory is read and written here in both directions (names, shapes, config.json
and the layouts transformers writes: sharded, task classes, sentence-transformers' folders), so
the name map and its inverse sit side by side.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import NamedTuple

import numpy as np

from minibert.io.atomic import atomic_write, write_text_atomic
from minibert.io.hub import resolve_model_dir
from minibert.io.jsonfile import read_json, read_json_object
from minibert.io.tensorfile import (PICKLE_SUFFIXES, check_finite, load_tensors, read_safetensors_header, refuse_pickle,
                                    save_tensors_atomic)
from minibert.io.textio import refuse_special_file, shown_value
from minibert.model import ACTIVATIONS, HEAD_GROUPS, BertConfig, param_shapes
from minibert.text.tokenizer import BertTokenizer

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
VOCAB_NAME = "vocab.txt"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"
INDEX_NAME = "model.safetensors.index.json"  # a checkpoint saved in shards: which file holds each tensor

# architectures we can read, and the head groups each one must contain (see head_groups below)
ARCHITECTURES = {"BertForPreTraining": ("pool", "mlm", "nsp"), "BertForMaskedLM": ("mlm",), "BertModel": (),
                 # the fine-tuning classes (minibert/finetune/models.py): head groups besides their task head
                 "BertForSequenceClassification": ("pool",), "BertForMultipleChoice": ("pool",),
                 "BertForTokenClassification": (), "BertForQuestionAnswering": ()}
# fine-tuning architecture -> its task head: minibert's prefix and transformers' module name
TASK_HEADS = {"BertForSequenceClassification": ("cls", "classifier"), "BertForMultipleChoice": ("cls", "classifier"),
              "BertForTokenClassification": ("cls", "classifier"), "BertForQuestionAnswering": ("qa", "qa_outputs")}
# config.json keys of the fine-tuning classes (causal, bilstm: minibert's own, the LTR ablation's)
TASK_CONFIG_KEYS = ("id2label", "label2id", "problem_type", "causal", "bilstm")
# keys that real checkpoints carry but that minibert does not need
IGNORED_KEYS = ("embeddings.position_ids",)  # an int64 buffer in older transformers checkpoints
TIED_KEYS = {"cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
             "cls.predictions.decoder.bias": "cls.predictions.bias"}
def _simple_map(num_layers: int) -> dict[str, tuple[str, bool]]:
    """minibert name -> (transformers name, transpose?) for every tensor except the fused qkv."""
    m = {"tok_emb": ("bert.embeddings.word_embeddings.weight", False),
         "pos_emb": ("bert.embeddings.position_embeddings.weight", False),
         "seg_emb": ("bert.embeddings.token_type_embeddings.weight", False),
         "emb_ln.w": ("bert.embeddings.LayerNorm.weight", False),
         "emb_ln.b": ("bert.embeddings.LayerNorm.bias", False)}
    for l in range(num_layers):
        hf = f"bert.encoder.layer.{l}."
        for ours, theirs in (("attn.out", "attention.output.dense"), ("ln1", "attention.output.LayerNorm"),
                             ("ffn.in", "intermediate.dense"), ("ffn.out", "output.dense"),
                             ("ln2", "output.LayerNorm")):
            dense = not ours.startswith("ln")
            m[f"h{l}.{ours}.w"] = (f"{hf}{theirs}.weight", dense)  # PyTorch stores dense weights (out, in)
            m[f"h{l}.{ours}.b"] = (f"{hf}{theirs}.bias", False)
    m.update({"pool.w": ("bert.pooler.dense.weight", True), "pool.b": ("bert.pooler.dense.bias", False),
              "mlm.dense.w": ("cls.predictions.transform.dense.weight", True),
              "mlm.dense.b": ("cls.predictions.transform.dense.bias", False),
              "mlm.ln.w": ("cls.predictions.transform.LayerNorm.weight", False),
              "mlm.ln.b": ("cls.predictions.transform.LayerNorm.bias", False),
              "mlm.bias": ("cls.predictions.bias", False),
              "nsp.w": ("cls.seq_relationship.weight", True),  # (C, 2) here, (2, C) in transformers
              "nsp.b": ("cls.seq_relationship.bias", False),
              # fine-tuning heads (docs/bert-notes.md §9.1): classifier (C, K) / qa_outputs (C, 2) here
              "cls.w": ("classifier.weight", True), "cls.b": ("classifier.bias", False),
              "qa.w": ("qa_outputs.weight", True), "qa.b": ("qa_outputs.bias", False)})
    return m


def _qkv_names(l: int, kind: str) -> list[str]:
    """transformers' query/key/value names of layer l, in minibert's fused q|k|v order."""
    return [f"bert.encoder.layer.{l}.attention.self.{part}.{kind}" for part in ("query", "key", "value")]


def _num_layers(params) -> int:
    layers = {int(k[1:].split(".", 1)[0]) for k in params if k.startswith("h") and k[1:2].isdigit()}
    return max(layers) + 1 if layers else 0


def _minibert_shapes(config, heads) -> dict[str, tuple]:
    """param_shapes restricted to the encoder plus the given head groups."""
    return {k: s for k, s in param_shapes(config).items() if head_group(k) in (None, *heads)}


def hf_shapes(config: BertConfig, heads=HEAD_GROUPS) -> dict[str, tuple]:
    """Every transformers key (bert. prefix) a checkpoint with these head groups must contain,
    with its transformers shape."""
    simple = _simple_map(config.num_hidden_layers)
    shapes = {}
    for name, shape in _minibert_shapes(config, heads).items():
        if name in simple:
            key, transpose = simple[name]
            shapes[key] = shape[::-1] if transpose else shape
        else:  # fused qkv (C, 3C) / (3C,) -> three (C, C) / (C,)
            l, C = int(name[1:].split(".", 1)[0]), config.hidden_size
            kind, one = ("weight", (C, C)) if name.endswith(".w") else ("bias", (C,))
            shapes.update({key: one for key in _qkv_names(l, kind)})
    return shapes


def head_group(name: str) -> str | None:
    """'pool' / 'mlm' / 'nsp' for head parameters, None for the encoder."""
    group = name.split(".", 1)[0]
    return group if group in HEAD_GROUPS else None


def to_hf_state_dict(params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """minibert params (or grads) -> transformers names and layouts. Works on any subset of
    the heads (an encoder-only model has no pool./mlm./nsp. entries). Returns contiguous arrays
    in the input dtype (untransposed ones may share memory with `params`); the tied decoder
    keys are not emitted."""
    L = _num_layers(params)
    simple = _simple_map(L)
    state = {}
    for name, a in params.items():
        if name in simple:
            key, transpose = simple[name]
            state[key] = np.ascontiguousarray(a.T if transpose else a)
        elif name.endswith(".attn.qkv.w"):
            l = int(name[1:].split(".", 1)[0])
            for key, part in zip(_qkv_names(l, "weight"), np.split(a, 3, axis=1)):  # (C, 3C) -> 3 x (C, C)
                state[key] = np.ascontiguousarray(part.T)  # (C_in, C_out) -> (C_out, C_in)
        elif name.endswith(".attn.qkv.b"):
            l = int(name[1:].split(".", 1)[0])
            for key, part in zip(_qkv_names(l, "bias"), np.split(a, 3)):  # (3C,) -> 3 x (C,)
                state[key] = np.ascontiguousarray(part)
        elif name.startswith("lstm."):  # the LTR + BiLSTM fine-tuning ablation: minibert's own names and
            state["bilstm." + name[len("lstm."):]] = np.ascontiguousarray(a)  # layout (transformers has none)
        else:
            raise ValueError(f"parameter {name!r} has no transformers name")
    return state


def _strip_prefix(state: dict) -> dict:
    """Accept keys with or without the `bert.` base-model prefix (BertModel files have none)."""
    out = {}
    for key, a in state.items():
        if key.startswith(("embeddings.", "encoder.", "pooler.")):
            key = "bert." + key
        out[key] = a
    return out


def _cast(key: str, a: np.ndarray, dtype, transpose: bool = False) -> np.ndarray:
    """A fresh C-contiguous copy in `dtype` (transposed if asked), in a single pass."""
    a = np.asarray(a)
    if a.dtype.kind != "f":
        raise ValueError(f"tensor {key!r} has dtype {a.dtype}; expected float16, float32 or float64")
    out = np.empty(a.shape[::-1] if transpose else a.shape, dtype)
    out[...] = a.T if transpose else a
    return out


def present_heads(state: dict) -> tuple[str, ...]:
    """Which head groups a transformers state dict (bert.-prefixed keys) contains."""
    found = []
    if any(k.startswith("bert.pooler.") for k in state):
        found.append("pool")
    if any(k.startswith("cls.predictions.") for k in state):
        found.append("mlm")
    if any(k.startswith("cls.seq_relationship.") for k in state):
        found.append("nsp")
    return tuple(found)


def from_hf_state_dict(state: dict[str, np.ndarray], config: BertConfig, dtype=np.float32,
                       required_heads=()) -> dict[str, np.ndarray]:
    """transformers state dict -> minibert params in `dtype`.

    Accepts keys with or without `bert.`, ignores `position_ids`, accepts the tied
    `cls.predictions.decoder.*` keys (they must equal the tensors they are tied to). Head groups
    (pooler, MLM, NSP) are loaded when present; `required_heads` lists groups that must be.
    Missing tensors, shape mismatches and unexpected keys raise ValueError naming the key.
    """
    dtype = np.dtype(dtype)
    state = {k: v for k, v in _strip_prefix(state).items() if not k.endswith(IGNORED_KEYS)}
    task_params = _pop_task_heads(state, dtype)
    if "cls.predictions.bias" not in state and "cls.predictions.decoder.bias" in state:
        state["cls.predictions.bias"] = state["cls.predictions.decoder.bias"]  # older files name it so
    heads = tuple(sorted(set(present_heads(state)) | set(required_heads), key=HEAD_GROUPS.index))
    if "nsp" in heads and "pool" not in heads:
        raise ValueError("checkpoint has an NSP head (cls.seq_relationship) but no pooler (bert.pooler)")
    expected = hf_shapes(config, heads)  # transformers name -> shape
    for key, shape in expected.items():
        if key not in state:
            raise ValueError(f"checkpoint is missing tensor {key!r} (shape {shape})")
        if tuple(state[key].shape) != shape:
            raise ValueError(f"tensor {key!r} has shape {tuple(state[key].shape)} in the checkpoint, "
                             f"but the config needs {shape}")
    for tied, target in TIED_KEYS.items():
        if tied in state:
            a, b = np.asarray(state[tied]), np.asarray(state[target])
            if a.shape != b.shape or not np.array_equal(a, b):
                raise ValueError(f"{tied!r} differs from {target!r}; minibert ties the MLM decoder to the "
                                 f"word embeddings and cannot load an untied decoder")
    unexpected = sorted(set(state) - set(expected) - set(TIED_KEYS))
    if unexpected:
        more = f" (and {len(unexpected) - 5} more)" if len(unexpected) > 5 else ""
        raise ValueError(f"checkpoint has tensors minibert does not know: {unexpected[:5]}{more}")
    simple = _simple_map(config.num_hidden_layers)
    params = {}
    for name, shape in _minibert_shapes(config, heads).items():
        if name in simple:
            key, transpose = simple[name]
            params[name] = _cast(key, state[key], dtype, transpose)
        else:  # fused qkv: query|key|value side by side
            l = int(name[1:].split(".", 1)[0])
            kind = "weight" if name.endswith(".w") else "bias"
            fused = np.empty(shape, dtype)  # (C, 3C) or (3C,)
            for i, key in enumerate(_qkv_names(l, kind)):
                part = np.asarray(state[key])
                if part.dtype.kind != "f":
                    raise ValueError(f"tensor {key!r} has dtype {part.dtype}; expected float16, float32 or float64")
                C = part.shape[0]
                fused[..., i * C:(i + 1) * C] = part.T if kind == "weight" else part  # (C_out, C_in) -> (C_in, C_out)
            params[name] = fused
    params.update(task_params)
    return params


def check_state(state: dict, expected: dict[str, tuple], model_name: str) -> None:
    """A transformers state dict holds exactly the `expected` keys, each a float tensor of its
    shape: a ValueError names the first missing, misshapen or unknown tensor."""
    for key, shape in expected.items():
        if key not in state:
            raise ValueError(f"checkpoint is missing tensor {key!r} (shape {shape})")
        if tuple(state[key].shape) != shape or state[key].dtype.kind != "f":
            raise ValueError(f"tensor {key!r} is {state[key].dtype} {tuple(state[key].shape)} in the checkpoint, "
                             f"but the config needs float {shape}")
    unexpected = sorted(set(state) - set(expected))
    if unexpected:
        raise ValueError(f"checkpoint has tensors {model_name} does not know: {unexpected[:5]}")


def _pop_task_heads(state: dict, dtype) -> dict[str, np.ndarray]:
    """Remove a fine-tuning head (classifier.* or qa_outputs.*) from `state` -> minibert params
    cls.w (C, K) / cls.b (K,) or qa.w (C, 2) / qa.b (2,). The shapes must agree with each other."""
    simple = _simple_map(0)
    out = {}
    for prefix in ("cls", "qa"):
        w_key, b_key = simple[prefix + ".w"][0], simple[prefix + ".b"][0]
        if w_key not in state and b_key not in state:
            continue
        if w_key not in state or b_key not in state:
            raise ValueError(f"checkpoint has {w_key if w_key in state else b_key!r} but not "
                             f"{b_key if w_key in state else w_key!r}")
        w, b = np.asarray(state.pop(w_key)), np.asarray(state.pop(b_key))
        if w.ndim != 2 or b.shape != (w.shape[0],):
            raise ValueError(f"{w_key!r} has shape {w.shape} and {b_key!r} {b.shape}; expected (K, hidden) and (K,)")
        out[prefix + ".w"], out[prefix + ".b"] = _cast(w_key, w, dtype, transpose=True), _cast(b_key, b, dtype)
    if len(out) > 2:
        raise ValueError("checkpoint has both a classifier and a qa_outputs head")
    for key in [k for k in state if k.startswith("bilstm.")]:  # the LTR + BiLSTM ablation's layer
        out["lstm." + key[len("bilstm."):]] = _cast(key, np.asarray(state.pop(key)), dtype)
    return out


# ---------------------------------------------------------------------------------------------
# atomic files and safetensors

def config_to_hf_dict(config: BertConfig, architecture: str, dtype) -> dict:
    d = config.to_dict()
    dtype_name = np.dtype(dtype).name
    d.update({"architectures": [architecture], "model_type": "bert", "pad_token_id": 0,
              "position_embedding_type": "absolute", "use_cache": True, "classifier_dropout": None,
              "is_decoder": False, "add_cross_attention": False, "tie_word_embeddings": True,
              "dtype": dtype_name, "torch_dtype": dtype_name})
    return dict(sorted(d.items()))


def read_config_json(path: str | Path) -> dict:
    """A checkpoint's config.json as a dict: an error says the file is missing, not JSON, or not
    a JSON object. What its keys must be is for the model that reads it."""
    path = Path(path)
    if not path.is_file():
        what = "is not a regular file" if path.exists() else "does not exist"  # a directory or a FIFO
        raise FileNotFoundError(f"{path} {what}; a checkpoint directory needs config.json")
    return read_json_object(path)


def config_text(d: dict, key: str, default: str | None, path) -> str | None:
    """A string field of config.json (model_type, hidden_act, ...), checked to be one."""
    value = d.get(key, default)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{path}: {key} is {shown_value(value)} ({type(value).__name__}); it must be a string")
    return value


def refuse_decoder_flags(d: dict, path, model: str = "minibert") -> None:
    """config.json's is_decoder / add_cross_attention: booleans, and false (minibert's models are
    encoders). A value of another type is named as one, not read as true or false."""
    for flag in ("is_decoder", "add_cross_attention"):
        value = d.get(flag, False)
        if not isinstance(value, bool):
            raise ValueError(f"{path}: {flag} is {shown_value(value)} ({type(value).__name__}); it must be true or "
                             f"false")
        if value:
            raise ValueError(f"{path}: {flag}=true is not supported ({model} is an encoder)")


def config_architectures(d: dict, path) -> list[str]:
    """config.json's "architectures": a list of class names (empty when absent)."""
    archs = d.get("architectures") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise ValueError(f"{path}: architectures is {shown_value(archs)}; it must be a list of class names, "
                         f"e.g. [\"BertForSequenceClassification\"]")
    return archs


def read_config(path: str | Path, d: dict | None = None) -> tuple[BertConfig, str | None]:
    """config.json -> (BertConfig, architecture or None). Rejects what minibert cannot run.
    `d`: the file's contents when the caller has read them already (read_config_json)."""
    path = Path(path)
    d = read_config_json(path) if d is None else d
    model_type = config_text(d, "model_type", "bert", path)
    if model_type != "bert":
        raise ValueError(f"{path}: model_type {shown_value(model_type)} is not 'bert'" +
                         (" (load ALBERT checkpoints with minibert.AlbertForPreTraining)" if model_type == "albert" else ""))
    archs = config_architectures(d, path)
    if len(archs) > 1 or (archs and archs[0] not in ARCHITECTURES):
        raise ValueError(f"{path}: architecture {shown_value(archs)} is not supported; minibert reads "
                         f"{sorted(ARCHITECTURES)}")
    if config_text(d, "hidden_act", "gelu", path) not in ACTIVATIONS:
        raise ValueError(f"{path}: hidden_act {shown_value(d['hidden_act'])} is not supported; use one of "
                         f"{sorted(ACTIVATIONS)}")
    if config_text(d, "position_embedding_type", "absolute", path) != "absolute":
        raise ValueError(f"{path}: position_embedding_type {shown_value(d['position_embedding_type'])} is not "
                         f"supported (only 'absolute')")
    refuse_decoder_flags(d, path)
    if "vocab_size" not in d:
        raise ValueError(f"{path} has no vocab_size")
    try:
        config = BertConfig.from_dict(d)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path}: {e}") from None
    return config, (archs[0] if archs else None)


# ---------------------------------------------------------------------------------------------
# directories

def architecture_of(model) -> str:
    if getattr(model, "architecture", None):  # the fine-tuning classes name theirs
        return model.architecture
    heads = set(getattr(model, "heads", HEAD_GROUPS))
    if {"pool", "mlm", "nsp"} <= heads:
        return "BertForPreTraining"
    if heads == {"mlm"}:
        return "BertForMaskedLM"
    if heads <= {"pool"}:
        return "BertModel"
    raise ValueError(f"no transformers architecture has exactly the heads {sorted(heads)}")


def save_pretrained(model, directory: str | Path, vocab=None) -> Path:
    """Write config.json, model.safetensors and (when a vocab is known) vocab.txt +
    tokenizer_config.json into `directory`, each atomically. `vocab` is a path to copy, a
    list of tokens or a BertTokenizer; default: the model's own `vocab_path`, if any."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    arch = architecture_of(model)
    state = to_hf_state_dict(model.params)
    if arch == "BertModel":
        state = {k[len("bert."):]: v for k, v in state.items()}  # the base model has no prefix
    save_tensors_atomic(state, directory / WEIGHTS_NAME, {"format": "pt"})
    hf = config_to_hf_dict(model.config, arch, model.dtype)
    if arch in TASK_HEADS:
        hf.update(model.task_config())  # num_labels (implied by id2label), id2label, label2id, problem_type
    write_text_atomic(directory / CONFIG_NAME, json.dumps(hf, indent=2) + "\n")
    save_vocab_files(model, directory, vocab)
    return directory


def save_vocab_files(model, directory: Path, vocab=None) -> None:
    """Write vocab.txt + tokenizer_config.json (when a vocab is known) for any model with
    `config.vocab_size` / `config.max_position_embeddings` (BERT's, ALBERT's). `vocab` is a path,
    a list of tokens or a BertTokenizer; default: the model's own `vocab_path`, if any."""
    vocab = getattr(model, "vocab_path", None) if vocab is None else vocab
    do_lower_case = getattr(vocab, "do_lower_case", getattr(model, "do_lower_case", True))
    vocab = getattr(vocab, "ids_to_tokens", vocab)  # a BertTokenizer: its tokens in id order
    if vocab is not None:
        _save_vocab(vocab, directory / VOCAB_NAME, model.config.vocab_size)
        tok = {"tokenizer_class": "BertTokenizer", "do_lower_case": bool(do_lower_case),
               "model_max_length": model.config.max_position_embeddings, "pad_token": "[PAD]",
               "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"}
        write_text_atomic(directory / TOKENIZER_CONFIG_NAME, json.dumps(tok, indent=2) + "\n")


def _save_vocab(vocab, dest: Path, vocab_size: int) -> None:
    if isinstance(vocab, (str, Path)):
        src = Path(vocab)
        if not src.is_file():
            raise FileNotFoundError(f"vocab file {src} does not exist")
        if src.resolve() != dest.resolve():
            atomic_write(dest, lambda tmp: shutil.copyfile(src, tmp))
        return
    tokens = list(vocab)
    if len(tokens) != vocab_size:
        raise ValueError(f"vocab has {len(tokens)} tokens but the model's vocab_size is {vocab_size}")
    bad = [t for t in tokens if not isinstance(t, str) or "\n" in t or not t.strip()]
    if bad:
        raise ValueError(f"vocab tokens must be non-empty single-line strings, got {bad[0]!r}")
    write_text_atomic(dest, "".join(t + "\n" for t in tokens))


class Pretrained(NamedTuple):
    config: BertConfig
    params: dict  # minibert names -> arrays in the requested dtype (head groups as present)
    architecture: str | None  # from config.json
    vocab_path: Path | None  # the directory's vocab.txt, if it has one
    do_lower_case: bool  # from tokenizer_config.json (default True)
    task_config: dict  # config.json's fine-tuning keys (id2label, label2id, problem_type), if any


def model_directory(directory: str | Path) -> Path:
    """The directory a model name points to (io/hub.py: a folder, a sentence-transformers folder
    or a hub id), checked to be a directory."""
    directory = resolve_model_dir(directory)
    if directory.is_file():
        refuse_pickle(directory)
        raise ValueError(f"{directory} is a file; pass the checkpoint directory")
    if not directory.is_dir():
        raise FileNotFoundError(f"checkpoint directory {directory} does not exist")
    return directory


def weight_files(directory: Path) -> list[Path]:
    """The safetensors file(s) of a checkpoint: model.safetensors, or the shards that
    model.safetensors.index.json lists (each a file in the directory itself)."""
    weights = directory / WEIGHTS_NAME
    if weights.is_file():
        return [weights]
    index = directory / INDEX_NAME
    if index.is_file():
        weight_map = read_json_object(index).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ValueError(f"{index}: weight_map must be a non-empty object {{tensor name: file}}")
        bad = next((v for v in weight_map.values() if not isinstance(v, str)), None)
        if bad is not None:  # a list or an object cannot even be compared with the others
            raise ValueError(f"{index}: weight_map value {json.dumps(bad)[:100]} must be a shard's file name "
                             f"(a string)")
        names = sorted(set(weight_map.values()))
        for name in names:
            if not isinstance(name, str) or Path(name).name != name or not name.endswith(".safetensors"):
                raise ValueError(f"{index}: shard {name!r} must be a .safetensors file in {directory}")
        return [directory / name for name in names]
    others = [p.name for p in directory.iterdir() if p.suffix.lower() in PICKLE_SUFFIXES + (".h5", ".msgpack")]
    hint = (f" It has {others}: minibert never unpickles (a pickle can run arbitrary code) and reads only "
            f"safetensors; convert with transformers' model.save_pretrained(dir, safe_serialization=True).") \
        if others else ""
    raise FileNotFoundError(f"{directory} has no {WEIGHTS_NAME} (nor {INDEX_NAME}).{hint}")


def read_weights(directory: Path, layers: int, verify: bool = True,
                 layer_pattern: str = r"^(?:[a-z]+\.)?encoder\.layer\.(\d+)\.") -> tuple[dict, Path]:
    """All tensors of a checkpoint's weight file(s) -> (tensors, the path to name in messages).
    The headers are checked first: config.json's layer count against the layers they hold, and
    no tensor in two shards, before any tensor is read."""
    files = weight_files(directory)
    where = files[0] if len(files) == 1 else directory / INDEX_NAME
    headers = {}
    for f in files:
        for name in read_safetensors_header(f)[0]:
            if name != "__metadata__" and name in headers:
                raise ValueError(f"{where}: tensor {name!r} is in both {headers[name].name} and {f.name}")
            headers[name] = f
    check_layer_count(headers, layers, layer_pattern, where)  # before the tensors are read and their shapes planned
    tensors: dict = {}
    for f in files:
        part, _ = load_tensors(f, verify=verify)
        if verify:
            check_finite(part, f)
        tensors.update(part)
    return tensors, where


def read_pretrained(directory: str | Path, dtype=np.float32, verify: bool = True) -> Pretrained:
    """Read a transformers-format directory: config, parameters (checked: names, shapes, finite
    and matching their recorded digest with `verify`), vocab and casing. minibert.bert's
    load_pretrained / BertForPreTraining.from_pretrained build the model from it."""
    directory = model_directory(directory)
    weight_files(directory)  # a missing weight file is named before the config is read
    raw = read_config_json(directory / CONFIG_NAME)
    config, arch = read_config(directory / CONFIG_NAME, raw)
    tensors, weights = read_weights(directory, config.num_hidden_layers, verify)
    required = ARCHITECTURES[arch] if arch else ()
    try:
        params = from_hf_state_dict(tensors, config, dtype, required_heads=required)
    except ValueError as e:
        raise ValueError(f"{weights}: {e}") from None
    vocab = directory / VOCAB_NAME
    refuse_special_file(vocab)  # a vocab.txt that is a device or a FIFO is named as such, not as missing
    if arch in TASK_HEADS and TASK_HEADS[arch][0] + ".w" not in params:
        raise ValueError(f"{weights}: config.json says {arch} but the file has no {TASK_HEADS[arch][1]} tensors")
    return Pretrained(config, params, arch, vocab if vocab.is_file() else None, read_casing(directory),
                      task_config(raw, TASK_CONFIG_KEYS, directory / CONFIG_NAME))


def task_config(raw: dict, keys: tuple[str, ...], path: Path) -> dict:
    """config.json's fine-tuning keys (`keys`). num_labels is not one of them (id2label says it,
    as transformers derives it), but a num_labels that differs from id2label's count is refused:
    which of the two is meant?"""
    labels = raw.get("id2label")
    if "num_labels" in raw and isinstance(labels, dict) and raw["num_labels"] != len(labels):
        raise ValueError(f"{path}: num_labels is {shown_value(raw['num_labels'], 40)} but id2label names "
                         f"{len(labels)} classes; remove num_labels or make the two agree")
    return {k: raw[k] for k in keys if k in raw}


def model_tokenizer(directory: str | Path, config, do_lower_case: bool = True, what: str = "") -> BertTokenizer:
    """The tokenizer of a model directory, checked against the model it was loaded with: vocab.txt
    must be there (a regular file) and hold exactly config.vocab_size tokens. A vocabulary of
    another model beside the checkpoint would give ids the embedding table never learnt (a
    smaller one) or has no row for (a larger one): every command that loads a model directory
    (predict, evaluate, fill-mask, attention, finetune --init, nsp-baseline's run) gets it here,
    with the same message. `what` names the directory in it ("--init runs/x")."""
    directory = Path(directory)
    vocab = directory / VOCAB_NAME
    name = what or str(directory)
    refuse_special_file(vocab)  # a FIFO or a device is named as such, not as missing
    if not vocab.is_file():
        raise ValueError(f"{name} has no {VOCAB_NAME}: the model's vocabulary is needed to tokenize text (a model "
                         f"directory holds config.json, model.safetensors and vocab.txt)")
    tokenizer = BertTokenizer(vocab, do_lower_case=do_lower_case)
    if len(tokenizer) != config.vocab_size:
        raise ValueError(f"vocab/checkpoint mismatch in {name}: vocab.txt has {len(tokenizer):,} tokens but "
                         f"config.json says vocab_size {config.vocab_size:,}; the model was trained with a different "
                         f"vocabulary (put its own vocab.txt beside it)")
    return tokenizer


def check_layer_count(header: dict, layers: int, pattern: str, path) -> None:
    """config.json's num_hidden_layers against the layers a safetensors header holds (the
    distinct numbers `pattern`'s group finds in its tensor names): a config that asks for more
    or fewer layers than the file has is an error naming both, before anything is allocated."""
    found = {int(m.group(1)) for name in header if (m := re.search(pattern, name))}
    if found and len(found) != layers:
        raise ValueError(f"{path}: config.json says num_hidden_layers={layers}, but the file holds "
                         f"{len(found)} layer(s)")


def read_do_lower_case(path: Path) -> bool | None:
    """tokenizer_config.json's do_lower_case (None: the file or the key is absent)."""
    if not path.is_file():
        return None
    d = read_json(path)
    value = d.get("do_lower_case") if isinstance(d, dict) else None
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"{path}: do_lower_case must be true or false, got {shown_value(value)}")
    return value


def read_casing(directory: Path) -> bool:
    """Whether a model's tokenizer lower-cases, read from what the directory says, never guessed:
    tokenizer_config.json's do_lower_case; else tokenizer.json's normalizer (its `lowercase`);
    else the vocabulary itself: an uncased vocabulary was learnt from lower-cased text, so almost
    none of its tokens holds a capital letter (bert-base-uncased: 2 of 30,522, both 'ℝ'), while a
    cased one has them in about a third; over 1% means cased. No vocabulary and no file: True
    (what BERT's tokenizer does by default)."""
    directory = Path(directory)
    said = read_do_lower_case(directory / TOKENIZER_CONFIG_NAME)
    if said is not None:
        return said
    fast = directory / "tokenizer.json"
    if fast.is_file():
        normalizer = read_json_object(fast).get("normalizer")
        if isinstance(normalizer, dict) and isinstance(normalizer.get("lowercase"), bool):
            return normalizer["lowercase"]
    vocab = directory / VOCAB_NAME
    if vocab.is_file():
        with open(vocab, encoding="utf-8", errors="replace") as f:
            tokens = [t for t in (line.strip() for line in f) if t and not (t.startswith("[") and t.endswith("]"))]
        return sum(any(c.isupper() for c in t) for t in tokens) <= 0.01 * len(tokens)
    return True
