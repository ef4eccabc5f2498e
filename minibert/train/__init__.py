"""Pretraining end to end: data -> loop -> evaluation -> checkpoints -> curves.

    python -m minibert train --preset tiny --name tiny --minutes 10
    python -m minibert train --resume runs/tiny
    python -m minibert train-tiny            # what `make train-tiny` runs

One training loop (train/engine.py's TrainingLoop) runs pretraining (the Trainer of loop.py)
and fine-tuning (minibert/finetune/train.py's FinetuneRun). One training step (`train_step`):
    batch = next(iterator)                                  # (B, T) features, masks static or redrawn
    loss, grads, metrics = model.loss_grads_metrics(batch)  # hand-written forward + backward
    grads, norm = clip_by_global_norm(grads, 1.0)           # docs/bert-notes.md §6.2
    lr = lr_at(step, peak, warmup, total, schedule)         # docs/bert-notes.md §6.1
    optimizer.step(params, grads, lr)                       # BERT's AdamW, docs/bert-notes.md §6.3

What lives where (each module imports only from the ones above it):
    config.py      TrainConfig (every setting, checked before anything is written), PRESETS
                   (FAMILY_PRESETS: roberta-tiny, albert-tiny, electra-tiny), make_config, parse_set
                   (--set key=value), TINY_RECIPE / FAST_RECIPE
    data.py        corpus -> cached shard directories (prepare_data, DataDirs), load_heldout,
                   the default corpus or CORPUS=file.txt (_default_corpus, _own_corpus)
    evaluation.py  evaluate -> EvalResult: held-out MLM accuracy/loss/perplexity, NSP accuracy
    step.py        training_step (the one step above) -> StepResult, on one batch or on
                   accumulation_steps micro-batches (accumulate_gradients, loss_counts);
                   shuffle_mlm_labels (control run); TrainingDiverged, TrainingAborted
    engine.py      TrainingLoop, THE loop: steps, schedule, budget, pause, progress line and
                   metrics.jsonl, periodic evaluation, atomic checkpoints and bit-exact resume,
                   Ctrl-C, NaN stop, curves; its users fill in a batch source, an evaluator and
                   hooks (listed in its docstring)
    curves.py      plot_curves (curves.png), read_metrics (metrics.jsonl)
    calibrate.py   step-time calibration: the schedule length that fits a time budget, refitted
                   twice from the loop's own speed (called through Trainer.calibrate_steps and
                   Trainer._recalibrate)
    runs.py        the run directory's file names (RUN_FILE, ...), run_state, check_run_dir,
                   resume_config
    loop.py        Trainer, pretraining's user of the loop (the data iterators and their
                   sequence-length phases, MLM/NSP evaluation, calibration), and train(); the
                   output directory and the resume guarantee are described there
    electra.py     ELECTRA on the same Trainer: ElectraPretraining (generator + discriminator as one
                   model), ElectraEvaluator, ElectraTrainer (registered in TRAINERS)
    commands.py    `python -m minibert train` (cli) and `train-tiny` (train_tiny_cli), report,
                   exit codes
How the train-tiny recipe was chosen: docs/recipe.md.

A new objective plugs in where ELECTRA did: a model with loss_grads_metrics(batch, train, rng,
objective=...) and save_pretrained / from_pretrained; an evaluator object (evaluate(model) -> a
NamedTuple with `examples`, describe(result), summary(result), result_type; loop.HeldoutEvaluator
is BERT's); a Trainer subclass that overrides build_model, build_evaluator, window_record /
progress_fields (its progress line) and write_curves; a model_type in config.MODEL_TYPES and a
preset; TRAINERS[model_type] = the subclass. A task that does not read the pretraining data
subclasses TrainingLoop directly, as FinetuneRun does.

Every name is re-exported here, so `from minibert import train as T; T.train(...)` works. To
monkeypatch a module-level name (DEFAULT_DATA_CACHE, ...), patch it in the module that reads it
(`minibert.train.data`): rebinding the name here does not reach that module.
"""
from __future__ import annotations

from minibert.train.config import (DEFAULT_DATA_CACHE, FAMILY_PRESETS, FAST_RECIPE, FILL_MASK_EXAMPLES, PRESETS, ROOT,
                                   TINY_RECIPE, TRAIN_TINY_PRESETS, TrainConfig, _convert, make_config, parse_set)
from minibert.train.data import (DataDirs, _default_corpus, _own_corpus, _sha256_file, _slice_corpus, load_heldout,
                                 prepare_data)
from minibert.train.evaluation import EvalResult, _fmt_perplexity, evaluate
from minibert.train.step import (StepResult, TrainingAborted, TrainingDiverged, accumulate_gradients, loss_counts,
                                 shuffle_mlm_labels, training_step)
from minibert.train.curves import plot_curves, read_metrics
from minibert.train.runs import (CURVES_FILE, FINISHED, METRICS_FILE, OPTIM_FILE, RUN_FILE, STATE_FILE,
                                 check_run_dir, resume_config, run_state)
from minibert.train.engine import TrainingLoop
from minibert.train.loop import TRAINERS, HeldoutEvaluator, Trainer, _fmt_seconds, _rng_state, _set_rng_state, train
from minibert.train.electra import ElectraEvaluator, ElectraPretraining, ElectraTrainer, evaluate_electra
from minibert.train.commands import _build_parser, _exit_code, _overrides, cli, report, train_tiny_cli

__all__ = [
    "CURVES_FILE", "DEFAULT_DATA_CACHE", "DataDirs", "EvalResult", "FAMILY_PRESETS", "FAST_RECIPE",
    "FILL_MASK_EXAMPLES", "FINISHED", "METRICS_FILE", "OPTIM_FILE", "PRESETS", "ROOT", "RUN_FILE",
    "STATE_FILE", "StepResult", "TINY_RECIPE", "TRAIN_TINY_PRESETS", "TRAINERS", "TrainConfig", "Trainer",
    "TrainingLoop", "HeldoutEvaluator", "ElectraEvaluator", "ElectraPretraining", "ElectraTrainer",
    "evaluate_electra",
    "TrainingAborted", "TrainingDiverged", "accumulate_gradients", "check_run_dir", "cli", "evaluate",
    "load_heldout", "loss_counts", "make_config", "parse_set", "plot_curves", "prepare_data", "read_metrics",
    "report", "resume_config", "run_state", "shuffle_mlm_labels", "train", "train_tiny_cli", "training_step",
]
