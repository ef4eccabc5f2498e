"""SQuAD scoring: the official `evaluate-v2.0.py`, number for number (docs/bert-notes.md §9.4).

No NumPy: the standard library and minibert's one JSON reader (io/jsonfile.py, whose errors name
the file), nothing else.

    python -m minibert squad-eval dev-v2.0.json predictions.json [--na-prob null_odds.json]

Two scores per question, each the maximum over its gold answers:
- exact match (EM): 1 if the normalised prediction equals a normalised gold answer, else 0;
- F1 over the normalised words: 'the Norman army' vs gold 'Normans army' -> words
  ['norman', 'army'] vs ['normans', 'army'], 1 in common, precision 1/2, recall 1/2, F1 0.5.

An unanswerable question (SQuAD 2.0: an empty `answers` list) has the gold list [""], so only
the empty prediction scores 1. Totals are percentages. With a file of per-question no-answer
scores (`na_probs`, e.g. run_squad's null_odds.json), a question whose score exceeds
`na_prob_thresh` counts as answered "", and `best_exact`/`best_f1` report the threshold that
would have been best. SQuAD 1.1 files (every question answerable) are scored the same way.
"""
from __future__ import annotations

import collections
import json
import math
import re
import string
import sys

from minibert.io.cli import command_parser
from minibert.io.jsonfile import read_json
from minibert.io.outputs import check_output, write_output
from minibert.io.textio import error_line, shown
from minibert.taskdata.squad_files import gold_texts, iter_qas

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)  # ASCII only, as the official script


# ---------------------------------------------------------------------------------------------
# Reading and checking the files

def load_gold(path) -> dict[str, list[str]]:
    """SQuAD data file -> {question id: gold answer texts} (an empty list: unanswerable)."""
    gold: dict[str, list[str]] = {}
    for where, _, qa in iter_qas(read_json(path, "SQuAD file"), path):
        texts = gold_texts(qa, where, path)  # checked against is_impossible: no emptied answer read as "none"
        if qa["id"] in gold:
            raise ValueError(f"{path}: question id {qa['id']!r} appears twice")
        gold[qa["id"]] = texts
    if not gold:
        raise ValueError(f"{path}: the SQuAD file holds no questions")
    return gold


def load_id_map(path, kind, what: str, expected: str) -> dict:
    """{question id: value} JSON file (predictions: str values; na_probs: numbers)."""
    data = read_json(path, what)
    if not isinstance(data, dict):
        raise ValueError(f"{what} {path} must be a JSON object {{question id: value}}, "
                         f"got {type(data).__name__}")
    for qid, value in data.items():
        finite = not isinstance(value, float) or math.isfinite(value)  # NaN is never above a threshold
        if not isinstance(value, kind) or isinstance(value, bool) or not finite:
            raise ValueError(f"{what} {path}: the value for question id {shown(str(qid), 80)} is "
                             f"{shown(repr(value), 80)}, expected {expected}")
    return data


# ---------------------------------------------------------------------------------------------
# Per-question scores

def normalize_answer(s: str) -> str:
    """Lowercase, drop ASCII punctuation, drop the words a/an/the, collapse whitespace.

    >>> normalize_answer("The  Norman-French army!")
    'normanfrench army'
    """
    s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", s).split())


def get_tokens(s: str) -> list[str]:
    return normalize_answer(s).split() if s else []


def compute_exact(a_gold: str, a_pred: str) -> int:
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold: str, a_pred: str) -> float:
    """Word-overlap F1 of the normalised texts; 1 if both are empty, 0 if only one is.

    >>> compute_f1("Normans army", "the Norman army")
    0.5
    """
    gold_toks, pred_toks = get_tokens(a_gold), get_tokens(a_pred)
    if not gold_toks or not pred_toks:
        return int(gold_toks == pred_toks)  # a no-answer agrees only with a no-answer
    num_same = sum((collections.Counter(gold_toks) & collections.Counter(pred_toks)).values())
    if num_same == 0:
        return 0
    precision = num_same / len(pred_toks)
    recall = num_same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def get_raw_scores(gold: dict[str, list[str]], preds: dict[str, str]):
    """-> (exact, f1): {qid: score}, each the max over the gold answers.

    Gold answers that normalise to "" are ignored; if none is left the gold list is [""].
    """
    exact, f1 = {}, {}
    for qid, answers in gold.items():
        golds = [a for a in answers if normalize_answer(a)] or [""]
        pred = preds[qid]
        exact[qid] = max(compute_exact(a, pred) for a in golds)
        f1[qid] = max(compute_f1(a, pred) for a in golds)
    return exact, f1


def apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
    """A question whose na_prob exceeds the threshold is answered "": it scores 1 exactly
    when it has no answer."""
    return {qid: float(not qid_to_has_ans[qid]) if na_probs[qid] > na_prob_thresh else s
            for qid, s in scores.items()}


# ---------------------------------------------------------------------------------------------
# Totals and the threshold search

def make_eval_dict(exact_scores, f1_scores, qid_list=None) -> dict:
    """{'exact': %, 'f1': %, 'total': n} over qid_list (all questions when None)."""
    qids = list(exact_scores) if not qid_list else qid_list
    total = len(qids)
    return {"exact": 100.0 * sum(exact_scores[k] for k in qids) / total,
            "f1": 100.0 * sum(f1_scores[k] for k in qids) / total,
            "total": total}


def merge_eval(main_eval: dict, new_eval: dict, prefix: str) -> None:
    for k, v in new_eval.items():
        main_eval[f"{prefix}_{k}"] = v


