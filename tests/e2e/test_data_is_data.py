"""Data is data, and cost grows with the input (issue 63): text from the user's files (labels,
texts, the run folder's and the data files' names) is escaped wherever it lands in another format;
per-class outputs stay bounded as labels grow; predict --out writes each label's probability.

- the model card renders as the markdown minibert meant: its own headings only, no HTML, every
  table row the width of its table, and copy-paste lines that a shell and Python read as one word
  and one string holding the folder's name (tests below parse it);
- predict --file prints one line per example; its CSV, TSV and JSON Lines outputs read back with
  `evaluate` (which then agrees with every prediction: accuracy 1), and their probabilities sum
  to 1; TSV, which has no quoting, refuses a text holding a tab or a line end with the fix;
- 3,000 labels: dev_report.json, README.md and evaluate's JSON stay small (the full matrix was
  81 MB), and the picture is the most confused pairs;
- a seeded fuzz of labels and texts through finetune -> card -> predict -> evaluate.

The fixtures are in conftest.py (a tiny pretrained model `pre` with the words of refusals.WORDS).
"""
from __future__ import annotations

import ast
import csv
import io
import json
import random
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from refusals import WORDS

from minibert.__main__ import main
from minibert.finetune.model_card import model_card

HOSTILE_LABELS = ["<img src=x onerror=alert(1)>", "# heading", "a|b", "`tick` *em*", "[x](http://e)", "say \"hi\", 'x'",
                  "$x^2$", "&amp;"]
HOSTILE_TEXTS = ["the film was good, \"really\"", "the plot\nwas dull", "<script>alert(1)</script> good",
                 "| bad | awful |", "# the film", "fun\tgreat", "john visited paris \u2028 twice", "\x1b[31m dull"]
HEADINGS = ("## Data", "## Recipe", "## Dev scores", "## Use it")


def _csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\r\n")  # quotes \r and \n: what a spreadsheet writes
        w.writerow(["text", "label"])
        w.writerows(rows)
    return path


def _finetune(work: Path, data: Path, out: Path, *more: str) -> int:
    return main(["finetune", "custom", "--train", str(data / "train.csv"), "--dev", str(data / "dev.csv"),
                 "--init", str(work / "pre"), "--out", str(out), "--steps", "2", "--batch-size", "8",
                 "--max-seq-length", "16", "--quiet", *more])


def _data(work: Path, labels: list[str], texts: list[str], n: int = 24, seed: int = 0, name: str = "data") -> Path:
    rng = random.Random(seed)
    d = work / name
    d.mkdir(exist_ok=True)
    for split in ("train", "dev"):
        rows = [(f"{rng.choice(texts)} {rng.choice(WORDS)}", labels[i % len(labels)]) for i in range(n)]
        _csv(d / f"{split}.csv", rows)
    return d


def check_card(card: str, run_dir: Path) -> None:
    """The card is the markdown the writer meant, whatever the data held."""
    lines = card.split("\n")
    fences = [i for i, line in enumerate(lines) if line.startswith("```")]
    assert len(fences) == 4, fences  # two code blocks, none closed or opened by the data
    code = {i for a, b in zip(fences[::2], fences[1::2]) for i in range(a, b + 1)}
    prose = [line for i, line in enumerate(lines) if i not in code]
    headings = [line for line in prose if line.startswith("#")]
    assert headings[0].startswith("# ") and tuple(headings[1:]) == HEADINGS, headings  # none injected
    assert not any(re.search(r"<[A-Za-z/!?]", line) for line in prose)  # no HTML tag, comment or autolink
    assert not any(re.match(r"\s{0,3}(>|[-+*] |\d+[.)] |=+$|-+$)", line) and not line.startswith(("- train:", "- dev:",
                   "- ")) for line in prose)
    table = []
    for line in prose + [""]:  # each table's rows have its header's columns (unescaped pipes)
        if line.startswith("|"):
            table.append(len(re.findall(r"(?<!\\)(?:\\\\)*\|", line)))
        elif table:
            assert len(set(table)) == 1, table
            table = []
    shell = [lines[i] for i in code if lines[i].startswith("python -m minibert")]
    for line in shell:
        words = shlex.split(line) if "$'" not in line else _bash_words(line)
        assert words[:4] == ["python", "-m", "minibert", words[3]] and words[4] == str(run_dir), words
    python = "\n".join(lines[i] for i in code if not lines[i].startswith(("```", "python -m")))
    paths = [node.args[0].value for node in ast.walk(ast.parse(python))
             if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "from_pretrained"]
    assert paths and set(paths) == {str(run_dir)}


