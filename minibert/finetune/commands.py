"""`python -m minibert finetune` and `python -m minibert predict`.

    python -m minibert finetune sst2 --data path/to/sst2 --init runs/tiny --out runs/sst2
    python -m minibert finetune wnut17 --init runs/tiny --out runs/wnut17     # data ships in data/wnut17
    python -m minibert finetune nextsent --init runs/tiny --out runs/nextsent # built from the default corpus
    python -m minibert finetune sst2 --data path/to/sst2 --init none --out runs/sst2-scratch  # the control
    python -m minibert finetune --resume runs/sst2                            # after Ctrl-C or --minutes
    python -m minibert predict runs/sst2 "a gorgeous , witty film"

Everything is checked (the task, the data files, the model directory and its vocabulary, the
output directory) before the first file is written, so a mistake costs nothing.
"""
from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import numpy as np

from minibert.io.cli import CommandParser, command_parser, given_settings, resume_changes, run_options
from minibert.finetune.frozen import TAGGERS, FrozenFeatureTagger
from minibert.finetune.recipes import SMALL_DATA_PATIENCE, init_hidden_size, recipe
from minibert.finetune.run import (COMMAND, FEW_STEPS, ClassifierSource, FinetuneConfig, FinetuneRun, control_model,
                                   load_model)
from minibert.checkpoint import read_casing
from minibert.io.hub import resolve_model_dir
from minibert.io import outputs
from minibert.loop import rundir
from minibert.loop.launch import Job, Outcome, launch
from minibert.finetune.evaluate import columns_named, decide, load_finetuned, positive_label, predict_file, predict_lines
from minibert.io.escape import one_line
from minibert.finetune.model_card import write_model_card
from minibert.finetune.features import token_features, word_predictions
from minibert.finetune.squad_run import build_squad_run, predict_answer, saved_setting, threshold_refused
from minibert.finetune.task_data import custom_task, get_task, load_task, with_main_metric
from minibert.taskdata.readers import TaggedExample, add_column_options, columns_given
from minibert.text.tokenizer import BertTokenizer

TASK_NAMES = ("sst2", "rte", "wnut17", "swag", "nextsent", "punct", "squad1", "squad2")


