"""What the lessons share: where pictures go, how they are shown, and how exercises are graded.

Not a lesson (lessons are `NN_*.py`) and not part of the minibert package: exercise scaffolding
stays out of the library. Every lesson does `from course import ...`; a lesson run as a script
finds this file next to it, a notebook in `lessons/` finds it in its working directory.

Pictures: `show(fig, "05_attention.png")` saves the figure under `lessons/out/`, then shows it
inline when the lesson runs as a notebook (Jupyter, VS Code, or `python -m minibert notebooks
--execute`) and closes it when the lesson runs as a script, so no window ever opens.

Exercises: each lesson ends with functions for you to write. They ship as stubs that raise
`NotImplementedError`; the reference solutions are in `lessons/solutions/NN_*.py`, one
deliberate step away. `Exercises.grade` runs a lesson's check on your function:

- your function passes: the lesson says so and goes on with it;
- it fails: the lesson stops and names the check that failed and by how much;
- it is still the stub: the lesson says so and goes on with the reference solution (this is
  how `make lessons` and the tests run the lessons as shipped);
- `MINIBERT_SOLUTIONS=1`: the reference solution is graded and used even where you wrote yours.

`MINIBERT_GRADING_LOG=file` (the tests set it) also grades the stub and a deliberately wrong
version of the solution (its result moved by 50%), and appends one JSON line per exercise. For a
backward graded path by path (`grade(..., paths=("dq", "dk", "dv"))`, each check named after the
gradient it judges), it also makes each returned gradient wrong on its own and logs which checks
fail: tests/lessons/test_exercises.py asserts that exactly that path's checks do.

What a grader compares with: numbers (numerical gradients, values worked out by hand, arrays the
lesson computed earlier), never the library function that is the exercise's answer. `close`
compares floats with a tolerance, `entries`/`mask` compare exact arrays and name the first wrong
entry and the rule it breaks, `equal` compares ids and strings, `true` a known-answer condition.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np

HERE = Path(__file__).resolve().parent  # lessons/
ROOT = HERE.parent  # the repository
OUT = HERE / "out"  # pictures and files the lessons write (git-ignored)
SOLUTIONS = HERE / "solutions"
FAST = os.environ.get("MINIBERT_FAST") == "1"  # CI and the tests: smaller sizes, fewer steps
OUT.mkdir(exist_ok=True)

# ---------------------------------------------------------------------------------------------
# pictures

# matplotlib backends that draw into a notebook's output cells; minibert's own notebook runner
# (`python -m minibert notebooks --execute`) registers itself as "module://minibert.tools.notebooks"
INLINE_BACKENDS = ("inline", "ipympl", "widget", "nbagg", "minibert.tools.notebooks")


def in_notebook() -> bool:
    """True when figures display in a notebook's output (matplotlib's inline backend)."""
    if "matplotlib" not in sys.modules:
        return False
    import matplotlib

    backend = str(matplotlib.get_backend()).lower()
    return any(name in backend for name in INLINE_BACKENDS)


def show(fig, filename: str, **savefig_kwargs) -> None:
    """Save `fig` to lessons/out/<filename>, then show it inline in a notebook, or close it in a
    script (no window opens, and figures do not pile up in memory). Returns None, so that a
    notebook cell ending with show(...) displays the picture and no return value."""
    import matplotlib.pyplot as plt

    path = OUT / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, **savefig_kwargs)
    print(f"picture: {path.relative_to(ROOT)}")
    if in_notebook():
        plt.show()  # the inline backend displays the open figures and then closes them
    else:
        plt.close(fig)


# ---------------------------------------------------------------------------------------------
# grading: results of the checks


class Result(NamedTuple):
    """One check of an exercise: its name, whether it passed, and what was measured."""

    name: str
    ok: bool
    detail: str

    def row(self) -> str:
        return f"    {'ok  ' if self.ok else 'FAIL'}  {self.name:<46} {self.detail}"


def close(name: str, got, want, rtol: float = 1e-5, atol: float = 1e-8, float32: bool = False) -> Result:
    """gradcheck.compare's verdict (every entry |got - want| <= atol + rtol * |want|), reported
    with the largest difference and, when it fails, where it is and the two values there.
    `float32=True`: the answer is computed in float32 (rtol and atol should say so, e.g. 1e-4 and
    1e-6), and a passing row says that it passed at float32 precision."""
    from minibert import gradcheck

    try:
        a = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError) as e:
        return Result(name, False, f"cannot read the answer as numbers ({e}); got {_short(got)}")
    b = np.asarray(want, dtype=np.float64)
    if a.shape != b.shape:
        return Result(name, False, f"shape {a.shape}, expected {b.shape}")
    if not np.all(np.isfinite(a)):
        return Result(name, False, f"{int(np.sum(~np.isfinite(a)))} entries are nan or inf")
    check = gradcheck.compare(name, a, b, rtol, atol, verbose=False)
    # max_rel over the entries the verdict judges by their relative error (rtol |expected| at
    # least atol): a smaller entry is judged by atol alone, and its relative error says nothing
    # (a float32 gradient entry of 1e-9 next to a reference of 3e-9 is fine, yet "relative error 0.5")
    big = np.abs(b) * rtol >= atol if rtol > 0 else np.abs(b) > 0
    rel = np.abs(a - b)[big] / np.maximum(np.abs(a[big]) + np.abs(b[big]), 1e-300)
    detail = f"max_abs {check.max_abs:.1e}, max_rel {float(rel.max()):.1e}" if rel.size else \
        f"max_abs {check.max_abs:.1e} (no entry above atol / rtol)"
    if check.ok and float32:  # say which tolerance it met, so that the row reads as the pass it is
        detail += f": ok at float32 precision (rtol {rtol:g}, atol {atol:g})"
    if not check.ok:
        diff = np.abs(a - b)  # same shape as want
        allowed = atol + rtol * np.abs(b)
        worst = np.unravel_index(int(np.argmax(diff - allowed)), diff.shape) if diff.ndim else ()
        where = f" at index {tuple(int(i) for i in worst)}" if diff.ndim else ""
        detail += (f"; {int(np.sum(diff > allowed))} of {diff.size} entries off{where}: got {a[worst]:.6g}, "
                   f"expected {b[worst]:.6g} (allowed |diff| <= {atol:g} + {rtol:g} |expected|)")
    return Result(name, check.ok, detail)


def entries(name: str, got, want, rule: Callable[[tuple], str]) -> Result:
    """An array of exact values (booleans of a mask, ids, labels) against the expected one. When
    they differ, says how many entries are wrong, the first wrong index, what it should be, and
    the rule that decides it: `rule(index)` returns that rule in words for this index (e.g.
    "query 2 reads key 0 only if rank[0] < rank[2]: 3 < 1 is false")."""
    want = np.asarray(want)
    try:
        g = np.asarray(got)
    except (TypeError, ValueError) as e:
        return Result(name, False, f"cannot read the answer as an array ({e})")
    if g.shape != want.shape:
        return Result(name, False, f"shape {g.shape}, expected {want.shape}")
    if want.dtype == bool:
        if g.dtype != bool and not np.all(np.isin(g, (0, 1))):
            return Result(name, False, f"entries other than True/False (or 1/0): {_short(np.unique(g))}")
        g = g.astype(bool)
    wrong = np.argwhere(g != want)
    if not len(wrong):
        return Result(name, True, f"all {want.size} entries right")
    first = tuple(int(i) for i in wrong[0])
    return Result(name, False, f"{len(wrong)} of {want.size} entries wrong; the first at {first}: got "
                               f"{_plain(g[first])}, expected {_plain(want[first])}, because {rule(first)}")


def mask(name: str, got, want, rule: Callable[[tuple], str]) -> Result:
    """`entries` for a boolean mask (True/False or 1/0)."""
    return entries(name, got, np.asarray(want, dtype=bool), rule)


def equal(name: str, got, want) -> Result:
    """Exact equality, for ids, tokens, counts and shapes (never for computed floats)."""
    ok = _plain(got) == _plain(want)
    return Result(name, ok, "" if ok else f"got {_short(got)}, expected {_short(want)}")


def true(name: str, ok, measured: str = "", hint: str = "") -> Result:
    """A known-answer condition, with what was measured, and a hint shown when it fails."""
    detail = "; ".join(part for part in (measured, "" if ok else hint) if part)
    return Result(name, bool(ok), detail)


def _plain(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (tuple, list)):
        return [_plain(e) for e in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def _short(x, limit: int = 160) -> str:
    text = repr(_plain(x))
    return text if len(text) <= limit else text[:limit] + " ..."


# ---------------------------------------------------------------------------------------------
# grading: running a check on the learner's function, the solution, and a wrong version


class Stub(Exception):
    """The exercise is still the shipped stub (it raised NotImplementedError)."""


class ExerciseFailed(AssertionError):
    """Your function ran and a check failed; the message says which and by how much."""


def _as_results(value) -> list[Result]:
    items = value if isinstance(value, (list, tuple)) and not isinstance(value, Result) else [value]
    out = []
    for r in items:
        if isinstance(r, Result):
            out.append(r)
        elif hasattr(r, "max_abs") and hasattr(r, "ok"):  # a gradcheck.Check
            out.append(Result(r.name, bool(r.ok), f"max_abs {r.max_abs:.1e}, max_rel {r.max_rel:.1e}"))
        else:
            raise TypeError(f"a check returned {type(r).__name__}; expected course.Result or gradcheck.Check")
    return out


def run_check(check: Callable[[Callable], Any], fn: Callable) -> list[Result]:
    """Run `check(fn)`. Raises Stub if fn raised NotImplementedError; any other exception of
    fn becomes one failed Result naming it and the line it came from."""
    try:
        return _as_results(check(fn))
    except NotImplementedError as e:
        raise Stub(str(e) or "NotImplementedError") from None
    except Exception as e:  # the learner's code crashed inside the check: say where
        frames = [f for f in traceback.extract_tb(e.__traceback__)  # the last line outside libraries
                  if "site-packages" not in f.filename and Path(f.filename).name != "course.py"]
        where = f" (line {frames[-1].lineno}: {frames[-1].line})" if frames else ""
        return [Result("runs without an error", False, f"{type(e).__name__}: {e}{where}")]


def _perturb(value):
    """A wrong answer of the same shape: numbers moved by 50% (+0.1), ints +1, bools flipped,
    strings changed. The checks must catch it."""
    if isinstance(value, (bool, np.bool_)):
        return not value
    if isinstance(value, (int, np.integer)):
        return value + 1
    if isinstance(value, (float, np.floating)):
        return value * 1.5 + 0.1
    if isinstance(value, str):
        return value + "?"
    if isinstance(value, np.ndarray):
        if value.dtype == bool:
            return ~value
        if np.issubdtype(value.dtype, np.integer):
            return value + 1
        if np.issubdtype(value.dtype, np.floating):
            return value * 1.5 + 0.1
    if isinstance(value, tuple):
        return tuple(_perturb(v) for v in value)
    if isinstance(value, list):
        return [_perturb(v) for v in value]
    if isinstance(value, dict):
        return {k: _perturb(v) for k, v in value.items()}
    return value


class Exercises:
    """The exercises of one lesson. `grade(number, fn, check)` returns the function the lesson
    goes on with: yours if it passes, the reference solution while yours is a stub."""

    def __init__(self, lesson: str):
        self.lesson = lesson  # e.g. "00_numerical_gradients"
        self.solution_path = SOLUTIONS / f"{lesson}.py"
        self._module = None

    def solution(self, name: str) -> Callable:
        """The reference solution `name` from lessons/solutions/<lesson>.py (loaded on first use)."""
        if self._module is None:
            spec = importlib.util.spec_from_file_location(f"solutions_{self.lesson}", self.solution_path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # Numba's on-disk cache finds compiled functions by module
            spec.loader.exec_module(module)
            self._module = module
        return getattr(self._module, name)

    def grade(self, number: int, fn: Callable, check: Callable[[Callable], Any],
              paths: tuple[str, ...] | None = None) -> Callable:
        """`paths`: for a backward that returns one gradient per path (e.g. ("dq", "dk", "dv")),
        the name of each returned item; the check names each of its checks after the item it
        judges ("dk, ..."), so that a mistake in one path fails that path's checks only (the
        grading log tests it: each item is made wrong in turn)."""
        name = fn.__name__
        title = f"exercise {number}, {name}"
        rel = self.solution_path.relative_to(ROOT).as_posix()
        log = os.environ.get("MINIBERT_GRADING_LOG")
        record: dict[str, Any] = {"lesson": self.lesson, "number": number, "name": name,
                                  "paths": list(paths) if paths else None}

        if os.environ.get("MINIBERT_SOLUTIONS") == "1":
            solution = self.solution(name)
            results = run_check(check, solution)
            self._require(results, f"{title}: the reference solution ({rel})")
            print(f"{title}: MINIBERT_SOLUTIONS=1, the reference solution from {rel} passes")
            _print_rows(results)
            record["solution"] = _summary(results)
            record["mine"] = {"skipped": "MINIBERT_SOLUTIONS=1"}
            self._log(log, record, check, solution)
            return solution

        try:
            results = run_check(check, fn)
        except Stub as stub:
            message = f"{title}: not written yet ({stub})"
            print(f"{message}; the lesson goes on with the reference solution from {rel}:")
            solution = self.solution(name)
            results = run_check(check, solution)
            self._require(results, f"{title}: the reference solution ({rel})")
            _print_rows(results)
            record["mine"] = {"ok": False, "stub": True, "message": message}
            record["solution"] = _summary(results)
            self._log(log, record, check, solution)
            return solution

        failed = [r for r in results if not r.ok]
        record["mine"] = {**_summary(results), "stub": False}
        if failed:
            _print_rows(results)
            message = _failure_message(title, failed, len(results))
            record["mine"]["message"] = message
            self._log(log, record, check, None)
            raise ExerciseFailed(message)
        print(f"{title}: passed ({len(results)} check{'s' if len(results) > 1 else ''})")
        _print_rows(results)
        self._log(log, record, check, None)
        return fn

    @staticmethod
    def _require(results: list[Result], who: str) -> None:
        failed = [r for r in results if not r.ok]
        if failed:  # a bug in the lesson or its solution, not in the learner's code
            _print_rows(results)
            raise AssertionError(_failure_message(who, failed, len(results)))

    def _log(self, log: str | None, record: dict, check, solution) -> None:
        if not log:
            return
        if "solution" not in record:
            record["solution"] = _summary(run_check(check, self.solution(record["name"])))
        wrong_fn = solution or self.solution(record["name"])

        def wrong(*args, **kwargs):
            return _perturb(wrong_fn(*args, **kwargs))

        try:
            wrong_results = run_check(check, wrong)
        except Stub as e:
            wrong_results = [Result("wrong answer", False, f"NotImplementedError: {e}")]
        wrong_failed = [r for r in wrong_results if not r.ok]
        record["wrong"] = {**_summary(wrong_results),
                           "message": _failure_message("wrong answer", wrong_failed, len(wrong_results))
                           if wrong_failed else ""}
        if record.get("paths"):  # one path wrong at a time: which checks fail?
            record["wrong_paths"] = {}
            for i, path in enumerate(record["paths"]):
                def wrong_in_one(*args, _i=i, **kwargs):
                    out = list(wrong_fn(*args, **kwargs))
                    out[_i] = _perturb(out[_i])
                    return tuple(out)

                results = run_check(check, wrong_in_one)
                record["wrong_paths"][path] = {"failed": [r.name for r in results if not r.ok],
                                               "checks": [r.name for r in results]}
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def _summary(results: list[Result]) -> dict:
    return {"ok": all(r.ok for r in results), "checks": [list(r) for r in results]}


def _print_rows(results: list[Result], prefix: str = "") -> None:
    if prefix:
        print(f"  {prefix}")
    for r in results:
        print(r.row())


def _failure_message(title: str, failed: list[Result], total: int) -> str:
    lines = [f"{title}: {len(failed)} of {total} checks failed"]
    lines += [f"  {r.name}: {r.detail}" for r in failed]
    return "\n".join(lines)
