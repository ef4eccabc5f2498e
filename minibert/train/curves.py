"""curves.png: the training and held-out curves of a run, drawn from its metrics.jsonl."""
from __future__ import annotations

from pathlib import Path

from minibert import run_dir as run_dir_mod
from minibert.checkpoint import atomic_write


def read_metrics(path: str | Path) -> list[dict]:
    """The records of metrics.jsonl (a last line cut short by a crash is skipped)."""
    return run_dir_mod.read_jsonl(Path(path))[0]


def plot_curves(metrics_path: str | Path, out: str | Path) -> Path:
    """curves.png: loss, MLM accuracy, NSP accuracy and lr (columns) against step (top row) and
    wall time (bottom row); training curves as lines, held-out evaluations as dots."""
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
            for p in phases:
                ax.axvline(p[xkey], color="gray", ls="--", lw=0.8,
                           label=f"length {p['from_seq_length']} -> {p['max_seq_length']}")
            ax.set_xlabel(xlabel)
            ax.set_title(title)
            ax.grid(alpha=0.3)
            if col < 3 and (train or evals):
                ax.legend(fontsize=8)
    fig.subplots_adjust(left=0.05, right=0.99, bottom=0.08, top=0.95, wspace=0.25, hspace=0.35)
    # the temporary file's name ends in .tmp, so the format is given; atomic_write removes it if
    # the drawing fails (run_dir.clean_interrupted_saves, after a crash)
    return atomic_write(out, lambda tmp: fig.savefig(tmp, dpi=80, format="png"))
