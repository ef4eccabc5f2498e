"""The table, the JSON and the plot of an ablation (`python -m minibert ablate`), from its cells.

    summarize(cells, variants, tasks)  -> {variant: {task: Summary}}: mean, min, max over seeds
    verdict(better, worse)             -> the claim's verdict at this scale (the rule below)
    write_report(out, ...)             -> OUT/table.md, OUT/results.json, OUT/plot.png, each atomic

The verdict rule. Seeds move a tiny model's score a lot, so a difference only counts when it is
larger than that noise: with `spread` the larger of the two variants' seed ranges (max - min over
seeds), a difference of means |mean_a - mean_b| <= spread is "not distinguishable at this scale";
a larger one is "reproduced" when it goes the paper's way and "reversed" when it goes the other.
With one seed there is no spread to compare with, and nothing is distinguishable.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import NamedTuple

from minibert.io.jsonfile import read_json_object
from minibert.io.outputs import save_figure, write_output
from minibert.io.tensorfile import read_safetensors_header

NOT_DISTINGUISHABLE = "not distinguishable at this scale"
REPRODUCED, REVERSED = "reproduced", "reversed"


class Summary(NamedTuple):
    n: int
    mean: float
    min: float
    max: float
    scores: tuple  # one per seed, in seed order
    seeds: tuple

    @property
    def spread(self) -> float:
        return self.max - self.min


def summarize_scores(scores: list[float], seeds: list[int]) -> Summary:
    if not scores:
        raise ValueError("no scores to summarize")
    return Summary(len(scores), sum(scores) / len(scores), min(scores), max(scores), tuple(scores), tuple(seeds))


def verdict(better: Summary, worse: Summary) -> tuple[str, str]:
    """The paper says `better` scores above `worse`. -> (verdict, the reason in words)."""
    diff = better.mean - worse.mean
    spread = max(better.spread, worse.spread)
    if better.n < 2 or worse.n < 2:
        return NOT_DISTINGUISHABLE, f"difference {100 * diff:+.1f} with one seed: no seed spread to compare with"
    if abs(diff) <= spread:
        return NOT_DISTINGUISHABLE, f"difference {100 * diff:+.1f} within the seed spread {100 * spread:.1f}"
    return ((REPRODUCED if diff > 0 else REVERSED),
            f"difference {100 * diff:+.1f}, larger than the seed spread {100 * spread:.1f}")


def read_cells(out: Path) -> list[dict]:
    cells = []
    for path in sorted((out / "cells").glob("*.json")):
        try:
            cells.append(read_json_object(path))
        except ValueError as e:
            raise ValueError(f"{path}: not a cell record ({e}); delete it to run that cell again") from None
    return cells


def summarize(cells: list[dict], variants: list[str], tasks: list[str]) -> dict:
    """-> {variant: {task: Summary, "_pretrain": Summary of the held-out LM accuracy, "_steps":
    Summary of the pretraining steps (equal wall-clock gives unequal steps: a slower model, or a
    busier machine, takes fewer), "_seconds": Summary of the pretraining seconds}}"""
    out: dict = {}
    for v in variants:
        row = {}
        for t in tasks:
            mine = sorted((c for c in cells if c["variant"] == v and c["task"] == t and c["finetune"]["score"]
                           is not None), key=lambda c: c["seed"])
            if mine:
                row[t] = summarize_scores([c["finetune"]["score"] for c in mine], [c["seed"] for c in mine])
        pre = {c["seed"]: c["pretrain"].get("heldout_lm_acc") for c in cells if c["variant"] == v}
        pre = {s: a for s, a in sorted(pre.items()) if a is not None}
        if pre:
            row["_pretrain"] = summarize_scores(list(pre.values()), list(pre))
        steps = dict(sorted({c["seed"]: c["pretrain"]["steps"] for c in cells if c["variant"] == v}.items()))
        if steps:
            row["_steps"] = summarize_scores(list(steps.values()), list(steps))
        secs = dict(sorted({c["seed"]: c["pretrain"].get("seconds") for c in cells if c["variant"] == v}.items()))
        secs = {s: t for s, t in secs.items() if t is not None}
        if secs:
            row["_seconds"] = summarize_scores(list(secs.values()), list(secs))
        out[v] = row
    return out


def _cell(s: Summary | None) -> str:
    if s is None:
        return "-"
    if s.n == 1:
        return f"{100 * s.mean:.1f} (1 seed)"
    return f"{100 * s.mean:.1f} ({100 * s.min:.1f}-{100 * s.max:.1f})"


def build(out: Path, study, variants: list, downstream: list, plan, baselines: dict, notes: list[str]) -> dict:
    """Everything the table, the JSON and the plot show."""
    cells = read_cells(out)
    names, tasks = [v.name for v in variants], [d.name for d in downstream]
    summary = summarize(cells, names, tasks)
    claims = []
    for claim in study.claims:
        for t in (t for t in tasks if not claim.tasks or t in claim.tasks):
            a, b = summary.get(claim.better, {}).get(t), summary.get(claim.worse, {}).get(t)
            if a is not None and b is not None:
                word, why = verdict(a, b)
                claims.append({"claim": claim.text, "task": t, "better": claim.better, "worse": claim.worse,
                               "verdict": word, "why": why})
    failed = sorted(p.stem for p in (out / "failed").glob("*.json")) if (out / "failed").is_dir() else []
    return {"study": study.name, "title": study.title, "plan": plan.identity(), "seeds": list(plan.seeds),
            "variants": [{"name": v.name, "label": v.label, "paper": v.paper, "preset": v.preset,
                          "settings": dict(v.settings)} for v in variants],
            "tasks": tasks, "metrics": {t: _metric(cells, t) for t in tasks},
            "results": {v: {t: s._asdict() for t, s in row.items()} for v, row in summary.items()},
            "baselines": baselines, "claims": claims, "notes": notes, "failed": failed,
            "parameters": parameters(out, variants, plan.seeds),
            "cells_done": len(cells)}


def _metric(cells: list[dict], task: str) -> str:
    return next((c["finetune"]["metric"] for c in cells if c["task"] == task), "score")


def markdown(r: dict) -> str:
    tasks = r["tasks"]
    head = (["variant", "parameters", "pretraining steps", "ms per step", "held-out LM acc. (masked; LTR: next token)"]
            + [f"{t} ({r['metrics'][t]})" for t in tasks])
    lines = [f"# ablate {r['study']}: {r['title']}", "",
             (f"Pretraining {r['plan']['steps']} steps per variant and seed (equal steps), " if r["plan"].get("steps")
              else f"Pretraining {r['plan']['minutes']:g} min per variant and seed (the same wall-clock for every "
                   f"variant), ") +
             f"seeds {', '.join(map(str, r['seeds']))}; fine-tuning at most {r['plan']['finetune_minutes']:g} min "
             f"per cell. Dev scores x 100: mean over seeds (min-max). {r['cells_done']} cells done.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in r["variants"]:
        row = r["results"].get(v["name"], {})
        get = lambda k: _cell(Summary(**row[k])) if k in row else "-"  # noqa: E731
        steps = Summary(**row["_steps"]) if "_steps" in row else None
        shown = "-" if steps is None else (f"{steps.mean:.0f}" if steps.n == 1 else
                                           f"{steps.mean:.0f} ({steps.min:.0f}-{steps.max:.0f})")
        ms = (f"{1000 * row['_seconds']['mean'] / steps.mean:.0f}" if steps is not None and steps.mean
              and "_seconds" in row else "-")
        lines.append("| " + " | ".join([v["label"], _count(r.get("parameters", {}).get(v["name"])), shown, ms,
                                        get("_pretrain")] + [get(t) for t in tasks]) + " |")
    base = ["constant answer", "", "", "", ""] + [
        f"{100 * r['baselines'][t]['score']:.1f} (always {r['baselines'][t]['answer']})"
        if r["baselines"].get(t) else "-" for t in tasks]
    lines.append("| " + " | ".join(base) + " |")
    lines += ["", "Parameters: the pretrained model's tensors (ELECTRA: the discriminator, + its generator); "
                  "ms per step: pretraining wall-clock over steps, evaluations included."]
    if r["claims"]:
        lines += ["", "The paper's claims at this scale (a difference within the seed spread is not distinguishable):", ""]
        lines += [f"- {c['claim']}, on {c['task']}: **{c['verdict']}** ({c['why']})" for c in r["claims"]]
    for n in r["notes"]:
        lines.append(f"\nNote: {n}")
    if r["failed"]:
        lines.append(f"\nFailed cells (run the command again to retry them; the errors are in failed/): "
                     f"{', '.join(r['failed'])}")
    return "\n".join(lines) + "\n"


def _count(p: dict | None) -> str:
    if not p:
        return "-"
    text = f"{p['model'] / 1e6:.2f}M"
    return text + (f" (+{p['generator'] / 1e6:.2f}M generator)" if p.get("generator") else "")


def tensor_elements(path: Path) -> int:
    """The number of parameters in a .safetensors file, from its checked header (no tensor is read)."""
    header, _ = read_safetensors_header(path)
    return sum(math.prod(t["shape"]) for k, t in header.items() if k != "__metadata__")


def parameters(out: Path, variants: list, seeds) -> dict:
    """-> {variant: {"model": n, "generator": n or None}} from the first seed's pretrained model
    (out/pretrain/NAME/seed-S/model.safetensors; the `steps` study's snapshots have none)."""
    counts = {}
    for v in variants:
        for s in seeds:
            path = out / "pretrain" / (v.pretrained_as or v.name) / f"seed-{s}" / "model.safetensors"
            if path.is_file():
                gen = path.parent / "generator" / "model.safetensors"
                counts[v.name] = {"model": tensor_elements(path),
                                  "generator": tensor_elements(gen) if gen.is_file() else None}
                break
    return counts


def plot(r: dict, path: Path) -> Path | None:
    """One panel per task: each variant's mean with its min-max bar and every seed's point, the
    constant answer as a dashed line (for `steps`, the score against the fraction of the schedule)."""
    # lazy: keeps matplotlib out of the start of `python -m minibert ablate`
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    tasks = [t for t in r["tasks"] if any(t in row for row in r["results"].values())]
    if not tasks:
        return None
    if r["study"] == "steps":
        return _plot_against_time(r, tasks, path)
    fig = Figure(figsize=(max(5.5, 1.5 * len(r["variants"])) * len(tasks), 4.2))
    FigureCanvasAgg(fig)
    for i, t in enumerate(tasks):
        ax = fig.add_subplot(1, len(tasks), i + 1)
        labels = []
        for j, v in enumerate(r["variants"]):
            s = r["results"].get(v["name"], {}).get(t)
            labels.append(v["label"])
            if s is None:
                continue
            ax.errorbar([j], [100 * s["mean"]], yerr=[[100 * (s["mean"] - s["min"])], [100 * (s["max"] - s["mean"])]],
                        fmt="o", ms=7, capsize=4, color="C0")
            ax.plot([j] * len(s["scores"]), [100 * x for x in s["scores"]], "x", color="C1", ms=5)
        _baseline_line(ax, r, t)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
        ax.set(title=f"{t}: dev {r['metrics'][t]} x 100", ylabel="mean, min-max (x: each seed)")
        ax.grid(alpha=0.3)
    fig.suptitle(f"ablate {r['study']}: {r['title']}", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path, root=path.parent, dpi=80)


def _baseline_line(ax, r: dict, t: str) -> None:
    b = r["baselines"].get(t)
    if b:
        ax.axhline(100 * b["score"], ls="--", color="gray", lw=1, label=f"always {b['answer']}")
    ax.legend(fontsize=8)


PRESET_NAMES = {"tiny": "BERT (tiny; at 0: no pretraining)", "electra-tiny": "ELECTRA (electra-tiny)"}


def _plot_against_time(r: dict, tasks: list[str], path: Path) -> Path:
    """`steps`: the score against the pretraining time (mean seconds over seeds at each snapshot),
    one line per preset (BERT's MLM + NSP, ELECTRA's replaced-token detection), min-max bars."""
    # lazy: keeps matplotlib out of the start of `python -m minibert ablate`
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5 * len(tasks), 4.4))
    FigureCanvasAgg(fig)
    presets = list(dict.fromkeys(v["preset"] for v in r["variants"]))
    for i, t in enumerate(tasks):
        ax = fig.add_subplot(1, len(tasks), i + 1)
        for k, preset in enumerate(presets):
            pts = []
            for v in r["variants"]:
                row = r["results"].get(v["name"], {})
                if v["preset"] == preset and t in row and "_seconds" in row:
                    pts.append((row["_seconds"]["mean"] / 60, row[t]))
            if not pts:
                continue
            pts.sort(key=lambda p: p[0])
            x = [p[0] for p in pts]
            y = [100 * s["mean"] for _, s in pts]
            err = [[100 * (s["mean"] - s["min"]) for _, s in pts], [100 * (s["max"] - s["mean"]) for _, s in pts]]
            ax.errorbar(x, y, yerr=err, fmt="o-", ms=6, capsize=4, color=f"C{k}",
                        label=PRESET_NAMES.get(preset, preset))
        _baseline_line(ax, r, t)
        ax.set(title=f"{t}: dev {r['metrics'][t]} x 100", xlabel="pretraining minutes (mean over seeds)",
               ylabel="mean, min-max over seeds")
        ax.grid(alpha=0.3)
    fig.suptitle(f"ablate steps: {r['title']}", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path, root=path.parent, dpi=80)


def write_report(out: Path, study, variants: list, downstream: list, plan, baselines: dict,
                 notes: list[str], draw: bool = True) -> dict:
    """table.md and results.json (after every cell); plot.png too with `draw` (at the end:
    matplotlib costs a second or two)."""
    r = build(out, study, variants, downstream, plan, baselines, notes)
    write_output(out / "results.json", json.dumps(r, indent=1) + "\n", root=out)  # never through a link in out
    write_output(out / "table.md", markdown(r), root=out)
    if draw:
        plot(r, out / "plot.png")
    return r