def _parser() -> CommandParser:
    p = command_parser("finetune", "Fine-tune a pretrained (or, with --init none, a fresh) BERT on a task.",
                       settings=FinetuneConfig,
                       helps={"lr": "peak learning rate (default: the recipe's)", "seed": "default 0",
                              "minutes": "wall-clock budget; the run evaluates and saves when it ends",
                              "steps": "the run's length in optimizer steps (default 0: --epochs passes over the "
                                       "training data)"},
                       set_help="any setting by its name (FinetuneConfig), e.g. --set weight_decay=0 (repeatable)")
    p.setting("task", nargs="?", help=f"one of {', '.join(TASK_NAMES)}, or `custom` (your own files: TSV, CSV, "
                                      f"JSON Lines or CoNLL)")
    p.setting("--data", help="directory with the train and dev files (default: the task's own, if any); for your own "
                             "files train.* and dev.* or validation.* (.tsv, .csv, .jsonl, .conll)")
    p.setting("--train", key="train_file", metavar="FILE", help="the training file (instead of --data)")
    p.setting("--dev", key="dev_file", metavar="FILE", help="the dev file (instead of --data)")
    p.setting("--dev-split", type=float, metavar="FRACTION",
              help="no dev file: keep this share of the training file's examples for dev (e.g. 0.2), stratified by "
                   "label and drawn with --seed (the same seed, the same split); run.json and the model card "
                   "record it")
    p.setting("--init", help="the pretrained model: a directory in transformers' layout (runs/tiny, any BERT, "
                             "a sentence-transformers folder), a Hugging Face hub id (owner/name: read from the "
                             "hub cache, or downloaded with huggingface_hub installed), or `none` for random init")
    p.setting("--out", help="output directory (default runs/<task>)")
    p.setting("--format", choices=("glue-single", "glue-pair", "conll", "swag"),
              help="your own files (task `custom`): the format, when it cannot be found from the files' "
                   "suffix and columns")
    add_column_options(p.setting)  # --text-column, --text-pair-column, --label-column (your own tables)
    p.setting("--vocab", help="--init none: the vocabulary (default: the default corpus's vocab.txt)")
    p.setting("--like", metavar="MODEL",
              help="--init none: the random-init control of MODEL (its architecture, vocabulary and casing, "
                   "fresh weights); default: the tiny preset with --vocab")
    for name, typ, help_ in (("epochs", float, "passes over the training data (default: the recipe for the task and model size)"),
                             ("batch-size", int, "default 32"), ("max-seq-length", int, "default: the recipe's (128 for your own files)"),
                             ("eval-per-epoch", int, "dev evaluations per epoch (default 1)"),
                             ("max-train-examples", int, "use the first N training features only"),
                             ("doc-stride", int, "SQuAD window stride (default 128)"),
                             ("null-windows", float, "SQuAD 2.0: the share of training windows without the answer "
                                                     "that are kept (default: the recipe's)")):
        p.setting(f"--{name}", type=typ, help=help_)
    p.setting("--dropout", type=float, to=lambda v: {"hidden_dropout_prob": v, "attention_probs_dropout_prob": v},
              help="hidden and attention dropout (hidden_dropout_prob and attention_probs_dropout_prob; default 0.1)")
    p.setting("--warmup-proportion", type=float, help="warmup as a fraction of the steps (default 0.1)")
    p.setting("--frozen", choices=("last", "second_to_last", "embeddings", "sum4", "concat4", "concat_all"),
              help="feature-based: freeze the encoder, train a linear tagger on these hidden states")
    p.setting("--frozen-tagger", choices=TAGGERS,
              help="what --frozen trains on the features: a linear layer (default) or, as the paper, a BiLSTM "
                   "then a linear layer")
    p.setting("--causal", action="store_const", const=True,
              help="left-to-right attention, as a model pretrained with objective 'ltr' (the paper's LTR & No "
                   "NSP); the sequence and choice heads read the last real token instead of [CLS]")
    p.setting("--bilstm", action="store_const", const=True,
              help="with --causal: a new BiLSTM on top of the left-to-right encoder, trained with it (the "
                   "paper's Table 5 row 'LTR & No NSP + BiLSTM')")
    p.setting("--strict-length", action="store_const", const=True,
              help="an example longer than --max-seq-length is an error naming its file:line (default: cut it "
                   "as BERT's run_classifier does, and say how many were cut)")
    p.setting("--no-verify", dest="verify", action="store_const", const=False,
              help="load --init weights that are not finite or do not match their recorded sha256")
    run_options(p, pause=False)
    p.add_argument("--quiet", action="store_true")
    return p


def pretrained_objective(init: str) -> str | None:
    """The objective a minibert pretraining run recorded in its run.json (None if there is none)."""
    try:
        info = rundir.read_run(init)
    except ValueError:  # unreadable: no objective known
        return None
    objective = info.settings.get("objective") if info is not None else None
    return objective if isinstance(objective, str) else None


def resolve_init(init: str, like: str | None, verbose: bool) -> tuple[str, str | None]:
    """--init (and --like) as folders: a sentence-transformers folder's Transformer module, a hub
    id's cached (or, with huggingface_hub, downloaded) snapshot (io/hub.py). run.json records the
    folder. -> (init, like)."""
    if init.lower() == "none":
        return init, (str(resolve_model_dir(like)) if like and like.lower() != "none" else like)
    folder = str(resolve_model_dir(init))
    if folder != init and verbose:
        print(f"note: --init {init} is the model in {folder}")
    return folder, like


def the_task(cfg: FinetuneConfig):
    """The Task of the settings: a built-in one, or your own files' (their format given, or found)."""
    if cfg.task == "custom":
        return custom_task(cfg.format, cfg.data, cfg.train_file, cfg.dev_file, columns=columns_given(cfg),
                           split_dev=bool(cfg.dev_split))
    if columns_given(cfg) is not None:
        raise ValueError(f"--text-column, --text-pair-column and --label-column are for your own files (the task "
                         f"`custom`); {cfg.task} has its own columns")
    return get_task(cfg.task)


def task_kind(cfg: FinetuneConfig) -> str:
    if cfg.task in ("squad1", "squad2"):
        return "qa"
    return the_task(cfg).kind


