"""Golden runs: proof that a refactor changed no bits of what the trainers compute.

Runs very small trainings of every trainer through the real command line (`python -m minibert
...` in a subprocess, from this repository's root), each in a folder of its own, hashes what
each wrote, and writes the hashes to a JSON file; `--compare` checks them against an earlier file
(the hashes of the code before the refactor, taken on the same machine):

    python tests/devtools/golden_runs.py --out before.json                     # on the old code
    python tests/devtools/golden_runs.py --out after.json --compare before.json  # on the new code
    python tests/devtools/golden_runs.py --out x.json --only train-resume finetune-squad2 --keep /tmp/golden
    python /elsewhere/golden_runs.py --repo . --out after.json --compare before.json  # a copy, run on .

`--compare` prints EQUAL or DIFFERENT for each run (and which files differ, are new or are
missing) and exits 1 on any difference, missing run or failed command. `--keep DIR` leaves every
run's folder (its fixtures, outputs and the log of each command) in DIR/<name> for a look.

Every command line is in RUNS below, and nowhere else: when the refactor renames a flag or a
setting, only that table changes. A run is a list of commands run in order in one folder;
`{fx}` is the folder of the fixtures (small corpora and task files this script writes, the same
bytes every time) and `{out}` the folder whose files are hashed. A command that starts with
`SIGINT_AFTER` is sent Ctrl-C once its metrics.jsonl (the given path) holds a train record of that
step, and must exit 130 (interrupted, saved); the next command resumes it. The step at which it
stops varies with timing, but a bit-exact resume ends with the same files whatever that step, and
only those final files are hashed (the double run of this script checks it).

What is hashed, per run, keyed by the file's path relative to {out} (a run of 12 or more hex
digits in a name, like a data cache's key, reads `#`: such a key hashes settings, whose names may
change):
- every *.safetensors file (model weights, optimizer state): its bytes;
- every *.npz file (pretraining shards): each array's name, dtype, shape and bytes, not the zip
  container around them;
- every *.txt file (vocabularies, corpus splits): its bytes;
- metrics.jsonl and every other *.json / *.jsonl result (eval.json, predictions.json, ...): the
  canonical JSON of its records without timing fields (time, elapsed, seconds, tokens/s, ETA, ms,
  dates) and without strings that are paths;
- run.json and the *config.json files: only their numbers (model sizes, step counts, the best
  dev score), outside run.json's settings: settings may be renamed, the model's result may not;
- not hashed: trainer_state.json (its step, RNG and data position decide what a resumed run
  computes, and the resume runs hash that), shard meta.json (the arrays are hashed), curves.png,
  the lock file, stdout.
Each run also gets a combined hash of its {path: sha256} table.

The runs use one thread (NUMBA_NUM_THREADS, OMP_NUM_THREADS, OPENBLAS_NUM_THREADS = 1) and none
of the caller's MINIBERT_* variables or CORPUS: every run takes minibert's defaults. Hashes are
comparable only between runs on the same machine with the same NumPy and Numba (the JSON records
both; --compare warns when they differ). The whole script takes about a minute or two on 2 cores.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# the repository whose minibert runs (--repo changes it): worked out here, not by minibert.io.paths, since a
# copy of this script also runs on checkouts older than that module
ROOT = Path(__file__).resolve().parents[2]

# =============================================================================================
# THE TABLE: every command line of every run. {fx} = fixtures folder, {out} = hashed folder.

SIGINT_AFTER = "SIGINT_AFTER"  # [SIGINT_AFTER, "<metrics.jsonl under {out}>", "<step>", *argv]


def _sets(**kw) -> list[str]:
    return [a for k, v in kw.items() for a in ("--set", f"{k}={v}")]


CORPUS = ["--corpus", "{fx}/corpus/train.txt", "--heldout", "{fx}/corpus/heldout.txt",
          "--vocab", "{fx}/corpus/vocab.txt"]
# a 2-layer, 16-wide BERT-family model on 32-token sequences (the fixtures' vocabulary: 50 tokens)
SMALL_BERT = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                  max_position_embeddings=32, max_seq_length=32, max_predictions_per_seq=5, batch_size=8,
                  dupe_factor=2, heldout_dupe_factor=2, eval_examples=32, embedding_size=8, curves=0)
# train-tiny: its recipe (minutes 9.5, steps fitted to them, ...) made small, fixed and timeless
TINY_RUN = _sets(data_cache="{out}/cache", out="{out}/run", minutes=0, steps=6, warmup_steps=2, log_interval=2,
                 eval_interval=3, checkpoint_interval=3, **SMALL_BERT)
TINY_SETS = [*_sets(corpus="{fx}/corpus/train.txt", heldout="{fx}/corpus/heldout.txt", vocab="{fx}/corpus/vocab.txt"),
             *TINY_RUN]
# train: the same model, data and length
TRAIN = [*CORPUS, "--steps", "8", "--warmup-steps", "2", "--log-interval", "2", "--eval-interval", "4", "--checkpoint-interval", "2",
         *_sets(data_cache="{out}/cache", **SMALL_BERT)]
# a pretrained model for the fine-tuning runs: {out}/pre
PRE = ["train", *CORPUS, "--out", "{out}/pre", "--steps", "4", "--warmup-steps", "1", "--log-interval", "2",
       "--eval-interval", "4", *_sets(data_cache="{out}/cache", **SMALL_BERT)]
PRE_ALBERT = [*PRE, "--preset", "albert-tiny"]
PRE_ELECTRA = [*PRE, "--preset", "electra-tiny"]
PRE_LTR = [*PRE, *_sets(objective="ltr")]  # left to right (the paper's LTR & No NSP)
T5 = [*CORPUS, "--max-seq-length", "24", "--batch-size", "4", "--warmup-steps", "2", "--log-interval", "2", "--eval-interval", "3",
      "--minutes", "0"]
XLNET = [*CORPUS, *_sets(hidden_size=16, intermediate_size=32, max_seq_length=16, batch_size=4, eval_examples=8,
                         warmup_steps=2, log_interval=2, eval_interval=3, checkpoint_interval=3)]
FINETUNE = ["--batch-size", "8", "--lr", "1e-3", "--dropout", "0.1", "--max-seq-length", "32", "--quiet"]

RUNS: dict[str, list[list[str]]] = {
    # train-tiny, each preset it takes, and the two it routes to their own commands
    "train-tiny": [["train-tiny", "--preset", "tiny", *TINY_SETS]],
    "train-tiny-roberta": [["train-tiny", "--preset", "roberta-tiny", *TINY_SETS]],
    "train-tiny-albert": [["train-tiny", "--preset", "albert-tiny", *TINY_SETS]],
    "train-tiny-electra": [["train-tiny", "--preset", "electra-tiny", *TINY_SETS,
                            *_sets(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)]],
    "train-tiny-t5": [["train-tiny", "--preset", "t5-tiny", *T5, "--out", "{out}/run", "--steps", "3"]],
    "train-tiny-xlnet": [["train-tiny", "--preset", "xlnet-tiny", *XLNET, "--out", "{out}/run", "--steps", "4"]],
    # pretraining paused part-way (--max-steps-this-run) and resumed (--resume)
    "train-resume": [["train", *TRAIN, "--dropout", "0.1", "--out", "{out}/run", "--max-steps-this-run", "3"],
                     ["train", "--resume", "{out}/run"]],
    "train-roberta-resume": [["train", "--preset", "roberta-tiny", *TRAIN, "--out", "{out}/run",
                              "--max-steps-this-run", "3"],
                             ["train", "--resume", "{out}/run"]],
    "train-albert-resume": [["train", "--preset", "albert-tiny", *TRAIN, "--out", "{out}/run",
                             "--max-steps-this-run", "5"],
                            ["train", "--resume", "{out}/run"]],
    "train-electra-resume": [["train", "--preset", "electra-tiny", *TRAIN, "--dropout", "0.1", "--out", "{out}/run",
                              "--max-steps-this-run", "3"],
                             ["train", "--resume", "{out}/run"]],
    "train-t5-resume": [["train-t5", "--preset", "t5-micro", *T5, "--out", "{out}/run", "--steps", "7",
                         "--checkpoint-interval", "3", "--max-steps-this-run", "4"],
                        ["train-t5", "--resume", "{out}/run"]],
    "train-xlnet-resume": [["train-xlnet", *XLNET, "--out", "{out}/run", "--steps", "7", "--max-steps-this-run", "4"],
                           ["train-xlnet", "--resume", "{out}/run"]],
    # T5 fine-tuned text to text on SST-2-format files, from a train-t5 run
    "train-t5-sst2": [["train-t5", "--preset", "t5-micro", *T5, "--out", "{out}/pre", "--steps", "3"],
                      ["train-t5", "--mode", "sst2", "--data", "{fx}/sst", "--init", "{out}/pre", "--out", "{out}/ft",
                       "--steps", "4", "--batch-size", "4", "--warmup-steps", "1", "--log-interval", "2", "--eval-interval", "2",
                       "--minutes", "0"]],
    # fine-tuning: sequence classification, token classification, SQuAD 2.0, each from {out}/pre
    "finetune-seq": [PRE, ["finetune", "custom", "--format", "glue-single", "--data", "{fx}/sst", "--init", "{out}/pre",
                           "--out", "{out}/ft", "--epochs", "2", "--log-interval", "2", *FINETUNE]],
    "finetune-token": [PRE, ["finetune", "custom", "--format", "conll", "--data", "{fx}/conll", "--init", "{out}/pre",
                             "--out", "{out}/ft", "--epochs", "2", "--log-interval", "2", *FINETUNE]],
    "finetune-squad2": [PRE, ["finetune", "squad2", "--data", "{fx}/squad2", "--init", "{out}/pre", "--out", "{out}/ft",
                              "--epochs", "2", "--batch-size", "4", "--lr", "1e-3", "--max-seq-length", "24",
                              "--doc-stride", "8", "--log-interval", "2", "--quiet"]],
    # the random-init control of {out}/pre (--init none --like) on sentence pairs
    "finetune-pair-control": [PRE, ["finetune", "custom", "--format", "glue-pair", "--data", "{fx}/pair",
                                    "--init", "none", "--like", "{out}/pre", "--out", "{out}/ft", "--epochs", "2",
                                    "--log-interval", "2", *FINETUNE]],
    # the family members' task models, a choice task (SWAG's format; next-sentence choice built from
    # a corpus), the feature-based tagger and the left-to-right model's BiLSTM head
    "finetune-albert-swag": [PRE_ALBERT, ["finetune", "custom", "--format", "swag", "--data", "{fx}/swag",
                                          "--init", "{out}/pre", "--out", "{out}/ft", "--epochs", "2",
                                          "--log-interval", "2", *FINETUNE]],
    "finetune-electra-nextsent": [PRE_ELECTRA, ["finetune", "nextsent", "--data", "{fx}/corpus", "--init", "{out}/pre",
                                                "--out", "{out}/ft", "--steps", "6", "--eval-per-epoch", "2",
                                                "--log-interval", "2", *FINETUNE]],
    "finetune-frozen-bilstm": [PRE, ["finetune", "custom", "--format", "conll", "--data", "{fx}/conll", "--init",
                                     "{out}/pre", "--out", "{out}/ft", "--epochs", "2", "--frozen", "second_to_last",
                                     "--frozen-tagger", "bilstm", "--log-interval", "2", *FINETUNE]],
    "finetune-causal-bilstm": [PRE_LTR, ["finetune", "custom", "--format", "glue-single", "--data", "{fx}/sst",
                                         "--init", "{out}/pre", "--out", "{out}/ft", "--epochs", "2", "--causal",
                                         "--bilstm", "--log-interval", "2", *FINETUNE]],
    # in-domain pretraining: a task's training text (labels dropped) with a vocabulary learnt from it
    "train-tiny-task-corpus": [["train-tiny", "--corpus-from-task", "sst2", "--data", "{fx}/sst", *TINY_RUN]],
    # a fine-tuning run interrupted (Ctrl-C) part-way and resumed
    "finetune-resume": [PRE, [SIGINT_AFTER, "ft/metrics.jsonl", "3",
                              "finetune", "custom", "--format", "glue-single", "--data", "{fx}/sst", "--init",
                              "{out}/pre", "--out", "{out}/ft", "--epochs", "12", "--log-interval", "1", *FINETUNE],
                        ["finetune", "--resume", "{out}/ft", "--quiet"]],
}

# =============================================================================================
# fixtures: seeded, the same bytes every time

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SHARED = ["the", "a", "is", "on", "of", "and", "with", "to", "."]
TOPICS = {
    "cats": ["cat", "kitten", "purrs", "sleeps", "mat", "milk"],
    "dogs": ["dog", "puppy", "barks", "runs", "park", "bone"],
    "ships": ["ship", "sail", "floats", "docks", "harbour", "anchor"],
    "code": ["function", "returns", "list", "string", "calls", "value"],
}
EXTRA = ["good", "bad", "film", "sst", "##2", "sentence", ":", "positive", "negative", "who", "what", "was"]


def _sentence(rng, words) -> str:
    return f"the {words[rng.integers(2)]} {words[2 + rng.integers(2)]} on a {words[4]} with the {words[5]} ."


def _topic_corpus(path: Path, n_docs: int, seed: int) -> None:
    """Documents that cycle through the topics (one sentence a line, a blank line between documents)."""
    rng = np.random.default_rng(seed)
    names = list(TOPICS)
    docs = ["\n".join(_sentence(rng, TOPICS[names[i % len(names)]]) for _ in range(rng.integers(4, 9)))
            for i in range(n_docs)]
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")


def write_fixtures(fx: Path) -> None:
    corpus = fx / "corpus"
    corpus.mkdir(parents=True)
    _topic_corpus(corpus / "train.txt", 80, 0)
    _topic_corpus(corpus / "heldout.txt", 12, 1)
    vocab = SPECIALS + SHARED + sorted({w for ws in TOPICS.values() for w in ws}) + EXTRA
    (corpus / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")

    # each fixture draws from a Generator of its own: adding one leaves the others' bytes as they were
    for seed, (name, header) in enumerate((("sst", "sentence\tlabel"), ("pair", "sentence1\tsentence2\tlabel"))):
        rng = np.random.default_rng(10 + seed)
        (fx / name).mkdir()
        for split, n in (("train", 64), ("dev", 16)):
            rows = [header]
            for _ in range(n):
                label = int(rng.integers(2))
                a = _sentence(rng, TOPICS["cats" if label else "dogs"])
                b = _sentence(rng, TOPICS["ships" if rng.integers(2) else "code"])
                rows.append(f"{a}\t{label}" if name == "sst" else f"{a}\t{b}\t{label}")
            (fx / name / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")

    (fx / "conll").mkdir()
    rng = np.random.default_rng(12)
    for split, n in (("train", 24), ("dev", 8)):
        sentences = []
        for _ in range(n):
            topic = TOPICS[list(TOPICS)[rng.integers(4)]]
            words = _sentence(rng, topic).split()
            sentences.append("\n".join(f"{w}\t{'B-' + w if w in topic[:2] else 'O'}" for w in words))
        (fx / "conll" / f"{split}.conll").write_text("\n\n".join(sentences) + "\n\n", encoding="utf-8")

    (fx / "swag").mkdir()
    rng = np.random.default_rng(13)
    header = "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label"
    names = list(TOPICS)
    for split, n in (("train", 24), ("dev", 8)):
        rows = [header]
        for i in range(n):
            topic = names[rng.integers(4)]
            label = int(rng.integers(4))
            endings = [_sentence(rng, TOPICS[topic if j == label else names[(names.index(topic) + 1 + j) % 4]])
                       for j in range(4)]
            rows.append(f"v{i},{i},x,{_sentence(rng, TOPICS[topic])},then,gold,{','.join(endings)},{label}")
        (fx / "swag" / f"{split}.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")

    (fx / "squad2").mkdir()
    rng = np.random.default_rng(14)
    paragraphs = []
    for i, topic in enumerate(TOPICS.values()):
        context = " ".join(_sentence(rng, topic) for _ in range(3))
        qas = [{"id": f"q{i}a", "question": f"what {topic[2]} on a {topic[4]}", "is_impossible": False,
                "answers": [{"text": context.split()[1], "answer_start": len("the ")}]},
               {"id": f"q{i}b", "question": f"who {topic[3]} with the milk", "is_impossible": True, "answers": []}]
        paragraphs.append({"context": context, "qas": qas})
    data = {"version": "v2.0", "data": [{"title": "topics", "paragraphs": paragraphs}]}
    for name in ("train-v2.0.json", "dev-v2.0.json"):
        (fx / "squad2" / name).write_text(json.dumps(data, indent=1), encoding="utf-8")


# =============================================================================================
# hashing

TIMING_KEY = re.compile(r"(^|_)(time|times|elapsed|seconds|secs|sec|eta|ms|date|datetime|timestamp|wall|duration|"
                        r"clock|speed|throughput)($|_)|per_s($|_)|per_sec|_s$")
NOT_HASHED = {"trainer_state.json", "meta.json"}  # see the module docstring
NUMBERS_ONLY = re.compile(r"(^|_)config\.json$|^run\.json$")
HEX_RUN = re.compile(r"[0-9a-f]{12,}")


def _is_path(s: str) -> bool:
    """A file or folder name (an answer text with a slash in it has spaces too)."""
    return s.startswith((os.sep, "/")) or (("/" in s or os.sep in s) and not any(c.isspace() for c in s))


def strip_timing(x):
    """A JSON value without its timing fields and the strings that are paths."""
    if isinstance(x, dict):
        return {k: strip_timing(v) for k, v in x.items()
                if not TIMING_KEY.search(str(k).lower()) and not (isinstance(v, str) and _is_path(v))}
    if isinstance(x, list):
        return [strip_timing(v) for v in x if not (isinstance(v, str) and _is_path(v))]
    return x


def numbers(x, where: str = "") -> dict:
    """The numeric leaves of a JSON value by their path, timing fields left out (bools are settings)."""
    out = {}
    if isinstance(x, dict):
        for k, v in x.items():
            if not TIMING_KEY.search(str(k).lower()):
                out.update(numbers(v, f"{where}.{k}" if where else str(k)))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            out.update(numbers(v, f"{where}[{i}]"))
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        out[where] = x
    return out


def canonical(x) -> bytes:
    return json.dumps(x, sort_keys=True, separators=(",", ":"), allow_nan=True).encode()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_json_records(path: Path):
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def hash_file(path: Path) -> tuple[str, str] | None:
    """-> (how, sha256) of what of the file counts, or None for a file not hashed."""
    name = path.name
    if name in NOT_HASHED:
        return None
    if name.endswith(".safetensors"):
        return "bytes", sha(path.read_bytes())
    if name.endswith(".txt"):
        return "bytes", sha(path.read_bytes())
    if name.endswith(".npz"):
        h = hashlib.sha256()
        with np.load(path, allow_pickle=False) as z:
            for key in sorted(z.files):
                a = np.ascontiguousarray(z[key])
                h.update(canonical([key, a.dtype.str, list(a.shape)]))
                h.update(a.tobytes())
        return "arrays", h.hexdigest()
    if name.endswith((".json", ".jsonl")):
        records = read_json_records(path)
        if NUMBERS_ONLY.search(name):
            if name == "run.json" and isinstance(records, dict):
                records = {k: v for k, v in records.items() if not k.startswith("settings")}
            found = numbers(records)
            return ("numbers", sha(canonical(found))) if found else None
        return "records", sha(canonical(strip_timing(records)))
    return None


def hash_run(out: Path) -> dict:
    files = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        got = hash_file(path)
        if got is None:
            continue
        key = HEX_RUN.sub("#", path.relative_to(out).as_posix())
        if got[0] != "bytes":
            key += f" ({got[0]})"
        while key in files:
            key += "'"
        files[key] = got[1]
    return {"files": files, "combined": sha(canonical(files))}


# =============================================================================================
# running

def environment() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINIBERT_") and k != "CORPUS"}
    env.update(NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               MPLBACKEND="Agg", PYTHONHASHSEED="0",
               PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return env


def _last_train_step(path: Path) -> int:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return -1
    steps = [-1]
    for line in lines:
        try:
            r = json.loads(line)
        except ValueError:
            continue  # a line being written
        if r.get("type") == "train":
            steps.append(int(r.get("step", -1)))
    return max(steps)


def run_command(argv: list[str], out: Path, log: Path) -> tuple[int, str]:
    """Run one command (a SIGINT_AFTER one interrupted as the table says) -> (exit code, problem or '')."""
    interrupt = None
    if argv[0] == SIGINT_AFTER:
        interrupt, argv = (out / argv[1], int(argv[2])), argv[3:]
    cmd = [sys.executable, "-m", "minibert", *argv]
    with open(log, "w", encoding="utf-8") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=environment(), stdout=f, stderr=subprocess.STDOUT)
        if interrupt is None:
            return proc.wait(), ""
        metrics, step = interrupt
        while proc.poll() is None and _last_train_step(metrics) < step:
            time.sleep(0.002)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        rc = proc.wait()
        f.write(f"\n[golden_runs: Ctrl-C sent once metrics.jsonl held step {step}; exit {rc}, the last train "
                f"record is of step {_last_train_step(metrics)}]\n")
    if rc != 130:
        return rc, (f"expected exit 130 (interrupted after step {step} and saved), got {rc}: the run ended before "
                    f"the interrupt; give it more steps")
    return 0, ""


def run_one(name: str, commands: list[list[str]], folder: Path) -> dict:
    fx, out, logs = folder / "fixtures", folder / "out", folder / "logs"
    for d in (out, logs):
        d.mkdir(parents=True)
    write_fixtures(fx)
    for i, argv in enumerate(commands):
        argv = [a.replace("{fx}", str(fx)).replace("{out}", str(out)) for a in argv]
        log = logs / f"{i}-{argv[0] if argv[0] != SIGINT_AFTER else argv[3]}.log"
        rc, problem = run_command(argv, out, log)
        if rc or problem:
            tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
            return {"error": problem or f"command {i} exited {rc}", "log_tail": tail}
    return hash_run(out)


def fixtures_hash() -> str:
    """One hash of every fixture file: an edit of this script that changes the inputs shows."""
    with tempfile.TemporaryDirectory(prefix="golden-fixtures-") as tmp:
        write_fixtures(Path(tmp) / "fx")
        files = {p.relative_to(tmp).as_posix(): sha(p.read_bytes())
                 for p in sorted(Path(tmp).rglob("*")) if p.is_file()}
    return sha(canonical(files))


def versions() -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                    capture_output=True, text=True).stdout.strip())
    except OSError:
        commit, dirty = "", False
    try:
        import numba
        numba_version = numba.__version__
    except ImportError:
        numba_version = None
    where = subprocess.run([sys.executable, "-c", "import minibert; print(minibert.__file__)"], cwd=ROOT,
                           env=environment(), capture_output=True, text=True).stdout.strip()
    return {"commit": commit, "dirty": dirty, "python": platform.python_version(), "numpy": np.__version__,
            "numba": numba_version, "machine": platform.machine(), "node": platform.node(), "minibert": where}


# =============================================================================================
# comparing

def compare(now: dict, before: dict) -> bool:
    """Print EQUAL / DIFFERENT per run -> True when every run of `before` is equal."""
    ok = True
    for key in ("numpy", "numba", "python", "machine"):
        if before.get("meta", {}).get(key) != now.get("meta", {}).get(key):
            print(f"warning: {key} {before.get('meta', {}).get(key)} before, {now.get('meta', {}).get(key)} now: "
                  f"the hashes may differ for that reason alone")
    if before.get("fixtures") != now.get("fixtures"):
        print("warning: the fixtures differ from the earlier file's: this script's inputs changed")
    old, new = before.get("runs", {}), now.get("runs", {})
    for name in sorted(set(old) | set(new)):
        if name not in new:
            print(f"MISSING    {name}: in the earlier file, not run now")
            ok = False
            continue
        if name not in old:
            print(f"NEW        {name}: not in the earlier file")
            continue
        a, b = old[name], new[name]
        if "error" in a or "error" in b:
            when = " and ".join(w for w, r in (("before", a), ("now", b)) if "error" in r)
            print(f"DIFFERENT  {name}: failed {when}: {b.get('error') or a.get('error')}")
            ok = False
            continue
        if a["combined"] == b["combined"]:
            print(f"EQUAL      {name} ({len(b['files'])} files)")
            continue
        ok = False
        fa, fb = a["files"], b["files"]
        print(f"DIFFERENT  {name}")
        for f in sorted(set(fa) | set(fb)):
            if f not in fb:
                print(f"    missing now: {f}")
            elif f not in fa:
                print(f"    new now:     {f}")
            elif fa[f] != fb[f]:
                print(f"    differs:     {f}")
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="write the hashes here (JSON)")
    p.add_argument("--compare", metavar="BEFORE", help="compare with this earlier hashes file; exit 1 on a difference")
    p.add_argument("--only", nargs="+", metavar="NAME", choices=sorted(RUNS), help="run only these runs")
    p.add_argument("--keep", metavar="DIR", help="run in DIR/<name> and leave the folders there")
    p.add_argument("--repo", metavar="DIR", help="the repository to run (default: the one holding this script)")
    args = p.parse_args(argv)
    global ROOT
    ROOT = Path(args.repo).resolve() if args.repo else ROOT
    if not (ROOT / "minibert" / "__init__.py").is_file():
        p.error(f"{ROOT} holds no minibert/ package: give the repository with --repo")
    names = args.only or list(RUNS)
    result = {"meta": versions(), "fixtures": fixtures_hash(), "runs": {},
              "seconds": {}}  # seconds: wall time, not compared
    print(f"minibert: {result['meta']['minibert']} (commit {result['meta']['commit'][:10]}"
          f"{', uncommitted changes' if result['meta']['dirty'] else ''})", flush=True)
    if not result["meta"]["minibert"].startswith(str(ROOT / "minibert")):
        print(f"error: python -m minibert in {ROOT} imports {result['meta']['minibert'] or 'nothing'}, not "
              f"{ROOT / 'minibert'}", file=sys.stderr)
        return 1
    t0 = time.perf_counter()
    failed = False
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        for name in names:
            folder = base / name
            if folder.exists():
                shutil.rmtree(folder)
            t1 = time.perf_counter()
            r = run_one(name, RUNS[name], folder)
            result["runs"][name] = r
            result["seconds"][name] = round(time.perf_counter() - t1, 1)
            if "error" in r:
                failed = True
                print(f"{name}: FAILED ({r['error']})\n{r['log_tail']}", flush=True)
            else:
                print(f"{name}: {len(r['files'])} files, {r['combined'][:16]} ({result['seconds'][name]:.1f} s)",
                      flush=True)
    result["seconds"]["total"] = round(time.perf_counter() - t0, 1)
    Path(args.out).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(names)} runs in {result['seconds']['total']:.0f} s -> {args.out}")
    if args.compare:
        before = json.loads(Path(args.compare).read_text(encoding="utf-8"))
        if args.only:
            before = {**before, "runs": {k: v for k, v in before.get("runs", {}).items() if k in names}}
        if not compare(result, before):
            return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
