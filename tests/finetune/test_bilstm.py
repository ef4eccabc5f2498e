"""The BiLSTM of the feature-based tagger (minibert/finetune/bilstm.py): float64 gradient check
with padded rows, what each direction sees, and padding that changes nothing. Parity with
torch.nn.LSTM is in tests/interop/test_bilstm_parity.py."""
from __future__ import annotations

import numpy as np

from minibert.finetune import gradchecks as gc
from minibert.finetune.bilstm import bilstm_forward, bilstm_params, lstm_backward, lstm_forward

B, T, D, H = 3, 6, 5, 4


def _setup(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, T, D))
    mask = np.ones((B, T), np.int64)
    mask[1, 4:] = 0
    mask[2, 2:] = 0
    params = bilstm_params(rng, D, H, dtype=np.float64, std=0.5)
    for p in params.values():
        p += 0.3 * rng.standard_normal(p.shape)
    return rng, x, mask, params


def test_bilstm_gradcheck_float64():
    checks = gc.check_bilstm(np.random.default_rng(0), verbose=False)
    assert len(checks) == 7 and all(checks), [c.row() for c in checks if not c]  # dx and six tensors


def test_a_wrong_lstm_backward_fails_the_check(monkeypatch):
    """A backward that reads a zero forget gate (no cell gradient carried back in time) fails."""
    import minibert.finetune.bilstm as bl

    def broken(dout, cache):
        return lstm_backward(dout, cache._replace(gates=cache.gates * np.r_[np.ones(H), np.zeros(H), np.ones(2 * H)]))

    monkeypatch.setattr(bl, "lstm_backward", broken)
    assert not all(gc.check_bilstm(np.random.default_rng(0), verbose=False))


def test_each_direction_sees_its_side_only():
    _, x, mask, params = _setup()
    out, _ = bilstm_forward(x, mask, params)  # (B, T, 2H)
    t = 2
    changed = x.copy()
    changed[0, t + 1] += 1.0  # a later token of row 0 (no padding)
    out2, _ = bilstm_forward(changed, mask, params)
    np.testing.assert_allclose(out2[0, :t + 1, :H], out[0, :t + 1, :H], rtol=0, atol=1e-14)  # forward: left only
    assert np.abs(out2[0, :t + 1, H:] - out[0, :t + 1, H:]).max() > 1e-4  # backward: sees the right
    changed = x.copy()
    changed[0, t - 1] += 1.0  # an earlier token
    out3, _ = bilstm_forward(changed, mask, params)
    np.testing.assert_allclose(out3[0, t:, H:], out[0, t:, H:], rtol=0, atol=1e-14)  # backward: right only
    assert np.abs(out3[0, t:, :H] - out[0, t:, :H]).max() > 1e-4


def test_padding_changes_nothing_and_outputs_zeros():
    rng, x, mask, params = _setup(1)
    out, _ = bilstm_forward(x, mask, params)
    assert np.abs(out[1, 4:]).max() == 0.0 and np.abs(out[2, 2:]).max() == 0.0  # padding outputs exact zeros
    noisy = x.copy()
    noisy[mask == 0] = rng.standard_normal(int((mask == 0).sum() * D)).reshape(-1, D)
    np.testing.assert_allclose(bilstm_forward(noisy, mask, params)[0], out, rtol=0, atol=1e-14)
    alone, _ = bilstm_forward(x[2:3, :2], mask[2:3, :2], params)  # row 2's two real tokens, unpadded
    np.testing.assert_allclose(alone[0], out[2, :2], rtol=1e-12, atol=1e-14)


def test_reverse_lstm_is_the_forward_one_on_the_reversed_sequence():
    _, x, _, params = _setup(2)
    w = [params[f"lstm.fwd.{n}"] for n in ("wx", "wh", "b")]
    full = np.ones((B, T))
    rev, _ = lstm_forward(x, full, *w, reverse=True)
    fwd_on_flipped, _ = lstm_forward(x[:, ::-1].copy(), full, *w)
    np.testing.assert_allclose(rev, fwd_on_flipped[:, ::-1], rtol=1e-12, atol=1e-14)
