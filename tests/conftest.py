"""What every test shares: headless matplotlib, this folder on sys.path so that a test in any
subfolder imports the shared corpora (tests/corpora.py), and the topic corpus as a fixture."""
import json
import os
import sys
from pathlib import Path

from minibert.io.paths import repo_root

os.environ.setdefault("MPLBACKEND", "Agg")
# Hypothesis keeps its examples and caches in the repository's own git-ignored .hypothesis/, not in
# the current directory (`python -m minibert test` from anywhere left one there); read when first used
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(repo_root() / ".hypothesis"))
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


# settings_renames: skip-file (the older names, on purpose)
# a run.json's settings as minibert wrote them before one settings vocabulary (docs/settings.md):
# today's name -> the older one (None: the setting did not exist then), by the command that wrote it
OLDER_NAMES = {
    "train": {"out": "out_dir", "max_train_examples": "max_train_lines"},
    "train-xlnet": {"out": None, "max_seq_length": "seq_len", "max_train_examples": "max_train_lines",
                    "eval_examples": "eval_sequences"},
    "train-t5": {"max_seq_length": "chunk_len", "max_train_examples": None, "eval_examples": None},  # + max_input
    "finetune": {"hidden_dropout_prob": "dropout", "attention_probs_dropout_prob": None, "verify": None},
}


@pytest.fixture
def written_before_the_vocabulary():
    """-> rewrite(run_dir): its run.json's settings in the names minibert wrote before one
    settings vocabulary, as a run directory of that code holds them (train-t5's slice was
    `fast`), so that a test resumes a run of the older code."""
    def rewrite(run_dir):
        path = Path(run_dir) / "run.json"
        run = json.loads(path.read_text(encoding="utf-8"))
        settings, names = run["settings"], OLDER_NAMES[run["command"]]
        if run["command"] == "train-t5":
            settings["fast"] = bool(settings["max_train_examples"])
            settings["max_input"] = 64  # sst2's sequence length, its default (span corruption's is chunk_len)
        run["settings"] = {names.get(k, k): v for k, v in settings.items() if names.get(k, k) is not None}
        path.write_text(json.dumps(run, indent=2) + "\n", encoding="utf-8")
        return run["settings"]

    return rewrite
