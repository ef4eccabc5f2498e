"""The command line: `python -m minibert train` (`cli`) and `python -m minibert train-tiny`
(`train_tiny_cli`, what `make train-tiny` runs): parse, build the settings, launch the run
(train/pretrain.launch_pretraining: the launcher owns the run's life and the exit code), and
train-tiny's fill-mask examples at the end."""
from __future__ import annotations

import os
import sys

from minibert.io.cli import CommandParser, command_parser, given_settings, resume_changes, run_options
from minibert import compile_ahead
from minibert.loop import rundir
from minibert.loop.launch import failed
from minibert.optim import SCHEDULES
from minibert.train.config import (DEFAULT_DATA_CACHE, FAMILY_PRESETS, FAST_RECIPE, FILL_MASK_EXAMPLES, PRESETS,
                                   TINY_RECIPE, TRAIN_TINY_PRESETS, TrainConfig, make_config, preset_settings)
from minibert.train.data import default_corpus, own_corpus
from minibert.train.pretrain import launch_pretraining
from minibert.train.runs import resume_config
from minibert.train.trainer import Trainer
from minibert.analysis.inspect import fill_mask
from minibert.train import task_corpus
from minibert.train.curves import baselines


def cli(argv: list[str]) -> int:
    """python -m minibert train [--preset tiny|mini] [overrides] | --resume runs/<name>"""
    p = _build_parser()
    args = p.parse_args(argv)
    if args.resume:  # the one rule of --resume: the saved settings; only the budget and a pause may be given
        cfg = resume_config(args.resume, resume_changes(p, args))
    else:
        given = given_settings(args, p)  # the options given, then --set
        base = preset_settings(args.preset or "tiny")
        TrainConfig.build(base, given, validate=False).validate(require_files=False)  # before the corpus is written
        cfg = TrainConfig.build(base, default_corpus(given), validate=False)
    return launch_pretraining(cfg, resume=bool(args.resume), overwrite=args.overwrite,
                              max_steps_this_run=args.max_steps_this_run).code


def _say_fast_mode_learns_nothing(trainer: Trainer, loop) -> None:
    """--fast runs every stage on a slice for a few steps: it checks the plumbing (data,
    training, evaluation, saving), and its numbers say nothing about what the model can learn."""
    line = (f"\n--fast is a plumbing check, not training: {loop.step} steps on a slice of the "
            "corpus check that data, training, evaluation and saving work, and the model learns nothing "
            "in that time.")
    if trainer.heldout is not None:
        b = baselines(trainer.heldout, trainer.tokenizer.ids_to_tokens)
        task = trainer.cfg.pair_task()[0]
        line += (f" For scale, on these held-out sequences always answering {b.mlm_token!r} gives "
                 f"{b.mlm_acc:.1%} MLM accuracy" + ("." if task is None else
                 f" and always answering {b.nsp_label} {b.nsp_acc:.1%} {task} accuracy."))
    print(line + " Run `make train-tiny` without --fast to train (about 10 minutes).")


def _build_parser() -> CommandParser:
    p = command_parser("train", "Pretrain BERT (MLM + NSP) with hand-written backprop.", settings=TrainConfig,
                       helps={"minutes": "wall-clock budget; with --steps 0 the steps are fitted to it, else the "
                                         "run stops when it is spent"},
                       set_help="any TrainConfig field, e.g. --set weight_decay=0 (repeatable)")
    p.add_argument("--preset", default=None, help=f"model/batch preset: {', '.join(PRESETS)} (default tiny)")
    p.setting("--name", help="run name: output goes to runs/<name> (default: the preset)")
    p.setting("--out", help="output directory (default runs/<name>)")
    p.setting("--corpus", nargs="+", to=lambda files: {"corpus": tuple(files)},
              help="training text files (default: the Python-docs corpus)")
    p.setting("--heldout", nargs="+", to=lambda files: {"heldout": tuple(files)},
              help="held-out text files for evaluation")
    p.setting("--vocab", help="vocab.txt (default: the Python-docs corpus's)")
    p.setting("--auto-steps", action="store_const", const=True, to=lambda on: {"steps": 0},
              help="choose --steps from measured speed (the same as --steps 0)")
    p.setting("--batch-size", type=int)
    p.setting("--max-seq-length", type=int)
    p.setting("--dropout", type=float, to=lambda v: {"hidden_dropout_prob": v, "attention_probs_dropout_prob": v},
              help="hidden and attention dropout (hidden_dropout_prob and attention_probs_dropout_prob)")
    p.setting("--masking", choices=("static", "dynamic"))
    p.setting("--dupe-factor", type=int)
    p.setting("--schedule", choices=SCHEDULES)
    p.setting("--bias-correction", action="store_const", const=True)
    p.setting("--control-shuffle-labels", action="store_const", const=True,
              help="control run: shuffle MLM labels within each batch (should stay near chance)")
    run_options(p)
    return p


