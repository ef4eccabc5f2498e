"""SQuAD in the fine-tuning loop: the batch source, the dev evaluation with the official scoring,
and `predict --question --context`.

    python -m minibert finetune squad2 --init runs/tiny --out runs/squad2   # data/squad2 ships with minibert
    python -m minibert finetune squad1 --data DIR --init runs/tiny          # DIR: train-v1.1.json, dev-v1.1.json

At each dev evaluation: logits of every window -> run_squad's post-processing (n-best, max
context, the null score for v2.0) -> the official EM/F1 (minibert/finetune/squad_eval.py). When
the dev F1 is the best so far, OUT_DIR gets the model and predictions.json, nbest.json,
null_odds.json (v2.0) and eval.json (the official keys, best_f1 and its threshold included).

SQuAD 2.0's best_f1 and best_exact (and their thresholds) come from the official search run on
every question's best span, not on the predictions at threshold 0: run_squad writes "" for a
question whose null score wins, and the official search scores the text it is given, so a span
hidden behind "" could never count. A model that has learnt spans but whose null score still
wins everywhere (early in fine-tuning) gets f1 = the no-answer rate and, here, the best_f1 its
spans are worth; `predict` and `evaluate` answer at that threshold.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from minibert.finetune import squad, squad_eval
from minibert.finetune.run import FinetuneConfig, FinetuneRun, DataSource, load_model, predict_logits
from minibert.loop.rundir import write_json
from minibert.taskdata.squad_files import DEFAULT_DIR, FILES


class SquadSource(DataSource):
    label_keys = ("start_positions", "end_positions")
    main_metric = "f1"  # SQuAD 1.1; 2.0 keeps the checkpoint by best_f1 (below)

    def __init__(self, train: dict, dev_examples, dev_features, gold, version_2: bool, do_lower_case: bool):
        # SQuAD 2.0: the checkpoint kept is the one with the best F1 at the no-answer threshold
        # chosen on dev (best_f1, what `predict` then uses), as run_squad's users tune
        # null_score_diff_threshold. F1 at threshold 0 kept an always-"no answer" first epoch
        # (53.1) over a second that found spans (HasAns F1 28) but answered too often (44.3).
        self.main_metric = "best_f1" if version_2 else "f1"
        self.train, self.dev_examples, self.dev_features = train, dev_examples, dev_features
        self.dev = squad.stack_features(dev_features)
        self.gold, self.version_2, self.do_lower_case = gold, version_2, do_lower_case
        self.last = None  # (predictions, nbest, null_odds, scores) of the latest evaluation

    def evaluate(self, model) -> dict[str, float]:
        logits = np.concatenate([np.pad(l, ((0, 0), (0, self.dev["input_ids"].shape[1] - l.shape[1]), (0, 0)))
                                 for l in predict_logits(model, self.dev)])  # (N, T, 2)
        preds, nbest, null_odds = squad.postprocess(self.dev_examples, self.dev_features,
                                                    (logits[..., 0], logits[..., 1]),
                                                    do_lower_case=self.do_lower_case, version_2=self.version_2)
        scores = squad_eval.evaluate(self.gold, preds, null_odds if self.version_2 else None)
        if self.version_2:
            scores.update(threshold_search(self.gold, nbest, null_odds))
        self.last = (preds, nbest, null_odds, scores)
        return {k: float(v) for k, v in scores.items()}

    def on_best(self, directory: Path) -> None:
        preds, nbest, null_odds, scores = self.last
        write_json(directory / "predictions.json", preds)
        write_json(directory / "nbest.json", nbest)
        if self.version_2:
            write_json(directory / "null_odds.json", null_odds)
        write_json(directory / "eval.json", scores)


def threshold_search(gold: dict, nbest: dict, null_odds: dict) -> dict[str, float]:
    """The official best_exact/best_f1 search over each question's best non-null span (see the
    module docstring) -> {best_exact, best_exact_thresh, best_f1, best_f1_thresh}."""
    spans = {qid: next((e["text"] for e in entries if e["text"]), "") for qid, entries in nbest.items()}
    full = squad_eval.evaluate(gold, spans, null_odds)
    return {k: full[k] for k in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh")}


def _files(cfg: FinetuneConfig) -> tuple[Path, Path]:
    if not cfg.data and cfg.task not in DEFAULT_DIR:
        raise ValueError(f"{cfg.task} needs --data DIR holding {' and '.join(FILES[cfg.task])}")
    data = Path(cfg.data) if cfg.data else DEFAULT_DIR[cfg.task]
    paths = tuple(data / name for name in FILES[cfg.task])
    for p in paths:
        if not p.is_file():
            present = sorted(q.name for q in data.iterdir()) if data.is_dir() else []
            raise FileNotFoundError(f"{p} does not exist (the directory has {present})")
    return paths


def keep_null_windows(features: list, share: float, seed: int) -> list:
    """Every window that holds its answer, and `share` of those that do not (their label is the
    [CLS] position 0), drawn without replacement by `seed`; the order is kept.

    SQuAD 2.0 cut into windows is mostly "no answer": half its questions have none, and a long
    context's other windows do not hold the answer either (59% of the shipped subset's windows at
    length 256). A small data set spent mostly on [CLS] teaches the null's base rate before the
    spans; fewer null windows give the span loss more of the steps."""
    null = [i for i, f in enumerate(features) if f.start_position == 0]
    rng = np.random.default_rng([seed, 7])
    drop = set(rng.choice(null, size=len(null) - round(share * len(null)), replace=False).tolist())
    return [f for i, f in enumerate(features) if i not in drop]


def squad_main_metric(name: str | None, version_2: bool, task: str) -> str:
    """The dev metric a SQuAD run keeps its best checkpoint by: `name` (--set main_metric), else
    f1 (1.1) or best_f1 (2.0: F1 at the no-answer threshold found on dev, what predict uses)."""
    allowed = ("best_f1", "best_exact", "f1", "exact") if version_2 else ("f1", "exact")
    if name is None:
        return allowed[0]
    if name not in allowed:
        raise ValueError(f"main_metric={name!r} is not a dev metric of {task}; choose one of {', '.join(allowed)}")
    return name


def build_squad_run(cfg: FinetuneConfig, verbose: bool = True, resumed: bool = False, **run) -> FinetuneRun:
    """SQuAD's data and model as a FinetuneRun; `run`: what FinetuneRun takes beside them (the recipe, the closing)."""
    train_path, dev_path = _files(cfg)
    version_2 = cfg.task == "squad2"
    if cfg.dev_split:
        raise ValueError(f"--dev-split splits a dev set off your own training file; {cfg.task} has its dev file")
    main = squad_main_metric(cfg.main_metric, version_2, cfg.task)  # before the model is loaded
    model, tokenizer = load_model(cfg, "qa", None, None, notes=not resumed)
    train_examples, stats = squad.read_squad(train_path, is_training=True)
    dev_examples, dev_stats = squad.read_squad(dev_path, is_training=False)
    if cfg.task == "squad1" and (stats.version_2 or dev_stats.version_2):
        raise ValueError(f"{train_path} has unanswerable questions (is_impossible): use squad2")
    kw = dict(max_seq_length=cfg.max_seq_length, doc_stride=cfg.doc_stride, max_query_length=cfg.max_query_length)
    train_features = squad.convert_examples_to_features(train_examples, tokenizer, is_training=True, **kw)
    dev_features = squad.convert_examples_to_features(dev_examples, tokenizer, is_training=False, **kw)
    windows = len(train_features)
    if version_2 and cfg.null_windows < 1:
        train_features = keep_null_windows(train_features, cfg.null_windows, cfg.seed)
    gold = squad_eval.load_gold(dev_path)
    if verbose:
        kept = "" if windows == len(train_features) else \
            f" ({len(train_features):,} kept: {cfg.null_windows:g} of those without the answer)"
        print(f"{stats.questions:,} train questions ({stats.skipped} skipped: answer not at its offset), "
              f"{windows:,} windows{kept}; {len(dev_examples):,} dev questions, {len(dev_features):,} windows")
    source = SquadSource(squad.stack_features(train_features), dev_examples, dev_features, gold, version_2,
                         model.do_lower_case)
    source.main_metric = main
    info = {"name": cfg.task, "kind": "qa", "version_2": version_2, "max_seq_length": cfg.max_seq_length,
            "doc_stride": cfg.doc_stride, "max_query_length": cfg.max_query_length,
            "main_metric": main,
            "train_file": str(train_path), "dev_file": str(dev_path), "train_questions": stats.questions,
            "train_skipped": stats.skipped, "train_features": len(train_features), "dev_features": len(dev_features)}
    return FinetuneRun(cfg, model, source, tokenizer, info, verbose, **run)


