"""curves.png: the training and held-out curves of a run, drawn from its metrics.jsonl, with the
baselines a model must beat to have learned anything (from the held-out data, when given)."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from minibert.io.atomic import atomic_write
from minibert.loop import rundir as run_dir_mod


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


def read_metrics(path: str | Path) -> list[dict]:
    """The records of metrics.jsonl (a last line cut short by a crash is skipped)."""
    return run_dir_mod.read_jsonl(Path(path))[0]


def plot_curves(metrics_path: str | Path, out: str | Path, base: Baselines | None = None) -> Path:
    """curves.png: loss, MLM accuracy, NSP accuracy and lr (columns) against step (top row) and
    wall time (bottom row); training curves as lines, held-out evaluations as dots. Dashed lines
    mark the baselines: NSP chance (50%) always, and with `base` the accuracy of always giving
    the most frequent MLM token and the most frequent NSP label on the held-out set."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    recs = read_metrics(metrics_path)
    train = [r for r in recs if r["type"] == "train"]
    evals = [r for r in recs if r["type"] == "eval"]
    phases = [r for r in recs if r["type"] == "phase"]  # sequence-length switches
    fig = Figure(figsize=(16, 7))
    FigureCanvasAgg(fig)
    panels = (("loss", "loss (MLM + NSP)", "loss"), ("mlm_acc", "MLM accuracy", "mlm_acc"),
              ("nsp_acc", "NSP accuracy", "nsp_acc"), ("lr", "learning rate", None))
    for row, (xkey, xlabel) in enumerate((("step", "step"), ("time", "wall time (s)"))):
        for col, (tkey, title, ekey) in enumerate(panels):
            ax = fig.add_subplot(2, 4, row * 4 + col + 1)
            if train:
                ax.plot([r[xkey] for r in train], [r[tkey] for r in train], lw=1, label="train")
            if ekey and evals:
                ekey2 = "mlm_loss" if tkey == "loss" else ekey
                label = "held-out MLM loss" if tkey == "loss" else "held-out"
                ax.plot([r[xkey] for r in evals], [r[ekey2] for r in evals], "o-", ms=4, label=label)
                if tkey == "loss":
                    ax.plot([r[xkey] for r in train], [r["mlm_loss"] for r in train], lw=1, alpha=0.6,
                            label="train MLM loss")
            if tkey == "mlm_acc" and base is not None:
                ax.axhline(base.mlm_acc, color="black", ls="--", lw=0.9,
                           label=f"always {base.mlm_token!r}: {base.mlm_acc:.1%}")
            if tkey == "nsp_acc":
                ax.axhline(0.5, color="gray", ls=":", lw=0.9, label="chance: 50%")
                if base is not None:
                    ax.axhline(base.nsp_acc, color="black", ls="--", lw=0.9,
                               label=f"always {base.nsp_label}: {base.nsp_acc:.1%}")
            for p in phases:
                ax.axvline(p[xkey], color="gray", ls="--", lw=0.8,
                           label=f"length {p['from_seq_length']} -> {p['max_seq_length']}")
            ax.set_xlabel(xlabel)
            ax.set_title(title)
            ax.grid(alpha=0.3)
            if col < 3 and (train or evals or (col > 0 and (base is not None or tkey == "nsp_acc"))):
                ax.legend(fontsize=8)
    fig.subplots_adjust(left=0.05, right=0.99, bottom=0.08, top=0.95, wspace=0.25, hspace=0.35)
    # the temporary file's name ends in .tmp, so the format is given; atomic_write removes it if
    # the drawing fails (run_dir.clean_interrupted_saves, after a crash)
    return atomic_write(out, lambda tmp: fig.savefig(tmp, dpi=80, format="png"))
