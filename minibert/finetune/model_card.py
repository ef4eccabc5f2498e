"""A fine-tuning run's model card: README.md in its directory, written when the run ends.

What a person who finds the folder needs: the model it started from, the data (files, sizes,
labels and how many of each), the recipe, the dev scores, and how to load it in minibert and in
transformers. Everything is read from the run's own files (run.json, metrics.jsonl, a
classifier's dev_report.json) and the training file, so the card says what the run did, not what was asked of it.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from minibert.finetune.metrics import FULL_MATRIX_LABELS, WORST_CLASSES
from minibert.finetune.registry import TASK_ARCHITECTURES
from minibert.finetune.run import DEV_REPORT, read_dev_report
from minibert.finetune.task_data import split_examples
from minibert.io.atomic import write_text_atomic
from minibert.io.escape import markdown, python_str, shell_word
from minibert.io.jsonfile import Field, check_fields
from minibert.loop import rundir
from minibert.taskdata.readers import Columns
from minibert.taskdata.tasks import TASKS, generic_task, read_examples, with_columns

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
    task = with_columns(task, Columns.from_json(task_info.get("columns"), "run.json"))  # the columns it was read by
    examples = read_examples(task, Path(task_info["train_file"]), "train", notes=False)
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
    return f"{value:.4f}" if isinstance(value, float) else markdown(str(value))


SHOWN_LABELS = 50  # the labels the data section names one by one (all of them are in run.json's task.labels)


def _label_line(task: dict) -> str:
    counts = label_counts(task)
    labels = task["labels"]
    shown = ", ".join(markdown(label) + (f" ({counts.get(label, 0):,})" if counts is not None else "")
                      for label in labels[:SHOWN_LABELS])
    more = f", and {len(labels) - SHOWN_LABELS:,} more (run.json's task.labels)" if len(labels) > SHOWN_LABELS else ""
    return (f"- {len(labels):,} labels ({markdown(str(task.get('kind')))}, label id = position): {shown}{more}"
            + (" (training examples of each)" if counts is not None else ""))


def _numbers(kind, k: int):
    return lambda v: len(v) == k and all(isinstance(x, kind) and not isinstance(x, bool) for x in v)


def check_dev_report(report, path: Path) -> dict:
    """dev_report.json typed (io/jsonfile.check_fields): K labels, K numbers of each score, the
    matrix (K rows of K counts) or null, the confused pairs; one error naming the file and field."""
    if not isinstance(report, dict):
        raise ValueError(f"{path} must hold a JSON object, not {type(report).__name__}")
    k = len(report["labels"]) if isinstance(report.get("labels"), list) else -1
    counts = "a list of {k} numbers, one per label".format(k=max(k, 0))
    check_fields(report, {
        "labels": Field(list, "a list of label names", lambda v: all(isinstance(x, str) for x in v), required=True),
        **{key: Field(list, counts, _numbers((int, float), k), required=True) for key in ("precision", "recall", "f1")},
        "support": Field(list, f"a list of {max(k, 0)} integers", _numbers(int, k), required=True),
        "macro_f1": Field(float, "a number", required=True),
        "confusion": Field((list, type(None)), f"null or {max(k, 0)} rows of {max(k, 0)} integers",
                           lambda v: v is None or (len(v) == k and all(isinstance(r, list) and _numbers(int, k)(r)
                                                                       for r in v))),
        "confused": Field(list, "a list of {gold, predicted, count} objects",
                          lambda v: all(isinstance(c, dict) and isinstance(c.get("count"), int) for c in v)),
    }, str(path))
    return report


def _class_table(report: dict) -> list[str]:
    """The per-class rows and the confusion matrix of dev_report.json (up to
    metrics.FULL_MATRIX_LABELS labels; above, the classes of lowest F1 and the most confused pairs)."""
    labels = report["labels"]
    rows = list(zip(labels, report["precision"], report["recall"], report["f1"], report["support"]))
    full = isinstance(report.get("confusion"), list) and len(labels) <= FULL_MATRIX_LABELS  # an older run's too
    lines = ["", f"Per class at the saved model ({DEV_REPORT}" + ("" if full else f"; {len(labels):,} classes, the "
             f"{WORST_CLASSES} of lowest F1 shown, every class in {DEV_REPORT}") + "):", "",
             "| class | precision | recall | F1 | support |", "| --- | --- | --- | --- | --- |"]
    order = range(len(rows)) if full else sorted(range(len(rows)), key=lambda k: (rows[k][4] == 0, rows[k][3],
                                                                                  -rows[k][4], k))[:WORST_CLASSES]
    for k in order:
        label, p, r, f, n = rows[k]
        lines.append(f"| {markdown(str(label))} | {p:.4f} | {r:.4f} | {f:.4f} | {n} |")
    lines.append(f"| macro-F1 | | | {report['macro_f1']:.4f} | {sum(report['support'])} |")
    if full:
        lines += ["", "Confusion matrix (rows: gold, columns: predicted):", "",
                  "| gold / predicted | " + " | ".join(markdown(str(label)) for label in labels) + " |",
                  "| --- |" + " --- |" * len(labels)]
        lines += [f"| {markdown(str(label))} | " + " | ".join(str(n) for n in row) + " |"
                  for label, row in zip(labels, report["confusion"])]
    confused = report.get("confused") or []
    if not full and confused:
        lines += ["", "The most confused pairs:", "", "| gold | predicted | dev examples |", "| --- | --- | --- |"]
        lines += [f"| {markdown(str(c['gold']))} | {markdown(str(c['predicted']))} | {c['count']} |" for c in confused]
    return lines


def _use_lines(run_dir: Path, architecture: str) -> list[str]:
    """How to load the model: shell and Python lines a person copies, every name in them quoted
    for its language (io/escape: shell_word, python_str), and a class named only if it is one."""
    auto = AUTO_CLASS.get(architecture, "AutoModel")
    folder = str(run_dir)
    lines = ["", "## Use it", "", "```", f"python -m minibert predict {shell_word(folder)} \"your text\"",
             f"python -m minibert evaluate {shell_word(folder)} --data labelled.csv --out metrics.json", "```", "",
             "In Python, with minibert or with transformers (the directory is in transformers' layout):", "",
             "```python"]
    if architecture in TASK_ARCHITECTURES:  # a name from run.json becomes code only if it is a class minibert has
        task = PIPELINES.get(architecture)
        lines += [f"from minibert import {architecture}" + (", pipeline" if task else ""),
                  f"model = {architecture}.from_pretrained({python_str(folder)})"]
        if task:  # the pipeline of its task, as transformers' (minibert.pipeline)
            lines.append(f"pipeline({python_str(task)}, model={python_str(folder)})"
                         + ('(question="...", context="your text")' if task == "question-answering" else '("your text")'))
        lines.append("")
    lines += [f"from transformers import AutoTokenizer, {auto}, pipeline",
              f"model = {auto}.from_pretrained({python_str(folder)})",
              f"tokenizer = AutoTokenizer.from_pretrained({python_str(folder)})", "```"]
    return lines


def model_card(run_dir: str | Path) -> str:
    """The card's text (markdown) of a finished fine-tuning run. Every text that comes from the
    user (the folder's name, file names, labels, run.json's names) is escaped for where it lands
    (io/escape: markdown, shell_word, python_str): it reads as itself and never becomes a heading,
    HTML, a table column or a second command. Its size grows with the labels at most linearly
    (SHOWN_LABELS, metrics.FULL_MATRIX_LABELS)."""
    run_dir = Path(run_dir)
    info = rundir.read_run(run_dir)
    if info is None:
        raise ValueError(f"{run_dir} has no {rundir.RUN_FILE}: not a run directory")
    s, extra = info.settings, info.extra
    task = extra.get("task") if isinstance(extra.get("task"), dict) else {}
    architecture = extra.get("architecture", "a minibert task model")
    like = f" of {markdown(str(s['like']))}" if s.get("like") else ""
    base = (f"random init (the control{like})" if str(s.get("init", "")).lower() == "none"
            else markdown(str(s.get("init"))))
    lines = [f"# {markdown(run_dir.name)}: {markdown(str(architecture))} fine-tuned on "
             f"{markdown(str(task.get('name', s.get('task'))))}", "",
             f"Fine-tuned by minibert (`python -m minibert finetune`) from {base}.", "", "## Data", ""]
    for split in ("train", "dev"):
        if task.get(f"{split}_file"):
            examples, features = task.get(f"{split}_examples"), task.get(f"{split}_features")
            sizes = (f", {examples:,} examples ({features:,} features of at most {task.get('max_seq_length')} tokens)"
                     if isinstance(examples, int) and isinstance(features, int) else "")
            lines.append(f"- {split}: {markdown(task[f'{split}_file'])}{sizes}"
                         + (dev_split_note(task.get("dev_split")) if split == "dev" else ""))
    if task.get("labels"):
        lines.append(_label_line(task))
    lines += ["", "## Recipe", "", "| setting | value |", "| --- | --- |"]
    lines += [f"| {key} | {s[key]:g} |" if isinstance(s[key], (int, float)) and not isinstance(s[key], bool)
              else f"| {key} | {markdown(str(s[key]))} |" for key in RECIPE if key in s]
    lines.append(f"| optimizer steps | {_number(extra.get('total_steps', '?'))} |")
    if isinstance(extra.get("class_weights"), dict):
        weights = list(extra["class_weights"].items())
        lines.append("| class weights (loss) | " + ", ".join(f"{markdown(str(label))} {w:.4g}" for label, w in
                                                           weights[:SHOWN_LABELS])
                     + (f", and {len(weights) - SHOWN_LABELS:,} more (run.json)" if len(weights) > SHOWN_LABELS else "")
                     + (" (balanced)" if s.get("class_weights") == "balanced" else "") + " |")
    if s.get("patience"):
        lines.append(f"| patience (dev evaluations) | {_number(s['patience'])} |")
    recipe = extra.get("recipe") if isinstance(extra.get("recipe"), dict) else {}
    if recipe.get("settings"):
        raised = recipe.get("epochs_raised_from")
        lines += ["", f"Chosen by the recipe ({markdown(str(recipe.get('name')))}), not given: "
                  + ", ".join(markdown(k) for k in recipe["settings"])
                  + (f"; the epochs raised from {raised:g} so the small data set gets enough steps" if raised else "")
                  + "."]
    stop = extra.get("early_stop") if isinstance(extra.get("early_stop"), dict) else None
    if stop:
        lines += ["", f"Stopped early at step {stop['step']} of {stop['total_steps']}: {stop['patience']} "
                      f"dev evaluations in a row without a better {markdown(stop['metric'])}."]
    best = extra.get("best") if isinstance(extra.get("best"), dict) else {}
    evals = [r for r in rundir.read_jsonl(run_dir / rundir.METRICS_FILE)[0] if r.get("type") == "eval"] \
        if (run_dir / rundir.METRICS_FILE).is_file() else []
    lines += ["", "## Dev scores", ""]
    if best:
        main = markdown(str(task.get("main_metric", "")))
        lines.append(f"The saved model is the best by {main or 'the main metric'} on dev, from step "
                     f"{_number(best.get('step'))}:")
        lines += ["", "| metric | best (saved) | last evaluation |", "| --- | --- | --- |"]
        last = evals[-1] if evals else {}
        lines += [f"| {markdown(k)} | {_number(v)} | {_number(last.get(k, ''))} |" for k, v in best.items()
                  if k != "step" and isinstance(v, (int, float))]
    else:
        lines.append("No evaluation was recorded.")
    report = read_dev_report(run_dir)
    if report is not None:
        lines += _class_table(check_dev_report(report, run_dir / DEV_REPORT))
    lines += _use_lines(run_dir, architecture)
    lines += ["", "Written by minibert when the run ended; run.json and metrics.jsonl hold every number above.", ""]
    return "\n".join(lines)


def write_model_card(run_dir: str | Path) -> Path:
    """README.md in the run's directory (atomically); the caller holds the run's lock."""
    return write_text_atomic(Path(run_dir) / CARD_FILE, model_card(run_dir))
