"""Tests for minibert.optim: docs/bert-notes.md §6 vectors (schedule, clipping, AdamWeightDecayOptimizer)."""
from __future__ import annotations

import numpy as np
import pytest

from minibert.optim import AdamW, clip_by_global_norm, is_decayed, lr_at, plot_schedule

# every parameter name minibert's model uses (2 layers), with Google's decay decision
LAYER_NAMES = {
    "attn.qkv.w": True, "attn.qkv.b": False, "attn.out.w": True, "attn.out.b": False,
    "ln1.w": False, "ln1.b": False, "ffn.in.w": True, "ffn.in.b": False,
    "ffn.out.w": True, "ffn.out.b": False, "ln2.w": False, "ln2.b": False,
}
DECAY = {
    "tok_emb": True, "pos_emb": True, "seg_emb": True, "emb_ln.w": False, "emb_ln.b": False,
    **{f"h{i}.{n}": d for i in range(2) for n, d in LAYER_NAMES.items()},
    "pool.w": True, "pool.b": False, "mlm.dense.w": True, "mlm.dense.b": False,
    "mlm.ln.w": False, "mlm.ln.b": False, "mlm.bias": False, "nsp.w": True, "nsp.b": False,
}


def random_params(rng, dtype=np.float64):
    shapes = {"tok_emb": (11, 4), "pos_emb": (6, 4), "emb_ln.w": (4,), "emb_ln.b": (4,),
              "h0.attn.qkv.w": (4, 12), "h0.attn.qkv.b": (12,), "h0.ln1.w": (4,),
              "mlm.bias": (11,), "nsp.w": (4, 2), "nsp.b": (2,)}
    return {k: rng.standard_normal(s).astype(dtype) for k, s in shapes.items()}


# ---- weight-decay exclusion --------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(DECAY))
def test_is_decayed_matches_google_exclusion(name):
    assert is_decayed(name) is DECAY[name]


# ---- schedule ----------------------------------------------------------------------------------

@pytest.mark.parametrize("t,expected", [(0, 0.0), (5, 5e-5), (9, 9e-5), (10, 9e-5), (50, 5e-5), (100, 0.0), (150, 0.0)])
def test_lr_at_bert_schedule_spec_vector(t, expected):
    assert lr_at(t, 1e-4, 10, 100) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("t,expected", [(0, 0.0), (5, 5e-5), (9, 9e-5), (10, 1e-4), (55, 5e-5), (100, 0.0), (150, 0.0)])
def test_lr_at_hf_schedule_peaks_at_end_of_warmup(t, expected):
    assert lr_at(t, 1e-4, 10, 100, schedule="hf") == pytest.approx(expected, abs=1e-15)


def test_lr_at_bert_schedule_drops_at_end_of_warmup():
    before, at = lr_at(9, 1e-4, 10, 100), lr_at(10, 1e-4, 10, 100)
    assert at == pytest.approx(1e-4 * (1 - 10 / 100))
    # with W = T/2 the drop is large: from almost the peak to half of it
    assert lr_at(49, 1.0, 50, 100) == pytest.approx(0.98)
    assert lr_at(50, 1.0, 50, 100) == pytest.approx(0.5)
    assert before == at  # in the docs/bert-notes.md §6.1 example it plateaus for one step instead of reaching 1e-4


def test_lr_at_no_warmup_decays_from_peak():
    assert lr_at(0, 1e-3, 0, 10) == pytest.approx(1e-3)
    assert lr_at(0, 1e-3, 0, 10, schedule="hf") == pytest.approx(1e-3)
    assert lr_at(5, 1e-3, 0, 10, schedule="hf") == pytest.approx(lr_at(5, 1e-3, 0, 10))


@pytest.mark.parametrize("kwargs,match", [
    (dict(schedule="cosine"), "schedule"),
    (dict(step=-1), "step"),
    (dict(total_steps=0), "total_steps"),
    (dict(warmup_steps=-1), "warmup_steps"),
])
def test_lr_at_rejects_bad_arguments(kwargs, match):
    args = dict(step=0, peak_lr=1e-4, warmup_steps=10, total_steps=100) | kwargs
    with pytest.raises(ValueError, match=match):
        lr_at(**args)


