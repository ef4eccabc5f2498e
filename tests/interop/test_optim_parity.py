"""minibert.optim.AdamW(bias_correction=True) against torch.optim.AdamW (float64, 5 steps)."""
from __future__ import annotations

import numpy as np
import pytest

from minibert.optim import AdamW, is_decayed

torch = pytest.importorskip("torch")

SHAPES = {"tok_emb": (13, 8), "emb_ln.w": (8,), "emb_ln.b": (8,), "h0.attn.qkv.w": (8, 24),
          "h0.attn.qkv.b": (24,), "h0.ln1.w": (8,), "mlm.bias": (13,), "nsp.w": (8, 2), "nsp.b": (2,)}


@pytest.mark.parametrize("eps,wd", [(1e-6, 0.01), (1e-8, 0.1)])
def test_adamw_bias_corrected_matches_torch_adamw(eps, wd):
    rng = np.random.default_rng(0)
    params = {k: rng.standard_normal(s) for k, s in SHAPES.items()}  # float64
    tparams = {k: torch.tensor(v.copy(), requires_grad=True) for k, v in params.items()}
    groups = [
        {"params": [tparams[k] for k in SHAPES if is_decayed(k)], "weight_decay": wd},
        {"params": [tparams[k] for k in SHAPES if not is_decayed(k)], "weight_decay": 0.0},
    ]
    lrs = [1e-3, 5e-3, 1e-2, 2e-2, 3e-2]
    topt = torch.optim.AdamW(groups, lr=lrs[0], betas=(0.9, 0.999), eps=eps, foreach=False)
    opt = AdamW(params, eps=eps, weight_decay=wd, bias_correction=True)
    for lr in lrs:
        grads = {k: rng.standard_normal(s) for k, s in SHAPES.items()}
        for k, p in tparams.items():
            p.grad = torch.tensor(grads[k])
        for group in topt.param_groups:
            group["lr"] = lr
        topt.step()
        opt.step(params, grads, lr=lr)
    for k in SHAPES:
        np.testing.assert_allclose(params[k], tparams[k].detach().numpy(), rtol=1e-6, atol=1e-12, err_msg=k)
        state = topt.state[tparams[k]]
        np.testing.assert_allclose(opt.m[k], state["exp_avg"].numpy(), rtol=1e-6, atol=1e-12, err_msg=k)
        np.testing.assert_allclose(opt.v[k], state["exp_avg_sq"].numpy(), rtol=1e-6, atol=1e-12, err_msg=k)
    assert opt.t == 5
