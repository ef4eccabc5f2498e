"""curves.png: a run's metrics.jsonl drawn as panels, the one plotter every run uses.

A run describes its panels (Panel: a title, the series drawn in it, reference lines) and the
x axes (a row of panels per axis: step, wall time, epoch); training records ("type": "train")
are lines, evaluations ("type": "eval") dots joined by a line, reference lines dashed (a
baseline the model must beat) or dotted (chance), and a "phase" record (pretraining's switch to
full-length sequences) a vertical line in every panel.

    plot_curves(run / "metrics.jsonl", run / "curves.png",
                [Panel("loss", (Series("loss"), Series("mlm_loss", "eval", "held-out MLM loss"))),
                 Panel("learning rate", (Series("lr", label=""),))], xs=(("step", "step"),))
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, NamedTuple

from minibert.io import outputs
from minibert.loop import rundir


class Series(NamedTuple):
    key: str  # the record field drawn
    source: str = "train"  # the records it comes from: "train" (a line) or "eval" (dots)
    label: str | None = None  # None: "train" / "held-out"; "": no legend entry


class Panel(NamedTuple):
    title: str
    series: tuple  # of Series
    # reference lines: (y, label, "--" for a baseline or ":" for chance), or a function of the
    # records that gives them (a baseline a run logged, a share its last evaluation measured)
    lines: tuple | Callable = ()
    log: bool = False  # a logarithmic y axis (perplexity)


def read_metrics(path: str | Path) -> list[dict]:
    """The records of metrics.jsonl (a last line cut short by a crash is skipped)."""
    return rundir.read_jsonl(Path(path))[0]


def plot_curves(metrics_path: str | Path, out: str | Path, panels: list[Panel],
                xs: tuple = (("step", "step"),), eval_label: str = "held-out") -> Path | None:
    """draw_curves of a metrics.jsonl. -> out, or None when there is no metrics.jsonl yet."""
    if not Path(metrics_path).exists():
        return None
    return draw_curves(read_metrics(metrics_path), out, panels, xs, eval_label)


def draw_curves(recs: list[dict], out: str | Path, panels: list[Panel], xs: tuple = (("step", "step"),),
                eval_label: str = "held-out") -> Path:
    """Draw `panels` (columns) against each x axis of `xs` ((record key, axis label), rows) from
    the records of a metrics.jsonl into `out`, atomically."""
    # lazy: keeps matplotlib out of the start of `python -m minibert ablate` and 11 more
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    by_type = {kind: [r for r in recs if r.get("type") == kind] for kind in ("train", "eval", "phase")}
    fig = Figure(figsize=(4 * len(panels), 3.5 * len(xs) + 0.3))
    FigureCanvasAgg(fig)
    for row, (xkey, xlabel) in enumerate(xs):
        for col, panel in enumerate(panels):
            ax = fig.add_subplot(len(xs), len(panels), row * len(panels) + col + 1)
            for s in panel.series:
                points = [r for r in by_type[s.source] if s.key in r and xkey in r]
                if not points:
                    continue
                label = s.label if s.label is not None else ("train" if s.source == "train" else eval_label)
                style = dict(lw=1) if s.source == "train" else dict(marker="o", ms=4)
                ax.plot([r[xkey] for r in points], [r[s.key] for r in points], label=label or None, **style)
            for y, label, style in (panel.lines(recs) if callable(panel.lines) else panel.lines):
                ax.axhline(y, color="black" if style == "--" else "gray", ls=style, lw=0.9, label=label)
            for p in by_type["phase"]:
                if xkey in p:
                    ax.axvline(p[xkey], color="gray", ls="--", lw=0.8,
                               label=f"length {p['from_seq_length']} -> {p['max_seq_length']}")
            if panel.log:
                ax.set_yscale("log")
            ax.set_xlabel(xlabel)
            ax.set_title(panel.title)
            ax.grid(alpha=0.3)
            if any(h.get_label() and not h.get_label().startswith("_") for h in ax.get_lines()):
                ax.legend(fontsize=8)
    fig.tight_layout()
    # atomically (the temporary file is removed if the drawing fails, by rundir.clean_interrupted_saves
    # after a crash); a symbolic link at `out` is refused, neither written through nor replaced
    return outputs.save_figure(fig, Path(out), dpi=80)
