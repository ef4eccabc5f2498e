"""`python -m minibert train-t5`: pretrain the `t5-tiny` encoder-decoder with span corruption on
the default corpus, or fine-tune it text-to-text on SST-2 (`--task sst2 --data DIR`).

The run is minibert's one training loop with T5 plugged in (train/t5.py's T5Run on
loop/engine.py): the same progress line, metrics.jsonl, curves.png, atomic checkpoints, Ctrl-C
save, NaN stop and bit-exact `--resume RUN_DIR` as every other run. This module is the command:
its presets, the data of each task (span-corrupted chunks of the corpus; "sst2 sentence: ..." ->
"positive" | "negative"), the run directory's checks, and what is shown at the end (a held-out
example decoded greedily; SST-2's dev accuracy by greedy decoding). `--minutes` is a budget the
step count is fitted to; `--max-steps-this-run N` pauses after N steps. A saved run is also a
starting point for `--task sst2 --init`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from minibert.family import t5_data as D
from minibert.family.t5 import T5Config, greedy_decode, init_params
from minibert.io.atomic import write_text_atomic
from minibert.loop import rundir as run_dir
from minibert.loop.engine import FINISHED, _fmt_seconds
from minibert.loop.step import TrainingAborted, TrainingDiverged
from minibert.train.t5 import (METRICS, ShuffledBatches, T5Model, T5Run, evaluate, load_run, plot_curves, span_baseline,
                               span_mask)

PRESETS = {"t5-tiny": dict(hidden_size=128, num_layers=2, num_decoder_layers=2, num_heads=2, intermediate_size=512,
                           max_position_embeddings=128, num_sentinels=100),
           # for tests and quick looks at the pipeline: learns little
           "t5-micro": dict(hidden_size=32, num_layers=1, num_decoder_layers=1, num_heads=2, intermediate_size=64,
                            max_position_embeddings=64, num_sentinels=100)}
RUN_FILE = "run.json"  # marks the directory as a train-t5 run and holds its settings (what --resume reads)


def _fast() -> bool:
    return os.environ.get("MINIBERT_FAST", "") not in ("", "0")


# ---------------------------------------------------------------------------------------------
# the run directory

def _check_out(out: Path, overwrite: bool) -> None:
    """Before anything is written: refuse a directory that holds something other than a train-t5
    run, or an unfinished train-t5 run (that one is for --resume), unless --overwrite."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file")
    if overwrite or not out.is_dir() or not any(out.iterdir()):
        return
    if not ((out / RUN_FILE).is_file() and run_dir.read_json(out / RUN_FILE).get("command") == "train-t5"):
        raise ValueError(f"{out} exists and does not hold a train-t5 run; choose another --out or pass --overwrite")
    ckpt = run_dir.latest_checkpoint(out)
    state = run_dir.read_json(ckpt / run_dir.STATE_FILE) if ckpt is not None else {}
    if state.get("status") in ("running", "paused", "interrupted"):
        raise ValueError(f"{out} holds an unfinished train-t5 run (stopped at step {state['step']} of "
                         f"{state['total_steps']}); continue it with --resume {out}, or replace it with --overwrite")


def _check_resumable(out: Path) -> None:
    ckpt = run_dir.latest_checkpoint(out)
    if ckpt is None:
        raise ValueError(f"{out} has no checkpoint to resume from; start the run again with --overwrite")
    if "batches" not in run_dir.read_json(ckpt / run_dir.STATE_FILE):
        raise ValueError(f"{ckpt} was saved by a train-t5 without resume; start the run again with --overwrite")


def _settings(args) -> dict:
    return {k: v for k, v in vars(args).items() if k not in ("resume", "overwrite", "max_steps_this_run")}