SETTING_LIMIT = 1 << 20  # a window setting beyond this is no run's: refused before anything is allocated from it


def saved_setting(saved: dict, section: str, key: str, default, where: str = "run.json"):
    """A setting of the fine-tuning run (run.json's task or best scores), checked: a positive
    integer for the window settings, a finite number for the threshold; anything else is an error
    naming the file and the field (not a TypeError from int([1]) or float(None))."""
    block = saved.get(section) if isinstance(saved.get(section), dict) else {}
    value = block.get(key, default)
    if isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool) and 0 < value <= SETTING_LIMIT
        need = f"a positive integer (at most {SETTING_LIMIT})"
    else:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        need = "a finite number"
    if not ok:
        raise ValueError(f"{where}: {section}.{key} is {json.dumps(value)[:100]}, expected {need}; the fine-tuning "
                         f"run wrote it, so the file was edited: fix or remove that field")
    return value


def threshold_refused(what: str) -> ValueError:
    """The one refusal of --threshold where it has no meaning (predict, with text or --file)."""
    return ValueError(f"--threshold is for SQuAD 2.0 question answering (a model that may say there is no answer) "
                      f"and two-label classifiers (the positive label's probability); {what}")


def answer_threshold(threshold: float | None, saved: dict, version_2: bool, what: str, where: str = "") -> float:
    """The null-score threshold `predict` answers at, on every path that answers questions (one
    question on the command line, a SQuAD file): --threshold when given (a finite number, for a
    SQuAD 2.0 model only), else the run's best_f1 threshold found on dev (0 for SQuAD 1.1)."""
    if threshold is None:
        return saved_setting(saved, "best", "best_f1_thresh", 0.0, where) if version_2 else 0.0
    if not math.isfinite(threshold):
        raise ValueError(f"--threshold {threshold} must be a finite number")
    if not version_2:
        raise threshold_refused(f"{what} is SQuAD 1.1")
    return threshold


