"""`python -m minibert train-t5`: pretrain the `t5-tiny` encoder-decoder with span corruption on
the default corpus, or fine-tune it text-to-text on SST-2 (`--mode sst2 --data DIR`).

The run is minibert's one training loop with T5 plugged in (train/t5.py's T5Run on
loop/engine.py): the same progress line, metrics.jsonl, curves.png, atomic checkpoints, Ctrl-C
save, NaN stop and bit-exact `--resume RUN_DIR` as every other run. This module is the command:
its presets, the data of each mode (span-corrupted chunks of the corpus; "sst2 sentence: ..." ->
"positive" | "negative") and what is shown at the end (a held-out example decoded greedily; SST-2's
dev accuracy by greedy decoding); the run's life is the launcher's (loop/launch.py). `--minutes` is a budget the
step count is fitted to (`--steps N` fixes it instead: then `--minutes` only limits the time);
`--max-steps-this-run N` pauses after N steps. A saved run is also a
starting point for `--mode sst2 --init`.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from minibert.io.cli import CommandParser, command_parser, given_settings, resume_changes, run_options
from minibert.family import t5_data as D
from minibert.family.t5 import T5Config, greedy_decode, init_params
from minibert.io.atomic import write_text_atomic
from minibert.loop import rundir
from minibert.loop.launch import Job, launch
from minibert.loop.settings import RunSettings
from minibert.train.t5 import ShuffledBatches, T5Run, load_run
from minibert.backend import get_ops
from minibert.data.corpus import ensure_default_corpus, read_documents
from minibert.taskdata.readers import read_glue
from minibert.text.tokenizer import BertTokenizer, load_vocab

PRESETS = {"t5-tiny": dict(hidden_size=128, num_layers=2, num_decoder_layers=2, num_heads=2, intermediate_size=512,
                           max_position_embeddings=128, num_sentinels=100),
           # for tests and quick looks at the pipeline: learns little
           "t5-micro": dict(hidden_size=32, num_layers=1, num_decoder_layers=1, num_heads=2, intermediate_size=64,
                            max_position_embeddings=64, num_sentinels=100)}
COMMAND = "train-t5"  # run.json's "command"
# --fast: a slice of each mode's data (T5TrainConfig's max_train_examples, eval_examples)
FAST_SLICE = {"span-corruption": dict(max_train_examples=60, eval_examples=12),
              "sst2": dict(max_train_examples=256, eval_examples=64)}


@dataclasses.dataclass(kw_only=True)
class T5TrainConfig(RunSettings):
    """The settings of a train-t5 run (run.json records them; --resume reads them back). `steps`
    0 (the default) fits the schedule to `minutes`; `steps` N is a run of N steps, which `minutes`
    only limits."""

    out: str
    preset: str = "t5-tiny"
    mode: str = "span-corruption"  # or "sst2" (fine-tuning text to text)
    data: str | None = None  # sst2: a directory with GLUE-format train.tsv and dev.tsv
    init: str | None = None  # sst2: the train-t5 run to start from, or "none"
    corpus: str | None = None
    heldout: str | None = None
    vocab: str | None = None
    minutes: float = 9.5
    steps: int = 0  # 0: fitted to `minutes`
    batch_size: int = 32
    lr: float = 1e-3  # 3e-4 for sst2
    warmup_steps: int = 200  # at most a tenth of the steps
    max_seq_length: int = 64  # span-corruption: tokens per chunk before corruption; sst2: input tokens kept
    eval_interval: int = 250
    log_interval: int = 20
    checkpoint_interval: int = 0
    seed: int = 0
    # a slice of the data (0: all): the first N training documents (sst2: sentences), and N held-out
    # documents (sst2: dev sentences) evaluated; --fast sets FAST's
    max_train_examples: int = 0
    eval_examples: int = 0

    def validate(self) -> None:
        for name in ("batch_size", "max_seq_length", "eval_interval", "log_interval"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.preset not in PRESETS:
            raise ValueError(f"preset {self.preset!r} is not one of {sorted(PRESETS)}")
        if self.mode not in ("span-corruption", "sst2"):
            raise ValueError(f"mode {self.mode!r} is not span-corruption or sst2")
        if self.corpus and not (self.heldout and self.vocab):
            raise ValueError("--corpus needs --heldout and --vocab as well")
        if self.mode == "sst2" and not self.data:
            raise ValueError("--mode sst2 needs --data DIR holding GLUE-format train.tsv and dev.tsv")
        if self.mode == "sst2" and not self.init:
            raise ValueError("--mode sst2 needs --init RUN (a train-t5 run directory, or `none` for a random init)")
        if self.mode != "sst2" and self.max_seq_length + 1 > PRESETS[self.preset]["max_position_embeddings"]:
            raise ValueError(f"--max-seq-length {self.max_seq_length} does not fit max_position_embeddings "
                             f"{PRESETS[self.preset]['max_position_embeddings']}")
        if self.steps < 0 or not 0 <= self.minutes < float("inf"):
            raise ValueError(f"--steps ({self.steps}) and --minutes ({self.minutes}) must be >= 0")
        if not self.steps and not self.minutes > 0:
            raise ValueError("--steps 0 fits the steps to the time budget: give --minutes > 0, or --steps N")
        if not 0 < self.lr < float("inf") or self.warmup_steps < 0 or self.checkpoint_interval < 0 or self.seed < 0:
            raise ValueError(f"--lr must be positive and finite, and --warmup-steps, --checkpoint-interval, --seed >= 0 "
                             f"(got {self.lr:g}, {self.warmup_steps}, {self.checkpoint_interval}, {self.seed})")


# ---------------------------------------------------------------------------------------------
# the two modes and the command

def pretrain(args: T5TrainConfig, resume: bool, ops, where: Path) -> T5Run:
    """Span corruption on the corpus: the data and the run (nothing is written)."""
    if args.corpus:  # with --heldout and --vocab (T5TrainConfig.validate)
        train_path, heldout_path, vocab_path = Path(args.corpus), Path(args.heldout), Path(args.vocab)
    else:
        train_path, heldout_path, vocab_path = ensure_default_corpus()
    tok = BertTokenizer(vocab_path)
    tok.check_special_tokens(("[PAD]", "[CLS]", "[SEP]"), "train-t5")
    cfg = T5Config(vocab_size=len(tok) + PRESETS[args.preset]["num_sentinels"], **PRESETS[args.preset])
    train_docs, held_docs = read_documents(train_path), read_documents(heldout_path)
    train_docs, held_docs = train_docs[:args.max_train_examples or None], held_docs[:args.eval_examples or None]
    chunks = D.document_chunks(train_docs, tok, args.max_seq_length)
    held = D.document_chunks(held_docs, tok, args.max_seq_length)
    if not chunks or not held:
        raise ValueError(f"no chunks of at least 8 tokens in {train_path if not chunks else heldout_path}")
    T, S = D.max_lengths(args.max_seq_length)
    special = D.Special(tok.pad_id, tok.cls_id, tok.sep_id)
    rng = np.random.default_rng(args.seed)
    held_rng = np.random.default_rng(12345)  # fixed masks: every evaluation scores the same examples
    eval_batches = [D.corrupted_batch(held[i:i + 64], held_rng, cfg.vocab_size, special, T, S)
                    for i in range(0, len(held), 64)]
    params = init_params(cfg, args.seed)
    batches = ShuffledBatches(len(chunks), args.batch_size, rng, lambda rows, r: D.corrupted_batch(
        [chunks[i] for i in rows], r, cfg.vocab_size, special, T, S))
    describe = (f"{len(chunks):,} training chunks of up to {args.max_seq_length} tokens ({len(held)} held-out), "
                f"input {T} / target {S} tokens, batch {args.batch_size}, lr {args.lr:g}, budget {args.minutes:g} min")
    return T5Run(args, cfg, params, tok, batches, eval_batches, ops, describe,
                 closing=lambda run: show_example(run.model.params, cfg, tok, held[0], special, ops), dir=where)


def show_example(params, cfg, tok, chunk, special, ops) -> list[str]:
    """One held-out chunk: the corrupted input, the target and the model's greedy answer."""
    names = D.t5_tokens(tok.ids_to_tokens, cfg.num_sentinels)
    rng = np.random.default_rng(7)
    inp, tgt = D.span_corrupt(chunk, D.random_spans_noise_mask(len(chunk), rng), cfg.vocab_size, special.eos)
    out = greedy_decode(params, cfg, inp[None], np.ones((1, len(inp)), np.int64), special.start, special.eos,
                        len(tgt) + 2, ops)[0]
    def show(ids):
        ids = list(ids)
        ids = ids[:ids.index(special.eos) + 1] if special.eos in ids else ids  # up to the first EOS
        return " ".join(names[i] for i in ids).replace(" ##", "")

    return [f"\nheld-out example:\n  input   {show(inp)}\n  target  {show(tgt)}\n  greedy  {show(out)}"]


