"""`python -m minibert ablate STUDY`: the paper's ablations (§5.1-5.2, Appendix C) re-run in small.

    python -m minibert ablate tasks --minutes 2 --seeds 2 --tasks nextsent
    python -m minibert ablate masking --minutes 5 --seeds 3            # wnut17 fine-tuned and feature-based
    python -m minibert ablate size --minutes 5 --seeds 2 --variants L1-H128,L2-H128,L4-H128
    python -m minibert ablate steps --minutes 5 --seeds 2              # one run, several checkpoints
    python -m minibert ablate family --minutes 5 --seeds 2             # BERT, RoBERTa, ALBERT (, ELECTRA)
    python -m minibert ablate tasks --steps 500 --seeds 3              # equal steps instead of equal time

A study is a list of pretraining variants (settings of TrainConfig, or a preset). Every variant is
pretrained for every seed under the same wall-clock budget (`--minutes`, through `train` with its
step calibration: the schedule is sized to the budget), then fine-tuned on every downstream task
(the fine-tuning defaults, capped by `--finetune-minutes`). `--steps N` gives every variant N
steps instead: on a shared machine, whose load changes between runs, equal wall-clock is not
equal work (the calibration at the start of a run sizes it to the speed of that moment), and
equal steps is the paper's own way (its Table 6 sizes all trained the same steps). One
(variant, seed, task) is a CELL;
its result is a small JSON file in OUT/cells/, written atomically when the cell ends, so:
  - a finished cell is never run again (run the same command to continue; add seeds or tasks and
    only the new cells run);
  - Ctrl-C loses at most the cell in progress (a pretraining run in progress is even resumed
    from its last checkpoint);
  - the table (table.md, results.json) and the plot (plot.png) are rewritten after every cell, so
    a partial run always has its partial table (minibert/tools/ablate_report.py).

The output directory:
    plan.json                    the study, the budgets and the settings (a rerun must match them)
    baselines.json               the constant-answer score of each task
    pretrain/VARIANT/seed-S/     the pretraining run (train's run directory)
    finetune/VARIANT/seed-S/TASK the fine-tuning run (finetune's run directory)
    cells/VARIANT.seed-S.TASK.json   one finished cell: the dev scores and the pretraining's
    table.md, results.json, plot.png

One study's life is in one place (plan, pretraining per variant and seed, fine-tuning per cell,
resume), so a reader follows a cell from the command to its row.
"""
from __future__ import annotations

import dataclasses
import json
import math
import shutil
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from minibert.io.cli import command_parser
from minibert.io.atomic import atomic_write
from minibert.io.jsonfile import read_json_object
from minibert.loop.rundir import PUBLISHED, RunLock, run_state
from minibert.tools.ablate_studies import (DOWNSTREAM, FAMILY_VARIANTS, STEP_FRACTIONS, STUDIES, TABLE_8, Claim,
                                           Downstream, Study, Variant, make_variant)
from minibert.checkpoint import read_config_json
from minibert.finetune.commands import finetune as run_finetune, pretrained_objective, task_kind
from minibert.finetune.run import FinetuneConfig
from minibert.finetune.task_data import get_task, load_task, score
from minibert.text.tokenizer import BertTokenizer
from minibert.tools import ablate_report as report
from minibert.train.config import FAMILY_PRESETS, FAST_RECIPE, PRESETS, TINY_RECIPE, TrainConfig, make_config
from minibert.train.data import default_corpus
from minibert.train.pretrain import launch_pretraining

# ---------------------------------------------------------------------------------------------
# the plan: what one invocation runs

@dataclasses.dataclass
class Plan:
    study: str
    out: str
    minutes: float = 5.0  # pretraining budget per variant and seed
    steps: int = 0  # > 0: every variant trains exactly this many steps instead (minutes unused)
    seeds: tuple = (0, 1)
    tasks: tuple = ()
    variants: tuple = ()  # names; () = the study's default subset
    data_root: str | None = None
    finetune_minutes: float = 1.5  # fine-tuning budget per cell (0 = the defaults' whole schedule)
    # TrainConfig overrides on top of the recipe (tests: a tiny corpus and model; --set)
    pretrain_settings: dict = dataclasses.field(default_factory=dict)
    # FinetuneConfig overrides (tests: epochs, max_train_examples)
    finetune_settings: dict = dataclasses.field(default_factory=dict)
    verbose: bool = True
    fast: bool = False  # --fast: every pretraining on a slice of the corpus (config.FAST_RECIPE)

    def identity(self) -> dict:
        """What a rerun into the same directory must keep (plan.json): results made with other
        budgets or settings would sit in one table as if comparable."""
        return {"study": self.study, "minutes": 0.0 if self.steps else self.minutes, "steps": self.steps,
                "finetune_minutes": self.finetune_minutes,
                "pretrain_settings": _jsonable(self.pretrain_settings),
                "finetune_settings": _jsonable(self.finetune_settings), "fast": self.fast}


