"""The pretraining Trainer (model, optimizer, data iterators, dropout RNG, step counter, run
directory) on the loop of loop/engine.py (logging, evaluations, checkpoints, Ctrl-C), and
`train()`, which starts or resumes a run with it.

Output directory runs/<name>/ (minibert/loop/rundir.py has the details):
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

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from minibert.bert import BertForPreTraining
from minibert.family.albert import AlbertForPreTraining
from minibert.loop import rundir as run_dir_mod
from minibert.loop.engine import TrainingLoop, _fmt_seconds  # noqa: F401  (_fmt_seconds: re-exported)
from minibert.loop.step import shuffle_mlm_labels
from minibert.model import trained_params
from minibert.optim import AdamW
from minibert.pretraining_data import DEFAULT_FLAGS
from minibert.train import calibrate
from minibert.train.config import TrainConfig
from minibert.train.curves import baselines, plot_curves
from minibert.train.data import DataDirs, _sha256_file, load_heldout, prepare_data
from minibert.train.evaluation import EvalResult, _fmt_perplexity, evaluate
from minibert.train.runs import CURVES_FILE, METRICS_FILE, OPTIM_FILE, RUN_FILE, STATE_FILE, check_run_dir, run_state

MODEL_CLASSES = {"bert": BertForPreTraining, "albert": AlbertForPreTraining}  # TrainConfig.model_type


def _rng_state(rng: np.random.Generator) -> dict:
    return rng.bit_generator.state  # plain ints and strings: JSON-safe


def _set_rng_state(rng: np.random.Generator, state: dict) -> None:
    rng.bit_generator.state = state


class HeldoutEvaluator:
    """Pretraining's evaluator: the held-out MLM (or next-token) and NSP/SOP numbers of
    evaluation.evaluate, and how the eval line and the final report show them."""

    result_type = EvalResult  # what evaluate returns (and trainer_state.json's "last_eval" holds)

    def __init__(self, cfg: TrainConfig, heldout: dict[str, np.ndarray]):
        self.cfg, self.heldout = cfg, heldout

    def evaluate(self, model) -> EvalResult:
        return evaluate(model, self.heldout, objective=self.cfg.objective)

    def describe(self, r: EvalResult) -> str:
        """The eval line's numbers."""
        lm = "next-token (LTR)" if self.cfg.objective == "ltr" else "MLM"  # what the mlm_* numbers measure
        task, first, second = self.cfg.pair_task()
        nsp = ("" if self.cfg.objective == "ltr" or task is None else
               f", {task} acc {r.nsp_acc:.4f} ({first} {r.nsp_acc_isnext:.3f}, {second} {r.nsp_acc_random:.3f})"
               + (f" of the untrained {task} head" if self.cfg.objective == "mlm" else ""))
        return (f"held-out {lm} acc {r.mlm_acc:.4f}, {lm} loss {r.mlm_loss:.3f} "
                f"(perplexity {_fmt_perplexity(r.perplexity)}){nsp}")

    def summary(self, r: EvalResult) -> str:
        """The final report's numbers (train/commands.report)."""
        objective = self.cfg.objective
        lm = "next-token (LTR)" if objective == "ltr" else "MLM"
        task, first, second = self.cfg.pair_task()
        nsp = ("" if objective == "ltr" or task is None else
               f", {task} accuracy {r.nsp_acc:.2%} ({first} pairs {r.nsp_acc_isnext:.1%}, {second} pairs "
               f"{r.nsp_acc_random:.1%})" + (f", {task} head untrained" if objective == "mlm" else ""))
        return (f"{lm} accuracy {r.mlm_acc:.2%}, {lm} loss {r.mlm_loss:.3f} (perplexity "
                f"{_fmt_perplexity(r.perplexity)}){nsp}")


