"""The pretraining Trainer: model, optimizer, data iterators, dropout RNG, step counter and run
directory, as the task that loop/engine.run trains (logging, evaluations, checkpoints, Ctrl-C
are the loop's). What differs between the models it pretrains is a family object: BERT_FAMILY
here for BERT and ALBERT, train/electra.py's ELECTRA_FAMILY for ELECTRA. train/pretrain.py's
`train()` starts or resumes a run with it.

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
that never stopped (tests/train/test_train.py checks this with np.array_equal).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from minibert.bert import BertForPreTraining
from minibert.family.albert import AlbertForPreTraining
from minibert.loop import checkpoints, engine, rundir
from minibert.loop.budget import FULL, SHORT, Fit, StepBudget
from minibert.loop.curves import Panel
from minibert.loop.step import shuffle_mlm_labels
from minibert.model import Metrics, trained_params
from minibert.optim import AdamW, clip_by_global_norm
from minibert.train.config import TrainConfig
from minibert.train.curves import WALL, baselines, pretraining_panels
from minibert.train.data import DataDirs, sha256_file, load_heldout, prepare_data
from minibert.train.electra import ELECTRA_FAMILY
from minibert.train.evaluation import EvalResult, fmt_perplexity, evaluate

MODEL_CLASSES = {"bert": BertForPreTraining, "albert": AlbertForPreTraining}  # TrainConfig.model_type


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
                f"(perplexity {fmt_perplexity(r.perplexity)}){nsp}")

    def summary(self, r: EvalResult) -> str:
        """The final report's numbers (train/commands.report)."""
        objective = self.cfg.objective
        lm = "next-token (LTR)" if objective == "ltr" else "MLM"
        task, first, second = self.cfg.pair_task()
        nsp = ("" if objective == "ltr" or task is None else
               f", {task} accuracy {r.nsp_acc:.2%} ({first} pairs {r.nsp_acc_isnext:.1%}, {second} pairs "
               f"{r.nsp_acc_random:.1%})" + (f", {task} head untrained" if objective == "mlm" else ""))
        return (f"{lm} accuracy {r.mlm_acc:.2%}, {lm} loss {r.mlm_loss:.3f} (perplexity "
                f"{fmt_perplexity(r.perplexity)}){nsp}")


class BertFamily:
    """What a BERT or ALBERT pretraining run has of its own: the model, the evaluator, the log
    record, the progress line and the curves (train/electra.py's ElectraFamily has the same)."""

    model_files = ("model.safetensors",)  # the model's tensor files in a checkpoint (hashed in its state)
    metrics_type = Metrics  # what the model's loss_grads_metrics returns (window entries)
    published_dirs = ""  # what the final report adds to the files it names

    def build_model(self, cfg: TrainConfig, vocab_size: int):
        return MODEL_CLASSES[cfg.model_type](cfg.model_config(vocab_size), seed=cfg.seed)

    def model_note(self, cfg: TrainConfig, model) -> str:
        """What the start-of-run line adds about the architecture."""
        return (f", ALBERT: embedding {model.config.embedding_size}, one block shared by the layers"
                if cfg.model_type == "albert" else "")

    def dropout_on(self, cfg: TrainConfig) -> bool:
        return (cfg.model.hidden_dropout_prob > 0 or cfg.model.attention_probs_dropout_prob > 0
                or (cfg.model_type == "albert" and cfg.classifier_dropout_prob > 0))

    def evaluator(self, cfg: TrainConfig, heldout: dict) -> HeldoutEvaluator:
        return HeldoutEvaluator(cfg, heldout)

    def window_record(self, window: list[tuple]) -> dict:
        """The log record's numbers of a window of (metrics, grad norm, lr, tokens) entries."""
        ms = [w[0] for w in window]
        mlm_count = sum(m.mlm_count for m in ms)
        return {"loss": float(np.mean([m.loss for m in ms])),
                "mlm_loss": float(np.mean([m.mlm_loss for m in ms])),
                "nsp_loss": float(np.mean([m.nsp_loss for m in ms])),
                "mlm_acc": sum(m.mlm_correct for m in ms) / max(mlm_count, 1),
                "nsp_acc": sum(m.nsp_correct for m in ms) / max(sum(m.nsp_count for m in ms), 1)}

    def progress_fields(self, cfg: TrainConfig, rec: dict) -> list[str]:
        lm = "LTR acc" if cfg.objective == "ltr" else "MLM acc"  # what mlm_acc measures
        nsp = [f"{cfg.pair_task()[0]} acc {rec['nsp_acc']:.2f}"] if cfg.objective == "mlm_nsp" else []
        return [f"loss {rec['loss']:.3f}", f"{lm} {rec['mlm_acc']:.3f}", *nsp]

    def curve_panels(self, cfg: TrainConfig, base, records: list[dict]) -> list[Panel]:
        """curves.png's panels (train/curves.py), with the held-out set's constant-answer baselines."""
        return pretraining_panels(base, cfg.objective, cfg.pair_task()[0])


