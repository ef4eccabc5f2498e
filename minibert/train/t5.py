"""T5 as a task of minibert's one training loop (loop/engine.run): `T5Run`, what `python -m
minibert train-t5` (train/t5_command.py) runs, for span-corruption pretraining and text-to-text
SST-2 alike.

The loop gives T5 what every run has: the progress line (step, loss, target-token accuracy,
tokens/s, lr, ETA), metrics.jsonl, curves.png, checkpoints written as one unit by
minibert.loop.rundir (config.json, model.safetensors, vocab.txt, optimizer.safetensors,
trainer_state.json) every `--checkpoint-interval` steps, at the end and at Ctrl-C, a stop on a NaN/inf
loss, and a bit-exact resume: parameters, AdamW's moments, the batch source (`ShuffledBatches`:
the epoch's order and the Generator that draws the noise masks) and the fitted schedule are
restored, so a paused and resumed run ends with the same bits as one that never stopped
(tests/family/test_t5.py). One step is train/step.training_step's: clipping at 1.0, AdamW in PyTorch's
bias-corrected form, the "hf" schedule (linear warmup, linear decay to 0), no dropout.

What T5 brings to the loop:
    model        T5Model: the parameters, loss_grads_metrics (t5_loss_and_grads), save_pretrained
    batch source ShuffledBatches: a new order every epoch; span corruption draws a fresh noise mask
                 for every chunk on every visit (dynamic corruption)
    evaluator    evaluate: teacher-forced target-token loss and accuracy on fixed held-out batches
                 (fixed noise masks, so every evaluation scores the same examples), and the
                 accuracy on the dropped-text tokens alone
    budget       --minutes is a budget the number of steps is fitted to (loop/budget.py: from the
                 loop's own first steps, then twice more), so the learning-rate decay runs to its
                 end; --steps N fixes the number instead (--minutes then only limits the time)
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from minibert.family import t5_data as D
from minibert.family.t5 import T5Config, param_shapes, t5_forward, t5_loss_and_grads
from minibert.io.atomic import write_text_atomic
from minibert.io.jsonfile import read_json
from minibert.checkpoint import CONFIG_NAME, VOCAB_NAME, WEIGHTS_NAME
from minibert.io.tensorfile import load_tensors, save_tensors_atomic
from minibert.loop import checkpoints, engine
from minibert.loop.budget import Fit, StepBudget
from minibert.loop.curves import Panel, Series
from minibert.optim import AdamW

UNFITTED = 1_000_000  # the schedule's length until the budget's first fit (after the loop's first steps)

# ---------------------------------------------------------------------------------------------
# the model as the loop sees it, saving and loading

class T5Model:
    """T5's parameters with the two methods the training loop calls: loss_grads_metrics (one
    teacher-forced forward and backward) and save_pretrained (config.json, model.safetensors,
    vocab.txt)."""

    def __init__(self, cfg: T5Config, params: dict[str, np.ndarray], ops):
        self.cfg, self.params, self.ops = cfg, params, ops

    @property
    def num_parameters(self) -> int:
        return sum(p.size for p in self.params.values())

    def loss_grads_metrics(self, batch: dict, train: bool = False, rng=None):
        """-> (loss, grads keyed as params, {"loss", "acc", "tokens"}). T5 here has no dropout:
        `train` and `rng` change nothing."""
        loss, metrics, grads = t5_loss_and_grads(self.params, self.cfg, batch, self.ops)
        return float(loss), grads, metrics

    def save_pretrained(self, directory, vocab: list[str]) -> Path:
        d = Path(directory)
        write_text_atomic(d / CONFIG_NAME, self.cfg.to_json() + "\n")
        save_tensors_atomic(self.params, d / WEIGHTS_NAME, {"format": "minibert-t5"})
        write_text_atomic(d / VOCAB_NAME, "".join(t + "\n" for t in vocab))
        return d


def load_run(path: str | Path, dtype=np.float32):
    """(cfg, params, base vocab tokens) of a run directory (or one of its checkpoints) saved by train-t5."""
    path = Path(path)
    cfg_path = path / CONFIG_NAME
    if not cfg_path.is_file():
        raise ValueError(f"{path} has no {CONFIG_NAME}: not a train-t5 run directory")
    d = read_json(cfg_path)
    if d.get("model_type") != "minibert-t5":
        raise ValueError(f"{cfg_path} describes model_type {d.get('model_type')!r}, not a minibert-t5 model")
    cfg = T5Config.from_dict(d)
    tensors, _ = load_tensors(path / WEIGHTS_NAME)
    expected = param_shapes(cfg)
    for name, shape in expected.items():
        if name not in tensors or tensors[name].shape != shape:
            got = tensors[name].shape if name in tensors else "missing"
            raise ValueError(f"{path / WEIGHTS_NAME}: parameter {name!r} is {got}, expected {shape}")
    from minibert.text.tokenizer import load_vocab

    tokens = load_vocab(path / VOCAB_NAME)
    if len(tokens) + cfg.num_sentinels != cfg.vocab_size:
        raise ValueError(f"{path / VOCAB_NAME} has {len(tokens)} tokens; with {cfg.num_sentinels} sentinels the "
                         f"model expects {cfg.vocab_size - cfg.num_sentinels}")
    return cfg, {k: tensors[k].astype(dtype) for k in expected}, tokens


# ---------------------------------------------------------------------------------------------
# evaluation

def span_mask(batch: dict, cfg: T5Config) -> np.ndarray:
    """(B, S) True at the target tokens that are dropped text: not padding, not a sentinel, not the
    final EOS (the last real position of each row)."""
    labels, real = batch["labels"], batch["decoder_attention_mask"] > 0
    last = real & ~np.concatenate([real[:, 1:], np.zeros_like(real[:, :1])], axis=1)  # (B, S)
    return real & ~last & ~D.is_sentinel(labels, cfg.vocab_size, cfg.num_sentinels)


def span_baseline(batches: list[dict], cfg: T5Config) -> tuple[int, float]:
    """(token id, accuracy) of always answering the most frequent dropped-text token."""
    spans = np.concatenate([b["labels"][span_mask(b, cfg)] for b in batches])  # (n,)
    counts = np.bincount(spans, minlength=1)
    return int(counts.argmax()), float(counts.max() / max(spans.size, 1))


def evaluate(params, cfg: T5Config, batches: list[dict], ops) -> dict:
    """Teacher-forced target-token loss and accuracy over fixed batches (weighted by tokens),
    and the accuracy on the dropped-span tokens alone (sentinels and EOS excluded)."""
    loss = correct = n = span_correct = span_n = 0.0
    for batch in batches:
        _, m, cache = t5_forward(params, cfg, batch, ops)
        loss += m["loss"] * m["tokens"]
        correct += m["acc"] * m["tokens"]
        n += m["tokens"]
        labels = batch["labels"]
        pred = cache.loss.probs.argmax(-1).reshape(labels.shape)  # (B, S)
        span = span_mask(batch, cfg)  # (B, S)
        span_correct += float(((pred == labels) & span).sum())
        span_n += float(span.sum())
    return {"loss": loss / max(n, 1), "acc": correct / max(n, 1), "span_acc": span_correct / max(span_n, 1),
            "tokens": int(n)}


# ---------------------------------------------------------------------------------------------
# the batch source and the run on the training loop

class ShuffledBatches:
    """The training rows in a new random order every epoch, `batch_size` at a time; make(rows, rng)
    builds the batch (span corruption draws its noise masks from the same Generator). The state
    a checkpoint keeps is small: the Generator's state at the epoch's shuffle (the order is drawn
    again from it), the position in the epoch, and the Generator's state now."""

    def __init__(self, n: int, batch_size: int, rng: np.random.Generator, make):
        self.n, self.batch_size, self.rng, self.make = n, batch_size, rng, make
        self._shuffle()

    def _shuffle(self) -> None:
        self.epoch_rng = self.rng.bit_generator.state
        self.order, self.pos = self.rng.permutation(self.n), 0  # (n,)

    def next(self) -> dict:
        if self.pos + self.batch_size > self.n:
            self._shuffle()
        rows = self.order[self.pos:self.pos + self.batch_size]
        self.pos += self.batch_size
        return self.make(rows, self.rng)

    def state_dict(self) -> dict:
        return {"rows": self.n, "epoch_rng": self.epoch_rng, "pos": self.pos, "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        if state["rows"] != self.n:
            raise ValueError(f"the run was saved with {state['rows']} training rows but the data now gives {self.n}: "
                             f"the training data changed, so the run cannot continue where it stopped")
        self.rng.bit_generator.state = state["epoch_rng"]
        self._shuffle()
        self.pos = int(state["pos"])
        self.rng.bit_generator.state = state["rng"]


class T5Run:
    """T5 as a task of loop/engine.run: the model, AdamW, the batch source, the held-out
    evaluation and the fitting of the step count to the budget."""

    log_partial_window = True
    publish_checkpoints = True
    curves_every = 30.0  # drawing costs about a second: at most twice a minute
    curve_axes, eval_label = (("step", "step"),), "held-out"

    def __init__(self, args, cfg: T5Config, params, tokenizer, batches: ShuffledBatches, eval_batches: list[dict],
                 ops):
        self.args, self.cfg, self.tokenizer = args, cfg, tokenizer
        self.batches, self.eval_batches = batches, eval_batches
        self.model = T5Model(cfg, params, ops)
        self.optimizer = AdamW(params, lr=args.lr, weight_decay=0.01, bias_correction=True)
        self.dir = Path(args.out)
        self.verbose = True
        self.rng = np.random.default_rng([args.seed, 1])  # the loop's dropout Generator: T5 here draws nothing from it
        self.minutes, self.log_interval, self.eval_interval = args.minutes, args.log_interval, args.eval_interval
        self.warmup = min(args.warmup_steps, args.steps // 10) if args.steps else args.warmup_steps  # <= a tenth of --steps
        self.last_eval: dict | None = None
        # the loop's state (loop/engine.py)
        self.step, self.total_steps, self.elapsed = 0, args.steps or UNFITTED, 0.0
        self.window: list = []
        self.lr_anchor: tuple[int, float] | None = None
        self.last_checkpoint: int | None = None
        self.last_eval_step: int | None = None
        self.budget: StepBudget | None = None if args.steps else StepBudget(args.minutes * 60.0, args.eval_interval)

    def run(self, max_steps: int | None = None) -> str:
        return engine.run(self, max_steps)

    def load_checkpoint(self) -> None:
        checkpoints.load_checkpoint(self)

    def resume_command(self) -> str:
        return f"python -m minibert train-t5 --resume {self.dir}"

    def diverged_hint(self) -> str:
        return (f"; the run stopped without saving. Last good checkpoint: {engine.last_good_checkpoint(self)}. Try "
                f"a lower --lr (now {self.args.lr:g}) or more --warmup-steps (now {self.warmup})")

    # --- batch source and step ---------------------------------------------------------------------

    def next_batch(self) -> dict:
        return self.batches.next()

    def step_options(self) -> dict:
        return dict(lr=self.args.lr, warmup_steps=self.warmup, schedule="hf", clip_norm=1.0, rng=None)  # no dropout

    def window_entry(self, r, batch) -> tuple:  # the loop's default log record reads these (loss_acc_record)
        """-> (loss, correct target tokens, target tokens, real input + target tokens, lr)."""
        n = r.metrics["tokens"]
        real = int(batch["attention_mask"].sum() + batch["decoder_attention_mask"].sum())
        return r.loss, round(r.metrics["acc"] * n), n, real, r.lr

    # --- the budget (loop/engine.fit_budget) -------------------------------------------------------

    def time_eval(self) -> float:
        t0 = time.perf_counter()
        evaluate(self.model.params, self.cfg, self.eval_batches, self.model.ops)
        return time.perf_counter() - t0

    def after_fit(self, fit: Fit, first: bool) -> None:
        """At the first fit, evaluate often enough to draw a curve: at least 6 times a run."""
        if first:
            self.eval_interval = self.budget.eval_interval = max(1, min(self.eval_interval, self.total_steps // 6))

    # --- evaluation and curves ---------------------------------------------------------------------

    def is_eval_step(self, step: int) -> bool:
        return step % self.eval_interval == 0

    def evaluate(self) -> dict:
        t0 = time.perf_counter()
        ev = evaluate(self.model.params, self.cfg, self.eval_batches, self.model.ops)
        self.last_eval, self.last_eval_step = ev, self.step
        engine.log(self, {"type": "eval", "step": self.step, "time": round(self.elapsed, 3), **ev})
        engine.say(self, f"eval step {self.step}: held-out target-token loss {ev['loss']:.3f}, accuracy "
                         f"{ev['acc']:.4f} (span tokens {ev['span_acc']:.4f}) [{ev['tokens']} tokens, "
                         f"{time.perf_counter() - t0:.1f}s]")
        return ev

    def curve_panels(self, records: list[dict]) -> list[Panel]:
        """Target-token loss and accuracy (the held-out accuracy on the dropped-text tokens too, with
        the always-the-most-frequent-token baseline the run logged at its start)."""
        base = [r for r in records if r.get("type") == "baseline"]
        lines = ((base[-1]["span_acc"], f"span tokens: always {base[-1]['token']!r}", ":"),) if base else ()
        return [Panel("target-token loss", (Series("loss"), Series("loss", "eval"))),
                Panel("target-token accuracy", (Series("acc"), Series("acc", "eval"),
                                                Series("span_acc", "eval", "held-out, span tokens")), lines)]

    # --- checkpoints (loop/checkpoints.py) ---------------------------------------------------------

    def is_checkpoint_step(self, step: int, stop_at: float) -> bool:
        return bool(self.args.checkpoint_interval) and step % self.args.checkpoint_interval == 0 and step < stop_at

    def optimizer_metadata(self) -> dict:
        return {"step": str(self.step)}

    def state_dict(self, status: str, ckpt: Path) -> dict:
        return {"step": self.step, "total_steps": self.total_steps, "status": status, "elapsed_seconds": self.elapsed,
                "batches": self.batches.state_dict(), "dropout_rng": self.rng.bit_generator.state,
                "eval_every": self.eval_interval,  # the key of older checkpoints, kept so that they resume
                "last_eval": self.last_eval, "last_eval_step": self.last_eval_step}

    def load_state_dict(self, state: dict, ckpt: Path) -> None:
        cfg, params, vocab = load_run(ckpt)
        if cfg != self.cfg:
            raise ValueError(f"{ckpt / CONFIG_NAME} describes {cfg}, but this run builds {self.cfg}")
        if vocab != list(self.tokenizer.ids_to_tokens):
            raise ValueError(f"{ckpt / VOCAB_NAME} is not the vocabulary this run reads; the run cannot continue")
        for k, p in self.model.params.items():
            np.copyto(p, params[k])
        self.batches.load_state_dict(state["batches"])
        self.total_steps, self.eval_interval = int(state["total_steps"]), int(state["eval_every"])
        if self.budget is not None:  # steps 0: fitted to the budget
            self.budget.eval_interval = self.eval_interval
        self.last_eval, self.last_eval_step = state["last_eval"], state["last_eval_step"]
