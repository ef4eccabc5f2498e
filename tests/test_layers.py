"""Every layer's backward against centered differences (float64, random parameters and upstream
gradients), plus the behaviours the gradient checks cannot see."""
import math

import numpy as np
import pytest

from minibert.analysis import gradcheck as gc
from minibert import layers as L


@pytest.mark.parametrize("check", gc.LAYER_CHECKS, ids=lambda f: f.__name__.removeprefix("check_"))
def test_layer_backward_matches_numerical(check):
    results = check(np.random.default_rng(1234), verbose=False)
    assert results, "a check function returned no comparisons"
    failed = [c.row() for c in results if not c]
    assert not failed, "\n".join(failed)


def test_embedding_backward_accumulates_repeated_ids():
    rng = np.random.default_rng(0)
    ids = np.array([[2, 2, 2]])
    segs = np.zeros((1, 3), dtype=int)
    tok, seg, pos = rng.standard_normal((4, 3)), rng.standard_normal((2, 3)), rng.standard_normal((5, 3))
    out, cache = L.embedding_forward(ids, segs, tok, seg, pos)
    np.testing.assert_allclose(out[0, 1], tok[2] + seg[0] + pos[1])
    dout = rng.standard_normal(out.shape)
    dtok, dseg, dpos = L.embedding_backward(dout, cache)
    np.testing.assert_allclose(dtok[2], dout[0].sum(axis=0))  # all three uses add up
    np.testing.assert_allclose(dtok[[0, 1, 3]], 0.0)
    np.testing.assert_allclose(dseg[0], dout[0].sum(axis=0))
    np.testing.assert_allclose(dpos[:3], dout[0])
    np.testing.assert_allclose(dpos[3:], 0.0)


def test_embedding_forward_rejects_bad_ids_and_lengths():
    tok, seg, pos = np.zeros((10, 4)), np.zeros((2, 4)), np.zeros((6, 4))
    with pytest.raises(ValueError, match=r"input_ids contains 10, outside \[0, 10\)"):
        L.embedding_forward(np.array([[1, 10]]), np.zeros((1, 2), int), tok, seg, pos)
    with pytest.raises(ValueError, match=r"segment_ids contains 2"):
        L.embedding_forward(np.array([[1, 2]]), np.array([[0, 2]]), tok, seg, pos)
    with pytest.raises(ValueError, match="sequence length 7 exceeds max_position_embeddings 6"):
        L.embedding_forward(np.zeros((1, 7), int), np.zeros((1, 7), int), tok, seg, pos)


