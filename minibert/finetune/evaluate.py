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

import csv
import json
import shutil
from pathlib import Path
from typing import Callable, NamedTuple

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
from minibert.io.outputs import check_output, write_output
from minibert.io.textio import iter_lines, refuse_special_file
from minibert.taskdata.readers import (LABEL_COLUMNS, LINE_BYTES, PAIR_COLUMNS, SINGLE_COLUMNS, TaggedExample,
                                       TextExample, glue_columns, read_conll, swag_rows, table_kind, table_rows,
                                       text_line)


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


def file_task(ft: Finetuned, fmt: str | None):
    """The Task the files are read and scored as: run.json's, or a generic one of --format."""
    task = ft.saved.get("task", {}) if isinstance(ft.saved.get("task"), dict) else {}
    if ft.model.head_shape == "qa":
        return None
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
    elif not labelled and is_plain_text(task, path):
        examples = plain_examples(task, path)
    else:
        examples = read_examples(task, path, "dev")
    if not examples:
        raise ValueError(f"{path}: no examples")
    if labelled and task.format in ("glue-single", "glue-pair", "swag") and any(e.label is None for e in examples):
        raise ValueError(f"{path}: no label column ({'label' if task.format == 'swag' else 'label, or the GLUE names'}"
                         f"); evaluate needs labels (predict --file takes a file without them)")
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
    data = _task_data(ft, task, path, labelled=True)
    if task.kind != "classification":
        return FileScores(ClassifierSource(data).evaluate(ft.model), None, None, None)
    logits = np.concatenate(predict_logits(ft.model, data.dev)).astype(np.float64)  # (N, K)
    probs = np.exp(logits - logits.max(-1, keepdims=True))  # (N, K)
    probs /= probs.sum(-1, keepdims=True)
    pred, gold = logits.argmax(-1), data.dev["labels"]  # (N,) label ids
    return FileScores(score(data, pred), metrics.class_report(pred, gold, data.labels), probs, gold)


