"""One run of each lesson per pytest session, shared by tests/lessons/test_lessons.py and
tests/lessons/test_exercises.py, and started early.

A lesson runs in its own process, so it can run while the rest of the suite runs in this one:
once collection is done (tests/lessons/conftest.py), a background thread runs the lessons the
collected tests will ask for, one at a time, in the order they will be asked for. On two cores
that overlaps the ~2 minutes of lessons with the in-process tests instead of adding them. A test
that asks for a lesson waits for its run; a lesson nobody queued runs in the foreground. Each run
is the same command with the same environment either way, so the results do not depend on where
it ran."""
from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import NamedTuple

from corpora import REPO

ROOT = REPO
LESSONS = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.py"))
WITH_EXERCISES = [p for p in LESSONS if (ROOT / "lessons" / "solutions" / p.name).exists()]
TIMEOUT_S = 120  # per lesson; each aims at a few seconds (the limit is 60 s)
SHORTCUTS = Path(__file__).resolve().parent / "shortcuts"  # the library's answers, pasted in (graded and refused)
MISTAKES = Path(__file__).resolve().parent / "mistakes"  # plausible wrong answers (graded, and diagnosed)
_LOG_DIR = Path(tempfile.mkdtemp(prefix="minibert-grading-"))
atexit.register(shutil.rmtree, _LOG_DIR, True)


class LessonRun(NamedTuple):
    returncode: int | None  # None: timed out
    stdout: str
    stderr: str
    grading: list[dict]  # one record per exercise (lessons/course.py, Exercises._log)


def _run(path: Path) -> LessonRun:
    """Run one lesson as shipped (stubs untouched, no MINIBERT_SOLUTIONS), fast and headless."""
    log = _LOG_DIR / f"{path.stem}.jsonl"
    log.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "MINIBERT_SOLUTIONS"}
    env.update(MINIBERT_FAST="1", MPLBACKEND="Agg", MINIBERT_GRADING_LOG=str(log), MINIBERT_SHORTCUTS=str(SHORTCUTS),
               MINIBERT_MISTAKES=str(MISTAKES))
    proc = subprocess.Popen([sys.executable, str(path)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _running.add(proc)
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        return LessonRun(None, stdout, stderr, [])
    finally:
        _running.discard(proc)
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []
    return LessonRun(proc.returncode, stdout, stderr, records)


_runs: dict[Path, LessonRun] = {}  # finished runs
_queued: dict[Path, threading.Event] = {}  # lessons the background thread will run, set when done
_running: set[subprocess.Popen] = set()
_lock = threading.Lock()


@atexit.register
def _stop_running_lessons() -> None:
    """An interrupted session (Ctrl-C, -x) leaves no lesson running behind it."""
    for proc in list(_running):
        proc.kill()


def start_in_background(paths: list[Path]) -> None:
    """Queue these lessons (in this order) on one background thread; called once collection is done."""
    with _lock:
        todo = [p for p in dict.fromkeys(paths) if p not in _runs and p not in _queued]
        for p in todo:
            _queued[p] = threading.Event()
    if not todo:
        return

    def work():
        for p in todo:
            try:
                _runs[p] = _run(p)
            except Exception as e:  # noqa: BLE001 - reported by the test that asks for this lesson
                _runs[p] = LessonRun(-1, "", f"the background run of {p.name} failed: {e!r}", [])
            _queued[p].set()

    threading.Thread(target=work, name="lessons", daemon=True).start()


def run_lesson(path: Path) -> LessonRun:
    """The session's one run of this lesson: waits for it if it is queued, else runs it here."""
    path = Path(path)
    with _lock:
        done = _queued.get(path)
    if done is not None:
        done.wait()
    if path not in _runs:
        _runs[path] = _run(path)
    return _runs[path]
