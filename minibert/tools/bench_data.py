"""Benchmarks of the data pipeline, called by `make bench` (minibert.tools.bench).

Two numbers, each the median of several runs on this machine:
- generation: tokens/s of `create_training_instances` + `instances_to_features` (reading and
  tokenizing the corpus included), counting the real tokens of the instances produced;
- batching: tokens/s that `BatchIterator` delivers with dynamic masking (masks redrawn for every
  batch), counting batch x max_seq_length positions, which is what a training step consumes.
Both must be well above the tokens/s of a training step (the issue asks for >= 5x).

Corpus: data/pydoc/train.txt (first `max_lines` lines) with data/pydoc/vocab.txt if they exist,
else data/sample.txt, else a synthetic corpus; without a vocab.txt the vocab is every word of
the corpus plus single characters, so nothing is [UNK].
"""
from __future__ import annotations

import random
import statistics
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

from minibert.data import pretraining_data as pd
from minibert.data import shards
from minibert.io import outputs
from minibert.text.tokenizer import BertTokenizer, basic_tokenize

ROOT = Path(__file__).resolve().parents[2]  # the repository
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _synthetic_corpus(path: Path, n_docs: int = 400, seed: int = 0) -> None:
    rng = random.Random(seed)
    words = ["w%d" % i for i in range(2000)]
    docs = []
    for _ in range(n_docs):
        sents = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 25)))
                 for _ in range(rng.randint(3, 30))]
        docs.append("\n".join(sents))
    outputs.write_output(path, "\n\n".join(docs) + "\n", root=path.parent)


def _corpus_and_vocab(workdir: Path, max_lines: int) -> tuple[Path, list[str] | Path, str]:
    """(corpus file, vocab list or vocab.txt path, description)."""
    for corpus in (ROOT / "data" / "pydoc" / "train.txt", ROOT / "data" / "sample.txt"):
        if corpus.is_file() and corpus.stat().st_size > 0:
            with open(corpus, encoding="utf-8", errors="replace") as f:
                lines = [line for _, line in zip(range(max_lines), f)]
            text = "".join(lines)
            break
    else:
        corpus = workdir / "synthetic.txt"
        _synthetic_corpus(corpus)
        text = corpus.read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
    sub = workdir / "corpus.txt"
    outputs.write_output(sub, text, root=workdir)
    vocab_file = corpus.parent / "vocab.txt"
    if vocab_file.is_file():
        return sub, vocab_file, f"{corpus.relative_to(ROOT) if corpus.is_relative_to(ROOT) else corpus.name} ({len(lines)} lines), {vocab_file.name}"
    counts = Counter(w for line in lines for w in basic_tokenize(line))
    chars = sorted({c for w in counts for c in w})
    vocab = SPECIALS + sorted(counts) + [c for c in chars if c not in counts] + ["##" + c for c in chars]
    return sub, vocab, f"{corpus.name} ({len(lines)} lines), corpus-word vocab ({len(vocab)})"


def bench_data(report: dict, runs: int = 3, max_lines: int = 5_000, max_seq_length: int = 128,
               max_predictions_per_seq: int = 20, dupe_factor: int = 2, batch_size: int = 32,
               n_batches: int = 200) -> dict:
    """Measure generation and batching throughput; fill `report["data"]` and print a summary."""
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        corpus, vocab, what = _corpus_and_vocab(workdir, max_lines)
        gen_times, tokens, feats = [], 0, None
        for r in range(runs):
            tok = BertTokenizer(vocab if isinstance(vocab, list) else str(vocab))  # fresh word cache
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                instances = pd.create_training_instances(
                    [corpus], tok, max_seq_length, dupe_factor, 0.1, 0.15,
                    max_predictions_per_seq, random.Random(12345 + r))
            feats = pd.instances_to_features(instances, tok, max_seq_length, max_predictions_per_seq)
            gen_times.append(time.perf_counter() - t0)
            tokens = int(feats["input_mask"].sum())
        gen_s = statistics.median(gen_times)

        tok = BertTokenizer(vocab if isinstance(vocab, list) else str(vocab))
        shards.write_shards(feats, workdir / "shards", instances_per_shard=max(1, len(feats["input_ids"]) // 4),
                        meta={"vocab_size": len(tok.vocab), "flags": {"masked_lm_prob": 0.15},
                              "special_ids": {t: tok.vocab[t] for t in ("[PAD]", "[CLS]", "[SEP]", "[MASK]")}})
        results = {}
        for masking in ("static", "dynamic"):
            times = []
            for r in range(runs):
                it = shards.BatchIterator(workdir / "shards", batch_size, seed=r, masking=masking)
                t0 = time.perf_counter()
                for _ in range(n_batches):
                    it.next_batch()
                times.append(time.perf_counter() - t0)
            results[masking] = batch_size * max_seq_length * n_batches / statistics.median(times)

        remask_times = []
        for r in range(runs):
            t0 = time.perf_counter()
            pd.remask(feats, r, 0.15, max_predictions_per_seq, len(tok.vocab),
                      [tok.vocab["[CLS]"], tok.vocab["[SEP]"]], tok.vocab["[MASK]"])
            remask_times.append(time.perf_counter() - t0)

    n = int(feats["input_ids"].shape[0])
    out = {
        "corpus": what,
        "instances": n,
        "instance_tokens": tokens,
        "generation_seconds": round(gen_s, 3),
        "generation_tokens_per_s": round(tokens / gen_s),
        "batch_static_tokens_per_s": round(results["static"]),
        "batch_dynamic_tokens_per_s": round(results["dynamic"]),
        "remask_full_dataset_seconds": round(statistics.median(remask_times), 4),
        "remask_tokens_per_s": round(n * max_seq_length / statistics.median(remask_times)),
        "settings": f"T={max_seq_length} P={max_predictions_per_seq} dupe={dupe_factor} "
                    f"batch={batch_size} runs={runs} (medians)",
    }
    report["data"] = out
    print(f"data: {what}; {out['settings']}")
    print(f"  generation (read+tokenize+instances+features): {out['generation_tokens_per_s']:,} tokens/s "
          f"({n} instances, {tokens} tokens in {gen_s:.2f}s)")
    print(f"  BatchIterator static : {out['batch_static_tokens_per_s']:,} tokens/s (B x T positions)")
    print(f"  BatchIterator dynamic: {out['batch_dynamic_tokens_per_s']:,} tokens/s (B x T positions)")
    print(f"  remask whole data set: {out['remask_full_dataset_seconds']}s "
          f"({out['remask_tokens_per_s']:,} positions/s)")
    return out


if __name__ == "__main__":
    bench_data({})
