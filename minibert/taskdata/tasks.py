"""The built-in tasks: what each is (its kind, file format, file names, metrics, default data
directory), how to find its files and how to read its examples; `generic_task(format)` makes the
same for a learner's own files. Fine-tuning (finetune/task_data.py) turns the examples into features
and scores predictions; pretraining reads the text (train/task_corpus.py).

    sst2      classification  glue-single  train.tsv, dev.tsv        accuracy
    rte       classification  glue-pair    train.tsv, dev.tsv        accuracy
    wnut17    token           conll        train.conll, dev.conll    entity precision/recall/F1
              (shipped in data/wnut17, the default directory)
    swag      choice          swag         train.csv, val.csv (or dev.csv)   accuracy
    nextsent  choice          nextsent     train.txt, heldout.txt    accuracy
              (offline "which sentence comes next"; default: the default pretraining corpus)
    punct     token           punct        train.txt, heldout.txt    tag precision/recall/F1
              (offline punctuation restoration: the marks taken out, each word tagged with
              the one that followed it; default: the default pretraining corpus)
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from minibert.data.corpus import ensure_default_corpus, read_documents_as_sentences
from minibert.io.paths import repo_root
from minibert.taskdata.readers import (Columns, nextsent_examples, punct_examples, read_conll, read_glue,
                                       read_swag, table_format)

ROOT = repo_root()
FORMATS = ("glue-single", "glue-pair", "conll", "swag", "nextsent", "punct")
CORPUS_FORMATS = ("nextsent", "punct")  # built from documents; default data: the default corpus


@dataclass(frozen=True)
class Task:
    """What a task is: its kind, file format, file names and the metrics to report.

    `train_files` / `dev_files` list accepted names in a data directory (the first present is
    used). `metrics` are reported in order; `main_metric` picks the best checkpoint.
    """
    name: str
    kind: str  # "classification" | "regression" | "token" | "choice"
    format: str  # one of FORMATS
    train_files: tuple[str, ...]
    dev_files: tuple[str, ...]
    metrics: tuple[str, ...]
    main_metric: str
    default_dir: Path | None = None  # where the files are when no data_dir is given
    columns: Columns | None = None  # a table's columns as the user named them (None: found by name)

    @property
    def head(self) -> str:
        """The head in minibert.finetune.heads: 'sequence', 'token' or 'choice'."""
        return "sequence" if self.kind in ("classification", "regression") else self.kind


TASKS = {
    "sst2": Task("sst2", "classification", "glue-single", ("train.tsv",), ("dev.tsv", "validation.tsv"),
                 ("accuracy",), "accuracy"),
    "rte": Task("rte", "classification", "glue-pair", ("train.tsv",), ("dev.tsv", "validation.tsv"),
                ("accuracy",), "accuracy"),
    "wnut17": Task("wnut17", "token", "conll", ("train.conll",), ("dev.conll",),
                   ("precision", "recall", "f1"), "f1", ROOT / "data" / "wnut17"),
    "swag": Task("swag", "choice", "swag", ("train.csv",), ("val.csv", "dev.csv"),
                 ("accuracy",), "accuracy"),
    "nextsent": Task("nextsent", "choice", "nextsent", ("train.txt",), ("heldout.txt",),
                     ("accuracy",), "accuracy"),
    "punct": Task("punct", "token", "punct", ("train.txt",), ("heldout.txt",),
                  ("precision", "recall", "f1"), "f1"),
}
NEXTSENT_TRAIN_PER_DOC = 2  # nextsent: examples per train document (all positions for dev)


# A learner's own files: train.* and dev.* (or validation.*, as the datasets library names the
# split), as TSV, CSV or JSON Lines (tables), CoNLL (tagged words) or SWAG's CSV (choices).
TABLE_SUFFIXES = (".tsv", ".csv", ".jsonl")  # the names looked for; any of readers.TABLE_KINDS by --train/--dev
CUSTOM_FILES = {
    "table": (tuple(f"train{s}" for s in TABLE_SUFFIXES),
              tuple(f"{split}{s}" for split in ("dev", "validation") for s in TABLE_SUFFIXES)),
    "conll": (("train.conll",), ("dev.conll", "validation.conll")),
    "swag": (("train.csv",), ("val.csv", "dev.csv", "validation.csv")),
}


def generic_task(format: str, regression: bool = False) -> Task:
    """A task for your own files in one of the formats (`--format glue-pair` etc.).

    glue-*: classification (accuracy, macro-F1, Matthews correlation; the best model kept by
    macro-F1), or with `regression=True` a float label (Pearson, Spearman); conll: token
    classification (entity P/R/F1); swag: choice.

    >>> generic_task("glue-pair").dev_files[:2]
    ('dev.tsv', 'dev.csv')
    """
    train, dev = CUSTOM_FILES["table"]
    if format.startswith("glue-") and format in FORMATS:
        if regression:
            return Task("regression", "regression", format, train, dev, ("pearson", "spearman"), "pearson")
        # kept by macro-F1: your own labels are often unbalanced, where accuracy rewards the common label
        return Task(format, "classification", format, train, dev, ("accuracy", "macro_f1", "mcc"), "macro_f1")
    if format == "conll":
        return Task("conll", "token", "conll", *CUSTOM_FILES["conll"], ("precision", "recall", "f1"), "f1")
    if format == "swag":
        return Task("swag", "choice", "swag", *CUSTOM_FILES["swag"], TASKS["swag"].metrics, TASKS["swag"].main_metric)
    raise ValueError(f"unknown format {format!r}; expected one of glue-single, glue-pair, conll, swag")


def with_columns(task: Task, columns: Columns | None) -> Task:
    """`task` reading its tables by the columns named (--text-column ...); refused for a format
    that is no table of texts (CoNLL, SWAG, the corpus tasks)."""
    if columns is None:
        return task
    if task.format not in ("glue-single", "glue-pair"):
        raise ValueError(f"--text-column, --text-pair-column and --label-column name the columns of a table of "
                         f"texts (CSV, TSV, JSON Lines); {task.name} reads {task.format}")
    return replace(task, columns=columns)


def custom_task(format: str | None = None, data_dir=None, train_path=None, dev_path=None,
                regression: bool = False, columns: Columns | None = None, split_dev: bool = False) -> Task:
    """The task of a learner's own files: `format` when given, else found from the files (their
    suffix and columns: readers.table_format), which must agree with each other. `columns`: the
    columns named (--text-column, --text-pair-column, --label-column).

    The files are the explicit paths, else train.* and dev.* / validation.* in `data_dir`
    (`split_dev`: the train file alone, its dev set split off by --dev-split)."""
    if format is not None:
        return with_columns(generic_task(format, regression), columns)
    if data_dir is None and (train_path is None or (dev_path is None and not split_dev)):
        raise ValueError("your own files need --data DIR (holding train.* and dev.*) or --train FILE and --dev FILE "
                         "(or --train FILE and --dev-split FRACTION)")
    probe = Task("custom", "classification", "glue-single",
                 tuple(dict.fromkeys(n for files in CUSTOM_FILES.values() for n in files[0])),
                 tuple(dict.fromkeys(n for files in CUSTOM_FILES.values() for n in files[1])), (), "")
    train, dev = task_paths(probe, data_dir, train_path, dev_path, split_dev)
    if dev is None:  # --dev-split: the train file alone
        return with_columns(generic_task(table_format(train, columns), regression), columns)
    formats = {path: table_format(path, columns) for path in (train, dev)}
    if formats[train] != formats[dev]:
        raise ValueError(f"the train and dev files are of two formats: {train} reads as {formats[train]}, "
                         f"{dev} as {formats[dev]}; give them the same columns (or name the format with --format)")
    return with_columns(generic_task(formats[train], regression), columns)


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {', '.join(TASKS)}")
    return TASKS[name]


# ---------------------------------------------------------------------------------------------
# Finding the files

def find_file(data_dir: Path, names: tuple[str, ...], split: str, task: Task) -> Path:
    """The first of `names` present in data_dir; FileNotFoundError listing what is there."""
    for name in names:
        if (data_dir / name).is_file():
            return data_dir / name
    present = sorted(p.name for p in data_dir.iterdir()) if data_dir.is_dir() else None
    there = ("the directory does not exist" if present is None else
             f"files present: {', '.join(present) or '(none)'}")
    raise FileNotFoundError(f"task {task.name}: no {split} file {data_dir / names[0]}"
                            f"{' (or ' + ', '.join(names[1:]) + ')' if names[1:] else ''}; {there}")


def task_paths(task: Task, data_dir=None, train_path=None, dev_path=None,
               split_dev: bool = False) -> tuple[Path, Path | None]:
    """(train, dev) paths: explicit paths win, else the task's file names in data_dir.
    `split_dev`: the dev set is split off the train file (--dev-split): dev is None."""
    if split_dev and dev_path is not None:
        raise ValueError(f"--dev-split splits a dev set off the training file; --dev {dev_path} names one too: "
                         f"give one or the other")
    directory = Path(data_dir) if data_dir is not None else task.default_dir
    if directory is None and task.format in CORPUS_FORMATS:
        directory = Path(ensure_default_corpus().train).parent
    if directory is None and (train_path is None or (dev_path is None and not split_dev)):
        raise ValueError(f"task {task.name} has no default data directory: give one holding "
                         f"{task.train_files[0]} and {task.dev_files[0]}")
    train = Path(train_path) if train_path is not None else find_file(directory, task.train_files, "train", task)
    if split_dev:
        dev = None
    else:
        dev = Path(dev_path) if dev_path is not None else find_file(directory, task.dev_files, "dev", task)
    for path in (train, dev)[:1 if split_dev else 2]:
        if not path.is_file():
            raise FileNotFoundError(f"task {task.name}: {path} does not exist")
    return train, dev


# ---------------------------------------------------------------------------------------------
# Reading the examples

def read_examples(task: Task, path: Path, split: str, seed: int = 0, notes: bool = True) -> list:
    """The examples of one file in the task's format (`notes` False: a table read again says
    nothing of the rows it skips or joins, said when it was read first)."""
    if task.format in ("glue-single", "glue-pair"):
        return read_glue(path, single=task.format == "glue-single", columns=task.columns, notes=notes)
    if task.format == "conll":
        return read_conll(path)
    if task.format == "swag":
        return read_swag(path)
    if task.format == "punct":
        return punct_examples(read_documents_as_sentences(path), source=str(path))
    per_doc = NEXTSENT_TRAIN_PER_DOC if split == "train" else None
    return nextsent_examples(read_documents_as_sentences(path), seed=seed + (split != "train"),
                             max_per_doc=per_doc, source=str(path))
