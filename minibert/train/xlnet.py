"""XLNet as a run of minibert's one training loop (loop/engine.run): `XLNetRun`, what `python -m
minibert train-xlnet` (train/xlnet_command.py) runs.

The loop gives XLNet what every run has: the progress line (step, loss and accuracy of the
predicted tokens, tokens/s, lr, ETA), metrics.jsonl, curves.png, checkpoints written as one unit
by minibert.loop.rundir (config.json, model.safetensors, vocab.txt, optimizer.safetensors,
trainer_state.json) every `checkpoint_interval` steps, at the end and at Ctrl-C, a stop on a
NaN/inf loss, and a bit-exact resume: parameters, AdamW's moments, the batch source's Generator
(it draws both the windows and their factorisation orders) and the fitted schedule are restored,
so a paused and resumed run ends with the same bits as one that never stopped (tests/family/test_xlnet.py).
One step is loop/step.training_step's: clipping at 1.0, AdamW in its bias-corrected form, the
"bert" schedule (linear warmup, capped at half the steps, then linear decay), no dropout.

What XLNet brings to the loop:
    model        XLNetModel: xlnet.XLNetForPermutationLM whose save_pretrained also writes vocab.txt
    batch source WindowBatches: `max_seq_length` consecutive ids of the token stream at random offsets,
                 each window with a fresh order (xlnet.sample_orders) and its targets, the last
                 1/K of the order (xlnet.partial_targets); one Generator draws all of it
    evaluator    evaluate: loss, perplexity and accuracy of the predicted tokens on fixed held-out
                 windows (orders drawn once from a fixed seed: every evaluation scores the same tokens)
    budget       with `steps` = 0 the step count is fitted to the `minutes` budget (loop/budget.py: from
                 the loop's own first steps, then twice more), so the decay reaches its end; with
                 `steps` > 0, `minutes` > 0 is a limit only
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from minibert.data.corpus import read_documents
from minibert.family.xlnet import XLNetForPermutationLM, partial_targets, sample_orders
from minibert import checkpoint
from minibert.io import atomic
from minibert.io.jsonfile import Field, check_fields
from minibert.io.progress import fmt_seconds
from minibert.loop import rundir
from minibert.loop.curves import Panel, Series
from minibert.loop.state import Curves, LoopSettings
from minibert.optim import AdamW
from minibert.text.tokenizer import BertTokenizer, load_vocab

# ---------------------------------------------------------------------------------------------
# data

def token_stream(path: Path, tok: BertTokenizer, max_lines: int = 0) -> np.ndarray:
    """The documents of a corpus file as one stream of ids, each document ended by [SEP]. -> (N,)"""
    docs = read_documents([path])
    ids: list[int] = []
    lines = 0
    for doc in docs:
        for sentence in doc:
            ids.extend(tok.convert_tokens_to_ids(tok.tokenize(sentence)))
            lines += 1
        ids.append(tok.sep_id)
        if max_lines and lines >= max_lines:
            break
    return np.asarray(ids, dtype=np.int64)


def make_batch(windows: np.ndarray, pred_k: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """(B, T) ids, all real -> an XLNet batch with a fresh order per sequence."""
    mask = np.ones(windows.shape, dtype=np.int64)  # (B, T)
    rank = sample_orders(mask, rng)  # (B, T)
    return {"input_ids": windows, "input_mask": mask, "perm_rank": rank,
            "target_mask": partial_targets(rank, mask, pred_k)}


def train_batch(stream: np.ndarray, cfg, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """`cfg.batch_size` windows of `cfg.max_seq_length` ids at random offsets, with their orders."""
    starts = rng.integers(0, stream.size - cfg.max_seq_length + 1, cfg.batch_size)  # (B,)
    windows = stream[starts[:, None] + np.arange(cfg.max_seq_length)]  # (B, T)
    return make_batch(windows, cfg.pred_k, rng)


def heldout_batches(stream: np.ndarray, cfg, seed: int = 12345) -> list[dict[str, np.ndarray]]:
    """Consecutive windows of the held-out stream with orders from a fixed seed."""
    n = min(stream.size // cfg.max_seq_length, cfg.eval_examples)
    if n == 0:
        raise ValueError(f"the held-out text has {stream.size} tokens, fewer than one sequence of {cfg.max_seq_length}")
    windows = stream[: n * cfg.max_seq_length].reshape(n, cfg.max_seq_length)  # (n, T)
    rng = np.random.default_rng(seed)
    return [make_batch(windows[i:i + 64], cfg.pred_k, rng) for i in range(0, n, 64)]


class WindowBatches:
    """The batch source: train_batch on the token stream, every draw (offsets and orders) from one
    Generator. Its checkpointed state is that Generator's state and the stream's length (a check
    that the data did not change)."""

    def __init__(self, stream: np.ndarray, cfg, rng: np.random.Generator):
        self.stream, self.cfg, self.rng = stream, cfg, rng

    def next(self) -> dict[str, np.ndarray]:
        return train_batch(self.stream, self.cfg, self.rng)

    def state_dict(self) -> dict:
        return {"tokens": int(self.stream.size), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        if int(state["tokens"]) != self.stream.size:
            raise ValueError(f"the run was saved with a training stream of {state['tokens']} tokens but the data "
                             f"now gives {self.stream.size}: the training data changed, so the run cannot continue "
                             f"where it stopped")
        self.rng.bit_generator.state = state["rng"]


def evaluate(model: XLNetForPermutationLM, batches) -> dict[str, float]:
    """Held-out mean cross-entropy of the predicted tokens, its perplexity, and accuracy."""
    total = correct = count = 0.0
    for batch in batches:
        _, _, m = model.loss_grads_metrics(batch, compute_grads=False)
        total += m.loss * m.count
        correct += m.correct
        count += m.count
    loss = total / max(count, 1)
    return {"loss": loss, "perplexity": math.exp(min(loss, 700.0)), "acc": correct / max(count, 1),
            "predicted": int(count), "sequences": int(sum(b["input_ids"].shape[0] for b in batches))}


# ---------------------------------------------------------------------------------------------
# the model as the loop sees it, and the run

class XLNetModel(XLNetForPermutationLM):
    """The permutation LM with the save_pretrained the training loop calls: config.json and
    model.safetensors (the base class's) and vocab.txt."""

    def save_pretrained(self, directory, vocab: list[str] | None = None) -> Path:
        d = super().save_pretrained(directory)
        if vocab is not None:
            atomic.write_text_atomic(d / checkpoint.VOCAB_NAME, "".join(t + "\n" for t in vocab))
        return d


# the run's own fields of trainer_state.json (the loop's: loop/checkpoints.STATE_FIELDS)
STATE_FIELDS = {"batches": Field(dict, "the batch source's state (an object)", required=True),
                "last_eval": Field((dict, type(None)), "null or the last evaluation (an object with sequences, "
                                                       "predicted, loss, perplexity, acc, step)",
                                   lambda v: v is None or {"sequences", "predicted", "loss", "perplexity", "acc",
                                                           "step"} <= set(v))}


class XLNetRun:
    """XLNet as a run of loop/engine.run. `cfg` is the command's settings (an
    xlnet_command.XLNetTrainConfig: sizes, recipe, intervals, budget); `batches` the WindowBatches
    of the training stream; `heldout` the fixed evaluation batches; `record` what run.json keeps
    beside the settings (the preset, the data files)."""

    def __init__(self, cfg, out: Path, tokenizer: BertTokenizer, batches: WindowBatches, heldout: list[dict],
                 record: dict | None = None, fast: bool = False):
        self.cfg, self.dir, self.tokenizer = cfg, Path(out), tokenizer
        self.batches, self.heldout = batches, heldout
        self.record, self.fast = record or {}, fast
        self.model = XLNetModel(cfg.model_config(len(tokenizer)), seed=cfg.seed)
        self.optimizer = AdamW(self.model.params, lr=cfg.lr, weight_decay=cfg.weight_decay, bias_correction=True)
        self.last_eval: dict | None = None
        self.settings = LoopSettings.of(
            cfg, dir=self.dir, vocab=tokenizer.ids_to_tokens, command="train-xlnet", home=Path(cfg.out or out),
            total_steps=cfg.steps or 1000,  # 1000 until the budget's first fit (after 10 steps)
            warmup_steps=self.warmup(), schedule="bert", clip_norm=1.0,
            dropout=False,  # XLNet here has none
            fit_steps=not cfg.steps,  # with a fixed step count (steps > 0), minutes is a limit only
            show_train={"loss": "loss", "acc": "acc"},
            show_eval={"loss": "loss", "perplexity": "perplexity", "acc": "accuracy"},
            curves=Curves((Panel("loss of the predicted tokens", (Series("loss"), Series("loss", "eval"))),
                           Panel("held-out perplexity", (Series("perplexity", "eval"),), log=True),
                           Panel("learning rate", (Series("lr", label=""),))), every=30.0))

    # --- its life (loop/launch.py) -----------------------------------------------------------------

    def start(self) -> None:
        """A fresh run: run.json with the settings, the preset and the data files."""
        rundir.start_run(self.dir, "train-xlnet", self.cfg.to_dict(), **self.record)

    def moved(self, to: Path) -> None:
        """The launcher swapped the run into `to` (it was built beside the run it replaces)."""
        self.dir, self.settings = to, dataclasses.replace(self.settings, dir=to)

    def opening(self, loop, resumed: bool) -> list[str]:
        cfg, model = self.cfg, self.model
        budget = f"{cfg.steps} steps" if cfg.steps else f"budget {cfg.minutes:g} min"
        return [f"model: {model.num_parameters:,} parameters ({cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, "
                f"{cfg.num_attention_heads} heads, vocab {model.config.vocab_size}); {self.batches.stream.size:,} "
                f"training tokens, windows of {cfg.max_seq_length}, batch {cfg.batch_size}, predict the last "
                f"1/{cfg.pred_k} of each order; lr {cfg.lr:g}; {budget}"]

    def finish(self, loop) -> list[str]:
        """The last lines of a run: the held-out numbers, where it is saved (or how to continue it)."""
        e, status = self.last_eval, loop.status
        if status in rundir.FINISHED:
            lines = [] if e is None else [
                f"\nheld-out ({e['sequences']} sequences, {e['predicted']} predicted tokens) after {e['step']} "
                f"steps, {fmt_seconds(loop.elapsed)}: loss {e['loss']:.3f}, perplexity {e['perplexity']:.1f}, "
                f"accuracy {e['acc']:.2%}"]
            lines.append(f"saved: {self.dir}/ (config.json, model.safetensors, vocab.txt, metrics.jsonl, curves.png, "
                         f"{rundir.CHECKPOINTS}/)")
            if self.fast:
                lines.append("--fast is a plumbing check: the model learns nothing in that time.")
            return lines
        if status == "paused":
            return [f"paused at step {loop.step}/{loop.total_steps}: saved {self.dir}; continue with "
                    f"`{self.settings.resume_command}`"]
        return []

    def warmup(self) -> int:
        """At most half of a fixed step count, so that the lr reaches its peak (a budget's
        schedule keeps warmup_steps: a refit must not move the warmup under the running lr)."""
        return min(self.cfg.warmup_steps, self.cfg.steps // 2) if self.cfg.steps else self.cfg.warmup_steps

    def next_batch(self, step: int, short: bool = False) -> dict:
        return self.batches.next()

    def loss_grads_metrics(self, batch: dict, rng) -> tuple:
        """The permutation LM's loss, gradients and metrics (loss; accuracy of the predicted
        tokens), with the input tokens."""
        loss, grads, metrics = self.model.loss_grads_metrics(batch)
        return loss, grads, {**metrics.sums(), "tokens": (int(batch["input_ids"].size), 1)}

    def evaluate(self, step: int) -> dict:
        e = evaluate(self.model, self.heldout)
        self.last_eval = {"step": step, **e}
        return e

    def state_dict(self) -> dict:
        return {"created_by": "train-xlnet", "batches": self.batches.state_dict(), "last_eval": self.last_eval}

    def load_state_dict(self, state: dict, ckpt: Path) -> None:
        saved = XLNetForPermutationLM.from_pretrained(ckpt)
        if saved.config != self.model.config:
            raise ValueError(f"{ckpt / checkpoint.CONFIG_NAME} describes {saved.config}, but this run builds "
                             f"{self.model.config}")
        if load_vocab(ckpt / checkpoint.VOCAB_NAME) != list(self.tokenizer.ids_to_tokens):
            raise ValueError(f"{ckpt / checkpoint.VOCAB_NAME} is not the vocabulary this run reads; the run cannot "
                             f"continue")
        for k, p in self.model.params.items():
            np.copyto(p, saved.params[k])
        check_fields(state, STATE_FIELDS, str(ckpt / "trainer_state.json"))
        self.batches.load_state_dict(state["batches"])
        self.last_eval = state.get("last_eval")
