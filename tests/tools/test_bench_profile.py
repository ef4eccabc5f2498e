"""minibert.tools.bench_profile: the per-layer profile of a training step and the QA step at T=384
(on tiny shapes here; `python -m minibert bench --only profile,finetune` runs the real ones)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from minibert import kernels, layers
from minibert.model import BertConfig  # noqa: E402
from minibert.tools import bench_profile  # noqa: E402

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


@pytest.mark.parametrize("backend, T", [("numba", 384), ("numpy", 384), ("numba", 256)])
def test_qa_step_runs_at_squad_lengths_and_learns(backend, T, monkeypatch):
    monkeypatch.setattr("minibert.backend.chosen", backend)
    step = bench_profile.qa_step_fn(TINY, backend, B=2, T=T)
    losses = [step() for _ in range(4)]
    assert np.isfinite(losses).all()
    assert abs(losses[0] - np.log(T)) < 1.0  # (start CE + end CE) / 2 is about ln T at init
    assert losses[-1] < losses[0]  # the same batch four times: AdamW lowers its loss


def test_cpu_description_names_model_simd_and_blas_kernel():
    from minibert.native import blas

    model, simd, core = bench_profile.cpu_description().split("; ")
    assert model and simd
    assert core.startswith("OpenBLAS ") == (blas.openblas() is not None)


@pytest.mark.parametrize("dims", [dict(hidden_size=16, num_attention_heads=2),
                                  dict(hidden_size=24, num_attention_heads=3)])
def test_step_matmuls_are_the_steps_matmul_flops(dims):
    """The enumerated matmuls of a step (timed one by one for the matmul floor) add up to the
    analytic count of bench_step.matmul_flops, which is written independently of them."""
    from minibert.tools import bench_step

    cfg = BertConfig(**{**TINY, **dims})
    B, T, P = 3, 16, 4
    listed = sum(m.flops for m in bench_profile.step_matmuls(cfg, B, T, P, n_real=B * T))
    np.testing.assert_allclose(listed, bench_step.matmul_flops(cfg, B, T, P), rtol=1e-12)
    # fewer real tokens: only the encoder's linears shrink
    fewer = sum(m.flops for m in bench_profile.step_matmuls(cfg, B, T, P, n_real=B * T - 5))
    assert fewer < listed


def test_matmul_floor_times_every_matmul_and_sums_them():
    cfg = BertConfig(**TINY)
    f = bench_profile.matmul_floor(cfg, dict(B=2, T=8, P=2), reps=2)
    names = [name for name, _, _ in f["rows"]]
    assert len(names) == len(set(names)) == len(bench_profile.step_matmuls(cfg, 2, 8, 2, 16))
    assert all(t > 0 for _, _, t in f["rows"])
    np.testing.assert_allclose(f["floor_s"], sum(c * t for _, c, t in f["rows"]), rtol=1e-12)
    np.testing.assert_allclose(sum(fl for _, fl in f["groups"].values()), f["flops"], rtol=1e-12)
    np.testing.assert_allclose(sum(s for s, _ in f["groups"].values()), f["floor_s"], rtol=1e-12)
    assert {"qkv", "attention out", "ffn in", "ffn out", "attention core", "decoder"} <= set(f["groups"])


def test_time_matmul_runs_the_layouts_it_names(monkeypatch):
    """a_t / b_t operands are transposed views, as in the layers (w.T, x.T), not copies."""
    from minibert.native import blas

    seen = []
    real = np.matmul

    def matmul(a, b, out):
        seen.append((a.flags.c_contiguous, b.flags.c_contiguous))
        return real(a, b, out=out)

    monkeypatch.setattr(bench_profile.np, "matmul", matmul)
    bench_profile.time_matmul(bench_profile.Matmul("qkv", "dx", 1, 5, 4, 3, b_t=True), reps=1)
    assert seen and seen[0] == (True, False)
    calls = []
    monkeypatch.setattr(blas, "matmul", lambda a, b, out: calls.append(a.shape) or out)
    bench_profile.time_matmul(bench_profile.Matmul("attention core", "att @ v", 1, 8, 8, 4, batch=6), reps=1)
    assert calls and calls[0] == (6, 8, 8)


def test_profile_worker_result_travels_as_json(monkeypatch):
    """bench --only profile runs profile_worker in a fresh process and reads its JSON back."""
    import json

    from minibert.tools import bench_common, bench_step

    monkeypatch.setitem(bench_common.CONFIGS, "test", TINY)
    monkeypatch.setattr(bench_step, "STEP_SHAPE", dict(B=2, T=8, P=2))
    p = json.loads(json.dumps(bench_step.profile_worker("test", reps=2)))
    assert p["step_s"] > 0 and p["layers_s"]["linear forward"] > 0
    f = p["matmul_floor"]
    assert 0 < f["floor_s"] and all(len(v) == 2 for v in f["groups"].values())
    rows = bench_profile.profile_rows(p)
    assert rows[-1][0].startswith("step")


def test_round_ratios_take_the_faster_reference_per_round():
    from minibert.tools import bench_attention

    rounds = {"numba": [10.0, 8.0], "torch explicit": [12.0, 6.0], "torch sdpa": [11.0, 9.0]}
    np.testing.assert_allclose(bench_attention.round_ratios(rounds, ["torch explicit", "torch sdpa"], "numba"), [1.1, 0.75])


# ---------------------------------------------------------------------------------------------
# threads: the lists, the workers' environment, the serial part

def test_parse_threads_sorts_and_leaves_out_counts_above_the_cores():
    from minibert.tools import bench_common

    assert bench_common.parse_threads(None, 8) == ([8], [])
    assert bench_common.parse_threads("16,1,2,4,2", 4) == ([1, 2, 4], [16])
    with pytest.raises(ValueError, match="thread counts"):
        bench_common.parse_threads("0,2", 4)
    with pytest.raises(ValueError, match="comma-separated"):
        bench_common.parse_threads("two", 4)


def test_worker_environment_sets_every_librarys_thread_count():
    from minibert.tools import bench_common

    env = bench_common.thread_environment(3)
    assert all(env[v] == "3" for v in bench_common.THREAD_VARIABLES) and env["MINIBERT_BENCH_THREADS"] == "3"
    assert "MINIBERT_BENCH_THREADS" not in bench_common.thread_environment(None) or \
        bench_common.thread_environment(None)["MINIBERT_BENCH_THREADS"] == __import__("os").environ["MINIBERT_BENCH_THREADS"]


def test_amdahl_serial_part_recovers_a_known_split():
    from minibert.tools import bench_step

    S, P = 0.03, 0.4  # t(n) = S + P / n
    assert bench_step.amdahl_serial(S + P, S + P / 8, 8) == pytest.approx(S)
    rows, serial = bench_profile._scaling_table({"a": 0.3, "b": 0.1}, {"a": 0.3 / 4, "b": 0.1}, 4, 0.4, 0.175)
    assert serial == pytest.approx(0.1)  # a divides perfectly, b not at all
    assert rows[0][0] == "b" and rows[-1][0].startswith("step")


def test_torch_parts_name_the_operators():
    assert bench_profile.torch_part("aten::addmm") == bench_profile.torch_part("aten::bmm")
    assert bench_profile.torch_part("aten::native_layer_norm_backward") == "layernorm"
    assert bench_profile.torch_part("aten::add_") == "elementwise and other ops"


def test_profile_worker_at_one_thread_in_a_fresh_process(monkeypatch):
    """bench runs the profile in worker processes at a thread count: the worker reports it."""
    from minibert.tools import bench_common

    got = bench_common.run_worker("profile", {"config": "tiny", "floor": False}, 1, threads=1)
    assert got["threads"] == 1 and got["step_s"] > 0 and "matmul_floor" not in got
    rows, serial = bench_profile.scaling_rows(got, got, 2)
    assert serial >= 0 and rows[-1][0].startswith("step")


def test_cli_time_limit_skips_the_sections_and_still_writes_the_json(tmp_path, capsys):
    import json

    from minibert.tools import bench

    out = tmp_path / "results.json"
    assert bench.cli(["--only", "startup", "--time-limit", "0", "--json", str(out)]) == 0
    assert "startup: skipped (--time-limit 0 minutes reached)" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["sections_s"] == {"startup": None} and report["machine"]["threads"]


def test_every_worker_kind_the_sections_start_is_dispatched_by_the_command():
    """A section starts `python -m minibert.tools.bench --worker KIND` (bench_common.run_worker); the
    command's WORKERS and REPORTS hand KIND to the section that builds it. A kind a section asks
    for that the tables lack would fail only in a worker process, minutes into a run."""
    import ast
    import inspect

    from minibert.tools import bench, bench_attention, bench_finetune, bench_sst2, bench_step

    asked = set()
    for module in (bench, bench_attention, bench_finetune, bench_sst2, bench_step):
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in \
                    ("run_worker", "isolated_medians") and node.args and isinstance(node.args[0], ast.Constant):
                asked.add(node.args[0].value)
    asked |= {"finetune", "qa"}  # bench_finetune names its kinds in a list of cells: ("finetune", ...), ("qa", ...)
    assert {"step", "attention", "profile", "torch-profile", "peak", "sst2"} <= asked
    assert asked <= set(bench.WORKERS) | set(bench.REPORTS), asked - set(bench.WORKERS) - set(bench.REPORTS)
