"""minibert.native.blas (OpenBLAS through ctypes) and the attention cores built on it: v3 (batched
OpenBLAS calls) and v4 (Numba threads calling OpenBLAS's gemm themselves).

blas.matmul must equal np.matmul for every operand layout the attention core passes (strided
views of the qkv projection, transposed views, outputs written into views); attention v3 must
equal the NumPy reference at a size where the batched path really runs (T * T * HS > 100**3),
and v4 at the bench's T = 128 on its parallel kernel, both with padded keys, a row with one
real key, the causal mask and dropout. Tolerances as in tests/kernels/test_kernels.py: float64 1e-10
relative, float32 a few ulps of the largest entry.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from corpora import REPO

pytest.importorskip("numba")

from minibert import kernels, layers
from minibert.dev import attention_v3  # noqa: E402
from minibert.native import blas  # noqa: E402

ROOT = REPO
BIG = (2, 2, 128, 64)  # (B, NH, T, HS): T * T * HS = 1.05e6 > blas.SMALL_LIMIT, so batched
needs_batch = pytest.mark.skipif(not blas.batched_available(np.float32),
                                 reason="no OpenBLAS with cblas_sgemm_batch in this NumPy")


def assert_matches(name, got, ref):
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape and got.dtype == ref.dtype, (name, got.shape, ref.shape, got.dtype, ref.dtype)
    scale = max(1.0, float(np.abs(ref).max(initial=0.0)))
    rtol, atol = (1e-10, 1e-13 * scale) if ref.dtype == np.float64 else (1e-5, 3e-6 * scale)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, err_msg=name)


class CountingBatch:
    """Counts the batched OpenBLAS calls, to prove a test ran the batched path."""

    def __init__(self, monkeypatch):
        self.calls = 0
        lib = blas.openblas()
        for dt, fn in list(lib.gemm_batch.items()):
            def counted(*args, _fn=fn):
                self.calls += 1
                return _fn(*args)
            monkeypatch.setitem(lib.gemm_batch, dt, counted)


def qkv_views(rng, B, NH, T, HS, dtype):
    qkv = rng.standard_normal((B, T, 3 * NH * HS)).astype(dtype)  # (B, T, 3C)
    return [layers.split_heads(t, NH) for t in np.split(qkv, 3, axis=-1)]  # 3 x (B, NH, T, HS) views


@needs_batch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blas_matmul_matches_numpy_for_every_layout(dtype, monkeypatch):
    counter = CountingBatch(monkeypatch)
    rng = np.random.default_rng(0)
    B, NH, T, HS = BIG
    q, k, v = qkv_views(rng, B, NH, T, HS, dtype)
    att = rng.standard_normal((B, NH, T, T)).astype(dtype)  # (B, NH, T, T)
    cases = [(q, k.swapaxes(-1, -2)), (att, v), (att.swapaxes(-1, -2), q), (q.swapaxes(-1, -2), att),
             (np.ascontiguousarray(q), np.ascontiguousarray(v.swapaxes(-1, -2)))]
    for i, (a, b) in enumerate(cases):
        assert_matches(f"case {i}", blas.matmul(a, b), np.matmul(a, b))
    out = np.empty((B, T, NH, HS), dtype=dtype).transpose(0, 2, 1, 3)  # an output view
    blas.matmul(att, v, out=out, alpha=0.5)
    assert_matches("out view, alpha", out, 0.5 * np.matmul(att, v))
    assert counter.calls == len(cases) + 1


@needs_batch
def test_blas_matmul_small_products_take_numpy(monkeypatch):
    """Products of M*N*K <= 100**3 never reach OpenBLAS's batch call (it crashes on them)."""
    counter = CountingBatch(monkeypatch)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 100, 100)), rng.standard_normal((3, 100, 100))
    assert_matches("100^3", blas.matmul(a, b), a @ b)
    c = rng.standard_normal((3, 4, 5, 7)).astype(np.float32)
    assert_matches("tiny", blas.matmul(c, c.swapaxes(-1, -2)), c @ c.swapaxes(-1, -2))
    assert counter.calls == 0


