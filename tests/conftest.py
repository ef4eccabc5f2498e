"""What every test shares: headless matplotlib, this folder on sys.path so that a test in any
subfolder imports the shared corpora (tests/corpora.py), and the topic corpus as a fixture."""
import os
import sys
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
# Hypothesis keeps its examples and caches in the repository's own git-ignored .hypothesis/, not in
# the current directory (`python -m minibert test` from anywhere left one there); read when first used
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(Path(__file__).resolve().parents[1] / ".hypothesis"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest  # noqa: E402
from corpora import HELD_TOPICS, pretraining_files, topic_corpus, topic_vocab  # noqa: E402


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Training and held-out documents of the training topics, a held-out file of topics whose
    words never occur in training, and the vocabulary of them all: pretraining_files' dict."""
    d = tmp_path_factory.mktemp("corpus")
    train = topic_corpus(d / "train.txt", 80, 0)
    heldout = topic_corpus(d / "heldout.txt", 12, 1)  # new documents, same topics
    topic_corpus(d / "heldout_disjoint.txt", 12, 2, HELD_TOPICS)  # words never in training
    return pretraining_files(d, train, heldout, topic_vocab(d / "vocab.txt"))


