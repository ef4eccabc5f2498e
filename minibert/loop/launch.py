"""A run's life, one function for every command: `launch`.

    job = Job(dir=out, command="train-xlnet", resume=False, overwrite=args.overwrite)
    outcome = launch(job, lambda where: XLNetRun(..., where))   # -> Outcome(code, run, loop, error)
    return outcome.code

Every training command is parse -> build settings -> make the run -> launch. `launch` does, in
this order and nowhere else:

    lock        one writer per run directory (rundir.RunLock)
    guard       a fresh run may start only where nothing would be lost (rundir.check_run_dir)
    make        the run (`make_run(where)`: model, data, optimizer; writes nothing yet). A fresh
                run whose directory holds something (an old run, --overwrite) is made in a
                sibling folder, trained there to its first checkpoint (one step), then swapped
                in by one atomic exchange of the two folders and trained on in place: until the
                exchange, any failure (a setting, the data, NaN at the first step, a crash, a
                kill) leaves the old folder's bytes as they were, and nothing of the old run
                survives in the new one. An input inside the directory is refused first.
    clean       what a save cut off by a kill left (rundir.clean_interrupted_saves)
    start       a fresh run writes its run.json (run.start()) and the loop's state starts
                (LoopState.start, the time budget fitted from the run's probe); a resumed run
                reads its newest checkpoint (loop/checkpoints.load_checkpoint)
    train       loop/engine.run, the one place it is called
    finish      the run's closing work and lines (run.finish(loop): the model card, the last
                evaluation's summary, ...), and the exit code: 0, 130 after Ctrl-C, 1 for an
                error (one line on stderr)

A launched run is a loop/engine.py run with four members more:
    start()              a fresh run's files (run.json), after the guard and the cleaning
    opening(loop, resumed) -> [str]  the lines that describe the run once its loop state exists
    finish(loop) -> [str]   what the run does when the loop returned, and the lines that say how
                         it ended (printed whatever `verbose` says: a script reads the last one)
    moved(dir)           the run now lives in `dir` (the exchange above): it writes there from now
"""
from __future__ import annotations

import contextlib
import dataclasses
import sys
from pathlib import Path
from typing import Any, Callable

from minibert.io import outputs
from minibert.io.textio import error_line
from minibert.loop import budget, checkpoints, engine, rundir
from minibert.loop.state import LoopState
from minibert.loop.step import TrainingAborted, TrainingDiverged


@dataclasses.dataclass(frozen=True)
class Job:
    """What a command asks of the launcher: where, which command's run, fresh or resumed, and what
    the guard allows."""
    dir: Path
    command: str  # run.json's "command": the guard refuses a directory that holds another command's run
    resume: bool = False
    overwrite: bool = False  # replace whatever the directory holds
    replaceable: bool = False  # a finished run of `command` is replaced without --overwrite (it re-runs)
    max_steps: int | None = None  # pause after this many steps (--max-steps-this-run)
    verbose: bool = True
    resume_command: str = ""  # what the guard's message says continues the run
    differs: Callable[[dict], list[str]] | None = None  # the saved settings that differ (the guard's message)
    inputs: tuple = ()  # (option, path) of what the run reads: none may lie inside `dir`, which a fresh run replaces

    def check_inputs(self) -> None:
        """Refuse an input that lies inside the folder a fresh run writes: replacing what it
        holds would delete the input (an init checkpoint, a vocabulary, the data)."""
        if not self.dir.is_dir():  # nothing lies inside a folder that is not there (a file: the lock says so)
            return
        for flag, path in self.inputs:
            if path and str(path).lower() != "none" and outputs.inside(path, self.dir):
                raise ValueError(f"{flag} {path} lies inside {self.dir}, the folder this run writes (and replaces "
                                 f"what it holds); nothing was written. Move it out, or choose another --out")

    def guard(self) -> None:
        """Before a fresh run writes anything: refuse a directory whose contents would be lost
        (rundir.check_run_dir)."""
        rundir.check_run_dir(self.dir, self.command, overwrite=self.overwrite, replaceable=self.replaceable,
                             resume=self.resume_command, differs=self.differs)


