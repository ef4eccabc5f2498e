"""docs/finetuning.md's worked example, "Your own data, start to end", runs exactly as written: its
shell block is read from the doc and each line run in a temporary folder, with a small model of
its own at runs/tiny (the doc's `make train-tiny` model is minutes of pretraining). The minibert
commands run in this process through the command line's entry point (the same arguments, without
three interpreter start-ups); the rest (mkdir, the Python heredoc, printf) through bash."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

import pytest
from corpora import tiny_pretrained

from minibert.__main__ import main
from minibert.finetune.commands import _parser
from minibert.io.paths import repo_root

DOC = repo_root() / "docs" / "finetuning.md"
WORDS = "works well great value i love it exactly as described sturdy and light broke in a week waste of money " \
        "does not work poor quality arrived damaged".split()


def worked_example(heading: str = "## Your own data, start to end") -> list[str]:
    """The doc's first ``` block under `heading`, as shell commands (a heredoc kept whole as one
    command)."""
    section = DOC.read_text(encoding="utf-8").split(heading, 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    commands, lines = [], block.splitlines()
    while lines:
        line = lines.pop(0)
        if "<<'PY'" in line:  # the heredoc, up to its PY line
            body = [line]
            while body[-1] != "PY":
                body.append(lines.pop(0))
            line = "\n".join(body)
        commands.append(line)
    return commands


def run_block(commands: list[str], tmp_path: Path, capsys) -> dict:
    """Each command in tmp_path: minibert's through its entry point (rc 0 asserted), the rest
    through bash -> what each minibert command said (capsys' out and err), by command name."""
    said = {}
    for command in commands:
        if command.startswith("python -m minibert "):
            argv = shlex.split(command)[3:]
            assert main(argv) == 0, (command, capsys.readouterr().err)
            said[argv[0]] = capsys.readouterr()
        else:
            shell = command.replace("python - ", f"{shlex.quote(sys.executable)} - ", 1)
            subprocess.run(["bash", "-c", shell], check=True, cwd=tmp_path)
    return said


def test_the_worked_example_runs_as_written(tmp_path, monkeypatch, capsys):
    commands = worked_example()
    assert [c.split()[3] for c in commands if c.startswith("python -m minibert ")] == ["finetune", "evaluate",
                                                                                         "predict"]
    tiny_pretrained(tmp_path / "runs" / "tiny", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ",",
                                                 *dict.fromkeys(WORDS)])
    monkeypatch.chdir(tmp_path)
    said = run_block(commands, tmp_path, capsys)
    assert "epochs 8 (the recipe's 3, raised for 400 training features: 104 steps" in said["finetune"].out
    assert said["finetune"].out.strip().splitlines()[-1].startswith("done: best dev macro-F1 ")  # kept by it
    assert "patience 3 (a small data set stops after 3 dev evaluations without a better macro_f1" in \
        said["finetune"].out  # the raise comes with patience
    assert "warning" not in said["finetune"].err
    assert (tmp_path / "runs/reviews/README.md").is_file() and (tmp_path / "runs/reviews/dev_report.json").is_file()
    report = said["evaluate"].out
    assert "precision  recall     f1  support" in report and "macro-F1" in report
    assert "confusion matrix (rows: gold, columns: predicted)" in report
    assert (tmp_path / "reviews/metrics.confusion.png").stat().st_size > 1000
    predicted = said["predict"].out.strip().splitlines()
    assert len(predicted) == 2 and predicted[0].endswith("great value, works well")
    assert predicted[1].endswith("broke in a week")
    for line in predicted:  # label, every label's probability, the text
        assert re.search(r"negative[ =:]+[01]\.\d+", line) and re.search(r"positive[ =:]+[01]\.\d+", line), line


def _has_options(*names: str) -> bool:
    known = _parser()._option_string_actions
    return all(name in known for name in names)


SMS_WORDS = ("see you at six ok , on my way call me later are you home yet thanks soon win a free prize now cash "
             "claim your today won reply").split()


@pytest.mark.skipif(not _has_options("--text-column", "--label-column", "--dev-split"),
                    reason="needs finetune's --text-column, --label-column (helper readers) and --dev-split")
def test_the_downloaded_file_example_runs_as_written(tmp_path, monkeypatch, capsys):
    commands = worked_example("### One file, as downloaded")
    assert [c.split()[3] for c in commands if c.startswith("python -m minibert ")] == ["finetune", "predict"]
    tiny_pretrained(tmp_path / "runs" / "tiny", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                                 *dict.fromkeys(SMS_WORDS)])
    monkeypatch.chdir(tmp_path)
    said = run_block(commands, tmp_path, capsys)
    header, *rows = (tmp_path / "sms.csv").read_text().splitlines()
    spilled = [row for row in rows if row.count(",") > 4]
    assert header == "label,masseges,,," and spilled  # the shape the doc promises: unquoted commas
    assert "sms.csv" in said["finetune"].err and "note" in said["finetune"].err  # the spilled rows are said
    task = json.loads((tmp_path / "runs/sms/run.json").read_text())["task"]
    spam = sum(row.startswith("spam,") for row in rows)
    assert task["dev_split"] == {"fraction": 0.2, "seed": 0, "stratified": True, "train": 400, "dev": 100}
    assert task["train_examples"] + task["dev_examples"] == len(rows) == 500  # no row lost
    assert task["main_metric"] == "macro_f1"
    card = (tmp_path / "runs/sms/README.md").read_text()
    assert "20% of it split off by --dev-split (stratified by label, seed 0" in card
    report = json.loads((tmp_path / "runs/sms/dev_report.json").read_text())
    assert dict(zip(report["labels"], report["support"]))["spam"] == round(spam * 0.2)  # stratified
    predicted = said["predict"].out.strip().splitlines()
    assert len(predicted) == 2 and predicted[0].endswith("free cash prize, call now")  # a line each: label,
    for line in predicted:  # every label's probability, the text (this test's 16-wide model predicts, it is no filter)
        assert re.match(r"(ham|spam)  \(ham [01]\.\d{3}, spam [01]\.\d{3}\)\t", line), line
