"""Pretraining data on disk: a corpus turned into shards by the generator, and batches drawn from them.

    python -m minibert data --corpus corpus.txt --vocab vocab.txt --out data/generated/mine

`build_pretraining_data` is the original script's main (minibert/data/pretraining_data.py does the
generating): corpus files -> instances -> features -> DIR/shard_00000.npz ... + DIR/meta.json
(flags, vocab hash, counts; written last, so a directory with a meta.json is complete).
`load_shards` reads them back (no pickle), and `BatchIterator` draws shuffled batches from them,
with the stored masks or masks redrawn every epoch (dynamic masking, RoBERTa).

Shape legend: N instances, T = max_seq_length, P = max_predictions_per_seq, B batch size.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import random
import sys
import time
import zipfile
from pathlib import Path
from typing import Callable, Iterator, NamedTuple, Sequence

import numpy as np

from minibert.io.cli import command_parser
from minibert.io import outputs
from minibert.io.jsonfile import Field, has_type, read_json_object
from minibert.io.textio import error_line, shown_value
from minibert.data.pretraining_data import (CLS, DEFAULT_FLAGS, FEATURE_NAMES, MASK, PACKINGS, PAD, SEP, UNMASKED_NAME,
                                            check_generator_flags, check_mask_shares, check_packing,
                                            create_training_instances, format_stats, generation_stats,
                                            instances_to_features, num_predictions, remask, require_special_tokens)
from minibert.io.atomic import atomic_write
from minibert.io.progress import Progress
from minibert.text.tokenizer import load_vocab  # the same reading rules as the tokenizer
from minibert.text.tokenizer import SPECIAL_TOKENS, BertTokenizer

ALL_NAMES = FEATURE_NAMES + (UNMASKED_NAME,)  # what a shard stores
DYNAMIC_NAMES = (UNMASKED_NAME, "input_mask", "segment_ids", "next_sentence_labels")  # what dynamic masking reads
META_FILE = "meta.json"
META_FORMAT = "minibert-pretraining-shards"
META_VERSION = 1


# ----------------------------------------------------------------------------------------------
# storage: .npz shards (no pickle) + meta.json


def vocab_tokens(vocab) -> list[str]:
    """Tokens in id order from a tokenizer, a token list, or a vocab.txt path."""
    if hasattr(vocab, "ids_to_tokens"):
        return list(vocab.ids_to_tokens)
    if hasattr(vocab, "vocab"):
        return list(vocab.vocab.keys())
    if isinstance(vocab, (str, os.PathLike)):
        return load_vocab(vocab)
    return list(vocab)


def vocab_sha256(vocab) -> str:
    """sha256 of the tokens one per line (equals the sha256 of a clean vocab.txt)."""
    return hashlib.sha256("".join(t + "\n" for t in vocab_tokens(vocab)).encode("utf-8")).hexdigest()


# the files a shard folder holds: an input of `data` under one of these names would be replaced
SHARD_FILES = (META_FILE, "shard_*.npz")


def write_shards(features: dict[str, np.ndarray], out_dir, instances_per_shard: int = 20_000,
                 meta: dict | None = None) -> dict:
    """Write DIR/shard_NNNNN.npz (contiguous slices; instances are already shuffled) + meta.json.

    Each file is written to a .tmp name and renamed, and meta.json is written last, so a
    directory with a meta.json is complete. `meta` (flags, vocab hash, ...) is merged in.
    """
    if instances_per_shard < 1:
        raise ValueError(f"instances_per_shard={instances_per_shard} must be >= 1")
    missing = [n for n in FEATURE_NAMES if n not in features]
    if missing:
        raise ValueError(f"features lack {missing}")
    out = outputs.make_dir(out_dir)  # not a symbolic link to elsewhere
    names = [n for n in ALL_NAMES if n in features]
    N = int(features["input_ids"].shape[0])
    shards = []
    for s, start in enumerate(range(0, max(N, 1), instances_per_shard)):
        part = {n: np.ascontiguousarray(features[n][start:start + instances_per_shard]) for n in names}
        fname = f"shard_{s:05d}.npz"
        outputs.save_arrays(out / fname, part, root=out)  # atomic, never through a link in the folder
        shards.append({"file": fname, "num_instances": int(part["input_ids"].shape[0])})
    full = {"format": META_FORMAT, "version": META_VERSION, **(meta or {}),
            "num_instances": N, "max_seq_length": int(features["input_ids"].shape[1]),
            "max_predictions_per_seq": int(features["masked_lm_positions"].shape[1]),
            "arrays": names, "shards": shards}
    outputs.write_output(out / META_FILE, json.dumps(full, indent=2), root=out)
    return full


# meta.json's fields, typed by io/jsonfile.check_fields (each shard's entry is checked below)
META_FIELDS = {
    "format": Field(str, f"{META_FORMAT!r} (a shard directory of this minibert)", lambda v: v == META_FORMAT,
                    required=True),
    "version": Field(int, f"{META_VERSION} (shards of this minibert; make them again with `python -m minibert data`)",
                     lambda v: v == META_VERSION, required=True),
    "shards": Field(list, "a list of {file, num_instances} objects", required=True),
    "vocab_sha256": Field(str, "the sha256 of the vocab (64 hex digits)", lambda v: len(v) == 64),
    "vocab_size": Field(int, "a positive integer", lambda v: v >= 1),
    "max_predictions_per_seq": Field(int, "a positive integer", lambda v: v >= 1),
    "flags": Field(dict, "an object of the generator's flags"),
    "special_ids": Field(dict, "an object {special token: id}",
                         lambda v: all(has_type(i, int) and i >= 0 for i in v.values())),
}


def read_meta(data_dir, vocab=None) -> dict:
    """meta.json of a shard directory, checked: format, every shard present, vocab hash if given."""
    d = Path(data_dir)
    path = d / META_FILE
    if not path.is_file():
        raise ValueError(f"{path} not found: not a pretraining data directory (or generation "
                         "did not finish); run `python -m minibert data`")
    meta = read_json_object(path, META_FIELDS)
    shards = meta["shards"]
    for i, shard in enumerate(shards):
        ok = isinstance(shard, dict) and isinstance(shard.get("file"), str) and \
            isinstance(shard.get("num_instances"), int) and not isinstance(shard["num_instances"], bool)
        if not ok or shard["num_instances"] < 0 or Path(shard["file"]).name != shard["file"] \
                or shard["file"] in ("", ".", ".."):
            raise ValueError(f"{path}: shards[{i}] is {shown_value(shard)}, expected {{\"file\": a file name in {d}, "
                             f"\"num_instances\": a count}}")
        if not (d / shard["file"]).is_file():
            raise ValueError(f"shard {d / shard['file']} listed in {path} is missing")
    if vocab is not None:
        got = vocab_sha256(vocab)
        if meta.get("vocab_sha256") != got:
            raise ValueError(f"vocab mismatch: {path} was generated with vocab sha256 "
                             f"{meta.get('vocab_sha256')} (size {meta.get('vocab_size')}), the "
                             f"given vocab has sha256 {got} (size {len(vocab_tokens(vocab))})")
    return meta


def load_shard(path, names: Sequence[str] = ALL_NAMES, expected: int | None = None
               ) -> dict[str, np.ndarray]:
    """Arrays `names` of one shard, loaded without pickle; clear errors for broken files."""
    try:
        with np.load(path, allow_pickle=False) as z:
            out = {n: z[n] for n in names}
    except KeyError as e:
        raise ValueError(f"shard {path} lacks array {e}") from e
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        why = "it holds pickled objects, which minibert never loads" if "pickle" in str(e) else str(e)
        raise ValueError(f"shard {path} is corrupt or unreadable: {why}") from e
    n = {a.shape[0] for a in out.values()}
    if len(n) != 1 or (expected is not None and n != {expected}):
        raise ValueError(f"shard {path} has {sorted(n)} rows, meta.json says {expected}")
    return out


def load_shards(data_dir, vocab=None, names: Sequence[str] = ALL_NAMES) -> dict[str, np.ndarray]:
    """All shards of a directory concatenated (for small data; BatchIterator loads lazily)."""
    meta = read_meta(data_dir, vocab)
    parts = [load_shard(Path(data_dir) / s["file"], names, s["num_instances"]) for s in meta["shards"]]
    return {n: np.concatenate([p[n] for p in parts]) for n in names}


# ----------------------------------------------------------------------------------------------
# batches


class _Source(NamedTuple):
    size: int
    load: Callable[[], dict]  # -> arrays of this shard


class BatchIterator:
    """Shuffled batches (dicts with FEATURE_NAMES arrays) from a shard directory or a features dict.

    Shuffling per epoch (deterministic in `seed`): the shard order is permuted, then the
    examples within each shard; batches are cut from that stream. At most two shards are in
    memory, and only the arrays the masking mode needs. The generator already shuffled all
    instances before sharding, so this two-level shuffle mixes the whole data set; with one
    shard it is a full shuffle.
    masking="static" gives the stored masks (dupe_factor copies from the generator);
    masking="dynamic" redraws masks for every batch from the unmasked pairs with `remask`,
    seeded by (seed, epoch, position), so every epoch sees new masks and a resumed run draws
    the same ones; its `mask_shares` (MASK, SAME, RND) default to the generator's (meta.json).
    Iterating never ends; `epoch` counts completed passes.
    """

    def __init__(self, data, batch_size: int, seed: int, masking: str = "static",
                 drop_remainder: bool = True, masked_lm_prob: float | None = None,
                 max_predictions_per_seq: int | None = None, vocab_size: int | None = None,
                 mask_id: int | None = None, special_ids: Sequence[int] | None = None,
                 vocab=None, mask_shares=None):
        if masking not in ("static", "dynamic"):
            raise ValueError(f"masking={masking!r} must be 'static' or 'dynamic'")
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be >= 1")
        self.batch_size, self.seed, self.masking = int(batch_size), int(seed), masking
        self.drop_remainder = drop_remainder
        names = DYNAMIC_NAMES if masking == "dynamic" else FEATURE_NAMES
        meta: dict = {}
        if isinstance(data, dict):
            arrays = {n: data[n] for n in names}
            self.sources = [_Source(int(arrays["input_ids" if masking == "static" else UNMASKED_NAME]
                                        .shape[0]), lambda: arrays)]
        else:
            meta = read_meta(data, vocab)
            d = Path(data)
            self.sources = [_Source(s["num_instances"],
                                    lambda p=d / s["file"], k=s["num_instances"]: load_shard(p, names, k))
                            for s in meta["shards"]]
        flags = meta.get("flags", {})
        self.masked_lm_prob = masked_lm_prob if masked_lm_prob is not None else flags.get("masked_lm_prob", 0.15)
        self.mask_shares = check_mask_shares(mask_shares if mask_shares is not None else
                                             flags.get("mask_shares", DEFAULT_FLAGS["mask_shares"]))
        self.max_predictions_per_seq = (max_predictions_per_seq if max_predictions_per_seq is not None
                                        else meta.get("max_predictions_per_seq"))
        self.vocab_size = vocab_size if vocab_size is not None else meta.get("vocab_size")
        self.mask_id = mask_id if mask_id is not None else meta.get("special_ids", {}).get(MASK)
        self.special_ids = (list(special_ids) if special_ids is not None else
                            [meta.get("special_ids", {}).get(t) for t in (CLS, SEP)])
        if masking == "dynamic" and None in (self.max_predictions_per_seq, self.vocab_size,
                                             self.mask_id, *self.special_ids):
            raise ValueError("dynamic masking needs max_predictions_per_seq, vocab_size, mask_id "
                             "and special_ids (given, or read from meta.json)")
        self.num_examples = sum(s.size for s in self.sources)
        if self.num_examples == 0 or (drop_remainder and self.num_examples < self.batch_size):
            raise ValueError(f"{self.num_examples} examples cannot fill one batch of {batch_size}")
        self.epoch, self.position = 0, 0
        self._cache: dict[int, tuple[dict, np.ndarray]] = {}  # shard -> (arrays, permutation)
        self._cache_epoch = -1

    @property
    def batches_per_epoch(self) -> int:
        full, rest = divmod(self.num_examples, self.batch_size)
        return full + (1 if rest and not self.drop_remainder else 0)

    def state_dict(self) -> dict:
        """Plain ints, JSON-serialisable: resuming with these continues the exact stream."""
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed,
                "batch_size": self.batch_size, "masking": self.masking,
                "num_examples": self.num_examples}

    def load_state_dict(self, state: dict) -> None:
        if not isinstance(state, dict):
            raise ValueError(f"the iterator state is {state!r:.100}, expected an object")
        for key in ("seed", "batch_size", "masking", "num_examples"):
            if key not in state:
                raise ValueError(f"cannot resume: the iterator state has no {key!r}")
            if state[key] != getattr(self, key):
                raise ValueError(f"cannot resume: state has {key}={state[key]!r}, this iterator "
                                 f"has {getattr(self, key)!r}")
        for key in ("epoch", "position"):  # a negative or too large position has no batch to cut
            value, top = state.get(key), self.num_examples if key == "position" else math.inf
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= top:
                raise ValueError(f"cannot resume: the iterator state has {key}={value!r}, expected an integer "
                                 f"in [0, {top}]")
        self.epoch, self.position = state["epoch"], state["position"]

    def _shard_order(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch, 0]).permutation(len(self.sources))

    def _shard(self, s: int) -> tuple[dict, np.ndarray]:
        if self._cache_epoch != self.epoch:
            self._cache, self._cache_epoch = {}, self.epoch
        if s not in self._cache:
            if len(self._cache) >= 2:  # keep at most two shards in memory
                self._cache.pop(next(iter(self._cache)))
            perm = np.random.default_rng([self.seed, self.epoch, 1, s]).permutation(self.sources[s].size)
            self._cache[s] = (self.sources[s].load(), perm)
        return self._cache[s]

    def _take(self, start: int, stop: int) -> dict[str, np.ndarray]:
        """Examples [start, stop) of this epoch's shuffled stream."""
        parts, offset = [], 0
        for s in self._shard_order(self.epoch):
            size = self.sources[s].size
            lo, hi = max(start, offset), min(stop, offset + size)
            if lo < hi:
                arrays, perm = self._shard(int(s))
                idx = perm[lo - offset:hi - offset]
                parts.append({n: a[idx] for n, a in arrays.items()})
            offset += size
        return {n: np.concatenate([p[n] for p in parts]) for n in parts[0]}

    def next_batch(self) -> dict[str, np.ndarray]:
        B, N = self.batch_size, self.num_examples
        if self.position >= N or (self.drop_remainder and self.position + B > N):
            self.epoch, self.position = self.epoch + 1, 0
        start, stop = self.position, min(self.position + B, N)
        batch = self._take(start, stop)
        if self.masking == "dynamic":
            rng = np.random.default_rng([self.seed, self.epoch, 2, start])
            batch = remask(batch, rng, self.masked_lm_prob, self.max_predictions_per_seq,
                           self.vocab_size, self.special_ids, self.mask_id, self.mask_shares)
        self.position = stop
        return {n: batch[n] for n in FEATURE_NAMES}

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        while True:
            yield self.next_batch()


