"""Data for a run: corpus files -> cached pretraining shard directories (train, held-out, and
the short phase's), the held-out features, and the corpus a command uses when none is given (the
default Python-docs corpus, or CORPUS=file.txt split and given a vocab of its own)."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from minibert.data.corpus import ensure_default_corpus
from minibert.data.pretraining_data import DEFAULT_FLAGS, FEATURE_NAMES
from minibert.data.shards import build_pretraining_data, load_shards, read_meta
from minibert.io import outputs
from minibert.io.jsonfile import read_json_object
from minibert.io.tensorfile import sha256_file
from minibert.io.textio import iter_lines, read_text
from minibert.loop import rundir
from minibert.text.tokenizer import save_vocab
from minibert.text.wordpiece_trainer import DEFAULT_MERGE_RULE, train_wordpiece
from minibert.train.config import DEFAULT_DATA_CACHE, TrainConfig, check_data_cache


def _slice_corpus(files: tuple, max_lines: int, out: Path) -> list[str]:
    """The first `max_lines` lines of the corpus (cut at a document boundary when possible)."""
    lines: list[str] = []
    for f in files:
        for line in iter_lines(f):
            lines.append(line)
            if len(lines) >= max_lines and not line.strip():
                break
        if len(lines) >= max_lines:
            break
    text = "".join(lines)
    outputs.write_output(out, text, root=out.parent)
    return [str(out)]


class DataDirs(NamedTuple):
    train: Path
    heldout: Path | None
    short_train: Path | None = None  # the training data at short_seq_length (sequence-length warm-up)


def prepare_data(cfg: TrainConfig, verbose: bool = True, names_only: bool = False) -> DataDirs:
    """Generate (or reuse) the pretraining shards for the corpus and the held-out files.

    The cache key is a hash of the corpus contents, the vocab contents and every generation flag,
    so changing any of them makes new shards and an unchanged setup reuses the old ones. The
    held-out set is generated once (`heldout_dupe_factor` passes, default 5: the default corpus
    holds only 82 held-out documents, 240 sequences per pass, too few for a steady NSP accuracy)
    with the fixed seed `data_seed`: its masks are the same in every evaluation and every run.
    `names_only`: the directories these settings use, without reading or generating anything.
    """
    if not names_only:  # the cache is an output folder, whatever named it (--set, a run.json on --resume)
        check_data_cache(cfg.data_cache)
    for f in (*cfg.corpus, *cfg.heldout, cfg.vocab):
        if not Path(f).is_file():
            raise ValueError(f"file {f} does not exist" if not Path(f).exists() else
                             f"{f} is not a regular file (a directory, device or pipe); corpus, heldout and vocab "
                             f"name text files")
    vocab_sha = sha256_file(cfg.vocab)
    flags = dict(max_seq_length=cfg.max_seq_length, max_predictions_per_seq=cfg.max_predictions_per_seq,
                 masked_lm_prob=cfg.masked_lm_prob, short_seq_prob=cfg.short_seq_prob,
                 random_seed=cfg.data_seed)
    if tuple(cfg.mask_shares) != DEFAULT_FLAGS["mask_shares"]:  # in the key only when changed, so the
        flags["mask_shares"] = list(cfg.mask_shares)  # default's cache directories keep their names
    if cfg.sentence_order:  # likewise: SOP pairs (ALBERT)
        flags["sentence_order"] = True
    if cfg.packing != "segment_pair":  # likewise: RoBERTa's packed single-segment sequences
        flags["packing"] = cfg.packing

    def build(files: tuple, dupe: int, kind: str, max_lines: int, **changed) -> Path:
        flags_here = {**flags, **changed}
        key = json.dumps({"files": [sha256_file(f) for f in files], "vocab": vocab_sha, "dupe": dupe,
                          "max_lines": max_lines, **flags_here}, sort_keys=True)
        out = Path(cfg.data_cache) / f"pretrain-{kind}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
        if names_only:
            return out
        try:
            read_meta(out, cfg.vocab)
            if verbose:
                print(f"{kind} data: reusing {out}")
            return out
        except ValueError:
            pass
        if verbose:
            print(f"{kind} data: generating {out} from {', '.join(map(str, files))} (dupe_factor {dupe})")
        src = _slice_corpus(files, max_lines, out.with_name(out.name + ".txt")) if max_lines else files
        build_pretraining_data(list(src), cfg.vocab, out, dupe_factor=dupe, verbose=verbose, **flags_here)
        return out

    train = build(cfg.corpus, cfg.dupe_factor, "train", cfg.max_train_examples)
    heldout = build(cfg.heldout, cfg.heldout_dupe_factor, "heldout", cfg.max_train_examples // 4) if cfg.heldout else None
    short = None
    if cfg.short_seq_length:
        T, _, P = cfg.short_phase()
        short = build(cfg.corpus, cfg.dupe_factor, "train", cfg.max_train_examples, max_seq_length=T,
                      max_predictions_per_seq=P)
    return DataDirs(train, heldout, short)


def load_heldout(data_dir: Path, vocab: str, max_examples: int) -> dict[str, np.ndarray]:
    """The held-out features with their stored (fixed-seed) masks, the first `max_examples`."""
    feats = load_shards(data_dir, vocab, FEATURE_NAMES)
    if max_examples:
        feats = {k: v[:max_examples] for k, v in feats.items()}
    if feats["input_ids"].shape[0] == 0:
        raise ValueError(f"held-out data {data_dir} has no examples")
    return feats


def default_corpus(overrides: dict[str, Any]) -> dict[str, Any]:
    """Fill corpus / heldout / vocab from env CORPUS (own text) or the default Python-docs corpus."""
    if "corpus" in overrides and "vocab" in overrides:
        return overrides

    own = os.environ.get("CORPUS")
    if own:
        return {**own_corpus(own, overrides), **overrides}
    paths = ensure_default_corpus()
    return {"corpus": (str(paths.train),), "heldout": (str(paths.heldout),), "vocab": str(paths.vocab),
            **overrides}


OWN_VOCAB_SIZE = 8192  # the vocabulary learnt for a CORPUS= (or --corpus-from-task) corpus


def own_corpus(path: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """CORPUS=file.txt: hold out every 20th document, and train a vocab on the rest if needed.
    The split (and vocab) go to data/generated/own-<hash>/, written in full or not at all."""
    src = Path(path)
    if not src.is_file():
        raise ValueError(f"CORPUS={path}: file not found (expected one sentence per line, blank lines "
                         f"between documents)")

    # the rule is in the name: a cache from before the frequency rule (its vocab built with the
    # score rule, which cuts common words into characters) is never reused for a new run
    cache = check_data_cache(overrides.get("data_cache") or DEFAULT_DATA_CACHE)
    out = cache / f"own-{sha256_file(src)[:12]}-{DEFAULT_MERGE_RULE}"
    vocab = overrides.get("vocab") or str(out / "vocab.txt")
    files = {"corpus": (str(out / "train.txt"),), "heldout": (str(out / "heldout.txt"),), "vocab": vocab}
    if (out / "train.txt").is_file() and Path(vocab).is_file():
        return files

    docs = [d for d in read_text(src).split("\n\n") if d.strip()]
    if len(docs) < 2:
        raise ValueError(f"CORPUS={path} has {len(docs)} document(s); need at least 2 (separate "
                         f"documents with a blank line)")
    held_out = [i % 20 == 19 or (len(docs) < 20 and i == len(docs) - 1) for i in range(len(docs))]
    held = [d.strip("\n") for d, h in zip(docs, held_out) if h]
    train_docs = [d.strip("\n") for d, h in zip(docs, held_out) if not h]
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        outputs.make_dir(tmp, root=cache)
        outputs.write_output(tmp / "train.txt", "\n\n".join(train_docs) + "\n", root=tmp)
        outputs.write_output(tmp / "heldout.txt", "\n\n".join(held) + "\n", root=tmp)
        if not overrides.get("vocab"):

            print(f"CORPUS={path}: training a {OWN_VOCAB_SIZE}-token WordPiece vocab ({DEFAULT_MERGE_RULE} rule) on its "
                  f"training part -> {vocab}")
            save_vocab(train_wordpiece([tmp / "train.txt"], OWN_VOCAB_SIZE, merge_rule=DEFAULT_MERGE_RULE),
                       tmp / "vocab.txt")
        outputs.replace_dir(tmp, out, root=cache)  # whatever is at `out` (an incomplete directory) is replaced
    finally:
        rundir._remove(tmp)
    return files


def run_data_dirs(run: Path, cfg: TrainConfig) -> DataDirs:
    """The shard directories of a run: the ones its run.json recorded if they still hold the data
    (read_meta checks them against the vocabulary), else generated again into cfg.data_cache,
    after checking that the corpus the run file names hashes to the data the run trained on."""
    recorded = read_json_object(run / "run.json").get("data")
    recorded = {k: v for k, v in recorded.items() if isinstance(v, str)} if isinstance(recorded, dict) else {}
    kept = {}
    for kind in ("train", "heldout"):
        try:
            kept[kind] = Path(recorded[kind])
            read_meta(kept[kind], cfg.vocab)
        except (KeyError, ValueError, OSError):
            kept[kind] = None
    if kept["train"] is not None and (kept["heldout"] is not None or not cfg.heldout):
        return DataDirs(kept["train"], kept["heldout"], None)
    planned = prepare_data(cfg, verbose=False, names_only=True)
    for kind, new in (("train", planned.train), ("heldout", planned.heldout)):
        if kind in recorded and new is not None and Path(recorded[kind]).name != new.name:
            raise ValueError(f"{run}/run.json: the files it names as corpus, held-out text and vocabulary "
                             f"({', '.join(map(str, (*cfg.corpus, *cfg.heldout, cfg.vocab)))}) are not the ones "
                             f"the run trained on: they make {new.name}, the run's {kind} data was "
                             f"{Path(recorded[kind]).name}")
    return prepare_data(cfg, verbose=False)
