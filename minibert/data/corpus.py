"""The default pretraining corpus: the English documentation that ships with Python.

`build_default_corpus()` writes, offline and deterministically (for one Python version):

    data/pydoc/train.txt     one sentence per line, blank line between documents (docs/bert-notes.md §3.1)
    data/pydoc/heldout.txt   ~5% of the documents, chosen by a stable hash of their title
    data/pydoc/vocab.txt     WordPiece vocab (8192, score rule, lowercase) from train.txt only
    data/pydoc/stats.json    documents, sentences, words, bytes per split; Python version;
                             vocab size, rule and held-out tokens per word

Sources (both are part of CPython, PSF licence):
- `pydoc_data.topics.topics`: the language reference and library pages that `help()` shows,
  one document per topic;
- docstrings of the standard library: every public module, and the classes, functions and
  methods it defines, imported in a separate process (skipping modules that fail to import,
  have side effects on import, or are tests). One document per docstring.

Cleaning, in order (see `clean_paragraphs` and `split_sentences`):
- text is cut into paragraphs at blank lines;
- dropped: doctest paragraphs (`>>>`, `...`), grammar productions (`::=`), code blocks (a
  paragraph indented deeper than a previous paragraph that ends with ':' or '::', and all
  deeper paragraphs after it), headings and their underlines, and any paragraph that does not
  end like a sentence (signatures, tables, lists of names) or has fewer than 4 words;
- reST markup is simplified (`:func:`x`` -> x, ``x`` -> x, *x* -> x), whitespace normalised;
- paragraphs are split into sentences by a small regex splitter (`split_sentences`);
- a document is kept only if it has at least 2 sentences; exact duplicate documents are dropped.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections import namedtuple
from pathlib import Path
from pydoc_data.topics import topics

from minibert.io.cli import command_parser
from minibert.io import outputs
from minibert.io.atomic import write_text_atomic
from minibert.io.jsonfile import read_json_object
from minibert.io.textio import error_line, iter_lines, read_text
from minibert.text.tokenizer import BertTokenizer, save_vocab

ROOT = Path(__file__).resolve().parents[2]  # the repository (this file is minibert/data/corpus.py)
DEFAULT_DIR = ROOT / "data" / "pydoc"
HELDOUT_PERCENT = 5
# The default corpus's vocab uses the frequency rule (wordpiece_trainer.DEFAULT_MERGE_RULE, the
# one Hugging Face's Rust WordPiece trainer uses): on this small corpus the course's score rule
# (docs/bert-notes.md §2.2, still the default of `train_wordpiece`) spends the vocab on rare
# strings and gives ~2.1 WordPiece tokens per held-out word against ~1.03 for the frequency rule
# and for HF tokenizers (a vocabulary within a few percent of that trainer's is the aim); see
# data/README.md and `make bench`.
from minibert.text.wordpiece_trainer import DEFAULT_MERGE_RULE, train_wordpiece  # noqa: E402

CorpusPaths = namedtuple("CorpusPaths", ["train", "heldout", "vocab"])


# ---------------------------------------------------------------------------------------------
# Reading the corpus format

def read_documents(files) -> list[list[str]]:
    """Read one-sentence-per-line files: stripped lines; a blank line starts a new document;
    empty documents are dropped. Several files are read in order into one list.

    For statistics and tests. Unlike Google's reader, the end of a file also ends a document
    (Google continues the last document of one file into the next file). Files must be UTF-8
    (minibert.io.textio: the first bad byte is a ValueError naming file, line and byte).
    """
    files = [files] if isinstance(files, (str, Path)) else list(files)
    docs: list[list[str]] = [[]]
    for path in files:
        for line in iter_lines(path):
            line = line.strip()
            if not line:
                docs.append([])
            else:
                docs[-1].append(line)
        docs.append([])  # a file boundary ends a document
    return [d for d in docs if d]


# ---------------------------------------------------------------------------------------------
# Sentence splitting

# A sentence ends at . ! or ? (plus closing quotes/brackets), followed by whitespace and then
# something that can start a sentence: an uppercase letter, a digit, a quote or a bracket.
_SENTENCE_END = re.compile(r"""[.!?]['")\]]*\s+(?=[A-Z0-9"'(\[])""")
# Words whose final period does not end a sentence.
_ABBREVIATIONS = {"e.g", "i.e", "etc", "cf", "vs", "viz", "approx", "mr", "mrs", "dr", "no",
                  "fig", "al", "resp", "incl", "ca", "ch", "sec", "vol", "st", "jr", "sr"}


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences.

    >>> split_sentences("Use os.path.join(), e.g. for paths. It is 3.5 times faster! See below.")
    ['Use os.path.join(), e.g. for paths.', 'It is 3.5 times faster!', 'See below.']

    Never splits inside dotted names (`os.path`) or numbers (`3.5`), since those have no space
    after the period, nor after the abbreviations in `_ABBREVIATIONS` (`e.g. Foo`).
    """
    sentences, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        before = text[start:m.start() + 1]
        last_word = before.split()[-1] if before.split() else ""
        word = last_word.rstrip(".").lstrip("(\"'").lower()
        if last_word.endswith(".") and (word in _ABBREVIATIONS or len(word) == 1):
            continue  # "e.g. Foo", "J. Smith": not an end
        sentences.append(text[start:m.end()].strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if re.search(r"[A-Za-z]", s)]


# ---------------------------------------------------------------------------------------------
# Cleaning documentation text

_UNDERLINE = re.compile(r"^([=*\-~^#\"'`+_])\1{2,}$")
_ROLE = re.compile(r":[\w.-]+(?::[\w.-]+)?:`~?([^`]*)`")
_LITERAL = re.compile(r"``([^`]*)``")
_INTERPRETED = re.compile(r"`([^`<']*?)(?:\s*<[^>]*>)?`_*")
_EMPHASIS = re.compile(r"(?<![\w*])\*{1,2}(\w[^*]*?)\*{1,2}(?![\w*])")
_SENTENCE_LIKE_END = re.compile(r"""[.!?:]['")\]]*$""")


def _paragraphs(text: str) -> list[tuple[int, list[str]]]:
    """Blank-line separated paragraphs as (indent of the first line, stripped lines)."""
    out, current, indent = [], [], 0
    for line in text.expandtabs().splitlines() + [""]:
        stripped = line.strip()
        if not stripped:
            if current:
                out.append((indent, current))
            current = []
            continue
        if not current:
            indent = len(line) - len(line.lstrip())
        current.append(stripped)
    return out


def _simplify_markup(text: str) -> str:
    text = _ROLE.sub(r"\1", text)
    text = _LITERAL.sub(r"\1", text)
    text = _INTERPRETED.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\1", text)
    return " ".join(text.split())


def clean_paragraphs(text: str) -> list[str]:
    """Documentation text -> prose paragraphs, one string each (rules in the module docstring)."""
    kept: list[str] = []
    code_indent = None      # inside a code block: the indent of the paragraph introducing it
    prev = None             # (indent, ends with ':') of the previous prose-like paragraph
    for indent, lines in _paragraphs(text):
        if code_indent is not None:
            if indent > code_indent:
                continue
            code_indent = None
        if prev is not None and prev[1] and indent > prev[0]:
            code_indent = prev[0]  # an indented block after "...:" or "...::" is code
            prev = None
            continue
        # headings: a line followed by an underline, possibly inside a paragraph
        lines = [l for i, l in enumerate(lines)
                 if not _UNDERLINE.match(l)
                 and not (i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]))]
        if not lines:
            continue
        joined = " ".join(lines)
        prev = (indent, joined.endswith(":"))
        if lines[0].startswith((">>>", "...", "$ ", "% ")) or "::=" in joined:
            prev = None
            continue
        if joined.endswith("::"):
            joined = joined[:-1]  # reST "Example::" introduces code and reads as "Example:"
        text_ = _simplify_markup(joined)
        if len(text_.split()) < 4 or not _SENTENCE_LIKE_END.search(text_):
            continue
        kept.append(text_)
    return kept


