"""The Trainer (model, optimizer, data iterators, dropout RNG, step counter, run directory), its
loop with logging, evaluations, checkpoints and Ctrl-C, and `train()`, which starts or resumes a
run with it.

Output directory runs/<name>/ (minibert/run_dir.py has the details):
    config.json, model.safetensors, vocab.txt   Hugging Face format (loads in transformers), the
                                                newest checkpoint's model
    run.json                                    the full TrainConfig of this run (its identity)
    metrics.jsonl                               one JSON record per log interval and per evaluation
    curves.png                                  loss, MLM acc, NSP acc, lr vs step and vs wall time
    checkpoints/step-NNNNNN/                    the newest checkpoint: the model files, plus
        optimizer.safetensors                   AdamW moments m., v. and t
        trainer_state.json                      step, total steps, status, data-iterator state, RNG
                                                state, sha256 of the two tensor files
Nothing is pickled. A checkpoint is written into a hidden directory and made the newest by one
rename, so a crash, a second Ctrl-C or a full disk at any moment leaves the previous checkpoint
complete; settings are all checked before anything is written.

Resume is bit-exact: parameters, optimizer moments, the iterator position (epoch, offset; dynamic
masks are seeded by position) and the dropout Generator state are all restored, and the learning
rate is a function of the step, so an interrupted and resumed run ends with the same bits as one
that never stopped (tests/test_train.py checks this with np.array_equal).
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from minibert import run_dir as run_dir_mod
from minibert.bert import BertForPreTraining
from minibert.family.albert import AlbertForPreTraining
from minibert.model import trained_params
from minibert.pretraining_data import DEFAULT_FLAGS
from minibert.optim import AdamW
from minibert.train import calibrate
from minibert.train.config import TrainConfig
from minibert.train.curves import baselines, plot_curves
from minibert.train.data import DataDirs, _sha256_file, load_heldout, prepare_data
from minibert.train.evaluation import EvalResult, _fmt_perplexity, evaluate
from minibert.train.runs import CURVES_FILE, METRICS_FILE, OPTIM_FILE, RUN_FILE, STATE_FILE, check_run_dir, run_state
from minibert.train.step import (TrainingAborted, TrainingDiverged, install_sigint, restore_sigint, shuffle_mlm_labels,
                                  training_step)


MODEL_CLASSES = {"bert": BertForPreTraining, "albert": AlbertForPreTraining}  # TrainConfig.model_type


def _rng_state(rng: np.random.Generator) -> dict:
    return rng.bit_generator.state  # plain ints and strings: JSON-safe


def _set_rng_state(rng: np.random.Generator, state: dict) -> None:
    rng.bit_generator.state = state


class Trainer:
    """Owns model, optimizer, data iterator, RNG, step counter and the run directory."""

    def __init__(self, cfg: TrainConfig, data: DataDirs | None = None, verbose: bool = True,
                 created_by: str = "train"):
        from minibert.pretraining_data import BatchIterator
        from minibert.tokenizer import BertTokenizer

        cfg.validate()
        self.cfg, self.verbose, self.created_by = cfg, verbose, created_by
        self.dir = cfg.run_dir
        self.tokenizer = BertTokenizer(cfg.vocab)
        self.tokenizer.check_special_tokens(purpose="training")
        # model and optimizer first: their own checks (AdamW's betas, ...) fail in milliseconds,
        # before data generation spends seconds and writes its cache
        self.model = MODEL_CLASSES[cfg.model_type](cfg.model_config(len(self.tokenizer)), seed=cfg.seed)
        # the parameters the objective trains (all, unless it has no NSP: then not pool.*, nsp.*)
        trained = {k: self.model.params[k] for k in trained_params(self.model.params, cfg.objective)}
        self.optimizer = AdamW(trained, lr=cfg.lr, beta1=cfg.beta1, beta2=cfg.beta2,
                               weight_decay=cfg.weight_decay, bias_correction=cfg.bias_correction)
        self.data = data if data is not None else prepare_data(cfg, verbose)
        self.iterator = BatchIterator(str(self.data.train), cfg.batch_size, cfg.seed, masking=cfg.masking,
                                      vocab=cfg.vocab, mask_shares=cfg.mask_shares)
        self.short_iterator = None  # the short phase's batches (sequence-length warm-up)
        if cfg.short_seq_length:
            if self.data.short_train is None:
                raise ValueError(f"short_seq_length={cfg.short_seq_length} but no short-sequence data was prepared")
            self.short_iterator = BatchIterator(str(self.data.short_train), cfg.short_phase()[1], cfg.seed,
                                                masking=cfg.masking, vocab=cfg.vocab, mask_shares=cfg.mask_shares)
        self.heldout = load_heldout(self.data.heldout, cfg.vocab, cfg.eval_examples) if self.data.heldout else None
        self.rng = np.random.default_rng([cfg.seed, 1])  # dropout
        self.step = 0
        self.total_steps = cfg.steps
        self.elapsed = 0.0  # seconds spent in this run's loop, summed over resumes
        self.last_checkpoint: int | None = None
        self.last_eval: EvalResult | None = None
        self._stop_requested = False
        self._calibration: dict | None = None  # set by calibrate_steps, used by _recalibrate
        self._short_steps: int | None = None  # fixed once a recalibration has run (then saved)
        self._eval_seconds = 0.0  # spent in evaluations by this process

    @property
    def short_steps(self) -> int:
        """Steps of the short phase: the first short_seq_fraction of the schedule (fixed once the
        schedule has been refitted, so a later refit cannot move the switch)."""
        if self.short_iterator is None:
            return 0
        if self._short_steps is not None:
            return self._short_steps
        return int(round(self.cfg.short_seq_fraction * self.total_steps))

    def iterator_at(self, step: int):
        return self.short_iterator if step < self.short_steps else self.iterator

    # --- checkpoints ----------------------------------------------------------------------------

    def save_checkpoint(self, status: str = "running") -> Path:
        """Model (HF format), optimizer and trainer state of this step, as one unit: written into a
        new checkpoint directory that a single rename makes the newest (minibert/run_dir.py).
        The state records the hashes of the two tensor files and how the run stood (`status`)."""
        from minibert.checkpoint import save_tensors_atomic

        def write_files(ckpt: Path) -> None:
            self.model.save_pretrained(ckpt, vocab=self.tokenizer.ids_to_tokens)  # BERT's or ALBERT's names
            save_tensors_atomic(self.optimizer.state_dict(), ckpt / OPTIM_FILE, metadata={"step": str(self.step)})
            state = {"step": self.step, "total_steps": self.total_steps, "status": status,
                     "elapsed_seconds": self.elapsed,
                     "iterator": self.iterator.state_dict(), "dropout_rng": _rng_state(self.rng),
                     "short_iterator": self.short_iterator.state_dict() if self.short_iterator else None,
                     "short_steps": self.short_steps,
                     "sha256": {f: _sha256_file(ckpt / f) for f in ("model.safetensors", OPTIM_FILE)},
                     "last_eval": self.last_eval._asdict() if self.last_eval else None,
                     "last_eval_step": self.last_eval_step}
            run_dir_mod.write_json(ckpt / STATE_FILE, state)

        ckpt = run_dir_mod.write_checkpoint(self.dir, self.step, write_files)
        self.last_checkpoint = self.step
        return ckpt

    def load_checkpoint(self) -> None:
        """Restore everything from the run's newest complete checkpoint (bit-exact resume)."""
        from minibert.checkpoint import load_tensors

        ckpt = run_dir_mod.latest_checkpoint(self.dir)
        if ckpt is None:
            raise ValueError(f"{self.dir} has no checkpoint to resume from (the run stopped before its first "
                             f"save, every {self.cfg.checkpoint_interval} steps); start it again with --overwrite")
        state = run_dir_mod.read_json(ckpt / STATE_FILE)
        for f, sha in state["sha256"].items():
            if not (ckpt / f).is_file() or _sha256_file(ckpt / f) != sha:
                raise ValueError(f"checkpoint {ckpt} is inconsistent: {f} does not match {STATE_FILE} "
                                 f"(the file was changed after the save)")
        saved = type(self.model).from_pretrained(ckpt)
        if saved.config.vocab_size != len(self.tokenizer):
            raise ValueError(f"vocab/checkpoint mismatch: {ckpt} has vocab_size "
                             f"{saved.config.vocab_size}, {self.cfg.vocab} has {len(self.tokenizer)} tokens")
        for k, p in self.model.params.items():
            if k not in saved.params or saved.params[k].shape != p.shape:
                raise ValueError(f"checkpoint {ckpt} parameter {k!r} does not match the configured model")
            np.copyto(p, saved.params[k])
        optim, _ = load_tensors(ckpt / OPTIM_FILE)
        optim["t"] = np.asarray(optim["t"]).reshape(())  # stored as a 1-element tensor
        self.optimizer.load_state_dict(optim)
        self.iterator.load_state_dict(state["iterator"])
        if self.short_iterator is not None:
            self.short_iterator.load_state_dict(state["short_iterator"])
            self._short_steps = int(state["short_steps"])
        _set_rng_state(self.rng, state["dropout_rng"])
        self.step, self.total_steps = int(state["step"]), int(state["total_steps"])
        self.elapsed = float(state["elapsed_seconds"])
        if state.get("last_eval"):
            self.last_eval = EvalResult(**state["last_eval"])
            self.last_eval_step = state.get("last_eval_step")
        self.last_checkpoint = self.step
        self._truncate_metrics(self.step)

    def _truncate_metrics(self, step: int) -> None:
        """Drop metrics written after the checkpoint (they belong to the lost part of the run),
        and a last line cut short by a crash mid-write."""
        path = self.dir / METRICS_FILE
        if run_dir_mod.truncate_jsonl(path, step):
            self.say(f"note: {path}: dropped its last line, cut short by a crash mid-write")

    def start_fresh(self) -> None:
        """Clear what an earlier run left in the directory (after check_run_dir said it may go) and
        write run.json."""
        self.dir.mkdir(parents=True, exist_ok=True)
        for f in (METRICS_FILE, STATE_FILE, OPTIM_FILE, CURVES_FILE, run_dir_mod.CHECKPOINTS,
                  *run_dir_mod.PUBLISHED):
            run_dir_mod._remove(self.dir / f)
        run_dir_mod.write_json(self.dir / RUN_FILE, {"created_by": self.created_by, "config": self.cfg.to_dict(),
                                                     "data": {"train": str(self.data.train),
                                                              "heldout": str(self.data.heldout)}})

    # --- logging ---------------------------------------------------------------------------------

    def log(self, record: dict) -> None:
        run_dir_mod.append_jsonl(self.dir / METRICS_FILE, record)

    def say(self, *args) -> None:
        if self.verbose:
            print(*args, flush=True)

    # --- one step --------------------------------------------------------------------------------

    def train_step(self) -> tuple[Any, float, float, int]:
        """One optimizer step. -> (metrics, grad norm before clipping, lr, real tokens)."""
        cfg = self.cfg
        if self.short_steps and self.step == self.short_steps:
            self.log({"type": "phase", "step": self.step, "time": round(self.elapsed, 3),
                      "from_seq_length": cfg.short_seq_length, "max_seq_length": cfg.max_seq_length})
            self.say(f"step {self.step}: short phase done, sequence length {cfg.short_seq_length} -> "
                     f"{cfg.max_seq_length}, batch {cfg.short_phase()[1]} -> {cfg.batch_size}")
        iterator = self.iterator_at(self.step)
        batches = [iterator.next_batch() for _ in range(cfg.accumulation_steps)]  # the step's micro-batches
        if cfg.control_shuffle_labels:
            shuffle_rng = np.random.default_rng([cfg.seed, self.step, 7])
            batches = [shuffle_mlm_labels(b, shuffle_rng) for b in batches]
        try:
            r = training_step(self.model, self.optimizer, batches, self.step, lr=cfg.lr,
                              warmup_steps=cfg.warmup_steps, total_steps=self.total_steps,
                              schedule=cfg.schedule, clip_norm=cfg.clip_norm,
                              rng=self.rng if self._dropout_on() else None, objective=cfg.objective)
        except TrainingDiverged as e:
            where = (f"{self.dir} (step {self.last_checkpoint})" if self.last_checkpoint is not None
                     else "none (no checkpoint was written yet)")
            raise TrainingDiverged(f"{e}; the run stopped without saving. Last good checkpoint: {where}. "
                                   f"Try a lower lr (now {cfg.lr}) or more warmup (now {cfg.warmup_steps}).") from None
        self.step += 1
        tokens = sum(int(b["input_mask"].sum()) for b in batches)  # the real tokens of every micro-batch
        return r.metrics, r.grad_norm, r.lr, tokens

    def _dropout_on(self) -> bool:
        cfg = self.cfg
        return (cfg.model.hidden_dropout_prob > 0 or cfg.model.attention_probs_dropout_prob > 0
                or (cfg.model_type == "albert" and cfg.classifier_dropout_prob > 0))

    # --- speed calibration (the work is done in minibert/train/calibrate.py) -----------------------

    RECALIBRATE_FIRST, RECALIBRATE_WINDOW = calibrate.RECALIBRATE_FIRST, calibrate.RECALIBRATE_WINDOW
    RECALIBRATE_LONG_WINDOW, RECALIBRATE_MARGIN = calibrate.RECALIBRATE_LONG_WINDOW, calibrate.RECALIBRATE_MARGIN

    def calibrate_steps(self, budget_seconds: float, passes: int = 16) -> int:
        """The schedule length that fits `budget_seconds`, from timed passes (calibrate.calibrate_steps)."""
        return calibrate.calibrate_steps(self, budget_seconds, passes)

    def _fit_steps(self, seconds: float, scale: float, overhead: float = 0.0) -> tuple[int, float, int]:
        return calibrate.fit_steps(self, seconds, scale, overhead)

    def _recalibrate(self, step_seconds: float) -> None:
        """After each step of a fresh auto_steps run: refit the schedule, twice (calibrate.recalibrate)."""
        calibrate.recalibrate(self, step_seconds)

    def _time_step(self, data_dir: Path, batch_size: int, passes: int) -> float:
        return calibrate.time_step(self, data_dir, batch_size, passes)

    # --- the loop --------------------------------------------------------------------------------

    def run(self, max_steps_this_run: int | None = None) -> str:
        """Train until total_steps, the time budget, `max_steps_this_run` more steps or Ctrl-C.

        -> "done" | "budget" (time ran out; evaluated and saved) | "paused" (max_steps_this_run;
        saved) | "interrupted" (Ctrl-C; saved). Raises TrainingDiverged on NaN/inf, and
        TrainingAborted on a second Ctrl-C (at any moment, a save included: the newest complete
        checkpoint stays as it was). Ctrl-C is caught until the final save is written.
        """
        self._stop_requested = False
        previous = self._install_sigint()
        try:
            status = self._loop(max_steps_this_run)
            if status in ("done", "budget"):
                if self.last_eval is None or self.last_eval_step != self.step:
                    self.run_eval()
            self.save_checkpoint(status)
            self.write_curves()
        except KeyboardInterrupt:
            state = run_state(self.dir)
            where = (f"the last complete checkpoint is step {state['step']} in {self.dir}; continue with "
                     f"`python -m minibert train --resume {self.dir}`" if state is not None
                     else "no checkpoint was written yet")
            raise TrainingAborted(f"aborted at step {self.step} by a second Ctrl-C without saving; {where}") from None
        finally:
            self._restore_sigint(previous)
        if status == "interrupted":
            self.say(f"interrupted at step {self.step}: saved {self.dir}; continue with "
                     f"`python -m minibert train --resume {self.dir}`")
        return status

    def _loop(self, max_steps_this_run: int | None) -> str:
        """The training steps with their logging, evaluations and checkpoints -> how they ended."""
        cfg = self.cfg
        budget = cfg.minutes * 60.0 if cfg.minutes > 0 else math.inf
        pause_at = math.inf if max_steps_this_run is None else self.step + max_steps_this_run
        stop_at = min(self.total_steps, pause_at)
        status = "done"
        window: list[tuple] = []
        t_run = time.perf_counter()
        t_window = t_run
        elapsed0 = self.elapsed
        while self.step < stop_at:
            if self._stop_requested:
                status = "interrupted"
                break
            if elapsed0 + (time.perf_counter() - t_run) >= budget:
                status = "budget"
                break
            t_step = time.perf_counter()
            window.append(self.train_step())
            self.elapsed = elapsed0 + time.perf_counter() - t_run
            if self._calibration is not None:
                self._recalibrate(time.perf_counter() - t_step)
                stop_at = min(self.total_steps, pause_at)
            if self.step % cfg.log_interval == 0 or self.step == stop_at:
                now = time.perf_counter()
                self._log_train(window, now - t_window)
                window, t_window = [], now
            if self.step % cfg.eval_interval == 0 and self.step < self.total_steps:
                self.run_eval()
                t_window = time.perf_counter()  # tokens/s counts training time only
            if self.step % cfg.checkpoint_interval == 0 and self.step < stop_at:
                self.save_checkpoint()
                t_window = time.perf_counter()
        else:
            status = "done" if self.step >= self.total_steps else "paused"
        if window:  # steps since the last log line (the budget or Ctrl-C stopped mid-interval)
            self._log_train(window, time.perf_counter() - t_window)
        return status

    last_eval_step: int | None = None

    def run_eval(self) -> EvalResult | None:
        if self.heldout is None:
            return None
        t0 = time.perf_counter()
        r = evaluate(self.model, self.heldout, objective=self.cfg.objective)
        self._eval_seconds += time.perf_counter() - t0
        self.last_eval, self.last_eval_step = r, self.step
        self.log({"type": "eval", "step": self.step, "time": round(self.elapsed, 3), **r._asdict()})
        lm = "next-token (LTR)" if self.cfg.objective == "ltr" else "MLM"  # what the mlm_* numbers measure
        task, first, second = self.cfg.pair_task()
        nsp = ("" if self.cfg.objective == "ltr" or task is None else
               f", {task} acc {r.nsp_acc:.4f} ({first} {r.nsp_acc_isnext:.3f}, {second} {r.nsp_acc_random:.3f})"
               + (f" of the untrained {task} head" if self.cfg.objective == "mlm" else ""))
        self.say(f"eval step {self.step}: held-out {lm} acc {r.mlm_acc:.4f}, {lm} loss {r.mlm_loss:.3f} "
                 f"(perplexity {_fmt_perplexity(r.perplexity)}){nsp} [{r.examples} examples, "
                 f"{time.perf_counter() - t0:.1f}s]")
        if time.perf_counter() - self._last_plot > 60:  # plotting costs seconds: at most once a minute
            self.write_curves()
        return r

    def _log_train(self, window: list[tuple], seconds: float) -> None:
        ms = [w[0] for w in window]
        mlm_count = sum(m.mlm_count for m in ms)
        rec = {"type": "train", "step": self.step, "time": round(self.elapsed, 3),
               "loss": float(np.mean([m.loss for m in ms])),
               "mlm_loss": float(np.mean([m.mlm_loss for m in ms])),
               "nsp_loss": float(np.mean([m.nsp_loss for m in ms])),
               "mlm_acc": sum(m.mlm_correct for m in ms) / max(mlm_count, 1),
               "nsp_acc": sum(m.nsp_correct for m in ms) / max(sum(m.nsp_count for m in ms), 1),
               "lr": window[-1][2], "grad_norm": float(np.mean([w[1] for w in window])),
               "tokens_per_s": sum(w[3] for w in window) / max(seconds, 1e-9)}
        self.log(rec)
        per_step = self.elapsed / max(self.step, 1)
        eta = (self.total_steps - self.step) * per_step
        if self.cfg.minutes > 0:
            eta = min(eta, max(0.0, self.cfg.minutes * 60 - self.elapsed))
        lm = "LTR acc" if self.cfg.objective == "ltr" else "MLM acc"  # what mlm_acc measures
        nsp = f"| {self.cfg.pair_task()[0]} acc {rec['nsp_acc']:.2f} " if self.cfg.objective == "mlm_nsp" else ""
        self.say(f"step {self.step}/{self.total_steps} | loss {rec['loss']:.3f} | {lm} {rec['mlm_acc']:.3f} "
                 f"{nsp}| {rec['tokens_per_s']:,.0f} tok/s | lr {rec['lr']:.2e} "
                 f"| ETA {_fmt_seconds(eta)}")

    # --- Ctrl-C: finish the current step, save, exit 130 -----------------------------------------

    def _install_sigint(self):
        return install_sigint(self, "_stop_requested")

    def _restore_sigint(self, previous) -> None:
        restore_sigint(previous)

    # --- curves -----------------------------------------------------------------------------------

    _last_plot = -math.inf

    def write_curves(self) -> Path | None:
        """Redraw curves.png. A plot that cannot be written (a full disk) is a warning, not the end
        of the run: the checkpoints are what must not be lost."""
        self._last_plot = time.perf_counter()
        path = self.dir / METRICS_FILE
        if not self.cfg.curves or not path.exists():
            return None
        try:
            base = baselines(self.heldout, self.tokenizer.ids_to_tokens) if self.heldout is not None else None
            return plot_curves(path, self.dir / CURVES_FILE, base)
        except OSError as e:
            print(f"warning: could not draw {self.dir / CURVES_FILE}: {e}", file=sys.stderr)
            return None