BERT_FAMILY = BertFamily()
FAMILIES = {"bert": BERT_FAMILY, "albert": BERT_FAMILY, "electra": ELECTRA_FAMILY}  # by TrainConfig.model_type


class Trainer:
    """Pretraining as a task of loop/engine.run: owns model, optimizer, data iterators (the batch
    source, with the sequence-length phases), the held-out evaluation, the dropout RNG, the step
    counter and the run directory; its family (FAMILIES, by model_type) holds what the model has
    of its own."""

    log_partial_window = True  # log the steps since the last log line when the run ends mid-interval
    curves_every = 60.0  # seconds: redraw curves.png after an evaluation at most this often
    publish_checkpoints = True  # a checkpoint's model files are also the run's top-level model
    curve_axes = WALL
    eval_label = "held-out"

    def __init__(self, cfg: TrainConfig, data: DataDirs | None = None, verbose: bool = True,
                 created_by: str = "train"):
        from minibert.data.shards import BatchIterator
        from minibert.text.tokenizer import BertTokenizer

        cfg.validate()
        self.cfg, self.verbose, self.created_by = cfg, verbose, created_by
        self.family = FAMILIES[cfg.model_type]
        self.dir = cfg.run_dir
        self.tokenizer = BertTokenizer(cfg.vocab)
        self.tokenizer.check_special_tokens(purpose="training")
        # model and optimizer first: their own checks (AdamW's betas, ...) fail in milliseconds,
        # before data generation spends seconds and writes its cache
        self.model = self.family.build_model(cfg, len(self.tokenizer))
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
        self.evaluator = self.family.evaluator(cfg, self.heldout) if self.heldout is not None else None
        self.rng = np.random.default_rng([cfg.seed, 1])  # dropout
        # the loop's state (loop/engine.py)
        self.step, self.total_steps, self.elapsed = 0, cfg.steps, 0.0  # elapsed: seconds in the loop, over resumes
        self.window: list = []  # the log entries since the last log line
        self.lr_anchor: tuple[int, float] | None = None  # where a budget's refit re-spread the lr decay
        self.last_checkpoint: int | None = None
        self.last_eval: EvalResult | None = None
        self.last_eval_step: int | None = None
        self._short_steps: int | None = None  # fixed by the budget's first refit (then saved)
        self.budget: StepBudget | None = None  # a resume reads the budget's state; a fresh run probes it (start_budget)
        if not cfg.steps:  # steps 0: fitted to the time budget
            self.budget = StepBudget(cfg.minutes * 60.0, cfg.eval_interval,
                                     short_fraction=cfg.short_seq_fraction if self.short_iterator else 0.0)

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

    # --- the loop ----------------------------------------------------------------------------------

    def run(self, max_steps_this_run: int | None = None) -> str:
        """Train until total_steps, the time budget, `max_steps_this_run` more steps or Ctrl-C
        (loop/engine.run): -> "done" | "budget" | "paused" | "interrupted"."""
        return engine.run(self, max_steps_this_run)

    def load_checkpoint(self) -> None:
        checkpoints.load_checkpoint(self, f" (the run stopped before its first save, every "
                                          f"{self.cfg.checkpoint_interval} steps)")

    def start_fresh(self) -> None:
        """Clear what an earlier run left in the directory (after check_run_dir said it may go) and
        write run.json."""
        rundir.start_run(self.dir, self.created_by, self.cfg.to_dict(),
                         data={"train": str(self.data.train), "heldout": str(self.data.heldout)})

    def resume_command(self) -> str:
        return f"python -m minibert train --resume {self.dir}"

    def diverged_hint(self) -> str:
        return (f"; the run stopped without saving. Last good checkpoint: {engine.last_good_checkpoint(self)}. Try "
                f"a lower lr (now {self.cfg.lr:g}) or more warmup (now {self.cfg.warmup_steps})")

    # --- the batch source and one step -------------------------------------------------------------

    def next_batch(self) -> list[dict]:
        """The step's accumulation_steps micro-batches, from the iterator of the step's phase."""
        cfg = self.cfg
        if self.short_steps and self.step == self.short_steps:
            engine.log(self, {"type": "phase", "step": self.step, "time": round(self.elapsed, 3),
                              "from_seq_length": cfg.short_seq_length, "max_seq_length": cfg.max_seq_length})
            engine.say(self, f"step {self.step}: short phase done, sequence length {cfg.short_seq_length} -> "
                             f"{cfg.max_seq_length}, batch {cfg.short_phase()[1]} -> {cfg.batch_size}")
        iterator = self.iterator_at(self.step)
        batches = [iterator.next_batch() for _ in range(cfg.accumulation_steps)]  # the step's micro-batches
        if cfg.control_shuffle_labels:
            shuffle_rng = np.random.default_rng([cfg.seed, self.step, 7])
            batches = [shuffle_mlm_labels(b, shuffle_rng) for b in batches]
        return batches

    def step_options(self) -> dict:
        cfg = self.cfg
        # ELECTRA's family draws the generator's samples from self.rng at every step
        return dict(lr=cfg.lr, warmup_steps=cfg.warmup_steps, schedule=cfg.schedule, clip_norm=cfg.clip_norm,
                    objective=cfg.objective, rng=self.rng if self.family.dropout_on(cfg) else None)

    # --- the log window ----------------------------------------------------------------------------

    def window_entry(self, r, batches) -> tuple[Any, float, float, int]:
        """-> (metrics, grad norm before clipping, lr, real tokens of every micro-batch)."""
        return r.metrics, r.grad_norm, r.lr, sum(int(b["input_mask"].sum()) for b in batches)

    def decode_window_entry(self, entry: list) -> tuple:
        return (self.family.metrics_type(*entry[0]), *entry[1:])

    def window_record(self, window: list[tuple], seconds: float) -> dict:
        return {"type": "train", "step": self.step, "time": round(self.elapsed, 3),
                **self.family.window_record(window), "lr": window[-1][2],
                "grad_norm": float(np.mean([w[1] for w in window])),
                "tokens_per_s": sum(w[3] for w in window) / max(seconds, 1e-9)}

    def progress_fields(self, rec: dict) -> tuple[str, list[str]]:
        return "", self.family.progress_fields(self.cfg, rec)

    # --- evaluation and curves ---------------------------------------------------------------------

    def is_eval_step(self, step: int) -> bool:
        return step % self.cfg.eval_interval == 0

    def evaluate(self):
        """The evaluator on the current model: logged, shown, kept as last_eval (None without a held-out set)."""
        if self.evaluator is None:
            return None
        t0 = time.perf_counter()
        r = self.evaluator.evaluate(self.model)
        self.last_eval, self.last_eval_step = r, self.step
        engine.log(self, {"type": "eval", "step": self.step, "time": round(self.elapsed, 3), **r._asdict()})
        engine.say(self, f"eval step {self.step}: {self.evaluator.describe(r)} [{r.examples} examples, "
                         f"{time.perf_counter() - t0:.1f}s]")
        return r

    def curve_panels(self, records: list[dict]) -> list[Panel] | None:
        if not self.cfg.curves:
            return None
        base = baselines(self.heldout, self.tokenizer.ids_to_tokens) if self.heldout is not None else None
        return self.family.curve_panels(self.cfg, base, records)

    # --- checkpoints (loop/checkpoints.py writes and reads them) -----------------------------------

    def is_checkpoint_step(self, step: int, stop_at: float) -> bool:
        return step % self.cfg.checkpoint_interval == 0 and step < stop_at

    def optimizer_metadata(self) -> dict:
        return {"step": str(self.step)}

    def state_dict(self, status: str, ckpt: Path) -> dict:
        """trainer_state.json: how the run stood (`status`), the iterators and RNG, the hashes of
        the two tensor files."""
        return {"step": self.step, "total_steps": self.total_steps, "status": status,
                "elapsed_seconds": self.elapsed,
                "iterator": self.iterator.state_dict(), "dropout_rng": self.rng.bit_generator.state,
                "short_iterator": self.short_iterator.state_dict() if self.short_iterator else None,
                "short_steps": self.short_steps,
                "sha256": {f: sha256_file(ckpt / f) for f in (*self.family.model_files, rundir.OPTIM_FILE)},
                "last_eval": self.last_eval._asdict() if self.last_eval else None,
                "last_eval_step": self.last_eval_step}

    def load_state_dict(self, state: dict, ckpt: Path) -> None:
        """The model, the iterators, the schedule and the last evaluation of a checkpoint."""
        state_file = ckpt / rundir.STATE_FILE
        hashes, own = state.get("sha256"), {*self.family.model_files, rundir.OPTIM_FILE}
        if not isinstance(hashes, dict) or not hashes or not set(hashes) <= own \
                or not all(isinstance(h, str) for h in hashes.values()):  # only the checkpoint's own files
            raise ValueError(f"{state_file}: sha256 is {hashes!r:.200}, expected the sha256 of each of "
                             f"{', '.join(sorted(own))}")
        for f, sha in hashes.items():
            if not (ckpt / f).is_file():
                raise ValueError(f"checkpoint {ckpt} is incomplete: {f} is missing")
            if sha256_file(ckpt / f) != sha:
                raise ValueError(f"checkpoint {ckpt} is inconsistent: {f} does not match {rundir.STATE_FILE} "
                                 f"(the file was changed after the save)")
        saved = type(self.model).from_pretrained(ckpt)
        if saved.config.vocab_size != len(self.tokenizer):
            raise ValueError(f"vocab/checkpoint mismatch: {ckpt} has vocab_size "
                             f"{saved.config.vocab_size}, {self.cfg.vocab} has {len(self.tokenizer)} tokens")
        for k, p in self.model.params.items():
            if k not in saved.params or saved.params[k].shape != p.shape:
                raise ValueError(f"checkpoint {ckpt} parameter {k!r} does not match the configured model")
            np.copyto(p, saved.params[k])
        try:
            self.iterator.load_state_dict(state.get("iterator"))
            if self.short_iterator is not None:
                self.short_iterator.load_state_dict(state.get("short_iterator"))
        except ValueError as e:
            raise ValueError(f"{state_file}: {e}") from None
        if self.short_iterator is not None:
            self._short_steps = int(state["short_steps"])
        if "total_steps" not in state:
            raise ValueError(f"{state_file} has no total_steps")
        self.total_steps = int(state["total_steps"])  # check_state checked it
        if state.get("last_eval"):
            result_type = self.evaluator.result_type if self.evaluator is not None else EvalResult
            last = state["last_eval"]
            needed = set(result_type._fields) - set(result_type._field_defaults)
            if not isinstance(last, dict) or not needed <= set(last) <= set(result_type._fields) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in last.values()):
                raise ValueError(f"{state_file}: last_eval is {last!r:.200}, expected an object with "
                                 f"{', '.join(result_type._fields)}")
            self.last_eval = result_type(**last)
            self.last_eval_step = state.get("last_eval_step")

    # --- the time budget (minibert/loop/budget.py) -------------------------------------------------

    def start_budget(self, passes: int = 16) -> None:
        """steps 0: the schedule sized to the budget before the first step, from a probe of the
        step time (probe_step_seconds; with a short phase, both lengths are timed) and an estimate
        of an evaluation (a third of a training step's time per held-out batch)."""
        cfg = self.cfg
        full = self.probe_step_seconds(self.data.train, cfg.batch_size, passes)
        short = full
        if self.short_iterator is not None:
            short = self.probe_step_seconds(self.data.short_train, cfg.short_phase()[1], passes)
        eval_time = 0.0
        if self.heldout is not None:
            per_batch = full / cfg.accumulation_steps  # a step computes accumulation_steps batches
            eval_time = per_batch / 3 * self.heldout["input_ids"].shape[0] / cfg.batch_size
        fraction = cfg.short_seq_fraction if self.short_iterator is not None else 0.0
        self.budget = StepBudget(cfg.minutes * 60.0, cfg.eval_interval, full, eval_time, fraction, short)
        fit = self.budget.initial()
        self.total_steps = fit.total_steps
        engine.say(self, engine.fit_message(self, fit, fit.total_steps, first=True))

    def probe_step_seconds(self, data_dir: Path, batch_size: int, passes: int) -> float:
        """Seconds per training step (x 1.12 for the optimizer, data and checkpoints), from the
        last half of `passes` forward+backward passes on one held-aside batch of `data_dir` (times
        the accumulation_steps micro-batches a step computes); the parameters are not touched.
        The first passes compile Numba's kernels and warm the allocator (measured: the first 4 ran
        ~20% slower than the run's average), so only the last half are timed. With 10 passes and
        +8%, four 9-minute runs measured 202-214 ms/step for a loop that then ran at 209-229:
        hence 16 passes and +12%; the budget's refits correct the rest."""
        from minibert.data.shards import BatchIterator

        cfg = self.cfg
        probe = BatchIterator(str(data_dir), batch_size, cfg.seed + 99, masking=cfg.masking, vocab=cfg.vocab,
                              mask_shares=cfg.mask_shares).next_batch()
        times = []
        for _ in range(passes):
            t0 = time.perf_counter()
            _, grads = self.model.loss_and_grads(probe, train=self.family.dropout_on(cfg),
                                                 rng=np.random.default_rng(0), objective=cfg.objective)
            clip_by_global_norm(grads, cfg.clip_norm)
            times.append(time.perf_counter() - t0)
        return float(np.median(times[passes // 2:])) * 1.12 * cfg.accumulation_steps

    def step_kind(self, step: int) -> str:
        return SHORT if step < self.short_steps else FULL

    def time_eval(self) -> None:
        return None  # start_budget's probe estimated it

    def after_fit(self, fit: Fit, first: bool) -> None:
        if self._short_steps is None and self.budget.short_steps is not None and self.short_iterator is not None:
            self._short_steps = self.budget.short_steps  # the first refit fixed the switch to full length