def epochs_for_small_data(cfg: FinetuneConfig, train_features: int) -> float | None:
    """The recipe's epochs raised so a small data set gets about FEW_STEPS optimizer steps (160
    examples at 3 epochs are 15 steps, too few for the tiny model to leave one class); None when
    the recipe's epochs give enough steps already (GLUE-size data: its recipe is unchanged)."""
    n = min(cfg.max_train_examples, train_features) if cfg.max_train_examples else train_features
    per_epoch = max(1, math.ceil(n / cfg.batch_size))
    if int(round(cfg.epochs * per_epoch)) >= FEW_STEPS:
        return None
    return float(math.ceil(FEW_STEPS / per_epoch))


def build_run(cfg: FinetuneConfig, verbose: bool = True, resumed: bool = False, recipe: tuple | None = None,
              closing=None, dir: Path | None = None) -> FinetuneRun:
    """Model, tokenizer, task data and the run object; writes nothing. `cfg` is validated (by the
    command that made it). `resumed`: the notes loading the model gives were shown when the run
    started. `recipe`: (its name, the settings it chose) of a fresh run whose command line left
    them out; the recipe's epochs are raised for a small data set (epochs_for_small_data), in
    the run's own settings. `closing`: what a finished run does last (FinetuneRun); `dir`: where
    it writes (default cfg.out)."""
    kind = task_kind(cfg)
    if kind == "qa":
        return build_squad_run(cfg, verbose, resumed, recipe=recipe and recipe_record(cfg, *recipe), closing=closing,
                               dir=dir)

    task = the_task(cfg)
    # the tokenizer decides the features, and the labels decide the head: read the vocabulary first
    if cfg.init.lower() == "none":
        vocab, do_lower, _ = control_model(cfg)
    else:
        vocab, do_lower = Path(cfg.init) / "vocab.txt", read_casing(Path(cfg.init))
        if not vocab.is_file():
            load_model(cfg, kind, None, None)  # raises the error that names what is missing
    tokenizer = BertTokenizer(vocab, do_lower_case=do_lower)
    if verbose:
        print(f"reading {task.name} ({task.kind}, {task.format}) ...", flush=True)
    data = load_task(task, tokenizer, cfg.max_seq_length, data_dir=cfg.data, train_path=cfg.train_file,
                     dev_path=cfg.dev_file, seed=cfg.seed, strict_length=cfg.strict_length, dev_split=cfg.dev_split)
    data.task = task = with_main_metric(task, cfg.main_metric, data.labels)  # refused here: nothing written yet
    raised_from = None
    if recipe is not None and "epochs" in recipe[1] and not cfg.steps:
        epochs = epochs_for_small_data(cfg, data.info["train_features"])
        if epochs is not None:
            raised_from, cfg = cfg.epochs, dataclasses.replace(cfg, epochs=epochs)  # the run's settings, not the caller's
            if not cfg.patience and data.info["dev_features"]:  # and stops once dev stops getting better
                cfg = dataclasses.replace(cfg, patience=SMALL_DATA_PATIENCE)
                recipe = (recipe[0], {**recipe[1], "patience": SMALL_DATA_PATIENCE})
    id2label = dict(enumerate(data.labels)) if data.labels else None
    model, tokenizer = load_model(cfg, kind, len(data.labels) if data.labels else None, id2label, notes=not resumed)
    if not cfg.causal and pretrained_objective(cfg.init) == "ltr" and verbose:
        print(f"note: {cfg.init} was pretrained left to right (objective 'ltr'); the paper fine-tuned such a model "
              f"left to right too: add --causal")
    if cfg.frozen:
        if kind != "token":
            raise ValueError(f"--frozen (the feature-based approach) is for token tagging; {task.name} is {kind}")
        model = FrozenFeatureTagger(model, cfg.frozen, len(data.labels), cfg.seed, id2label, cfg.frozen_tagger)
    info = {"name": task.name, "kind": task.kind, "format": task.format, "labels": data.labels,
            "main_metric": task.main_metric, "max_seq_length": cfg.max_seq_length, **data.info,
            **({"columns": task.columns.as_json()} if task.columns else {})}  # evaluate and predict read them
    if verbose:
        split = data.info.get("dev_split")
        print(f"{data.info['train_examples']:,} train / {data.info['dev_examples']:,} dev examples "
              f"({data.info['train_features']:,} / {data.info['dev_features']:,} features)"
              + (f"; dev is {split['fraction']:.0%} of {data.info['train_file']}, split off by --dev-split "
                 f"({'stratified by label, ' if split['stratified'] else ''}seed {split['seed']})" if split else ""))
        for split in ("train", "dev"):
            if data.info.get(f"{split}_truncated"):
                print(f"note: {data.info[f'{split}_truncated']:,} {split} example(s) longer than "
                      f"{cfg.max_seq_length} tokens were cut as BERT's run_classifier cuts them, the first at "
                      f"{data.info[f'{split}_first_truncated']} (--strict-length makes this an error)")
    return FinetuneRun(cfg, model, ClassifierSource(data), tokenizer, info, verbose,
                       recipe=recipe and recipe_record(cfg, *recipe, raised_from), closing=closing, dir=dir)


