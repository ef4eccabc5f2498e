"""minibert.bench_profile: the per-layer profile of a training step and the QA step at T=384
(on tiny shapes here; `python -m minibert bench --only profile,finetune` runs the real ones)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from minibert import bench_profile, kernels, layers  # noqa: E402
from minibert.model import BertConfig  # noqa: E402

TINY = dict(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
            max_position_embeddings=16)


def test_timed_ops_times_every_layer_call_and_changes_no_result():
    ops = bench_profile.TimedOps(kernels)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 8)).astype(np.float32)
    w, b = rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    out, cache = ops.linear_forward(x, w, b)
    np.testing.assert_array_equal(out, kernels.linear_forward(x, w, b)[0])
    ops.linear_backward(out, cache)
    ops.linear_backward(out, cache)
    ops.split_heads(x, 2)
    assert ops.calls == {("linear", "forward"): 1, ("linear", "backward"): 2, ("heads split", "forward"): 1}
    assert all(t > 0 for t in ops.times.values())
    assert ops.MASK_VALUE is layers.MASK_VALUE  # constants pass through unwrapped


def test_profile_step_accounts_for_every_layer_and_the_step():
    p = bench_profile.profile_step(BertConfig(**TINY), dict(B=2, T=8, P=2), reps=2)
    layers_s = p["layers_s"]
    for key in ("attention forward", "attention backward", "linear forward", "linear backward",
                "layernorm forward", "gelu forward", "cross_entropy forward", "embedding backward"):
        assert layers_s.get(key, 0.0) > 0, key
    assert 0 < p["update_s"] < p["step_s"]
    assert sum(layers_s.values()) + p["update_s"] < 1.5 * p["step_s"]  # medians of parts of one step
    assert p["peak_bytes"] > 0
    rows = bench_profile.profile_rows(p)
    assert rows[-1][0].startswith("step") and any(r[0] == "attention" for r in rows)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_qa_step_runs_at_t384_and_learns(backend, monkeypatch):
    monkeypatch.setattr(bench_profile, "QA_SHAPE", dict(B=2, T=384))
    monkeypatch.setenv("MINIBERT_BACKEND", backend)
    step = bench_profile.qa_step_fn(TINY, backend)
    losses = [step() for _ in range(4)]
    assert np.isfinite(losses).all()
    assert abs(losses[0] - np.log(384)) < 1.0  # (start CE + end CE) / 2 is about ln T at init
    assert losses[-1] < losses[0]  # the same batch four times: AdamW lowers its loss


def test_cpu_description_names_model_simd_and_blas_kernel():
    from minibert import blas

    model, simd, core = bench_profile.cpu_description().split("; ")
    assert model and simd
    assert core.startswith("OpenBLAS ") == (blas.openblas() is not None)
