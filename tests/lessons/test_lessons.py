"""Every lesson is also a test: each lessons/NN_*.py runs top to bottom in its own process, in
fast mode (MINIBERT_FAST=1) and headless (MPLBACKEND=Agg), and must exit 0. A failed assert in
a lesson shows up here with the lesson's output.

The lessons run as shipped: every exercise is a stub, so each lesson must say so and go on with
the reference solution from lessons/solutions/. `run_lesson` also asks the lessons to log how
every exercise was graded (MINIBERT_GRADING_LOG), with the library's answer pasted in where there is
one (MINIBERT_SHORTCUTS, tests/lessons/shortcuts/); tests/lessons/test_exercises.py reads those logs,
from the same runs (one run per lesson per pytest session)."""
from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import pytest
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


@functools.lru_cache(maxsize=None)
def run_lesson(path: Path) -> LessonRun:
    """Run one lesson as shipped (stubs untouched, no MINIBERT_SOLUTIONS), once per session."""
    log = _LOG_DIR / f"{path.stem}.jsonl"
    log.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "MINIBERT_SOLUTIONS"}
    env.update(MINIBERT_FAST="1", MPLBACKEND="Agg", MINIBERT_GRADING_LOG=str(log), MINIBERT_SHORTCUTS=str(SHORTCUTS),
               MINIBERT_MISTAKES=str(MISTAKES))
    try:
        proc = subprocess.run([sys.executable, str(path)], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        return LessonRun(None, str(e.stdout or ""), str(e.stderr or ""), [])
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []
    return LessonRun(proc.returncode, proc.stdout, proc.stderr, records)


def test_lessons_exist():
    assert len(LESSONS) >= 1, f"no lessons/NN_*.py found under {ROOT / 'lessons'}"


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_lesson_runs(path: Path):
    run = run_lesson(path)
    if run.returncode is None:
        pytest.fail(f"{path.name} took longer than {TIMEOUT_S} s")
    assert run.returncode == 0, (
        f"{path.name} exited {run.returncode}\n--- stdout (tail)\n{run.stdout[-3000:]}"
        f"\n--- stderr (tail)\n{run.stderr[-3000:]}")


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=[p.name for p in WITH_EXERCISES])
def test_lesson_says_when_it_uses_a_reference_solution(path: Path):
    """Shipped stubs are never silently replaced: the output names each one and the file used."""
    run = run_lesson(path)
    assert run.returncode == 0, f"{path.name} failed; see test_lesson_runs"
    assert run.grading, f"{path.name} graded no exercise"
    for record in run.grading:
        line = f"exercise {record['number']}, {record['name']}: not written yet"
        assert line in run.stdout, f"{path.name} did not say: {line!r}"
    assert f"lessons/solutions/{path.name}" in run.stdout


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_lesson_ends_with_a_recap_and_says_it_passed(path: Path):
    """Every lesson closes the same way: a "## Recap" text cell, then `print("lesson NN passed")`
    as its last line, and the run prints that line (so a lesson that prints it has passed)."""
    source = path.read_text(encoding="utf-8")
    last = [line for line in source.splitlines() if line.strip()][-1]
    assert last == f'print("lesson {path.name[:2]} passed")', f"{path.name} ends with {last!r}"
    assert "\n# ## Recap\n" in source, f"{path.name} has no recap"
    assert source.index("\n# ## Recap\n") > source.rindex("ex.grade("), f"{path.name}: the recap comes before the last exercise"
    run = run_lesson(path)
    assert run.returncode == 0 and f"lesson {path.name[:2]} passed" in run.stdout