def _fmt_seconds(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def train(cfg: TrainConfig, resume: bool = False, overwrite: bool = False, verbose: bool = True,
          max_steps_this_run: int | None = None, created_by: str = "train",
          replaceable_by: str | None = None) -> Trainer:
    """Run (or resume) a training run; returns the Trainer (its .status says how it ended)."""
    cfg.validate()
    if not resume:
        check_run_dir(cfg, overwrite, replaceable_by)  # before writing anything
    trainer = Trainer(cfg, verbose=verbose, created_by=created_by)
    for p in run_dir_mod.clean_interrupted_saves(cfg.run_dir):
        trainer.say(f"removed {p}, left by a save that was cut off")
    if resume:
        trainer.load_checkpoint()
        trainer.say(f"resumed {trainer.dir} at step {trainer.step}/{trainer.total_steps}")
    else:
        if cfg.auto_steps:
            trainer.total_steps = trainer.calibrate_steps(cfg.minutes * 60.0)
        trainer.start_fresh()
        m = trainer.model
        albert = (f", ALBERT: embedding {m.config.embedding_size}, one block shared by the layers"
                  if cfg.model_type == "albert" else "")
        trainer.say(f"model: {m.num_parameters:,} parameters ({m.config.num_hidden_layers} layers, hidden "
                    f"{m.config.hidden_size}, {m.config.num_attention_heads} heads, vocab {m.config.vocab_size}"
                    f"{albert}); {trainer.iterator.num_examples:,} training sequences of {cfg.max_seq_length} "
                    f"tokens" + ("" if cfg.packing == "segment_pair" else f" ({cfg.packing} packing)")
                    + (", SOP pairs" if cfg.sentence_order else "") + f", {cfg.masking} masking"
                    + ("" if cfg.mask_shares == DEFAULT_FLAGS["mask_shares"] else
                       f" (MASK/SAME/RND {'/'.join(f'{x:g}' for x in cfg.mask_shares)})")
                    + ("" if cfg.objective == "mlm_nsp" else f", objective {cfg.objective}")
                    + f", batch {cfg.batch_size}"
                    + ("" if cfg.accumulation_steps == 1 else
                       f" x {cfg.accumulation_steps} micro-batches ({cfg.batch_size * cfg.accumulation_steps} "
                       f"sequences per step)")
                    + f", lr {cfg.lr:g}, warmup "
                    f"{cfg.warmup_steps}, {trainer.total_steps} steps"
                    + (f", budget {cfg.minutes:g} min" if cfg.minutes else ""))
        if trainer.short_iterator is not None:
            T_short, B_short, _ = cfg.short_phase()
            trainer.say(f"sequence-length warm-up: steps 1-{trainer.short_steps} on "
                        f"{trainer.short_iterator.num_examples:,} sequences of {T_short} tokens, batch {B_short}")
    trainer.status = trainer.run(max_steps_this_run)
    return trainer