def _bash_words(line: str) -> list[str]:
    out = subprocess.run(["bash", "-c", "printf '%s\\0' " + line], capture_output=True, timeout=30,
                         env={"LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"})
    return out.stdout.decode("utf-8").split("\0")[:-1]


# --- the model card ------------------------------------------------------------------------------

def test_hostile_labels_texts_and_names_are_data_in_the_card(work, capsys):
    data = _data(work, HOSTILE_LABELS[:4], HOSTILE_TEXTS, name="<b>data | `x` [l](y)")
    run = work / "run 'a' $(touch pwned) `b` #c"
    assert _finetune(work, data, run) == 0, capsys.readouterr().err
    card = (run / "README.md").read_text(encoding="utf-8")
    check_card(card, run)
    assert "&lt;b&gt;data \\| \\`x\\` \\[l\\]\\(y\\)/train.csv" in card  # the data files' names
    assert "&lt;img src=x onerror=alert\\(1\\)&gt;" in card and "a\\|b" in card and "\\`tick\\` \\*em\\*" in card
    assert not (Path.cwd() / "pwned").exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="the card's shell line for a name with a newline is bash's")
def test_labels_and_a_folder_name_with_line_ends_stay_on_their_line(work, capsys):
    """run.json and dev_report.json may hold what a reader refuses today (a label with a newline,
    edited by hand or written by another tool): the card is written safe whatever it is handed."""
    data = _data(work, ["neg", "pos"], WORDS)
    run = work / "ft"
    assert _finetune(work, data, run) == 0
    evil = ["neg\n# Injected heading\n<img src=x onerror=alert(1)>", "pos | x\n| --- |\r\n```"]
    info = json.loads((run / "run.json").read_text())
    info["task"]["labels"] = evil
    (run / "run.json").write_text(json.dumps(info), encoding="utf-8")
    report = json.loads((run / "dev_report.json").read_text())
    report["labels"] = evil
    (run / "dev_report.json").write_text(json.dumps(report), encoding="utf-8")
    moved = work / "a\nb 'c' \x1b[31m"
    shutil.move(run, moved)
    check_card(model_card(moved), moved)
    assert "neg\\\\n\\# Injected heading\\\\n&lt;img" in model_card(moved).replace("#", "\\#")


# --- predict and evaluate: one line per example, formats that read back --------------------------

@pytest.fixture
def tuned(work, capsys):
    """A classifier fine-tuned on CSV data with hostile labels and texts (quoted, with line ends)."""
    data = _data(work, HOSTILE_LABELS[:3], HOSTILE_TEXTS)
    assert _finetune(work, data, work / "ft") == 0, capsys.readouterr().err
    capsys.readouterr()
    return work / "ft", data


def test_predict_prints_one_line_per_example(tuned, capsys):
    """A CSV text holding line ends printed 3 lines for one text."""
    run, data = tuned
    assert main(["predict", str(run), "--file", str(data / "dev.csv")]) == 0
    lines = capsys.readouterr().out.split("\n")
    assert lines[-1] == "" and len(lines) - 1 == 24
    assert all(len(line.split("\t")) == 3 and float(line.split("\t")[1]) >= 1 / 3 - 1e-4 for line in lines[:-1])
    assert not any("\x1b" in line or "\u2028" in line or "\r" in line for line in lines)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_predictions_read_back_by_evaluate_with_probabilities_summing_to_one(suffix, tuned, capsys):
    run, data = tuned
    out = run.parent / f"pred{suffix}"
    assert main(["predict", str(run), "--file", str(data / "dev.csv"), "--out", str(out)]) == 0
    labels = HOSTILE_LABELS[:3]
    rows = ([json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] if suffix == ".jsonl" else
            list(csv.DictReader(io.StringIO(out.read_bytes().decode("utf-8"), newline=""))))
    texts = [r["text"] for r in csv.DictReader(io.StringIO((data / "dev.csv").read_text(encoding="utf-8"),
                                                           newline=""))]
    assert [r["text"] for r in rows] == texts  # the texts back, equal
    for r in rows:
        probs = [float(r[f"prob_{label}"]) for label in sorted(labels)]
        assert abs(sum(probs) - 1) < 1e-4 and r["label"] in labels
        assert float(r[f"prob_{r['label']}"]) == max(probs)
    capsys.readouterr()
    assert main(["evaluate", str(run), "--data", str(out)]) == 0
    assert "accuracy 1.0000" in capsys.readouterr().out  # evaluate reads the predictions as they were written


