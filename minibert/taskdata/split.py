"""A dev set split off one labelled file: stratified by label, the same for the same seed.

    train_idx, dev_idx = stratified_split(labels, 0.2, seed=0)

Each label keeps its share: of a label's n examples, round(n * fraction) go to dev (at least one,
and at least one stays in training), chosen by a permutation of that label's examples drawn from
NumPy's PCG64 seeded with the seed and the label's CRC-32, so the split depends only on the labels, their order, the fraction
and the seed (not on the machine, nor on the labels' other examples). Both index lists come back
in the file's order. A label with fewer than two examples cannot be in both halves: the error
names it (and every other such label) with its count.
"""
from __future__ import annotations

import math
import zlib

import numpy as np


def stratified_split(labels, fraction: float, seed: int, what: str = "the training file") -> tuple[list[int], list[int]]:
    """Example labels (any hashable values, in file order) -> (train indices, dev indices)."""
    if not (isinstance(fraction, (int, float)) and math.isfinite(fraction) and 0 < fraction < 1):
        raise ValueError(f"--dev-split {fraction}: the share of examples kept for dev must be between 0 and 1 "
                         f"(e.g. 0.2)")
    labels = list(labels)
    by_label: dict = {}
    for i, label in enumerate(labels):
        by_label.setdefault(label, []).append(i)
    rare = {label: len(idx) for label, idx in by_label.items() if len(idx) < 2}
    if rare:
        named = ", ".join(f"{label!r} ({n} example)" for label, n in sorted(rare.items(), key=lambda kv: str(kv[0])))
        raise ValueError(f"--dev-split: {what} has too few examples of {named} to put one in both training and dev; "
                         f"add examples of it, remove it, or give a dev file with --dev")
    dev = []
    for label, idx in by_label.items():  # one stream per label, keyed by its name: the other labels change nothing
        n_dev = min(max(1, round(len(idx) * fraction)), len(idx) - 1)
        rng = np.random.default_rng([seed, zlib.crc32(str(label).encode("utf-8"))])
        dev += [idx[j] for j in rng.permutation(len(idx))[:n_dev]]
    chosen = set(dev)
    return [i for i in range(len(labels)) if i not in chosen], sorted(dev)
