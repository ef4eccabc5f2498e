"""SQuAD scoring: the official evaluate-v2.0.py semantics, checked on hand-computed numbers."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from minibert.finetune import squad_eval as ev

# Four questions, scored by hand below.
#   q1 answerable, two golds; pred "Denver Broncos"        EM 1, F1 1
#   q2 answerable; pred "Santa Clara" vs "Santa Clara, California":
#      words [santa, clara] vs [santa, clara, california]: P 1, R 2/3 -> F1 0.8, EM 0
#   q3 unanswerable; pred ""                                EM 1, F1 1
#   q4 unanswerable; pred "Levi's Stadium"                  EM 0, F1 0
GOLD = {"q1": ["Denver Broncos", "The Denver Broncos"], "q2": ["Santa Clara, California"],
        "q3": [], "q4": []}
PREDS = {"q1": "Denver Broncos", "q2": "Santa Clara", "q3": "", "q4": "Levi's Stadium"}
NA_PROBS = {"q1": 0.1, "q2": 0.2, "q3": 0.9, "q4": 0.6}


def _squad_json(gold: dict[str, list[str]], impossible: bool = True) -> dict:
    qas = []
    for qid, answers in gold.items():
        qa = {"id": qid, "question": "?", "answers": [{"text": a, "answer_start": 0}
                                                      for a in answers]}
        if impossible:
            qa["is_impossible"] = not answers
        qas.append(qa)
    return {"version": "v2.0", "data": [{"title": "t", "paragraphs": [
        {"context": "Denver Broncos Santa Clara, California", "qas": qas}]}]}


def _write(tmp_path, name, obj) -> str:
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return str(path)


# ---------------------------------------------------------------------------------------------
# normalisation and per-question scores

@pytest.mark.parametrize("text, expected", [
    ("The Cat!", "cat"),
    ("an apple a day", "apple day"),
    ("theater", "theater"),               # articles only as whole words
    ("  A  b\tc \n", "b c"),
    ("Norman-French (army).", "normanfrench army"),  # punctuation removed, not spaced
    ("café — ok", "café — ok"),          # only ASCII punctuation is removed
    ("the", ""),
])
def test_normalize_answer_cases(text, expected):
    assert ev.normalize_answer(text) == expected


def test_compute_f1_hand_examples():
    assert ev.compute_f1("Normans army", "the Norman army") == pytest.approx(0.5)
    assert ev.compute_f1("Santa Clara, California", "Santa Clara") == pytest.approx(0.8)
    assert ev.compute_f1("", "") == 1 and ev.compute_f1("", "x") == 0
    assert ev.compute_f1("x", "") == 0 and ev.compute_f1("a b", "c d") == 0
    assert ev.compute_exact("The Denver Broncos!", "denver  broncos") == 1


def test_raw_scores_take_the_max_over_golds():
    exact, f1 = ev.get_raw_scores(GOLD, PREDS)
    assert exact == {"q1": 1, "q2": 0, "q3": 1, "q4": 0}
    assert f1["q1"] == 1 and f1["q3"] == 1 and f1["q4"] == 0
    assert f1["q2"] == pytest.approx(0.8)
    # several golds: the best one counts (F1 1/2 against the first, 1 against the second)
    exact, f1 = ev.get_raw_scores({"q": ["big red dog", "dog"]}, {"q": "the dog"})
    assert exact["q"] == 1 and f1["q"] == 1


def test_gold_answers_that_normalise_to_empty_are_ignored():
    exact, _ = ev.get_raw_scores({"q": ["the", "a"]}, {"q": ""})  # treated as unanswerable
    assert exact["q"] == 1


# ---------------------------------------------------------------------------------------------
# the report and the threshold search

def test_evaluate_without_na_probs_matches_hand_numbers():
    out = ev.evaluate(GOLD, PREDS)
    assert list(out) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                         "NoAns_exact", "NoAns_f1", "NoAns_total"]
    assert out["exact"] == pytest.approx(50.0)    # (1 + 0 + 1 + 0) / 4
    assert out["f1"] == pytest.approx(70.0)       # (1 + 0.8 + 1 + 0) / 4
    assert out["HasAns_exact"] == pytest.approx(50.0) and out["HasAns_f1"] == pytest.approx(90.0)
    assert out["NoAns_exact"] == pytest.approx(50.0) and out["NoAns_f1"] == pytest.approx(50.0)
    assert (out["total"], out["HasAns_total"], out["NoAns_total"]) == (4, 2, 2)


def test_evaluate_with_na_probs_and_threshold_hand_numbers():
    # threshold 0.5: q4 (0.6) and q3 (0.9) count as answered "", both unanswerable -> 1 each
    out = ev.evaluate(GOLD, PREDS, NA_PROBS, na_prob_thresh=0.5)
    assert out["exact"] == pytest.approx(75.0)    # 1 0 1 1
    assert out["f1"] == pytest.approx(95.0)       # 1 .8 1 1
    assert out["NoAns_exact"] == pytest.approx(100.0)
    assert out["HasAns_f1"] == pytest.approx(90.0)
    # best thresholds (independent of na_prob_thresh), walking q1 .1, q2 .2, q4 .6, q3 .9
    # from 2 (both unanswerable answered ""):
    #   exact: 2 -> 3 (q1, t=.1) -> 3 (q2 +0: a tie keeps .1) -> 2 (q4 -1) -> 2 (q3 +0)
    #   f1:    2 -> 3 (q1, t=.1) -> 3.8 (q2, t=.2) -> 2.8 -> 2.8
    assert out["best_exact"] == pytest.approx(75.0)
    assert out["best_exact_thresh"] == pytest.approx(0.1)
    assert out["best_f1"] == pytest.approx(95.0) and out["best_f1_thresh"] == pytest.approx(0.2)
    assert list(out)[-4:] == ["best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"]


def test_find_best_thresh_equal_na_probs_follow_file_order():
    has_ans = {"a": False, "b": True}
    preds, scores = {"a": "x", "b": "y"}, {"a": 0, "b": 1}
    # start 1 (a answered ""); a first: 1 -> 0 -> 1, never above 1: threshold stays 0.0
    best, thresh = ev.find_best_thresh(preds, scores, {"a": 0.5, "b": 0.5}, has_ans)
    assert best == pytest.approx(50.0) and thresh == 0.0
    # b first: 1 -> 2 at 0.5
    best, thresh = ev.find_best_thresh(preds, scores, {"b": 0.5, "a": 0.5}, has_ans)
    assert best == pytest.approx(100.0) and thresh == pytest.approx(0.5)


def test_squad_1_1_has_no_noans_keys():
    out = ev.evaluate({"q1": ["Denver"], "q2": ["x"]}, {"q1": "denver", "q2": "y"})
    assert "NoAns_total" not in out and out["HasAns_total"] == 2
    assert out["exact"] == pytest.approx(50.0)


def test_missing_prediction_is_warned_and_scored_empty(capsys):
    preds = {k: v for k, v in PREDS.items() if k not in ("q2", "q3")}
    out = ev.evaluate(GOLD, preds)
    err = capsys.readouterr().err
    assert "Missing prediction for q2" in err and "Missing prediction for q3" in err
    assert out["total"] == 4
    assert out["exact"] == pytest.approx(50.0)  # q1 1, q2 "" -> 0, q3 "" -> 1, q4 0


def test_na_probs_missing_a_question_is_an_error():
    with pytest.raises(ValueError, match="null.json.*'q4'"):
        ev.evaluate(GOLD, PREDS, {"q1": 0.0, "q2": 0.0, "q3": 0.0}, na_prob_file="null.json")


# ---------------------------------------------------------------------------------------------
# files and the command line

def test_load_gold_reads_answers(tmp_path):
    path = _write(tmp_path, "dev.json", _squad_json(GOLD))
    assert ev.load_gold(path) == GOLD


@pytest.mark.parametrize("obj, missing", [
    ({"version": "1"}, "has no 'data'"),
    ({"data": {}}, "data is dict, expected list"),
    ({"data": [{"title": "t"}]}, r"data\[0\] has no 'paragraphs'"),
    ({"data": [{"paragraphs": [{"context": "c"}]}]}, r"paragraphs\[0\] has no 'qas'"),
    ({"data": [{"paragraphs": [{"qas": [{"question": "?"}]}]}]}, r"qas\[0\] has no 'id'"),
    ({"data": [{"paragraphs": [{"qas": [{"id": "x1"}]}]}]}, "'x1'.*has no 'answers'"),
    ([1, 2], "top level is list"),
])
def test_load_gold_not_squad_names_file_and_field(tmp_path, obj, missing):
    path = _write(tmp_path, "bad.json", obj)
    with pytest.raises(ValueError, match=f"bad.json.*{missing}"):
        ev.load_gold(path)


def test_load_gold_not_json(tmp_path):
    path = _write(tmp_path, "bad.json", "{not json")
    with pytest.raises(ValueError, match="bad.json is not valid JSON"):
        ev.load_gold(path)


def test_cli_prints_the_official_keys(tmp_path, capsys):
    data = _write(tmp_path, "dev.json", _squad_json(GOLD))
    preds = _write(tmp_path, "pred.json", PREDS)
    null = _write(tmp_path, "null_odds.json", NA_PROBS)
    assert ev.cli([data, preds, "--na-prob", null, "--na-prob-thresh", "0.5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                         "NoAns_exact", "NoAns_f1", "NoAns_total", "best_exact",
                         "best_exact_thresh", "best_f1", "best_f1_thresh"]
    assert out["exact"] == pytest.approx(75.0) and out["total"] == 4


def test_cli_out_file_and_no_na_prob(tmp_path, capsys):
    data = _write(tmp_path, "dev.json", _squad_json(GOLD))
    preds = _write(tmp_path, "pred.json", PREDS)
    assert ev.cli([data, preds, "--out-file", str(tmp_path / "eval.json")]) == 0
    assert capsys.readouterr().out == ""
    out = json.loads((tmp_path / "eval.json").read_text(encoding="utf-8"))
    assert "best_exact" not in out and out["f1"] == pytest.approx(70.0)


def test_cli_errors_name_the_file(tmp_path, capsys):
    data = _write(tmp_path, "dev.json", {"articles": []})
    preds = _write(tmp_path, "pred.json", PREDS)
    assert ev.cli([data, preds]) == 1
    err = capsys.readouterr().err
    assert "dev.json" in err and "'data'" in err
    data = _write(tmp_path, "dev.json", _squad_json(GOLD))
    preds = _write(tmp_path, "pred.json", {"q1": 3})
    assert ev.cli([data, preds]) == 1
    assert "pred.json" in capsys.readouterr().err


def test_squad_eval_imports_no_numpy():
    code = ("import sys, minibert.finetune.squad_eval; "
            "assert 'numpy' not in sys.modules, 'numpy imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
