"""The fine-tuning recipe a run gets when the command line leaves a setting out.

BERT's paper fine-tunes BERT-base and BERT-large with batch 32, lr 2e-5 to 5e-5, 2 to 4 epochs,
sequence length 128 (384 for SQuAD). Those settings starve a small model: a 2-layer, 128-wide
BERT moves too little at 5e-5 in 3 epochs, and on WNUT-17 it ends at entity F1 0.0 with them.
Small models take larger learning rates and more steps, as Google's table of small BERTs
(Turc et al., 2019) did: lr up to 3e-4, up to 4 epochs, and more for a small dataset.

So the defaults depend on the task and on the model's width, read from --init's config.json
(--init none: the tiny preset): `small` below 256 hidden units (minibert's tiny and mini
presets, Google's BERT-Tiny), `real` from 256 up (all-MiniLM-L6-v2 at 384, BERT-base at 768).
Every number was chosen on dev: the grids and the runs are in docs/finetuning.md. Sequence
lengths cover the data: SST-2's sentences fit in 64 tokens (99.9%), WNUT-17's tweets in 64 word
pieces; SQuAD's windows take 256 tokens with a stride of 128 (the paper's 384 costs a real model
1.5x the time a step and was not measured here).

Anything given on the command line wins; `finetune` prints the recipe it used. One rule on top
of the table: a small data set, whose recipe epochs come to fewer than 100 optimizer steps, has
its epochs raised to about 100 steps when the command line gives neither --epochs nor --steps
(finetune/commands.py's epochs_for_small_data: 160 examples at 3 epochs were 15 steps, and the
tiny model stayed at one class); GLUE-size data is far above it, so its recipe is unchanged.
Those raised epochs are what the tiny model needs, and more than a real one does: all-MiniLM-L6-v2
on 160 made-up messages had its best dev score at step 15 of the 100 (3 of 20 epochs) and spent
2.5 more minutes on the rest. So with the raise comes patience (SMALL_DATA_PATIENCE dev
evaluations, when the run has a dev set and no patience was given): that run stopped at step 30,
the same model kept, in 43 s instead of 168 s (docs/finetuning.md).
"""
from __future__ import annotations

from pathlib import Path

from minibert.checkpoint import CONFIG_NAME, read_config_json
from minibert.model import MODEL_SIZES

SMALL_BELOW = 256  # hidden_size below this: the small-model recipe
SMALL_DATA_PATIENCE = 3  # the patience a small data set's raised epochs come with

# kind or task name -> settings; a task's own entry wins over its kind's
RECIPES = {
    "small": {
        "classification": dict(lr=3e-4, epochs=3.0, max_seq_length=128),
        "regression": dict(lr=3e-4, epochs=3.0, max_seq_length=128),
        "choice": dict(lr=3e-4, epochs=3.0, max_seq_length=128),
        "token": dict(lr=5e-4, epochs=24.0, max_seq_length=64),
        "qa": dict(lr=1e-3, epochs=3.0, max_seq_length=256),
        "sst2": dict(lr=3e-4, epochs=1.0, max_seq_length=64),
        "rte": dict(lr=3e-4, epochs=3.0, max_seq_length=128),
    },
    "real": {
        "classification": dict(lr=5e-5, epochs=3.0, max_seq_length=128),
        "regression": dict(lr=5e-5, epochs=3.0, max_seq_length=128),
        "choice": dict(lr=5e-5, epochs=3.0, max_seq_length=128),
        "token": dict(lr=1e-4, epochs=5.0, max_seq_length=64),
        "qa": dict(lr=1e-4, epochs=2.0, max_seq_length=256),
        # SQuAD 2.0's small subset: a quarter of the windows without the answer, 4 epochs
        # (docs/finetuning.md: 2 epochs of every window answered "no answer" to every question)
        "squad2": dict(lr=1e-4, epochs=4.0, max_seq_length=256, null_windows=0.25),
        "sst2": dict(lr=5e-5, epochs=1.0, max_seq_length=64),
    },
}


def size_class(hidden_size: int) -> str:
    return "small" if hidden_size < SMALL_BELOW else "real"


def init_hidden_size(init: str, like: str | None = None) -> int | None:
    """The hidden size of the model a run starts from, from its config.json alone (no weights
    read); --init none: --like's, else the tiny preset's. None: there is no config.json (the
    model's loader says what is missing)."""
    source = like if init.lower() == "none" else init
    if not source:
        return MODEL_SIZES["tiny"]["hidden_size"]
    if not (Path(source) / CONFIG_NAME).is_file():
        return None
    value = read_config_json(Path(source) / CONFIG_NAME).get("hidden_size")
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{Path(source) / CONFIG_NAME}: hidden_size is {value!r}, expected a positive integer")
    return value


def recipe(task: str, kind: str, hidden_size: int | None) -> tuple[str, dict]:
    """-> (the recipe's name, its settings) for a task of this kind on a model this wide."""
    size = size_class(hidden_size or 0)
    table = RECIPES[size]
    key = task if task in table else ("qa" if task in ("squad1", "squad2") else kind)
    return f"{size} model, {key}", dict(table[key])