def predict_answer(model, tokenizer, question: str | None, context: str | None, saved: dict,
                   threshold: float | None = None) -> int:
    """`predict OUT_DIR --question Q --context C [--threshold T]`: the answer span (or "no answer")
    and its score, with the windows the passage was cut into. SQuAD 2.0: no answer when the null
    score minus the best span's is above T (default: the run's best_f1 threshold)."""
    if not question or not context or not context.strip():
        raise ValueError("question answering needs --question and a non-empty --context")
    task = saved.get("task", {})
    doc_tokens, _ = squad.split_passage(context)
    example = squad.SquadExample("q", question, doc_tokens, None, None, None, False, [])
    features = squad.convert_examples_to_features(
        [example], tokenizer,
        max_seq_length=min(saved_setting(saved, "task", "max_seq_length", 384), model.config.max_position_embeddings),
        doc_stride=saved_setting(saved, "task", "doc_stride", 128),
        max_query_length=saved_setting(saved, "task", "max_query_length", 64), is_training=False)
    batch = squad.stack_features(features)
    start, end = model.forward(batch["input_ids"], batch["segment_ids"], batch["input_mask"])  # (N, T) each
    version_2 = bool(task.get("version_2", False))
    threshold = answer_threshold(threshold, saved, version_2, "this model")
    preds, nbest, null_odds = squad.postprocess([example], features, (start, end), do_lower_case=model.do_lower_case,
                                                version_2=version_2, null_score_diff_threshold=threshold)
    for f in features:  # which words of the passage each window holds
        words = sorted(f.token_to_orig_map.values())
        print(f"window {f.doc_span_index}: words {words[0]}-{words[-1]} of {len(doc_tokens)} "
              f"({' '.join(doc_tokens[words[0]:words[0] + 4])} ... {' '.join(doc_tokens[max(0, words[-1] - 3):words[-1] + 1])})")
    answer = preds["q"]
    top = next((e for e in nbest["q"] if e["text"]), nbest["q"][0])  # the best non-null span
    if answer == "":
        print(f"no answer (null score minus best span = {null_odds['q']:.3f} > threshold {threshold:.3f}); "
              f"best span was {top['text']!r}")
    else:
        print(f"answer: {answer!r}  (start+end logit {top['start_logit'] + top['end_logit']:.3f}, "
              f"probability {top['probability']:.3f})")
    return 0