# ----------------------------------------------------------------------------------------------
# top level: build a data directory


def _document_progress() -> Callable[[int, int, int], None]:
    """create_training_instances' progress(done, total, n_instances) on one Progress line."""
    bar: list = []

    def progress(done: int, total: int, n_instances: int) -> None:
        if not bar:
            bar.append(Progress("data", total, "documents"))
        bar[0].update(done, f"{n_instances:,} instances")
        if done == total:
            bar[0].done()

    return progress


def build_pretraining_data(corpus_files: Sequence, vocab_path, out_dir, *,
                           max_seq_length: int = DEFAULT_FLAGS["max_seq_length"],
                           max_predictions_per_seq: int = DEFAULT_FLAGS["max_predictions_per_seq"],
                           masked_lm_prob: float = DEFAULT_FLAGS["masked_lm_prob"],
                           short_seq_prob: float = DEFAULT_FLAGS["short_seq_prob"],
                           dupe_factor: int = DEFAULT_FLAGS["dupe_factor"],
                           random_seed: int = DEFAULT_FLAGS["random_seed"],
                           do_whole_word_mask: bool = DEFAULT_FLAGS["do_whole_word_mask"],
                           do_lower_case: bool = DEFAULT_FLAGS["do_lower_case"],
                           mask_shares=DEFAULT_FLAGS["mask_shares"],
                           instances_per_shard: int = 20_000, verbose: bool = True,
                           tokenizer=None, sentence_order: bool = False, packing: str = "segment_pair") -> dict:
    """Corpus files + vocab.txt -> out_dir with .npz shards and meta.json; returns the meta."""
    check_generator_flags(dupe_factor, short_seq_prob, masked_lm_prob, max_predictions_per_seq)  # before the note below
    if Path(out_dir).exists() and not Path(out_dir).is_dir():  # found before the corpus is read, not after
        raise ValueError(f"output directory {out_dir} is a file; choose another --out")
    if Path(out_dir).is_dir():  # a link or a FIFO where meta.json goes: refused before any shard is written
        outputs.inside_output(out_dir, Path(out_dir) / META_FILE)
    if tokenizer is None:
        tokenizer = BertTokenizer(str(vocab_path), do_lower_case=do_lower_case)
    require_special_tokens(tokenizer, SPECIAL_TOKENS, "pretraining data")
    flags = {"max_seq_length": max_seq_length, "max_predictions_per_seq": max_predictions_per_seq,
             "masked_lm_prob": masked_lm_prob, "short_seq_prob": short_seq_prob,
             "dupe_factor": dupe_factor, "random_seed": random_seed,
             "do_whole_word_mask": do_whole_word_mask, "do_lower_case": do_lower_case,
             "mask_shares": list(check_mask_shares(mask_shares))}
    if sentence_order:  # recorded only when on, so BERT's data keeps its meta.json
        flags["sentence_order"] = True  # next_sentence_labels are SOP labels: 1 = A and B swapped
    if check_packing(packing, sentence_order) != "segment_pair":  # likewise recorded only when changed
        flags["packing"] = packing  # single-segment sequences, next_sentence_labels all 0
    if verbose and max_predictions_per_seq < num_predictions(max_seq_length, masked_lm_prob, 10**9):
        print(f"note: max_predictions_per_seq={max_predictions_per_seq} caps the "
              f"{num_predictions(max_seq_length, masked_lm_prob, 10**9)} predictions a full "
              f"sequence would get (google-research/bert#516)", file=sys.stderr)
    rng = random.Random(random_seed)
    t0 = time.perf_counter()
    instances = create_training_instances(
        [str(p) for p in corpus_files], tokenizer, max_seq_length, dupe_factor, short_seq_prob,
        masked_lm_prob, max_predictions_per_seq, rng, do_whole_word_mask,
        progress=_document_progress() if verbose else None, mask_shares=mask_shares, sentence_order=sentence_order,
        packing=packing)
    features = instances_to_features(instances, tokenizer, max_seq_length, max_predictions_per_seq)
    stats = generation_stats(features, tokenizer)
    tokens = vocab_tokens(tokenizer)
    meta = {"flags": flags, "seed": random_seed, "corpus_files": [str(p) for p in corpus_files],
            "vocab_path": str(vocab_path), "vocab_size": len(tokens),
            "vocab_sha256": vocab_sha256(tokens),
            "special_ids": {t: tokenizer.vocab[t] for t in (PAD, CLS, SEP, MASK) if t in tokenizer.vocab},
            "stats": stats, "seconds": round(time.perf_counter() - t0, 3)}
    meta = write_shards(features, out_dir, instances_per_shard, meta)
    if verbose:
        pairs = None if packing != "segment_pair" else "SOP" if sentence_order else "NSP"
        print(f"wrote {len(meta['shards'])} shard(s) to {out_dir}: {format_stats(stats, pairs)}")
    return meta


