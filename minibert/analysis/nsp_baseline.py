"""What NSP measures on a corpus: a word-overlap baseline for next-sentence prediction.

A "random next" segment B comes from another document, so it tends to share fewer words with
segment A than the true continuation does. ALBERT (Lan et al., 2019) argued that NSP mixes
topic prediction, which this cue solves, with coherence prediction, and that the topic part is
the easy one; RoBERTa (Liu et al., 2019) found that dropping NSP does not hurt. This module measures
how far the cue alone goes on a run's data: a logistic regression on a few word-overlap
features of A and B, computed on the inputs exactly as the model sees them (masks included),
fit on training pairs and scored on the held-out pairs.

    python -m minibert nsp-baseline runs/tiny     (the command: tools/look_inside.py)

The features per pair (distinct token ids; [PAD], [UNK], [CLS], [SEP] and [MASK] left out):
the share of B's tokens that occur in A and of A's that occur in B, the same two shares
weighted by each token's idf (rare shared tokens, such as an identifier, count more), the
largest idf among the shared tokens, and log(1 + size) of A and of B. The model gets them with
their pairwise products, so it can combine them; it is fit by plain gradient descent.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

FEATURES = ("share of B in A", "share of A in B", "idf share of B in A", "idf share of A in B",
            "max idf shared", "log(1+|A|)", "log(1+|B|)")


def token_sets(input_ids: np.ndarray, segment_ids: np.ndarray, input_mask: np.ndarray,
               special_ids) -> list[tuple[set, set]]:
    """(distinct ids of segment A, of segment B) per example, special tokens left out."""
    special = np.isin(input_ids, np.asarray(sorted(special_ids)))  # (N, T)
    real = (input_mask > 0) & ~special  # (N, T)
    return [(set(ids[r & (s == 0)].tolist()), set(ids[r & (s == 1)].tolist()))
            for ids, s, r in zip(input_ids, segment_ids, real)]


def document_idf(pairs: list[tuple[set, set]], vocab_size: int) -> np.ndarray:
    """idf[t] = log((n + 1) / (df[t] + 1)), df counted over the examples (A and B together)."""
    df = np.zeros(vocab_size)  # (V,)
    for a, b in pairs:
        df[list(a | b)] += 1
    return np.log((len(pairs) + 1) / (df + 1))


def overlap_features(pairs: list[tuple[set, set]], idf: np.ndarray) -> np.ndarray:
    """-> (N, len(FEATURES)) float64, in the order of FEATURES."""
    out = np.zeros((len(pairs), len(FEATURES)))
    for n, (a, b) in enumerate(pairs):
        shared = list(a & b)
        w_shared, w_a, w_b = idf[shared].sum(), idf[list(a)].sum(), idf[list(b)].sum()
        out[n] = (len(shared) / max(len(b), 1), len(shared) / max(len(a), 1),
                  w_shared / w_b if w_b > 0 else 0.0, w_shared / w_a if w_a > 0 else 0.0,
                  idf[shared].max() if shared else 0.0, np.log1p(len(a)), np.log1p(len(b)))
    return out


def _expand(z: np.ndarray) -> np.ndarray:
    """Standardized features z (N, k) -> [z, z_i * z_j for i <= j, 1]: (N, k + k(k+1)/2 + 1)."""
    k = z.shape[1]
    prods = [z[:, i:i + 1] * z[:, j:j + 1] for i in range(k) for j in range(i, k)]
    return np.hstack([z, *prods, np.ones((z.shape[0], 1))])


class Logistic(NamedTuple):
    mean: np.ndarray  # (k,) of the training features
    std: np.ndarray  # (k,)
    w: np.ndarray  # (k + k(k+1)/2 + 1,)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """(N, k) features -> (N,) predicted labels (1 = random next)."""
        return (_expand((x - self.mean) / self.std) @ self.w > 0).astype(np.int64)


def fit_logistic(x: np.ndarray, y: np.ndarray, steps: int = 3000, lr: float = 0.5,
                 l2: float = 1e-4) -> Logistic:
    """Full-batch gradient descent on the mean log loss + l2/2 |w|^2; deterministic."""
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = _expand((x - mean) / std)  # (N, D)
    w = np.zeros(z.shape[1])  # (D,)
    yf = y.astype(np.float64)
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))  # (N,) P(random next)
        w -= lr * (z.T @ (p - yf) / len(yf) + l2 * w)
    return Logistic(mean, std, w)


class BaselineResult(NamedTuple):
    train_acc: float
    heldout_acc: float
    heldout_majority: float  # accuracy of always answering the more frequent label
    train_examples: int
    heldout_examples: int


def nsp_overlap_baseline(train: dict[str, np.ndarray], heldout: dict[str, np.ndarray], vocab_size: int,
                         special_ids, max_train: int = 40_000) -> BaselineResult:
    """Fit on the first `max_train` training examples (the generator shuffled them), score both."""
    train = {k: v[:max_train] for k, v in train.items()}
    cols = ("input_ids", "segment_ids", "input_mask")
    pairs_tr = token_sets(*(train[c] for c in cols), special_ids)
    pairs_he = token_sets(*(heldout[c] for c in cols), special_ids)
    idf = document_idf(pairs_tr, vocab_size)
    y_tr, y_he = train["next_sentence_labels"], heldout["next_sentence_labels"]
    x_tr = overlap_features(pairs_tr, idf)  # (N_train, k)
    model = fit_logistic(x_tr, y_tr)
    acc_tr = float((model.predict(x_tr) == y_tr).mean())
    acc_he = float((model.predict(overlap_features(pairs_he, idf)) == y_he).mean())
    majority = float(max(y_he.mean(), 1.0 - y_he.mean()))
    return BaselineResult(acc_tr, acc_he, majority, len(y_tr), len(y_he))
