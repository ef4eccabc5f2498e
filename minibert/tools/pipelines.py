"""`minibert.pipeline(task, model=DIR)`: a saved model on your own text, in one call, with the
answers transformers' pipelines give (the same keys, the same scores, offsets into your text).

    >>> classify = minibert.pipeline("text-classification", model="runs/spam")
    >>> classify("WIN a free prize now")                 # [{'label': 'spam', 'score': 0.98}]
    >>> classify(["see you at 6", "call now"], top_k=None)   # every label, best first, per text
    >>> tag = minibert.pipeline("token-classification", model="runs/wnut17", aggregation_strategy="simple")
    >>> tag("I flew to Paris")        # [{'entity_group': 'location', 'score': ..., 'word': 'paris', 'start': 10, 'end': 15}]
    >>> qa = minibert.pipeline("question-answering", model="runs/squad1")
    >>> qa(question="Where?", context="It is in Paris.")  # {'score': ..., 'start': 9, 'end': 14, 'answer': 'Paris'}
    >>> fill = minibert.pipeline("fill-mask", model="runs/tiny")
    >>> fill("a [MASK] is sorted")     # [{'score': ..., 'token': 2003, 'token_str': 'list', 'sequence': 'a list is sorted'}, ...]

A string gives one answer and a list gives a list of them, as transformers' pipelines do
(fill-mask: a list per [MASK] when a text holds several). Scores are softmax probabilities:

    text-classification   each label's softmax (a one-output regression head: its raw value); the top label
                          or, with top_k, the k best (top_k=None: every label)
    token-classification  each word piece's softmax; aggregation_strategy "none" (a piece each, O left out),
                          "simple" (neighbouring pieces of one type joined, B- starting a new one), or by
                          words: "first", "average", "max" (the word's label from its first piece, the
                          mean of its pieces' probabilities, or its most confident piece), then joined
    question-answering    a span's score is p(start) * p(end), each a softmax over the window's context
                          (and [CLS]), spans at most max_answer_len pieces, widened to whole words;
                          a long context is read in windows of max_seq_len that overlap by doc_stride
    fill-mask             the softmax over the vocabulary at each [MASK]

Texts longer than the model was fine-tuned on (run.json's max_seq_length) are cut to it for
classification; a tagger reads a long text in consecutive windows, so every word gets a tag.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from minibert.analysis.inspect import encode_with_masks
from minibert.finetune.evaluate import _max_seq_length, load_finetuned
from minibert.io.hub import resolve_model_dir
from minibert.tools.look_inside import HEAD_TASKS, load_model_and_tokenizer, no_mlm_head

TASKS = ("text-classification", "token-classification", "question-answering", "fill-mask")
ALIASES = {"sentiment-analysis": "text-classification", "ner": "token-classification"}  # transformers' other names
AGGREGATIONS = ("none", "simple", "first", "average", "max")
SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_ALL = object()  # top_k not given: the top label alone, as a dict (transformers' legacy form)


def pipeline(task: str, model: str | Path, *, verify: bool = True, **options):
    """The pipeline for `task` on the saved model `model` (a directory, or a hub id in the cache).
    `options` are the call's defaults (top_k=, aggregation_strategy=, ...), as transformers'."""
    task = ALIASES.get(task, task)
    if task not in TASKS:
        raise ValueError(f"unknown pipeline task {task!r}; minibert has {', '.join(TASKS)}")
    directory = resolve_model_dir(str(model))
    if task == "fill-mask":
        return FillMaskPipeline(directory, verify, **options)
    ft = load_finetuned(directory, verify)
    fits = HEAD_TASKS.get(ft.model.head_shape)  # the pipeline of the model's head
    if fits != task:
        raise ValueError(f"{directory} is a {ft.model.architecture}, not a model for {task}"
                         + (f": use pipeline({fits!r}, model=...)" if fits else " (no pipeline takes it)"))
    cls = {"text-classification": TextClassificationPipeline, "token-classification": TokenClassificationPipeline,
           "question-answering": QuestionAnsweringPipeline}[task]
    return cls(ft, **options)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))  # (..., K)
    return e / e.sum(axis=-1, keepdims=True)


def _pad(rows: list[list[int]], value: int = 0) -> np.ndarray:
    """Lists of ids -> (N, longest) int64, filled with `value`."""
    out = np.full((len(rows), max(map(len, rows))), value, np.int64)  # (N, T)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


def _logits(model, encoded: list[tuple[list[int], list[int]]], batch_size: int) -> list[np.ndarray]:
    """[(ids, segment ids)] -> each one's logits, batch by batch (dropout off, padding trimmed)."""
    out = []
    for start in range(0, len(encoded), batch_size):
        chunk = encoded[start:start + batch_size]
        ids, seg = _pad([c[0] for c in chunk]), _pad([c[1] for c in chunk])  # (b, T)
        mask = _pad([[1] * len(c[0]) for c in chunk])  # (b, T)
        logits = np.asarray(model.eval_logits(ids, seg, mask), dtype=np.float64)  # (b, K) or (b, T, K)
        out += [logits[i] if logits.ndim == 2 else logits[i, :len(c[0])] for i, c in enumerate(chunk)]
    return out


