"""The checker itself must catch wrong gradients, not only bless right ones."""
import numpy as np

from minibert.analysis import gradcheck as gc
from minibert import layers as L


def test_numerical_grad_matches_known_derivative_and_restores_input():
    x = np.array([0.3, -1.2, 2.0])
    before = x.copy()
    g = gc.numerical_grad(lambda: x**3, x, np.array([1.0, 2.0, -1.0]))
    np.testing.assert_allclose(g, 3 * before**2 * np.array([1.0, 2.0, -1.0]), rtol=1e-8)
    np.testing.assert_array_equal(x, before)


def test_compare_fails_on_a_wrong_gradient():
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((4, 8)), 1 + 0.1 * rng.standard_normal(8), 0.1 * rng.standard_normal(8)
    out, cache = L.layernorm_forward(x, w, b)
    dout = rng.standard_normal(out.shape)
    dx, _, _ = L.layernorm_backward(dout, cache)
    num = gc.numerical_grad(lambda: L.layernorm_forward(x, w, b)[0], x, dout)
    assert gc.compare("right", dx, num, verbose=False)
    # the classic bug: forgetting the `* w` in LayerNorm backward, which a check with w = 1 misses
    wrong, _, _ = L.layernorm_backward(dout, cache._replace(w=np.ones(8)))
    check = gc.compare("forgot w", wrong, num, verbose=False)
    assert not check and check.max_rel > 1e-3


def test_compare_uses_absolute_floor_for_tiny_values():
    assert gc.compare("tiny", np.array([1e-15]), np.array([0.0]), verbose=False)
    assert not gc.compare("big", np.array([1e-6]), np.array([0.0]), verbose=False)
    assert not gc.compare("nan", np.array([np.nan]), np.array([0.0]), verbose=False)


def test_compare_prints_a_readable_row(capsys):
    gc.compare("linear: dw", np.ones(3), np.ones(3))
    line = capsys.readouterr().out
    assert "linear: dw" in line and line.strip().endswith("ok")


def test_sampled_indices_are_distinct_and_in_range():
    idx = gc.sampled_indices((5, 7), 12, np.random.default_rng(0))
    assert len(set(idx)) == 12
    assert all(0 <= i < 5 and 0 <= j < 7 for i, j in idx)
    assert len(gc.sampled_indices((2,), 10, np.random.default_rng(0))) == 2