def test_layernorm_forward_normalises_last_axis():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 16)) * 4 + 2
    out, _ = L.layernorm_forward(x, np.ones(16), np.zeros(16))
    np.testing.assert_allclose(out.mean(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(out.var(-1), 1.0, atol=1e-9)


def test_gelu_forward_exact_matches_math_erf_and_tanh_is_close():
    x = np.linspace(-6, 6, 241)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    out, _ = L.gelu_forward(x)
    np.testing.assert_allclose(out, exact, rtol=1e-14, atol=1e-15)
    out_tanh, _ = L.gelu_forward(x, approximate="tanh")
    diff = np.abs(out_tanh - exact).max()
    assert 1e-5 < diff < 5e-4  # the two forms differ, by at most ~5e-4 (docs/bert-notes.md §4.8)
    with pytest.raises(ValueError, match="approximate='sigmoid'"):
        L.gelu_forward(x, approximate="sigmoid")


def test_dropout_forward_is_inverted_and_identity_at_zero():
    rng = np.random.default_rng(0)
    x = np.ones((200, 500), dtype=np.float32)
    out, cache = L.dropout_forward(x, 0.25, rng)
    assert out.dtype == np.float32
    kept = out != 0
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_allclose(out[kept], 1 / 0.75, rtol=1e-6)
    np.testing.assert_array_equal(L.dropout_backward(x, cache), out)  # same mask on the way back
    same, cache0 = L.dropout_forward(x, 0.0, rng)
    assert same is x and cache0.mask is None
    with pytest.raises(ValueError, match="dropout probability 1.0"):
        L.dropout_forward(x, 1.0, rng)


# ---------------------------------------------------------------------------------------------
# dropout's generator: Philox4x32-10, known answers and the statistics of its masks

# Random123's known-answer vectors for philox4x32 with 10 rounds (kat_vectors): counter, key, output
PHILOX_KAT = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
              ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
              ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
               (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]


@pytest.mark.parametrize("counter,key,expected", PHILOX_KAT, ids=["zeros", "ones", "pi"])
def test_philox4x32_matches_random123_known_answers(counter, key, expected):
    assert L.philox4x32(np.array([counter]), key)[0].tolist() == list(expected)


def test_random_bits_are_a_function_of_key_and_index_only():
    key = L.draw_dropout_key(np.random.default_rng(0))
    bits = L.random_bits(key, 1001)
    np.testing.assert_array_equal(L.random_bits(key, 37), bits[:37])  # a prefix: the same words
    blocks = L.philox4x32(np.array([[250, 0, 0, 0]]), key)[0]  # element i: word i % 4 of block i // 4
    np.testing.assert_array_equal(bits[1000], blocks[0])
    other = L.random_bits(L.draw_dropout_key(np.random.default_rng(1)), 1001)
    assert (other != bits).mean() > 0.99  # another key, other words


def test_dropout_mask_rate_and_independence():
    """Not only the mean: the keep rate within 4 sigma of 1 - p; the 32-bit words uniform (chi-square
    of their top 8 bits over 256 bins); neighbouring elements, rows and two calls uncorrelated."""
    rng = np.random.default_rng(0)
    p, shape = 0.1, (512, 768)
    n = shape[0] * shape[1]
    m1 = L.dropout_mask(L.draw_dropout_key(rng), shape, p, np.float64) > 0  # (512, 768) kept
    m2 = L.dropout_mask(L.draw_dropout_key(rng), shape, p, np.float64) > 0  # the next call's
    for m in (m1, m2):
        assert abs(m.mean() - (1 - p)) < 4 * math.sqrt(p * (1 - p) / n)
    bits = L.random_bits(L.draw_dropout_key(rng), n)
    counts = np.bincount(bits >> np.uint32(24), minlength=256)  # top 8 bits
    chi2 = ((counts - n / 256) ** 2 / (n / 256)).sum()
    assert chi2 < 255 + 6 * math.sqrt(2 * 255), chi2  # 255 degrees of freedom: mean 255, sd 22.6

    def corr(a, b):
        return np.corrcoef(a.reshape(-1).astype(float), b.reshape(-1).astype(float))[0, 1]

    bound = 5 / math.sqrt(n)  # |r| of independent samples: sd 1/sqrt(n)
    assert abs(corr(m1[:, 1:], m1[:, :-1])) < bound  # neighbours in a row
    assert abs(corr(m1[1:], m1[:-1])) < bound  # the same column in neighbouring rows
    assert abs(corr(m1[:, 4:], m1[:, :-4])) < bound  # the same word of neighbouring Philox blocks
    assert abs(corr(m1, m2)) < bound  # two calls
    u = bits.astype(np.float64)
    assert abs(corr(u[1:], u[:-1])) < 5 / math.sqrt(n)  # the words themselves, lag 1


def test_dropout_threshold_keeps_the_right_fraction_of_words():
    assert L.dropout_threshold(0.0) == 0  # every word >= 0: all kept
    assert L.dropout_threshold(0.5) == 2**31
    assert L.dropout_threshold(0.1) == round(0.1 * 2**32)
    assert L.dropout_threshold(1 - 1e-12) == 2**32 - 1  # stays a 32-bit value



def test_attention_forward_masked_keys_get_zero_weight():
    rng = np.random.default_rng(0)
    B, NH, T, HS = 2, 3, 6, 4
    q, k, v = (rng.standard_normal((B, NH, T, HS)) for _ in range(3))
    mask = np.ones((B, T))
    mask[0, 4:] = 0
    mask[1, 1:] = 0  # only the first key is real
    out, cache = L.attention_forward(q, k, v, mask)
    assert np.all(cache.att[0, :, :, 4:] == 0.0)
    np.testing.assert_allclose(cache.att.sum(-1), 1.0, rtol=1e-12)
    # with a single real key every query copies that key's value
    np.testing.assert_allclose(out[1], np.broadcast_to(v[1, :, :1], (NH, T, HS)), rtol=1e-12)
    # changing padded keys/values changes nothing
    k2, v2 = k.copy(), v.copy()
    k2[0, :, 4:] = 100.0
    v2[0, :, 4:] = -7.0
    out2, _ = L.attention_forward(q, k2, v2, mask)
    np.testing.assert_allclose(out2, out, rtol=1e-12)


def test_attention_forward_scales_scores_by_inverse_sqrt_head_size():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, 3, 16)) for _ in range(3))
    _, cache = L.attention_forward(q, k, v, np.ones((1, 3)))
    s = q[0, 0] @ k[0, 0].T / 4.0
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(cache.att[0, 0], p / p.sum(-1, keepdims=True), rtol=1e-12)