def _batch(inputs) -> tuple[list, bool]:
    """-> (the inputs as a list, whether one was given rather than a list)."""
    if isinstance(inputs, (list, tuple)):
        return list(inputs), False
    return [inputs], True


def _check_text(text, what: str = "text") -> str:
    if not isinstance(text, str):
        raise TypeError(f"the {what} must be a string, not {type(text).__name__}")
    return text


# what BERT's WordPiece decoder removes from each piece it joins (its `cleanup`), and what
# transformers' clean_up_tokenization removes from the joined text
DECODER_CLEANUP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
                   (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))
TEXT_CLEANUP = tuple(pair for pair in DECODER_CLEANUP if pair[0] != " do not")


def _replace_all(text: str, pairs) -> str:
    for before, after in pairs:
        text = text.replace(before, after)
    return text


def convert_tokens_to_string(tokens: list[str]) -> str:
    """Word pieces -> text, as BERT's WordPiece decoder joins them: a '##' piece glued to the one
    before, any other after a space, each cleaned up (so no space before . ? ! or ,)."""
    return "".join(_replace_all(t[2:] if i and t.startswith("##") else (" " + t if i else t), DECODER_CLEANUP)
                   for i, t in enumerate(tokens))


def clean_up(text: str) -> str:
    """transformers' clean_up_tokenization (a tokenizer_config.json with
    clean_up_tokenization_spaces true): no space before punctuation and English contractions."""
    return _replace_all(text, TEXT_CLEANUP)


class _Pipeline:
    length = 512  # the longest input when run.json does not say (max_seq_length)

    def __init__(self, ft, batch_size: int = 32, **defaults):
        self.directory, self.model, self.tokenizer = ft.directory, ft.model, ft.tokenizer
        self.max_length = _max_seq_length(ft, self.length)
        self.batch_size = batch_size
        self.labels = [self.model.config.id2label[i] for i in range(self.model.config.num_labels)] \
            if getattr(self.model.config, "id2label", None) else None
        self.defaults = defaults

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={str(self.directory)!r})"


class TextClassificationPipeline(_Pipeline):
    """A sequence classifier: a text (or {"text": a, "text_pair": b}) -> {"label", "score"}."""

    def __init__(self, ft, **defaults):
        super().__init__(ft, **defaults)
        self.regression = getattr(self.model.config, "problem_type", None) == "regression" or \
            (isinstance(ft.saved.get("task"), dict) and ft.saved["task"].get("kind") == "regression")

    def __call__(self, inputs, top_k=_ALL, **kw):
        top_k = self.defaults.get("top_k", _ALL) if top_k is _ALL else top_k
        if kw:
            raise TypeError(f"text-classification takes top_k; not {', '.join(kw)}")
        items, single = _batch(inputs)
        pairs = []
        for item in items:
            if isinstance(item, dict):
                if set(item) - {"text", "text_pair"} or "text" not in item:
                    raise ValueError(f"a pair is {{'text': ..., 'text_pair': ...}}; got the keys {sorted(item)}")
                pairs.append((_check_text(item["text"]), item.get("text_pair")))
            else:
                pairs.append((_check_text(item), None))
        encoded = [self.tokenizer.encode(a, b, max_length=self.max_length) for a, b in pairs]
        results = []
        for logits in _logits(self.model, encoded, self.batch_size):  # (K,)
            if logits.shape[0] == 1:  # regression: the value itself (one output of another kind: its sigmoid)
                value = float(logits[0]) if self.regression else float(1 / (1 + np.exp(-logits[0])))
                scores = [{"label": self.labels[0] if self.labels else "LABEL_0", "score": value}]
            else:
                p = softmax(logits)  # (K,)
                scores = sorted(({"label": self.labels[k], "score": float(p[k])} for k in range(len(p))),
                                key=lambda d: -d["score"])
            if top_k is _ALL:
                results.append(scores[0])
            else:
                results.append(scores if top_k is None else scores[:top_k])
        return [results[0]] if single and top_k is _ALL else (results[0] if single else results)