class Trainer(TrainingLoop):
    """Pretraining on the loop of loop/engine.py: owns model, optimizer, data iterators (the
    batch source, with the sequence-length phases), the held-out evaluation, the dropout RNG, the
    step counter and the run directory."""

    def __init__(self, cfg: TrainConfig, data: DataDirs | None = None, verbose: bool = True,
                 created_by: str = "train"):
        from minibert.shards import BatchIterator
        from minibert.tokenizer import BertTokenizer

        cfg.validate()
        self.cfg, self.verbose, self.created_by = cfg, verbose, created_by
        self.dir = cfg.run_dir
        self.tokenizer = BertTokenizer(cfg.vocab)
        self.tokenizer.check_special_tokens(purpose="training")
        # model and optimizer first: their own checks (AdamW's betas, ...) fail in milliseconds,
        # before data generation spends seconds and writes its cache
        self.model = self.build_model(len(self.tokenizer))
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
        self.evaluator = self.build_evaluator() if self.heldout is not None else None
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

    def build_model(self, vocab_size: int):
        """The model the run trains (MODEL_CLASSES by model_type)."""
        if self.cfg.model_type not in MODEL_CLASSES:
            raise ValueError(f"model_type {self.cfg.model_type!r} runs on its own Trainer, "
                             f"minibert.train.pretrain.TRAINERS[{self.cfg.model_type!r}] (train() picks it)")
        return MODEL_CLASSES[self.cfg.model_type](self.cfg.model_config(vocab_size), seed=self.cfg.seed)

    def build_evaluator(self) -> HeldoutEvaluator:
        """The evaluator of the held-out set (self.heldout)."""
        return HeldoutEvaluator(self.cfg, self.heldout)

    def model_note(self) -> str:
        """What the start-of-run line adds about the architecture."""
        m = self.model
        return (f", ALBERT: embedding {m.config.embedding_size}, one block shared by the layers"
                if self.cfg.model_type == "albert" else "")

    @property
    def minutes(self) -> float:
        return self.cfg.minutes

    @property
    def log_interval(self) -> int:
        return self.cfg.log_interval

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

    # --- checkpoints (written and read by TrainingLoop.save_checkpoint / load_checkpoint) -----------

    MODEL_FILES = ("model.safetensors",)  # the model's tensor files in a checkpoint (hashed in its state)

    def optimizer_metadata(self) -> dict:
        return {"step": str(self.step)}

    def checkpoint_state(self, status: str, ckpt: Path) -> dict:
        """trainer_state.json: how the run stood (`status`), the iterators and RNG, the hashes of
        the two tensor files."""
        return {"step": self.step, "total_steps": self.total_steps, "status": status,
                "elapsed_seconds": self.elapsed,
                "iterator": self.iterator.state_dict(), "dropout_rng": _rng_state(self.rng),
                "short_iterator": self.short_iterator.state_dict() if self.short_iterator else None,
                "short_steps": self.short_steps,
                "sha256": {f: _sha256_file(ckpt / f) for f in (*self.MODEL_FILES, OPTIM_FILE)},
                "last_eval": self.last_eval._asdict() if self.last_eval else None,
                "last_eval_step": self.last_eval_step}

    def no_checkpoint_message(self) -> str:
        return (f"{self.dir} has no checkpoint to resume from (the run stopped before its first "
                f"save, every {self.cfg.checkpoint_interval} steps); start it again with --overwrite")

    def restore_state(self, state: dict, ckpt: Path) -> None:
        """The model, the iterators, the schedule and the last evaluation of a checkpoint."""
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
        self.iterator.load_state_dict(state["iterator"])
        if self.short_iterator is not None:
            self.short_iterator.load_state_dict(state["short_iterator"])
            self._short_steps = int(state["short_steps"])
        self.total_steps = int(state["total_steps"])
        if state.get("last_eval"):
            result_type = self.evaluator.result_type if self.evaluator is not None else EvalResult
            self.last_eval = result_type(**state["last_eval"])
            self.last_eval_step = state.get("last_eval_step")

    def start_fresh(self) -> None:
        """Clear what an earlier run left in the directory (after check_run_dir said it may go) and
        write run.json."""
        self.dir.mkdir(parents=True, exist_ok=True)
        for f in (METRICS_FILE, STATE_FILE, OPTIM_FILE, CURVES_FILE, run_dir_mod.CHECKPOINTS,
                  *run_dir_mod.PUBLISHED, *run_dir_mod.PUBLISHED_DIRS):
            run_dir_mod._remove(self.dir / f)
        run_dir_mod.write_json(self.dir / RUN_FILE, {"created_by": self.created_by, "config": self.cfg.to_dict(),
                                                     "data": {"train": str(self.data.train),
                                                              "heldout": str(self.data.heldout)}})

    # --- the batch source and one step (TrainingLoop.train_step) ------------------------------------

    def next_batches(self) -> list[dict]:
        """The step's accumulation_steps micro-batches, from the iterator of the step's phase."""
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
        return batches

    def step_options(self) -> dict:
        cfg = self.cfg
        return dict(lr=cfg.lr, warmup_steps=cfg.warmup_steps, schedule=cfg.schedule, clip_norm=cfg.clip_norm,
                    objective=cfg.objective)

    def diverged_hint(self) -> str:
        cfg = self.cfg
        where = self.last_good_checkpoint()
        return (f"; the run stopped without saving. Last good checkpoint: {where}. "
                f"Try a lower lr (now {cfg.lr}) or more warmup (now {cfg.warmup_steps}).")

    def window_entry(self, r, batches) -> tuple[Any, float, float, int]:
        """-> (metrics, grad norm before clipping, lr, real tokens of every micro-batch)."""
        return r.metrics, r.grad_norm, r.lr, sum(int(b["input_mask"].sum()) for b in batches)

    def dropout_on(self) -> bool:
        cfg = self.cfg
        return (cfg.model.hidden_dropout_prob > 0 or cfg.model.attention_probs_dropout_prob > 0
                or (cfg.model_type == "albert" and cfg.classifier_dropout_prob > 0))

    def _dropout_on(self) -> bool:  # calibrate.time_step's name
        return self.dropout_on()

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

    def after_step(self, seconds: float) -> None:
        if self._calibration is not None:
            self._recalibrate(seconds)

    def _time_step(self, data_dir: Path, batch_size: int, passes: int) -> float:
        return calibrate.time_step(self, data_dir, batch_size, passes)

    # --- the loop (TrainingLoop.run) ---------------------------------------------------------------

    def run(self, max_steps_this_run: int | None = None) -> str:
        """Train until total_steps, the time budget, `max_steps_this_run` more steps or Ctrl-C
        (TrainingLoop.run): -> "done" | "budget" | "paused" | "interrupted"."""
        return super().run(max_steps_this_run)

    def aborted_where(self) -> str:
        state = run_state(self.dir)
        return (f"the last complete checkpoint is step {state['step']} in {self.dir}; continue with "
                f"`python -m minibert train --resume {self.dir}`" if state is not None
                else "no checkpoint was written yet")

    def interrupted_saved(self) -> str:
        return f"saved {self.dir}"

    def resume_command(self) -> str:
        return f"python -m minibert train --resume {self.dir}"

    def is_eval_step(self, step: int) -> bool:
        return step % self.cfg.eval_interval == 0

    def is_checkpoint_step(self, step: int, stop_at: float) -> bool:
        return step % self.cfg.checkpoint_interval == 0 and step < stop_at

    # --- the evaluator -----------------------------------------------------------------------------

    def run_eval(self):
        """The evaluator on the current model: logged, shown, kept as last_eval (None without a held-out set)."""
        if self.evaluator is None:
            return None
        t0 = time.perf_counter()
        r = self.evaluator.evaluate(self.model)
        self._eval_seconds += time.perf_counter() - t0
        self.last_eval, self.last_eval_step = r, self.step
        self.log({"type": "eval", "step": self.step, "time": round(self.elapsed, 3), **r._asdict()})
        self.say(f"eval step {self.step}: {self.evaluator.describe(r)} [{r.examples} examples, "
                 f"{time.perf_counter() - t0:.1f}s]")
        return r

    # --- the log window ----------------------------------------------------------------------------

    def window_record(self, window: list[tuple], seconds: float) -> dict:
        ms = [w[0] for w in window]
        mlm_count = sum(m.mlm_count for m in ms)
        return {"type": "train", "step": self.step, "time": round(self.elapsed, 3),
                "loss": float(np.mean([m.loss for m in ms])),
                "mlm_loss": float(np.mean([m.mlm_loss for m in ms])),
                "nsp_loss": float(np.mean([m.nsp_loss for m in ms])),
                "mlm_acc": sum(m.mlm_correct for m in ms) / max(mlm_count, 1),
                "nsp_acc": sum(m.nsp_correct for m in ms) / max(sum(m.nsp_count for m in ms), 1),
                "lr": window[-1][2], "grad_norm": float(np.mean([w[1] for w in window])),
                "tokens_per_s": sum(w[3] for w in window) / max(seconds, 1e-9)}

    def progress_fields(self, rec: dict) -> tuple[str, list[str]]:
        lm = "LTR acc" if self.cfg.objective == "ltr" else "MLM acc"  # what mlm_acc measures
        nsp = [f"{self.cfg.pair_task()[0]} acc {rec['nsp_acc']:.2f}"] if self.cfg.objective == "mlm_nsp" else []
        return "", [f"loss {rec['loss']:.3f}", f"{lm} {rec['mlm_acc']:.3f}", *nsp]

    # --- curves -----------------------------------------------------------------------------------

    def write_curves(self) -> Path | None:
        """Redraw curves.png. A plot that cannot be written (a full disk) is a warning, not the end
        of the run: the checkpoints are what must not be lost."""
        self._last_plot = time.perf_counter()
        path = self.dir / METRICS_FILE
        if not self.cfg.curves or not path.exists():
            return None
        try:
            base = baselines(self.heldout, self.tokenizer.ids_to_tokens) if self.heldout is not None else None
            return self.plot_curves(path, self.dir / CURVES_FILE, base)
        except OSError as e:
            print(f"warning: could not draw {self.dir / CURVES_FILE}: {e}", file=sys.stderr)
            return None

    def plot_curves(self, metrics_path: Path, out: Path, base) -> Path:
        """curves.png from metrics.jsonl (the objective's own plot: train/electra.py's draws others)."""
        return plot_curves(metrics_path, out, base)