def test_attention_forward_rejects_bad_shapes():
    q = np.zeros((1, 2, 3, 4))
    with pytest.raises(ValueError, match=r"attn_mask has shape \(1, 4\), expected \(1, 3\)"):
        L.attention_forward(q, q, q, np.ones((1, 4)))
    with pytest.raises(ValueError, match="q, k, v shapes differ"):
        L.attention_forward(q, np.zeros((1, 2, 3, 5)), q, np.ones((1, 3)))


def test_cross_entropy_ignores_unpredicted_positions():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((4, 7))
    targets = np.array([3, -100, 0, -100])
    loss, cache = L.cross_entropy_forward(logits, targets)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(loss, -(logp[0, 3] + logp[2, 0]) / 2, rtol=1e-12)
    d = L.cross_entropy_backward(1.0, cache)
    np.testing.assert_array_equal(d[[1, 3]], 0.0)
    logits2 = logits.copy()
    logits2[[1, 3]] += 50.0
    assert L.cross_entropy_forward(logits2, targets)[0] == pytest.approx(loss, rel=1e-12)
    # nothing to predict: loss 0 and no gradient (no division by zero)
    loss0, cache0 = L.cross_entropy_forward(logits, np.full(4, -100))
    assert loss0 == 0.0 and not L.cross_entropy_backward(1.0, cache0).any()
    with pytest.raises(ValueError, match=r"target 7 is outside \[0, 7\)"):
        L.cross_entropy_forward(logits, np.array([7, 0, 0, 0]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layers_keep_the_callers_dtype(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 8)).astype(dtype)
    w, b = np.ones(8, dtype), np.zeros(8, dtype)
    for out, cache, bwd in [
        (*L.linear_forward(x, rng.standard_normal((8, 4)).astype(dtype), np.zeros(4, dtype)), L.linear_backward),
        (*L.layernorm_forward(x, w, b), L.layernorm_backward),
        (*L.gelu_forward(x), L.gelu_backward),
        (*L.gelu_forward(x, "tanh"), L.gelu_backward),
        (*L.dropout_forward(x, 0.1, rng), L.dropout_backward),
    ]:
        assert out.dtype == dtype
        grads = bwd(np.ones_like(out), cache)
        for g in grads if isinstance(grads, tuple) else (grads,):
            assert g.dtype == dtype
    q = x.reshape(2, 1, 3, 8)
    out, cache = L.attention_forward(q, q, q, np.ones((2, 3)))
    assert out.dtype == dtype and all(g.dtype == dtype for g in L.attention_backward(out, cache))
    loss, cache = L.cross_entropy_forward(x, np.zeros((2, 3), int))
    assert loss.dtype == dtype and L.cross_entropy_backward(1.0, cache).dtype == dtype


def test_split_and_merge_heads_are_inverse():
    x = np.arange(2 * 3 * 8).reshape(2, 3, 8)
    h = L.split_heads(x, 4)
    assert h.shape == (2, 4, 3, 2)
    np.testing.assert_array_equal(h[1, 2, 0], x[1, 0, 4:6])  # head 2 owns channels 4..5
    np.testing.assert_array_equal(L.merge_heads(h), x)
