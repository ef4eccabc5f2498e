"""Result parity with transformers: fine-tune the same checkpoint on the same data, in the same
example order, with the same recipe, in minibert and in transformers, and report both dev metrics.

    python examples/finetune_parity.py sst2   --init runs/tiny --data SST-2 --lr 3e-4 --epochs 1 --max-seq-length 64
    python examples/finetune_parity.py wnut17 --init runs/tiny --lr 5e-4 --epochs 24 --max-seq-length 64
    python examples/finetune_parity.py squad2 --init MODEL_DIR --lr 1e-4 --epochs 4 --max-seq-length 256 --null-windows 0.25
    ... --minibert-from RUN   # take minibert's side from a finished `finetune` run of the same settings

What is shared, so that the two runs differ only in the framework (and in their dropout masks):
- the data: minibert's own readers and feature builders (`build_run`), so both see the same input
  ids, masks, segment ids and labels (token tasks: -100 off first word pieces; SQuAD: the
  run_squad windows and start/end positions);
- the order: step s trains on `run.rows_at(s)` (a permutation drawn from (seed, epoch)) and
  `run.source.batch(rows)` (padding columns that no row uses are cut): the identical batch;
- the start: the torch model gets minibert's initial parameters, the newly initialised task head
  (and, for a checkpoint without one, the pooler) included, so both start bit-for-bit equal
  (the script checks that `from_pretrained` of the same directory gives the same encoder);
- the recipe: minibert's AdamW (Google's AdamWeightDecayOptimizer: no bias correction, eps 1e-6,
  weight decay 0.01 except LayerNorm and biases, decoupled), minibert's lr schedule `lr_at`
  ("bert": warm-up over the first `warmup` of the steps, linear decay from step 0), clipping by
  global norm 1.0 (TF's rule), dropout `--dropout` in the encoder and before the classifier;
- the scoring: the dev set is scored by minibert's own scorer (`run.source.evaluate`) on the
  torch model's logits, at the same steps.

Output: a JSON (--json) with both runs' dev metrics at every evaluation, their best and final
values, the ms per step of each, and a one-line summary. One thread each unless --threads.
--which minibert|torch runs one side only (e.g. to re-run one).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

for var in ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402

from minibert.finetune.commands import build_run, task_kind  # noqa: E402
from minibert.finetune.run import FinetuneConfig  # noqa: E402
from minibert.loop import engine  # noqa: E402
from minibert.loop.launch import Job, launch  # noqa: E402
from minibert.optim import lr_at  # noqa: E402

HF_CLASS = {"classification": "BertForSequenceClassification", "regression": "BertForSequenceClassification",
            "token": "BertForTokenClassification", "qa": "BertForQuestionAnswering"}


class BertAdamW:
    """minibert.optim.AdamW (bias_correction=False) in torch, same update, same exclusions."""

    def __init__(self, named_params, weight_decay=0.01, beta1=0.9, beta2=0.999, eps=1e-6):
        import torch

        self.params = [(n, p) for n, p in named_params if p.requires_grad]
        self.decay = {n: ("LayerNorm" not in n and not n.endswith(".bias")) for n, _ in self.params}
        self.m = {n: torch.zeros_like(p) for n, p in self.params}
        self.v = {n: torch.zeros_like(p) for n, p in self.params}
        self.wd, self.b1, self.b2, self.eps = weight_decay, beta1, beta2, eps

    def step(self, lr: float):
        import torch

        with torch.no_grad():
            for n, p in self.params:
                if p.grad is None:
                    continue
                g, m, v = p.grad, self.m[n], self.v[n]
                m.mul_(self.b1).add_(g, alpha=1 - self.b1)
                v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
                u = m / (v.sqrt() + self.eps)
                if self.decay[n] and self.wd:
                    u = u + self.wd * p
                p.sub_(lr * u)


def clip_global(params, clip_norm: float) -> float:
    """TF's clip_by_global_norm (minibert.optim.clip_by_global_norm): scale by clip/norm when norm > clip."""
    grads = [p.grad for p in params if p.grad is not None]
    norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads))
    if norm > clip_norm:
        for g in grads:
            g.mul_(clip_norm / norm)
    return norm


