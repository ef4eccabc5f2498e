"""A task's own text as a pretraining corpus: in-domain pretraining, labels dropped.

    python -m minibert train-tiny --corpus-from-task sst2 --data DIR     # -> runs/sst2-indomain
    python -m minibert finetune sst2 --data DIR --init runs/sst2-indomain --out runs/sst2-from-indomain

What ULMFiT and the domain-adaptation follow-ups to BERT do: before fine-tuning, pretrain on text
of the task's own kind. Here it is the task's training file with its labels dropped (never the dev
file: that would be pretraining on the questions of the exam). The text is written in BERT's
corpus format, one sentence per line and a blank line between documents:

    sst2 / glue-single   each sentence is a document of its two halves (split at its middle word)
    rte / glue-pair      each pair is a two-sentence document (premise, hypothesis)
    wnut17 / conll       each tagged sentence's words, cut in two halves likewise
    swag                 the context and its four endings make a document
    squad1 / squad2      each paragraph's context is a document, split into sentences, its
                         questions after it

The run pretrains as BERT does, masked LM and next-sentence prediction on segment pairs
(`objective=mlm_nsp`, `packing=segment_pair`; --set changes them). The sentence-level loss is
what makes in-domain pretraining pay on a sentence task (docs/finetuning.md): the classifier
reads `[CLS]`, and masked LM alone never trains `[CLS]`'s output. SST-2's consecutive lines are
unrelated phrases, so there is no "next sentence" between them; within one sentence there is:
NSP then asks whether the second half continues the first, or is another sentence's half, and
`[CLS]` learns to read the whole sentence (on SST-2 at 1,000 labels: 64.6 against 60.4 for MLM
alone, 3,000 steps; 30,000 steps: ahead of the matched random-init control at 100 and 300 labels,
level at 1,000). The vocabulary is learnt from the same text (train-tiny's CORPUS= path: every 20th
document is held out).
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

from minibert.io import outputs
from minibert.io.jsonfile import read_json
from minibert.taskdata.squad_files import DEFAULT_DIR, FILES, iter_qas, require
from minibert.taskdata.tasks import find_file, get_task, read_examples
from minibert.train.config import check_data_cache

TASKS = ("sst2", "rte", "wnut17", "swag", "squad1", "squad2")
SETTINGS = {"objective": "mlm_nsp", "packing": "segment_pair"}  # what the run pretrains with (see above)
# The run's length: 30,000 steps (about half an hour on 2 cores; train-tiny's own run is fitted
# to 9.5 minutes), the same number on every machine so that every learner's model is the one the
# docs measured. On SST-2 the longer run is what pays: MLM + NSP on halves for 3,000 steps ends
# 2.5 points under the random-init control at 1,000 labels, 10,000 steps level with it, 30,000
# steps ahead of it (docs/finetuning.md, "Why in-domain pretraining lost to random init").
# --minutes fits the steps to that budget instead; --set steps=N runs N.
LENGTH = {"steps": 30_000, "minutes": 0.0}
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def documents(task: str, data: str | None) -> list[list[str]]:
    """The task's training text as documents of sentences (labels dropped)."""
    if task not in TASKS:
        raise ValueError(f"--corpus-from-task {task!r}: choose one of {', '.join(TASKS)}")
    if task.startswith("squad"):
        return _squad_documents(task, data)
    spec = get_task(task)
    directory = Path(data) if data else spec.default_dir
    if directory is None:
        raise ValueError(f"--corpus-from-task {task}: give --data DIR holding its {spec.train_files[0]}")
    train = find_file(directory, spec.train_files, "train", spec)  # the training file only: never dev
    examples = read_examples(spec, train, "train")
    if spec.format == "glue-pair":
        return [[e.text_a, e.text_b] for e in examples]
    if spec.format == "swag":
        return [[e.context, *e.endings] for e in examples]
    lines = [" ".join(e.words) if spec.format == "conll" else e.text_a for e in examples]
    return [halves(line) for line in lines if line.split()]


def halves(sentence: str) -> list[str]:
    """'a gorgeous , witty film' -> ['a gorgeous', ', witty film']: a one-sentence example as a
    document of two "sentences", its words cut at the middle (a one-word sentence stays whole)."""
    words = sentence.split()
    if len(words) < 2:
        return [" ".join(words)]
    return [" ".join(words[:len(words) // 2]), " ".join(words[len(words) // 2:])]


def _squad_documents(task: str, data: str | None) -> list[list[str]]:
    if not data and task not in DEFAULT_DIR:
        raise ValueError(f"{task} needs --data DIR holding {FILES[task][0]}")
    path = Path(data or DEFAULT_DIR[task]) / FILES[task][0]
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    docs: dict[int, list[str]] = {}
    for where, paragraph, qa in iter_qas(read_json(path, "SQuAD file"), path):
        if id(paragraph) not in docs:
            context = require(paragraph, "context", str, where.rsplit(".qas[", 1)[0], path)
            docs[id(paragraph)] = [s for s in SENTENCE_END.split(" ".join(context.split())) if s]
        question = require(qa, "question", str, where, path)
        if question.strip():
            docs[id(paragraph)].append(" ".join(question.split()))
    return list(docs.values())


def write_task_corpus(task: str, data: str | None, cache: str | Path) -> Path:
    """Write the task's corpus file under `cache` (its name holds a hash of the text) -> the path."""
    docs = [[" ".join(s.split()) for s in d if s.strip()] for d in documents(task, data)]
    text = "\n\n".join("\n".join(d) for d in docs if d) + "\n"
    if len(docs) < 2:
        raise ValueError(f"{task}: its training file holds {len(docs)} document(s) of text; too little to pretrain on")
    cache = check_data_cache(cache)  # an output folder: not another run, not a link
    path = cache / f"task-{task}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.txt"
    if not path.is_file():
        outputs.write_output(path, text, root=cache)
    return path