def recipe_record(cfg: FinetuneConfig, name: str, chosen: dict, raised_from: float | None = None) -> dict:
    """run.json's record of what the recipe chose (the settings the command line left out), with
    the run's values (the epochs a small data set raised, and from what)."""
    return {"name": name, "settings": {k: getattr(cfg, k) for k in chosen},
            **({"epochs_raised_from": raised_from} if raised_from else {})}


def finetune_settings(args, p: CommandParser) -> tuple[FinetuneConfig, tuple | None]:
    """The one way the command makes a run's settings, validated once: --resume's (run.json's,
    only the budget changed), or the defaults <- the recipe for the task and model <- the options
    given <- --set (the recipe needs the model: --init is read, and resolved to its folder, first).
    -> (the settings, (the recipe's name, the settings it chose) or None)."""
    if args.resume:
        # the one rule of --resume: the saved settings; only the budget, a pause, what is printed (--quiet) and
        # --no-verify (whether the checkpoint's weights are checked) may be given
        changes = resume_changes(p, args, keep=("quiet", "verify"))
        info = rundir.read_run(args.resume)
        if info is None or info.command != COMMAND:
            raise ValueError(f"{args.resume} has no {rundir.RUN_FILE} written by finetune: not a fine-tuning run")
        # the run continues where it is, whatever run.json says it was
        changes.update({"out": str(Path(args.resume)), "verify": args.verify is not False})
        cfg = FinetuneConfig.from_run(info, str(Path(args.resume) / rundir.RUN_FILE), **changes)
        cfg.validate()
        return cfg, None
    given = given_settings(args, p)  # the options given (--dropout, --lr, ...), then --set
    if not args.task or not args.init:
        raise ValueError("finetune needs TASK and --init (a model directory or `none`); see --help")
    if args.task not in (*TASK_NAMES, "custom"):
        raise ValueError(f"unknown task {args.task!r}; choose one of {', '.join(TASK_NAMES)}, or `custom` for your "
                         f"own files")
    if args.format is not None and args.task != "custom":
        raise ValueError(f"--format is for your own files (the task `custom`); {args.task} has its own format")
    if args.dev is not None and args.train is None:
        raise ValueError("--dev goes with --train: name both files (or give --data DIR)")
    if args.train is not None and args.dev is None and not given.get("dev_split"):
        raise ValueError("--train needs --dev FILE, or --dev-split FRACTION to keep a share of it for dev (or give "
                         "--data DIR)")
    base = {"out": f"runs/{args.task}"}
    draft = FinetuneConfig.build(base, given, validate=False)
    init, like = resolve_init(draft.init, draft.like, verbose=not args.quiet)
    name, chosen = recipe(draft.task, task_kind(draft), init_hidden_size(init, like))
    cfg = FinetuneConfig.build({**base, **chosen}, {**given, "init": init, "like": like})  # validated
    defaulted = {k: v for k, v in chosen.items() if k not in given}
    return cfg, ((name, defaulted) if defaulted else None)


def cli(argv: list[str]) -> int:
    p = _parser()
    args = p.parse_args(argv)
    cfg, chosen = finetune_settings(args, p)
    return finetune(cfg, resume=bool(args.resume), overwrite=args.overwrite, verbose=not args.quiet,
                    recipe=chosen).code