def find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
    """The na_prob threshold that maximises the total score -> (best score %, threshold).

    Start with every question answered "" (the total is the number of unanswerable
    questions), then walk the questions by increasing na_prob, letting
    each in turn keep its prediction: an answerable one gains its score, an unanswerable one
    loses 1 if its prediction is non-empty. The best running total wins; ties keep the earlier
    (lower) threshold, and the starting point has threshold 0.0, as the official script.

    Example: q1 answerable (score 1, na 0.2), q2 unanswerable (pred "x", na 0.5),
    q3 answerable (score 1, na 0.9): totals 1 -> 2 (q1) -> 1 (q2) -> 2 (q3): best 2/3 at 0.2.
    """
    cur_score = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
    best_score, best_thresh = cur_score, 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):  # stable: file order on ties
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if preds[qid] else 0
        cur_score += diff
        if cur_score > best_score:
            best_score, best_thresh = cur_score, na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def find_all_best_thresh(main_eval, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans):
    """Add best_exact, best_exact_thresh, best_f1, best_f1_thresh to main_eval."""
    best_exact, exact_thresh = find_best_thresh(preds, exact_raw, na_probs, qid_to_has_ans)
    best_f1, f1_thresh = find_best_thresh(preds, f1_raw, na_probs, qid_to_has_ans)
    main_eval["best_exact"] = best_exact
    main_eval["best_exact_thresh"] = exact_thresh
    main_eval["best_f1"] = best_f1
    main_eval["best_f1_thresh"] = f1_thresh


def evaluate(gold: dict[str, list[str]], preds: dict[str, str], na_probs: dict | None = None,
             na_prob_thresh: float = 1.0, na_prob_file: str = "na_probs") -> dict:
    """The official report: exact, f1, total, HasAns_*/NoAns_* (when such questions exist),
    and best_* when na_probs are given. `gold` is `load_gold`'s {qid: gold texts}.

    A question without a prediction is warned about on stderr ("Missing prediction for <qid>")
    and scored as the empty answer "" (the official 2.0 script prints the same line, then stops
    with a KeyError; the 1.1 script scores it 0).
    """
    preds = dict(preds)
    for qid in gold:
        if qid not in preds:
            print(f"warning: Missing prediction for {qid} (scored as the empty answer)",
                  file=sys.stderr)
            preds[qid] = ""
    qid_to_has_ans = {qid: bool(answers) for qid, answers in gold.items()}
    if na_probs is None:
        probs = {qid: 0.0 for qid in gold}
    else:
        missing = [qid for qid in gold if qid not in na_probs]
        if missing:
            raise ValueError(f"{na_prob_file} has no entry for question id {missing[0]!r} "
                             f"({len(missing)} of {len(gold)} questions missing)")
        probs = na_probs
    exact_raw, f1_raw = get_raw_scores(gold, preds)
    exact = apply_no_ans_threshold(exact_raw, probs, qid_to_has_ans, na_prob_thresh)
    f1 = apply_no_ans_threshold(f1_raw, probs, qid_to_has_ans, na_prob_thresh)
    out = make_eval_dict(exact, f1)
    for prefix, want in (("HasAns", True), ("NoAns", False)):
        qids = [k for k, v in qid_to_has_ans.items() if v == want]
        if qids:
            merge_eval(out, make_eval_dict(exact, f1, qid_list=qids), prefix)
    if na_probs is not None:
        find_all_best_thresh(out, preds, exact_raw, f1_raw, na_probs, qid_to_has_ans)
    return out


# ---------------------------------------------------------------------------------------------
# Command line

def cli(argv: list[str]) -> int:
    """squad-eval DATA.json PREDICTIONS.json [--na-prob NULL_ODDS.json] [--na-prob-thresh 1.0]
    [--out-file F]: print the report as JSON (or write it to F), as evaluate-v2.0.py does."""
    p = command_parser("squad-eval", "Score SQuAD 1.1/2.0 predictions (official metrics).")
    p.add_argument("data_file", help="SQuAD data JSON (e.g. dev-v2.0.json)")
    p.add_argument("pred_file", help="predictions JSON {question id: answer text}")
    p.add_argument("--na-prob", "--na-prob-file", "-n", dest="na_prob_file", default=None,
                   help="JSON {question id: no-answer score}, e.g. null_odds.json")
    p.add_argument("--na-prob-thresh", "-t", type=float, default=1.0,
                   help='predict "" if the no-answer score exceeds this (default 1.0)')
    p.add_argument("--out-file", "-o", default=None, help="write the JSON here instead of stdout")
    args = p.parse_args(argv)

    try:
        if not -float("inf") < args.na_prob_thresh < float("inf"):  # NaN would never predict "", silently
            raise ValueError(f"--na-prob-thresh {args.na_prob_thresh} must be a finite number")
        if args.out_file:
            check_output(args.out_file, inputs=[args.data_file, args.pred_file, args.na_prob_file], flag="--out-file")
        gold = load_gold(args.data_file)
        preds = load_id_map(args.pred_file, str, "predictions file", "a string")
        na_probs = None
        if args.na_prob_file:
            na_probs = load_id_map(args.na_prob_file, (int, float), "no-answer file",
                                   "a finite number")
        out = evaluate(gold, preds, na_probs, args.na_prob_thresh, args.na_prob_file)
        text = json.dumps(out, indent=2)
        if args.out_file:
            write_output(args.out_file, text + "\n")
        else:
            print(text)
    except (OSError, ValueError) as e:
        print(error_line(e), file=sys.stderr)
        return 1
    return 0
