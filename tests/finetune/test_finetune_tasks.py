"""Fine-tuning data: the readers, label order, feature layout, nextsent and the task registry,
on tiny files written in tmp_path and a hand-made vocabulary."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from corpora import REPO

from minibert.finetune.task_data import (IGNORE_INDEX, TASKS, TaggedExample, TaskData, TextExample, choice_features,
                                     classification_features, generic_task, get_task, label_list, load_task,
                                     nextsent_examples, read_conll, read_glue, read_swag, score, token_features, trim,
                                     word_predictions)
from minibert.text.tokenizer import BertTokenizer

ROOT = REPO
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "was", "fun", "a", "b",
         "c", "d", "e", "new", "york", "rock", "##s", "it", "he", "smiles", "sits", "."]
PAD, UNK, CLS, SEP = 0, 1, 2, 3


@pytest.fixture
def tok():
    return BertTokenizer(VOCAB)


def ids(words: str) -> list[int]:
    return [VOCAB.index(w) for w in words.split()]


def write(path: Path, text: str, newline: str = "\n") -> Path:
    path.write_bytes(text.replace("\n", newline).encode("utf-8"))
    return path


# ---------------------------------------------------------------------------------------------
# GLUE TSV

def test_read_glue_single_sentence(tmp_path):
    f = write(tmp_path / "train.tsv", "label\tsentence\n1\tthe film was fun\n0\ta b\n")
    examples = read_glue(f, single=True)
    assert examples == [TextExample("the film was fun", None, "1", f"{f}:2"),
                        TextExample("a b", None, "0", f"{f}:3")]


def test_read_glue_pair_crlf_and_quotes_are_plain_characters(tmp_path):
    text = 'index\tsentence1\tsentence2\tlabel\n0\the said "a\tb" c\tentailment\n'
    f = write(tmp_path / "dev.tsv", text, newline="\r\n")
    [e] = read_glue(f, single=False)
    assert (e.text_a, e.text_b, e.label) == ('he said "a', 'b" c', "entailment")


def test_read_glue_wrong_column_count_names_the_line(tmp_path):
    f = write(tmp_path / "train.tsv", "sentence\tlabel\nfine\t1\none\textra\t0\n")
    with pytest.raises(ValueError, match=re.escape(f"{f}:3: 3 tab-separated columns, expected 2")):
        read_glue(f, single=True)
    # the text in the last column takes a tab back (readers._fit_row), with a note
    last = write(tmp_path / "last.tsv", "label\tsentence\n1\tfine\n0\tone\textra\n")
    assert read_glue(last, single=True)[1].text_a == "one\textra"


def test_read_glue_empty_file_and_missing_columns(tmp_path):
    empty = write(tmp_path / "empty.tsv", "")
    with pytest.raises(ValueError, match=re.escape(f"{empty}:1: empty file")):
        read_glue(empty, single=True)
    single = write(tmp_path / "single.tsv", "label\tsentence\n1\tfine\n")
    with pytest.raises(ValueError, match="no pair of text columns"):
        read_glue(single, single=False)


def test_read_glue_without_label_column_is_a_test_set(tmp_path, tok):
    f = write(tmp_path / "test.tsv", "index\tsentence\n0\tthe film\n")
    examples = read_glue(f, single=True)
    assert examples[0].label is None
    assert classification_features(examples, tok, 8, ["0", "1"])["labels"].tolist() == [-1]


def test_label_list_is_sorted_not_first_seen():
    examples = [TextExample("a", None, label, "f:1") for label in ["pos", "neg", "pos"]]
    assert label_list(examples) == ["neg", "pos"]
    tagged = [TaggedExample(["a", "b"], ["O", "B-x"], "f:1")]
    assert label_list(tagged) == ["B-x", "O"]


def _glue_dir(tmp_path, train: str, dev: str) -> Path:
    write(tmp_path / "train.tsv", "label\tsentence\n" + train)
    write(tmp_path / "dev.tsv", "label\tsentence\n" + dev)
    return tmp_path


def test_unseen_dev_label_names_file_line_and_known_labels(tmp_path, tok):
    d = _glue_dir(tmp_path, "pos\ta\nneg\tb\n", "pos\ta\nmaybe\tb\n")
    with pytest.raises(ValueError, match=re.escape(f"{d / 'dev.tsv'}:3: label 'maybe'")) as err:
        load_task(generic_task("glue-single"), tok, 8, data_dir=d)
    assert "neg, pos" in str(err.value)


def test_missing_file_lists_what_is_there(tmp_path, tok):
    write(tmp_path / "train.tsv", "label\tsentence\n1\ta\n")
    write(tmp_path / "notes.txt", "")
    with pytest.raises(FileNotFoundError, match=r"dev\.tsv.*notes\.txt, train\.tsv"):
        load_task("sst2", tok, 8, data_dir=tmp_path)


def test_load_and_score_a_glue_task(tmp_path, tok):
    d = _glue_dir(tmp_path, "1\ta b\n0\tc\n1\td\n", "0\ta\n1\tb c d e\n")
    data = load_task("sst2", tok, 5, data_dir=d)
    assert data.labels == ["0", "1"]
    assert data.dev["labels"].tolist() == [0, 1]
    assert data.info["dev_truncated"] == 1  # "b c d e" has 4 tokens, room for 3
    assert data.info["dev_first_truncated"] == f"{d / 'dev.tsv'}:3"
    assert "train_truncated" not in data.info
    assert score(data, np.array([0, 0]))["accuracy"] == pytest.approx(0.5)


def test_strict_length_names_the_first_example_too_long(tmp_path, tok):
    d = _glue_dir(tmp_path, "1\ta b\n0\tc\n", "0\ta\n1\tb c d e\n0\tb c d e\n")
    with pytest.raises(ValueError, match=re.escape(f"{d / 'dev.tsv'}:3: this dev example does not fit in "
                                                   "max_seq_length=5")) as err:
        load_task("sst2", tok, 5, data_dir=d, strict_length=True)
    assert "2 dev example(s)" in str(err.value)
    assert load_task("sst2", tok, 6, data_dir=d, strict_length=True).info.get("dev_truncated") is None


def test_regression_labels_are_floats(tmp_path, tok):
    write(tmp_path / "train.tsv", "sentence1\tsentence2\tscore\na\tb\t0.5\nc\td\t4\n")
    write(tmp_path / "dev.tsv", "sentence1\tsentence2\tscore\na\tb\t1\nc\td\t2\nb\ta\t3\n")
    data = load_task(generic_task("glue-pair", regression=True), tok, 8, data_dir=tmp_path)
    assert data.labels is None and data.dev["labels"].dtype == np.float32
    np.testing.assert_allclose(data.dev["labels"], [1, 2, 3])
    assert score(data, np.array([0.1, 0.2, 0.35]))["spearman"] == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------
# CoNLL

def test_read_conll_docstart_blank_tab_lines_and_no_final_blank(tmp_path):
    text = "-DOCSTART-\tO\n\nNew\tB-loc\nYork\tI-loc\n\t\nrocks NN B-x\n"
    f = write(tmp_path / "train.conll", text)
    examples = read_conll(f)
    assert examples == [TaggedExample(["New", "York"], ["B-loc", "I-loc"], f"{f}:3"),
                        TaggedExample(["rocks"], ["B-x"], f"{f}:6")]


def test_read_conll_bad_lines_name_the_line(tmp_path):
    one_column = write(tmp_path / "a.conll", "New\tB-loc\nYork\n")
    with pytest.raises(ValueError, match=re.escape(f"{one_column}:2: expected a word and a tag")):
        read_conll(one_column)
    iobes = write(tmp_path / "b.conll", "New\tS-loc\n")
    with pytest.raises(ValueError, match=re.escape(f"{iobes}:1: tag 'S-loc' is not BIO")):
        read_conll(iobes)


# ---------------------------------------------------------------------------------------------
# SWAG

SWAG_HEADER = "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"


def test_read_swag_pairs_sent2_with_each_ending(tmp_path):
    rows = ('v1,7,x,"A man, tired, sits.",He,gold,smiles.,"runs\naway.",sits.,falls.,0\n'
            "v2,8,x,It rains.,The film,gen,was fun.,a.,b.,c.,3\n")
    f = write(tmp_path / "train.csv", SWAG_HEADER + rows)
    first, second = read_swag(f)
    assert first.context == "A man, tired, sits."
    assert first.endings == ["He smiles.", "He runs\naway.", "He sits.", "He falls."]
    assert (first.label, first.where) == (0, f"{f}:2")
    assert (second.label, second.where) == (3, f"{f}:4")  # the quoted newline took a line


def test_read_swag_errors_name_the_line(tmp_path):
    bad_label = write(tmp_path / "a.csv", SWAG_HEADER + "v,1,x,s,t,g,a,b,c,d,4\n")
    with pytest.raises(ValueError, match=re.escape(f"{bad_label}:2: label '4'")):
        read_swag(bad_label)
    no_column = write(tmp_path / "b.csv", "sent1,sent2,ending0,label\ns,t,a,0\n")
    with pytest.raises(ValueError, match=re.escape(f"{no_column}:1: SWAG header lacks column(s) ending1")):
        read_swag(no_column)


def test_swag_task_accepts_dev_csv(tmp_path, tok):
    row = "v,1,x,a b,c,g,d,e,a,b,2\n"
    write(tmp_path / "train.csv", SWAG_HEADER + row)
    write(tmp_path / "dev.csv", SWAG_HEADER + row + row)
    data = load_task("swag", tok, 8, data_dir=tmp_path)
    assert data.dev["input_ids"].shape == (2, 4, 8)
    assert data.info["dev_file"].endswith("dev.csv")


# ---------------------------------------------------------------------------------------------
# Classification features

def test_pair_layout_segments_mask_and_padding(tok):
    feats = classification_features([TextExample("the film", "was fun", "b", "f:2")], tok, 10, ["a", "b"])
    assert feats["input_ids"].tolist() == [[CLS, *ids("the film"), SEP, *ids("was fun"), SEP, PAD, PAD, PAD]]
    assert feats["segment_ids"].tolist() == [[0, 0, 0, 0, 1, 1, 1, 0, 0, 0]]
    assert feats["input_mask"].tolist() == [[1] * 7 + [0] * 3]
    assert feats["labels"].tolist() == [1] and feats["labels"].dtype == np.int64
    assert feats["input_ids"].dtype == np.int64 and not feats["truncated"][0]


def test_pair_truncation_drops_from_the_longer_side(tok):
    # A = 4 tokens, B = 2, room for 7 - 3 = 4: A loses its last two ("d", "e")
    feats = classification_features([TextExample("a b d e", "c c", None, "f:2")], tok, 7, ["x"])
    assert feats["input_ids"].tolist() == [[CLS, *ids("a b"), SEP, *ids("c c"), SEP]]
    assert feats["truncated"].tolist() == [True]


def test_single_sentence_is_cut_to_max_minus_two(tok):
    feats = classification_features([TextExample("a b c d e", None, "x", "f:2")], tok, 5, ["x"])
    assert feats["input_ids"].tolist() == [[CLS, *ids("a b c"), SEP]]


def test_pad_to_longest_and_trim(tok):
    examples = [TextExample("a", None, "x", "f:2"), TextExample("a b c", None, "x", "f:3")]
    longest = classification_features(examples, tok, 32, ["x"], pad_to="longest")
    assert longest["input_ids"].shape == (2, 5)
    full = classification_features(examples, tok, 32, ["x"])
    trimmed = trim(full)
    assert trimmed["input_ids"].shape == (2, 5) and trimmed["labels"].shape == (2,)
    np.testing.assert_array_equal(trimmed["input_ids"], longest["input_ids"])


# ---------------------------------------------------------------------------------------------
# Token features

LABELS = ["B-loc", "I-loc", "O"]


def test_first_sub_token_gets_the_label_others_ignore(tok):
    e = TaggedExample(["New", "York", "rocks", "\ufe0f"], ["B-loc", "I-loc", "O", "O"], "f:1")
    feats = token_features([e], tok, 10, LABELS)
    # [CLS] new york rock ##s [UNK] [SEP] [PAD] [PAD] [PAD]; U+FE0F tokenises to nothing -> [UNK]
    assert feats["input_ids"].tolist() == [[CLS, *ids("new york rock ##s"), UNK, SEP, PAD, PAD, PAD]]
    ig = IGNORE_INDEX
    assert feats["labels"].tolist() == [[ig, 0, 1, 2, ig, 2, ig, ig, ig, ig]]
    assert feats["word_index"].tolist() == [[-1, 0, 1, 2, -1, 3, -1, -1, -1, -1]]
    assert feats["segment_ids"].sum() == 0 and feats["input_mask"].sum() == 7


def test_long_sentence_is_split_and_reassembled(tok):
    words = ["New", "York", "rocks", "a", "b", "c", "rocks"]  # pieces 1 1 2 1 1 1 2 = 9
    tags = ["B-loc", "I-loc", "O", "O", "B-loc", "O", "O"]
    short = TaggedExample(["the"], ["O"], "f:9")
    feats = token_features([TaggedExample(words, tags, "f:1"), short], tok, 6, LABELS)  # window 4
    # chunks: [New York rocks] (4 pieces), [a b c] (3), [rocks] (2), then the short sentence
    assert feats["example_index"].tolist() == [0, 0, 0, 1]
    assert feats["input_ids"][1].tolist() == [CLS, *ids("a b c"), SEP, PAD]
    assert feats["word_index"][1].tolist() == [-1, 3, 4, 5, -1, -1]
    # predicting the gold label at every labelled position gives back the gold tags
    gold = np.where(feats["labels"] == IGNORE_INDEX, 0, feats["labels"])  # (N, T)
    assert word_predictions(feats, trim(dict(feats, labels=gold))["labels"], LABELS) == [tags, ["O"]]


def test_word_longer_than_the_window_keeps_its_first_pieces(tok):
    feats = token_features([TaggedExample(["rocks", "a"], ["O", "B-loc"], "f:1")], tok, 3, LABELS)
    assert feats["input_ids"].tolist() == [[CLS, *ids("rock"), SEP], [CLS, *ids("a"), SEP]]


def test_token_task_end_to_end_scores_entities(tmp_path, tok):
    write(tmp_path / "train.conll", "New\tB-loc\nYork\tI-loc\n\nthe\tO\n")
    write(tmp_path / "dev.conll", "a\tB-loc\nb\tI-loc\nc\tO\n")
    data = load_task(generic_task("conll"), tok, 8, data_dir=tmp_path)
    pred = np.full(data.dev["input_ids"].shape, LABELS.index("O"))  # (N, T)
    pred[0, 1] = LABELS.index("B-loc")  # only "a": wrong span
    result = score(data, pred)
    assert result == pytest.approx({"precision": 0.0, "recall": 0.0, "f1": 0.0})


# ---------------------------------------------------------------------------------------------
# Multiple choice and nextsent

def test_choice_features_layout(tok):
    from minibert.finetune.task_data import ChoiceExample
    e = ChoiceExample("he sits", ["he smiles", "a b c d e"], 1, "f:2")
    feats = choice_features([e], tok, 7)
    assert feats["input_ids"].shape == (1, 2, 7)
    assert feats["input_ids"][0, 0].tolist() == [CLS, *ids("he sits"), SEP, *ids("he smiles"), SEP]
    assert feats["input_ids"][0, 1].tolist() == [CLS, *ids("he sits"), SEP, *ids("a b"), SEP]
    assert feats["segment_ids"][0, 1].tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert feats["labels"].tolist() == [1] and feats["truncated"].tolist() == [True]


DOCS = [[f"doc{d} sentence{i}." for i in range(n)] for d, n in enumerate([5, 3, 1, 4, 2])]


def test_nextsent_is_deterministic_and_right_ending_is_next():
    examples = nextsent_examples(DOCS, seed=7, max_per_doc=None)
    assert examples == nextsent_examples(DOCS, seed=7, max_per_doc=None)
    assert examples != nextsent_examples(DOCS, seed=8, max_per_doc=None)
    assert len(examples) == 4 + 2 + 0 + 3 + 1  # every sentence that has a next one
    owner = {s: d for d, doc in enumerate(DOCS) for s in doc}
    for e in examples:
        d = owner[e.context]
        i = DOCS[d].index(e.context)
        assert e.endings[e.label] == DOCS[d][i + 1]
        wrong = [s for k, s in enumerate(e.endings) if k != e.label]
        assert len(wrong) == 3 and len(set(wrong)) == 3
        assert all(owner[s] != d for s in wrong)  # distractors come from other documents
    assert len({e.label for e in examples}) > 1  # the right answer moves around


def test_nextsent_max_per_doc_and_errors():
    examples = nextsent_examples(DOCS, seed=0, max_per_doc=1)
    assert len(examples) == 4  # one per document with >= 2 sentences
    with pytest.raises(ValueError, match="at least 2 documents"):
        nextsent_examples(DOCS[:1], seed=0)


def test_nextsent_task_reads_corpus_files(tmp_path, tok):
    text = "\n\n".join("\n".join(doc) for doc in DOCS) + "\n"
    write(tmp_path / "train.txt", text)
    write(tmp_path / "heldout.txt", text)
    data = load_task("nextsent", tok, 16, data_dir=tmp_path, seed=3)
    assert data.train["input_ids"].shape == (2 + 2 + 2 + 1, 4, 16)  # at most 2 per train document
    assert data.dev["labels"].shape == (10,)  # every position in dev


# punct: punctuation restoration from a corpus

def test_punct_example_tags_the_word_before_each_mark():
    from minibert.taskdata.readers import punct_example

    e = punct_example('Then, call "f()"; it returns os.path . Done!', "f:3")
    assert e.words == ["Then", "call", '"f()"', "it", "returns", "os.path", "Done"]
    # "os.path" keeps its dot; the lone "." tags the word before it
    assert e.tags == ["B-COMMA", "O", "B-COLON", "O", "O", "B-PERIOD", "B-PERIOD"]
    assert e.where == "f:3"
    assert punct_example(". ,", "f:4") is None  # marks only: no words


def test_punct_task_pairs_sentences_and_scores_by_tag(tmp_path, tok):
    from minibert.taskdata.readers import punct_examples

    docs = [["the film was fun.", "he smiles, he sits."], ["a b c.", "d e:", "new york rock."]]
    examples = punct_examples(docs, source="c.txt")
    assert [e.words for e in examples] == [["the", "film", "was", "fun", "he", "smiles", "he", "sits"],
                                           ["a", "b", "c", "d", "e"], ["new", "york", "rock"]]
    assert examples[0].tags == ["O", "O", "O", "B-PERIOD", "O", "B-COMMA", "O", "B-PERIOD"]
    assert examples[1].tags == ["O", "O", "B-PERIOD", "O", "B-COLON"]
    assert examples[2].where == "c.txt: document 2, sentence 3"
    text = "\n\n".join("\n".join(doc) for doc in docs) + "\n"
    write(tmp_path / "train.txt", text)
    write(tmp_path / "heldout.txt", text)
    data = load_task("punct", tok, 16, data_dir=tmp_path)
    assert data.labels == ["B-COLON", "B-COMMA", "B-PERIOD", "O"]
    assert data.train["input_ids"].shape[0] == 3
    gold = np.full(data.dev["input_ids"].shape, data.labels.index("O"))
    assert score(data, gold)["f1"] == 0.0  # always "O": no mark found
    perfect = np.where(data.dev["labels"] == IGNORE_INDEX, 0, data.dev["labels"])
    assert score(data, perfect)["f1"] == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------
# Registry and the shipped WNUT-17 files

def test_registry():
    assert {name: (t.kind, t.main_metric) for name, t in TASKS.items()} == {
        "sst2": ("classification", "accuracy"), "rte": ("classification", "accuracy"),
        "wnut17": ("token", "f1"), "swag": ("choice", "accuracy"), "nextsent": ("choice", "accuracy"),
        "punct": ("token", "f1")}
    assert TASKS["swag"].dev_files == ("val.csv", "dev.csv")
    assert TASKS["wnut17"].head == "token" and TASKS["sst2"].head == "sequence"
    with pytest.raises(ValueError, match="known tasks: sst2"):
        get_task("cola")
    with pytest.raises(ValueError, match="unknown format"):
        generic_task("json")


def test_score_accepts_task_data():
    data = TaskData(TASKS["rte"], {}, {"labels": np.array([0, 1, 1, 0])}, ["entailment", "not_entailment"], [])
    assert score(data, [0, 1, 0, 0]) == pytest.approx({"accuracy": 0.75})


@pytest.mark.parametrize("split, sentences", [("train", 3394), ("dev", 1009)])
def test_shipped_wnut17_files(split, sentences):
    examples = read_conll(ROOT / "data" / "wnut17" / f"{split}.conll")
    assert len(examples) == sentences
    types = {"person", "location", "corporation", "product", "creative-work", "group"}
    allowed = {"O"} | {f"{p}-{t}" for p in "BI" for t in types}
    assert set(label_list(examples)) == allowed
    assert (ROOT / "data" / "wnut17" / "README.md").is_file()