def _jsonable(d: dict) -> dict:
    return json.loads(json.dumps(d, default=list))


def get_study(name: str) -> Study:
    if name not in STUDIES:
        raise ValueError(f"unknown study {name!r}; choose one of {', '.join(STUDIES)}")
    return STUDIES[name]


def resolve(plan: Plan) -> tuple[Study, list[Variant], list[Downstream], list[str]]:
    """-> (study, variants to run, downstream tasks, notes). Every name is checked here, before
    anything is written; a family preset that does not exist yet is skipped with a note."""
    study = get_study(plan.study)
    known = {v.name: v for v in study.variants}
    names = plan.variants or study.default_variants
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"study {study.name}: unknown variant(s) {', '.join(unknown)}; known: {', '.join(known)}")
    notes, variants = [], []
    for n in names:
        v = known[n]
        if v.preset not in PRESETS:
            notes.append(f"{v.label}: skipped, minibert has no preset {v.preset!r} yet")
            continue
        variants.append(v)
    if not variants:
        raise ValueError(f"study {study.name}: no variant to run ({'; '.join(notes)})")
    tasks = plan.tasks or study.default_tasks
    bad = [t for t in tasks if t not in DOWNSTREAM]
    if bad:
        raise ValueError(f"unknown task(s) {', '.join(bad)}; choose from {', '.join(DOWNSTREAM)}")
    downstream = [DOWNSTREAM[t] for t in tasks]
    for d in downstream:
        task_data_dir(d, plan.data_root)  # raises for a task whose data is missing
    if not plan.seeds:
        raise ValueError("--seeds must be at least 1")
    if plan.steps < 0 or (not plan.steps and not plan.minutes > 0):
        raise ValueError(f"--minutes {plan.minutes} must be > 0, or --steps ({plan.steps}) at least 1: every "
                         f"variant gets the same budget")
    if not 0 <= plan.finetune_minutes < math.inf:  # NaN failed later, after the corpus was built
        raise ValueError(f"--finetune-minutes {plan.finetune_minutes} must be a finite number >= 0")
    return study, variants, downstream, notes


def task_data_dir(d: Downstream, data_root: str | None) -> str | None:
    """The data directory of a downstream task: DATA_ROOT/<name> if it is there, else the task's
    own default (nextsent: the default corpus; wnut17, squad2: shipped in data/)."""
    if data_root is not None:
        root = Path(data_root)
        if not root.is_dir():
            raise ValueError(f"--data-root {root} is not a directory")
        for name in d.data_dirs:
            if (root / name).is_dir():
                return str(root / name)
    if d.needs_data:
        where = f" under --data-root {data_root}" if data_root else " (give --data-root DIR)"
        raise ValueError(f"task {d.name} needs its data: a directory {' or '.join(d.data_dirs)} with train.tsv "
                         f"and dev.tsv{where}; minibert ships no copy")
    return None


# ---------------------------------------------------------------------------------------------
# pretraining one variant for one seed

