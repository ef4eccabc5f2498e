"""A small fine-tuning grid, one run at a time, resumable: each cell is one
`python -m minibert finetune` run in runs/grid/<name>; a cell whose run finished is skipped.
Every finished cell is summarised in results/grid.jsonl (dev metric at every evaluation, the best
and the final) and printed as a table.

    python examples/recipe_grid.py wnut17 --init runs/tiny --data DIR \
        --lrs 5e-4,1e-3,2e-3 --epochs 24 --T 64 --seeds 0
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from minibert.finetune.run import FinetuneConfig

ENV = dict(os.environ, NUMBA_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def finished(out: Path) -> dict | None:
    """The run's summary if it ended (an evaluation at its last step), else None."""
    run_file, metrics = out / "run.json", out / "metrics.jsonl"
    if not run_file.is_file() or not metrics.is_file():
        return None
    run = json.loads(run_file.read_text())
    run["settings"] = FinetuneConfig.from_dict(run["settings"]).to_dict()  # typed, every setting present
    recs = [json.loads(l) for l in metrics.read_text().splitlines() if l.strip()]
    evals = [r for r in recs if r.get("type") == "eval"]
    if not evals or evals[-1]["step"] != run["total_steps"]:
        return None
    main = run["task"].get("main_metric", "accuracy")
    train = [r for r in recs if r.get("type") == "train"]
    best = max(evals, key=lambda e: e[main])
    return {"name": out.name, "task": run["settings"]["task"], "init": run["settings"]["init"],
            "lr": run["settings"]["lr"], "epochs": run["settings"]["epochs"], "T": run["settings"]["max_seq_length"],
            "batch": run["settings"]["batch_size"], "warmup": run["settings"]["warmup_proportion"], "seed": run["settings"]["seed"],
            "max_train_examples": run["settings"]["max_train_examples"], "steps": run["total_steps"],
            "metric": main, "final": evals[-1][main], "best": best[main], "best_step": best["step"],
            "best_epoch": best.get("epoch"), "curve": [round(e[main], 4) for e in evals],
            "train_seconds": train[-1]["time"] if train else None,
            "final_all": {k: v for k, v in evals[-1].items() if isinstance(v, float) and k not in ("epoch", "time")}}


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("task")
    p.add_argument("--init", required=True)
    p.add_argument("--data")
    p.add_argument("--lrs", required=True)
    p.add_argument("--epochs", required=True, help="comma-separated")
    p.add_argument("--T", default="64", help="comma-separated max_seq_length values")
    p.add_argument("--seeds", default="0")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--warmup", type=float, default=0.1)
    p.add_argument("--eval-per-epoch", type=int, default=1)
    p.add_argument("--max-train-examples", type=int, default=0)
    p.add_argument("--tag", default="")
    p.add_argument("--extra", default="", help="more finetune arguments, one string")
    p.add_argument("--dry-run", action="store_true")
    a = p.parse_args(argv)
    init_name = "none" if a.init == "none" else Path(a.init).name
    results = Path("results/grid.jsonl")
    results.parent.mkdir(exist_ok=True)
    done_names = set()
    if results.is_file():
        done_names = {json.loads(l)["name"] for l in results.read_text().splitlines() if l.strip()}
    for T in a.T.split(","):
        for epochs in a.epochs.split(","):
            for lr in a.lrs.split(","):
                for seed in a.seeds.split(","):
                    name = (f"{a.task}-{init_name}-lr{lr}-e{epochs}-T{T}-b{a.batch_size}-s{seed}"
                            + (f"-n{a.max_train_examples}" if a.max_train_examples else "") + (f"-{a.tag}" if a.tag else ""))
                    out = Path("runs/grid") / name
                    summary = finished(out)
                    if summary is None:
                        cmd = [sys.executable, "-m", "minibert", "finetune", a.task, "--init", a.init, "--out", str(out),
                               "--lr", lr, "--epochs", epochs, "--max-seq-length", T, "--seed", seed,
                               "--batch-size", str(a.batch_size), "--warmup-proportion", str(a.warmup),
                               "--eval-per-epoch", str(a.eval_per_epoch), "--overwrite"]
                        if a.data:
                            cmd += ["--data", a.data]
                        if a.max_train_examples:
                            cmd += ["--max-train-examples", str(a.max_train_examples)]
                        cmd += a.extra.split()
                        print("$", " ".join(cmd), flush=True)
                        if a.dry_run:
                            continue
                        t0 = time.time()
                        log = Path("results/logs") / f"{name}.log"
                        log.parent.mkdir(parents=True, exist_ok=True)
                        with open(log, "w") as f:
                            rc = subprocess.call(cmd, env=ENV, stdout=f, stderr=subprocess.STDOUT)
                        if rc != 0:
                            print(f"  FAILED rc={rc}; see {log}", flush=True)
                            continue
                        summary = finished(out)
                        summary["wall_seconds"] = round(time.time() - t0, 1)
                        summary["command"] = " ".join(cmd[1:]).replace(sys.executable, "python")
                    if summary["name"] not in done_names:
                        with open(results, "a") as f:
                            f.write(json.dumps(summary) + "\n")
                        done_names.add(summary["name"])
                    print(f"  {name}: final {summary['final']:.4f} best {summary['best']:.4f} at step "
                          f"{summary['best_step']}/{summary['steps']}  curve {summary['curve']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
