"""`python -m minibert bench --only finetune`: a fine-tuning step, sequence classification (B=32,
T=128) on every config and question answering (B=8, T=384 and B=32, T=256: full windows, no
padding to skip) on all but base, minibert's class vs transformers' of the same name, each in
its own worker processes."""
from __future__ import annotations

import numpy as np

from minibert.model import BertConfig
from minibert.tools import bench_common
from minibert.tools.bench_common import (CONFIGS, STEP_SHAPE, checkpoint, fmt_table, have, isolated_medians, mib, ms,
                                         threads_label, try_torch)
from minibert.tools.bench_profile import QA_SHAPES, qa_step_fn, task_step_fn


def finetune_step_fn(config: str, name: str):
    """One fine-tuning step of sequence classification (2 labels, dropout on, clip, AdamW) on a
    batch of B=32 full-length T=128 sequences: minibert's class or transformers' of the same name."""
    cfg = BertConfig(**CONFIGS[config], hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    rng = np.random.default_rng(0)
    B, T = STEP_SHAPE["B"], STEP_SHAPE["T"]
    ids = rng.integers(5, cfg.vocab_size, (B, T))
    batch = dict(input_ids=ids, segment_ids=np.zeros_like(ids), input_mask=np.ones_like(ids), labels=rng.integers(0, 2, B))
    torch = None
    if name == "torch":
        torch, why = try_torch()
        if torch is None:
            raise RuntimeError(why)
    return task_step_fn("BertForSequenceClassification", cfg, batch, name, rng, torch, num_labels=2)


QA_CONFIGS = ("tiny", "small", "minilm")  # question answering: not base (one layer of BERT-base, a shape no one fine-tunes)


def bench_finetune(report: dict, reps: int, configs, threads_list, qa_configs=QA_CONFIGS, qa_shapes=QA_SHAPES) -> None:
    why = None if have("torch") and have("transformers") else "torch or transformers not installed"
    rows, out = [], report.setdefault("finetune_step", {})
    B, T = STEP_SHAPE["B"], STEP_SHAPE["T"]
    cells = [("finetune", f"BertForSequenceClassification B={B} T={T}", None)]
    cells += [("qa", f"BertForQuestionAnswering B={b} T={t}", (b, t)) for b, t in qa_shapes]
    for threads in threads_list:
        for kind, task, shape in cells:
            for name in configs:
                if kind == "qa" and name not in qa_configs:
                    continue
                spec = name if shape is None else [name, *shape]
                t = isolated_medians(kind, spec, ["numba"] + ([] if why else ["torch"]), reps, threads=threads)
                rss = isolated_medians.last_rss
                t_torch = t.get("torch")
                key = name if shape is None else f"{name} B{shape[0]} T{shape[1]}"
                out[f"{kind} {key}@{threads}"] = {
                    "threads": threads, "numba_s": t["numba"], "torch_s": t_torch, "task": task,
                    "ratio_numba_over_torch": None if t_torch is None else t["numba"] / t_torch,
                    "step_rss_bytes_numba": rss["numba"], "step_rss_bytes_torch": rss.get("torch")}
                checkpoint()
                rows.append([threads, task.split()[0][len("BertFor"):], task.split(" ", 1)[1], name, ms(t["numba"]),
                             ms(t_torch), "n/a" if t_torch is None else f"{t['numba'] / t_torch:.2f}",
                             mib(rss["numba"]), mib(rss.get("torch"))])
    print(f"\n== fine-tuning step (fwd+bwd+clip+AdamW, dropout 0.1); ms (median of {bench_common.ROUNDS} processes "
          f"x {reps}), threads {threads_label(threads_list)}")
    print(fmt_table(["threads", "task", "shape", "config", "minibert", "transformers", "minibert/torch",
                     "step MiB minibert", "step MiB torch"], rows) + ("" if why is None else f"\n[torch: {why}]"))
    print("target: minibert/torch <= 1.0 at every shape")


def qa_step(spec, name: str):
    """A QA fine-tuning step (minibert.tools.bench_profile.qa_step_fn) in a worker process; spec:
    [config, B, T]."""
    config, B, T = spec
    torch = None
    if name == "torch":
        torch, why = try_torch()
        if torch is None:
            raise RuntimeError(why)
    return qa_step_fn(CONFIGS[config], name, torch, B=B, T=T)
