"""Bad model directories (a sharded index, a config beyond memory, a sentence-transformers folder
without its module), a SQuAD run's bad run.json, and bad task files (SQuAD, CoNLL, TSV, SWAG,
devices and FIFOs) handed to predict, evaluate, finetune and squad-eval: each ends in one `error:`
line that names the file and the field (or, where the input is fine, in the right result), with
the sha256 of every file in the work folder and of a decoy folder outside it unchanged.

The method is test_bad_input.py's; the fixtures are in conftest.py, the checks in refusals.py.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from refusals import VOCAB, edit_json, qa_model, refused, squad_json

from minibert.__main__ import main
from minibert.finetune.models import BertForMultipleChoice
from minibert.loop.rundir import LAYOUT
from minibert.model import BertConfig

HUGE = dict(vocab_size=4_194_304, hidden_size=16_384, num_hidden_layers=256, num_attention_heads=256,
            intermediate_size=65_536)  # inside minibert's size limits, 512 GiB of weights


# --- model directories --------------------------------------------------------------------------

@pytest.mark.parametrize("value", [["model-00001.safetensors"], {"a": 1}], ids=["a list", "an object"])
def test_a_sharded_index_with_a_bad_weight_map_value(value, work, decoy, capsys):
    (work / "cls/model.safetensors").unlink()
    index = {"weight_map": {"bert.embeddings.word_embeddings.weight": value}}
    (work / "cls/model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    refused(work, decoy, ["predict", "{w}/cls", "a good film"], "weight_map value", capsys)


def test_a_config_far_beyond_memory_is_refused_with_the_number(work, decoy, capsys):
    edit_json(work / "cls/config.json", **HUGE)
    refused(work, decoy, ["predict", "{w}/cls", "a good film"], "GiB of memory available", capsys)
    refused(work, decoy, ["finetune", "custom", "--format", "glue-single", "--data", "{w}/sst", "--init", "none",
                          "--like", "{w}/cls", "--out", "{w}/ft", "--quiet"], "GiB of memory available", capsys)


def test_a_5000_digit_number_names_the_file(work, decoy, capsys):
    path = work / "cls/config.json"
    path.write_text(path.read_text().replace('"hidden_size": 16', '"hidden_size": ' + "1" * 5000), encoding="utf-8")
    refused(work, decoy, ["predict", "{w}/cls", "a good film"], "config.json holds a number too long", capsys)


def test_a_sentence_transformers_folder_without_its_module_folder(work, decoy, capsys):
    st = work / "st"
    st.mkdir()
    (st / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "0_Transformer",
                                                  "type": "sentence_transformers.models.Transformer"}]))
    refused(work, decoy, ["finetune", "custom", "--format", "glue-single", "--data", "{w}/sst", "--init", "{w}/st",
                          "--out", "{w}/ft", "--quiet"], "but " + str(st / "0_Transformer") + " is not a folder",
            capsys)


# --- a SQuAD run's run.json ---------------------------------------------------------------------

def _qa_run(work: Path, task: dict, best: dict | None = None) -> None:
    qa_model(work / "qa")
    run = {"command": "finetune", "settings": {}, "layout": LAYOUT, "task": {"name": "squad2", "version_2": True, **task},
           "best": best or {"best_f1_thresh": 0.0}}
    (work / "qa/run.json").write_text(json.dumps(run), encoding="utf-8")


SQUAD_RUN_CASES = {
    "doc_stride a list": ({"doc_stride": [1]}, None, "task.doc_stride is [1]"),
    "doc_stride text": ({"doc_stride": "abc"}, None, 'task.doc_stride is "abc", expected a positive integer'),
    "max_query_length null": ({"max_query_length": None}, None, "task.max_query_length is null"),
    "max_seq_length 1e6": ({"max_seq_length": 1e6}, None, "task.max_seq_length is 1000000.0"),
    "max_seq_length ten million": ({"max_seq_length": 10_000_000}, None, "at most 1048576"),
    "best_f1_thresh a list": ({}, {"best_f1_thresh": [1]}, "best.best_f1_thresh is [1], expected a finite number"),
}


@pytest.mark.parametrize("case", SQUAD_RUN_CASES, ids=list(SQUAD_RUN_CASES))
def test_a_squad_run_json_with_a_bad_setting(case, work, decoy, capsys):
    task, best, expected = SQUAD_RUN_CASES[case]
    _qa_run(work, task, best)
    refused(work, decoy, ["predict", "{w}/qa", "--file", "{w}/squad/dev-v2.0.json", "--out", "{w}/preds"],
            expected, capsys)
    refused(work, decoy, ["predict", "{w}/qa", "--question", "who", "--context", "john visited paris"], expected,
            capsys)


def test_a_5000_digit_answer_start_in_a_squad_file(work, decoy, capsys):
    _qa_run(work, {})
    path = work / "squad/dev-v2.0.json"
    path.write_text(path.read_text().replace('"answer_start": 0', '"answer_start": ' + "9" * 5000))
    refused(work, decoy, ["evaluate", "{w}/qa", "--data", "{w}/squad/dev-v2.0.json"], "dev-v2.0.json holds a number "
            "too long", capsys)


# --- text files ---------------------------------------------------------------------------------

def test_a_30_mb_conll_line_is_refused_unread_and_a_long_one_quoted_short(work, decoy, capsys):
    (work / "big.conll").write_text("x" * 30_000_000 + "\n", encoding="utf-8")
    refused(work, decoy, ["evaluate", "{w}/tag", "--format", "conll", "--data", "{w}/big.conll"],
            "big.conll line 1 is longer than 1,048,576 bytes", capsys)
    (work / "long.conll").write_text("x" * 500_000 + "\n", encoding="utf-8")  # under the cap: quoted, cut short
    assert main(["evaluate", str(work / "tag"), "--format", "conll", "--data", str(work / "long.conll")]) == 1
    err_line = capsys.readouterr().err.strip()
    assert len(err_line) < 500 and "500,000 characters" in err_line and "long.conll:1" in err_line, err_line[:600]


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_device_or_a_fifo_as_the_file_is_named_as_such(special, work, decoy, capsys):
    path = special
    if special == "fifo":
        path = str(work / "fifo")
        os.mkfifo(path)
    for argv in (["predict", "{w}/cls", "--format", "glue-single", "--file", path, "--out", "{w}/p.tsv"],
                 ["evaluate", "{w}/cls", "--format", "glue-single", "--data", path]):
        refused(work, decoy, argv, "not a regular file", capsys)


def test_a_tsv_with_carriage_returns_alone(work, decoy, capsys):
    (work / "cr.tsv").write_bytes(b"sentence\tlabel\rthe film was good\t1\rthe plot was dull\t0\r")
    refused(work, decoy, ["evaluate", "{w}/cls", "--format", "glue-single", "--data", "{w}/cr.tsv"],
            "carriage return alone", capsys)


def test_a_header_naming_a_column_twice(work, decoy, capsys):
    (work / "dup.tsv").write_text("sentence\tlabel\tlabel\nthe film was good\t1\t0\n", encoding="utf-8")
    refused(work, decoy, ["evaluate", "{w}/cls", "--format", "glue-single", "--data", "{w}/dup.tsv"],
            "names column 'label' twice (columns 2 and 3)", capsys)


def test_squad_eval_refuses_a_nan_no_answer_score(work, decoy, capsys):
    (work / "pred.json").write_text(json.dumps({"q1": "john"}))
    (work / "na.json").write_text('{"q1": NaN}')
    refused(work, decoy, ["squad-eval", "{w}/squad/dev-v2.0.json", "{w}/pred.json", "--na-prob", "{w}/na.json"],
            "expected a finite number", capsys)


# --- SWAG ---------------------------------------------------------------------------------------

SWAG_HEADER = "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label"


def _swag(work: Path, rows: list[str], header: str = SWAG_HEADER) -> Path:
    cfg = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=64)
    if not (work / "mc").exists():
        BertForMultipleChoice(cfg, seed=0).save_pretrained(work / "mc", vocab=VOCAB)
    path = work / "swag.csv"
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


ROW1 = "v,0,s,the film was,good,gold,good,bad,dull,fun,0"
ROW2 = "v,0,s,paris was,the,gold,plot,film,awful,great,2"


def test_a_swag_field_over_128_kb_is_read_and_one_over_the_limit_refused(work, decoy, capsys):
    _swag(work, [ROW1, ROW2.replace("paris was", "paris " * 40_000)])  # 240 KB: Python's csv stopped at 128 KiB
    assert main(["evaluate", str(work / "mc"), "--format", "swag", "--data", str(work / "swag.csv")]) == 0
    capsys.readouterr()
    _swag(work, [ROW1, ROW2.replace("paris was", "paris " * 800_000)])  # 4.8 MB
    refused(work, decoy, ["evaluate", "{w}/mc", "--format", "swag", "--data", "{w}/swag.csv"],
            "swag.csv:3: not a readable CSV row", capsys)
    refused(work, decoy, ["predict", "{w}/mc", "--format", "swag", "--file", "{w}/swag.csv", "--out", "{w}/p.csv"],
            "swag.csv:3: not a readable CSV row", capsys)


def test_a_blank_swag_row_shifts_no_prediction(work, capsys):
    _swag(work, [ROW2])
    assert main(["predict", str(work / "mc"), "--format", "swag", "--file", str(work / "swag.csv"), "--out",
                 str(work / "alone.csv")]) == 0
    alone = (work / "alone.csv").read_text().splitlines()[1]
    _swag(work, [ROW1, ",,,,,,,,,,", "", ROW2])
    assert main(["predict", str(work / "mc"), "--format", "swag", "--file", str(work / "swag.csv"), "--out",
                 str(work / "p.csv")]) == 0
    lines = (work / "p.csv").read_text().splitlines()
    assert len(lines) == 3 and lines[2] == alone  # ROW2's prediction, in ROW2's row


@pytest.mark.parametrize("fmt", ["swag", "glue-single", "conll"])
def test_predict_file_in_chunks_writes_what_one_chunk_writes(fmt, work, monkeypatch, capsys):
    """predict --file holds the features of CHUNK examples at a time; with chunks of 2 the output
    file is byte for byte the one of a single chunk."""
    from minibert.finetune import evaluate

    if fmt == "swag":
        model, path = "mc", _swag(work, [ROW1, ROW2, ROW1, "", ROW2, ROW2])
    elif fmt == "conll":
        model, path = "tag", work / "t.conll"
        edit_json(work / "tag/config.json", id2label={"0": "O", "1": "B-person", "2": "I-person"},
                  label2id={"O": 0, "B-person": 1, "I-person": 2})
        path.write_text("john\nvisited\n\nparis\n\nthe\nfilm\nwas\ngood\n\nbad\n\ndull\n", encoding="utf-8")
    else:
        model, path = "cls", work / "unlabelled.tsv"
        path.write_text("sentence\n" + "".join(f"the film was {w}\n" for w in ("good", "bad", "dull", "fun", "great")))
    outputs = []
    for chunk in (10_000, 2):
        monkeypatch.setattr(evaluate, "CHUNK", chunk)
        out = work / f"p{chunk}.txt"
        assert main(["predict", str(work / model), "--format", fmt, "--file", str(path), "--out", str(out)]) == 0
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) >= 5


def test_squad_predictions_in_chunks_are_those_of_one_chunk(work, monkeypatch, capsys):
    from minibert.finetune import evaluate

    _qa_run(work, {})
    questions = [(f"q{i}", q, "john visited paris", "john", 0) for i, q in
                 enumerate(["who visited paris", "who was good", "what was dull", "who", "paris"])]
    (work / "squad/five.json").write_text(json.dumps(squad_json(questions)), encoding="utf-8")
    got = []
    for chunk in (10_000, 2):
        monkeypatch.setattr(evaluate, "CHUNK", chunk)
        assert main(["predict", str(work / "qa"), "--file", str(work / "squad/five.json"), "--out",
                     str(work / f"p{chunk}")]) == 0
        got.append({name: (work / f"p{chunk}" / name).read_bytes()
                    for name in ("predictions.json", "nbest.json", "null_odds.json")})
    assert got[0] == got[1]
    assert len(json.loads(got[0]["nbest.json"])) == 5 and json.loads(got[0]["predictions.json"]).keys() == \
        {f"q{i}" for i in range(5)}


def test_evaluate_refuses_a_swag_file_without_labels(work, decoy, capsys):
    _swag(work, [r.rsplit(",", 1)[0] for r in (ROW1, ROW2)], SWAG_HEADER.rsplit(",", 1)[0])
    refused(work, decoy, ["evaluate", "{w}/mc", "--format", "swag", "--data", "{w}/swag.csv"], "no label column",
            capsys)
    assert main(["predict", str(work / "mc"), "--format", "swag", "--file", str(work / "swag.csv"), "--out",
                 str(work / "p.csv")]) == 0  # predicting needs none


# --- carriage returns alone, and devices or FIFOs where a model's files are read -------------------

def test_a_conll_file_with_carriage_returns_alone(work, decoy, capsys):
    (work / "cr.conll").write_bytes(b"john\tB-person\rvisited\tO\r\rparis\tO\r")
    edit_json(work / "tag/config.json", id2label={"0": "O", "1": "B-person", "2": "I-person"},
              label2id={"O": 0, "B-person": 1, "I-person": 2})
    refused(work, decoy, ["evaluate", "{w}/tag", "--format", "conll", "--data", "{w}/cr.conll"],
            "cr.conll:1: lines end in a carriage return alone", capsys)
    refused(work, decoy, ["predict", "{w}/tag", "--format", "conll", "--file", "{w}/cr.conll", "--out", "{w}/p"],
            "cr.conll:1: lines end in a carriage return alone", capsys)


def test_a_device_or_fifo_where_a_vocab_or_config_is_read_is_named_as_such(work, decoy, capsys):
    refused(work, decoy, ["tokenize", "--vocab", "/dev/zero", "the film"], "/dev/zero: not a regular file", capsys)
    refused(work, decoy, ["vocab", "--files", "/dev/zero", "--out", "{w}/v.txt"], "/dev/zero: not a regular file",
            capsys)
    (work / "cls/vocab.txt").unlink()
    os.symlink("/dev/zero", work / "cls/vocab.txt")
    refused(work, decoy, ["predict", "{w}/cls", "the film"], "vocab.txt: not a regular file", capsys)
    (work / "pre/config.json").unlink()
    os.mkfifo(work / "pre/config.json")
    refused(work, decoy, ["fill-mask", "{w}/pre", "the [MASK] was good"], "config.json: not a regular file", capsys)