class TorchAsMinibert:
    """The torch model behind minibert's evaluation interface (eval_logits -> numpy)."""

    def __init__(self, model, kind: str):
        self.model, self.kind = model, kind

    def eval_logits(self, input_ids, token_type_ids=None, attention_mask=None):
        import torch

        was = self.model.training
        self.model.eval()
        with torch.no_grad():
            out = self.model(input_ids=torch.from_numpy(np.ascontiguousarray(input_ids)),
                             token_type_ids=torch.from_numpy(np.ascontiguousarray(token_type_ids)),
                             attention_mask=torch.from_numpy(np.ascontiguousarray(attention_mask)))
        self.model.train(was)
        if self.kind == "qa":
            return torch.stack([out.start_logits, out.end_logits], dim=-1).numpy()  # (B, T, 2)
        return out.logits.numpy()


def make_cfg(a) -> FinetuneConfig:
    cfg = FinetuneConfig(task=a.task, init=a.init, out=a.out, data=a.data, lr=a.lr, epochs=a.epochs,
                         batch_size=a.batch_size, max_seq_length=a.max_seq_length, warmup_proportion=a.warmup,
                         hidden_dropout_prob=a.dropout, attention_probs_dropout_prob=a.dropout, seed=a.seed, eval_per_epoch=a.eval_per_epoch,
                         max_train_examples=a.max_train_examples, doc_stride=a.doc_stride, null_windows=a.null_windows,
                         log_interval=20)  # the CLI default
    return cfg


def torch_model_like(run, cfg, kind):
    """transformers' class of the task, config from the --init directory (or minibert's for none),
    loaded with minibert's initial parameters. -> (model, max |diff| of from_pretrained's encoder)."""
    import torch
    import transformers
    from minibert.checkpoint import config_to_hf_dict, to_hf_state_dict

    transformers.logging.set_verbosity_error()

    cls = getattr(transformers, HF_CLASS[kind])
    hf_cfg = config_to_hf_dict(run.model.config, HF_CLASS[kind], np.float32)
    hf_cfg.update(run.model.task_config())
    hf_cfg["hidden_dropout_prob"] = hf_cfg["attention_probs_dropout_prob"] = cfg.hidden_dropout_prob
    hf_cfg["classifier_dropout"] = None  # -> hidden_dropout_prob, as minibert
    hf_cfg.pop("architectures", None)
    config = transformers.BertConfig(**hf_cfg)
    model = cls(config)
    ours = {k: torch.from_numpy(np.array(v, dtype=np.float32, copy=True))  # copies: never minibert's arrays
            for k, v in to_hf_state_dict(run.model.params).items()}
    missing, unexpected = model.load_state_dict(ours, strict=False)
    missing = [k for k in missing if not k.endswith("position_ids")]
    if missing or unexpected:
        raise RuntimeError(f"state dict mismatch: missing {missing}, unexpected {unexpected}")
    diff = None
    if cfg.init.lower() != "none":  # transformers' own loading of the same directory: the same encoder?
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kw = {} if kind == "qa" else {"num_labels": run.model.config.num_labels}
            ref = cls.from_pretrained(cfg.init, **kw)
        ref_sd = ref.state_dict()
        diff = max(float((ref_sd[k] - v).abs().max()) for k, v in ours.items()
                   if k in ref_sd and k.startswith("bert.encoder"))
        del ref
    model.train()
    return model, diff


