"""A fine-tuned model on whole files: scoring a labelled file, predicting an unlabelled one.

    python -m minibert evaluate runs/sst2 --data test.tsv               # the task's metrics on any labelled file
    python -m minibert predict runs/sst2 --file test.tsv --out pred.tsv  # one prediction per example
    python -m minibert predict runs/wnut17 --file test.conll --out pred.conll
    python -m minibert predict runs/squad2 --file dev-v2.0.json --out preds/   # predictions.json, null_odds.json

The file is in the task's format (run.json of the fine-tuning run names it; `--format` for a
model without one): a GLUE TSV with a header (the label column may be absent when predicting), a
CoNLL file (word<TAB>tag, or just the word, per line; a blank line between sentences), a SWAG CSV,
or a SQuAD JSON file. Predictions come back in the same format, so the written file reads like
the input with the model's labels in it: a TSV with the label column filled in, word<TAB>tag
lines, a SWAG CSV's `label`, and for SQuAD the predictions.json (and, for 2.0, null_odds.json)
that `squad-eval` scores. SQuAD 2.0 answers "no answer" above the null threshold that was best
on dev during fine-tuning (eval.json's best_f1_thresh), as `predict --question` does.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

import numpy as np

from minibert.io.cli import command_parser
from minibert.finetune.registry import TASK_ARCHITECTURES
from minibert.loop import rundir
from minibert.checkpoint import config_architectures, model_tokenizer, read_config_json
from minibert.finetune import metrics, squad, squad_eval
from minibert.finetune.features import IGNORE_INDEX, word_predictions
from minibert.finetune.run import ClassifierSource, predict_logits
from minibert.finetune.squad_run import SquadSource, answer_threshold, saved_setting, threshold_refused
from minibert.finetune.task_data import TASKS, TaskData, generic_task, read_examples, score, task_features
from minibert.io.escape import csv_row, jsonl_row, one_line, tsv_row
from minibert.io.outputs import check_output, write_output
from minibert.io.textio import iter_lines, refuse_special_file
from minibert.taskdata.tasks import with_columns
from minibert.taskdata.readers import (LABEL_COLUMNS, LINE_BYTES, PAIR_COLUMNS, SINGLE_COLUMNS, Columns,
                                       TaggedExample, TextExample, add_column_options, columns_given, glue_columns,
                                       iter_glue_rows, read_conll, swag_rows, table_kind, table_rows, text_line)


class Finetuned(NamedTuple):
    directory: Path
    model: object  # a task class (finetune/registry.py)
    tokenizer: object
    saved: dict  # run.json's extra of the fine-tuning run ({} for a model without one)


def load_finetuned(directory: str | Path, verify: bool = True) -> Finetuned:
    """A fine-tuned model directory -> its model, tokenizer and what its run recorded."""
    directory = Path(directory)
    archs = config_architectures(read_config_json(directory / "config.json"), directory / "config.json") or [None]
    if archs[0] not in TASK_ARCHITECTURES:
        raise ValueError(f"{directory} holds a {archs[0] or 'model without architecture'}, not a fine-tuned model; "
                         f"fine-tune it first (python -m minibert finetune ...)")
    model = TASK_ARCHITECTURES[archs[0]].from_pretrained(directory, verify=verify)  # checks the rest of config.json
    tokenizer = model_tokenizer(directory, model.config, model.do_lower_case)  # the vocab checked against the model
    try:
        info = rundir.read_run(directory)
    except rundir.OtherFormat:  # the model is a transformers directory: it loads without its run's record
        info = None
    saved = info.extra if info is not None and info.command == "finetune" else {}
    return Finetuned(directory, model, tokenizer, saved)


def columns_named(ft: Finetuned, columns: Columns | None) -> Finetuned:
    """`ft` reading tables by the columns named on the command line (--text-column ...) in place of
    those its fine-tuning run recorded (run.json's task.columns)."""
    if columns is None:
        return ft
    task = ft.saved.get("task", {}) if isinstance(ft.saved.get("task"), dict) else {}
    return ft._replace(saved={**ft.saved, "task": {**task, "columns": columns.as_json()}})


def file_task(ft: Finetuned, fmt: str | None):
    """The Task the files are read and scored as: run.json's, or a generic one of --format; its
    tables read by the columns the run recorded or the command line named (columns_named)."""
    task = ft.saved.get("task", {}) if isinstance(ft.saved.get("task"), dict) else {}
    columns = Columns.from_json(task.get("columns"), str(ft.directory / rundir.RUN_FILE))
    if ft.model.head_shape == "qa":
        if columns is not None:
            raise ValueError(f"{ft.directory} answers questions (SQuAD JSON files): it reads no table's columns")
        return None
    return with_columns(_file_task(ft, fmt, task), columns)


def _file_task(ft: Finetuned, fmt: str | None, task: dict):
    if fmt is None and task.get("name") in TASKS:
        return TASKS[task["name"]]
    fmt = fmt or task.get("format")
    if fmt is None:
        raise ValueError(f"{ft.directory} has no run.json from finetune naming its task's format: pass --format "
                         f"(glue-single, glue-pair, conll or swag)")
    found = generic_task(fmt, regression=ft.model.head_shape == "sequence" and ft.model.config.num_labels == 1)
    head = {"classification": "sequence", "regression": "sequence"}.get(found.kind, found.kind)
    if head != ft.model.head_shape:
        raise ValueError(f"--format {fmt} is a {found.kind} format but {ft.directory} is a {ft.model.architecture}")
    return found


def _max_seq_length(ft: Finetuned, default: int) -> int:
    """run.json's max_seq_length (checked), at most the model's positions (a million allocated gigabytes)."""
    value = saved_setting(ft.saved, "task", "max_seq_length", default, str(ft.directory / rundir.RUN_FILE))
    return min(value, ft.model.config.max_position_embeddings)


def _labels(ft: Finetuned, task) -> list[str] | None:
    if task.kind in ("regression", "choice"):
        return None
    return [ft.model.config.id2label[i] for i in range(ft.model.config.num_labels)]


def _read(task, path: Path, labelled: bool) -> list:
    """The examples of `path` in the task's format; unlabelled CoNLL (words only) when predicting."""
    refuse_special_file(path)  # /dev/zero never ends, a FIFO would be read twice (examples, then the output)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist" + (" (a directory: give the file)" if path.is_dir() else ""))
    if task.format == "conll" and not labelled:
        sentences, words, first = [], [], 0
        for lineno, line in enumerate(iter_lines(path, LINE_BYTES), start=1):
            line = text_line(line, f"{path}:{lineno}")
            word = line.split("\t")[0].strip() if "\t" in line else (line.split() or [""])[0]
            if not word:
                if words:
                    sentences.append(TaggedExample(words, ["O"] * len(words), f"{path}:{first}"))
                words = []
            elif not line.startswith("-DOCSTART-"):
                first = first if words else lineno
                words.append(word)
        if words:
            sentences.append(TaggedExample(words, ["O"] * len(words), f"{path}:{first}"))
        examples = sentences
    elif task.format == "conll":
        examples = read_conll(path)
    else:
        examples = read_examples(task, path, "dev")
    if not examples:
        raise ValueError(f"{path}: no examples")
    if labelled and task.format in ("glue-single", "glue-pair", "swag") and any(e.label is None for e in examples):
        raise ValueError(f"{path}: no label column ({'label' if task.format == 'swag' else 'label, or the GLUE names'}"
                         f"{'' if task.format == 'swag' else '; name yours with --label-column NAME'}); evaluate "
                         f"needs labels (predict --file takes a file without them)")
    return examples


def _task_data(ft: Finetuned, task, path: Path, labelled: bool):
    examples = _read(task, path, labelled)
    labels = _labels(ft, task)
    feats = task_features(task, examples, ft.tokenizer, _max_seq_length(ft, 128), labels)
    return TaskData(task, {}, feats, labels, examples, {"dev_file": str(path)})


def _squad_source(ft: Finetuned, path: Path, labelled: bool):
    task = ft.saved.get("task", {}) if isinstance(ft.saved.get("task"), dict) else {}
    examples, stats = squad.read_squad(path, is_training=False)
    version_2 = bool(task.get("version_2", stats.version_2))
    features = squad.convert_examples_to_features(
        examples, ft.tokenizer, max_seq_length=_max_seq_length(ft, 384), is_training=False,
        doc_stride=saved_setting(ft.saved, "task", "doc_stride", 128, str(ft.directory / rundir.RUN_FILE)),
        max_query_length=saved_setting(ft.saved, "task", "max_query_length", 64, str(ft.directory / rundir.RUN_FILE)))
    gold = squad_eval.load_gold(path) if labelled else {e.qas_id: [] for e in examples}
    return SquadSource({}, examples, features, gold, version_2, ft.model.do_lower_case)


def evaluate_file_report(ft: Finetuned, path: str | Path,
                         fmt: str | None = None) -> tuple[dict[str, float], metrics.ClassReport | None]:
    """(the task's metrics, and for a classifier its per-class report: precision, recall, F1 and
    support of each label, macro-F1 and the confusion matrix; None for other tasks)."""
    found = score_file(ft, path, fmt)
    return found.scores, found.report


class FileScores(NamedTuple):
    scores: dict  # the task's metrics
    report: metrics.ClassReport | None  # a classifier's per-class report
    probs: np.ndarray | None  # (N, K) a classifier's probabilities of each label, per example
    gold: np.ndarray | None  # (N,) a classifier's gold label ids


def score_file(ft: Finetuned, path: str | Path, fmt: str | None = None) -> FileScores:
    """The model on a labelled file: its metrics, and a classifier's report and probabilities."""
    path = Path(path)
    task = file_task(ft, fmt)
    if task is None:
        return FileScores(_squad_source(ft, path, labelled=True).evaluate(ft.model), None, None, None)
    if task.format in TEXT_FORMATS:
        return _evaluate_texts(ft, task, path)
    data = _task_data(ft, task, path, labelled=True)
    return FileScores(ClassifierSource(data).evaluate(ft.model), None, None, None)


def _evaluate_texts(ft: Finetuned, task, path: Path) -> FileScores:
    """A classifier's or regressor's metrics on a labelled table, read CHUNK rows at a time: what
    is held is one predicted and one gold value an example (and a classifier's K probabilities,
    for the threshold of a two-label one), never the examples or their features."""
    _, _, rows = text_rows(task, path, labelled=True)
    labels, T, preds, golds, probs = _labels(ft, task), _max_seq_length(ft, 128), [], [], []
    for chunk in chunked(rows, path):
        feats = task_features(task, [row.example for row in chunk], ft.tokenizer, T, labels)
        logits = np.concatenate(predict_logits(ft.model, feats)).astype(np.float64)  # (n, K)
        preds.append(logits[:, 0] if task.kind == "regression" else logits.argmax(-1).astype(np.int32))
        golds.append(feats["labels"])
        if task.kind == "classification":
            p = np.exp(logits - logits.max(-1, keepdims=True))  # (n, K)
            probs.append(p / p.sum(-1, keepdims=True))
    pred, gold = np.concatenate(preds), np.concatenate(golds)  # (N,), (N,)
    data = TaskData(task, {}, {"labels": gold}, labels, [], {"dev_file": str(path)})
    if task.kind != "classification":
        return FileScores(score(data, pred), None, None, None)
    return FileScores(score(data, pred), metrics.class_report(pred, gold, labels), np.concatenate(probs), gold)


def plot_text(text: str, limit: int = 40) -> str:
    """A label as matplotlib shows it literally: one line (io/escape.one_line), cut to `limit`
    characters, its $ escaped (two of them would start mathtext, and a bad formula is an error)."""
    return one_line(str(text), limit).replace("$", r"\$")


def confusion_figure(report: metrics.ClassReport, title: str):
    """The confusion matrix as a picture: rows the gold labels, columns the predicted ones, each
    cell its count, shaded by the share of its row (what share of label k went where). Above
    metrics.FULL_MATRIX_LABELS labels (no matrix a person can read): the most confused pairs as bars."""
    # lazy: keeps matplotlib out of the start of `python -m minibert ablate` and 5 more
    import matplotlib.pyplot as plt

    if report.confusion is None:
        pairs = report.confused[::-1]  # the most confused on top
        fig, ax = plt.subplots(figsize=(7, 1.5 + 0.3 * max(len(pairs), 1)))
        ax.barh(range(len(pairs)), [c["count"] for c in pairs], color="tab:blue")
        ax.set_yticks(range(len(pairs)), [f"{plot_text(c['gold'])} -> {plot_text(c['predicted'])}" for c in pairs],
                      fontsize=8)
        ax.set_xlabel("dev examples (gold -> predicted)")
        ax.set_title(f"{plot_text(title, 80)}: the {len(pairs)} most confused pairs of {len(report.labels):,} "
                     f"classes\nmacro-F1 {report.macro_f1:.3f}", fontsize=9)
        fig.tight_layout()
        return fig
    counts = np.asarray(report.confusion, dtype=np.float64)  # (K, K)
    share = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)  # (K, K) each row sums to 1 (or 0)
    k = len(report.labels)
    fig, ax = plt.subplots(figsize=(1.2 + 0.6 * k, 1.0 + 0.6 * k))
    ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
    for i in range(k):
        for j in range(k):
            ax.text(j, i, str(int(counts[i, j])), ha="center", va="center",
                    color="white" if share[i, j] > 0.5 else "black", fontsize=9)
    labels = [plot_text(label) for label in report.labels]
    ax.set_xticks(range(k), labels, rotation=45 if max(map(len, labels)) > 4 else 0, ha="right")
    ax.set_yticks(range(k), labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    ax.set_title(f"{plot_text(title, 80)}\nmacro-F1 {report.macro_f1:.3f}", fontsize=9)
    fig.tight_layout()
    return fig


def report_json(report: metrics.ClassReport) -> dict:
    """A classifier's per-class part of `evaluate --out`'s JSON: every class's scores (linear in
    the labels), and the confusion matrix up to metrics.FULL_MATRIX_LABELS labels, always the
    most confused pairs."""
    per_class = {str(label): {"precision": report.precision[k], "recall": report.recall[k], "f1": report.f1[k],
                              "support": report.support[k]} for k, label in enumerate(report.labels)}
    out = {"per_class": per_class, "confused": report.confused}
    if report.confusion is not None:
        out["confusion"] = {"labels": [str(label) for label in report.labels], "counts": report.confusion}
    return out


def confusion_path(out: str | Path) -> Path:
    """metrics.json -> metrics.confusion.png, beside it."""
    out = Path(out)
    return out.with_name(f"{out.stem}.confusion.png")


def pr_path(out: str | Path) -> Path:
    """metrics.json -> metrics.pr.png, beside it."""
    out = Path(out)
    return out.with_name(f"{out.stem}.pr.png")


def pr_positive_label(labels: list, gold: np.ndarray, given: str | None, where: str) -> tuple[int, str]:
    """The label a two-label task's threshold is for -> (its id, why it was chosen): the one
    named by --positive, else the rarer one in the file (spam, fraud, the disease: what a
    threshold is tuned to find), else, when both are as common, the second (label id 1)."""
    names = [str(label) for label in labels]
    if given is not None:
        if given not in names:
            raise ValueError(f"--positive {given!r} is not a label of this model (its labels: "
                             f"{', '.join(names)})")
        return names.index(given), "--positive"
    counts = np.bincount(np.asarray(gold, dtype=np.int64), minlength=2)  # (2,)
    if counts[0] != counts[1]:
        return int(counts.argmin()), f"the rarer label in {where}; --positive names the other"
    return 1, f"the second label (both as common in {where}); --positive names the other"


def threshold_report(probs: np.ndarray, gold: np.ndarray, labels: list, positive: int) -> dict:
    """The precision-recall curve of the positive label, its threshold that maximises F1 and
    the scores there and at 0.5 (what the most probable label predicts, for two labels)."""
    curve = metrics.pr_curve(probs[:, positive], np.asarray(gold) == positive)
    best = curve.best_f1()
    hit = np.asarray(gold) == positive  # (N,)
    at_half = probs[:, positive] >= 0.5  # (N,)
    tp = int((at_half & hit).sum())
    p_half = tp / max(int(at_half.sum()), 1)
    r_half = tp / max(int(hit.sum()), 1)
    return {"positive_label": str(labels[positive]), "best_f1_threshold": float(curve.thresholds[best]),
            "precision": float(curve.precision[best]), "recall": float(curve.recall[best]),
            "f1": float(curve.f1[best]),
            "at_0.5": {"precision": p_half, "recall": r_half,
                       "f1": 2 * p_half * r_half / (p_half + r_half) if p_half + r_half else 0.0},
            "curve": {"thresholds": curve.thresholds.tolist(), "precision": curve.precision.tolist(),
                      "recall": curve.recall.tolist()}}


def threshold_line(found: dict, why: str) -> str:
    """The threshold report in one line, as `evaluate` prints it."""
    label, half = found["positive_label"], found["at_0.5"]
    return (f"threshold for {label!r} ({why}): p({label}) >= {found['best_f1_threshold']:.4f} maximises its F1: "
            f"precision {found['precision']:.3f}, recall {found['recall']:.3f}, F1 {found['f1']:.3f} "
            f"(at 0.5: precision {half['precision']:.3f}, recall {half['recall']:.3f}, F1 {half['f1']:.3f}); "
            f"predict --threshold {found['best_f1_threshold']:.4f} --positive {label} applies it")


def pr_figure(found: dict, title: str):
    """The precision-recall curve, with the best-F1 threshold and 0.5 marked."""
    # lazy: keeps matplotlib out of the start of `python -m minibert ablate` and 5 more
    import matplotlib.pyplot as plt

    curve, label = found["curve"], found["positive_label"]
    fig, ax = plt.subplots(figsize=(4.6, 4.0))
    ax.plot([0.0, *curve["recall"]], [1.0, *curve["precision"]], drawstyle="steps-post", color="C0")
    ax.plot(found["recall"], found["precision"], "o", color="C3",
            label=f"p >= {found['best_f1_threshold']:.3f}: F1 {found['f1']:.3f} (best)")
    ax.plot(found["at_0.5"]["recall"], found["at_0.5"]["precision"], "s", color="C2", fillstyle="none",
            label=f"p >= 0.5: F1 {found['at_0.5']['f1']:.3f}")
    ax.set_xlabel(f"recall of {label}")
    ax.set_ylabel(f"precision of {label}")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    ax.set_title(f"{title}: precision-recall of {label}", fontsize=9)
    fig.tight_layout()
    return fig


def two_label_threshold(found: FileScores, given: str | None, model: str, where: str) -> tuple[dict, str] | None:
    """A two-label classifier's threshold report and why its positive label is the one (None for
    other tasks; --positive on one of them is an error naming it)."""
    if found.report is None or len(found.report.labels) != 2:
        if given is not None:
            what = "a classifier of " + str(len(found.report.labels)) + " labels" if found.report else "not a classifier"
            raise ValueError(f"--positive is for a two-label classifier; {model} is {what}")
        return None
    positive, why = pr_positive_label(found.report.labels, found.gold, given, where)
    return threshold_report(found.probs, found.gold, found.report.labels, positive), why


def write_pr_figure(found: dict, path: Path, title: str) -> None:
    # lazy: keeps matplotlib out of the start of `python -m minibert ablate` and 5 more
    import matplotlib.pyplot as plt

    fig = pr_figure(found, title)
    write_output(path, lambda file: fig.savefig(file, format="png", dpi=120))
    plt.close(fig)


CHUNK = 2048  # examples whose features and logits are held at once by predict --file and evaluate
TEXT_FORMATS = ("glue-single", "glue-pair")  # tables (and plain text files) of one or two texts a row: streamed
OUT_KINDS = {".csv": "csv", ".tsv": "tsv", ".txt": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
PROB_PREFIX = "prob_"  # predict --out: the column (JSON key) of label L's probability is prob_L


class Row(NamedTuple):
    example: TextExample
    fields: list | None  # the table row it was read from (None: a line of a plain text file)


def is_plain_text(task, path: Path) -> bool:
    """A file of texts alone, one example a line with no header (a tab between the two texts of a
    pair): a .txt (or suffix-less) file for a one- or two-text classifier whose first line names
    none of the table columns readers know."""
    if task.format not in TEXT_FORMATS or path.suffix.lower() not in (".txt", ""):
        return False
    first = next((line for line in iter_lines(path, LINE_BYTES) if line.strip()), "")
    names = {name.strip() for name in text_line(first, f"{path}:1").split("\t")}
    known = {*SINGLE_COLUMNS, *(c for pair in PAIR_COLUMNS for c in pair), *LABEL_COLUMNS, *(task.columns or ())}
    return not names & known


def plain_rows(task, path: Path) -> Iterator[Row]:
    """The examples of a plain text file, one at a time: each non-blank line a text (a pair: two
    texts split by one tab), no label."""
    for lineno, line in enumerate(iter_lines(path, LINE_BYTES), start=1):
        where = f"{path}:{lineno}"
        line = text_line(line, where)
        if not line.strip():
            continue
        if task.format == "glue-pair":
            texts = line.split("\t")
            if len(texts) != 2:
                raise ValueError(f"{where}: {len(texts)} tab-separated texts; this model classifies a pair: two "
                                 f"texts a line, split by one tab")
            yield Row(TextExample(texts[0], texts[1], None, where), None)
        else:
            yield Row(TextExample(line, None, None, where), None)


def text_rows(task, path: Path, labelled: bool) -> tuple[list[str] | None, tuple | None, Iterator[Row]]:
    """(header, (text, pair text, label) columns, the rows one at a time) of a table, or (None,
    None, rows) of a plain text file (predicting only): the file is read as it is used, never held."""
    refuse_special_file(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist" + (" (a directory: give the file)" if path.is_dir() else ""))
    if not labelled and is_plain_text(task, path):
        return None, None, plain_rows(task, path)
    single, named = task.format == "glue-single", getattr(task, "columns", None)
    rows = table_rows(path)
    where, header, _ = next(rows)
    rows.close()
    columns = glue_columns(header, single, where, named)
    if labelled and columns[2] is None:
        raise ValueError(f"{path}: no label column (label, or the GLUE names; name yours with --label-column NAME); "
                         f"evaluate needs labels (predict --file takes a file without them)")
    return header, columns, (Row(e, list(f)) for e, f in iter_glue_rows(path, single, named))


def chunked(rows: Iterator[Row], path: Path, size: int | None = None) -> Iterator[list[Row]]:
    """`rows` in lists of `size` (CHUNK); a file without one is an error naming it."""
    size = size or CHUNK
    chunk, any_row = [], False
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk, any_row = [], True
    if chunk:
        yield chunk
    elif not any_row:
        raise ValueError(f"{path}: no examples")


def positive_label(labels: list[str] | None, threshold: float | None, positive: str | None, what: str) -> int | None:
    """predict --threshold T [--positive LABEL] on a two-label classifier: the id of the label
    predicted when its probability is at least T (the other one otherwise). The positive label
    is --positive, else the model's second label (id 1, as scikit-learn's pos_label=1: "1" of
    0/1, "spam" of ham/spam, "pos" of neg/pos: labels are sorted when a run reads them). None
    without a threshold (the most probable label)."""
    if threshold is None:
        if positive is not None:
            raise ValueError("--positive goes with --threshold (the label whose probability the threshold applies "
                             "to)")
        return None
    if labels is None or len(labels) != 2:
        raise threshold_refused(f"{what} has {'no labels' if labels is None else f'{len(labels)} labels'}")
    if not 0 <= threshold <= 1:
        raise ValueError(f"--threshold {threshold:g}: a classifier's threshold is the positive label's probability, "
                         f"from 0 to 1")
    if positive is None:
        return 1
    if positive not in labels:
        raise ValueError(f"--positive {one_line(positive, 60)} is not a label of {what}: its labels are "
                         f"{', '.join(one_line(label, 60) for label in labels)}")
    return labels.index(positive)


def class_probs(ft: Finetuned, task, examples: list, labels: list[str]) -> np.ndarray:
    """(n, K) the probability of each label, each row summing to 1 (softmax of the logits)."""
    feats = task_features(task, examples, ft.tokenizer, _max_seq_length(ft, 128), labels)
    logits = np.concatenate(predict_logits(ft.model, feats)).astype(np.float64)  # (n, K)
    probs = np.exp(logits - logits.max(-1, keepdims=True))  # (n, K)
    return probs / probs.sum(-1, keepdims=True)


def decide(probs: np.ndarray, positive: int | None, threshold: float | None) -> np.ndarray:
    """(n,) label ids: the most probable, or with a threshold the positive label where its
    probability reaches it and the other label elsewhere."""
    if positive is None:
        return probs.argmax(-1)
    return np.where(probs[:, positive] >= threshold, positive, 1 - positive)


def _unlabelled(rows: Iterator[Row]) -> Iterator[Row]:
    """Rows to predict: a label the file holds is not read (it may be one the model does not know)."""
    for row in rows:
        example = row.example
        yield row if example.label is None else Row(TextExample(example.text_a, example.text_b, None, example.where),
                                                    row.fields)


def predict_lines(ft: Finetuned, path: str | Path, write: Callable[[str], None], all_classes: bool = False,
                  fmt: str | None = None, threshold: float | None = None, positive: str | None = None) -> int:
    """Predict every example of a classifier's file (a plain text file or a table), CHUNK at a
    time, and `write` one line each: the label, its probability and the text (a pair's two texts),
    tab-separated, every text escaped onto the one line (io/escape.one_line: a newline in a text is
    \n; `all_classes`: every label's probability, as label=p). -> the count."""
    path = Path(path)
    task = file_task(ft, fmt)
    if task is None or task.kind != "classification":
        raise ValueError(f"predict --file without --out is for classifiers; {ft.directory} is "
                         f"{'a question answering' if task is None else 'a ' + task.kind} model: give --out")
    labels = _labels(ft, task)
    pos = positive_label(labels, threshold, positive, str(ft.directory))
    names = [one_line(label) for label in labels]
    n = 0
    for chunk in chunked(_unlabelled(text_rows(task, path, labelled=False)[2]), path):
        probs = class_probs(ft, task, [row.example for row in chunk], labels)  # (n, K)
        for row, p, k in zip(chunk, probs, decide(probs, pos, threshold)):
            shown = " ".join(f"{name}={q:.4f}" for name, q in zip(names, p)) if all_classes else f"{p[k]:.4f}"
            e = row.example
            text = one_line(e.text_a) + ("" if e.text_b is None else "\t" + one_line(e.text_b))
            write(f"{names[k]}\t{shown}\t{text}\n")
            n += 1
    return n


def output_kind(out: Path, path: Path) -> str:
    """The format predict --out writes: its suffix's (.csv, .tsv or .txt, .jsonl), else the input's."""
    return OUT_KINDS.get(out.suffix.lower()) or table_kind(path)


def _cell(value) -> str:
    """A table's value as a CSV or TSV field: a text as it is, any other JSON value as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _write_table(f, kind: str, header: list[str], rows: Iterator[tuple[list, str]]) -> None:
    """Rows (values, where) as `kind` (io/escape: csv_row, tsv_row, jsonl_row), header first for
    CSV and TSV; JSON Lines takes the header as its keys (numbers stay numbers)."""
    if kind == "jsonl":
        for values, _ in rows:
            f.write(jsonl_row(dict(zip(header, values))))
        return
    if kind == "csv":
        f.write(csv_row(header))
        for values, _ in rows:
            f.write(csv_row([_cell(v) for v in values]))
        return
    f.write(tsv_row(header, "the header (a label's column name)"))
    for values, where in rows:
        f.write(tsv_row([_cell(v) for v in values], where))


def _predict_texts(ft: Finetuned, task, path: Path, out: Path, threshold: float | None,
                   positive: str | None) -> int:
    """A classifier's (or regressor's) predictions of a table or a plain text file into `out`,
    CHUNK rows at a time as they are read (memory does not grow with the file): the rows again,
    the label column holding the prediction (added as `label` if the file had none) and, for a
    classifier, a column prob_LABEL of each label's probability (a column of that name the file
    had is replaced). A plain text file becomes a table: text (or sentence1, sentence2), label,
    prob_*. The format is --out's suffix's (output_kind); each row is written by io/escape, so
    `evaluate` reads back what is written."""
    labels = _labels(ft, task)
    pos = positive_label(labels, threshold, positive, str(ft.directory))
    header, columns, rows = text_rows(task, path, labelled=False)
    if header is None:  # a plain text file: its texts become the table's text columns
        texts = ["text"] if task.format == "glue-single" else ["sentence1", "sentence2"]
        header, label, text_columns = [*texts, "label"], len(texts), set(range(len(texts)))
    else:
        header, label = list(header), columns[2]
        text_columns = {c for c in columns[:2] if c is not None}
        if label is None:
            header, label = [*header, "label"], len(header)
    prob_columns = []
    for name in ([PROB_PREFIX + str(label_name) for label_name in labels] if task.kind == "classification" else []):
        if name in header and header.index(name) in text_columns | {label}:
            raise ValueError(f"{path}: its column {one_line(name, 60)} is the text or the label, and predict writes "
                             f"the probability of the label {one_line(name[len(PROB_PREFIX):], 60)} there; rename it")
        if name not in header:
            header.append(name)
        prob_columns.append(header.index(name))
    kind = output_kind(out, path)
    count = [0]

    def predicted() -> Iterator[tuple[list, str]]:
        for chunk in chunked(_unlabelled(rows), path):
            examples = [row.example for row in chunk]
            if task.kind == "regression":
                feats = task_features(task, examples, ft.tokenizer, _max_seq_length(ft, 128), None)
                values = [f"{v:.6g}" for v in np.concatenate([x[:, 0] for x in predict_logits(ft.model, feats)])]
                probs = [()] * len(chunk)
            else:
                probs = class_probs(ft, task, examples, labels)  # (n, K)
                values = [labels[k] for k in decide(probs, pos, threshold)]
            for row, value, p in zip(chunk, values, probs):
                e = row.example
                fields = list(row.fields) if row.fields is not None else \
                    [e.text_a] + ([] if e.text_b is None else [e.text_b]) + [""]
                fields += [""] * (len(header) - len(fields))
                fields[label] = value
                for column, q in zip(prob_columns, p):
                    fields[column] = float(f"{q:.6g}") if kind == "jsonl" else f"{q:.6g}"
                count[0] += 1
                yield fields, e.where

    def write(file: Path) -> None:
        with open(file, "w", encoding="utf-8", newline="") as f:
            _write_table(f, kind, header, predicted())
    write_output(out, write)
    return count[0]


def predict_file(ft: Finetuned, path: str | Path, out: str | Path, fmt: str | None = None,
                 threshold: float | None = None, positive: str | None = None) -> int:
    """Predict every example of `path` and write them to `out` in the task's format -> the count.
    `threshold`: SQuAD 2.0's null-score threshold (default: the run's), or a two-label
    classifier's threshold on the probability of its `positive` label (positive_label);
    refused for any other model."""

    path, out = Path(path), Path(out)
    task = file_task(ft, fmt)
    check_output(out, inputs=[path, ft.directory], kind="dir" if task is None else "file")
    if task is None:
        return _predict_squad(ft, path, out, threshold)
    if task.format in TEXT_FORMATS:
        return _predict_texts(ft, task, path, out, threshold, positive)
    if threshold is not None:
        raise threshold_refused(f"{ft.directory} is a {task.kind} model")
    examples, labels = _read(task, path, labelled=False), _labels(ft, task)
    T, values = _max_seq_length(ft, 128), []
    for start in range(0, len(examples), CHUNK):  # features of one chunk at a time
        chunk = examples[start:start + CHUNK]
        feats = task_features(task, chunk, ft.tokenizer, T, labels)
        logits = predict_logits(ft.model, feats)
        if task.kind == "token":
            width = feats["input_ids"].shape[-1]
            pred = np.concatenate([np.pad(x.argmax(-1), ((0, 0), (0, width - x.shape[1])),
                                          constant_values=IGNORE_INDEX) for x in logits])
            values += word_predictions(feats, pred, labels)
        else:  # multiple choice
            values += [str(int(v)) for v in np.concatenate([x.argmax(-1) for x in logits])]
    if task.kind == "token":  # word<TAB>tag lines: a tag holding a tab or a line end is refused (tsv_row)
        write_output(out, _tagged_writer(examples, values))
    else:
        write_output(out, _swag_with_labels(path, values))
    return len(values)


def _tagged_writer(examples: list, values: list):
    """write(file): word<TAB>tag lines, a blank line between sentences."""
    def write(file: Path) -> None:
        with open(file, "w", encoding="utf-8", newline="") as f:
            for i, (e, tags) in enumerate(zip(examples, values)):
                f.write(("\n" if i else "") + "".join(tsv_row([w, t], e.where) for w, t in zip(e.words, tags)))
    return write


def _swag_with_labels(path: Path, values: list[str]):
    """write(file): the SWAG CSV again, its label column holding `values` (added if the file had
    none), written row by row as the input is read again (never the whole text in memory)."""
    def write(file: Path) -> None:
        with open(file, "w", encoding="utf-8", newline="") as f:
            rows = swag_rows(path)  # the rows read_swag read: blank ones skipped by both
            header = next(rows)[1]
            col = header.index("label") if "label" in header else len(header)
            f.write(csv_row(header if col < len(header) else header + ["label"]))
            for (_, row), value in zip(rows, values):
                row = row + [""] * (col + 1 - len(row))
                row[col] = value
                f.write(csv_row(row))
            rows.close()  # restores csv's field limit now, not when the generator is collected
    return write


def _predict_squad(ft: Finetuned, path: Path, out: Path, threshold: float | None = None) -> int:
    """predictions.json, nbest.json (and null_odds.json for 2.0) in `out`, CHUNK questions at a
    time: their windows, logits and n-best lists are held for one chunk only (nbest.json is
    written as it is made), so memory does not grow with the number of questions."""

    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; for SQuAD it is a directory (predictions.json, null_odds.json)")
    where = str(ft.directory / rundir.RUN_FILE)
    task = ft.saved.get("task", {}) if isinstance(ft.saved.get("task"), dict) else {}
    examples, stats = squad.read_squad(path, is_training=False)
    version_2 = bool(task.get("version_2", stats.version_2))
    windows = dict(max_seq_length=_max_seq_length(ft, 384), is_training=False,
                   doc_stride=saved_setting(ft.saved, "task", "doc_stride", 128, where),
                   max_query_length=saved_setting(ft.saved, "task", "max_query_length", 64, where))
    threshold = answer_threshold(threshold, ft.saved, version_2, str(ft.directory), where)  # --threshold honoured
    names = ["predictions.json", "nbest.json", *(["null_odds.json"] if version_2 else [])]
    for name in names:
        check_output(out / name, inputs=[path])
    preds, null_odds = {}, {}

    def write_nbest(file: Path) -> None:  # the same text as json.dumps(nbest, indent=2), one chunk at a time
        with open(file, "w", encoding="utf-8") as f:
            f.write("{")
            for start in range(0, len(examples), CHUNK):
                chunk = examples[start:start + CHUNK]
                features = squad.convert_examples_to_features(chunk, ft.tokenizer, **windows)
                dev = squad.stack_features(features)
                T = dev["input_ids"].shape[1]
                logits = np.concatenate([np.pad(x, ((0, 0), (0, T - x.shape[1]), (0, 0)))
                                         for x in predict_logits(ft.model, dev)])  # (N, T, 2)
                p, nbest, odds = squad.postprocess(chunk, features, (logits[..., 0], logits[..., 1]),
                                                   do_lower_case=ft.model.do_lower_case, version_2=version_2,
                                                   null_score_diff_threshold=threshold)
                preds.update(p)
                null_odds.update(odds)
                f.write(("," if start else "") + json.dumps(nbest, indent=2)[1:-2])
            f.write("\n}\n" if examples else "}\n")

    made = None if out.exists() else next(p for p in (out, *out.parents) if p.parent.exists())  # the top one made
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_output(out / "nbest.json", write_nbest)
        write_output(out / "predictions.json", json.dumps(preds, indent=2) + "\n")
        if version_2:
            write_output(out / "null_odds.json", json.dumps(null_odds, indent=2) + "\n")
    except BaseException:
        if made is not None:  # a failed write (a full disk) leaves no empty folder behind
            shutil.rmtree(made, ignore_errors=True)
        raise
    return len(preds)


def evaluate_cli(argv: list[str]) -> int:
    p = command_parser("evaluate", "Score a fine-tuned model on any labelled file in its task's format.")
    p.add_argument("model_dir", help="a fine-tuning run's directory (runs/sst2 ...)")
    p.add_argument("--data", required=True, help="the labelled file: a table (TSV, CSV or JSON Lines), a CoNLL file, a SWAG CSV or a "
                                                "SQuAD JSON")
    p.add_argument("--format", choices=("glue-single", "glue-pair", "conll", "swag"),
                   help="the file's format, for a model without a fine-tuning run.json")
    add_column_options(p.add_argument)  # --text-column ...: a table's columns (default: the run's, or by name)
    p.add_argument("--out", help="also write the metrics to this JSON file (a classifier's per-class scores and "
                                 "confusion matrix too, and the matrix drawn beside it as NAME.confusion.png)")
    p.add_argument("--positive", metavar="LABEL", dest="positive_label",
                   help="a two-label classifier: the label whose precision-recall curve and best-F1 threshold are "
                        "reported, as predict --threshold T --positive LABEL applies it (default: the rarer label in "
                        "the file; the second label when both are as common)")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="load weights that are not finite or do not match their recorded sha256")
    args = p.parse_args(argv)

    if args.out:  # before the model is loaded and the file scored
        check_output(args.out, inputs=[args.data, args.model_dir])
        check_output(confusion_path(args.out), inputs=[args.data, args.model_dir])
        check_output(pr_path(args.out), inputs=[args.data, args.model_dir])
    ft = columns_named(load_finetuned(args.model_dir, args.verify), columns_given(args))
    found = score_file(ft, args.data, args.format)
    scores, report = found.scores, found.report
    threshold = two_label_threshold(found, args.positive_label, args.model_dir, Path(args.data).name)
    print(f"{args.data}: " + ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                                       for k, v in scores.items()))
    if report is not None:
        print(report.table())
    if threshold is not None:
        print(threshold_line(*threshold))
    if args.out:
        per_class = {} if report is None else report_json(report)
        if threshold is not None:  # the curve is in the picture
            per_class["threshold"] = {k: v for k, v in threshold[0].items() if k != "curve"}
        write_output(args.out, json.dumps({"file": str(args.data), **scores, **per_class}, indent=1) + "\n")
        if threshold is not None:
            write_pr_figure(threshold[0], pr_path(args.out), Path(args.data).name)
        if report is not None:
            # lazy: keeps matplotlib out of the start of `python -m minibert ablate` and 5 more
            import matplotlib.pyplot as plt

            fig = confusion_figure(report, Path(args.data).name)
            write_output(confusion_path(args.out), lambda file: fig.savefig(file, format="png", dpi=120))
            plt.close(fig)
            print(f"wrote {args.out} and {confusion_path(args.out)}" + (f" and {pr_path(args.out)}" if threshold else ""))
    return 0
