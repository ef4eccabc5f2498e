"""A fine-tuning run's model card: README.md in its directory, written when the run ends.

What a person who finds the folder needs: the model it started from, the data (files, sizes,
labels and how many of each), the recipe, the dev scores, and how to load it in minibert and in
transformers. Everything is read from the run's own files (run.json, metrics.jsonl, a
classifier's dev_report.json) and the training file, so the card says what the run did, not what was asked of it.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from minibert.finetune.run import DEV_REPORT, read_dev_report
from minibert.finetune.task_data import split_examples
from minibert.io.atomic import write_text_atomic
from minibert.loop import rundir
from minibert.taskdata.tasks import TASKS, generic_task, read_examples

CARD_FILE = "README.md"
# transformers' Auto class of each architecture minibert writes, for the card's loading lines
AUTO_CLASS = {"BertForSequenceClassification": "AutoModelForSequenceClassification",
              "BertForTokenClassification": "AutoModelForTokenClassification",
              "BertForMultipleChoice": "AutoModelForMultipleChoice",
              "BertForQuestionAnswering": "AutoModelForQuestionAnswering"}
# the minibert.pipeline task of each architecture it runs
PIPELINES = {"BertForSequenceClassification": "text-classification", "BertForTokenClassification": "token-classification",
             "BertForQuestionAnswering": "question-answering"}
RECIPE = ("epochs", "batch_size", "lr", "warmup_proportion", "max_seq_length", "hidden_dropout_prob",
          "attention_probs_dropout_prob", "weight_decay", "clip_norm", "seed")


def label_counts(task_info: dict) -> Counter | None:
    """How many training examples each label has (a classifier's own files only; None otherwise)."""
    if task_info.get("kind") != "classification" or not task_info.get("train_file"):
        return None
    name, fmt = task_info.get("name"), task_info.get("format")
    task = TASKS.get(name) if name in TASKS else generic_task(fmt) if fmt in ("glue-single", "glue-pair") else None
    if task is None or not Path(task_info["train_file"]).is_file():
        return None
    examples = read_examples(task, Path(task_info["train_file"]), "train")
    split = task_info.get("dev_split")
    if isinstance(split, dict):  # --dev-split: the same split again (the seed and the share decide it)
        examples = split_examples(task, examples, split["fraction"], split["seed"], task_info["train_file"])[0]
    return Counter(example.label for example in examples)


def dev_split_note(split) -> str:
    """What the card says of a dev set split off the train file by --dev-split."""
    if not isinstance(split, dict):
        return ""
    return (f", {split.get('fraction', 0):.0%} of it split off by --dev-split "
            f"({'stratified by label, ' if split.get('stratified') else ''}seed {split.get('seed')}; "
            f"the rest is the train set)")


def _number(value) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def model_card(run_dir: str | Path) -> str:
    """The card's text (markdown) of a finished fine-tuning run."""
    run_dir = Path(run_dir)
    info = rundir.read_run(run_dir)
    if info is None:
        raise ValueError(f"{run_dir} has no {rundir.RUN_FILE}: not a run directory")
    s, extra = info.settings, info.extra
    task = extra.get("task") if isinstance(extra.get("task"), dict) else {}
    architecture = extra.get("architecture", "a minibert task model")
    base = (f"random init (the control{' of ' + s['like'] if s.get('like') else ''})"
            if str(s.get("init", "")).lower() == "none" else f"`{s.get('init')}`")
    lines = [f"# {run_dir.name}: {architecture} fine-tuned on {task.get('name', s.get('task'))}", "",
             f"Fine-tuned by minibert (`python -m minibert finetune`) from {base}.", "", "## Data", ""]
    for split in ("train", "dev"):
        if task.get(f"{split}_file"):
            examples, features = task.get(f"{split}_examples"), task.get(f"{split}_features")
            sizes = (f", {examples:,} examples ({features:,} features of at most {task.get('max_seq_length')} tokens)"
                     if isinstance(examples, int) and isinstance(features, int) else "")
            lines.append(f"- {split}: `{task[f'{split}_file']}`{sizes}" + (dev_split_note(task.get("dev_split"))
                                                                         if split == "dev" else ""))
    if task.get("labels"):
        counts = label_counts(task)
        shown = ", ".join(f"`{label}`" + (f" ({counts.get(label, 0):,})" if counts is not None else "")
                          for label in task["labels"])
        lines.append(f"- labels ({task.get('kind')}, label id = position): {shown}"
                     + (" (training examples of each)" if counts is not None else ""))
    lines += ["", "## Recipe", "", "| setting | value |", "| --- | --- |"]
    lines += [f"| {key} | {s[key]:g} |" if isinstance(s[key], (int, float)) and not isinstance(s[key], bool)
              else f"| {key} | {s[key]} |" for key in RECIPE if key in s]
    lines.append(f"| optimizer steps | {extra.get('total_steps', '?')} |")
    if isinstance(extra.get("class_weights"), dict):
        lines.append("| class weights (loss) | " + ", ".join(f"{label} {w:.4g}" for label, w in
                                                           extra["class_weights"].items()) +
                     (" (balanced)" if s.get("class_weights") == "balanced" else "") + " |")
    if s.get("patience"):
        lines.append(f"| patience (dev evaluations) | {s['patience']} |")
    recipe = extra.get("recipe") if isinstance(extra.get("recipe"), dict) else {}
    if recipe.get("settings"):
        raised = recipe.get("epochs_raised_from")
        lines += ["", f"Chosen by the recipe ({recipe.get('name')}), not given: "
                  + ", ".join(f"{k}" for k in recipe["settings"])
                  + (f"; the epochs raised from {raised:g} so the small data set gets enough steps" if raised else "")
                  + "."]
    stop = extra.get("early_stop") if isinstance(extra.get("early_stop"), dict) else None
    if stop:
        lines += ["", f"Stopped early at step {stop.get('step')} of {stop.get('total_steps')}: {stop.get('patience')} "
                      f"dev evaluations in a row without a better {stop.get('metric')}."]
    best = extra.get("best") if isinstance(extra.get("best"), dict) else {}
    evals = [r for r in rundir.read_jsonl(run_dir / rundir.METRICS_FILE)[0] if r.get("type") == "eval"] \
        if (run_dir / rundir.METRICS_FILE).is_file() else []
    lines += ["", "## Dev scores", ""]
    if best:
        main = task.get("main_metric", "")
        lines.append(f"The saved model is the best by {main or 'the main metric'} on dev, from step {best.get('step')}:")
        lines += ["", "| metric | best (saved) | last evaluation |", "| --- | --- | --- |"]
        last = evals[-1] if evals else {}
        lines += [f"| {k} | {_number(v)} | {_number(last.get(k, ''))} |" for k, v in best.items()
                  if k != "step" and isinstance(v, (int, float))]
    else:
        lines.append("No evaluation was recorded.")
    report = read_dev_report(run_dir)
    if isinstance(report, dict) and report.get("labels"):
        lines += ["", f"Per class at the saved model ({DEV_REPORT}):", "",
                  "| class | precision | recall | F1 | support |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {label} | {p:.4f} | {r:.4f} | {f:.4f} | {n} |" for label, p, r, f, n in
                  zip(report["labels"], report["precision"], report["recall"], report["f1"], report["support"])]
        lines += [f"| macro-F1 | | | {report['macro_f1']:.4f} | {sum(report['support'])} |", "",
                  "Confusion matrix (rows: gold, columns: predicted):", "",
                  "| gold / predicted | " + " | ".join(str(label) for label in report["labels"]) + " |",
                  "| --- |" + " --- |" * len(report["labels"])]
        lines += [f"| {label} | " + " | ".join(str(n) for n in row) + " |"
                  for label, row in zip(report["labels"], report["confusion"])]
    auto = AUTO_CLASS.get(architecture, "AutoModel")
    lines += ["", "## Use it", "", "```", f"python -m minibert predict {run_dir} \"your text\"",
              f"python -m minibert evaluate {run_dir} --data labelled.csv --out metrics.json", "```", "",
              "In Python, with minibert or with transformers (the directory is in transformers' layout):", "",
              "```python", f"from minibert import {architecture}" + (", pipeline" if architecture in PIPELINES else ""),
              f"model = {architecture}.from_pretrained(\"{run_dir}\")",
              *([f"pipeline({PIPELINES[architecture]!r}, model=\"{run_dir}\")"
                 + ("(question=\"...\", context=\"your text\")" if architecture == "BertForQuestionAnswering"
                    else "(\"your text\")")] if architecture in PIPELINES else []), "",
              f"from transformers import AutoTokenizer, {auto}, pipeline",
              f"model = {auto}.from_pretrained(\"{run_dir}\")",
              f"tokenizer = AutoTokenizer.from_pretrained(\"{run_dir}\")", "```",
              "", "Written by minibert when the run ended; run.json and metrics.jsonl hold every number above.", ""]
    return "\n".join(lines)


def write_model_card(run_dir: str | Path) -> Path:
    """README.md in the run's directory (atomically); the caller holds the run's lock."""
    return write_text_atomic(Path(run_dir) / CARD_FILE, model_card(run_dir))
