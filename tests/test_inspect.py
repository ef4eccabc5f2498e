"""minibert.analysis.inspect on a tiny saved model: fill-mask's k and the attention plot's limits.

`attention` used to cut text at 512 tokens silently and to draw a 211-Mpixel PNG for 600 words;
`fill-mask -k 0` printed nothing and `-k -1` the whole vocabulary but one.
"""
import struct

import pytest

from minibert.analysis import inspect as I
from minibert.bert import BertForPreTraining
from minibert.io import tensorfile
from minibert.model import BertConfig
from minibert.tools import look_inside as look

WORDS = ["the", "cat", "dog", "sat", "on", "a", "mat", "ran", "far", "."]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
MAX_POS = 160  # above the plot limit (128), so both limits can be hit


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    cfg = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=MAX_POS)
    BertForPreTraining(cfg, seed=0).save_pretrained(d, vocab=VOCAB)
    return d


@pytest.fixture(scope="module")
def loaded(run_dir):
    return look.load_model_and_tokenizer(run_dir)


def words(n: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))  # n tokens: every word is in VOCAB


@pytest.mark.parametrize("k", [0, -1, len(VOCAB) + 1])
def test_fill_mask_rejects_k_outside_1_to_vocab_size(loaded, k):
    model, tok = loaded
    with pytest.raises(ValueError, match=rf"k={k} predictions per \[MASK\]: k must be between 1 and "
                                         rf"the vocabulary size {len(VOCAB)}"):
        I.fill_mask(model, tok, "the [MASK] sat", k=k)


def test_fill_mask_k_bounds_are_inclusive(loaded):
    model, tok = loaded
    assert [len(p) for p in I.fill_mask(model, tok, "the [MASK] sat [MASK]", k=1)] == [1, 1]
    top = I.fill_mask(model, tok, "the [MASK] sat", k=len(VOCAB))[0]
    assert sorted(t for t, _ in top) == sorted(VOCAB)


def test_fill_mask_cli_k(run_dir, capsys):
    assert look.fill_mask_cli([str(run_dir), "the [MASK] sat", "-k", "0"]) == 1
    assert "k=0 predictions per [MASK]: k must be between 1 and" in capsys.readouterr().err
    assert look.fill_mask_cli([str(run_dir), "the [MASK] sat", "-k", "2"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + 1 + 2  # text, "[MASK] #1:", 2 rows


def test_attention_refuses_text_longer_than_the_model_takes(loaded, run_dir, capsys):
    model, tok = loaded
    with pytest.raises(ValueError, match=rf"the text is {MAX_POS + 3} tokens long \(\[CLS\] and "
                                         rf"\[SEP\] included\); the model takes at most {MAX_POS}"):
        I.attention_maps(model, tok, words(MAX_POS + 1))
    with pytest.raises(ValueError, match=rf"is {MAX_POS + 2} tokens long"):  # the pair counts too
        I.attention_maps(model, tok, words(MAX_POS - 20), words(19))
    assert look.attention_cli([str(run_dir), words(MAX_POS + 1), "--out", str(run_dir / "a")]) == 1
    assert f"the model takes at most {MAX_POS}" in capsys.readouterr().err


def test_attention_refuses_to_plot_more_than_128_tokens(loaded, run_dir, capsys):
    model, tok = loaded
    result = I.attention_maps(model, tok, words(I.MAX_PLOT_TOKENS - 1))  # 129 with [CLS], [SEP]
    assert result.maps.shape[-1] == I.MAX_PLOT_TOKENS + 1
    with pytest.raises(ValueError, match=rf"129 tokens long .*readable up to {I.MAX_PLOT_TOKENS} "
                                         r"tokens: shorten the text"):
        I.plot_attention(result, run_dir / "too_long")
    assert not (run_dir / "too_long").exists()
    assert look.attention_cli([str(run_dir), words(I.MAX_PLOT_TOKENS - 1), "--out", str(run_dir / "b")]) == 1
    assert "shorten the text" in capsys.readouterr().err


@pytest.mark.parametrize("NH", [1, 2, 12, 16])
def test_figure_pixels_are_bounded_for_the_longest_plot(NH):
    head, in_row, _ = I.figure_sizes(I.MAX_PLOT_TOKENS, NH)
    assert head * I.DPI <= 2700 and in_row * I.DPI <= 2700 and in_row * NH * I.DPI <= 5400


def test_token_labels_are_left_out_of_a_crowded_layer_row():
    assert I.figure_sizes(10, 2)[2] and not I.figure_sizes(I.MAX_PLOT_TOKENS, 12)[2]


def _png_size(path) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])  # IHDR: width, height


def test_attention_cli_writes_pngs_of_the_planned_size(run_dir, capsys):
    out = run_dir / "small"
    assert look.attention_cli([str(run_dir), words(8), "--out", str(out)]) == 0
    names = sorted(p.name for p in out.glob("*.png"))
    assert names == ["layer0.png", "layer0_head0.png", "layer0_head1.png"]
    head, in_row, _ = I.figure_sizes(10, 2)
    w, h = _png_size(out / "layer0_head0.png")
    assert abs(w - head * I.DPI) <= 1 and abs(h - head * I.DPI) <= 1
    w, h = _png_size(out / "layer0.png")
    assert abs(w - 2 * in_row * I.DPI) <= 1 and abs(h - in_row * I.DPI) <= 1


def test_damaged_weights_are_refused_by_the_commands_unless_no_verify(run_dir, tmp_path, capsys):
    import shutil

    import numpy as np

    from minibert import checkpoint as ck

    bad = tmp_path / "bad"
    shutil.copytree(run_dir, bad)
    path = bad / "model.safetensors"
    _, start = tensorfile.read_safetensors_header(path)
    raw = bytearray(path.read_bytes())
    for i in range(start + 100, start + 300):  # 200 data bytes changed
        raw[i] ^= 0x01
    path.write_bytes(bytes(raw))
    assert look.fill_mask_cli([str(bad), "the [MASK] sat"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path} is corrupt") and "--no-verify" in err and err.count("\n") == 1
    assert look.fill_mask_cli([str(bad), "the [MASK] sat", "--no-verify"]) == 0
    assert look.attention_cli([str(bad), "the cat sat", "--out", str(tmp_path / "att")]) == 1
    assert look.attention_cli([str(bad), "the cat sat", "--out", str(tmp_path / "att"), "--no-verify"]) == 0
    capsys.readouterr()
    # a NaN saved with a matching digest: refused for not being finite
    model = BertForPreTraining.from_pretrained(run_dir)
    model.params["tok_emb"][5, 0] = np.nan
    model.save_pretrained(bad, vocab=VOCAB)
    assert look.fill_mask_cli([str(bad), "the [MASK] sat"]) == 1
    assert "'bert.embeddings.word_embeddings.weight' holds 1 NaN/inf" in capsys.readouterr().err
