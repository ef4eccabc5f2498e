"""Every lesson is also a test: each lessons/NN_*.py runs top to bottom in its own process, in
fast mode (MINIBERT_FAST=1) and headless (MPLBACKEND=Agg), and must exit 0. A failed assert in
a lesson shows up here with the lesson's output."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.py"))
TIMEOUT_S = 120  # per lesson; each aims at a few seconds (the limit is 60 s)


def test_lessons_exist():
    assert len(LESSONS) >= 1, f"no lessons/NN_*.py found under {ROOT / 'lessons'}"


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_lesson_runs(path: Path):
    env = dict(os.environ, MINIBERT_FAST="1", MPLBACKEND="Agg")
    try:
        proc = subprocess.run([sys.executable, str(path)], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{path.name} took longer than {TIMEOUT_S} s")
    assert proc.returncode == 0, (
        f"{path.name} exited {proc.returncode}\n--- stdout (tail)\n{proc.stdout[-3000:]}"
        f"\n--- stderr (tail)\n{proc.stderr[-3000:]}")
