"""minibert's BiLSTM tagger layer (finetune/bilstm.py) against torch.nn.LSTM(bidirectional=True)
with the same weights, padded rows through pack_padded_sequence: outputs and float64 gradients
of the input and of every weight."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from minibert.finetune.bilstm import bilstm_backward, bilstm_forward, bilstm_params  # noqa: E402


def test_bilstm_matches_torch_lstm_float64():
    rng = np.random.default_rng(0)
    B, T, D, H = 3, 7, 5, 4
    x = rng.standard_normal((B, T, D))
    lengths = [7, 5, 2]
    mask = (np.arange(T)[None, :] < np.array(lengths)[:, None]).astype(np.int64)  # (B, T)
    params = bilstm_params(rng, D, H, dtype=np.float64, std=0.5)
    for p in params.values():
        p += 0.3 * rng.standard_normal(p.shape)
    dout = rng.standard_normal((B, T, 2 * H)) * mask[..., None]

    out, cache = bilstm_forward(x, mask, params)
    dx, grads = bilstm_backward(dout, cache)

    lstm = torch.nn.LSTM(D, H, batch_first=True, bidirectional=True).double()
    with torch.no_grad():  # torch keeps (4H, D) weights and two biases; gates i, f, g, o as minibert's
        for suffix, d in (("", "fwd"), ("_reverse", "bwd")):
            getattr(lstm, f"weight_ih_l0{suffix}").copy_(torch.from_numpy(params[f"lstm.{d}.wx"].T.copy()))
            getattr(lstm, f"weight_hh_l0{suffix}").copy_(torch.from_numpy(params[f"lstm.{d}.wh"].T.copy()))
            getattr(lstm, f"bias_ih_l0{suffix}").copy_(torch.from_numpy(params[f"lstm.{d}.b"]))
            getattr(lstm, f"bias_hh_l0{suffix}").zero_()
    xt = torch.from_numpy(x).requires_grad_(True)
    packed = torch.nn.utils.rnn.pack_padded_sequence(xt, lengths, batch_first=True, enforce_sorted=False)
    ref, _ = torch.nn.utils.rnn.pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=T)
    (ref * torch.from_numpy(dout)).sum().backward()

    np.testing.assert_allclose(out, ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-8, atol=1e-10)
    for suffix, d in (("", "fwd"), ("_reverse", "bwd")):
        np.testing.assert_allclose(grads[f"lstm.{d}.wx"], getattr(lstm, f"weight_ih_l0{suffix}").grad.numpy().T,
                                   rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(grads[f"lstm.{d}.wh"], getattr(lstm, f"weight_hh_l0{suffix}").grad.numpy().T,
                                   rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(grads[f"lstm.{d}.b"], getattr(lstm, f"bias_ih_l0{suffix}").grad.numpy(),
                                   rtol=1e-8, atol=1e-10)
