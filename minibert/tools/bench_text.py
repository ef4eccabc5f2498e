"""Text benchmarks for `make bench`: WordPiece training and tokenizer encoding speed.

`bench_wordpiece(report)` and `bench_tokenizer(report)` fill `report` (a dict) with named
results and print them. Times are medians of `repeats` (>= 3) runs. Hugging Face `tokenizers`
and `transformers` are optional: imported only here, and skipped with a note when missing.

    python -m minibert.tools.bench_text        # both benchmarks on the default corpus
"""
from __future__ import annotations

import json
import statistics
import time

from minibert.data.corpus import ensure_default_corpus
from minibert.text.tokenizer import SPECIAL_TOKENS, BertTokenizer, basic_tokenize
from minibert.text.wordpiece_trainer import train_wordpiece

VOCAB_SIZE = 8192


def _median_time(fn, repeats: int) -> tuple[float, object]:
    """Median wall time of `repeats` calls of fn(), and the last result."""
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def tokens_per_word(vocab: list[str], lines: list[str]) -> float:
    """WordPiece tokens per basic-tokenizer word, with minibert's tokenizer on `vocab`."""
    tok = BertTokenizer(vocab)
    words = pieces = 0
    for line in lines:
        words += len(basic_tokenize(line))
        pieces += len(tok.tokenize(line))
    return pieces / max(words, 1)


def _hf_train(train_path) -> list[str]:
    """Train the Rust WordPiece trainer with the same specials, casing and size."""
    # lazy: tokenizers is optional (not in pyproject.toml's dependencies)
    from tokenizers import BertWordPieceTokenizer

    hf = BertWordPieceTokenizer(lowercase=True, clean_text=True, handle_chinese_chars=True)
    hf.train([str(train_path)], vocab_size=VOCAB_SIZE, min_frequency=0, limit_alphabet=1000,
             special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    return [t for t, _ in sorted(hf.get_vocab().items(), key=lambda kv: kv[1])]


def bench_wordpiece(report: dict, repeats: int = 3) -> dict:
    """Train an 8192 vocab on the default corpus: minibert (both rules) vs HF tokenizers."""

    paths = ensure_default_corpus()
    heldout = paths.heldout.read_text(encoding="utf-8").splitlines()
    res: dict = {"corpus": str(paths.train), "vocab_size": VOCAB_SIZE, "repeats": repeats}
    for rule in ("score", "frequency"):
        t, vocab = _median_time(lambda: train_wordpiece([paths.train], VOCAB_SIZE,
                                                        merge_rule=rule, progress=False), repeats)
        res[f"minibert_{rule}_s"] = round(t, 3)
        res[f"minibert_{rule}_tokens_per_word"] = round(tokens_per_word(vocab, heldout), 4)
    try:
        # lazy: tokenizers is optional (not in pyproject.toml's dependencies)
        import tokenizers  # noqa: F401
    except ImportError:
        res["hf_tokenizers"] = "skipped: tokenizers is not installed"
    else:
        t, hf_vocab = _median_time(lambda: _hf_train(paths.train), repeats)
        res["hf_tokenizers_s"] = round(t, 3)
        res["hf_tokens_per_word"] = round(tokens_per_word(hf_vocab, heldout), 4)
        for rule in ("score", "frequency"):
            res[f"time_ratio_{rule}_vs_hf"] = round(res[f"minibert_{rule}_s"] / t, 2)
            res[f"tokens_per_word_ratio_{rule}_vs_hf"] = round(
                res[f"minibert_{rule}_tokens_per_word"] / res["hf_tokens_per_word"], 4)
    report["wordpiece"] = res
    print("wordpiece training:", json.dumps(res, indent=2))
    return res


def _hf_slow_tokenizer(vocab_path):
    """transformers' pure-Python BertTokenizer (v5: BertTokenizerLegacy), or None."""
    try:
        # lazy: transformers is optional (not in pyproject.toml's dependencies)
        from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy
        return BertTokenizerLegacy(str(vocab_path), do_lower_case=True)
    except ImportError:
        pass
    # lazy: transformers is optional (not in pyproject.toml's dependencies)
    from transformers import BertTokenizer as HFBertTokenizer
    tok = HFBertTokenizer(str(vocab_path), do_lower_case=True)
    return None if getattr(tok, "is_fast", False) else tok


def bench_tokenizer(report: dict, repeats: int = 3) -> dict:
    """Encode the held-out text: minibert BertTokenizer vs transformers' slow BertTokenizer."""
    paths = ensure_default_corpus()
    lines = [l for l in paths.heldout.read_text(encoding="utf-8").splitlines() if l.strip()]
    n_words = sum(len(l.split()) for l in lines)
    res: dict = {"text": str(paths.heldout), "lines": len(lines), "words": n_words,
                 "repeats": repeats}

    def ours():  # a fresh tokenizer each run, so the word cache starts empty
        tok = BertTokenizer(paths.vocab)
        return [tok.tokenize(l) for l in lines]

    t, our_tokens = _median_time(ours, repeats)
    res["minibert_s"] = round(t, 4)
    res["minibert_words_per_s"] = round(n_words / t)
    try:
        hf = _hf_slow_tokenizer(paths.vocab)
    except ImportError:
        hf = None
        res["transformers"] = "skipped: transformers is not installed"
    if hf is None:
        res.setdefault("transformers", "skipped: no pure-Python BertTokenizer available")
    else:
        t_hf, hf_tokens = _median_time(lambda: [hf.tokenize(l) for l in lines], repeats)
        res["transformers_slow_s"] = round(t_hf, 4)
        res["speedup_vs_transformers_slow"] = round(t_hf / t, 2)
        res["same_tokens_as_transformers"] = sum(a == b for a, b in zip(our_tokens, hf_tokens))
        res["lines_compared"] = len(lines)
    report["tokenizer"] = res
    print("tokenizer encoding:", json.dumps(res, indent=2))
    return res


def main() -> int:
    report: dict = {}
    bench_wordpiece(report)
    bench_tokenizer(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