def run_torch(run, cfg, kind, log):
    import torch

    model, diff = torch_model_like(run, cfg, kind)
    log(f"torch: {type(model).__name__} with minibert's initial parameters; transformers' from_pretrained "
        f"encoder vs minibert's: max |diff| {diff}")
    torch.manual_seed(cfg.seed)
    opt = BertAdamW(model.named_parameters(), weight_decay=cfg.weight_decay)
    params = [p for _, p in opt.params]
    evals, t_train, losses, windows = [], 0.0, [], []
    for step in range(run.total_steps):
        b = run.source.batch(run.rows_at(step))
        t0 = time.perf_counter()
        tensor = lambda name: torch.from_numpy(np.ascontiguousarray(b[name]))  # noqa: E731 (cut padding: a view)
        inputs = {"input_ids": tensor("input_ids"), "token_type_ids": tensor("segment_ids"),
                  "attention_mask": tensor("input_mask")}
        if kind == "qa":
            inputs["start_positions"] = tensor("start_positions")
            inputs["end_positions"] = tensor("end_positions")
        else:
            inputs["labels"] = tensor("labels")
        model.zero_grad(set_to_none=True)
        loss = model(**inputs).loss
        loss.backward()
        clip_global(params, cfg.clip_norm)
        opt.step(lr_at(step, cfg.lr, run.warmup_steps, run.total_steps, "bert"))
        t_train += time.perf_counter() - t0
        losses.append(float(loss.detach()))
        if (step + 1) % cfg.log_interval == 0 or step + 1 == run.total_steps:  # minibert's log windows
            windows.append((step + 1, float(np.mean(losses[-((step + 1 - 1) % cfg.log_interval + 1):]))))
        if (step + 1) % 50 == 0:
            log(f"torch step {step + 1}/{run.total_steps} loss {float(loss):.4f} ({1000 * t_train / (step + 1):.0f} ms/step)")
        if engine.is_eval_step(run.settings, step + 1, run.total_steps):
            scores = run.source.evaluate(TorchAsMinibert(model, kind))
            evals.append({"step": step + 1, **scores})
            log(f"torch dev at step {step + 1}: {fmt(scores)}")
    return {"evals": evals, "ms_per_step": 1000 * t_train / run.total_steps, "encoder_load_max_abs_diff": diff,
            "train_loss": windows}


def run_minibert(run, log, existing: str | None = None):
    """Train minibert's side, or (existing) read a finished `finetune` run of the same settings:
    minibert's runs are deterministic for a seed on one thread, so its numbers are the same."""
    from minibert.loop.rundir import read_jsonl

    if existing:
        saved = json.loads((Path(existing) / "run.json").read_text())["settings"]
        ours = run.cfg.to_dict()
        differ = {k: (saved.get(k), v) for k, v in ours.items()  # verify: how the weights were loaded, not trained
                  if k not in ("out", "log_interval", "verify") and saved.get(k) != v}
        if differ:
            raise ValueError(f"--minibert-from {existing}: settings differ {differ}")
        directory = Path(existing)
        seconds = None
    else:
        t0 = time.perf_counter()
        launch(Job(run.dir, "finetune", overwrite=True), lambda where: build_run(run.cfg, verbose=False, dir=where))
        seconds = time.perf_counter() - t0
        directory = run.dir
    recs, _ = read_jsonl(directory / "metrics.jsonl")
    evals = [{k: v for k, v in r.items() if k not in ("type", "epoch", "time")} for r in recs if r["type"] == "eval"]
    train_time = max((r["time"] for r in recs if r["type"] == "train"), default=seconds)
    return {"evals": evals, "ms_per_step": 1000 * train_time / run.total_steps, "from": str(directory) if existing else None,
            "train_loss": [(r["step"], r["loss"]) for r in recs if r["type"] == "train"]}


def fmt(scores):
    return ", ".join(f"{k} {v:.4f}" for k, v in scores.items() if isinstance(v, float) and k in
                     ("accuracy", "f1", "precision", "recall", "exact", "HasAns_f1", "NoAns_f1", "best_f1"))