def confusion_figure(report: metrics.ClassReport, title: str):
    """The confusion matrix as a picture: rows the gold labels, columns the predicted ones, each
    cell its count, shaded by the share of its row (what share of label k went where)."""
    # lazy: keeps matplotlib out of the start of `python -m minibert ablate` and 5 more
    import matplotlib.pyplot as plt

    counts = np.asarray(report.confusion, dtype=np.float64)  # (K, K)
    share = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)  # (K, K) each row sums to 1 (or 0)
    k = len(report.labels)
    fig, ax = plt.subplots(figsize=(1.2 + 0.6 * k, 1.0 + 0.6 * k))
    ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
    for i in range(k):
        for j in range(k):
            ax.text(j, i, str(int(counts[i, j])), ha="center", va="center",
                    color="white" if share[i, j] > 0.5 else "black", fontsize=9)
    labels = [str(label) for label in report.labels]
    ax.set_xticks(range(k), labels, rotation=45 if max(map(len, labels)) > 4 else 0, ha="right")
    ax.set_yticks(range(k), labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    ax.set_title(f"{title}\nmacro-F1 {report.macro_f1:.3f}", fontsize=9)
    fig.tight_layout()
    return fig


def confusion_path(out: str | Path) -> Path:
    """metrics.json -> metrics.confusion.png, beside it."""
    out = Path(out)
    return out.with_name(f"{out.stem}.confusion.png")


def pr_path(out: str | Path) -> Path:
    """metrics.json -> metrics.pr.png, beside it."""
    out = Path(out)
    return out.with_name(f"{out.stem}.pr.png")


def positive_label(labels: list, gold: np.ndarray, given: str | None, where: str) -> tuple[int, str]:
    """The label a two-label task's threshold is for -> (its id, why it was chosen): the one
    named by --positive-label, else the rarer one in the file (spam, fraud, the disease: what a
    threshold is tuned to find), else, when both are as common, the second (label id 1)."""
    names = [str(label) for label in labels]
    if given is not None:
        if given not in names:
            raise ValueError(f"--positive-label {given!r} is not a label of this model (its labels: "
                             f"{', '.join(names)})")
        return names.index(given), "--positive-label"
    counts = np.bincount(np.asarray(gold, dtype=np.int64), minlength=2)  # (2,)
    if counts[0] != counts[1]:
        return int(counts.argmin()), f"the rarer label in {where}; --positive-label names the other"
    return 1, f"the second label (both as common in {where}); --positive-label names the other"


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
            f"(at 0.5: precision {half['precision']:.3f}, recall {half['recall']:.3f}, F1 {half['f1']:.3f})")


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
    other tasks; --positive-label on one of them is an error naming it)."""
    if found.report is None or len(found.report.labels) != 2:
        if given is not None:
            what = "a classifier of " + str(len(found.report.labels)) + " labels" if found.report else "not a classifier"
            raise ValueError(f"--positive-label is for a two-label classifier; {model} is {what}")
        return None
    positive, why = positive_label(found.report.labels, found.gold, given, where)
    return threshold_report(found.probs, found.gold, found.report.labels, positive), why


def write_pr_figure(found: dict, path: Path, title: str) -> None:
    # lazy: keeps matplotlib out of the start of `python -m minibert ablate` and 5 more
    import matplotlib.pyplot as plt

    fig = pr_figure(found, title)
    write_output(path, lambda file: fig.savefig(file, format="png", dpi=120))
    plt.close(fig)


CHUNK = 2048  # examples whose features and logits are held at once by predict --file


def is_plain_text(task, path: Path) -> bool:
    """A file of texts alone, one example a line with no header (a tab between the two texts of a
    pair): a .txt (or suffix-less) file for a one- or two-text classifier whose first line names
    none of the table columns readers know."""
    if task.format not in ("glue-single", "glue-pair") or path.suffix.lower() not in (".txt", ""):
        return False
    first = next((line for line in iter_lines(path, LINE_BYTES) if line.strip()), "")
    names = {name.strip() for name in text_line(first, f"{path}:1").split("\t")}
    known = {*SINGLE_COLUMNS, *(c for pair in PAIR_COLUMNS for c in pair), *LABEL_COLUMNS}
    return not names & known


def plain_examples(task, path: Path) -> list[TextExample]:
    """The examples of a plain text file: each non-blank line a text (a pair: two texts split by
    one tab), no label."""
    examples = []
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
            examples.append(TextExample(texts[0], texts[1], None, where))
        else:
            examples.append(TextExample(line, None, None, where))
    return examples


def predict_lines(ft: Finetuned, path: str | Path, write: Callable[[str], None], all_classes: bool = False,
                  fmt: str | None = None) -> int:
    """Predict every example of a classifier's file (a plain text file or a table) and `write`
    one line each: the label, its probability and the text, tab-separated (`all_classes`: every
    label's probability, as label=p). -> the count."""
    path = Path(path)
    task = file_task(ft, fmt)
    if task is None or task.kind != "classification":
        raise ValueError(f"predict --file without --out is for classifiers; {ft.directory} is "
                         f"{'a question answering' if task is None else 'a ' + task.kind} model: give --out")
    examples, labels = _read(task, path, labelled=False), _labels(ft, task)
    T, n = _max_seq_length(ft, 128), 0
    for start in range(0, len(examples), CHUNK):
        chunk = examples[start:start + CHUNK]
        logits = np.concatenate(predict_logits(ft.model, task_features(task, chunk, ft.tokenizer, T, labels)))  # (n, K)
        probs = np.exp(logits - logits.max(-1, keepdims=True))  # (n, K)
        probs /= probs.sum(-1, keepdims=True)
        for example, p in zip(chunk, probs):
            best = int(p.argmax())
            shown = " ".join(f"{label}={q:.4f}" for label, q in zip(labels, p)) if all_classes else f"{p[best]:.4f}"
            text = example.text_a if example.text_b is None else f"{example.text_a}\t{example.text_b}"
            write(f"{labels[best]}\t{shown}\t{text}\n")
            n += 1
    return n


def predict_file(ft: Finetuned, path: str | Path, out: str | Path, fmt: str | None = None,
                 threshold: float | None = None) -> int:
    """Predict every example of `path` and write them to `out` in the task's format -> the count.
    `threshold`: SQuAD 2.0's null-score threshold (default: the run's; refused for any other model)."""

    path, out = Path(path), Path(out)
    task = file_task(ft, fmt)
    check_output(out, inputs=[path, ft.directory], kind="dir" if task is None else "file")
    if task is None:
        return _predict_squad(ft, path, out, threshold)
    if threshold is not None:
        raise threshold_refused(f"{ft.directory} is a {task.kind} model")

    if task.kind == "classification" and is_plain_text(task, path):  # the texts alone: label, probability, text
        count = []

        def write_lines(file: Path) -> None:
            with open(file, "w", encoding="utf-8") as f:
                count.append(predict_lines(ft, path, f.write, fmt=fmt))
        write_output(out, write_lines)
        return count[0]
    examples, labels = _read(task, path, labelled=False), _labels(ft, task)
    T, values = _max_seq_length(ft, 128), []
    for start in range(0, len(examples), CHUNK):  # features of one chunk at a time: memory does not grow with the file
        chunk = examples[start:start + CHUNK]
        feats = task_features(task, chunk, ft.tokenizer, T, labels)
        logits = predict_logits(ft.model, feats)
        if task.kind == "token":
            width = feats["input_ids"].shape[-1]
            pred = np.concatenate([np.pad(x.argmax(-1), ((0, 0), (0, width - x.shape[1])),
                                          constant_values=IGNORE_INDEX) for x in logits])
            values += word_predictions(feats, pred, labels)
        elif task.kind == "regression":
            values += [f"{v:.6g}" for v in np.concatenate([x[:, 0] for x in logits])]
        elif task.kind == "choice":
            values += [str(int(v)) for v in np.concatenate([x.argmax(-1) for x in logits])]
        else:
            values += [labels[int(i)] for i in np.concatenate([x.argmax(-1) for x in logits])]
    if task.kind == "token":
        write_output(out, "\n".join("".join(f"{w}\t{t}\n" for w, t in zip(e.words, s))
                                     for e, s in zip(examples, values)))
    else:
        write_output(out, _with_labels(path, task, values))
    return len(values)


def _with_labels(path: Path, task, values: list[str]):
    """write(file): the input file again, its label column holding `values` (added if the file had
    none), written row by row as the input is read again (never the whole text in memory)."""
    def write(file: Path) -> None:
        with open(file, "w", encoding="utf-8", newline="") as f:
            if task.format == "swag":
                rows = swag_rows(path)  # the rows read_swag read: blank ones skipped by both
                header = next(rows)[1]
                col = header.index("label") if "label" in header else len(header)
                writer = csv.writer(f, lineterminator="\n")
                writer.writerow(header if col < len(header) else header + ["label"])
                for (_, row), value in zip(rows, values):
                    row = row + [""] * (col + 1 - len(row))
                    row[col] = value
                    writer.writerow(row)
                rows.close()  # restores csv's field limit now, not when the generator is collected
                return
            kind = table_kind(path)
            if kind == "jsonl":  # each object again, its label key set (the others kept as they were)
                rows = table_rows(path)
                _, header, _ = next(rows)
                _, _, label = glue_columns(header, task.format == "glue-single", f"{path}:1")
                key = "label" if label is None else header[label]
                records = (json.loads(line) for line in iter_lines(path, LINE_BYTES) if line.strip())
                for record, value in zip(records, values):
                    f.write(json.dumps({**record, key: value}, ensure_ascii=False) + "\n")
                return
            rows = table_rows(path)  # the rows read_glue read: blank ones skipped by both
            _, header, _ = next(rows)
            _, _, label = glue_columns(header, task.format == "glue-single", f"{path}:1")
            if label is None:
                header, label = header + ["label"], len(header)
            write_row = csv.writer(f, lineterminator="\n").writerow if kind == "csv" else \
                (lambda row: f.write("\t".join(row) + "\n"))
            write_row(header)
            for (_, _, fields), value in zip(rows, values):
                fields = list(fields) + [""] * (len(header) - len(fields))
                fields[label] = value
                write_row(fields)
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
    p.add_argument("--out", help="also write the metrics to this JSON file (a classifier's per-class scores and "
                                 "confusion matrix too, and the matrix drawn beside it as NAME.confusion.png)")
    p.add_argument("--positive-label", metavar="LABEL",
                   help="a two-label classifier: the label whose precision-recall curve and best-F1 threshold are "
                        "reported (default: the rarer label in the file; the second label when both are as common)")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="load weights that are not finite or do not match their recorded sha256")
    args = p.parse_args(argv)

    if args.out:  # before the model is loaded and the file scored
        check_output(args.out, inputs=[args.data, args.model_dir])
        check_output(confusion_path(args.out), inputs=[args.data, args.model_dir])
        check_output(pr_path(args.out), inputs=[args.data, args.model_dir])
    ft = load_finetuned(args.model_dir, args.verify)
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
        per_class = {} if report is None else {"per_class": {
            str(label): {"precision": report.precision[k], "recall": report.recall[k], "f1": report.f1[k],
                         "support": report.support[k]} for k, label in enumerate(report.labels)},
            "confusion": {"labels": [str(label) for label in report.labels], "counts": report.confusion}}
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
