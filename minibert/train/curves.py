"""What a pretraining run's curves.png shows (loop/curves.py draws it): its panels, and the
baselines a model must beat to have learned anything (from the held-out data, when given)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from minibert.loop.curves import Panel, Series


class Baselines(NamedTuple):
    """What answers that ignore the input score on the held-out set."""

    mlm_acc: float  # MLM accuracy of always predicting the most frequent masked token ...
    mlm_token: str  # ... which is this token
    nsp_acc: float  # NSP accuracy of always answering the more frequent label ...
    nsp_label: str  # ... "random-next" or "IsNext"


def baselines(feats: dict[str, np.ndarray], ids_to_tokens: list[str] | None = None) -> Baselines:
    """The constant-answer baselines of held-out features (the arrays evaluate() reads).

    MLM: the share of the real predictions (weight > 0) whose label is the most frequent label.
    NSP: the share of the more frequent label; Google's generator makes random-next pairs more
    often than half (a chunk holding one segment always gets a random B), so this is above 50%."""
    labels = feats["masked_lm_ids"][feats["masked_lm_weights"] > 0]  # (n,) every real prediction
    counts = np.bincount(labels) if labels.size else np.zeros(1, dtype=np.int64)  # (max id + 1,)
    top = int(counts.argmax())
    mlm_acc = float(counts[top] / max(labels.size, 1))
    nsp = np.asarray(feats["next_sentence_labels"])  # (N,) 1 = random next
    random_share = float(nsp.mean()) if nsp.size else 0.5
    nsp_label = "random-next" if random_share >= 0.5 else "IsNext"
    token = ids_to_tokens[top] if ids_to_tokens is not None and top < len(ids_to_tokens) else f"id {top}"
    return Baselines(mlm_acc, token, max(random_share, 1.0 - random_share), nsp_label)


def pretraining_panels(base: Baselines | None = None, objective: str = "mlm_nsp", pair: str | None = "NSP"
                       ) -> list[Panel]:
    """curves.png of a pretraining run: loss, MLM accuracy, NSP (SOP) accuracy and lr; training as
    lines, held-out evaluations as dots. Reference lines: NSP chance (50%) always, and with
    `base` the accuracy of always giving the most frequent MLM token and the most frequent NSP
    label on the held-out set. `pair`: "NSP", "SOP", or None for single-segment sequences (no
    pair panel); without NSP in the objective the pair head is untrained and not drawn either."""
    lm = "next-token (LTR)" if objective == "ltr" else "MLM"
    mlm_lines = (base.mlm_acc, f"always {base.mlm_token!r}: {base.mlm_acc:.1%}", "--") if base else None
    nsp_lines = [(0.5, "chance: 50%", ":")]
    if base is not None:
        nsp_lines.append((base.nsp_acc, f"always {base.nsp_label}: {base.nsp_acc:.1%}", "--"))
    with_pair = pair is not None and objective == "mlm_nsp"
    panels = [Panel(f"loss ({lm} + {pair})" if with_pair else f"loss ({lm})",
                    (Series("loss"), Series("mlm_loss", "eval", f"held-out {lm} loss"),
                     Series("mlm_loss", label=f"train {lm} loss"))),
              Panel(f"{lm} accuracy", (Series("mlm_acc"), Series("mlm_acc", "eval")),
                    (mlm_lines,) if mlm_lines else ())]
    if with_pair:
        panels.append(Panel(f"{pair} accuracy", (Series("nsp_acc"), Series("nsp_acc", "eval")), tuple(nsp_lines)))
    return panels + [Panel("learning rate", (Series("lr", label=""),))]


WALL = (("step", "step"), ("time", "wall time (s)"))  # pretraining draws each panel against both