def train_tiny_cli(argv: list[str]) -> int:
    """Build the corpus if needed, pretrain the tiny preset in ~10 minutes, evaluate, fill masks.

    --fast: the same pipeline and files on a slice of the corpus in about a minute.
    CORPUS=path: your own text (one sentence per line, blank line between documents) instead.
    --preset roberta-tiny | albert-tiny | electra-tiny: the recipe with that family member's changes
    (config.FAMILY_PRESETS), into runs/<preset>.
    """
    p = command_parser("train-tiny", train_tiny_cli.__doc__, settings=TrainConfig,
                       helps={"minutes": "the time budget the steps are fitted to (default 9.5; "
                                         "--corpus-from-task runs 30,000 steps unless given)"},
                       fast="the same pipeline and files on a slice of the corpus, in about a minute: a check of "
                            "the plumbing (config.FAST_RECIPE)")
    p.add_argument("--preset", default="tiny", choices=TRAIN_TINY_PRESETS,
                   help="tiny (BERT, the default), or the recipe with RoBERTa's, ALBERT's or ELECTRA's changes "
                        "(xlnet-tiny and t5-tiny are other models: they run `train-xlnet` / `train-t5`)")
    p.add_argument("--corpus-from-task", metavar="TASK",
                   help="pretrain on a fine-tuning task's own training text, labels dropped (in-domain "
                        "pretraining): sst2, rte, wnut17, swag, squad1, squad2; with --data for its files")
    p.add_argument("--data", help="with --corpus-from-task: the task's data directory (default: its own, if any)")
    run_options(p, pause=False, overwrite="replace the run in the output directory, finished or not (a finished "
                                          "train-tiny run is replaced without it)")
    args = p.parse_args(argv)
    fast = args.fast
    try:
        with compile_ahead.in_background() as ahead:  # a cold Numba cache compiles while the corpus builds
            preset = args.preset
            # the one way settings are built: the preset <- the recipe <- the options given <- --set
            overrides = {**TINY_RECIPE, **FAMILY_PRESETS.get(preset, {}), **(FAST_RECIPE if fast else {}), "name": preset}
            if args.data and not args.corpus_from_task:
                raise ValueError("--data goes with --corpus-from-task (the task whose text to pretrain on)")
            if args.corpus_from_task:  # in-domain pretraining (train/task_corpus.py)
                if os.environ.get("CORPUS"):
                    raise ValueError("give CORPUS= or --corpus-from-task, not both")
                name = f"{args.corpus_from_task}-indomain" + ("" if preset == "tiny" else f"-{preset}")  # one run a preset
                overrides.update({**task_corpus.SETTINGS, "name": name})
                if not fast and args.minutes is None:
                    overrides.update(task_corpus.LENGTH)  # --set still wins
            overrides.update(given_settings(args, p))  # the shared options, then --set
            if args.corpus_from_task and not args.resume:
                make_config(preset, **overrides).validate(require_files=False)  # before the corpus is written
                path = task_corpus.write_task_corpus(args.corpus_from_task, args.data,
                                                     overrides.get("data_cache") or DEFAULT_DATA_CACHE)
                print(f"--corpus-from-task {args.corpus_from_task}: its training text, labels dropped -> {path}")
                overrides = own_corpus(str(path), overrides) | overrides
            if args.resume:  # the one rule of --resume: the saved settings; only the budget may be given
                cfg = resume_config(args.resume, resume_changes(p, args))
            else:
                make_config(preset, **overrides).validate(require_files=False)  # before CORPUS= writes files
                cfg = make_config(preset, **default_corpus(overrides))
            print(f"train-tiny{' (--fast: small slice)' if fast else ''}: budget {cfg.minutes:g} min "
                  f"on {os.cpu_count()} cores -> {cfg.run_dir}")
            ahead.wait()
    except BaseException as e:
        return failed(e).code
    outcome = launch_pretraining(cfg, resume=bool(args.resume), overwrite=args.overwrite, created_by="train-tiny")
    if outcome.code:
        return outcome.code
    trainer = outcome.run
    if fast:
        _say_fast_mode_learns_nothing(trainer, outcome.loop)

    electra = trainer.cfg.model_type == "electra"
    model = trainer.model.fill_mask_model() if electra else trainer.model  # ELECTRA's masked LM is its generator
    print(f"\nfill-mask examples{' (the generator)' if electra else ''}:")
    for text in FILL_MASK_EXAMPLES:
        print(f"  {text}")
        for preds in fill_mask(model, trainer.tokenizer, text, k=5):
            print("    " + ", ".join(f"{tok} {prob:.2f}" for tok, prob in preds))
    if electra:
        print(f"\nthe discriminator (transformers' ElectraForPreTraining) is {cfg.run_dir}, the generator "
              f"(ElectraForMaskedLM) {cfg.run_dir / rundir.PUBLISHED_DIRS[0]}")
    else:
        print(f"\ntry: python -m minibert fill-mask {cfg.run_dir} \"a [MASK] is an immutable sequence of characters\"")
    return 0