def document_sentences(text: str) -> list[str]:
    """Documentation text -> sentences (all paragraphs)."""
    return [s for p in clean_paragraphs(text) for s in split_sentences(p)]


# ---------------------------------------------------------------------------------------------
# Collecting the raw text

# Modules never imported: side effects (open a browser, print, start a GUI), tests, our source.
EXCLUDED_MODULES = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "test",
                    "lib2to3", "pydoc_data", "readline", "ensurepip", "venv", "msilib",
                    "winreg", "winsound", "msvcrt", "_winapi", "encodings", "xxsubtype",
                    "xxlimited", "xxlimited_35", "__main__"}

# Runs in a fresh interpreter, so imports (and their warnings and prints) stay out of ours.
_COLLECT_SCRIPT = r'''
import contextlib, importlib, inspect, io, json, os, pkgutil, sys, types, warnings
excluded, out_path = set(json.loads(sys.argv[1])), sys.argv[2]

def skip(name):
    parts = name.split(".")
    return (parts[0] in excluded or any(p.startswith("_") for p in parts)
            or any(p in ("test", "tests", "idle_test", "__main__") for p in parts))

def safe_import(name):
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
             contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            return importlib.import_module(name)
    except BaseException:
        return None

names = []
for top in sorted(sys.stdlib_module_names):
    if skip(top):
        continue
    mod = safe_import(top)
    if mod is None:
        continue
    names.append(top)
    if hasattr(mod, "__path__"):
        subs = [m.name for m in pkgutil.walk_packages(mod.__path__, top + ".", onerror=lambda n: None)]
        names.extend(sorted(n for n in subs if not skip(n)))

docs, seen = [], set()
def doc_of(obj):
    doc = getattr(obj, "__doc__", None)
    return inspect.cleandoc(doc) if isinstance(doc, str) and doc.strip() else None

def defined_here(obj, name):
    # defined in this module, or in a private module and re-exported here (io <- _io)
    owner = getattr(obj, "__module__", None) or ""
    return owner == name or owner.startswith("_")

for name in sorted(set(names)):
    mod = safe_import(name)
    if mod is None:
        continue
    if doc_of(mod):
        docs.append([name, doc_of(mod)])
    for attr in sorted(vars(mod)):
        obj = vars(mod)[attr]
        if attr.startswith("_") or id(obj) in seen or not defined_here(obj, name):
            continue
        if inspect.isclass(obj):
            seen.add(id(obj))
            # one document per class: its docstring, then its public methods' docstrings
            parts = [doc_of(obj)] + [doc_of(vars(obj)[m]) for m in sorted(vars(obj))
                                     if not m.startswith("_") and callable(vars(obj)[m])]
            parts = [p for p in parts if p]
            if parts:
                docs.append([f"{name}.{attr}", "\n\n".join(parts)])
        elif inspect.isfunction(obj) or inspect.isbuiltin(obj):
            seen.add(id(obj))
            if doc_of(obj):
                docs.append([f"{name}.{attr}", doc_of(obj)])
with open(out_path, "w", encoding="utf-8") as f:
    json.dump(docs, f)
'''