def pretrain_config(plan: Plan, variant: Variant, seed: int, run_dir: Path, check_only: bool = False):
    """The TrainConfig of a cell's pretraining: the train-tiny recipe (and the preset's own
    changes), the variant's settings, the shared budget, this seed. `check_only`: validate the
    settings and stop (before the default corpus is looked for or built)."""
    recipe = {**TINY_RECIPE, **FAMILY_PRESETS.get(variant.preset, {})}
    # the recipe warms up over 200 of the ~2,800 steps of its 9.5 minutes (about 7%); a shorter
    # budget warms up over the same share of its steps (else 2 minutes end before the learning
    # rate peaks)
    if plan.steps:
        recipe["warmup_steps"] = max(1, round(plan.steps * WARMUP_SHARE))
        budget = {"steps": plan.steps, "minutes": 0.0}
    else:
        recipe["warmup_steps"] = max(10, round(recipe["warmup_steps"] * min(1.0, plan.minutes / TINY_RECIPE["minutes"])))
        budget = {"minutes": plan.minutes, "steps": 0}  # fitted to the budget
    overrides = {**recipe, **(FAST_RECIPE if plan.fast else {}), **dict(variant.settings), **plan.pretrain_settings,
                 **budget, "seed": seed, "curves": False, "name": f"{variant.name}-seed{seed}", "out": str(run_dir)}
    make_config(variant.preset, **overrides).validate(require_files=False)
    if check_only:
        return None
    return make_config(variant.preset, **default_corpus(overrides))


# Every cell's fine-tuning learning rate: the tiny model's choice on dev when the studies were
# run, kept so their cells stay comparable (finetune's per-task recipes came later:
# finetune/recipes.py); the feature-based cells take FROZEN_LR.
CELL_LR = 3e-4
WARMUP_SHARE = 0.07  # of the steps: the recipe's 200 of its ~2,800
# The feature-based cells' learning rate (the BiLSTM tagger and its classifier; the encoder is
# frozen). On punct, 2 epochs at length 64, concat_all features of a 2,000-step tiny BERT (of a
# random init): BiLSTM tagger dev F1 46.9 (39.4) at 1e-3, 49.7 (40.0) at 3e-3, one seed each; a
# linear tagger 2.1 at 3e-4 and 5.0 (0.1) at 1e-2.
FROZEN_LR = 3e-3


def _finished(run_dir: Path) -> dict | None:
    state = run_state(run_dir) if run_dir.is_dir() else None
    return state if state is not None and state.get("status") in ("done", "budget") else None


def _train(cfg, resume: bool, max_steps: int | None, verbose: bool):
    outcome = launch_pretraining(cfg, resume=resume, overwrite=not resume, verbose=verbose,
                                 max_steps_this_run=max_steps, created_by="ablate")
    if outcome.code == 130:
        raise KeyboardInterrupt
    if outcome.error is not None:
        raise outcome.error
    return outcome


def _resumable(run_dir: Path) -> bool:
    return run_dir.is_dir() and run_state(run_dir) is not None


def pretrain(plan: Plan, variant: Variant, seed: int, run_dir: Path) -> dict:
    """Pretrain (or finish pretraining) one variant for one seed -> its summary. A run that
    Ctrl-C or a kill stopped resumes from its last checkpoint."""
    state = _finished(run_dir)
    if state is None:
        cfg = pretrain_config(plan, variant, seed, run_dir)
        _train(cfg, _resumable(run_dir), None, plan.verbose)
        state = _finished(run_dir)
    return _pretrain_summary(state)


def _pretrain_summary(state: dict) -> dict:
    ev = state.get("last_eval") or {}
    return {"steps": state["step"], "total_steps": state["total_steps"], "status": state["status"],
            "seconds": round(state["elapsed_seconds"], 1), "heldout_lm_acc": ev.get("mlm_acc"),
            "heldout_nsp_acc": ev.get("nsp_acc")}


SNAPSHOT_FILE = "snapshot.json"


def pretrain_with_snapshots(plan: Plan, variant: Variant, seed: int, run_dir: Path) -> Path:
    """`steps` study: ONE run per seed, paused at each fraction of its schedule, the published
    model copied to run_dir/at-NN/ each time (the run keeps only its newest checkpoint). Returns
    the snapshot directory of `variant.fraction`."""
    snap = run_dir / f"at-{round(100 * variant.fraction)}"
    if (snap / SNAPSHOT_FILE).is_file():
        return snap
    cfg = pretrain_config(plan, variant, seed, run_dir)
    if not _resumable(run_dir):  # calibrate (sizes the schedule to the budget), take one step
        _train(cfg, False, 1, plan.verbose)
    state = run_state(run_dir)
    target = max(1, round(variant.fraction * state["total_steps"]))
    if state["status"] not in ("done", "budget") and state["step"] < target:
        # The schedule was sized to the budget by the calibration; the resumed pieces run it to
        # its end without a budget (a resumed run is not refitted, and a budget cut short by a
        # slower loop would put the late snapshots all at the same step).
        rest = dataclasses.replace(cfg, minutes=0.0, steps=state["total_steps"])
        _train(rest, True, target - state["step"], plan.verbose)
        state = run_state(run_dir)
    _copy_published(run_dir, snap)
    atomic_write(snap / SNAPSHOT_FILE, lambda tmp: tmp.write_text(json.dumps(_pretrain_summary(state)),
                                                                  encoding="utf-8"))
    return snap