def finetune_sst2(args: T5TrainConfig, resume: bool, ops, where: Path) -> T5Run:
    """Text-to-text SST-2: "sst2 sentence: ..." -> "positive" | "negative", dev accuracy by
    greedy decoding (an answer that is neither word counts as wrong)."""
    data = Path(args.data)
    for name in ("train.tsv", "dev.tsv"):
        if not (data / name).is_file():
            raise ValueError(f"--data {data}: {name} is missing")
    if resume:  # the model, its sizes and vocabulary as the run saved them (its checkpoint replaces the weights)
        cfg, params, base = load_run(rundir.latest_checkpoint(args.out))
    elif args.init == "none":  # the control: the same model, not pretrained
        base = load_vocab(args.vocab or ensure_default_corpus().vocab)
        cfg = T5Config(vocab_size=len(base) + PRESETS[args.preset]["num_sentinels"], **PRESETS[args.preset])
        params = init_params(cfg, args.seed)
    else:
        cfg, params, base = load_run(args.init)
    tok = BertTokenizer(base)
    special = D.Special(tok.pad_id, tok.cls_id, tok.sep_id)
    max_in = min(args.max_seq_length, cfg.max_position_embeddings)
    train_pairs = D.sst2_pairs(read_glue(data / "train.tsv", single=True), tok, max_in)
    dev_examples = read_glue(data / "dev.tsv", single=True)
    dev_pairs = D.sst2_pairs(dev_examples, tok, max_in)
    train_pairs, dev_pairs = train_pairs[:args.max_train_examples or None], dev_pairs[:args.eval_examples or None]
    rng = np.random.default_rng(args.seed)
    eval_batches = [D.pad_batch(dev_pairs[i:i + 64], special) for i in range(0, len(dev_pairs), 64)]
    batches = ShuffledBatches(len(train_pairs), args.batch_size, rng,
                              lambda rows, r: D.pad_batch([train_pairs[i] for i in rows], special))
    describe = (f"SST-2 text-to-text from {args.init}: {len(train_pairs):,} train / {len(dev_pairs)} dev sentences, "
                f"batch {args.batch_size}, lr {args.lr:g}, budget {args.minutes:g} min")

    def closing(run: T5Run) -> list[str]:
        acc, invalid = sst2_accuracy(run.model.params, cfg, dev_pairs, special, ops)
        write_text_atomic(run.dir / "eval_results.json", json.dumps({"dev_accuracy": acc, "invalid": invalid}) + "\n")
        return [f"dev accuracy (greedy decoding, exact word): {acc:.4f} on {len(dev_pairs)} sentences; "
                f"answers that were neither word: {invalid:.2%}"]

    return T5Run(args, cfg, params, tok, batches, eval_batches, ops, describe, closing, dir=where)