def test_plot_schedule_writes_png(tmp_path):
    path = plot_schedule(tmp_path / "lr.png", 1e-4, 10, 100)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- clipping ----------------------------------------------------------------------------------

def test_clip_by_global_norm_spec_vector():
    grads = {"a": np.array([3.0]), "b": np.array([4.0])}
    clipped, norm = clip_by_global_norm(grads, 1.0)
    assert norm == pytest.approx(5.0)
    np.testing.assert_allclose(clipped["a"], [0.6])
    np.testing.assert_allclose(clipped["b"], [0.8])
    assert grads["a"][0] == 3.0 and grads["b"][0] == 4.0  # inputs untouched


def test_clip_by_global_norm_small_norm_unchanged():
    grads = {"a": np.array([0.3, 0.0], dtype=np.float32), "b": np.array([[0.4]], dtype=np.float32)}
    clipped, norm = clip_by_global_norm(grads)
    assert norm == pytest.approx(0.5)
    for k in grads:
        np.testing.assert_array_equal(clipped[k], grads[k])


def test_clip_by_global_norm_keeps_dtype_and_does_not_mutate():
    rng = np.random.default_rng(0)
    grads = {k: 10 * v for k, v in random_params(rng, np.float32).items()}
    before = {k: v.copy() for k, v in grads.items()}
    clipped, norm = clip_by_global_norm(grads, 1.0)
    assert norm > 1.0
    for k in grads:
        assert clipped[k].dtype == np.float32
        np.testing.assert_array_equal(grads[k], before[k])
    total = np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in clipped.values()))
    assert total == pytest.approx(1.0, rel=1e-6)


def test_clip_by_global_norm_rejects_bad_clip_norm():
    with pytest.raises(ValueError, match="clip_norm"):
        clip_by_global_norm({"a": np.ones(2)}, 0.0)


# ---- AdamW -------------------------------------------------------------------------------------

def test_adamw_google_optimization_test_vector():
    # google-research/bert optimization_test.py
    w = {"w": np.array([0.1, -0.2, -0.1])}
    x = np.array([0.4, 0.2, -0.5])
    opt = AdamW(w, lr=0.2, weight_decay=0.0)
    for _ in range(100):
        grad = 2.0 * (w["w"] - x) / x.size  # d/dw mean((x - w)^2)
        opt.step(w, {"w": grad}, lr=0.2)
    np.testing.assert_allclose(w["w"], x, atol=1e-2)


@pytest.mark.parametrize("bias_correction,expected", [(False, 3.1621), (True, 1.0)])
def test_adamw_first_step_bias_correction_signature(bias_correction, expected):
    p = {"w": np.zeros(3)}
    opt = AdamW(p, weight_decay=0.0, bias_correction=bias_correction)
    lr = 1e-3
    opt.step(p, {"w": np.full(3, 0.5)}, lr=lr)
    update = -p["w"] / lr  # m/(sqrt(v)+eps) (bias-corrected when asked)
    np.testing.assert_allclose(update, expected, rtol=1e-4)  # 3.1621 = 0.1/sqrt(0.001)


@pytest.mark.parametrize("bias_correction", [False, True])
def test_adamw_weight_decay_skips_excluded_names(bias_correction):
    rng = np.random.default_rng(1)
    names = sorted(DECAY)
    params = {k: rng.standard_normal(3) + 2.0 for k in names}
    before = {k: v.copy() for k, v in params.items()}
    grads = {k: np.zeros(3) for k in names}
    lr, wd = 0.1, 0.01
    opt = AdamW(params, weight_decay=wd, bias_correction=bias_correction)
    opt.step(params, grads, lr=lr)
    for k in names:
        if DECAY[k]:
            np.testing.assert_allclose(params[k], before[k] - lr * wd * before[k], rtol=1e-14, err_msg=k)
        else:
            np.testing.assert_array_equal(params[k], before[k], err_msg=k)


