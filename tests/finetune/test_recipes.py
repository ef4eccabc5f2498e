"""The fine-tuning recipe a run gets by default: chosen from the task and the model's width,
and anything on the command line wins."""
import json

import pytest

from minibert.finetune.recipes import RECIPES, SMALL_BELOW, init_hidden_size, recipe, size_class


def _model_dir(tmp_path, hidden_size):
    d = tmp_path / f"h{hidden_size}"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"hidden_size": hidden_size}))
    return d


@pytest.mark.parametrize("hidden,size", [(128, "small"), (SMALL_BELOW - 1, "small"), (SMALL_BELOW, "real"), (768, "real")])
def test_the_width_picks_small_or_real(hidden, size):
    assert size_class(hidden) == size


def test_a_tasks_own_entry_wins_over_its_kind():
    name, sst2 = recipe("sst2", "classification", 128)
    assert name == "small model, sst2" and sst2 == RECIPES["small"]["sst2"]
    name, other = recipe("nextsent", "classification", 128)
    assert name == "small model, classification" and other["epochs"] == 3.0
    assert recipe("squad1", "qa", 384) == ("real model, qa", RECIPES["real"]["qa"])
    assert recipe("wnut17", "token", 384)[1]["lr"] < recipe("wnut17", "token", 128)[1]["lr"]  # larger model, smaller steps


def test_the_hidden_size_comes_from_the_init_config_or_the_tiny_preset(tmp_path):
    assert init_hidden_size(str(_model_dir(tmp_path, 384))) == 384
    assert init_hidden_size("none") == 128  # the tiny preset
    assert init_hidden_size("none", like=str(_model_dir(tmp_path, 256))) == 256
    assert init_hidden_size(str(tmp_path / "missing")) is None
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"hidden_size": "wide"}))
    with pytest.raises(ValueError, match=r"bad/config.json: hidden_size is 'wide'"):
        init_hidden_size(str(bad))


def test_recipes_are_returned_as_copies():
    _, chosen = recipe("sst2", "classification", 128)
    chosen["lr"] = 1.0
    assert RECIPES["small"]["sst2"]["lr"] == 3e-4  # exact: a constant in the table, never computed


def test_finetune_fills_in_only_what_the_command_line_left_out(tmp_path, capsys):
    from corpora import tiny_pretrained

    from minibert.__main__ import main

    tiny_pretrained(tmp_path / "pre", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film"], 32)
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "dev"):
        (data / f"{split}.tsv").write_text("sentence\tlabel\ngood film\t1\nbad film\t0\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["finetune", "custom", "--format", "glue-single", "--data", str(data), "--init", str(tmp_path / "pre"),
                 "--out", str(out), "--lr", "0.002", "--epochs", "1"]) == 0
    printed = capsys.readouterr().out
    assert "recipe (small model, classification; docs/finetuning.md): max_seq_length 128" in printed
    assert "lr" not in printed.split("recipe (")[1].split("\n")[0].split(":")[1]  # given, so not the recipe's
    settings = json.loads((out / "run.json").read_text())["settings"]
    assert settings["lr"] == 0.002 and settings["epochs"] == 1.0 and settings["max_seq_length"] == 128  # exact: parsed, not computed
