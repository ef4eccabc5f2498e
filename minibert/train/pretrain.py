"""`train()`: start or resume a pretraining run (train/trainer.py's Trainer, with the family
its model_type names: BERT and ALBERT there, ELECTRA in train/electra.py) on the loop."""
from __future__ import annotations

from minibert.loop import budget, checkpoints, engine, rundir
from minibert.loop.state import LoopState
from minibert.data.pretraining_data import DEFAULT_FLAGS
from minibert.train.config import TrainConfig
from minibert.train.runs import check_run_dir
from minibert.train.trainer import Trainer


def train(cfg: TrainConfig, resume: bool = False, overwrite: bool = False, verbose: bool = True,
          max_steps_this_run: int | None = None, created_by: str = "train") -> Trainer:
    """Run (or resume) a training run; returns the Trainer, with .loop the loop's state at the end
    (.loop.status says how it ended). The run directory is locked for the whole run
    (loop/rundir.RunLock: one writer per directory)."""
    cfg.validate()
    if max_steps_this_run is not None and max_steps_this_run < 1:  # was taken: a pause at the step it started from
        raise ValueError(f"--max-steps-this-run must be at least 1, got {max_steps_this_run}")
    with rundir.RunLock(cfg.run_dir):
        return _train(cfg, resume, overwrite, verbose, max_steps_this_run, created_by)


def _train(cfg: TrainConfig, resume: bool, overwrite: bool, verbose: bool, max_steps_this_run: int | None,
           created_by: str) -> Trainer:
    if not resume:
        check_run_dir(cfg, overwrite, created_by)  # before writing anything
    trainer = Trainer(cfg, verbose=verbose, created_by=created_by)
    say = (lambda line: print(line, flush=True)) if verbose else (lambda line: None)
    for p in rundir.clean_interrupted_saves(cfg.run_dir):
        say(f"removed {p}, left by a save that was cut off")
    if resume:
        loop = checkpoints.load_checkpoint(trainer, f" (the run stopped before its first save, every "
                                                    f"{cfg.checkpoint_interval} steps)")
        say(f"resumed {trainer.dir} at step {loop.step}/{loop.total_steps}")
    else:
        if not cfg.steps:  # fitted to the time budget
            trainer.start_budget()
        loop = LoopState.start(trainer.settings)
        if loop.budget is not None:
            say(budget.fit_message(loop.budget, loop.budget.initial(), loop.total_steps, first=True))
        trainer.start_fresh()
        m = trainer.model
        note = trainer.family.model_note(cfg, m)
        say(f"model: {m.num_parameters:,} parameters ({m.config.num_hidden_layers} layers, hidden "
                    f"{m.config.hidden_size}, {m.config.num_attention_heads} heads, vocab {m.config.vocab_size}"
                    f"{note}); {trainer.iterator.num_examples:,} training sequences of {cfg.max_seq_length} "
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
                    f"{cfg.warmup_steps}, {loop.total_steps} steps"
                    + (f", budget {cfg.minutes:g} min" if cfg.minutes else ""))
        if trainer.short_iterator is not None:
            T_short, B_short, _ = cfg.short_phase()
            say(f"sequence-length warm-up: steps 1-{loop.short_steps_of(trainer.settings)} on "
                        f"{trainer.short_iterator.num_examples:,} sequences of {T_short} tokens, batch {B_short}")
    trainer.loop = loop
    engine.run(trainer, loop, max_steps_this_run)
    return trainer