def test_blas_matmul_falls_back_for_unsupported_input(monkeypatch):
    monkeypatch.setenv("MINIBERT_BLAS_BATCH", "0")
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 128, 64)).astype(np.float32)
    assert_matches("off", blas.matmul(a, a.swapaxes(-1, -2)), a @ a.swapaxes(-1, -2))
    monkeypatch.delenv("MINIBERT_BLAS_BATCH")
    ints = rng.integers(0, 5, (2, 128, 128))
    np.testing.assert_array_equal(blas.matmul(ints, ints), ints @ ints)  # integers: NumPy's own loop
    strided = a[:, :, ::2]  # no unit stride on either axis: NumPy
    assert_matches("strided", blas.matmul(strided, strided.swapaxes(-1, -2)), strided @ strided.swapaxes(-1, -2))


def _mask(B, T):
    mask = np.ones((B, T))
    mask[0, T - T // 3:] = 0  # a padded tail
    mask[-1, 1:] = 0  # a sequence with one real key: every row attends to key 0 alone
    return mask


@needs_batch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("dropout_p", [0.0, 0.1], ids=["nodrop", "drop0.1"])
def test_attention_v3_batched_matches_reference(dropout_p, causal, dtype, monkeypatch):
    counter = CountingBatch(monkeypatch)
    rng = np.random.default_rng(3)
    q, k, v = qkv_views(rng, *BIG, dtype)
    mask = _mask(BIG[0], BIG[2])
    out_ref, c_ref = layers.attention_forward(q, k, v, mask, dropout_p, np.random.default_rng(4), causal=causal)
    out, c = attention_v3.attention_forward_v3(q, k, v, mask, dropout_p, np.random.default_rng(4), causal=causal)
    _check_against_reference(rng, out, c, out_ref, c_ref, causal, attention_v3.attention_backward_v3)
    assert counter.calls == 6, "2 forward + 4 backward products, each one batched call"


def _check_against_reference(rng, out, c, out_ref, c_ref, causal, backward):
    assert_matches("out", out, out_ref)
    assert_matches("att", c.att, c_ref.att)
    assert np.all(c.att[-1, :, :, 1:] == 0.0), "keys after the one real key must get no weight"
    if causal:
        assert np.all(np.triu(c.att[0, 0], 1) == 0.0), "no query may see a later key"
    dout = rng.standard_normal(out.shape).astype(out.dtype)  # (B, NH, T, HS)
    for name, g, g_ref in zip(("dq", "dk", "dv"), backward(dout, c), layers.attention_backward(dout, c_ref)):
        assert_matches(name, g, g_ref)


needs_gemm = pytest.mark.skipif(blas.gemm_for_kernels(np.float32) is None, reason="no OpenBLAS cblas_sgemm")


class ThreadLog:
    """The OpenBLAS thread counts set around attention v4's kernels (the gemm calls themselves
    are made from compiled code, where nothing can watch them)."""

    def __init__(self, monkeypatch):
        self.set = []
        real = blas.set_blas_threads
        monkeypatch.setattr(blas, "set_blas_threads", lambda n: self.set.append(n) or real(n))


@needs_gemm
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("dropout_p", [0.0, 0.1], ids=["nodrop", "drop0.1"])
def test_attention_v4_matches_reference_on_the_parallel_kernel(dropout_p, causal, dtype, monkeypatch):
    shape = (3, 2, 128, 64)  # the bench's T and HS; B * NH * T * T * HS >= PARALLEL_MIN_WORK
    assert kernels.pick_kernel(kernels.attention._attention_forward_gemm_kernel, None, shape) is kernels.attention._attention_forward_gemm_kernel
    rng = np.random.default_rng(3)
    q, k, v = qkv_views(rng, *shape, dtype)
    mask = _mask(shape[0], shape[2])
    log = ThreadLog(monkeypatch)
    before = blas.blas_threads()
    out_ref, c_ref = layers.attention_forward(q, k, v, mask, dropout_p, np.random.default_rng(4), causal=causal)
    out, c = kernels.attention_forward(q, k, v, mask, dropout_p, np.random.default_rng(4), causal=causal)
    assert c.q is q and c.k is k, "the qkv projection's views go to BLAS as they are, not copied"
    _check_against_reference(rng, out, c, out_ref, c_ref, causal, kernels.attention_backward)
    assert blas.blas_threads() == before, "OpenBLAS gets its thread count back"
    if before != 1:
        assert log.set == [1, before, 1, before], "one OpenBLAS thread inside each kernel"


@needs_gemm
def test_attention_v4_copies_operands_blas_cannot_take():
    """Heads whose rows are not unit-stride (a transposed array) are copied, not misread."""
    rng = np.random.default_rng(5)
    B, NH, T, HS = 2, 2, 16, 8
    q, k, v = (rng.standard_normal((B, NH, HS, T)).swapaxes(-1, -2) for _ in range(3))  # column-major heads
    assert kernels.attention._row_stride(q) is None
    mask = _mask(B, T)
    out_ref, c_ref = layers.attention_forward(q, k, v, mask)
    out, c = kernels.attention_forward(q, k, v, mask)
    dout = rng.standard_normal((B, NH, HS, T)).swapaxes(-1, -2)
    _check_against_reference(rng, out, c, out_ref, c_ref, False, kernels.attention_backward)
    for name, g, g_ref in zip(("dq", "dk", "dv"), kernels.attention_backward(dout, c),
                              layers.attention_backward(dout, c_ref)):
        assert_matches(name, g, g_ref)


def test_attention_v4_falls_back_without_direct_blas(monkeypatch):
    monkeypatch.setenv("MINIBERT_BLAS_BATCH", "0")
    assert blas.gemm_for_kernels(np.float32) is None
    rng = np.random.default_rng(6)
    q, k, v = qkv_views(rng, 2, 2, 8, 4, np.float32)
    out, c = kernels.attention_forward(q, k, v, _mask(2, 8))
    out_ref, c_ref = layers.attention_forward(q, k, v, _mask(2, 8))
    _check_against_reference(rng, out, c, out_ref, c_ref, False, kernels.attention_backward)


def test_apply_thread_timeout_after_numpy_is_loaded():
    """In a process that loaded NumPy (so OpenBLAS read its environment) before the variable was
    set, apply_thread_timeout makes OpenBLAS read it again; BLAS still computes right after its
    thread pool was restarted, and its idle threads go to sleep instead of spinning."""
    script = (
        "import os\nos.environ.pop('OPENBLAS_THREAD_TIMEOUT', None)\n"
        "import time\nimport numpy as np\n"
        "a = np.random.default_rng(0).standard_normal((400, 400))\n"
        "def spin():\n"
        "    burnt = []\n"
        "    for _ in range(3):\n"
        "        a @ a\n        c0 = time.process_time()\n        time.sleep(0.1)\n"
        "        burnt.append(time.process_time() - c0)\n"
        "    return sorted(burnt)[1]\n"
        "control = spin()\n"
        "from minibert.native import blas\n"
        "before = blas.thread_timeout_read()\n"
        "ok = blas.apply_thread_timeout()\n"
        "err = float(abs(a @ a - np.einsum('ij,jk->ik', a, a)).max())\n"
        "print(before, ok, blas.thread_timeout_read(), err < 1e-9, control > 0.005, spin() < 0.005)\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    res = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    before, ok, after, correct, spun_before, asleep = res.stdout.split()
    if before == "None":
        pytest.skip("NumPy's BLAS is not an OpenBLAS that reports its thread timeout")
    assert (before, ok, after, correct) == ("0", "True", blas.TIMEOUT, "True")
    # with OpenBLAS's default the idle threads spin ~0.1 s after each call (15-40 ms of CPU time
    # in a 0.1 s sleep measured on 2 loaded cores); after apply_thread_timeout they sleep at once.
    # Without a second BLAS thread nothing spins either way, and there is nothing to compare.
    if spun_before == "True":
        assert asleep == "True", "OpenBLAS's threads still spin after a matmul"