def test_tsv_refuses_a_text_it_cannot_hold_and_reads_back_one_it_can(tuned, capsys):
    run, data = tuned
    out = run.parent / "pred.tsv"
    assert main(["predict", str(run), "--file", str(data / "dev.csv"), "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "dev.csv:" in err and "write the predictions as .csv or .jsonl" in err and not out.exists()
    _csv(data / "plain.csv", [("the film was good", HOSTILE_LABELS[0]), ("a | plot # <b>x</b> 'q' \"d\"", "x")])
    assert main(["predict", str(run), "--file", str(data / "plain.csv"), "--out", str(out)]) == 0
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows[0][:2] == ["text", "label"] and rows[2][0] == "a | plot # <b>x</b> 'q' \"d\""
    assert all(abs(sum(map(float, r[2:])) - 1) < 1e-4 for r in rows[1:])
    capsys.readouterr()
    assert main(["evaluate", str(run), "--data", str(out)]) == 0 and "accuracy 1.0000" in capsys.readouterr().out


def test_a_threshold_decides_a_two_label_classifier(work, capsys):
    data = _data(work, ["ham", "spam"], WORDS)
    run = work / "ft"
    assert _finetune(work, data, run) == 0
    labelled = []
    for t, positive in (("0", None), ("1.0", "ham"), ("0", "ham"), ("1.0", None)):
        capsys.readouterr()
        argv = ["predict", str(run), "--file", str(data / "dev.csv"), "--threshold", t]
        assert main(argv + (["--positive", positive] if positive else [])) == 0
        labelled.append({line.split("\t")[0] for line in capsys.readouterr().out.splitlines()})
    # threshold 0: the positive label always (spam, the second label, unless --positive names another)
    assert labelled[0] == {"spam"} and labelled[2] == {"ham"}
    assert labelled[1] <= {"spam"} and labelled[3] <= {"ham"}  # a probability of exactly 1 is all it would take
    out = work / "p.csv"
    assert main(["predict", str(run), "--file", str(data / "dev.csv"), "--out", str(out), "--threshold", "0"]) == 0
    assert {r["label"] for r in csv.DictReader(out.open(encoding="utf-8", newline=""))} == {"spam"}


# --- labels by the thousand ----------------------------------------------------------------------

def test_3000_labels_give_small_reports_and_a_readable_picture(work, capsys):
    """1,000 labels gave a 9 MB dev_report.json and a 4 MB README.md, 3,000 gave 81 MB and 36 MB,
    and `evaluate --out` drew for minutes: every output now grows linearly with the labels."""
    k = 3000
    d = work / "many"
    d.mkdir()
    rows = "".join(json.dumps({"text": f"{WORDS[i % 6]} {WORDS[i % 13]}", "label": f"L{i:04d}|<b>"}) + "\n"
                   for i in range(k))
    for split in ("train", "dev"):
        (d / f"{split}.jsonl").write_text(rows, encoding="utf-8")
    run = work / "ft"
    assert main(["finetune", "custom", "--train", str(d / "train.jsonl"), "--dev", str(d / "dev.jsonl"), "--init",
                 str(work / "pre"), "--out", str(run), "--steps", "1", "--batch-size", "32", "--max-seq-length", "8",
                 "--quiet"]) == 0, capsys.readouterr().err
    report = json.loads((run / "dev_report.json").read_text())
    assert report["confusion"] is None and len(report["labels"]) == k and len(report["confused"]) <= 20
    assert (run / "dev_report.json").stat().st_size < 2_000_000  # 3000 x 3000 counts would be over 18 MB
    card = (run / "README.md").read_text(encoding="utf-8")
    assert len(card) < 100_000 and "and 2,950 more (run.json's task.labels)" in card
    check_card(card, run)
    capsys.readouterr()
    assert main(["evaluate", str(run), "--data", str(d / "dev.jsonl"), "--out", str(work / "m.json")]) == 0
    printed = capsys.readouterr().out
    assert len(printed.splitlines()) < 80 and "the most confused pairs" in printed
    assert (work / "m.json").stat().st_size < 2_000_000 and "confusion" not in json.loads((work / "m.json").read_text())
    assert (work / "m.confusion.png").stat().st_size > 1000
    report["confusion"] = [[0] * k for _ in range(k)]  # a dev_report.json of minibert before the bound
    (run / "dev_report.json").write_text(json.dumps(report), encoding="utf-8")
    card = model_card(run)
    assert len(card) < 100_000 and "The most confused pairs" in card and "Confusion matrix" not in card


# --- a fuzz of labels and texts through every writer ----------------------------------------------

FUZZ_ALPHABET = list("ab <>&|#*_`[]()$!\\'\",;\t\n\r\x00\x1b\x7f\u2028\u0085é✓") + ["<img src=x>", "# h", "```"]


# a label is one line of printable text (the readers refuse control characters in labels), so labels
# draw from the markup, quotes and separators only; texts draw from everything
LABEL_ALPHABET = [c for c in FUZZ_ALPHABET if len(c) > 1 or c.isprintable() and c != "\u2028"]


def _fuzz(rng: random.Random, n: int, alphabet: list[str] = FUZZ_ALPHABET) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, n)))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fuzzed_labels_and_texts_give_well_formed_outputs(seed, work, capsys):
    """Labels and texts drawn from control characters, markup, quotes, tabs and line ends: the
    reader takes them or refuses them in one error line (its decision); what it takes comes out
    of the card, predict's three formats and evaluate well-formed."""
    rng = random.Random(seed)
    labels = sorted({_fuzz(rng, 8, LABEL_ALPHABET).strip() or "x" for _ in range(4)})
    texts = [f"{rng.choice(WORDS)} {_fuzz(rng, 12)} {rng.choice(WORDS)}" for _ in range(8)]
    data = _data(work, labels, texts, seed=seed)
    run = work / f"run {_fuzz(rng, 6).replace('/', '')}".replace("\x00", "")
    rc = _finetune(work, data, run)
    err = capsys.readouterr().err
    if rc != 0:  # the reader refused something (a label or text it will not read): one clean line
        assert rc == 1 and "Traceback" not in err and err.strip().splitlines()[-1].startswith("error:"), err
        pytest.skip(f"the reader refused seed {seed}'s data: {err.strip().splitlines()[-1][:200]}")
    check_card((run / "README.md").read_text(encoding="utf-8"), run)
    saved = json.loads((run / "config.json").read_text())["id2label"]
    labels = [saved[str(i)] for i in range(len(saved))]
    assert main(["predict", str(run), "--file", str(data / "dev.csv")]) == 0
    assert len(capsys.readouterr().out.split("\n")) == 24 + 1
    for suffix in (".csv", ".jsonl", ".tsv"):
        out = work / f"p{suffix}"
        rc = main(["predict", str(run), "--file", str(data / "dev.csv"), "--out", str(out)])
        err = capsys.readouterr().err
        if suffix == ".tsv" and rc == 1:  # a tab or a line end in a text or label: TSV cannot hold it
            assert "write the predictions as .csv or .jsonl" in err and not out.exists()
            continue
        assert rc == 0, err
        text = out.read_bytes().decode("utf-8")  # no newline translation: a quoted \r stays
        rows = ([json.loads(line) for line in text.splitlines()] if suffix == ".jsonl" else
                list(csv.DictReader(io.StringIO(text, newline=""), delimiter="," if suffix == ".csv" else "\t",
                                    quoting=csv.QUOTE_MINIMAL if suffix == ".csv" else csv.QUOTE_NONE)))
        assert len(rows) == 24 and all(r["label"] in labels for r in rows)
        assert all(abs(sum(float(r[f"prob_{label}"]) for label in labels) - 1) < 1e-4 for r in rows)
        assert main(["evaluate", str(run), "--data", str(out)]) == 0, capsys.readouterr().err
        assert "accuracy 1.0000" in capsys.readouterr().out