def cli(argv: list[str]) -> int:
    p = command_parser("data", "Create MLM/NSP pretraining shards from a corpus "
                                            "(one sentence per line, blank line between documents).")
    p.add_argument("--corpus", nargs="+", required=True, help="input text file(s)")
    p.add_argument("--vocab", required=True, help="vocab.txt")
    p.add_argument("--out", required=True, help="output directory (shards + meta.json)")
    p.add_argument("--max-seq-length", type=int, default=DEFAULT_FLAGS["max_seq_length"])
    p.add_argument("--max-predictions-per-seq", type=int, default=DEFAULT_FLAGS["max_predictions_per_seq"])
    p.add_argument("--masked-lm-prob", type=float, default=DEFAULT_FLAGS["masked_lm_prob"])
    p.add_argument("--short-seq-prob", type=float, default=DEFAULT_FLAGS["short_seq_prob"])
    p.add_argument("--dupe-factor", type=int, default=DEFAULT_FLAGS["dupe_factor"])
    p.add_argument("--random-seed", type=int, default=DEFAULT_FLAGS["random_seed"])
    p.add_argument("--do-whole-word-mask", action="store_true")
    p.add_argument("--mask-shares", default=",".join(f"{x:g}" for x in DEFAULT_FLAGS["mask_shares"]),
                   help="MASK,SAME,RND: what a token chosen for prediction becomes ([MASK], itself, a "
                        "random token), as shares summing to 1 (default: BERT's 0.8,0.1,0.1)")
    p.add_argument("--sentence-order", action="store_true",
                   help="ALBERT's sentence-order pairs (two consecutive segments of one document, "
                        "swapped half the time; label 1 = swapped) instead of BERT's NSP pairs")
    p.add_argument("--packing", choices=PACKINGS, default="segment_pair",
                   help="segment_pair: BERT's sentence pairs (default); full_sentences / doc_sentences: "
                        "RoBERTa's single-segment sequences of whole sentences, crossing documents "
                        "(with a [SEP] between them) or not")
    p.add_argument("--cased", action="store_true", help="do not lower-case (do_lower_case=False)")
    p.add_argument("--instances-per-shard", type=int, default=20_000,
                   help="instances per .npz shard (about 45 MB each at T=128)")
    a = p.parse_args(argv)
    try:
        outputs.check_output(a.out, inputs=[*a.corpus, a.vocab], kind="dir", names=SHARD_FILES)
        build_pretraining_data(a.corpus, a.vocab, a.out, max_seq_length=a.max_seq_length,
                               max_predictions_per_seq=a.max_predictions_per_seq,
                               masked_lm_prob=a.masked_lm_prob, short_seq_prob=a.short_seq_prob,
                               dupe_factor=a.dupe_factor, random_seed=a.random_seed,
                               do_whole_word_mask=a.do_whole_word_mask,
                               do_lower_case=not a.cased, instances_per_shard=a.instances_per_shard,
                               mask_shares=a.mask_shares.split(","), sentence_order=a.sentence_order,
                               packing=a.packing)
    except (ValueError, OSError) as e:  # bad flags, empty corpus, missing/unreadable files
        print(error_line(e), file=sys.stderr)
        return 1
    return 0
