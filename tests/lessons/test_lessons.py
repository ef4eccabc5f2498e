"""Every lesson is also a test: each lessons/NN_*.py runs top to bottom in its own process, in
fast mode (MINIBERT_FAST=1) and headless (MPLBACKEND=Agg), and must exit 0. A failed assert in
a lesson shows up here with the lesson's output.

The lessons run as shipped: every exercise is a stub, so each lesson must say so and go on with
the reference solution from lessons/solutions/. `run_lesson` also asks the lessons to log how
every exercise was graded (MINIBERT_GRADING_LOG), with the library's answer pasted in where there is
one (MINIBERT_SHORTCUTS, tests/lessons/shortcuts/); tests/lessons/test_exercises.py reads those logs,
from the same runs (one run per lesson per pytest session, started in the background as soon as
the session is collected: tests/lessons/lesson_runs.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
from lesson_runs import LESSONS, ROOT, TIMEOUT_S, WITH_EXERCISES, run_lesson


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