class TokenClassificationPipeline(_Pipeline):
    """A tagger: a text -> its entities, each {"entity" or "entity_group", "score", "word", "start", "end"}."""

    def __call__(self, inputs, aggregation_strategy: str | None = None, ignore_labels=None, **kw):
        if kw:
            raise TypeError(f"token-classification takes aggregation_strategy and ignore_labels; not {', '.join(kw)}")
        strategy = aggregation_strategy or self.defaults.get("aggregation_strategy", "none")
        if strategy not in AGGREGATIONS:
            raise ValueError(f"aggregation_strategy {strategy!r}; choose one of {', '.join(AGGREGATIONS)}")
        ignore = set(ignore_labels if ignore_labels is not None else self.defaults.get("ignore_labels", ["O"]))
        items, single = _batch(inputs)
        results = [self._one(_check_text(text), strategy, ignore) for text in items]
        return results[0] if single else results

    def _one(self, text: str, strategy: str, ignore: set) -> list[dict]:
        tok = self.tokenizer
        pieces = tok.tokenize_with_offsets(text)
        width = max(self.max_length - 2, 1)
        windows = [pieces[i:i + width] for i in range(0, len(pieces), width)]  # every piece read once
        encoded = [([tok.cls_id, *tok.convert_tokens_to_ids([p[0] for p in w]), tok.sep_id], [0] * (len(w) + 2))
                   for w in windows]
        pre = []  # a piece each: its probabilities and where it is
        for w, logits in zip(windows, _logits(self.model, encoded, self.batch_size)):  # (T, K)
            probs = softmax(logits[1:-1])  # (n, K) without [CLS] and [SEP]
            for (piece, start, end, _), p in zip(w, probs):
                ref = text[start:end]
                unknown = piece == "[UNK]"
                pre.append({"word": ref if unknown else piece, "scores": p, "start": start, "end": end,
                            "index": len(pre) + 1, "is_subword": not unknown and len(piece) != len(ref)})
        if strategy in ("none", "simple"):
            entities = [{"entity": self.labels[int(e["scores"].argmax())], "score": float(e["scores"].max()),
                         "index": e["index"], "word": e["word"], "start": e["start"], "end": e["end"]} for e in pre]
        else:
            entities = [self._word(group, strategy) for group in _words(pre)]
        if strategy != "none":
            entities = _group_entities(entities)
        return [e for e in entities if e.get("entity") not in ignore and e.get("entity_group") not in ignore]

    def _word(self, pieces: list[dict], strategy: str) -> dict:
        """A word's pieces -> one entity (aggregation "first", "average" or "max")."""
        if strategy == "first":
            scores = pieces[0]["scores"]
        elif strategy == "max":
            scores = max(pieces, key=lambda e: e["scores"].max())["scores"]
        else:
            scores = np.mean([e["scores"] for e in pieces], axis=0)  # (K,)
        k = int(scores.argmax())
        return {"entity": self.labels[k], "score": float(scores[k]),
                "word": convert_tokens_to_string([e["word"] for e in pieces]),
                "start": pieces[0]["start"], "end": pieces[-1]["end"]}


def _words(pre: list[dict]) -> list[list[dict]]:
    """Pieces -> words: a piece that continues a word ("##...") joins the one before."""
    groups: list[list[dict]] = []
    for e in pre:
        if groups and e["is_subword"]:
            groups[-1].append(e)
        else:
            groups.append([e])
    return groups


def _tag(label: str) -> tuple[str, str]:
    """'B-PER' -> ('B', 'PER'); 'I-PER' -> ('I', 'PER'); a label without B-/I- continues (as I)."""
    if label.startswith("B-"):
        return "B", label[2:]
    if label.startswith("I-"):
        return "I", label[2:]
    return "I", label


