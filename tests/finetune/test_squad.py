"""SQuAD data: reading, windows and labels, and logits -> answer text (run_squad semantics)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from minibert.finetune import squad as sq
from minibert.text.tokenizer import BertTokenizer

WORDS = [f"w{i}" for i in range(12)]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "band", "(", "1895", "-", "1943",
         ")", ".", "'", "s", "steve", "smith", "played", "when", "was", "formed", "?", "who",
         *WORDS]
TOK = BertTokenizer(VOCAB)
BAND = "The band (1895-1943)."      # "1895" starts at character 10
STEVE = "Steve Smith's band played."
TEN = " ".join(WORDS[:10])          # "w0 w1 ... w9": word i starts at character 3 * i


def _qa(qid, question, answers=(), impossible=None):
    qa = {"id": qid, "question": question,
          "answers": [{"text": t, "answer_start": s} for t, s in answers]}
    if impossible is not None:
        qa["is_impossible"] = impossible
    return qa


def _write(tmp_path, paragraphs, name="squad.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"version": "x", "data": [{"title": "t", "paragraphs": [
        {"context": c, "qas": qas} for c, qas in paragraphs]}]}), encoding="utf-8")
    return path


def _features(tmp_path, paragraphs, is_training, **kw):
    examples, stats = sq.read_squad(_write(tmp_path, paragraphs), is_training)
    return examples, sq.convert_examples_to_features(examples, TOK, is_training=is_training, **kw)


def _logits(features, starts, ends, base=0.0):
    """(N, T) start and end logits: `base` except {feature index: {position: value}}."""
    T = len(features[0].input_ids)
    start, end = np.full((len(features), T), base), np.full((len(features), T), base)  # (N, T)
    for logits, peaks in ((start, starts), (end, ends)):
        for i, values in peaks.items():
            for position, value in values.items():
                logits[i, position] = value
    return start, end


# ---------------------------------------------------------------------------------------------
# reading

def test_split_passage_maps_characters_to_words():
    words, offsets = sq.split_passage(" a\u202fbc  d")
    assert words == ["a", "bc", "d"]
    assert offsets == [-1, 0, 0, 1, 1, 1, 1, 2]


def test_read_squad_training_finds_word_span_and_detects_version(tmp_path):
    path = _write(tmp_path, [(BAND, [_qa("q1", "When was the band formed?", [("1895", 10)])])])
    examples, stats = sq.read_squad(path, is_training=True)
    (ex,) = examples
    assert ex.doc_tokens == ["The", "band", "(1895-1943)."]
    assert (ex.start_position, ex.end_position, ex.orig_answer_text) == (2, 2, "1895")
    assert stats == sq.ReadStats(False, 1, 0, [])
    path = _write(tmp_path, [(BAND, [_qa("q1", "?", [], impossible=True)])])
    examples, stats = sq.read_squad(path, is_training=True)
    assert stats.version_2 and examples[0].is_impossible
    assert (examples[0].start_position, examples[0].end_position) == (-1, -1)


def test_read_squad_bad_offset_is_warned_skipped_and_counted(tmp_path):
    path = _write(tmp_path, [(BAND, [_qa("ok", "?", [("band", 4)]),
                                     _qa("bad", "?", [("1895", 4)]),         # 'band' is there
                                     _qa("far", "?", [("1895", 99)])])])     # past the end
    with pytest.warns(UserWarning) as caught:
        examples, stats = sq.read_squad(path, is_training=True)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2 and "'bad': the answer '1895' is not at character 4" in messages[0]
    assert [e.qas_id for e in examples] == ["ok"]
    assert (stats.questions, stats.skipped, stats.skipped_ids) == (3, 2, ["bad", "far"])
    examples, stats = sq.read_squad(path, is_training=False)  # prediction reads every question
    assert len(examples) == 3 and stats.skipped == 0 and examples[1].answers == ["1895"]


@pytest.mark.parametrize("obj, message", [
    ({"version": "1.1"}, "has no 'data'"),
    ({"data": [{"paragraphs": [{"qas": [{"id": "a"}]}]}]}, r"paragraphs\[0\] has no 'context'"),
    ({"data": [{"paragraphs": [{"context": "c"}]}]}, r"paragraphs\[0\] has no 'qas'"),
    ({"data": [{"paragraphs": [{"context": "c", "qas": [{"question": "?"}]}]}]},
     r"qas\[0\] has no 'id'"),
])
def test_read_squad_not_squad_names_file_and_field(tmp_path, obj, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(obj), encoding="utf-8")
    with pytest.raises(ValueError, match=f"bad.json.*{message}"):
        sq.read_squad(path, is_training=False)


def test_read_squad_not_json(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("[1, 2", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.json is not valid JSON"):
        sq.read_squad(path, is_training=False)


def test_read_squad_empty_context_is_an_error(tmp_path):
    path = _write(tmp_path, [(" \n ", [_qa("q7", "?", [])])])
    with pytest.raises(ValueError, match="squad.json.*'q7'.*empty context"):
        sq.read_squad(path, is_training=False)


def test_read_squad_training_uses_the_first_of_several_answers(tmp_path):
    path = _write(tmp_path, [(BAND, [_qa("q2", "?", [("band", 4), ("The", 0)])])])
    (example,), _ = sq.read_squad(path, is_training=True)
    assert example.orig_answer_text == "band" and example.answers == ["band", "The"]
    assert example.doc_tokens[example.start_position] == "band"
    empty = _write(tmp_path, [(BAND, [{"id": "q3", "question": "?", "answers": []}])])
    with pytest.raises(ValueError, match="'q3' is answerable .* but has no answers"):
        sq.read_squad(empty, is_training=True)


# ---------------------------------------------------------------------------------------------
# features

def test_improve_answer_span_tightens_to_the_answer_token(tmp_path):
    all_doc, _, _ = sq.tokenize_passage(["The", "band", "(1895-1943)."], TOK)
    assert all_doc == ["the", "band", "(", "1895", "-", "1943", ")", "."]
    assert sq._improve_answer_span(all_doc, 2, 7, TOK, "1895") == (3, 3)
    assert sq._improve_answer_span(all_doc, 2, 7, TOK, "1943)") == (5, 6)
    assert sq._improve_answer_span(all_doc, 2, 7, TOK, "Japan") == (2, 7)  # not found: kept
    # through the whole pipeline: [CLS] + 6 question tokens + [SEP] puts the passage at 8
    _, (f,) = _features(tmp_path, [(BAND, [_qa("q1", "When was the band formed?",
                                                 [("1895", 10)])])], True, max_seq_length=32)
    assert (f.start_position, f.end_position) == (11, 11) and f.tokens[11] == "1895"
    assert f.segment_ids[:8] == [0] * 8 and f.segment_ids[8:17] == [1] * 9
    assert f.input_mask == [1] * 17 + [0] * 15 and len(f.input_ids) == 32


def test_windows_answer_across_a_boundary_is_cls_where_cut(tmp_path):
    # question "who ?" (2 tokens): 9 - 2 - 3 = 4 passage tokens per window, stride 2:
    # windows cover tokens 0-3, 2-5, 4-7, 6-9; the answer w3 w4 (tokens 3-4) lies wholly in
    # window 1 only, at 3 - 2 + 4 = 5 .. 6 (the passage starts at position 4)
    _, feats = _features(tmp_path, [(TEN, [_qa("q", "who?", [("w3 w4", 9)])])], True,
                         max_seq_length=9, doc_stride=2)
    assert [f.doc_span_index for f in feats] == [0, 1, 2, 3]
    assert [f.tokens[4:8] for f in feats] == [WORDS[0:4], WORDS[2:6], WORDS[4:8], WORDS[6:10]]
    assert [(f.start_position, f.end_position) for f in feats] == [(0, 0), (5, 6), (0, 0), (0, 0)]
    assert feats[1].tokens[5:7] == ["w3", "w4"]
    assert [f.unique_id for f in feats] == [1000000000 + i for i in range(4)]


def test_max_context_window_is_not_always_the_first(tmp_path):
    _, feats = _features(tmp_path, [(TEN, [_qa("q", "who?")])], False,
                         max_seq_length=9, doc_stride=2)
    # token 3: window 0 scores min(3, 0) + 0.04, window 1 min(1, 2) + 0.04 -> window 1
    # token 2: window 0 min(2, 1) + 0.04 beats window 1 min(0, 3) + 0.04 -> window 0
    assert feats[0].token_is_max_context == {4: True, 5: True, 6: True, 7: False}
    assert feats[1].token_is_max_context == {4: False, 5: True, 6: True, 7: False}
    assert feats[1].token_to_orig_map == {4: 2, 5: 3, 6: 4, 7: 5}
    spans = sq.make_doc_spans(10, 4, 2)
    assert sq._check_is_max_context(spans, 1, 3) and not sq._check_is_max_context(spans, 0, 3)


def test_unanswerable_question_gets_cls_labels_in_every_window(tmp_path):
    _, feats = _features(tmp_path, [(TEN, [_qa("q", "who?", [], impossible=True)])], True,
                         max_seq_length=9, doc_stride=2)
    assert len(feats) == 4 and all(f.is_impossible for f in feats)
    assert all((f.start_position, f.end_position) == (0, 0) for f in feats)


def test_question_too_long_for_the_window_is_an_error(tmp_path):
    examples, _ = sq.read_squad(_write(tmp_path, [(TEN, [_qa("long-q", "w0 w1 w2")])]), False)
    with pytest.raises(ValueError, match="'long-q'.*3 tokens.*max_seq_length=5"):
        sq.convert_examples_to_features(examples, TOK, max_seq_length=5, is_training=False)
    # cutting the question to max_query_length makes room
    feats = sq.convert_examples_to_features(examples, TOK, max_seq_length=5,
                                            max_query_length=1, is_training=False)
    assert feats[0].tokens[:3] == ["[CLS]", "w0", "[SEP]"]


def test_passage_without_tokens_is_an_error(tmp_path):
    examples, _ = sq.read_squad(_write(tmp_path, [("\x00", [_qa("q0", "who")])]), False)
    with pytest.raises(ValueError, match="'q0'.*no tokens"):
        sq.convert_examples_to_features(examples, TOK, is_training=False)


def test_stack_features_shapes_and_labels(tmp_path):
    _, feats = _features(tmp_path, [(TEN, [_qa("q", "who?", [("w3 w4", 9)])])], True,
                         max_seq_length=9, doc_stride=2)
    batch = sq.stack_features(feats)
    assert sorted(batch) == ["end_positions", "input_ids", "input_mask", "segment_ids",
                             "start_positions"]
    assert batch["input_ids"].shape == (4, 9) and batch["input_ids"].dtype == np.int64
    assert batch["start_positions"].tolist() == [0, 5, 0, 0]
    assert batch["input_ids"][1].tolist() == TOK.convert_tokens_to_ids(feats[1].tokens)
    _, feats = _features(tmp_path, [(TEN, [_qa("q", "who?")])], False, max_seq_length=9)
    assert sorted(sq.stack_features(feats)) == ["input_ids", "input_mask", "segment_ids"]


# ---------------------------------------------------------------------------------------------
# postprocessing

def test_get_final_text_projects_onto_original_characters():
    assert sq.get_final_text("steve smith", "Steve Smith's", True) == "Steve Smith"
    assert sq.get_final_text("1895", "(1895-1943).", True) == "1895"
    assert sq.get_final_text("zzz", "Steve", True) == "Steve"  # not found: whole span


def test_round_trip_logits_to_original_text(tmp_path):
    # [CLS] who played ? [SEP] steve smith ' s band played . [SEP]: Steve at 5, Smith at 6
    examples, feats = _features(tmp_path, [(STEVE, [_qa("s", "Who played?")]),
                                           (BAND, [_qa("b", "When was the band formed?")])],
                                False, max_seq_length=24)
    assert feats[0].tokens[5:7] == ["steve", "smith"] and feats[1].tokens[11] == "1895"
    start, end = _logits(feats, {0: {5: 8.0}, 1: {11: 8.0}}, {0: {6: 8.0}, 1: {11: 8.0}})
    preds, nbest, null_odds = sq.postprocess(examples, feats, (start, end))
    assert preds == {"s": "Steve Smith", "b": "1895"} and null_odds == {}
    entries = nbest["s"]
    assert entries[0]["text"] == "Steve Smith"
    assert entries[0]["start_logit"] == pytest.approx(8.0)
    assert sum(e["probability"] for e in entries) == pytest.approx(1.0)
    probs = [e["probability"] for e in entries]
    assert probs == sorted(probs, reverse=True)
    assert len({e["text"] for e in entries}) == len(entries) <= 20


def test_postprocess_filters_spans(tmp_path):
    examples, feats = _features(tmp_path, [(STEVE, [_qa("s", "Who played?")])], False,
                                max_seq_length=24)
    # [CLS] who played ? [SEP] steve smith ' s band played . [SEP]
    # higher scores than band (9-9, 7 + 1) are all filtered: a span in the question (1-2, 18),
    # end before start (9-5, 15), too long (9-11, 14.5, with max_answer_length 2)
    start, end = _logits(feats, {0: {1: 9.0, 9: 7.0}}, {0: {2: 9.0, 5: 8.0, 11: 7.5, 9: 1.0}},
                         base=-10.0)
    preds, _, _ = sq.postprocess(examples, feats, {"start_logits": start, "end_logits": end},
                                 max_answer_length=2)
    assert preds == {"s": "band"}


def test_postprocess_uses_only_the_max_context_window(tmp_path):
    examples, feats = _features(tmp_path, [(TEN, [_qa("q", "who?")])], False,
                                max_seq_length=9, doc_stride=2)
    # window 0 puts a high score on w3 (position 7), but w3's max-context window is 1
    start, end = _logits(feats, {0: {7: 10.0}, 1: {5: 5.0}}, {0: {7: 10.0}, 1: {6: 5.0}},
                         base=-10.0)
    preds, _, _ = sq.postprocess(examples, feats, (start, end))
    assert preds == {"q": "w3 w4"}


def test_postprocess_v2_null_wins_and_diff(tmp_path):
    examples, feats = _features(tmp_path, [(STEVE, [_qa("s", "Who played?")])], False,
                                max_seq_length=24)
    # null: start[0] + end[0] = 3 + 3; best span band: 2 + 2; diff = 6 - 4 = 2
    start, end = _logits(feats, {0: {0: 3.0, 9: 2.0}}, {0: {0: 3.0, 9: 2.0}})
    preds, nbest, null_odds = sq.postprocess(examples, feats, (start, end), version_2=True)
    assert preds == {"s": ""} and null_odds["s"] == pytest.approx(2.0)
    assert nbest["s"][0]["text"] == "" and nbest["s"][1]["text"] == "band"
    preds, _, _ = sq.postprocess(examples, feats, (start, end), version_2=True,
                                 null_score_diff_threshold=2.5)
    assert preds == {"s": "band"}


def test_postprocess_v2_null_score_is_the_min_over_windows(tmp_path):
    examples, feats = _features(tmp_path, [(TEN, [_qa("q", "who?")])], False,
                                max_seq_length=9, doc_stride=2)
    # null scores per window 6, 1, 6, 6 -> 1; best span w3 w4: 2 + 2 -> diff -3
    starts = {0: {0: 3.0}, 1: {0: 0.5, 5: 2.0}, 2: {0: 3.0}, 3: {0: 3.0}}
    ends = {0: {0: 3.0}, 1: {0: 0.5, 6: 2.0}, 2: {0: 3.0}, 3: {0: 3.0}}
    preds, nbest, null_odds = sq.postprocess(examples, feats, _logits(feats, starts, ends),
                                             version_2=True)
    assert preds == {"q": "w3 w4"} and null_odds["q"] == pytest.approx(-3.0)
    assert "" in [e["text"] for e in nbest["q"]]


def test_postprocess_checks_logit_shapes(tmp_path):
    examples, feats = _features(tmp_path, [(TEN, [_qa("q", "who?")])], False, max_seq_length=9)
    with pytest.raises(ValueError, match=r"expected \(N, T\)"):
        sq.postprocess(examples, feats, (np.zeros((1, 9)), np.zeros((1, 9))))


def test_best_f1_searches_the_spans_that_a_winning_null_score_hides():
    """Every null score wins at threshold 0, so the predictions are all "" and the official
    search over them finds nothing; over the best spans it finds the threshold that answers."""
    from minibert.finetune import squad_eval
    from minibert.finetune.squad_run import threshold_search

    gold = {"a": ["Paris"], "b": ["John"], "c": [], "d": []}
    nbest = {"a": [{"text": ""}, {"text": "Paris"}], "b": [{"text": "John"}, {"text": ""}],
             "c": [{"text": "London"}, {"text": ""}], "d": [{"text": ""}]}
    null_odds = {"a": 0.5, "b": 0.7, "c": 2.0, "d": 3.0}  # null minus best span: > 0 everywhere
    at_zero = squad_eval.evaluate(gold, {q: "" for q in gold}, null_odds)
    assert at_zero["f1"] == pytest.approx(50.0) and at_zero["best_f1"] == pytest.approx(50.0)  # hidden spans cannot count
    found = threshold_search(gold, nbest, null_odds)
    assert found["best_f1"] == pytest.approx(100.0) and found["best_exact"] == pytest.approx(100.0)
    assert 0.7 <= found["best_f1_thresh"] < 2.0  # answer a and b, not c


def test_keep_null_windows_keeps_every_answer_and_a_share_of_the_rest_in_order():
    from types import SimpleNamespace

    from minibert.finetune.squad_run import keep_null_windows

    starts = [0, 5, 0, 0, 7, 0, 0, 0, 9, 0, 0, 0]  # 0: the window's label is [CLS] (no answer in it)
    feats = [SimpleNamespace(i=i, start_position=s) for i, s in enumerate(starts)]
    kept = keep_null_windows(feats, 0.25, seed=3)
    assert [f.i for f in kept] == sorted(f.i for f in kept)  # the order is kept
    assert [f.i for f in kept if f.start_position] == [1, 4, 8]  # every window with its answer
    assert sum(f.start_position == 0 for f in kept) == 2  # a quarter of the 9 null windows, rounded
    assert [f.i for f in keep_null_windows(feats, 0.25, seed=3)] == [f.i for f in kept]  # the seed decides
    assert len(keep_null_windows(feats, 1.0, seed=0)) == len(feats)


def test_null_windows_must_be_a_share():
    from minibert.finetune.run import FinetuneConfig

    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="null_windows"):
            FinetuneConfig(task="squad2", init="none", out="x", null_windows=bad).validate()