def finetune(cfg: FinetuneConfig, resume: bool = False, overwrite: bool = False, verbose: bool = True,
             recipe: tuple | None = None, card: bool = True) -> Outcome:
    """Fine-tune (or continue) the run `cfg` describes (validated settings) through the launcher
    -> its Outcome (exit code, FinetuneRun, loop state). `card`: a finished run writes its model
    card (README.md)."""
    out = Path(cfg.out)
    if not resume and cfg.init != "none" and Path(cfg.init).is_dir():  # --overwrite would delete the model
        outputs.check_output(cfg.out, inputs=[cfg.init], kind="run")
    inputs = (("--init", cfg.init), ("--like", cfg.like), ("--vocab", cfg.vocab), ("--data", cfg.data),
              ("--train", cfg.train_file), ("--dev", cfg.dev_file))
    job = Job(out, COMMAND, resume=resume, overwrite=overwrite, verbose=verbose,
              resume_command=f"python -m minibert finetune --resume {out}", inputs=inputs)
    return launch(job, lambda where: build_run(cfg, verbose, resume, recipe, closing=model_card_lines if card else None,
                                               dir=where))


def model_card_lines(run: FinetuneRun) -> list[str]:
    """A finished run's model card (README.md) -> the line that names it."""
    return [f"model card: {write_model_card(run.dir)}"]


# ---------------------------------------------------------------------------------------------
# predict