def sst2_accuracy(params, cfg, pairs, special, ops) -> tuple[float, float]:
    correct = invalid = 0
    labels = {int(t[0]) for _, t in pairs}
    for i in range(0, len(pairs), 64):
        batch = D.pad_batch(pairs[i:i + 64], special)
        out = greedy_decode(params, cfg, batch["input_ids"], batch["attention_mask"], special.start, special.eos, 2, ops)
        for (_, tgt), pred in zip(pairs[i:i + 64], out):
            correct += int(pred[0] == tgt[0])
            invalid += int(pred[0] not in labels)
    return correct / max(len(pairs), 1), invalid / max(len(pairs), 1)


def _resumed(ap: CommandParser, args) -> T5TrainConfig:
    """--resume RUN_DIR: the settings run.json saved; only the budget and the pause may be given anew."""
    out = Path(args.resume)
    budget = resume_changes(ap, args)  # the one rule of --resume (refuse what changes the run)
    info = rundir.resumable_run(out, COMMAND)
    saved = T5TrainConfig.from_run(info, str(out / rundir.RUN_FILE), out=str(out), **budget)
    saved.validate()
    return saved


def command_defaults(given: dict, fast: bool) -> dict:
    """The command's defaults under the settings given: the mode's budget, lr and run directory,
    --fast's slice, and a chunk (with its EOS) that fits the preset's positions (t5-micro's 64 take
    63; the class's 64 made `--preset t5-micro` fail at its own default)."""
    sst2 = given.get("mode") == "sst2"
    base = {"minutes": 1.0 if fast else 9.5, "steps": 30 if fast else 0, "lr": 3e-4 if sst2 else 1e-3,
            "out": "runs/t5-sst2" if sst2 else "runs/t5-tiny",
            **(FAST_SLICE["sst2" if sst2 else "span-corruption"] if fast else {})}
    preset = PRESETS.get(given.get("preset", "t5-tiny"))
    if preset is not None and not sst2:
        base["max_seq_length"] = min(T5TrainConfig.max_seq_length, preset["max_position_embeddings"] - 1)
    return base


