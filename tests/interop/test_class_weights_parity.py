"""The class-weighted cross-entropy of `--set class_weights` (finetune/heads.py) is torch's
CrossEntropyLoss(weight=w): the same loss and the same d(logits), in float64, for random logits
and random, far from equal weights (a batch that misses a class included)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from minibert import layers  # noqa: E402


@pytest.mark.parametrize("seed, targets", [(0, [0, 2, 1, 2, 2, 0, 1]), (1, [1, 1, 2, 1]), (2, [0])])
def test_weighted_cross_entropy_matches_torch_float64(seed, targets):
    rng = np.random.default_rng(seed)
    targets = np.array(targets)
    logits, w = rng.standard_normal((len(targets), 3)) * 3, rng.uniform(0.1, 10.0, 3)
    loss, cache = layers.cross_entropy_forward(logits, targets, class_weights=w)
    dlogits = layers.cross_entropy_backward(1.0, cache)
    z = torch.tensor(logits, requires_grad=True)
    ref = torch.nn.CrossEntropyLoss(weight=torch.tensor(w))(z, torch.tensor(targets))
    ref.backward()
    assert float(loss) == pytest.approx(ref.item(), rel=1e-12)
    np.testing.assert_allclose(dlogits, z.grad.numpy(), rtol=1e-10, atol=1e-14)