def summarise(res, main):
    ev = res["evals"]
    if not ev:
        return {}
    best = max(ev, key=lambda e: e[main])
    return {"final": ev[-1][main], "best": best[main], "best_step": best["step"],
            "final_all": {k: v for k, v in ev[-1].items() if isinstance(v, float)}}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("task")
    p.add_argument("--init", required=True)
    p.add_argument("--data")
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-seq-length", type=int, default=64)
    p.add_argument("--warmup", type=float, default=0.1)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-per-epoch", type=int, default=1)
    p.add_argument("--max-train-examples", type=int, default=0)
    p.add_argument("--doc-stride", type=int, default=128)
    p.add_argument("--null-windows", type=float, default=1.0,
                   help="SQuAD 2.0: the share of training windows without the answer that are kept (finetune's)")
    p.add_argument("--which", choices=("both", "minibert", "torch"), default="both")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", help="write the results here (default results/parity/<task>-<init name>.json)")
    p.add_argument("--out", help="minibert's run directory (default: a temporary one)")
    p.add_argument("--minibert-from", help="a finished `finetune` run with the same settings: take minibert's "
                                            "side from it instead of training it again")
    a = p.parse_args(argv)
    import torch

    torch.set_num_threads(a.threads)
    tmp = None
    if not a.out:
        tmp = tempfile.TemporaryDirectory(prefix="parity-")
        a.out = tmp.name
    json_path = Path(a.json or f"results/parity/{a.task}-{Path(a.init).name}.json")
    json_path.parent.mkdir(parents=True, exist_ok=True)

    def log(msg):
        print(msg, flush=True)

    cfg = make_cfg(a)
    kind = task_kind(cfg)
    run = build_run(cfg, verbose=True)
    main_metric = run.source.main_metric
    log(f"{a.task}: {run.num_train} train features, {run.total_steps} steps of batch {cfg.batch_size}, "
        f"warm-up {run.warmup_steps}, lr {cfg.lr}, T {cfg.max_seq_length}, dropout {cfg.hidden_dropout_prob}, seed {cfg.seed}")
    result = {"task": a.task, "init": a.init, "config": {k: v for k, v in cfg.to_dict().items() if k != "out"},
              "total_steps": run.total_steps, "main_metric": main_metric, "threads": a.threads}
    if json_path.is_file():  # keep the side not re-run
        old = json.loads(json_path.read_text())
        if old.get("config") == result["config"]:
            result.update({k: old[k] for k in ("minibert", "torch") if k in old})
    # the torch side first: it needs minibert's *initial* parameters (minibert trains them in place)
    if a.which in ("both", "torch"):
        result["torch"] = run_torch(run, cfg, kind, log)
        result["torch"].update(summarise(result["torch"], main_metric))
        json_path.write_text(json.dumps(result, indent=1))
    if a.which in ("both", "minibert"):
        result["minibert"] = run_minibert(run, log, a.minibert_from)
        result["minibert"].update(summarise(result["minibert"], main_metric))
        json_path.write_text(json.dumps(result, indent=1))
    line = [f"{a.task} init={a.init} lr={cfg.lr} epochs={cfg.epochs} T={cfg.max_seq_length} steps={run.total_steps}"]
    for side in ("minibert", "torch"):
        if side in result and "final" in result[side]:
            r = result[side]
            pct = 1 if kind == "qa" else 100  # the SQuAD scorer reports percentages already
            line.append(f"{side}: final {pct * r['final']:.2f} best {pct * r['best']:.2f} (step {r['best_step']}), "
                        f"{r['ms_per_step']:.0f} ms/step")
    if "minibert" in result and "torch" in result:
        a_, b_ = dict(map(tuple, result["minibert"]["train_loss"])), dict(map(tuple, result["torch"]["train_loss"]))
        common = sorted(set(a_) & set(b_))
        if common:
            d = max(abs(a_[k] - b_[k]) for k in common)
            result["max_abs_diff_window_loss"] = d
            line.append(f"train-loss windows: max |diff| {d:.4f} over {len(common)}")
    result["summary"] = " | ".join(line)
    json_path.write_text(json.dumps(result, indent=1))
    log(result["summary"])
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
