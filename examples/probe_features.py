"""What does a pretrained encoder know about a sentence task before fine-tuning? Frozen-feature probes.

For each model given (a minibert run directory, or `random:DIR`, DIR's architecture and vocabulary
with fresh weights, the matched random-init control), this reads N training sentences and the
whole dev set of a GLUE single-sentence task (SST-2's `label<TAB>sentence` files), runs the frozen
encoder once, and fits a ridge classifier on each layer's features: the [CLS] vector, the mean of
the sentence's token vectors, and (last layer) the pooler's tanh output. Dev accuracy of each
probe says where the task's information lies and whether [CLS] carries it. It also prints the
state of [CLS] (how alike its vectors are across sentences) and how the vocabulary cuts the dev
words into pieces.

    python examples/probe_features.py --data SST-2 runs/sst2-indomain random:runs/sst2-indomain runs/tiny

A probe is a closed-form ridge regression on standardised features, its penalty chosen by
5-fold cross-validation on the training sentences (never on dev), thresholded at 0.5.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

for var in ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402

PENALTIES = (1e-1, 1e0, 1e1, 1e2, 1e3, 1e4)


def read_tsv(path: Path) -> tuple[list[str], np.ndarray]:
    """SST-2's `label<TAB>sentence` (or `sentence<TAB>label`) file -> sentences, labels (N,)."""
    lines = [l.split("\t") for l in path.read_text(encoding="utf-8").splitlines() if l.strip()]
    header, rows = lines[0], lines[1:]
    li = header.index("label")
    return [r[1 - li] for r in rows], np.array([int(r[li]) for r in rows])


def load(spec: str, seed: int):
    """`DIR` -> its pretrained model; `random:DIR` -> DIR's config and vocabulary, fresh weights."""
    from minibert.bert import BertForPreTraining
    from minibert.text.tokenizer import BertTokenizer

    random = spec.startswith("random:")
    directory = Path(spec.split(":", 1)[1] if random else spec)
    model = BertForPreTraining.from_pretrained(directory)
    if random:
        model = BertForPreTraining(model.config, seed=seed)
    return model, BertTokenizer(directory / "vocab.txt", do_lower_case=True)


def features(model, tokenizer, texts: list[str], T: int = 64, batch: int = 64) -> dict[str, np.ndarray]:
    """Per layer l (0 = embeddings): 'cls{l}' (N, C) and 'mean{l}' (N, C); 'pool' (N, C)."""
    from minibert.model import block_forward, embeddings_forward, pooler_forward

    p, cfg, ops = model.params, model.config, model.ops
    out: dict[str, list] = {}
    for s in range(0, len(texts), batch):
        enc = [tokenizer.encode(t, max_length=T) for t in texts[s:s + batch]]
        L = max(len(i) for i, _ in enc)
        ids = np.zeros((len(enc), L), np.int64)  # (b, L) padded with [PAD] = 0
        mask = np.zeros((len(enc), L), np.int64)  # (b, L)
        for r, (i, _) in enumerate(enc):
            ids[r, :len(i)], mask[r, :len(i)] = i, 1
        x, _ = embeddings_forward(p, cfg, ids, np.zeros_like(ids), None, ops)  # (b, L, C)
        w = (mask / mask.sum(1, keepdims=True))[..., None]  # (b, L, 1) mean over real tokens
        for l in range(cfg.num_hidden_layers + 1):
            if l:
                x, _ = block_forward(p, cfg, l - 1, x, mask, None, ops)  # (b, L, C)
            out.setdefault(f"cls{l}", []).append(x[:, 0].astype(np.float64))
            out.setdefault(f"mean{l}", []).append((x * w).sum(1).astype(np.float64))
        if "pool.w" in p:
            pooled, _ = pooler_forward(p, x, ops)  # (b, C)
            out.setdefault("pool", []).append(pooled.astype(np.float64))
    return {k: np.concatenate(v) for k, v in out.items()}