def run_t5(args, cfg, params, tok, batches: ShuffledBatches, eval_batches: list[dict], ops, describe: str):
    """Start (or with args.resume continue) the run in args.out and train -> (T5Run, status)."""
    run = T5Run(args, cfg, params, tok, batches, eval_batches, ops)
    out = run.dir
    out.mkdir(parents=True, exist_ok=True)
    for p in run_dir.clean_interrupted_saves(out):
        print(f"removed {p}, left by a save that was cut off")
    if args.resume:
        run.load_checkpoint()
        print(f"resumed {out} at step {run.step}/{run.total_steps}", flush=True)
    else:
        for name in (METRICS, "curves.png", "eval_results.json", run_dir.CHECKPOINTS, *run_dir.PUBLISHED):
            run_dir._remove(out / name)
        run_dir.write_json(out / RUN_FILE, {"command": "train-t5", **_settings(args)})
        token, share = span_baseline(eval_batches, cfg)
        name = D.t5_tokens(tok.ids_to_tokens, cfg.num_sentinels)[token]
        run.log({"type": "baseline", "token": name, "span_acc": share})
        print(f"held-out baseline: always answering {name!r} gets {share:.4f} of the answer tokens (the target "
              f"without sentinels and EOS: the dropped text, or the SST-2 label word)", flush=True)
    print(f"model: {run.model.num_parameters:,} parameters; {describe}", flush=True)
    return run, run.run(args.max_steps_this_run)


def _finish(run: T5Run, status: str) -> int:
    """The last line of a run -> the exit code (130 after Ctrl-C, with the checkpoint saved)."""
    if status in FINISHED:
        how = "done" if status == "done" else "time budget reached"
        print(f"{how}: {run.step} steps in {_fmt_seconds(run.elapsed)}; saved: {run.dir}/ (config.json, "
              f"model.safetensors, vocab.txt, metrics.jsonl, curves.png, checkpoints/)", flush=True)
    elif status == "paused":
        print(f"paused at step {run.step}/{run.total_steps}: saved {run.dir}; continue with "
              f"`{run.resume_command()}`", flush=True)
    return 130 if status == "interrupted" else 0


# ---------------------------------------------------------------------------------------------
# the two tasks and the command

def pretrain(args, ops) -> int:
    from minibert.corpus import ensure_default_corpus, read_documents
    from minibert.tokenizer import BertTokenizer

    if args.corpus:
        train_path, heldout_path, vocab_path = Path(args.corpus), Path(args.heldout or ""), Path(args.vocab or "")
        if not args.heldout or not args.vocab:
            raise ValueError("--corpus needs --heldout and --vocab as well")
    else:
        train_path, heldout_path, vocab_path = ensure_default_corpus()
    tok = BertTokenizer(vocab_path)
    tok.check_special_tokens(("[PAD]", "[CLS]", "[SEP]"), "train-t5")
    cfg = T5Config(vocab_size=len(tok) + PRESETS[args.preset]["num_sentinels"], **PRESETS[args.preset])
    train_docs, held_docs = read_documents(train_path), read_documents(heldout_path)
    if args.fast:
        train_docs, held_docs = train_docs[:60], held_docs[:12]
    chunks = D.document_chunks(train_docs, tok, args.chunk_len)
    held = D.document_chunks(held_docs, tok, args.chunk_len)
    if not chunks or not held:
        raise ValueError(f"no chunks of at least 8 tokens in {train_path if not chunks else heldout_path}")
    T, S = D.max_lengths(args.chunk_len)
    special = D.Special(tok.pad_id, tok.cls_id, tok.sep_id)
    rng = np.random.default_rng(args.seed)
    held_rng = np.random.default_rng(12345)  # fixed masks: every evaluation scores the same examples
    eval_batches = [D.corrupted_batch(held[i:i + 64], held_rng, cfg.vocab_size, special, T, S)
                    for i in range(0, len(held), 64)]
    params = init_params(cfg, args.seed)
    batches = ShuffledBatches(len(chunks), args.batch_size, rng, lambda rows, r: D.corrupted_batch(
        [chunks[i] for i in rows], r, cfg.vocab_size, special, T, S))
    describe = (f"{len(chunks):,} training chunks of up to {args.chunk_len} tokens ({len(held)} held-out), "
                f"input {T} / target {S} tokens, batch {args.batch_size}, lr {args.lr:g}, budget {args.minutes:g} min")
    run, status = run_t5(args, cfg, params, tok, batches, eval_batches, ops, describe)
    code = _finish(run, status)
    if status in FINISHED:
        show_example(run.model.params, cfg, tok, held[0], special, ops)
    return code


def show_example(params, cfg, tok, chunk, special, ops) -> None:
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

    print(f"\nheld-out example:\n  input   {show(inp)}\n  target  {show(tgt)}\n  greedy  {show(out)}")


