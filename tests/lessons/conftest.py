"""Start the lessons the collected tests need in the background once collection is done
(tests/lessons/lesson_runs.py says why)."""
from __future__ import annotations

from pathlib import Path

from lesson_runs import ROOT, start_in_background


def _lesson_of(item) -> Path | None:
    """The lesson a collected test of this folder runs (its `path` or `lesson` parameter), if it calls
    run_lesson at all."""
    function = getattr(item, "function", None)
    if function is None or "run_lesson" not in function.__code__.co_names:
        return None
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "path" in params:
        return Path(params["path"])
    if "lesson" in params:
        return ROOT / "lessons" / f"{params['lesson']}.py"
    return None


def pytest_collection_finish(session):
    here = Path(__file__).resolve().parent
    mine = [item for item in session.items if Path(str(item.fspath)).resolve().parent == here]
    wanted = [p for p in map(_lesson_of, mine) if p is not None and p.exists()]
    if wanted and not session.config.option.collectonly:
        start_in_background(wanted)
