"""Dropout's random stream (minibert/philox.py): Philox4x32-10's known answers, and the statistics
of the masks it makes."""
import math

import numpy as np
import pytest

from minibert import layers, philox


# Random123's known-answer vectors for philox4x32 with 10 rounds (kat_vectors): counter, key, output
PHILOX_KAT = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
              ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
              ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
               (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]


@pytest.mark.parametrize("counter,key,expected", PHILOX_KAT, ids=["zeros", "ones", "pi"])
def test_philox4x32_matches_random123_known_answers(counter, key, expected):
    assert philox.philox4x32(np.array([counter]), key)[0].tolist() == list(expected)


def test_random_bits_are_a_function_of_key_and_index_only():
    key = philox.draw_dropout_key(np.random.default_rng(0))
    bits = philox.random_bits(key, 1001)
    np.testing.assert_array_equal(philox.random_bits(key, 37), bits[:37])  # a prefix: the same words
    blocks = philox.philox4x32(np.array([[250, 0, 0, 0]]), key)[0]  # element i: word i % 4 of block i // 4
    np.testing.assert_array_equal(bits[1000], blocks[0])
    other = philox.random_bits(philox.draw_dropout_key(np.random.default_rng(1)), 1001)
    assert (other != bits).mean() > 0.99  # another key, other words


def test_dropout_mask_rate_and_independence():
    """Not only the mean: the keep rate within 4 sigma of 1 - p; the 32-bit words uniform (chi-square
    of their top 8 bits over 256 bins); neighbouring elements, rows and two calls uncorrelated."""
    rng = np.random.default_rng(0)
    p, shape = 0.1, (512, 768)
    n = shape[0] * shape[1]
    m1 = philox.dropout_mask(philox.draw_dropout_key(rng), shape, p, np.float64) > 0  # (512, 768) kept
    m2 = philox.dropout_mask(philox.draw_dropout_key(rng), shape, p, np.float64) > 0  # the next call's
    for m in (m1, m2):
        assert abs(m.mean() - (1 - p)) < 4 * math.sqrt(p * (1 - p) / n)
    bits = philox.random_bits(philox.draw_dropout_key(rng), n)
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
    assert philox.dropout_threshold(0.0) == 0  # every word >= 0: all kept
    assert philox.dropout_threshold(0.5) == 2**31
    assert philox.dropout_threshold(0.1) == round(0.1 * 2**32)
    assert philox.dropout_threshold(1 - 1e-12) == 2**32 - 1  # stays a 32-bit value


def test_the_reference_dropout_takes_its_mask_from_the_stream():
    """layers.dropout_forward draws one key from rng and applies philox.dropout_mask's mask."""
    x = np.random.default_rng(1).standard_normal((7, 33)).astype(np.float32)  # (rows, cols)
    out, cache = layers.dropout_forward(x, 0.3, np.random.default_rng(5))
    mask = philox.dropout_mask(philox.draw_dropout_key(np.random.default_rng(5)), x.shape, 0.3, np.float32)
    np.testing.assert_array_equal(cache.mask, mask)
    np.testing.assert_array_equal(out, x * mask)