def finetune_sst2(args, ops) -> int:
    """Text-to-text SST-2: "sst2 sentence: ..." -> "positive" | "negative", dev accuracy by
    greedy decoding (an answer that is neither word counts as wrong)."""
    from minibert.finetune.readers import read_glue
    from minibert.tokenizer import BertTokenizer

    if not args.data:
        raise ValueError("--task sst2 needs --data DIR holding GLUE-format train.tsv and dev.tsv")
    data = Path(args.data)
    for name in ("train.tsv", "dev.tsv"):
        if not (data / name).is_file():
            raise ValueError(f"--data {data}: {name} is missing")
    if not args.init:
        raise ValueError("--task sst2 needs --init RUN (a train-t5 run directory, or `none` for a random init)")
    if args.resume:  # the model, its sizes and vocabulary as the run saved them (its checkpoint replaces the weights)
        cfg, params, base = load_run(run_dir.latest_checkpoint(args.resume))
    elif args.init == "none":  # the control: the same model, not pretrained
        from minibert.corpus import ensure_default_corpus
        from minibert.tokenizer import load_vocab

        base = load_vocab(args.vocab or ensure_default_corpus().vocab)
        cfg = T5Config(vocab_size=len(base) + PRESETS[args.preset]["num_sentinels"], **PRESETS[args.preset])
        params = init_params(cfg, args.seed)
    else:
        cfg, params, base = load_run(args.init)
    tok = BertTokenizer(base)
    special = D.Special(tok.pad_id, tok.cls_id, tok.sep_id)
    max_in = min(args.max_input, cfg.max_position_embeddings)
    train_pairs = D.sst2_pairs(read_glue(data / "train.tsv", single=True), tok, max_in)
    dev_examples = read_glue(data / "dev.tsv", single=True)
    dev_pairs = D.sst2_pairs(dev_examples, tok, max_in)
    if args.fast:
        train_pairs, dev_pairs = train_pairs[:256], dev_pairs[:64]
    rng = np.random.default_rng(args.seed)
    eval_batches = [D.pad_batch(dev_pairs[i:i + 64], special) for i in range(0, len(dev_pairs), 64)]
    batches = ShuffledBatches(len(train_pairs), args.batch_size, rng,
                              lambda rows, r: D.pad_batch([train_pairs[i] for i in rows], special))
    describe = (f"SST-2 text-to-text from {args.init}: {len(train_pairs):,} train / {len(dev_pairs)} dev sentences, "
                f"batch {args.batch_size}, lr {args.lr:g}, budget {args.minutes:g} min")
    run, status = run_t5(args, cfg, params, tok, batches, eval_batches, ops, describe)
    code = _finish(run, status)
    if status in FINISHED:
        acc, invalid = sst2_accuracy(run.model.params, cfg, dev_pairs, special, ops)
        print(f"dev accuracy (greedy decoding, exact word): {acc:.4f} on {len(dev_pairs)} sentences; "
              f"answers that were neither word: {invalid:.2%}")
        write_text_atomic(run.dir / "eval_results.json", json.dumps({"dev_accuracy": acc, "invalid": invalid}) + "\n")
    return code


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


def _resumed_args(ap: argparse.ArgumentParser, args) -> argparse.Namespace:
    """--resume RUN_DIR: the settings run.json saved; only the budget and the pause may be given anew."""
    out = Path(args.resume)
    saved = run_dir.read_json(out / RUN_FILE) if (out / RUN_FILE).is_file() else {}
    if saved.get("command") != "train-t5":
        raise ValueError(f"{out} has no {RUN_FILE} written by train-t5: not a train-t5 run to resume")
    defaults = vars(ap.parse_args([]))
    changed = sorted(k for k, v in vars(args).items()
                     if k not in ("resume", "minutes", "max_steps_this_run") and v != defaults[k])
    if changed:
        raise ValueError(f"--resume continues {out} with its saved settings; only --minutes and --max-steps-this-run "
                         f"may be given (got {', '.join('--' + k.replace('_', '-') for k in changed)})")
    _check_resumable(out)
    merged = argparse.Namespace(**{**defaults, "fast": _fast(), **{k: v for k, v in saved.items() if k != "command"}})
    merged.resume, merged.out, merged.max_steps_this_run = str(out), str(out), args.max_steps_this_run
    if args.minutes is not None:
        merged.minutes = args.minutes
    return merged