def collect_docstrings(timeout: float = 600.0) -> list[tuple[str, str]]:
    """(title, raw docstring) for the standard library, collected in a subprocess."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "docs.json"
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONWARNINGS="ignore",
                   MPLBACKEND="Agg", PYTHONHASHSEED="0")
        proc = subprocess.run(
            [sys.executable, "-c", _COLLECT_SCRIPT, json.dumps(sorted(EXCLUDED_MODULES)), str(out)],
            cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, timeout=timeout, text=True)
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError(f"collecting docstrings failed (exit {proc.returncode}):\n"
                               f"{proc.stderr[-2000:]}")
        return [tuple(d) for d in json.loads(out.read_text(encoding="utf-8"))]


def collect_topics() -> list[tuple[str, str]]:
    """(title, text) for every pydoc topic (the pages `help('if')` shows)."""
    return [(f"topic:{name}", topics[name]) for name in sorted(topics)]


def make_documents(raw: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """Clean each raw text into sentences; keep documents with >= 2 sentences, no duplicates."""
    docs, seen = [], set()
    for title, text in raw:
        sentences = document_sentences(text)
        if len(sentences) < 2:
            continue
        key = hashlib.sha1("\n".join(sentences).encode("utf-8")).digest()
        if key in seen:
            continue
        seen.add(key)
        docs.append((title, sentences))
    return docs


def is_heldout(title: str, percent: int = HELDOUT_PERCENT) -> bool:
    """Stable (hash-seed independent) choice of held-out documents by title."""
    return int.from_bytes(hashlib.sha1(title.encode("utf-8")).digest()[:4], "big") % 100 < percent


def write_documents(docs: list[list[str]], path: Path) -> None:
    """Original BERT format: one sentence per line, one blank line between documents."""
    write_text_atomic(path, "\n\n".join("\n".join(d) for d in docs) + "\n")


def split_stats(docs: list[list[str]], path: Path) -> dict:
    return {"documents": len(docs),
            "sentences": sum(len(d) for d in docs),
            "words": sum(len(s.split()) for d in docs for s in d),
            "bytes": path.stat().st_size}


# ---------------------------------------------------------------------------------------------
# Building

def _resolve(out_dir) -> Path:
    return DEFAULT_DIR if out_dir is None else Path(out_dir)


def build_default_corpus(out_dir: str | Path | None = None, vocab_size: int = 8192,
                         force: bool = False, merge_rule: str = DEFAULT_MERGE_RULE) -> CorpusPaths:
    """Build train/held-out text and the vocab under `out_dir` (default: <repo>/data/pydoc).

    Steps whose outputs already exist are skipped unless `force`.
    """

    out = _resolve(out_dir)
    paths = CorpusPaths(out / "train.txt", out / "heldout.txt", out / "vocab.txt")
    for path in (*paths, out / "stats.json"):  # a link or a FIFO in their place: refused before any work
        outputs.inside_output(out, path)
    outputs.make_dir(out)
    t0 = time.perf_counter()
    if force or not (paths.train.exists() and paths.heldout.exists()):
        print("corpus: reading pydoc topics and standard-library docstrings ...", flush=True)
        raw = collect_topics() + collect_docstrings()
        docs = make_documents(raw)
        train = [s for title, s in docs if not is_heldout(title)]
        heldout = [s for title, s in docs if is_heldout(title)]
        write_documents(train, paths.train)
        write_documents(heldout, paths.heldout)
        stats = {"python": platform.python_version(),
                 "sources": {"pydoc_topics": sum(t.startswith("topic:") for t, _ in docs),
                             "docstrings": sum(not t.startswith("topic:") for t, _ in docs)},
                 "train": split_stats(train, paths.train),
                 "heldout": split_stats(heldout, paths.heldout)}

        write_text_atomic(out / "stats.json", json.dumps(stats, indent=2) + "\n")
        print(f"corpus: {stats['train']['documents']} train / {stats['heldout']['documents']} "
              f"held-out documents, {stats['train']['words']:,} train words "
              f"({time.perf_counter() - t0:.1f}s)", flush=True)
    else:
        print(f"corpus: {paths.train} exists, skipping (use --force to rebuild)")
    if force or not paths.vocab.exists():
        print(f"corpus: training a {vocab_size}-token WordPiece vocab on {paths.train} ...",
              flush=True)
        vocab = train_wordpiece([paths.train], vocab_size, do_lower_case=True,
                                merge_rule=merge_rule)
        save_vocab(vocab, paths.vocab)
        print(f"corpus: wrote {paths.vocab} ({len(vocab)} tokens)")
        _record_vocab_stats(out / "stats.json", vocab, merge_rule, paths.heldout)
    else:
        print(f"corpus: {paths.vocab} exists, skipping")
    return paths


def _record_vocab_stats(stats_path: Path, vocab: list[str], merge_rule: str, heldout: Path):
    """Add the vocab's size, rule and held-out tokens per word to stats.json."""
    tok = BertTokenizer(vocab)
    words = pieces = 0
    for line in read_text(heldout).splitlines():
        words += len(tok.basic_tokenize(line))
        pieces += len(tok.tokenize(line))
    stats = read_json_object(stats_path) if stats_path.exists() else {}  # a damaged one: an error naming it
    stats["vocab"] = {"size": len(vocab), "merge_rule": merge_rule, "lowercase": True,
                      "heldout_tokens_per_word": round(pieces / max(words, 1), 4)}
    write_text_atomic(stats_path, json.dumps(stats, indent=2) + "\n")