def _group_entities(entities: list[dict]) -> list[dict]:
    """Neighbouring entities of one type joined into one group (a B- starts a new group):
    {"entity_group": type, "score": the mean, "word", "start", "end"}."""
    groups: list[list[dict]] = []
    for e in entities:
        bi, tag = _tag(e["entity"])
        if groups and bi != "B" and tag == _tag(groups[-1][-1]["entity"])[1]:
            groups[-1].append(e)
        else:
            groups.append([e])
    return [{"entity_group": g[0]["entity"].split("-", 1)[-1], "score": float(np.mean([e["score"] for e in g])),
             "word": convert_tokens_to_string([e["word"] for e in g]), "start": g[0]["start"], "end": g[-1]["end"]}
            for g in groups]


class QuestionAnsweringPipeline(_Pipeline):
    """An extractive reader: question and context -> {"score", "start", "end", "answer"}."""

    length = 384  # SQuAD's windows

    def __call__(self, *args, question=None, context=None, top_k: int | None = None, max_answer_len: int | None = None,
                 doc_stride: int | None = None, max_seq_len: int | None = None, max_question_len: int | None = None,
                 handle_impossible_answer: bool | None = None):
        d = self.defaults
        top_k = top_k or d.get("top_k", 1)
        max_answer_len = max_answer_len or d.get("max_answer_len", 15)
        T = max_seq_len or d.get("max_seq_len", self.max_length)
        stride = doc_stride or d.get("doc_stride", min(T // 2, 128))
        max_question_len = max_question_len or d.get("max_question_len", 64)
        impossible = d.get("handle_impossible_answer", False) if handle_impossible_answer is None \
            else handle_impossible_answer
        if args:  # qa({"question": q, "context": c}) or a list of such dicts
            if question is not None or context is not None or len(args) > 1:
                raise TypeError("give question= and context=, or one dict (or a list of dicts) with both")
            items, single = _batch(args[0])
            if not all(isinstance(i, dict) and {"question", "context"} <= set(i) for i in items):
                raise ValueError("each input is {'question': ..., 'context': ...}")
            pairs = [(i["question"], i["context"]) for i in items]
        else:
            if question is None or context is None:
                raise TypeError("question-answering needs question= and context=")
            questions, single_q = _batch(question)
            contexts, single_c = _batch(context)
            if len(questions) != len(contexts):
                if len(questions) == 1:
                    questions = questions * len(contexts)
                elif len(contexts) == 1:
                    contexts = contexts * len(questions)
                else:
                    raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts")
            pairs, single = list(zip(questions, contexts)), single_q and single_c
        results = [self._one(_check_text(q, "question"), _check_text(c, "context"), top_k, max_answer_len, T, stride,
                             max_question_len, impossible) for q, c in pairs]
        return results[0] if single else results

    def _one(self, question: str, context: str, top_k: int, max_answer_len: int, T: int, stride: int,
             max_question_len: int, impossible: bool):
        tok = self.tokenizer
        q_ids = tok.convert_tokens_to_ids(tok.tokenize(question))[:max_question_len]
        pieces = tok.tokenize_with_offsets(context)
        room = T - len(q_ids) - 3  # context pieces a window holds
        if room < 1:
            raise ValueError(f"the question is {len(q_ids)} word pieces; with max_seq_len {T} no context fits")
        if stride >= room:
            raise ValueError(f"doc_stride {stride} must be smaller than the context a window holds ({room} pieces)")
        starts = list(range(0, max(len(pieces) - stride, 1), room - stride)) or [0]
        windows = [pieces[s:s + room] for s in starts]
        encoded = [([tok.cls_id, *q_ids, tok.sep_id, *tok.convert_tokens_to_ids([p[0] for p in w]), tok.sep_id],
                    [0] * (len(q_ids) + 2) + [1] * (len(w) + 1)) for w in windows]
        first = len(q_ids) + 2  # the window's first context position
        # each word's span in the context: the answer is widened to whole words
        word_start, word_end = {}, {}
        for _, s, e, w in pieces:
            word_start.setdefault(w, s)
            word_end[w] = max(word_end.get(w, e), e)
        answers, null = [], 1.0e6
        for w, logits in zip(windows, _logits(self.model, encoded, self.batch_size)):  # (T, 2)
            allowed = np.zeros(len(logits), bool)  # (T,) [CLS] and the context take part in the softmax
            allowed[0] = True
            allowed[first:first + len(w)] = True
            start = softmax(np.where(allowed, logits[:, 0], -10000.0))  # (T,)
            end = softmax(np.where(allowed, logits[:, 1], -10000.0))  # (T,)
            null = min(null, float(start[0] * end[0]))
            start[0] = end[0] = 0.0
            spans = np.triu(np.tril(np.outer(start, end), max_answer_len - 1))  # (T, T) start <= end < start + len
            spans[~allowed, :] = 0.0
            spans[:, ~allowed] = 0.0
            spans[0, :] = spans[:, 0] = 0.0
            order = np.argsort(-spans, axis=None, kind="stable")[:top_k]
            for flat in order:
                i, j = divmod(int(flat), len(logits))
                if spans[i, j] <= 0.0 or not (first <= i <= j < first + len(w)):
                    continue
                a, b = w[i - first][3], w[j - first][3]
                answers.append({"score": float(spans[i, j]), "start": word_start[a], "end": word_end[b],
                                "answer": context[word_start[a]:word_end[b]]})
        if impossible:
            answers.append({"score": null, "start": 0, "end": 0, "answer": ""})
        answers = sorted(answers, key=lambda x: -x["score"])[:top_k]
        if not answers:
            return {"score": 0.0, "start": 0, "end": 0, "answer": ""}
        return answers[0] if len(answers) == 1 else answers


class FillMaskPipeline:
    """A model with its MLM head: a text with [MASK] -> the top_k fillers of each mask, each
    {"score", "token", "token_str", "sequence"}."""

    def __init__(self, directory: Path, verify: bool = True, top_k: int = 5, targets=None):
        self.directory = Path(directory)
        self.model, self.tokenizer = load_model_and_tokenizer(directory, verify, encoder_of_task=True)
        if "mlm" not in getattr(self.model, "heads", ("mlm",)):
            raise no_mlm_head(directory)
        self.top_k, self.targets = top_k, targets
        config = self.directory / "tokenizer_config.json"
        try:
            self.clean_up = json.loads(config.read_text(encoding="utf-8")).get("clean_up_tokenization_spaces") is True
        except (OSError, ValueError, AttributeError):  # none, or not a JSON object: transformers' default (False)
            self.clean_up = False

    def __repr__(self) -> str:
        return f"FillMaskPipeline(model={str(self.directory)!r})"

    def __call__(self, inputs, top_k: int | None = None, targets=None):
        top_k = top_k or self.top_k
        targets = targets if targets is not None else self.targets
        tok = self.tokenizer
        target_ids = None
        if targets is not None:
            targets = [targets] if isinstance(targets, str) else list(targets)
            target_ids = []
            for t in targets:
                pieces = [t] if t in tok.vocab else tok.tokenize(t)
                if not pieces or pieces[0] == "[UNK]":
                    raise ValueError(f"the target {t!r} is not in the vocabulary")
                target_ids.append(tok.vocab[pieces[0]])  # a longer word: its first piece, as transformers
            top_k = min(top_k, len(target_ids))
        items, _ = _batch(inputs)
        results = []
        for text in items:
            ids, positions = encode_with_masks(tok, _check_text(text), self.model.config.max_position_embeddings)
            if not positions:
                raise ValueError(f"no [MASK] in {text!r}: put [MASK] where a word should be predicted")
            logits = self.model.forward(np.array([ids])).mlm_logits[0, positions]  # (M, V)
            probs = softmax(np.asarray(logits, dtype=np.float64))  # (M, V)
            if target_ids is not None:
                probs = probs[:, target_ids]  # (M, len(targets))
            single = len(positions) == 1
            rows = []
            for m, p in enumerate(probs):
                best = np.argsort(-p, kind="stable")[:top_k]
                row = []
                for k in best:
                    token = int(target_ids[k] if target_ids is not None else k)
                    filled = list(ids)
                    filled[positions[m]] = token
                    row.append({"score": float(p[k]), "token": token, "token_str": self._decode([token], False),
                                "sequence": self._decode(filled, skip_special=single)})
                rows.append(row)
            results.append(rows[0] if single else rows)
        return results[0] if len(items) == 1 else results

    def _decode(self, ids: list[int], skip_special: bool) -> str:
        tokens = [t for t in self.tokenizer.convert_ids_to_tokens(ids)
                  if t != "[PAD]" and not (skip_special and t in SPECIAL)]
        text = convert_tokens_to_string(tokens)
        return clean_up(text) if self.clean_up else text