def test_adamw_step_is_in_place_and_keeps_float32():
    rng = np.random.default_rng(2)
    params = random_params(rng, np.float32)
    ids = {k: id(v) for k, v in params.items()}
    originals = {k: v for k, v in params.items()}
    snapshot = {k: v.copy() for k, v in params.items()}
    opt = AdamW(params)
    grads = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in params.items()}
    opt.step(params, grads, lr=1e-2)
    for k, v in params.items():
        assert id(v) == ids[k] and v is originals[k]
        assert v.dtype == np.float32 and opt.m[k].dtype == np.float32 and opt.v[k].dtype == np.float32
        assert not np.array_equal(v, snapshot[k]), k
    assert opt.t == 1


def test_adamw_matches_straightforward_formula():
    # the in-place implementation equals the formula of docs/bert-notes.md §6.3 written plainly (float64)
    rng = np.random.default_rng(3)
    params = random_params(rng)
    ref = {k: v.copy() for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v2 = {k: np.zeros_like(v) for k, v in params.items()}
    opt = AdamW(params, weight_decay=0.05)
    for t in range(4):
        grads = {k: rng.standard_normal(p.shape) for k, p in params.items()}
        lr = 1e-2 * (t + 1)
        opt.step(params, grads, lr=lr)
        for k in ref:
            m[k] = 0.9 * m[k] + 0.1 * grads[k]
            v2[k] = 0.999 * v2[k] + 0.001 * grads[k] ** 2
            update = m[k] / (np.sqrt(v2[k]) + 1e-6) + (0.05 * ref[k] if is_decayed(k) else 0.0)
            ref[k] = ref[k] - lr * update
    for k in ref:
        np.testing.assert_allclose(params[k], ref[k], rtol=1e-12, atol=1e-15, err_msg=k)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias_correction", [False, True])
def test_adamw_fused_kernel_gives_the_numpy_bits(dtype, bias_correction):
    # the compiled one-pass update (kernels.adamw_update) against the NumPy passes it replaces:
    # identical bits, step after step, decayed and excluded names, lr changing every step
    rng = np.random.default_rng(4)
    params = {k: v.astype(dtype) for k, v in random_params(rng).items()}
    params["big.weight"] = rng.standard_normal((70, 130)).astype(dtype)  # > one parallel chunk
    params["strided.weight"] = rng.standard_normal((6, 10)).astype(dtype)[:, ::2]  # not contiguous
    twin = {k: v.copy() for k, v in params.items()}
    fused = AdamW(params, weight_decay=0.05, bias_correction=bias_correction, fused=True)
    plain = AdamW(twin, weight_decay=0.05, bias_correction=bias_correction, fused=False)
    assert fused._fused is not None and plain._fused is None
    assert {is_decayed(k) for k in params} == {True, False}
    for t in range(5):
        grads = {k: (rng.standard_normal(p.shape) * 10.0 ** rng.integers(-6, 2)).astype(dtype)
                 for k, p in params.items()}
        lr = 1e-2 * (t + 1)
        fused.step(params, grads, lr=lr)
        plain.step(twin, grads, lr=lr)
    for k in params:
        assert params[k].dtype == dtype
        np.testing.assert_array_equal(params[k], twin[k], err_msg=k)
        np.testing.assert_array_equal(fused.m[k], plain.m[k], err_msg=k)
        np.testing.assert_array_equal(fused.v[k], plain.v[k], err_msg=k)


def test_adamw_rejects_mismatched_grads():
    params = {"w": np.zeros(3), "b": np.zeros(2)}
    opt = AdamW(params)
    with pytest.raises(ValueError, match="missing \\['b'\\]"):
        opt.step(params, {"w": np.zeros(3)}, lr=0.1)
    with pytest.raises(ValueError, match="'w'"):
        opt.step(params, {"w": np.zeros(4), "b": np.zeros(2)}, lr=0.1)


# ---- state dict --------------------------------------------------------------------------------

def test_adamw_state_dict_round_trip_continues_bit_identically(tmp_path):
    from safetensors.numpy import load_file, save_file

    rng = np.random.default_rng(4)
    params = random_params(rng, np.float32)
    grads_seq = [{k: rng.standard_normal(v.shape).astype(np.float32) for k, v in params.items()} for _ in range(6)]
    a_params = {k: v.copy() for k, v in params.items()}
    a = AdamW(a_params)
    for g in grads_seq:
        a.step(a_params, g, lr=1e-2)

    b_params = {k: v.copy() for k, v in params.items()}
    b = AdamW(b_params)
    for g in grads_seq[:3]:
        b.step(b_params, g, lr=1e-2)
    save_file(b.state_dict(), str(tmp_path / "optim.safetensors"))
    saved_params = {k: v.copy() for k, v in b_params.items()}

    c_params = saved_params
    c = AdamW(c_params)
    c.load_state_dict(load_file(str(tmp_path / "optim.safetensors")))
    assert c.t == 3
    for g in grads_seq[3:]:
        c.step(c_params, g, lr=1e-2)
    for k in params:
        np.testing.assert_array_equal(c_params[k], a_params[k], err_msg=k)
        np.testing.assert_array_equal(c.m[k], a.m[k], err_msg=k)
        np.testing.assert_array_equal(c.v[k], a.v[k], err_msg=k)


def test_adamw_state_dict_is_a_copy():
    params = {"w": np.zeros(2)}
    opt = AdamW(params)
    sd = opt.state_dict()
    opt.step(params, {"w": np.ones(2)}, lr=0.1)
    np.testing.assert_array_equal(sd["m.w"], 0.0)
    assert int(sd["t"]) == 0 and sd["t"].dtype == np.int64


@pytest.mark.parametrize("edit,match", [
    (lambda d: d.pop("v.w"), "missing \\['v.w'\\]"),
    (lambda d: d.update({"m.extra": np.zeros(1)}), "unexpected \\['m.extra'\\]"),
    (lambda d: d.update({"m.w": np.zeros(5)}), "m.'w'"),
    (lambda d: d.update({"v.w": np.zeros(3, dtype=np.float32)}), "float32"),
    (lambda d: d.update({"t": np.array(1.5)}), "'t'"),
])
def test_adamw_load_state_dict_rejects_bad_state(edit, match):
    opt = AdamW({"w": np.zeros(3)})
    sd = opt.state_dict()
    edit(sd)
    with pytest.raises(ValueError, match=match):
        opt.load_state_dict(sd)
    np.testing.assert_array_equal(opt.m["w"], 0.0)  # nothing half-loaded


def test_clip_on_the_numba_backend_equals_the_numpy_passes(monkeypatch):
    """The compiled norm (one parallel float64 pass over every gradient) and scaling: the norm to
    float64 rounding (its adds are in another order), the clipped gradients to the same bits
    given the same scale, dtypes kept, inputs untouched; float32 and float64 mixed, a strided one."""
    from minibert import kernels

    rng = np.random.default_rng(1)
    grads = {k: 10 * v for k, v in random_params(rng, np.float32).items()}
    grads["big"] = rng.standard_normal(3 * 4096 + 5).astype(np.float32)  # several chunks
    grads["f64"] = rng.standard_normal((7, 3))
    grads["strided"] = rng.standard_normal((6, 10)).astype(np.float32)[:, ::2]
    before = {k: v.copy() for k, v in grads.items()}
    monkeypatch.setattr("minibert.backend.chosen", "numpy")
    ref, ref_norm = clip_by_global_norm(grads, 1.0)
    monkeypatch.setattr("minibert.backend.chosen", "numba")
    got, norm = clip_by_global_norm(grads, 1.0)
    assert norm == pytest.approx(ref_norm, rel=1e-14)
    scale = 1.0 / norm
    for k in grads:
        np.testing.assert_array_equal(grads[k], before[k])
        assert got[k].dtype == grads[k].dtype and got[k].shape == grads[k].shape
        np.testing.assert_array_equal(got[k], grads[k] * grads[k].dtype.type(scale), err_msg=k)
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-6)
    assert kernels.sum_of_squares([np.zeros(0, np.float32), np.ones(3)]) == 3.0