def train_t5_cli(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m minibert train-t5", description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="t5-tiny", choices=sorted(PRESETS))
    ap.add_argument("--task", choices=("span-corruption", "sst2"), default="span-corruption")
    ap.add_argument("--data", help="sst2: a directory with GLUE-format train.tsv and dev.tsv")
    ap.add_argument("--init", help="sst2: the train-t5 run to start from, or `none` (random init, --preset's sizes)")
    ap.add_argument("--out", help="run directory (default runs/t5-tiny, or runs/t5-sst2 for --task sst2)")
    ap.add_argument("--overwrite", action="store_true", help="replace a directory that holds something else, or an "
                                                             "unfinished run")
    ap.add_argument("--resume", metavar="RUN_DIR", help="continue the train-t5 run saved in RUN_DIR with its saved "
                                                        "settings (--minutes may change the budget)")
    ap.add_argument("--max-steps-this-run", type=int, help="pause (and save) after this many steps; --resume continues")
    ap.add_argument("--corpus", help="one-sentence-per-line training text (default: the default corpus)")
    ap.add_argument("--heldout", help="held-out text, with --corpus")
    ap.add_argument("--vocab", help="vocab.txt, with --corpus (and with --init none; default: the default corpus's)")
    ap.add_argument("--minutes", type=float, default=None, help="time budget (default 9.5; 1 with MINIBERT_FAST=1)")
    ap.add_argument("--steps", type=int, default=None, help="at most this many steps (default: as the budget allows)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=None, help="peak learning rate (1e-3 pretraining, 3e-4 sst2)")
    ap.add_argument("--warmup", type=int, default=200, help="warmup steps (at most a tenth of the steps)")
    ap.add_argument("--chunk-len", type=int, default=64, help="tokens per chunk before corruption")
    ap.add_argument("--max-input", type=int, default=64, help="sst2: input tokens kept per sentence")
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--save-every", type=int, default=0, help="also save every N steps (0: at the end and Ctrl-C)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.max_steps_this_run is not None and args.max_steps_this_run < 1:
        raise ValueError(f"--max-steps-this-run must be at least 1, got {args.max_steps_this_run}")
    if args.resume:
        args = _resumed_args(ap, args)
    else:
        args.fast = _fast()
        args.minutes = args.minutes if args.minutes is not None else (1.0 if args.fast else 9.5)
        args.steps = args.steps if args.steps is not None else (30 if args.fast else 1_000_000)
        if args.fast:
            args.eval_every, args.log_every = min(args.eval_every, 10), min(args.log_every, 5)
        for name in ("steps", "batch_size", "chunk_len", "eval_every", "log_every", "max_input"):
            if getattr(args, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
        if args.task != "sst2" and args.chunk_len + 1 > PRESETS[args.preset]["max_position_embeddings"]:
            raise ValueError(f"--chunk-len {args.chunk_len} does not fit max_position_embeddings "
                             f"{PRESETS[args.preset]['max_position_embeddings']}")
        args.lr = args.lr if args.lr is not None else (3e-4 if args.task == "sst2" else 1e-3)
        args.out = args.out or ("runs/t5-sst2" if args.task == "sst2" else "runs/t5-tiny")
        _check_out(Path(args.out), args.overwrite)
    if args.minutes <= 0:
        raise ValueError(f"--minutes must be positive, got {args.minutes}")
    from minibert.backend import get_ops

    ops = get_ops()
    print(f"train-t5 {args.task}{' (MINIBERT_FAST=1: small slice)' if args.fast else ''}: budget {args.minutes:g} min "
          f"-> {args.out}", flush=True)
    try:
        return finetune_sst2(args, ops) if args.task == "sst2" else pretrain(args, ops)
    except TrainingDiverged as e:  # NaN/inf: stopped without saving that step (the message names the last checkpoint)
        print(f"error: {e}", file=sys.stderr)
        return 1
    except TrainingAborted as e:  # a second Ctrl-C: stopped without saving
        print(f"\n{e}", file=sys.stderr)
        return 130
