"""`python -m minibert bench --only step` and `--only profile`: one full pretraining step (forward,
backward, clipping, AdamW) of minibert (numba and numpy backends) vs transformers'
BertForPreTraining in PyTorch eager, at each thread count, with the scaling it implies; and where
the step's time goes, part by part (the profile's parts are in minibert.tools.bench_profile)."""
from __future__ import annotations

import numpy as np

from minibert.tools import bench_common
from minibert.tools.bench_common import (CONFIGS, STEP_SHAPE, checkpoint, fmt_table, have, isolated_medians,
                                         median_time, mib, ms, n_threads, run_worker, threads_label, try_torch)


def matmul_flops(cfg, B, T, P) -> float:
    """Matmul FLOPs of one training step (forward + backward), counted analytically.

    Forward: 2*m*n*k per matmul. Backward of a matmul with a weight costs two matmuls of the
    same size (dx and dw); the attention matmuls also need two each. So a step is 3x forward.
    """
    C, FF, V, L, NH = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.num_hidden_layers, cfg.num_attention_heads
    N = B * T
    per_layer = 2 * N * C * 3 * C + 2 * N * C * C + 2 * 2 * N * C * FF  # qkv, out, ffn in + out
    per_layer += 2 * 2 * B * NH * T * T * (C // NH)  # q @ k^T and att @ v
    heads = 2 * B * C * C + 2 * B * C * 2 + 2 * B * P * C * C + 2 * B * P * C * V  # pooler, nsp, mlm dense, decoder
    return 3.0 * (L * per_layer + heads)


def matmul_peak(reps: int, n: int = 2048) -> float:
    """The machine's float32 matmul rate in GFLOP/s: a large np.matmul (OpenBLAS, all cores)."""
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    t = median_time(lambda: a @ a, reps)
    return 2.0 * n**3 / t / 1e9


def minibert_step_fn(cfg, batch, backend: str, seed: int = 0):
    """One training step of minibert with the given backend: loss_and_grads (dropout on),
    global-norm clipping to 1.0, AdamW."""
    from minibert import optim
    from minibert.backend import get_ops
    from minibert.bert import BertForPreTraining
    from minibert.model import bert_backward, bert_forward

    model = BertForPreTraining(cfg, seed=seed, dtype=np.float32)
    opt = optim.AdamW(model.params, lr=1e-4)
    ops = get_ops(backend)
    rng = np.random.default_rng(seed)

    def step():
        loss, _, cache = bert_forward(model.params, cfg, batch, rng, ops)
        grads = bert_backward(model.params, cfg, cache, ops)
        grads, _ = optim.clip_by_global_norm(grads, 1.0)
        opt.step(model.params, grads)
        return loss

    return step


def torch_step_parts(torch, cfg, batch):
    """transformers' BertForPreTraining, PyTorch eager, train mode (dropout on), MLM logits only
    at the masked positions (gather before model.cls), loss = MLM CE + NSP CE: (forward+backward
    fn, clip+AdamW fn), as the step's two halves."""
    import transformers

    hf_cfg = transformers.BertConfig(**cfg.to_dict())
    torch.manual_seed(0)
    model = transformers.BertForPreTraining(hf_cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
    ids = torch.tensor(batch["input_ids"])
    mask = torch.tensor(batch["input_mask"])
    seg = torch.tensor(batch["segment_ids"])
    pos = torch.tensor(batch["masked_lm_positions"])  # (B, P)
    labels = torch.tensor(np.where(batch["masked_lm_weights"] > 0, batch["masked_lm_ids"], -100))  # (B, P)
    nsp = torch.tensor(batch["next_sentence_labels"])
    rows = torch.arange(ids.shape[0])[:, None]  # (B, 1)
    ce = torch.nn.functional.cross_entropy

    def fwd_bwd():
        opt.zero_grad(set_to_none=True)
        seq, pooled = model.bert(input_ids=ids, attention_mask=mask, token_type_ids=seg, return_dict=False)[:2]
        h = seq[rows, pos]  # (B, P, C) hidden states at the masked positions only
        mlm_logits, nsp_logits = model.cls(h, pooled)  # (B, P, V), (B, 2)
        loss = ce(mlm_logits.reshape(-1, mlm_logits.shape[-1]), labels.reshape(-1)) + ce(nsp_logits, nsp)
        loss.backward()
        return loss

    def update():
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return fwd_bwd, update


def torch_step_fn(torch, cfg, batch):
    """One training step of transformers' BertForPreTraining (torch_step_parts, both halves)."""
    fwd_bwd, update = torch_step_parts(torch, cfg, batch)

    def step():
        loss = fwd_bwd()
        update()
        return loss.item()

    return step


def step_parts_torch(config: str):
    """torch_step_parts for `config`'s bench batch (in a worker process)."""
    from minibert.analysis.gradcheck import random_batch
    from minibert.model import BertConfig

    torch, why = try_torch()
    if torch is None:
        raise RuntimeError(why)
    cfg = BertConfig(**CONFIGS[config])
    batch = random_batch(cfg, STEP_SHAPE["B"], STEP_SHAPE["T"], STEP_SHAPE["P"], np.random.default_rng(0))
    return torch, torch_step_parts(torch, cfg, batch)


def bench_step(report: dict, reps: int, numpy_reps: int, configs, threads_list) -> None:
    """The training step of every config at every thread count (numba vs torch in turns; the numpy
    backend once, at the most threads, with `numpy_reps` > 0), then the scaling table."""
    from minibert.model import BertConfig

    why = None if have("torch") and have("transformers") else "torch or transformers not installed"
    B, T, P = STEP_SHAPE["B"], STEP_SHAPE["T"], STEP_SHAPE["P"]
    out = report.setdefault("step", {"shape": STEP_SHAPE})
    rows, peaks = [], {}
    for threads in threads_list:
        peak = peaks[threads] = run_worker("peak", 2048, max(3, reps // 2), threads=threads)["gflops"]
        out.setdefault("matmul_peak_gflops", {})[str(threads)] = peak
        for name in configs:
            cfg = BertConfig(**CONFIGS[name])
            t = isolated_medians("step", name, ["numba"] + ([] if why else ["torch"]), reps, threads=threads)
            rss = dict(isolated_medians.last_rss)
            if numpy_reps and threads == max(threads_list):
                t.update(isolated_medians("step", name, ["numpy"], numpy_reps, rounds=1, threads=threads))
            flops = matmul_flops(cfg, B, T, P)
            t_torch = t.get("torch")
            res = {"threads": threads, "numba_s": t["numba"], "numpy_s": t.get("numpy"), "torch_s": t_torch,
                   "tokens_per_s_numba": B * T / t["numba"],
                   "tokens_per_s_torch": None if t_torch is None else B * T / t_torch,
                   "step_ratio_numba_over_torch": None if t_torch is None else t["numba"] / t_torch,
                   "matmul_gflop_per_step": flops / 1e9, "gflops_numba": flops / t["numba"] / 1e9,
                   "fraction_of_peak": flops / t["numba"] / 1e9 / peak, "torch_note": why,
                   "step_rss_bytes_numba": rss["numba"], "step_rss_bytes_torch": rss.get("torch")}
            out[f"{name}@{threads}"] = res
            rows.append([threads, name, ms(t["numba"]), ms(t.get("numpy")), ms(t_torch), f"{B * T / t['numba']:,.0f}",
                         "n/a" if t_torch is None else f"{B * T / t_torch:,.0f}",
                         "n/a" if t_torch is None else f"{t['numba'] / t_torch:.2f}",
                         f"{flops / t['numba'] / 1e9:.1f}", f"{100 * flops / t['numba'] / 1e9 / peak:.0f}%",
                         mib(rss["numba"]), mib(rss.get("torch"))])
            out[name] = res  # the last (most threads) under the config's name, for the data section
            checkpoint()
    print(f"\n== training step (fwd+bwd+clip+AdamW), B={B} T={T} P={P}, float32; ms (median of {bench_common.ROUNDS} "
          f"processes x {reps}; numpy backend 1 x {numpy_reps} at {max(threads_list)} threads"
          f"{'' if numpy_reps else ': skipped'}), threads {threads_label(threads_list)}")
    print(fmt_table(["threads", "config", "numba", "numpy", "torch", "tok/s numba", "tok/s torch", "numba/torch",
                     "GFLOP/s", "of peak", "step MiB numba", "step MiB torch"], rows))
    print("float32 matmul peak (2048^3 np.matmul) by threads: "
          + ", ".join(f"{n}: {g:.1f} GFLOP/s" for n, g in peaks.items()) + ("" if why is None else f"   [torch: {why}]"))
    print("targets: numba/torch <= 1.0 at every thread count, <= 0.9 at 2 threads. step MiB: the worker process's "
          "peak resident memory minus its size before the first step (model, optimizer, batch already built)")
    report["matmul_peak_gflops"] = peaks[max(threads_list)]
    if len(threads_list) > 1 and min(threads_list) == 1:
        print_scaling(out, configs, threads_list, "numba", "torch", "training step")


def amdahl_serial(t1: float, tn: float, n: int) -> float:
    """The serial part S of a time that takes t1 on one thread and tn on n, if it is S plus a
    part that divides perfectly: t(n) = S + (t1 - S) / n  ->  S = (n tn - t1) / (n - 1)."""
    return (n * tn - t1) / (n - 1)


def print_scaling(out: dict, configs, threads_list, mine: str, theirs: str, what: str) -> None:
    """Speed-up from 1 thread of minibert and torch, and the serial milliseconds each implies
    (Amdahl, from the 1-thread and n-thread medians), config by config."""
    rows = []
    for name in configs:
        one = out.get(f"{name}@1")
        for n in threads_list:
            res = out.get(f"{name}@{n}")
            if n == 1 or one is None or res is None:
                continue
            row = [name, n]
            for who in (mine, theirs):
                t1, tn = one.get(f"{who}_s"), res.get(f"{who}_s")
                row += (["n/a"] * 2 if t1 is None or tn is None else
                        [f"{t1 / tn:.2f}x", ms(max(0.0, amdahl_serial(t1, tn, n)))])
            rows.append(row)
            res["speedup_from_1_thread"] = {w: None if one.get(f"{w}_s") is None or res.get(f"{w}_s") is None
                                            else one[f"{w}_s"] / res[f"{w}_s"] for w in (mine, theirs)}
    if rows:
        print(f"\n== scaling of the {what}: speed-up from 1 thread and the serial ms it implies "
              "(Amdahl: t(n) = S + (t1 - S)/n)")
        print(fmt_table(["config", "threads", f"speed-up {mine}", f"serial ms {mine}", f"speed-up {theirs}",
                         f"serial ms {theirs}"], rows))


def step_fn(config: str, name: str):
    """A function running one training step of `config` with contender `name` (called inside a
    worker process; torch is imported only by the torch contender)."""
    from minibert.analysis.gradcheck import random_batch
    from minibert.model import BertConfig

    cfg = BertConfig(**CONFIGS[config])
    batch = random_batch(cfg, STEP_SHAPE["B"], STEP_SHAPE["T"], STEP_SHAPE["P"], np.random.default_rng(0))
    if name == "torch":
        torch, why = try_torch()
        if torch is None:
            raise RuntimeError(why)
        return torch_step_fn(torch, cfg, batch)
    return minibert_step_fn(cfg, batch, name)


def profile_worker(spec, reps: int) -> dict:
    """Inside a worker process: the per-layer profile of a config's step (profile_step) and, unless
    spec says {"floor": false}, the step's matmuls timed one by one (matmul_floor), as JSON-ready
    values. spec: the config's name, or {"config": name, "floor": bool}."""
    from minibert.analysis.gradcheck import random_batch
    from minibert.model import BertConfig
    from minibert.tools.bench_profile import matmul_floor, profile_step

    spec = {"config": spec, "floor": True} if isinstance(spec, str) else spec
    cfg = BertConfig(**CONFIGS[spec["config"]])
    p = profile_step(cfg, STEP_SHAPE, reps)
    p["threads"] = n_threads()
    if spec.get("floor", True):
        B, T, P = (STEP_SHAPE[k] for k in "BTP")
        n_real = int(random_batch(cfg, B, T, P, np.random.default_rng(0))["input_mask"].sum())
        p["matmul_floor"] = matmul_floor(cfg, STEP_SHAPE, max(5, reps), n_real)
    return p


def torch_profile(config: str, reps: int) -> dict:
    """Inside a worker process: PyTorch's step of `config` cut by operator kind (torch.profiler;
    minibert.tools.bench_profile.torch_profile_step)."""
    from minibert.tools.bench_profile import torch_profile_step

    return torch_profile_step(step_parts_torch(config), reps)


def bench_profile(report: dict, reps: int, configs, threads_list, floor: bool = True) -> None:
    """Where a step's time goes, part by part, at 1 thread and at the most threads of the run (each
    in a fresh worker process, like the step): each part's speed-up and the serial milliseconds
    it implies, beside PyTorch's step cut by operator kind at the same counts; with `floor`, the
    step's matmuls alone at the most threads (minibert.tools.bench_profile)."""
    from minibert.model import BertConfig
    from minibert.tools.bench_profile import profile_rows, scaling_rows, torch_scaling_rows

    B, T, P = (STEP_SHAPE[k] for k in "BTP")
    top = max(threads_list)
    counts = sorted({1, top})
    torch_ok = have("torch") and have("transformers")
    out = report.setdefault("profile", {})
    for name in configs:
        mine = {n: run_worker("profile", {"config": name, "floor": floor and n == top}, reps, threads=n)
                for n in counts}
        theirs = {n: run_worker("torch-profile", name, reps, threads=n) for n in counts} if torch_ok else {}
        out[name] = {"minibert": {str(n): p for n, p in mine.items()},
                     "torch": {str(n): p for n, p in theirs.items()}}
        checkpoint()
        flops = matmul_flops(BertConfig(**CONFIGS[name]), B, T, P)
        peak = report.get("step", {}).get("matmul_peak_gflops", {}).get(str(top))
        p = mine[top]
        print(f"\n== profile: training step, {name}, B={B} T={T} P={P}, numba backend, one worker process per "
              f"thread count; ms (median of {reps}), {top} threads")
        print(fmt_table(["layer", "forward", "backward", "total", "of step"], profile_rows(p)))
        print(f"peak NumPy memory in a step (tracemalloc, above what existed before it): "
              f"{p['peak_bytes'] / 2**20:.1f} MiB; matmul work {flops / 1e9:.2f} GFLOP"
              + ("" if peak is None else f" = {ms(flops / peak / 1e9)} ms at the measured {peak:.0f} GFLOP/s peak"))
        if len(counts) > 1:
            print(f"\n== profile: {name}, each part at 1 and at {top} threads, its speed-up and serial ms "
                  f"(Amdahl: S = ({top} t{top} - t1) / {top - 1}); minibert, numba backend")
            rows, serial = scaling_rows(mine[1], mine[top], top)
            print(fmt_table(["part", "1 thread ms", f"{top} threads ms", "speed-up", "serial ms"], rows))
            out[name]["serial_ms_minibert"] = serial * 1e3
            if theirs:
                print(f"== profile: {name}, PyTorch (transformers' BertForPreTraining) by operator kind "
                      f"(torch.profiler self times; profiler on), 1 and {top} threads")
                rows, serial_t = torch_scaling_rows(theirs[1], theirs[top], top)
                print(fmt_table(["part", "1 thread ms", f"{top} threads ms", "speed-up", "serial ms"], rows))
                out[name]["serial_ms_torch"] = serial_t * 1e3
            print(f"serial ms per step at {top} threads (sum of the parts' Amdahl estimates): minibert "
                  f"{serial * 1e3:.1f}" + (f", torch {serial_t * 1e3:.1f}" if theirs else ""))
        if "matmul_floor" in p:
            _print_matmul_floor(p, report.get("step", {}).get(f"{name}@{top}", {}).get("torch_s"))


def _print_matmul_floor(p: dict, torch_s) -> None:
    """The arithmetic behind the step target: the step's matmuls alone, each timed at its own
    shape through the BLAS calls the step makes (minibert.tools.bench_profile.matmul_floor), grouped,
    against the profiled step and the torch step of the `step` section at the same threads (when it ran)."""
    f = p["matmul_floor"]
    rows = [[g, f"{fl / 1e9:.2f}", ms(s), f"{fl / s / 1e9:.0f}"] for g, (s, fl) in f["groups"].items()]
    rows.append(["all matmuls", f"{f['flops'] / 1e9:.2f}", ms(f["floor_s"]), f"{f['flops'] / f['floor_s'] / 1e9:.0f}"])
    print(f"the step's matmuls alone, each timed at its own shape (the BLAS calls the step makes; ms per step), "
          f"{p.get('threads', '?')} threads:")
    print(fmt_table(["matmuls", "GFLOP", "ms", "GFLOP/s"], rows))
    print(f"this step: {ms(p['step_s'])} ms, of which the matmuls alone {ms(f['floor_s'])} ms and "
          f"{ms(max(0.0, p['step_s'] - f['floor_s']))} ms everything else")
    if torch_s is not None:
        f["torch_s"] = torch_s
        print(f"the torch step: {ms(torch_s)} ms; the matmuls alone take {ms(f['floor_s'])} ms, "
              f"{100 * f['floor_s'] / torch_s:.0f}% of it, leaving {ms(max(0.0, torch_s - f['floor_s']))} ms "
              "for everything else (attention softmax, LayerNorm, GELU, dropout, embeddings, loss, AdamW)")
