"""T5 as a run of minibert's one training loop (loop/engine.run): `T5Run`, what `python -m
minibert train-t5` (train/t5_command.py) runs, for span-corruption pretraining and text-to-text
SST-2 alike.

The loop gives T5 what every run has: the progress line (step, loss, target-token accuracy,
tokens/s, lr, ETA), metrics.jsonl, curves.png, checkpoints written as one unit by
minibert.loop.rundir (config.json, model.safetensors, vocab.txt, optimizer.safetensors,
trainer_state.json) every `--checkpoint-interval` steps, at the end and at Ctrl-C, a stop on a NaN/inf
loss, and a bit-exact resume: parameters, AdamW's moments, the batch source (`ShuffledBatches`:
the epoch's order and the Generator that draws the noise masks) and the fitted schedule are
restored, so a paused and resumed run ends with the same bits as one that never stopped
(tests/family/test_t5.py). One step is loop/step.training_step's: clipping at 1.0, AdamW in PyTorch's
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

import dataclasses
from pathlib import Path
from typing import Callable

import numpy as np

from minibert.family import t5_data as D
from minibert.family.t5 import T5Config, param_shapes, t5_forward, t5_loss_and_grads
from minibert.io.atomic import write_text_atomic
from minibert.io.jsonfile import Field, check_fields, read_json_object
from minibert.io.textio import shown_value
from minibert.checkpoint import CONFIG_NAME, VOCAB_NAME, WEIGHTS_NAME
from minibert.io.tensorfile import load_tensors, save_tensors_atomic
from minibert.io.progress import fmt_seconds
from minibert.loop import rundir
from minibert.loop.curves import Panel, Series
from minibert.loop.state import Curves, LoopSettings
from minibert.optim import AdamW
from minibert.text.tokenizer import load_vocab

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
        """-> (loss, grads keyed as params, {name: (sum, count)}: the target-token loss over 1, the
        correct target tokens over the target tokens). T5 here has no dropout: `train` and `rng`
        change nothing."""
        loss, metrics, grads = t5_loss_and_grads(self.params, self.cfg, batch, self.ops)
        n = metrics["tokens"]
        return float(loss), grads, {"loss": (float(loss), 1), "acc": (round(metrics["acc"] * n), n)}

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
    d = read_json_object(cfg_path)
    if d.get("model_type") != "minibert-t5":
        raise ValueError(f"{cfg_path} describes model_type {shown_value(d.get('model_type'))}, not a minibert-t5 "
                         f"model")
    cfg = T5Config.from_dict(d)
    tensors, _ = load_tensors(path / WEIGHTS_NAME)
    expected = param_shapes(cfg)
    for name, shape in expected.items():
        if name not in tensors or tensors[name].shape != shape:
            got = tensors[name].shape if name in tensors else "missing"
            raise ValueError(f"{path / WEIGHTS_NAME}: parameter {name!r} is {got}, expected {shape}")

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


# the run's own fields of trainer_state.json (the loop's: loop/checkpoints.STATE_FIELDS)
STATE_FIELDS = {"batches": Field(dict, "the batch source's state (an object)", required=True),
                "last_eval": Field((dict, type(None)), "null or the last evaluation (an object)")}


class T5Run:
    """T5 as a run of loop/engine.run: the model, AdamW, the batch source and the held-out
    evaluation; `settings` tells the loop the schedule (fitted to the budget with --steps 0).
    `describe`: what the opening line says of the data; `closing(run)` -> the lines a finished
    run ends with (its mode's: a decoded example, SST-2's dev accuracy)."""

    def __init__(self, args, cfg: T5Config, params, tokenizer, batches: ShuffledBatches, eval_batches: list[dict],
                 ops, describe: str = "", closing: Callable[["T5Run"], list[str]] | None = None, dir: Path | None = None):
        self.args, self.cfg, self.tokenizer = args, cfg, tokenizer
        self.batches, self.eval_batches = batches, eval_batches
        self.model = T5Model(cfg, params, ops)
        self.optimizer = AdamW(params, lr=args.lr, weight_decay=0.01, bias_correction=True)
        self.dir = Path(dir or args.out)  # where it writes (loop/launch.py may build it beside args.out)
        self.describe, self.closing = describe, closing
        self.last_eval: dict | None = None
        self.baseline: tuple[str, float] | None = None  # a fresh run's (answer token, its share); start() finds it
        self.settings = LoopSettings.of(
            args, dir=self.dir, vocab=tokenizer.ids_to_tokens, command="train-t5", home=Path(args.out),
            total_steps=args.steps or UNFITTED, schedule="hf", clip_norm=1.0,
            warmup_steps=min(args.warmup_steps, args.steps // 10) if args.steps else args.warmup_steps,  # <= a tenth of --steps
            dropout=False,  # T5 here has none
            fit_steps=not args.steps, min_evals=6,  # at least 6 evaluations, to draw a curve
            show_train={"loss": "loss", "acc": "acc"},
            show_eval={"loss": "target-token loss", "acc": "accuracy", "span_acc": "span tokens accuracy"},
            curves=Curves((Panel("target-token loss", (Series("loss"), Series("loss", "eval"))),
                           Panel("target-token accuracy", (Series("acc"), Series("acc", "eval"),
                                                           Series("span_acc", "eval", "held-out, span tokens")),
                                 span_baseline_line)), every=30.0))  # drawing costs about a second

    # --- its life (loop/launch.py) -----------------------------------------------------------------

    def start(self) -> None:
        """A fresh run: run.json, and the held-out baseline (always the most frequent answer token) as
        metrics.jsonl's first record, which curves.png draws."""
        rundir.start_run(self.dir, "train-t5", self.args.to_dict())
        token, share = span_baseline(self.eval_batches, self.cfg)
        self.baseline = (D.t5_tokens(self.tokenizer.ids_to_tokens, self.cfg.num_sentinels)[token], share)
        rundir.append_jsonl(self.dir / rundir.METRICS_FILE, {"type": "baseline", "token": self.baseline[0],
                                                            "span_acc": share})

    def moved(self, to: Path) -> None:
        """The launcher swapped the run into `to` (it was built beside the run it replaces)."""
        self.dir, self.settings = to, dataclasses.replace(self.settings, dir=to)

    def opening(self, loop, resumed: bool) -> list[str]:
        base = self.baseline
        lines = [] if base is None else [
            f"held-out baseline: always answering {base[0]!r} gets {base[1]:.4f} of the answer tokens (the target "
            f"without sentinels and EOS: the dropped text, or the SST-2 label word)"]
        return lines + [f"model: {self.model.num_parameters:,} parameters; {self.describe}"]

    def finish(self, loop) -> list[str]:
        """The last line of a run (and, finished, its mode's closing lines)."""
        if loop.status in rundir.FINISHED:
            how = "done" if loop.status == "done" else "time budget reached"
            return [f"{how}: {loop.step} steps in {fmt_seconds(loop.elapsed)}; saved: {self.dir}/ (config.json, "
                    f"model.safetensors, vocab.txt, metrics.jsonl, curves.png, checkpoints/)",
                    *(self.closing(self) if self.closing is not None else [])]
        if loop.status == "paused":
            return [f"paused at step {loop.step}/{loop.total_steps}: saved {self.dir}; continue with "
                    f"`{self.settings.resume_command}`"]
        return []

    def next_batch(self, step: int, short: bool = False) -> dict:
        return self.batches.next()

    def loss_grads_metrics(self, batch: dict, rng) -> tuple:
        """The model's loss, gradients and metrics, with the real input + target tokens."""
        loss, grads, metrics = self.model.loss_grads_metrics(batch)
        real = int(batch["attention_mask"].sum() + batch["decoder_attention_mask"].sum())
        return loss, grads, {**metrics, "tokens": (real, 1)}

    def evaluate(self, step: int) -> dict:
        self.last_eval = evaluate(self.model.params, self.cfg, self.eval_batches, self.model.ops)
        return self.last_eval

    def state_dict(self) -> dict:
        return {"batches": self.batches.state_dict(), "last_eval": self.last_eval}

    def load_state_dict(self, state: dict, ckpt: Path) -> None:
        cfg, params, vocab = load_run(ckpt)
        if cfg != self.cfg:
            raise ValueError(f"{ckpt / CONFIG_NAME} describes {cfg}, but this run builds {self.cfg}")
        if vocab != list(self.tokenizer.ids_to_tokens):
            raise ValueError(f"{ckpt / VOCAB_NAME} is not the vocabulary this run reads; the run cannot continue")
        for k, p in self.model.params.items():
            np.copyto(p, params[k])
        check_fields(state, STATE_FIELDS, str(ckpt / "trainer_state.json"))
        self.batches.load_state_dict(state["batches"])
        self.last_eval = state.get("last_eval")


def span_baseline_line(records: list[dict]) -> tuple:
    """The accuracy panel's dotted line: always the most frequent dropped-text token, from the
    "baseline" record the command logged at the run's start."""
    base = [r for r in records if r.get("type") == "baseline"]
    return ((base[-1]["span_acc"], f"span tokens: always {base[-1]['token']!r}", ":"),) if base else ()
