"""Hand the pretraining data to PyTorch: minibert's MLM/NSP instances as JSON lines.

    python -m minibert export-data runs/tiny --out runs/tiny/export/train.jsonl
    python -m minibert export-data runs/tiny --split heldout --out runs/tiny/export/heldout.jsonl
    python -m minibert export-data data/generated/pretrain-train-... --out train.jsonl

One line per sequence, with the names transformers' `BertForPreTraining.forward` takes, so a
PyTorch loop or transformers' `Trainer` reads them unchanged (examples/continue_pretraining.py):

    {"input_ids": [2, 7, 4, ...], "token_type_ids": [0, 0, ...], "attention_mask": [1, 1, ..., 0],
     "labels": [-100, -100, 851, ...], "next_sentence_label": 1}

`labels` is the MLM target at every position: the original token where a prediction was made,
-100 (ignored by PyTorch's cross-entropy) everywhere else; `next_sentence_label` is 0 for
"B follows A" and 1 for a random B, as in google-research/bert. Sequences keep their padding to
the run's max_seq_length, so every line has the same length.

From a run directory the instances are the ones the run trained on, in its order: its data
settings pick the cached shards (they are generated again, identically, if the cache was
deleted), and with dynamic masking `--epochs N` writes the masks minibert drew (or would draw)
in its first N passes, because they are seeded by (seed, epoch, position) with the run's batch
size. From a shard directory, `--masking static` (the default there) writes the masks Google's
generator drew.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from pathlib import Path
from typing import Iterator, NamedTuple

import numpy as np

from minibert.data.shards import META_FILE, BatchIterator
from minibert.io.cli import command_parser
from minibert.io.outputs import check_output, write_output
from minibert.io.progress import Progress
from minibert.loop.rundir import RUN_FILE, RunLock
from minibert.train.config import DEFAULT_DATA_CACHE, check_data_cache
from minibert.train.data import run_data_dirs
from minibert.train.runs import resume_config

IGNORE = -100  # PyTorch's cross-entropy ignore_index: no MLM loss at this position


def to_transformers(batch: dict[str, np.ndarray]) -> Iterator[dict]:
    """A batch of minibert features -> one transformers-style record per sequence."""
    B, T = batch["input_ids"].shape
    labels = np.full((B, T), IGNORE, np.int64)  # (B, T)
    rows, slots = np.nonzero(batch["masked_lm_weights"] > 0)  # the real predictions
    labels[rows, batch["masked_lm_positions"][rows, slots]] = batch["masked_lm_ids"][rows, slots]
    for b in range(B):
        yield {"input_ids": batch["input_ids"][b].tolist(), "token_type_ids": batch["segment_ids"][b].tolist(),
               "attention_mask": batch["input_mask"][b].tolist(), "labels": labels[b].tolist(),
               "next_sentence_label": int(batch["next_sentence_labels"][b])}


class Source(NamedTuple):
    data: Path  # a shard directory
    vocab: str | None  # checked against the shards' vocab hash when known
    masking: str
    seed: int
    batch_size: int
    drop_remainder: bool  # True to reproduce a run's batches; False to write every sequence


def source(path: str | Path, split: str, masking: str | None, seed: int | None,
           data_cache: str | Path | None = None) -> Source:
    """A run or shard directory -> where and how to read. A run's training split is read with
    its batch size and seed, so the stream (and dynamic masks) are the run's; everything else
    is read whole, in batches of 256, with seed 0 unless told otherwise."""
    path = Path(path)
    data_cache = data_cache or DEFAULT_DATA_CACHE
    if (path / META_FILE).is_file():
        return Source(path, None, masking or "static", 0 if seed is None else seed, 256, False)

    if not (path / RUN_FILE).is_file():
        raise ValueError(f"{path} is neither a training run (no {RUN_FILE}) nor a pretraining data directory "
                         f"(no {META_FILE})")
    # the run's files name its corpus and data cache; only the reading follows them. Shards that are
    # gone are generated again into the cache this command was given, never where the run file
    # says, and only when the files it names hash to the data the run trained on
    cfg = dataclasses.replace(resume_config(path, {}), data_cache=str(data_cache))
    dirs = run_data_dirs(path, cfg)
    data = dirs.train if split == "train" else dirs.heldout
    if data is None:
        raise ValueError(f"{path} was trained without held-out data; use --split train")
    if split == "heldout":  # evaluation uses the held-out set's stored masks
        return Source(data, cfg.vocab, masking or "static", 0 if seed is None else seed, 256, False)
    return Source(data, cfg.vocab, masking or cfg.masking, cfg.seed if seed is None else seed, cfg.batch_size,
                  True)


def export_jsonl(data_dir, out: str | Path, *, vocab=None, masking: str = "static", seed: int = 0,
                 batch_size: int = 256, drop_remainder: bool = False, epochs: int = 1, limit: int = 0,
                 progress=None) -> int:
    """Write `epochs` passes over the data (at most `limit` sequences, 0 = all) to `out`,
    atomically. -> the number of lines written."""

    if epochs < 1 or limit < 0:
        raise ValueError(f"--epochs must be >= 1 and --limit >= 0 (got {epochs}, {limit})")
    it = BatchIterator(str(data_dir), batch_size, seed, masking=masking, vocab=vocab,
                       drop_remainder=drop_remainder)
    total = it.batches_per_epoch * epochs
    count = 0

    def write(tmp: Path) -> None:
        nonlocal count
        with open(tmp, "w", encoding="utf-8") as f:
            for i in range(total):
                for record in to_transformers(it.next_batch()):
                    f.write(json.dumps(record, separators=(",", ":")) + "\n")
                    count += 1
                    if count == limit:
                        return
                if progress:
                    progress(i + 1, total, count)

    write_output(out, write)
    return count


def cli(argv: list[str]) -> int:
    p = command_parser("export-data", "Write a run's (or a data directory's) MLM/NSP instances as JSON "
                                            "lines that transformers' BertForPreTraining reads.")
    p.add_argument("source", help="a training run (runs/<name>) or a pretraining data directory (meta.json)")
    p.add_argument("--out", required=True, help="the .jsonl file to write")
    p.add_argument("--split", choices=("train", "heldout"), default="train", help="of a run (default train)")
    p.add_argument("--masking", choices=("static", "dynamic"),
                   help="static: the generator's stored masks; dynamic: minibert's per-epoch masks "
                        "(default: the run's setting; static for a data directory)")
    p.add_argument("--epochs", type=int, default=1, help="passes over the data (new masks each, if dynamic)")
    p.add_argument("--limit", type=int, default=0, help="write at most this many sequences (0 = all)")
    p.add_argument("--seed", type=int, help="shuffling and masking seed (default: the run's)")
    p.add_argument("--data-cache", help="where a run's shards are generated again if they were deleted "
                                        "(default data/generated; never the directory the run file names)")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    bar: list = []

    def progress(done: int, total: int, lines: int) -> None:
        if not bar:
            bar.append(Progress("export", total, "batches"))
        bar[0].update(done, f"{lines:,} sequences")


    if args.seed is not None and args.seed < 0:  # NumPy's own error named no setting
        raise ValueError(f"--seed {args.seed} must be >= 0")
    if args.epochs < 1 or args.limit < 0:  # before the run is locked and its shards perhaps regenerated
        raise ValueError(f"--epochs must be >= 1 and --limit >= 0 (got {args.epochs}, {args.limit})")
    if Path(args.out).is_dir():
        raise ValueError(f"--out {args.out} is a directory; give the .jsonl file to write")
    run = Path(args.source)
    lock = RunLock(run) if (run / RUN_FILE).is_file() else contextlib.nullcontext()
    with lock:  # a run still training, or a second export into it, is refused
        check_output(args.out, inputs=[args.source])  # not over the source's own files
        if args.data_cache:  # shards may be generated there
            check_data_cache(args.data_cache, flag="--data-cache")
        src = source(args.source, args.split, args.masking, args.seed, args.data_cache)
        n = export_jsonl(src.data, args.out, vocab=src.vocab, masking=src.masking, seed=src.seed,
                         batch_size=src.batch_size, drop_remainder=src.drop_remainder, epochs=args.epochs,
                         limit=args.limit, progress=progress)
    if bar:
        bar[0].done()
    print(f"wrote {n:,} sequences to {args.out} ({src.masking} masking, {args.epochs} epoch(s), from "
          f"{src.data}) in {time.perf_counter() - t0:.1f}s")
    return 0