def predict_cli(argv: list[str]) -> int:
    p = command_parser("predict", "Run a fine-tuned model on your own text.")
    p.add_argument("model_dir")
    p.add_argument("texts", nargs="*", help="a one-text classifier: one or more texts, each predicted on its own; a "
                                            "pair classifier: the two texts; multiple choice: the context, then the "
                                            "choices; a tagger: the words")
    p.add_argument("--question")
    p.add_argument("--context")
    p.add_argument("--threshold", type=float, help="SQuAD 2.0: answer when the null score minus the best span's is "
                   "at most this (default: the run's best_f1 threshold, found on dev); 0 answers whenever a span "
                   "scores above [CLS]. A two-label classifier: predict the positive label (--positive) when its "
                   "probability is at least this (0 to 1)")
    p.add_argument("--positive", metavar="LABEL", help="with --threshold on a two-label classifier: the label the "
                   "threshold is on (default: the model's second label, id 1)")
    p.add_argument("--file", help="predict every example of this file: a plain text file (one text a line, a tab "
                                  "between a pair's two texts) or the task's format (labels not needed)")
    p.add_argument("--out", help="with --file: where the predictions go (the file again with its labels; a plain "
                                 "text file gets label, probability and text a line; a directory for SQuAD). "
                                 "Without --out a classifier's predictions go to stdout, a line each")
    p.add_argument("--all-classes", action="store_true",
                   help="with --file and no --out: every label's probability, not only the predicted one's")
    p.add_argument("--format", choices=("glue-single", "glue-pair", "conll", "swag"),
                   help="with --file: the file's format, for a model without a fine-tuning run.json")
    add_column_options(p.add_argument)  # --text-column ...: a table's columns (default: the run's, or by name)
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="load weights that are not finite or do not match their recorded sha256")
    args = p.parse_args(argv)

    if args.out is not None and args.file is None:
        raise ValueError("--out goes with --file: the file to predict, and where its predictions go")
    if args.all_classes and args.file is None:
        raise ValueError("--all-classes goes with --file (text on the command line always shows every class)")
    if columns_given(args) is not None and args.file is None:
        raise ValueError("--text-column, --text-pair-column and --label-column name the columns of --file")
    if args.file and (args.texts or args.question or args.context):
        raise ValueError("predict takes --file or text on the command line, not both")
    if args.threshold is not None and not math.isfinite(args.threshold):
        raise ValueError(f"--threshold {args.threshold} must be a finite number")
    ft = columns_named(load_finetuned(args.model_dir, args.verify), columns_given(args))
    model, tokenizer, saved = ft.model, ft.tokenizer, ft.saved
    if args.positive is not None and model.head_shape == "qa":
        raise ValueError("--positive names a two-label classifier's positive label; a question answering model has "
                         "none (its --threshold is on the null score)")
    if (args.threshold is not None or args.positive is not None) and model.head_shape != "qa":
        if model.head_shape != "sequence":  # the same words with text or --file
            raise threshold_refused(f"{args.model_dir} is a {model.head_shape} model")
        positive_label([model.config.id2label[i] for i in range(model.config.num_labels)], args.threshold,
                       args.positive, args.model_dir)
    if args.file and args.out is None:  # a line each on stdout: label, probability, text
        predict_lines(ft, args.file, sys.stdout.write, args.all_classes, args.format, args.threshold, args.positive)
        return 0
    if args.file:
        n = predict_file(ft, args.file, args.out, args.format, args.threshold, args.positive)
        print(f"wrote {n:,} predictions to {args.out}")
        return 0

    positions = model.config.max_position_embeddings
    T = min(saved_setting(saved, "task", "max_seq_length", 128, str(Path(args.model_dir) / "run.json")), positions)
    if model.head_shape == "qa":
        return predict_answer(model, tokenizer, args.question, args.context, saved, args.threshold)
    if not args.texts or not all(t.strip() for t in args.texts):
        raise ValueError("predict needs the text to classify (every text given must hold a word)")
    if model.head_shape == "sequence":
        saved_task = saved.get("task") if isinstance(saved.get("task"), dict) else {}
        fmt = saved_task.get("format") if isinstance(saved_task.get("format"), str) else None
        if fmt == "glue-single":  # one text a prediction: each text given is predicted on its own
            rows = [(text, None) for text in args.texts]
        elif fmt == "glue-pair" and len(args.texts) != 2:
            raise ValueError(f"{args.model_dir} classifies a pair of texts: give exactly two ({len(args.texts)} given)")
        elif len(args.texts) > 2:
            raise ValueError("sequence classification takes one text or a pair")
        else:
            rows = [(args.texts[0], args.texts[1] if len(args.texts) > 1 else None)]
        labels = [model.config.id2label[i] for i in range(model.config.num_labels)]
        pos = positive_label(labels, args.threshold, args.positive, args.model_dir) if len(labels) > 1 else None
        names = [one_line(label) for label in labels]
        for a, b in rows:
            ids, seg = tokenizer.encode(a, b, max_length=T)
            logits = model.forward(np.array([ids]), np.array([seg]))[0]  # (K,)
            shown = f"\t{one_line(a)}" if len(rows) > 1 else ""
            if logits.shape[0] == 1:
                print(f"score {float(logits[0]):.4f}{shown}")
                continue
            probs = np.exp(logits - logits.max())
            probs /= probs.sum()
            best = int(decide(probs[None], pos, args.threshold)[0])
            print(f"{names[best]}  (" + ", ".join(f"{name} {pr:.3f}" for name, pr in zip(names, probs)) + ")" + shown)
    elif model.head_shape == "token":
        words = " ".join(args.texts).split()
        labels = [model.config.id2label[i] for i in range(model.config.num_labels)]
        feats = token_features([TaggedExample(words, [labels[0]] * len(words), "command line")], tokenizer, T, labels)
        logits = model.forward(feats["input_ids"], feats["segment_ids"], feats["input_mask"])  # (n, T, K)
        tags = word_predictions(feats, logits.argmax(-1), labels)[0]
        print("  ".join(f"{one_line(w)}/{one_line(t)}" for w, t in zip(words, tags)))  # a tag from config.json: data
    else:  # multiple choice: context, then the choices
        if len(args.texts) < 3:
            raise ValueError("multiple choice takes the context and at least two choices")
        context, choices = args.texts[0], args.texts[1:]
        enc = [tokenizer.encode(context, c, max_length=T) for c in choices]
        L = max(len(i) for i, _ in enc)
        ids = np.zeros((1, len(enc), L), np.int64)
        seg, mask = np.zeros_like(ids), np.zeros_like(ids)
        for j, (i, s) in enumerate(enc):
            ids[0, j, :len(i)], seg[0, j, :len(i)], mask[0, j, :len(i)] = i, s, 1
        logits = model.forward(ids, seg, mask)[0]
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        for j in np.argsort(-probs):
            print(f"{probs[j]:.3f}  {choices[j]}")
    return 0
