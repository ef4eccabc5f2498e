"""The pretraining Trainer: model, optimizer, data iterators and the held-out evaluation, as the
run that loop/engine.run trains (the step counter, the dropout RNG, logging, evaluations,
checkpoints, Ctrl-C are the loop's). What differs between the models it pretrains is a family object: BERT_FAMILY
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

import dataclasses
from pathlib import Path

import numpy as np

from minibert.bert import BertForPreTraining
from minibert.data.pretraining_data import DEFAULT_FLAGS
from minibert.io.progress import fmt_seconds
from minibert.data.shards import BatchIterator
from minibert.family.albert import AlbertForPreTraining
from minibert.loop import budget, rundir
from minibert.loop.curves import Panel
from minibert.loop.state import Curves, LoopSettings
from minibert.model import trained_params
from minibert.optim import AdamW, clip_by_global_norm
from minibert.text.tokenizer import BertTokenizer
from minibert.train.config import TrainConfig
from minibert.train.curves import WALL, baselines, pretraining_panels
from minibert.train.data import DataDirs, load_heldout, prepare_data
from minibert.train.electra import ELECTRA_FAMILY
from minibert.train.evaluation import EvalResult, fmt_perplexity, evaluate
from minibert.train.pretraining_step import pretraining_loss, shuffle_mlm_labels

MODEL_CLASSES = {"bert": BertForPreTraining, "albert": AlbertForPreTraining}  # TrainConfig.model_type


class HeldoutEvaluator:
    """Pretraining's evaluator: the held-out MLM (or next-token) and NSP/SOP numbers of
    evaluation.evaluate, and how the eval line and the final report show them."""

    result_type = EvalResult  # what evaluate returns (and trainer_state.json's "last_eval" holds)

    def __init__(self, cfg: TrainConfig, heldout: dict[str, np.ndarray]):
        self.cfg, self.heldout = cfg, heldout

    def evaluate(self, model) -> EvalResult:
        return evaluate(model, self.heldout, objective=self.cfg.objective)

    def summary(self, r: EvalResult) -> str:
        """The final report's numbers (Trainer.finish)."""
        objective = self.cfg.objective
        lm = "next-token (LTR)" if objective == "ltr" else "MLM"
        pair, first, second = self.cfg.pair_task()
        nsp = ("" if objective == "ltr" or pair is None else
               f", {pair} accuracy {r.nsp_acc:.2%} ({first} pairs {r.nsp_acc_isnext:.1%}, {second} pairs "
               f"{r.nsp_acc_random:.1%})" + (f", {pair} head untrained" if objective == "mlm" else ""))
        return (f"{lm} accuracy {r.mlm_acc:.2%}, {lm} loss {r.mlm_loss:.3f} (perplexity "
                f"{fmt_perplexity(r.perplexity)}){nsp}")


class BertFamily:
    """What a BERT or ALBERT pretraining run has of its own: the model, the evaluator, the labels
    of its numbers and the curves (train/electra.py's ElectraFamily has the same)."""

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

    def labels(self, cfg: TrainConfig) -> tuple[dict, dict]:
        """The numbers the progress line and the evaluation line show, with their labels."""
        lm = "LTR" if cfg.objective == "ltr" else "MLM"  # what the mlm_* numbers measure
        pair = cfg.pair_task()[0]
        train = {"loss": "loss", "mlm_acc": f"{lm} acc"}
        held = {"mlm_acc": f"{lm} acc", "mlm_loss": f"{lm} loss", "perplexity": "perplexity"}
        if cfg.objective == "mlm_nsp" and pair is not None:
            train["nsp_acc"] = held["nsp_acc"] = f"{pair} acc"
        return train, held

    def curve_panels(self, cfg: TrainConfig, base) -> list[Panel]:
        """curves.png's panels (train/curves.py), with the held-out set's constant-answer baselines."""
        return pretraining_panels(base, cfg.objective, cfg.pair_task()[0])


BERT_FAMILY = BertFamily()
FAMILIES = {"bert": BERT_FAMILY, "albert": BERT_FAMILY, "electra": ELECTRA_FAMILY}  # by TrainConfig.model_type


