"""minibert.pipeline on tiny saved models: the shapes and keys transformers' pipelines give,
probabilities that agree with the model's own logits, offsets that point at the text, and the
clear errors (a model for another task, a model without an MLM head). The same answers as
transformers' pipelines on a real checkpoint: tests/interop/test_pipelines_parity.py."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from corpora import tiny_pretrained
from hypothesis import given, settings
from hypothesis import strategies as st

import minibert
from minibert.finetune.models import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification
from minibert.tools.pipelines import _group_entities, convert_tokens_to_string
from minibert.text.tokenizer import BertTokenizer, is_control, strip_accents

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "paris", "new", "york",
         "is", "in", "where", "##s", "##at", ",", ".", "?", "zurich", "cafe"]
TAGS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("pipes")
    with warnings.catch_warnings():  # "newly initialised" heads: these models are for their shapes only
        warnings.simplefilter("ignore")
        tiny_pretrained(d / "pre", VOCAB)
        BertForSequenceClassification.from_pretrained(d / "pre", 3, id2label={0: "neg", 1: "neu", 2: "pos"},
                                                      seed=1).save_pretrained(d / "cls", vocab=VOCAB)
        BertForTokenClassification.from_pretrained(d / "pre", len(TAGS), id2label=dict(enumerate(TAGS)),
                                                   seed=2).save_pretrained(d / "tag", vocab=VOCAB)
        BertForQuestionAnswering.from_pretrained(d / "pre", seed=3).save_pretrained(d / "qa", vocab=VOCAB)
    return d


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_text_classification_gives_the_top_label_and_its_softmax(models):
    classify = minibert.pipeline("text-classification", model=models / "cls")
    model, tok = classify.model, classify.tokenizer
    texts = ["the cat sat on the mat", "where is paris ?", "new york"]
    ids, seg = tok.encode(texts[1])
    probs = _softmax(model.forward(np.array([ids]), np.array([seg]))[0].astype(np.float64))
    one = classify(texts[1])
    assert isinstance(one, list) and len(one) == 1 and set(one[0]) == {"label", "score"}
    assert one[0]["label"] == ["neg", "neu", "pos"][int(probs.argmax())]
    assert one[0]["score"] == pytest.approx(probs.max(), rel=1e-5)
    many = classify(texts)
    assert len(many) == 3 and many[1]["label"] == one[0]["label"]
    assert many[1]["score"] == pytest.approx(one[0]["score"], rel=1e-5)  # batched with padding: the same
    every = classify(texts[1], top_k=None)
    assert [d["label"] for d in every] == [["neg", "neu", "pos"][k] for k in np.argsort(-probs)]
    assert sum(d["score"] for d in every) == pytest.approx(1.0, rel=1e-6)
    assert [len(r) for r in classify(texts, top_k=2)] == [2, 2, 2]


def test_a_pair_is_given_as_text_and_text_pair(models):
    classify = minibert.pipeline("text-classification", model=models / "cls")
    ids, seg = classify.tokenizer.encode("the cat", "sat on the mat")
    probs = _softmax(classify.model.forward(np.array([ids]), np.array([seg]))[0].astype(np.float64))
    got = classify({"text": "the cat", "text_pair": "sat on the mat"}, top_k=None)
    assert {d["label"]: d["score"] for d in got} == pytest.approx(dict(zip(["neg", "neu", "pos"], probs)), rel=1e-5)
    with pytest.raises(ValueError, match="text_pair"):
        classify({"text": "a", "pair": "b"})


def test_token_classification_entities_point_at_the_text(models):
    tag = minibert.pipeline("token-classification", model=models / "tag")
    text = "The cats sat in  New York, Zürich."
    pieces = tag.tokenizer.tokenize_with_offsets(text)
    entities = tag(text, ignore_labels=[])  # every piece, O too
    assert len(entities) == len(pieces)
    for e, (piece, start, end, _) in zip(entities, pieces):
        assert set(e) == {"entity", "score", "index", "word", "start", "end"}
        assert e["word"] == piece and (e["start"], e["end"]) == (start, end) and e["entity"] in TAGS
        assert 1 / len(TAGS) <= e["score"] <= 1
    assert [text[e["start"]:e["end"]] for e in entities][-3:] == [",", "Zürich", "."]
    assert all(e["entity"] != "O" for e in tag(text))  # O left out by default
    grouped = tag(text, aggregation_strategy="simple", ignore_labels=[])
    assert {g["entity_group"] for g in grouped} <= {"O", "LOC", "PER"}
    assert grouped[0]["start"] == 0 and grouped[-1]["end"] == len(text)  # groups cover the pieces in order
    for strategy in ("first", "average", "max"):
        words = tag(text, aggregation_strategy=strategy, ignore_labels=[])
        spans = [(w["start"], w["end"]) for w in words]
        assert ("cat" in text[spans[0][0]:spans[-1][1]]) and all(a < b for a, b in spans)
        assert all(not text[s:e].startswith("##") for s, e in spans)
    with pytest.raises(ValueError, match="aggregation_strategy 'best'"):
        tag(text, aggregation_strategy="best")


def test_a_long_text_is_tagged_in_windows_and_every_word_gets_a_tag(models):
    tag = minibert.pipeline("token-classification", model=models / "tag")
    text = " ".join(["the cat sat on the mat ."] * 30)  # 210 pieces, the model takes 64 positions
    entities = tag(text, ignore_labels=[])
    assert len(entities) == len(tag.tokenizer.tokenize(text))
    assert [e["index"] for e in entities] == list(range(1, len(entities) + 1))


def test_simple_grouping_follows_b_and_i():
    e = [{"entity": t, "score": s, "word": w, "start": a, "end": b} for t, s, w, a, b in (
        ("B-LOC", 0.9, "new", 0, 3), ("I-LOC", 0.7, "york", 4, 8), ("B-LOC", 0.8, "paris", 9, 14),
        ("I-PER", 0.6, "bob", 15, 18), ("O", 0.9, "is", 19, 21))]
    groups = _group_entities(e)
    assert [(g["entity_group"], g["word"], g["start"], g["end"]) for g in groups] == [
        ("LOC", "new york", 0, 8), ("LOC", "paris", 9, 14), ("PER", "bob", 15, 18), ("O", "is", 19, 21)]
    assert groups[0]["score"] == pytest.approx(0.8)


def test_word_pieces_join_as_bert_decodes_them():
    assert convert_tokens_to_string(["new", "york", "##s", ",", "paris", "."]) == "new yorks, paris."
    assert convert_tokens_to_string(["##s"]) == "##s"


def test_question_answering_gives_a_span_of_the_context(models):
    qa = minibert.pipeline("question-answering", model=models / "qa")
    context = "The cat sat on the mat in Paris, New York."
    got = qa(question="where is the cat ?", context=context)
    assert set(got) == {"score", "start", "end", "answer"}
    assert got["answer"] == context[got["start"]:got["end"]] and got["answer"]
    assert 0 < got["score"] <= 1
    top = qa(question="where is the cat ?", context=context, top_k=3)
    assert len(top) == 3 and top[0] == got and top[0]["score"] >= top[1]["score"] >= top[2]["score"]
    assert qa([{"question": "where ?", "context": context}] * 2) == [qa(question="where ?", context=context)] * 2
    # the answer's probability: p(start) p(end), a softmax over [CLS] and the context
    tok, model = qa.tokenizer, qa.model
    q, c = tok.encode("where is the cat ?")[0][1:-1], tok.encode(context)[0][1:-1]
    ids = [tok.cls_id, *q, tok.sep_id, *c, tok.sep_id]
    seg = [0] * (len(q) + 2) + [1] * (len(c) + 1)
    logits = np.asarray(model.eval_logits(np.array([ids]), np.array([seg]), np.ones((1, len(ids)), np.int64))[0],
                        np.float64)  # (T, 2)
    allowed = np.r_[0, np.arange(len(q) + 2, len(q) + 2 + len(c))]
    ps, pe = _softmax(logits[allowed, 0]), _softmax(logits[allowed, 1])
    best = max((ps[i] * pe[j], i, j) for i in range(1, len(allowed)) for j in range(i, min(i + 15, len(allowed))))
    assert got["score"] == pytest.approx(best[0], rel=1e-5)


def test_a_long_context_is_read_in_overlapping_windows(models):
    qa = minibert.pipeline("question-answering", model=models / "qa")
    context = " ".join(["the cat sat on the mat ."] * 20)  # 140 pieces in windows of 64
    got = qa(question="where ?", context=context, top_k=50, doc_stride=16)
    assert len(got) == 50 and all(a["answer"] == context[a["start"]:a["end"]] for a in got)
    assert max(a["end"] for a in got) > len(context) // 2  # later windows answer too


def test_fill_mask_lists_the_fillers_of_each_mask(models):
    fill = minibert.pipeline("fill-mask", model=models / "pre")
    one = fill("the [MASK] sat on the mat", top_k=3)
    assert len(one) == 3 and set(one[0]) == {"score", "token", "token_str", "sequence"}
    assert one[0]["score"] >= one[1]["score"] >= one[2]["score"]
    assert one[0]["sequence"] == f"the {one[0]['token_str']} sat on the mat".replace(" ##", "")
    assert fill.tokenizer.ids_to_tokens[one[0]["token"]] == one[0]["token_str"]
    two = fill("the [MASK] sat on the [MASK]", top_k=2)
    assert len(two) == 2 and all(len(row) == 2 for row in two)
    assert two[0][0]["sequence"].startswith("[CLS] the ") and "[MASK]" in two[0][0]["sequence"]
    assert fill(["the [MASK] sat"]) == fill("the [MASK] sat")  # one text in a list: its answer alone
    assert len(fill(["the [MASK] sat", "the cat [MASK]"])) == 2
    targeted = fill("the [MASK] sat", targets=["cat", "mat"])
    assert {d["token_str"] for d in targeted} == {"cat", "mat"}
    with pytest.raises(ValueError, match=r"no \[MASK\]"):
        fill("the cat sat")


def test_a_model_for_another_task_is_named(models):
    with pytest.raises(ValueError, match="BertForTokenClassification, not a model for text-classification: use "
                                         "pipeline\\('token-classification'"):
        minibert.pipeline("text-classification", model=models / "tag")
    with pytest.raises(ValueError, match="not a fine-tuned model"):
        minibert.pipeline("question-answering", model=models / "pre")
    with pytest.raises(ValueError, match="fine-tuned BertForSequenceClassification: fine-tuning put a "
                                         "text-classification head on its encoder and left the MLM head out"):
        minibert.pipeline("fill-mask", model=models / "cls")
    with pytest.raises(ValueError, match="unknown pipeline task 'summarization'"):
        minibert.pipeline("summarization", model=models / "cls")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("the cat sat,.?Zürich  café\t\x00\u0301中ΣİAB")), max_size=40))
def test_offsets_give_the_tokens_of_tokenize_and_point_at_them(text):
    tok = BertTokenizer(VOCAB + ["中", "a", "b", "σ", "##ς", "##σ"])
    found = tok.tokenize_with_offsets(text)
    assert [t for t, *_ in found] == tok.tokenize(text)
    for piece, start, end, _ in found:
        assert 0 <= start < end <= len(text)
        if piece != "[UNK]":  # the span holds the piece (lowercased, accents and control characters gone)
            kept = "".join(ch for ch in text[start:end] if ch not in "\x00" and not is_control(ch))
            plain = piece[2:] if piece.startswith("##") else piece  # casefold: a final sigma lowers as ς in a word
            assert plain.casefold() in strip_accents(kept.lower()).casefold()
    words = [w for *_, w in found]
    assert words == sorted(words)
