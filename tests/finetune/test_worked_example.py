"""docs/finetuning.md's worked example, "Your own data, start to end", runs exactly as written: its
shell block is read from the doc and each line run in a temporary folder, with a small model of
its own at runs/tiny (the doc's `make train-tiny` model is minutes of pretraining). The minibert
commands run in this process through the command line's entry point (the same arguments, without
three interpreter start-ups); the rest (mkdir, the Python heredoc, printf) through bash."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys

from corpora import tiny_pretrained

from minibert.__main__ import main
from minibert.io.paths import repo_root

DOC = repo_root() / "docs" / "finetuning.md"
WORDS = "works well great value i love it exactly as described sturdy and light broke in a week waste of money " \
        "does not work poor quality arrived damaged".split()


def worked_example() -> list[str]:
    """The doc's first ``` block under "## Your own data, start to end", as shell commands (a
    heredoc kept whole as one command)."""
    section = DOC.read_text(encoding="utf-8").split("## Your own data, start to end", 1)[1]
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


def test_the_worked_example_runs_as_written(tmp_path, monkeypatch, capsys):
    commands = worked_example()
    assert [c.split()[3] for c in commands if c.startswith("python -m minibert ")] == ["finetune", "evaluate",
                                                                                         "predict"]
    tiny_pretrained(tmp_path / "runs" / "tiny", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ",",
                                                 *dict.fromkeys(WORDS)])
    monkeypatch.chdir(tmp_path)
    said = {}
    for command in commands:
        if command.startswith("python -m minibert "):
            argv = shlex.split(command)[3:]
            assert main(argv) == 0, (command, capsys.readouterr().err)
            said[argv[0]] = capsys.readouterr()
        else:
            shell = command.replace("python - ", f"{shlex.quote(sys.executable)} - ", 1)
            subprocess.run(["bash", "-c", shell], check=True, cwd=tmp_path)
    assert "epochs 8 (the recipe's 3, raised for 400 training features: 104 steps" in said["finetune"].out
    assert said["finetune"].out.strip().splitlines()[-1].startswith("done: best dev accuracy ")
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
