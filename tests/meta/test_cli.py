"""The command line as a user meets it: bad input ends in one `error: ...` line and exit code 1,
never a Python traceback (each case is a real `python -m minibert ...` process)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from corpora import REPO

from minibert import __main__ as cli
from minibert.bert import BertForPreTraining
from minibert.model import BertConfig

ROOT = REPO
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "."]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    (d / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    (d / "no_mask_vocab.txt").write_text("\n".join(t for t in VOCAB if t != "[MASK]") + "\n", encoding="utf-8")
    (d / "corpus.txt").write_text("the cat sat on the mat .\nthe cat sat .\n\nthe mat .\non the mat .\n",
                                  encoding="utf-8")
    (d / "latin1.txt").write_bytes("the cat .\nthe caf\u00e9 .\n".encode("latin-1"))
    cfg = BertConfig(vocab_size=len(VOCAB), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=16, max_position_embeddings=16)
    BertForPreTraining(cfg, seed=0).save_pretrained(d / "model", vocab=VOCAB)
    (d / "adir").mkdir()
    return d


CASES = {  # name -> (argv with {d} for the fixture directory, a phrase the one error line must hold)
    "vocab --out a directory": (["vocab", "--files", "{d}/corpus.txt", "--out", "{d}/adir"],
                                "is a directory"),
    "vocab from latin-1 text": (["vocab", "--files", "{d}/latin1.txt", "--out", "{d}/v.txt"],
                                "latin1.txt line 2: invalid UTF-8 byte 0xe9 at column 8"),
    "data from latin-1 text": (["data", "--corpus", "{d}/latin1.txt", "--vocab", "{d}/vocab.txt", "--out",
                                "{d}/shards"], "latin1.txt line 2: invalid UTF-8 byte 0xe9"),
    "data with a vocab without [MASK]": (["data", "--corpus", "{d}/corpus.txt", "--vocab", "{d}/no_mask_vocab.txt",
                                          "--out", "{d}/shards"], "lacks the special token(s) [MASK]"),
    "fill-mask -k 0": (["fill-mask", "{d}/model", "the [MASK] sat", "-k", "0"], "k must be between 1 and"),
    "attention beyond the model's length": (["attention", "{d}/model", " ".join(["the cat"] * 20)],
                                            "the model takes at most 16"),
    "fill-mask on a missing run": (["fill-mask", "{d}/nothing", "the [MASK]"], "not found"),
    "train with lr=inf": (["train", "--corpus", "{d}/corpus.txt", "--vocab", "{d}/vocab.txt", "--out",
                           "{d}/run", "--set", "lr=inf"], "lr='inf' is not a valid finite number"),
    "train --out a file": (["train", "--corpus", "{d}/corpus.txt", "--vocab", "{d}/vocab.txt", "--out",
                            "{d}/corpus.txt"], "is a file"),
    "train --resume of nothing": (["train", "--resume", "{d}/adir"], "holds no resumable pretraining run"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_gives_one_error_line_and_exit_1(files, case):
    argv, phrase = CASES[case]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    env.pop("MINIBERT_TRACEBACK", None)
    proc = subprocess.run([sys.executable, "-m", "minibert", *(a.format(d=files) for a in argv)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    err = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert len(err) == 1 and err[0].startswith("error: ") and phrase in err[0], proc.stderr
    assert not (files / "run").exists()  # a refused training run writes nothing


def _fails(argv):
    raise ValueError("settings.txt line 3: something is wrong")


def _interrupted(argv):
    raise KeyboardInterrupt


def test_main_turns_errors_into_one_line_and_ctrl_c_into_130(monkeypatch, capsys):
    monkeypatch.setitem(cli.COMMANDS, "fails", (f"{__name__}:_fails", ""))
    monkeypatch.setitem(cli.COMMANDS, "interrupted", (f"{__name__}:_interrupted", ""))
    monkeypatch.delenv("MINIBERT_TRACEBACK", raising=False)
    assert cli.main(["fails"]) == 1
    assert capsys.readouterr().err == "error: settings.txt line 3: something is wrong\n"
    assert cli.main(["interrupted"]) == 130
    assert capsys.readouterr().err == "\ninterrupted: interrupted\n"
    monkeypatch.setenv("MINIBERT_TRACEBACK", "1")
    with pytest.raises(ValueError, match="settings.txt line 3"):
        cli.main(["fails"])


def test_train_tiny_routes_the_presets_that_are_other_models():
    """`train-tiny --preset xlnet-tiny | t5-tiny` runs the command that trains that model; the
    BERT-encoder presets stay with train-tiny."""
    from minibert.__main__ import COMMANDS, route

    assert route("train-tiny", ["--preset", "xlnet-tiny", "--minutes", "1"]) == "train-xlnet"
    assert route("train-tiny", ["--preset=t5-tiny"]) == "train-t5"
    assert route("train-tiny", ["--preset", "electra-tiny"]) == "train-tiny"
    assert route("train-tiny", ["--preset"]) == "train-tiny"  # argparse will say what is missing
    assert route("train", ["--preset", "xlnet-tiny"]) == "train"
    assert {"train-xlnet", "train-t5"} <= set(COMMANDS)


def test_lessons_help_runs_no_lesson(monkeypatch, capsys):
    """`lessons --help` ran every lesson (its arguments were not read); now it is a parser's help."""
    monkeypatch.setattr(cli.subprocess, "call", lambda *a, **k: pytest.fail("a lesson ran"))
    with pytest.raises(SystemExit) as e:
        cli.main(["lessons", "--help"])
    assert e.value.code == 0 and "python -m minibert lessons" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        cli.main(["lessons", "99"])
    assert e.value.code == 2 and "no lesson 99" in capsys.readouterr().err


def test_lessons_runs_the_lessons_named(monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(cli.subprocess, "call", lambda cmd, **k: ran.append(os.path.basename(cmd[-1])) or 0)
    assert cli.main(["lessons", "6", "11"]) == 0
    assert [name[:2] for name in ran] == ["06", "11"]
