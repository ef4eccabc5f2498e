"""minibert.pipeline against transformers' pipelines on the same checkpoint: all-MiniLM-L6-v2's
encoder with a task head of seeded random weights (a classifier of 3 labels, a BIO tagger, a
question-answering head, an MLM head), saved once and read by both.

Each answer must match: the labels, entities, spans and fillers, their character offsets, and
their scores to float32 precision. transformers 5 has no question-answering pipeline; its answer
is rebuilt as transformers 4's pipeline made it: the fast tokenizer's windows and offsets,
the model's logits, and transformers' own span decoder (select_starts_ends, which the
document-question-answering pipeline keeps), the span widened to whole words."""
from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import minibert  # noqa: E402
from minibert.finetune import models  # noqa: E402

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
TEXTS = ["Hello World, this is minibert.", "A gorgeous, witty film about Zürich's café owners!",
         "supercalifragilistic tokenisation of unseen words in New York"]
CONTEXT = ("The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named "
           "after the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889.")
QUESTIONS = ["Who designed the tower?", "Where is the Eiffel Tower?", "When was it built?"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory, minilm_dir):
    """The four checkpoints, saved beside each other."""
    d = tmp_path_factory.mktemp("pipelines")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "newly initialised" heads
        models.BertForSequenceClassification.from_pretrained(minilm_dir, 3, id2label={0: "neg", 1: "neu", 2: "pos"},
                                                             seed=1).save_pretrained(d / "cls")
        models.BertForTokenClassification.from_pretrained(minilm_dir, len(TAGS), id2label=dict(enumerate(TAGS)),
                                                          seed=2).save_pretrained(d / "tag")
        models.BertForQuestionAnswering.from_pretrained(minilm_dir, seed=3).save_pretrained(d / "qa")
        torch.manual_seed(4)
        transformers.BertForMaskedLM.from_pretrained(minilm_dir).save_pretrained(d / "mlm")
    for name in ("vocab.txt", "tokenizer_config.json", "tokenizer.json", "special_tokens_map.json"):
        shutil.copy(minilm_dir / name, d / "mlm" / name)
    return d


def _hf(task, directory, tokenizer, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.pipeline(task, model=str(directory), tokenizer=str(tokenizer), device="cpu", **kw)


def _same(ours, theirs, path="answer"):
    """Equal structure and values: strings and ints exactly, scores to float32 precision."""
    if isinstance(theirs, dict):
        assert set(ours) == set(theirs), (path, set(ours) ^ set(theirs))
        for k in theirs:
            _same(ours[k], theirs[k], f"{path}.{k}")
    elif isinstance(theirs, list):
        assert len(ours) == len(theirs), (path, ours, theirs)
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _same(a, b, f"{path}[{i}]")
    elif isinstance(theirs, (float, np.floating)):
        assert ours == pytest.approx(float(theirs), rel=2e-4, abs=1e-6), path
    else:
        assert ours == (int(theirs) if isinstance(theirs, np.integer) else theirs), path


def test_text_classification_as_transformers(saved, minilm_dir):
    ours = minibert.pipeline("text-classification", model=saved / "cls")
    theirs = _hf("text-classification", saved / "cls", minilm_dir)
    _same(ours(TEXTS[0]), theirs(TEXTS[0]))
    _same(ours(TEXTS), theirs(TEXTS))
    _same(ours(TEXTS, top_k=None), theirs(TEXTS, top_k=None))
    _same(ours(TEXTS[1], top_k=2), theirs(TEXTS[1], top_k=2))
    pair = {"text": TEXTS[0], "text_pair": TEXTS[1]}
    _same(ours(pair, top_k=None), theirs(pair, top_k=None))


@pytest.mark.parametrize("strategy", ["none", "simple", "first", "average", "max"])
def test_token_classification_as_transformers(saved, minilm_dir, strategy):
    ours = minibert.pipeline("token-classification", model=saved / "tag", aggregation_strategy=strategy)
    theirs = _hf("token-classification", saved / "tag", minilm_dir, aggregation_strategy=strategy)
    for text in TEXTS:
        got, want = ours(text), theirs(text)
        assert want, "the random head tags something"
        _same(got, want)
    _same(ours(TEXTS), theirs(TEXTS))


def _transformers_4_answer(model, tok, question, context, top_k=1, max_answer_len=15, max_seq_len=384,
                           doc_stride=128):
    """transformers 4's question-answering pipeline (fast tokenizer, question first)."""
    from transformers.pipelines.document_question_answering import select_starts_ends

    enc = tok(question, context, truncation="only_second", max_length=max_seq_len, stride=doc_stride,
              return_overflowing_tokens=True, return_offsets_mapping=True, return_tensors="np")
    answers = []
    for span in range(len(enc["input_ids"])):
        ids = enc["input_ids"][span]
        p_mask = np.array([s != 1 for s in enc.sequence_ids(span)], dtype=np.int64)
        p_mask[ids == tok.cls_token_id] = 0
        with torch.no_grad():
            out = model(input_ids=torch.tensor(ids[None]), token_type_ids=torch.tensor(enc["token_type_ids"][span][None]),
                        attention_mask=torch.tensor(enc["attention_mask"][span][None]))
        starts, ends, scores, _ = select_starts_ends(out.start_logits.numpy(), out.end_logits.numpy(), p_mask[None],
                                                     enc["attention_mask"][span][None], 1000000, top_k, False,
                                                     max_answer_len)
        e = enc[span]
        for s, t, score in zip(starts, ends, scores):
            a = e.word_to_chars(e.token_to_word(s), sequence_index=1)[0]
            b = e.word_to_chars(e.token_to_word(t), sequence_index=1)[1]
            answers.append({"score": score.item(), "start": a, "end": b, "answer": context[a:b]})
    answers = sorted(answers, key=lambda x: x["score"], reverse=True)[:top_k]
    return answers[0] if len(answers) == 1 else answers


def test_question_answering_as_transformers_4(saved, minilm_dir):
    ours = minibert.pipeline("question-answering", model=saved / "qa")
    tok = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.BertForQuestionAnswering.from_pretrained(str(saved / "qa"),
                                                                      attn_implementation="eager").eval()
    for question in QUESTIONS:
        _same(ours(question=question, context=CONTEXT), _transformers_4_answer(model, tok, question, CONTEXT))
        _same(ours(question=question, context=CONTEXT, top_k=3),
              _transformers_4_answer(model, tok, question, CONTEXT, top_k=3))
    long_context = " ".join([CONTEXT] * 4)  # 4 windows of 64 that overlap by 16
    _same(ours(question=QUESTIONS[0], context=long_context, max_seq_len=64, doc_stride=16, top_k=5),
          _transformers_4_answer(model, tok, QUESTIONS[0], long_context, top_k=5, max_seq_len=64, doc_stride=16))


def test_fill_mask_as_transformers(saved, minilm_dir):
    ours, theirs = minibert.pipeline("fill-mask", model=saved / "mlm"), _hf("fill-mask", saved / "mlm", minilm_dir)
    for text in ("Paris is the [MASK] of France.", "The [MASK] sat on the [MASK]."):
        _same(ours(text), theirs(text))
    _same(ours(["a [MASK] day", "Hello, [MASK]!"], top_k=3), theirs(["a [MASK] day", "Hello, [MASK]!"], top_k=3))
    _same(ours("the [MASK] sat", targets=["cat", "dog"]), theirs("the [MASK] sat", targets=["cat", "dog"]))