def train_t5_cli(argv: list[str]) -> int:
    ap = command_parser("train-t5", __doc__, settings=T5TrainConfig,
                        helps={"minutes": "time budget (default 9.5; 1 with --fast)",
                               "steps": "a run of this many steps (default 0: as many as fit --minutes)",
                               "lr": "peak learning rate (1e-3 pretraining, 3e-4 sst2)",
                               "warmup_steps": "warmup steps (default 200, at most a tenth of the steps)",
                               "checkpoint_interval": "also save every N steps (default 0: at the end and Ctrl-C)"},
                        fast="a slice of the data (FAST_SLICE) and 30 steps: a check of the plumbing")
    ap.setting("--preset", choices=sorted(PRESETS), help="default t5-tiny")
    ap.setting("--mode", choices=("span-corruption", "sst2"), help="pretrain by span corruption (the default), or fine-tune on SST-2 text to text")
    ap.setting("--data", help="sst2: a directory with GLUE-format train.tsv and dev.tsv")
    ap.setting("--init", help="sst2: the train-t5 run to start from, or `none` (random init, --preset's sizes)")
    ap.setting("--out", help="run directory (default runs/t5-tiny, or runs/t5-sst2 for --mode sst2)")
    run_options(ap)
    ap.setting("--corpus", help="one-sentence-per-line training text (default: the default corpus)")
    ap.setting("--heldout", help="held-out text, with --corpus")
    ap.setting("--vocab", help="vocab.txt, with --corpus (and with --init none; default: the default corpus's)")
    ap.setting("--batch-size", type=int, help="default 32")
    ap.setting("--max-seq-length", type=int, help="tokens per chunk before corruption; sst2: input tokens kept per "
                                                  "sentence (default 64)")
    args = ap.parse_args(argv)
    if args.steps is not None and args.steps < 1:  # steps 0, fitted to the budget, is what leaving it out gives
        raise ValueError(f"--steps must be at least 1 (leave it out to fit the steps to --minutes), got {args.steps}")
    if args.resume:
        settings = _resumed(ap, args)
    else:
        fast, given = args.fast, given_settings(args, ap)
        base = command_defaults(given, fast)
        if fast:  # --fast: 30 steps, logged and evaluated at least every 5 (6 points of a curve)
            for key in ("log_interval", "eval_interval"):
                given[key] = min(given.get(key, 5), 5)
        settings = T5TrainConfig.build(base, given)  # validated before anything is written
    ops = get_ops()
    make = finetune_sst2 if settings.mode == "sst2" else pretrain
    print(f"train-t5 {settings.mode}{' (a slice of the data)' if settings.max_train_examples else ''}: budget "
          f"{settings.minutes:g} min -> {settings.out}", flush=True)
    out = Path(settings.out)
    inputs = (("--corpus", settings.corpus), ("--heldout", settings.heldout), ("--vocab", settings.vocab),
              ("--data", settings.data), ("--init", settings.init))
    job = Job(out, COMMAND, resume=bool(args.resume), overwrite=args.overwrite, replaceable=True,
              max_steps=args.max_steps_this_run, resume_command=f"python -m minibert train-t5 --resume {out}",
              inputs=inputs)
    return launch(job, lambda where: make(settings, bool(args.resume), ops, where)).code