@dataclasses.dataclass
class Outcome:
    """How a launch ended: the exit code, the run and its loop state (None when it failed before
    the loop began), the error that stopped it."""
    code: int
    run: Any = None
    loop: LoopState | None = None
    error: BaseException | None = None


def launch(job: Job, make_run: Callable[[Path], Any]) -> Outcome:
    """The run's whole life (see the module docstring) -> its Outcome. `make_run(where)` makes the
    run, writing into the folder `where`. Errors are caught here, said in one line on stderr and
    turned into the exit code."""
    say = (lambda line: print(line, flush=True)) if job.verbose else (lambda line: None)
    try:
        if job.max_steps is not None and job.max_steps < 1:  # a pause at the step it started from
            raise ValueError(f"--max-steps-this-run must be at least 1, got {job.max_steps}")
        if not job.resume:
            job.check_inputs()
        with rundir.RunLock(job.dir):
            if not job.resume:
                job.guard()
            replacing = not job.resume and rundir.holds_files(job.dir)
            staging = rundir.staging_dir(job.dir) if replacing else None
            try:
                # a run that replaces another is built beside it, under a lock of its own (after the
                # exchange, the run's own lock)
                with rundir.RunLock(staging) if staging else contextlib.nullcontext():
                    run = make_run(staging or job.dir)
                    for p in rundir.clean_interrupted_saves(run.settings.dir):
                        say(f"removed {p}, left by a save that was cut off")
                    loop = begin(run, job.resume, say)
                    for line in run.opening(loop, job.resume):
                        say(line)
                    if staging:
                        engine.run(run, loop, 1)  # to its first checkpoint (a pause after one step), then
                        rundir.exchange(staging, job.dir)  # it takes the old run's place, in one step
                        replacing = False
                        rundir.discard(staging)  # the old run, now under the staging name
                        run.moved(job.dir)
                        rest = None if job.max_steps is None else job.max_steps - 1
                        if loop.status == "paused" and rest != 0:
                            engine.run(run, loop, rest)
                    else:
                        engine.run(run, loop, job.max_steps)
                    for line in run.finish(loop):
                        print(line, flush=True)
            finally:
                if replacing:  # it failed before its first checkpoint: the old run stays as it was
                    rundir.discard(staging)
    except BaseException as e:
        return failed(e)
    return Outcome(130 if loop.status == "interrupted" else 0, run, loop)


def begin(run, resume: bool, say: Callable[[str], None] = lambda line: None) -> LoopState:
    """The loop's state of a made run: a resumed run's from its newest checkpoint; a fresh run
    writes its files (run.start()) and starts at step 0, its schedule fitted to the budget when
    the run timed a probe."""
    if resume:
        loop = checkpoints.load_checkpoint(run)
        say(f"resumed {run.settings.dir} at step {loop.step}/{loop.total_steps}")
        return loop
    run.start()
    loop = LoopState.start(run.settings)
    if isinstance(loop.schedule, budget.Budget):
        line = loop.schedule.fit()  # from the run's probe, before the first step (without one: the first steps)
        if line:
            say(line)
    return loop


def failed(e: BaseException) -> Outcome:
    """The exit code and the one line on stderr of a run that ended early: 1 for an error (a bad
    setting or file, a full disk, divergence), 130 for Ctrl-C."""
    if isinstance(e, KeyboardInterrupt):  # before the loop started (data, calibration): nothing to save
        print("\ninterrupted before training started; nothing saved", file=sys.stderr)
        return Outcome(130, error=e)
    if isinstance(e, TrainingAborted):
        print(f"\n{e}", file=sys.stderr)
        return Outcome(130, error=e)
    if isinstance(e, (ValueError, OSError, TrainingDiverged)):
        print(error_line(e), file=sys.stderr)
        return Outcome(1, error=e)
    raise e