def ridge_probe(xtr, ytr, xdev, ydev, seed=0) -> tuple[float, float]:
    """Standardise, pick the ridge penalty by 5-fold CV on train, refit -> (dev accuracy, penalty)."""
    mu, sd = xtr.mean(0), xtr.std(0) + 1e-8
    xtr, xdev = (xtr - mu) / sd, (xdev - mu) / sd

    def fit(x, y, lam):
        xb = np.hstack([x, np.ones((len(x), 1))])  # (n, C + 1) with a bias column
        reg = lam * np.eye(xb.shape[1])
        reg[-1, -1] = 0.0
        return np.linalg.solve(xb.T @ xb + reg, xb.T @ (2.0 * y - 1.0))  # targets -1 / +1

    def acc(wt, x, y):
        return float(((np.hstack([x, np.ones((len(x), 1))]) @ wt > 0) == (y == 1)).mean())

    folds = np.random.default_rng(seed).permutation(len(xtr)) % 5
    cv = [np.mean([acc(fit(xtr[folds != k], ytr[folds != k], lam), xtr[folds == k], ytr[folds == k])
                   for k in range(5)]) for lam in PENALTIES]
    lam = PENALTIES[int(np.argmax(cv))]
    return acc(fit(xtr, ytr, lam), xdev, ydev), lam


def cls_state(f: dict, C: int, last: int) -> str:
    """How alike the last layer's [CLS] vectors are across sentences, against the mean-pooled ones."""
    parts = []
    for key in (f"cls{last}", f"mean{last}", "pool"):
        if key not in f:
            continue
        v = f[key]
        u = v / (np.linalg.norm(v, axis=1, keepdims=True) + 1e-12)
        cos = float((u.sum(0) @ u.sum(0) - len(u)) / (len(u) * (len(u) - 1)))  # mean pairwise cosine
        s = np.linalg.svd(v - v.mean(0), compute_uv=False)
        top = float(s[0] ** 2 / (s ** 2).sum())
        extra = f", |tanh| > 0.99 in {100 * float((np.abs(v) > 0.99).mean()):.1f}%" if key == "pool" else ""
        parts.append(f"{key}: mean cosine {cos:.3f}, top direction {100 * top:.1f}% of the variance{extra}")
    return "; ".join(parts)


def coverage(tokenizer, texts: list[str]) -> str:
    words = [w for t in texts for w in tokenizer.basic_tokenize(t)] if hasattr(tokenizer, "basic_tokenize") \
        else [w for t in texts for w in t.split()]
    pieces = [tokenizer.tokenize(w) for w in words]
    whole = sum(len(p) == 1 and p[0] != "[UNK]" for p in pieces)
    unk = sum("[UNK]" in p for p in pieces)
    return (f"{len(words):,} dev words: {100 * whole / len(words):.1f}% one piece, "
            f"{sum(map(len, pieces)) / len(words):.2f} pieces a word, {100 * unk / len(words):.2f}% [UNK]")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", help="run directories, or random:DIR for DIR's random-init control")
    ap.add_argument("--data", required=True, help="a folder with train.tsv and dev.tsv (SST-2's format)")
    ap.add_argument("--train", type=int, default=2000, help="training sentences for the probes")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    texts, labels = read_tsv(Path(a.data) / "train.tsv")
    pick = np.random.default_rng(a.seed).choice(len(texts), size=min(a.train, len(texts)), replace=False)
    tr_texts, ytr = [texts[i] for i in pick], labels[pick]
    dev_texts, ydev = read_tsv(Path(a.data) / "dev.tsv")
    print(f"probes: {len(tr_texts):,} training sentences, {len(dev_texts)} dev; majority class "
          f"{100 * max(ydev.mean(), 1 - ydev.mean()):.1f}%")
    for spec in a.models:
        model, tok = load(spec, a.seed)
        ftr, fdev = features(model, tok, tr_texts), features(model, tok, dev_texts)
        L = model.config.num_hidden_layers
        print(f"\n{spec}  ({coverage(tok, dev_texts)})")
        for l in range(L + 1):
            c, _ = ridge_probe(ftr[f"cls{l}"], ytr, fdev[f"cls{l}"], ydev)
            m, _ = ridge_probe(ftr[f"mean{l}"], ytr, fdev[f"mean{l}"], ydev)
            print(f"  layer {l}{' (embeddings)' if l == 0 else ''}: [CLS] {100 * c:.1f}   mean-pooled {100 * m:.1f}")
        if "pool" in ftr:
            pz, _ = ridge_probe(ftr["pool"], ytr, fdev["pool"], ydev)
            print(f"  pooler (tanh of [CLS]): {100 * pz:.1f}")
        print(f"  state on dev: {cls_state(fdev, model.config.hidden_size, L)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
