"""`train()`: start or resume a pretraining run (train/trainer.py's Trainer, with the family
its model_type names: BERT and ALBERT there, ELECTRA in train/electra.py) through the one
launcher (loop/launch.py)."""
from __future__ import annotations

from minibert.loop.launch import Job, Outcome, failed, launch
from minibert.train.config import TrainConfig, flatten
from minibert.train.trainer import Trainer


def pretraining_job(cfg: TrainConfig, resume: bool = False, overwrite: bool = False, verbose: bool = True,
                    max_steps_this_run: int | None = None, created_by: str = "train") -> Job:
    """What the launcher is told of a pretraining run. train-tiny replaces a finished run it made
    itself (it re-runs into runs/tiny); an unfinished one is kept for --resume."""
    new = cfg.flat()

    def differs(saved: dict) -> list[str]:  # the settings named in the guard's message
        old = flatten(saved)
        return sorted(k for k, v in new.items() if k in old and old[k] != v and k != "out")

    command = created_by if created_by == "train-tiny" else "train"
    inputs = (*(("--corpus", f) for f in cfg.corpus), *(("--heldout", f) for f in cfg.heldout), ("--vocab", cfg.vocab),
              ("--set data_cache", cfg.data_cache))
    return Job(cfg.run_dir, created_by, resume=resume, overwrite=overwrite, replaceable=created_by == "train-tiny",
               max_steps=max_steps_this_run, verbose=verbose,
               resume_command=f"python -m minibert {command} --resume {cfg.run_dir}", differs=differs, inputs=inputs)


def launch_pretraining(cfg: TrainConfig, resume: bool = False, overwrite: bool = False, verbose: bool = True,
                       max_steps_this_run: int | None = None, created_by: str = "train") -> Outcome:
    """Run (or resume) a pretraining run -> the launcher's Outcome (its exit code, the Trainer and
    the loop's state at the end; an error is said on stderr). The settings are validated here,
    once, before the run directory is locked."""
    try:
        cfg.validate()
    except ValueError as e:
        return failed(e)
    return launch(pretraining_job(cfg, resume, overwrite, verbose, max_steps_this_run, created_by),
                  lambda where: Trainer(cfg, verbose=verbose, created_by=created_by, dir=where))


def train(cfg: TrainConfig, resume: bool = False, overwrite: bool = False, verbose: bool = True,
          max_steps_this_run: int | None = None, created_by: str = "train") -> Outcome:
    """launch_pretraining for Python callers: an error is raised, not turned into an exit code.
    -> the Outcome: .run the Trainer, .loop the loop's state at the end (.loop.status says how
    it ended)."""
    outcome = launch_pretraining(cfg, resume, overwrite, verbose, max_steps_this_run, created_by)
    if outcome.error is not None:
        raise outcome.error
    return outcome
