"""Synthetic corpora and vocabularies the tests share (tests/conftest.py puts this folder on
sys.path, so a test anywhere under tests/ imports them: `from corpora import topic_corpus`).

Every corpus is in BERT's format (one sentence per line, a blank line between documents) and
made from a seeded Generator, so the same call writes the same bytes.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from minibert.io.paths import repo_root

REPO = repo_root()  # the repository

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SHARED = ["the", "a", "is", "on", "of", "and", "with", "to", "."]  # words of every topic's sentences
TOPICS = {  # each topic has its own words; held-out topics share none with training topics
    "cats": ["cat", "kitten", "purrs", "sleeps", "mat", "milk"],
    "dogs": ["dog", "puppy", "barks", "runs", "park", "bone"],
    "ships": ["ship", "sail", "floats", "docks", "harbour", "anchor"],
    "code": ["function", "returns", "list", "string", "calls", "value"],
    "heldA": ["zebra", "gallops", "savanna", "stripes", "grass", "herd"],
    "heldB": ["violin", "plays", "melody", "strings", "concert", "bow"],
}
TRAIN_TOPICS = ["cats", "dogs", "ships", "code"]
HELD_TOPICS = ["heldA", "heldB"]
WORDS = [f"w{i}" for i in range(45)]  # with SPECIALS: a vocabulary of V = 50 tokens


def write_vocab(path: Path, tokens) -> Path:
    """vocab.txt: one token per line, in the order given."""
    Path(path).write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    return Path(path)


def topic_vocab(path: Path) -> Path:
    """SPECIALS, SHARED and every topic's words (held-out topics included)."""
    return write_vocab(path, SPECIALS + SHARED + sorted({w for ws in TOPICS.values() for w in ws}))


def _sentence(rng, words) -> str:
    """'the <noun> <verb> on a <place> with the <thing> .': the topic decides every content word,
    so a model that reads the context can predict masked words."""
    return f"the {words[rng.integers(2)]} {words[2 + rng.integers(2)]} on a {words[4]} with the {words[5]} ."


def topic_corpus(path: Path, n_docs: int, seed: int, topics=TRAIN_TOPICS, sentences=(4, 9)) -> Path:
    """Documents that cycle through `topics`, each of sentences(lo, hi) topic sentences."""
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n_docs):
        words = TOPICS[topics[i % len(topics)]]
        docs.append("\n".join(_sentence(rng, words) for _ in range(rng.integers(*sentences))))
    Path(path).write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return Path(path)


def word_corpus(path: Path, n_docs: int, seed: int, words=WORDS, group: int | None = 5, sentences=(3, 7),
                length=(4, 9)) -> Path:
    """Documents of random words: each document draws from one group of `group` consecutive words
    (a topic; None: from all of them), sentences(lo, hi) sentences of length(lo, hi) words."""
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n_docs):
        pool = words
        if group is not None:
            topic = rng.choice(len(words) // group)
            pool = words[group * topic:group * topic + group]
        docs.append("\n".join(" ".join(rng.choice(pool, size=rng.integers(*length)))
                              for _ in range(rng.integers(*sentences))))
    Path(path).write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return Path(path)


def pretraining_files(directory: Path, train: Path, heldout: Path, vocab: Path) -> dict:
    """The data settings of a TrainConfig over these files, with a data cache of its own."""
    return {"corpus": (str(train),), "heldout": (str(heldout),), "vocab": str(vocab),
            "data_cache": str(Path(directory) / "cache")}


def small_config(files: dict, out: Path, **kw):
    """A TrainConfig of a 1-layer, 16-wide BERT over `files` (pretraining_files) that trains 12
    steps in about a second, writing into `out`; `kw` overrides any setting."""
    from minibert.train.config import make_config

    base = dict(files, out=str(out), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                intermediate_size=32, max_position_embeddings=32, max_seq_length=32,
                max_predictions_per_seq=5, batch_size=8, dupe_factor=2, lr=5e-3, warmup_steps=3,
                steps=12, log_interval=2, eval_interval=6, checkpoint_interval=4, eval_examples=32,
                curves=False)
    base.update(kw)
    return make_config("tiny", **base)


def tiny_pretrained(directory: Path, vocab, max_position_embeddings: int = 64):
    """A 1-layer, 16-wide BertForPreTraining (seed 0) saved in transformers' layout with `vocab`
    -> its BertConfig (for task classes of the same shape)."""
    from minibert.bert import BertForPreTraining
    from minibert.model import BertConfig

    cfg = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=max_position_embeddings)
    BertForPreTraining(cfg, seed=0).save_pretrained(directory, vocab=list(vocab))
    return cfg


REVIEW_WORDS = ["good", "great", "fun", "bad", "awful", "dull", "film", "the", "was"]


def unbalanced_reviews(directory: Path) -> Path:
    """A tiny pretrained model (pre/) and an unbalanced text,label CSV pair of made-up reviews
    (train.csv 48 rows, dev.csv 12; 3 neg : 1 pos) in `directory`, the same every time."""
    tiny_pretrained(directory / "pre", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *REVIEW_WORDS])
    rng = np.random.default_rng(0)

    def rows(n):
        labels = ["pos" if i % 4 == 0 else "neg" for i in range(n)]
        words = {"pos": REVIEW_WORDS[:3], "neg": REVIEW_WORDS[3:6]}
        return "text,label\n" + "".join(f"the film was {rng.choice(words[y])},{y}\n" for y in labels)
    (directory / "train.csv").write_text(rows(48), encoding="utf-8")
    (directory / "dev.csv").write_text(rows(12), encoding="utf-8")
    return directory