def _copy_published(run_dir: Path, dest: Path) -> None:
    for name in PUBLISHED:
        if (run_dir / name).is_file():
            atomic_write(dest / name, lambda tmp, src=run_dir / name: shutil.copyfile(src, tmp))


# ---------------------------------------------------------------------------------------------
# fine-tuning one cell

def finetune_config(plan: Plan, model_dir: Path | None, d: Downstream, seed: int, out: Path, extra: tuple = (),
                    ltr: bool = False):
    """The FinetuneConfig of one cell. `model_dir` None: the cell's model does not exist yet (the
    settings are being checked before anything runs), so `ltr` says what it will be."""
    base = dict(task=d.task, init=str(model_dir or "none"), out=str(out), data=task_data_dir(d, plan.data_root),
                seed=seed, minutes=plan.finetune_minutes, lr=CELL_LR)
    if task_kind(FinetuneConfig.from_dict(base)) == "qa":
        base["max_seq_length"] = 384
    if d.frozen:  # the paper's best features are the last four layers side by side; a tiny model has fewer
        layers = (2 if model_dir is None or str(model_dir) == "none" else  # --init none: the tiny preset's 2
                  int(read_config_json(model_dir / "config.json").get("num_hidden_layers", 2)))
        base["frozen"] = "concat4" if layers >= 3 else "concat_all"
        base["frozen_tagger"] = "bilstm"  # the paper's tagger on frozen features (one layer of its two)
        base["lr"] = FROZEN_LR
    # the paper fine-tuned its LTR model left to right, as it was pretrained
    base["causal"] = pretrained_objective(str(model_dir)) == "ltr" if model_dir is not None else ltr
    # the one way settings are built: the cell's <- the variant's own (`extra`) <- --finetune-set; validated
    return FinetuneConfig.build({**base, **dict(extra)}, plan.finetune_settings)


def finetune(plan: Plan, model_dir: Path, d: Downstream, seed: int, out: Path, extra: tuple = ()) -> dict:
    """Fine-tune (or train the feature-based tagger on) the pretrained model -> the best dev scores.
    `extra`: the variant's own FinetuneConfig settings (Variant.finetune), applied before --finetune-set."""
    cfg = finetune_config(plan, model_dir, d, seed, out, extra)
    if out.exists():  # a cell cut off earlier: it starts again
        shutil.rmtree(out)
    outcome = run_finetune(cfg, verbose=plan.verbose, card=False)
    if outcome.code == 130:
        raise KeyboardInterrupt
    if outcome.error is not None:
        raise outcome.error
    run, loop = outcome.run, outcome.loop
    best = run.best or {}
    main = run.source.main_metric
    return {"metric": main, "score": best.get(main), "scores": {k: v for k, v in best.items() if k != "step"},
            "best_step": best.get("step"), "steps": loop.step, "total_steps": run.total_steps, "status": loop.status,
            "seconds": round(loop.elapsed, 1), "frozen": cfg.frozen}


def constant_baseline(plan: Plan, d: Downstream, vocab: str) -> dict | None:
    """The dev score of always answering the train set's most common label (None for SQuAD)."""
    task = get_task(d.task) if d.task in ("sst2", "rte", "wnut17", "swag", "nextsent", "punct") else None
    if task is None:
        return None
    data = load_task(task, BertTokenizer(vocab), 128, data_dir=task_data_dir(d, plan.data_root))
    labels = np.asarray(data.train["labels"]).ravel()
    labels = labels[labels != -100]
    majority = int(np.bincount(labels).argmax())
    pred = np.full(data.dev["labels"].shape, majority)
    name = data.labels[majority] if data.labels else f"choice {majority}"
    scores = score(data, pred)
    return {"answer": name, "metric": task.main_metric, "score": scores[task.main_metric]}


# ---------------------------------------------------------------------------------------------
# the orchestration