class Trainer:
    """Pretraining as a run of loop/engine.run: owns the model, the optimizer, the data iterators
    (the batch source, with the sequence-length phases), the held-out evaluation and its last
    result; its family (FAMILIES, by model_type) holds what the model has of its own, and
    `settings` what the loop is told (train/pretrain.py starts or resumes it)."""

    def __init__(self, cfg: TrainConfig, data: DataDirs | None = None, verbose: bool = True,
                 created_by: str = "train", dir: Path | None = None):
        self.cfg, self.created_by = cfg, created_by
        self.family = FAMILIES[cfg.model_type]
        self.dir = Path(dir or cfg.run_dir)  # where it writes (loop/launch.py may build it beside cfg.run_dir)
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
        self.last_eval: EvalResult | None = None  # the evaluator's last result (the final report's)
        show_train, show_eval = self.family.labels(cfg)
        base = baselines(self.heldout, self.tokenizer.ids_to_tokens) if self.heldout is not None else None
        self.settings = LoopSettings.of(
            cfg, dir=self.dir, vocab=self.tokenizer.ids_to_tokens, command="train", home=cfg.run_dir, verbose=verbose,
            schedule=cfg.schedule, clip_norm=cfg.clip_norm, dropout=self.family.dropout_on(cfg),
            fit_steps=not cfg.steps, probe=self.probe_times,  # steps 0: fitted to the time budget, from a probe
            short_fraction=cfg.short_seq_fraction if self.short_iterator is not None else 0.0,
            phase={"from_seq_length": cfg.short_seq_length, "max_seq_length": cfg.max_seq_length},
            log_grad_norm=True, show_train=show_train, show_eval=show_eval,
            curves=Curves(tuple(self.family.curve_panels(cfg, base)), WALL, every=60.0) if cfg.curves else None)

    # --- the run's files ---------------------------------------------------------------------------

    def start(self) -> None:
        """A fresh run (loop/launch.py, after the guard): run.json, what an earlier run left cleared."""
        rundir.start_run(self.dir, self.created_by, self.cfg.to_dict(),
                         data={"train": str(self.data.train), "heldout": str(self.data.heldout)})

    def moved(self, to: Path) -> None:
        """The launcher swapped the run into `to` (it was built beside the run it replaces)."""
        self.dir, self.settings = to, dataclasses.replace(self.settings, dir=to)

    def opening(self, loop, resumed: bool) -> list[str]:
        """The lines that describe a fresh run (a resumed one: none)."""
        if resumed:
            return []
        cfg, m = self.cfg, self.model
        note = self.family.model_note(cfg, m)
        lines = [f"model: {m.num_parameters:,} parameters ({m.config.num_hidden_layers} layers, hidden "
                 f"{m.config.hidden_size}, {m.config.num_attention_heads} heads, vocab {m.config.vocab_size}"
                 f"{note}); {self.iterator.num_examples:,} training sequences of {cfg.max_seq_length} "
                 f"tokens" + ("" if cfg.packing == "segment_pair" else f" ({cfg.packing} packing)")
                 + (", SOP pairs" if cfg.sentence_order else "") + f", {cfg.masking} masking"
                 + ("" if cfg.mask_shares == DEFAULT_FLAGS["mask_shares"] else
                    f" (MASK/SAME/RND {'/'.join(f'{x:g}' for x in cfg.mask_shares)})")
                 + ("" if cfg.objective == "mlm_nsp" else f", objective {cfg.objective}")
                 + f", batch {cfg.batch_size}"
                 + ("" if cfg.accumulation_steps == 1 else
                    f" x {cfg.accumulation_steps} micro-batches ({cfg.batch_size * cfg.accumulation_steps} "
                    f"sequences per step)")
                 + f", lr {cfg.lr:g}, warmup {cfg.warmup_steps}, {loop.total_steps} steps"
                 + (f", budget {cfg.minutes:g} min" if cfg.minutes else "")]
        if self.short_iterator is not None:
            T_short, B_short, _ = cfg.short_phase()
            lines.append(f"sequence-length warm-up: steps 1-{loop.schedule.short_steps()} on "
                         f"{self.short_iterator.num_examples:,} sequences of {T_short} tokens, batch {B_short}")
        return lines

    def finish(self, loop) -> list[str]:
        """The final report: the last held-out evaluation and where the run is."""
        r = self.last_eval
        if r is None or not self.settings.verbose:
            return []
        at = loop.last_eval_step if loop.last_eval_step is not None else loop.step
        when = (f"after {at} steps" if at == loop.step  # Ctrl-C stops without a final evaluation
                else f"at step {at} (the last evaluation; training stopped at step {loop.step})")
        evaluator = self.evaluator or HeldoutEvaluator(self.cfg, None)
        return [f"\nheld-out ({r.examples} sequences) {when}, {fmt_seconds(loop.elapsed)}: {evaluator.summary(r)}",
                f"saved: {self.dir}/ (config.json, model.safetensors, vocab.txt, {self.family.published_dirs}"
                f"metrics.jsonl, curves.png, {rundir.CHECKPOINTS}/)"]

    # --- the batch source and one step -------------------------------------------------------------

    def next_batch(self, step: int, short: bool) -> list[dict]:
        """The step's accumulation_steps micro-batches, from the iterator of the step's phase."""
        cfg = self.cfg
        iterator = self.short_iterator if short else self.iterator
        batches = [iterator.next_batch() for _ in range(cfg.accumulation_steps)]  # the step's micro-batches
        if cfg.control_shuffle_labels:
            shuffle_rng = np.random.default_rng([cfg.seed, step, 7])
            batches = [shuffle_mlm_labels(b, shuffle_rng) for b in batches]
        return batches

    def loss_grads_metrics(self, batches: list[dict], rng) -> tuple:
        """The micro-batches' loss and gradients taken as one batch (train/pretraining_step.py),
        and their metrics with the real tokens."""
        loss, grads, metrics = pretraining_loss(self.model, batches, rng, self.cfg.objective)
        return loss, grads, {**metrics.sums(), "tokens": (sum(int(b["input_mask"].sum()) for b in batches), 1)}

    # --- evaluation --------------------------------------------------------------------------------

    def evaluate(self, step: int) -> dict:
        """The evaluator on the current model, kept as last_eval ({} without a held-out set)."""
        if self.evaluator is None:
            return {}
        self.last_eval = self.evaluator.evaluate(self.model)
        return self.last_eval._asdict()

    # --- checkpoints (loop/checkpoints.py writes and reads them) -----------------------------------

    def state_dict(self) -> dict:
        """The run's part of trainer_state.json: the iterators, the last evaluation."""
        return {"iterator": self.iterator.state_dict(),
                "short_iterator": self.short_iterator.state_dict() if self.short_iterator else None,
                "last_eval": self.last_eval._asdict() if self.last_eval else None}

    def load_state_dict(self, state: dict, ckpt: Path) -> None:
        """The model, the iterators and the last evaluation of a checkpoint."""
        state_file = ckpt / rundir.STATE_FILE
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
            int(state["short_steps"])  # the loop reads it; a state without it is damaged
        if "total_steps" not in state:
            raise ValueError(f"{state_file} has no total_steps")
        if state.get("last_eval"):
            result_type = self.evaluator.result_type if self.evaluator is not None else EvalResult
            last = state["last_eval"]
            needed = set(result_type._fields) - set(result_type._field_defaults)
            if not isinstance(last, dict) or not needed <= set(last) <= set(result_type._fields) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in last.values()):
                raise ValueError(f"{state_file}: last_eval is {last!r:.200}, expected an object with "
                                 f"{', '.join(result_type._fields)}")
            self.last_eval = result_type(**last)

    # --- the time budget (minibert/loop/budget.py) -------------------------------------------------

    def probe_times(self, passes: int = 16) -> tuple[float, float, float]:
        """The probe a budget (steps 0) fits the schedule from before the first step (the loop's
        Budget.fit asks it once) -> (full-length step, evaluation, short step) seconds: the step
        time (probe_step_seconds; with a short phase, both lengths are timed) and an estimate of
        an evaluation (a third of a training step's time per held-out batch)."""
        cfg = self.cfg
        full = self.probe_step_seconds(self.data.train, cfg.batch_size, passes)
        short = full
        if self.short_iterator is not None:
            short = self.probe_step_seconds(self.data.short_train, cfg.short_phase()[1], passes)
        eval_time = 0.0
        if self.heldout is not None:
            per_batch = full / cfg.accumulation_steps  # a step computes accumulation_steps batches
            eval_time = per_batch / 3 * self.heldout["input_ids"].shape[0] / cfg.batch_size
        return full, eval_time, short

    def probe_step_seconds(self, data_dir: Path, batch_size: int, passes: int) -> float:
        """Seconds per training step (budget.probe_seconds) from forward+backward passes on one
        held-aside batch of `data_dir` (times the accumulation_steps micro-batches a step
        computes); the parameters are not touched."""
        cfg = self.cfg
        probe = BatchIterator(str(data_dir), batch_size, cfg.seed + 99, masking=cfg.masking, vocab=cfg.vocab,
                              mask_shares=cfg.mask_shares).next_batch()

        def step():
            _, grads = self.model.loss_and_grads(probe, train=self.family.dropout_on(cfg),
                                                 rng=np.random.default_rng(0), objective=cfg.objective)
            clip_by_global_norm(grads, cfg.clip_norm)

        return budget.probe_seconds(step, passes) * cfg.accumulation_steps