def ensure_default_corpus() -> CorpusPaths:
    """The default corpus paths, building whatever is missing."""
    paths = CorpusPaths(DEFAULT_DIR / "train.txt", DEFAULT_DIR / "heldout.txt",
                        DEFAULT_DIR / "vocab.txt")
    if all(p.exists() for p in paths):
        return paths
    return build_default_corpus()


def cli(argv: list[str]) -> int:
    """python -m minibert corpus [--out data/pydoc] [--vocab-size 8192] [--force]"""
    parser = command_parser("corpus", "Build the default corpus (Python's own documentation) and its vocab.")
    parser.add_argument("--out", default=None, help=f"output directory (default {DEFAULT_DIR})")
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument("--force", action="store_true", help="rebuild even if outputs exist")
    parser.add_argument("--merge-rule", choices=("score", "frequency"), default=DEFAULT_MERGE_RULE,
                        help=f"WordPiece merge rule for the vocab (default {DEFAULT_MERGE_RULE})")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    try:
        if args.out:
            outputs.check_output(args.out, kind="dir")
        paths = build_default_corpus(args.out, args.vocab_size, args.force, args.merge_rule)
    except (OSError, ValueError, RuntimeError, subprocess.TimeoutExpired) as e:
        print(error_line(e), file=sys.stderr)
        return 1
    stats_path = paths.train.parent / "stats.json"
    if stats_path.exists():
        print(stats_path.read_text(encoding="utf-8").strip())
    print(f"done in {time.perf_counter() - t0:.1f}s")
    return 0