def cell_path(out: Path, variant: str, seed: int, task: str) -> Path:
    return out / "cells" / f"{variant}.seed-{seed}.{task}.json"


def _write_json(path: Path, obj: Any) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(json.dumps(obj, indent=1) + "\n", encoding="utf-8"))


def _check_plan(plan: Plan, out: Path) -> None:
    path = out / "plan.json"
    if path.is_file():
        saved = read_json_object(path)
        if saved != plan.identity():
            diff = {k: (saved.get(k), v) for k, v in plan.identity().items() if saved.get(k) != v}
            raise ValueError(f"{out} holds an ablation made with other settings {diff} (saved, now); its cells "
                             f"would not be comparable: use another --out, or the same settings to continue it")
    elif out.is_dir() and any(out.iterdir()):
        raise ValueError(f"{out} exists and is not an ablation directory (no plan.json); choose another --out")


def run(plan: Plan) -> int:
    """Run every cell of the plan that has not finished -> the number of cells that failed."""
    study, variants, downstream, notes = resolve(plan)
    out = Path(plan.out)
    check_settings(plan, variants, downstream, out)
    _check_plan(plan, out)
    with RunLock(out):  # makes the folder, after checking that it lies in no other run
        return _run(plan, study, variants, downstream, notes, out)


def check_settings(plan: Plan, variants: list[Variant], downstream: list[Downstream], out: Path) -> None:
    """Every cell's pretraining and fine-tuning settings, checked before anything is written: a
    bad --set or --finetune-set is refused now, not after an hour of pretraining."""
    for v in variants:
        if v.pretrained_as != "none":
            pretrain_config(plan, v, plan.seeds[0], out / "pretrain" / v.name / "seed-0", check_only=True)
        for d in downstream:
            finetune_config(plan, None, d, plan.seeds[0], out / "finetune", extra=v.finetune,
                            ltr=dict(v.settings).get("objective") == "ltr")


def _run(plan: Plan, study: Study, variants: list[Variant], downstream: list[Downstream], notes: list[str],
         out: Path) -> int:
    _write_json(out / "plan.json", plan.identity())
    say = print if plan.verbose else (lambda *a, **k: None)
    for n in notes:
        say(f"note: {n}")
    cells = [(v, s, d) for s in plan.seeds for v in variants for d in downstream]
    todo = [c for c in cells if not cell_path(out, c[0].name, c[1], c[2].name).is_file()]
    say(f"ablate {study.name}: {len(variants)} variants x {len(plan.seeds)} seeds x {len(downstream)} tasks = "
        f"{len(cells)} cells, {len(cells) - len(todo)} already done; pretraining "
        f"{f'{plan.steps} steps' if plan.steps else f'{plan.minutes:g} min'} per variant and seed, "
        f"fine-tuning at most {plan.finetune_minutes:g} min per cell -> {out}")
    baselines = _baselines(plan, out, variants, downstream)
    timing = {"pretrain": [], "finetune": []}
    failed = 0
    pretrained = set()
    t_start = time.perf_counter()
    for i, (v, seed, d) in enumerate(todo):
        eta = _eta(todo[i:], pretrained, timing, plan)
        say(f"\n== cell {len(cells) - len(todo) + i + 1}/{len(cells)}: {v.label}, seed {seed}, {d.name} "
            f"| ETA {_fmt(eta)}", flush=True)
        try:
            t0 = time.perf_counter()
            model_dir, pre = _pretrained(plan, study, v, seed, out)
            if (v.name, seed) not in pretrained:
                pretrained.add((v.name, seed))
                timing["pretrain"].append(time.perf_counter() - t0)
            t1 = time.perf_counter()
            ft = finetune(plan, model_dir, d, seed, out / "finetune" / v.name / f"seed-{seed}" / d.name,
                          extra=v.finetune)
            timing["finetune"].append(time.perf_counter() - t1)
        except Exception as e:  # noqa: BLE001  one cell's failure (a model class fine-tuning cannot load,
            # a divergence, a bug) must not end a study of hours: it is recorded with its traceback,
            # the other cells run, the command exits 1, and the next run tries the cell again
            failed += 1
            say(f"cell failed ({v.name}, seed {seed}, {d.name}): {type(e).__name__}: {e} (traceback in "
                f"{out / 'failed'})")
            _write_json(out / "failed" / f"{v.name}.seed-{seed}.{d.name}.json",
                        {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
            continue
        _write_json(cell_path(out, v.name, seed, d.name),
                    {"variant": v.name, "seed": seed, "task": d.name, "pretrain": pre, "finetune": ft})
        (out / "failed" / f"{v.name}.seed-{seed}.{d.name}.json").unlink(missing_ok=True)
        say(f"cell done: {d.name} dev {ft['metric']} {ft['score']:.4f} ({v.label}, seed {seed})")
        report.write_report(out, study, variants, downstream, plan, baselines, notes, draw=False)
    report.write_report(out, study, variants, downstream, plan, baselines, notes)
    say(f"\nablate {study.name}: {len(cells) - failed} of {len(cells)} cells done in "
        f"{_fmt(time.perf_counter() - t_start)} this session -> {out}/table.md, results.json, plot.png")
    return failed


NO_PRETRAINING = {"steps": 0, "total_steps": 0, "status": "none", "seconds": 0.0, "heldout_lm_acc": None,
                  "heldout_nsp_acc": None}


def _pretrained(plan: Plan, study: Study, v: Variant, seed: int, out: Path) -> tuple[Path, dict]:
    if v.pretrained_as == "none":  # the control: fine-tuning's --init none (the tiny architecture, random)
        return Path("none"), dict(NO_PRETRAINING)
    if study.name == "steps":
        run = "steps" if v.preset == "tiny" else f"steps-{v.preset}"  # one snapshotted run per preset and seed
        snap = pretrain_with_snapshots(plan, v, seed, out / "pretrain" / run / f"seed-{seed}")
        return snap, read_json_object(snap / SNAPSHOT_FILE)
    run_dir = out / "pretrain" / (v.pretrained_as or v.name) / f"seed-{seed}"
    return run_dir, pretrain(plan, v, seed, run_dir)


def _baselines(plan: Plan, out: Path, variants: list[Variant], downstream: list[Downstream]) -> dict:
    path = out / "baselines.json"
    saved = read_json_object(path) if path.is_file() else {}
    missing = [d for d in downstream if d.name not in saved]
    if missing:
        vocab = pretrain_config(plan, variants[0], 0, out / "unused").vocab
        for d in missing:
            saved[d.name] = constant_baseline(plan, d, vocab)
        _write_json(path, saved)
    return saved


def _eta(todo: list, pretrained: set, timing: dict, plan: Plan) -> float:
    """Seconds left: the pretraining runs still to do and the fine-tuning cells, each at its
    measured mean (before a measurement: the budget plus a setup allowance)."""
    mean = lambda xs, default: sum(xs) / len(xs) if xs else default  # noqa: E731
    runs = {(v.name, s) for v, s, _ in todo} - pretrained
    pre = mean(timing["pretrain"], (plan.steps * 0.3 if plan.steps else plan.minutes * 60) * 1.1 + 30)
    ft = mean(timing["finetune"], (plan.finetune_minutes or 5) * 60 * 1.1 + 20)
    return len(runs) * pre + len(todo) * ft


def _fmt(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


# ---------------------------------------------------------------------------------------------
# the command

FINETUNE_KEYS = ("epochs", "lr", "batch_size", "max_seq_length", "warmup_proportion",
                 "hidden_dropout_prob", "attention_probs_dropout_prob", "weight_decay",
                 "eval_per_epoch", "max_train_examples", "doc_stride")


MAX_SEEDS = 100  # a hundred pretrainings of every variant: more is weeks of a laptop

# the pretraining settings each cell sets itself (pretrain_config), so --set may not give them
ABLATE_OWNS = {"steps": "--steps or --minutes", "minutes": "--steps or --minutes", "seed": "--seeds",
               "name": "the variant and seed", "out": "--out", "curves": "off"}


def parse_finetune_set(items: list[str]) -> dict[str, Any]:
    """["max_seq_length=64", "epochs=1"] -> typed FinetuneConfig overrides (the task, the model,
    the output, the seed and the budget are the ablation's own, not settable here)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in FINETUNE_KEYS:
            raise ValueError(f"--finetune-set {item!r}: expected KEY=VALUE with KEY one of {', '.join(FINETUNE_KEYS)}")
        try:
            out.update(FinetuneConfig.parse_set([f"{key}={raw}"]))  # typed as every --set is (never rounded)
        except ValueError as e:
            raise ValueError(f"--finetune-set {item!r}: {e}") from None
    return out


def cli(argv: list[str]) -> int:
    """python -m minibert ablate STUDY --minutes M --seeds N [--tasks ...] [--out DIR]"""

    p = command_parser("ablate", "Re-run one of the BERT paper's ablations in small: pretrain each variant at equal "
                                 "wall-clock, fine-tune, tabulate.", settings=TrainConfig, shared=("minutes", "steps"),
                       helps={"minutes": "pretraining budget per variant and seed (default 5)",
                              "steps": "instead of --minutes: every variant trains exactly this many steps"},
                       set_help="a TrainConfig setting for every variant's pretraining (repeatable)",
                       fast="every pretraining on a slice of the corpus for a few steps (config.FAST_RECIPE): a "
                            "check of the plumbing")
    p.add_argument("study", help=f"one of {', '.join(STUDIES)}")
    p.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 (default 2)")
    p.add_argument("--tasks", help=f"comma-separated, from {', '.join(DOWNSTREAM)} (default: the study's)")
    p.add_argument("--variants", help="comma-separated subset of the study's variants (default: the study's)")
    p.add_argument("--data-root", help="a directory holding sst2/ (or SST-2/), rte/ (or RTE/), ... for tasks "
                                       "that ship no data")
    p.add_argument("--finetune-minutes", type=float, default=1.5,
                   help="fine-tuning budget per cell (default 1.5; 0 = the whole default schedule)")
    p.add_argument("--finetune-set", action="append", default=[], metavar="KEY=VALUE",
                   help="a FinetuneConfig setting for every cell, e.g. max_seq_length=64 (repeatable)")
    p.add_argument("--out", help="output directory (default runs/ablate-STUDY)")
    p.add_argument("--list", action="store_true", help="list the study's variants and tasks, run nothing")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    study = get_study(args.study)
    if args.list:
        for v in study.variants:
            mark = "*" if v.name in study.default_variants else " "
            print(f"{mark} {v.name:<10} {v.label}  (preset {v.preset}{', ' if v.settings else ''}"
                  f"{', '.join(f'{k}={x}' for k, x in v.settings)})")
        print(f"default tasks: {', '.join(study.default_tasks)}; all tasks: {', '.join(DOWNSTREAM)}")
        return 0
    if not 1 <= args.seeds <= MAX_SEEDS:  # each seed is a pretraining of every variant
        raise ValueError(f"--seeds {args.seeds} must be 1 to {MAX_SEEDS} (each seed pretrains every variant once)")
    split = lambda s: tuple(x.strip() for x in s.split(",") if x.strip()) if s else ()  # noqa: E731
    if args.steps is not None and args.steps < 1:  # 0 used to mean "not given": a 5-minute budget per variant
        raise ValueError(f"--steps {args.steps} must be at least 1")
    if args.steps is not None and args.minutes is not None:
        raise ValueError("give --minutes (equal wall-clock) or --steps (equal steps), not both")
    for item in args.set:
        if item.partition("=")[0].strip().replace("-", "_") == "preset":  # TrainConfig names train's --preset
            raise ValueError(f"--set {item!r}: each variant of the study has its preset (--list shows them; "
                             f"--variants picks some)")
    pretrain_settings = TrainConfig.parse_set(args.set)
    owned = sorted(set(pretrain_settings) & set(ABLATE_OWNS))
    if owned:  # each cell sets these itself: a --set of one was dropped without a word
        raise ValueError(f"--set {', '.join(owned)}: ablate sets these for every cell ("
                         f"{'; '.join(ABLATE_OWNS[k] for k in owned)})")
    plan = Plan(study=study.name, out=args.out or f"runs/ablate-{study.name}",
                minutes=5.0 if args.minutes is None else args.minutes, steps=args.steps or 0,
                seeds=tuple(range(args.seeds)), tasks=split(args.tasks), variants=split(args.variants),
                data_root=args.data_root, finetune_minutes=args.finetune_minutes,
                pretrain_settings=pretrain_settings, finetune_settings=parse_finetune_set(args.finetune_set),
                verbose=not args.quiet, fast=args.fast)
    failed = run(plan)
    return 1 if failed else 0
