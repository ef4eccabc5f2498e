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

Graders refuse the library's answer: `grade(..., refuses=("layers.layernorm_backward",))` names
the library functions (under `minibert.`, or a bare name for a function of the lesson itself)
that compute the exercise's answer. While your function runs under grading, each of them is
swapped for a guard, as the module's attribute and wherever the lesson (or any minibert module)
holds it by name; a call from your code ends the check with "exercise N asks you to derive this;
`layers.layernorm_backward` is the library's answer". Calls from the library itself and from the
grader go through. The originals come back when the check ends, whatever happens.
`MINIBERT_SHORTCUTS=dir` (the tests set it) also grades `dir/<lesson>.py`'s functions, the
library call pasted in as the answer, and logs whether the guard refused them;
`MINIBERT_MISTAKES=dir` grades plausible wrong answers (`my_fn__label`) and logs what the grader
said about each.

What a grader compares with: numbers (numerical gradients, values worked out by hand, arrays the
lesson computed earlier), never the library function that is the exercise's answer. `close`
compares floats with a tolerance and, when they differ, `diagnose`s the kind of mistake: one of
the named mistakes the grader computed on the same inputs (`wrongs`, e.g. "dout forgotten";
`out_of_order` names a backward's other gradients), else rows that should sum to 0, a constant
factor such as 1/sqrt(HS) or 1/n, transposed, the wrong sign, a missing term; `entries`/`mask` compare exact arrays and name the first wrong entry and the
rule it breaks; `equal` compares ids and strings, and lists from their first difference; `count`
compares counts and names the part they are off by; `true` checks a known-answer condition.

Pictures of ideas (not of data): `flow` draws a column of boxes with arrows and residual
connections, for the encoder block (07) and the whole model (10).
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback
import types
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


def flow(ax, boxes, x: float = 0.5, top: float = 0.95, bottom: float = 0.05, width: float = 0.5,
         skips=(), fontsize: float = 8.5) -> list[tuple[float, float]]:
    """Draw `boxes` [(text, colour), ...] as a column from bottom to top (the papers' way: input
    at the bottom), an arrow from each to the next, and each (i, j, label) of `skips` as an arrow
    up the right side from the arrow above box i into box j (a residual connection); `width` is
    about the widest box's width. Returns each box's centre
    (x, y), for arrows between columns. Axes coordinates 0..1; the caller turns the axis off."""
    n = len(boxes)
    step = (top - bottom) / max(n - 1, 1)
    centres = [(x, bottom + i * step) for i in range(n)]
    h = min(0.6 * step, 0.12)
    for (text, colour), (cx, cy) in zip(boxes, centres):
        ax.text(cx, cy, text, ha="center", va="center", fontsize=fontsize,
                bbox=dict(boxstyle="round,pad=0.35", fc=colour, ec="0.3", lw=0.8))
    for (x0, y0), (x1, y1) in zip(centres, centres[1:]):
        ax.annotate("", xy=(x1, y1 - h / 2), xytext=(x0, y0 + h / 2), arrowprops=dict(arrowstyle="->", lw=1.0))
    for i, j, label in skips:  # out of the arrow above box i, up the right side, into box j
        (x0, y0), (_, y1) = centres[i], centres[j]
        fork, side = y0 + h / 2 + 0.02, x + width / 2 + 0.06
        ax.plot([x0, side, side], [fork, fork, y1], color="0.35", lw=0.9, ls="--")
        ax.annotate("", xy=(x + width / 2, y1), xytext=(side, y1), arrowprops=dict(arrowstyle="->", lw=0.9, color="0.35"))
        ax.text(side + 0.01, (fork + y1) / 2, label, fontsize=fontsize - 1, ha="left", va="center")
    ax.set_xlim(0, 1)  # the lines above would otherwise rescale the axes to themselves
    ax.set_ylim(0, 1)
    return centres


# ---------------------------------------------------------------------------------------------
# grading: results of the checks


class Result(NamedTuple):
    """One check of an exercise: its name, whether it passed, and what was measured."""

    name: str
    ok: bool
    detail: str

    def row(self) -> str:
        return f"    {'ok  ' if self.ok else 'FAIL'}  {self.name:<46} {self.detail}"


def close(name: str, got, want, rtol: float = 1e-5, atol: float = 1e-8, float32: bool = False,
          factors: dict[str, float] | None = None, terms: dict[str, Any] | None = None,
          zero_sum: str | None = None, wrongs: dict[str, Any] | None = None) -> Result:
    """analysis.gradcheck.compare's verdict (every entry |got - want| <= atol + rtol * |want|), reported
    with the largest difference and, when it fails, where it is and the two values there.
    `float32=True`: the answer is computed in float32 (rtol and atol should say so, e.g. 1e-4 and
    1e-6), and a passing row says that it passed at float32 precision.
    When it fails, `diagnose` says what kind of mistake it looks like: transposed, the wrong
    sign, off by one of the constant `factors` ({"1/sqrt(HS)": ...}) or by another constant,
    missing one of the `terms` ({"the mean term": array}), or rows that should sum to 0 over the
    last axis and do not (`zero_sum`: the part that makes them, e.g. "the mean term").
    `wrongs` ({words: array}): the answers that named mistakes give, computed by the grader on
    the same inputs (from numerical gradients of a forward with the mistake built in, where it
    can); an answer that equals one of them is told the words, whatever its shape. `terms` and
    `wrongs` may also be functions that return the dict: they run only when the check fails."""
    from minibert.analysis import gradcheck

    try:
        a = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError) as e:
        return Result(name, False, f"cannot read the answer as numbers ({e}); got {_short(got)}")
    b = np.asarray(want, dtype=np.float64)
    if a.shape != b.shape:
        detail = f"shape {a.shape}, expected {b.shape}"
        named = _named_wrong(a, wrongs, rtol, atol)
        if named:
            return Result(name, False, f"{detail}. {named}")
        if a.ndim >= 2 and a.shape[:-2] + a.shape[-2:][::-1] == b.shape:
            if np.all(np.isfinite(a)) and np.allclose(np.swapaxes(a, -1, -2), b, rtol=max(10 * rtol, 1e-6),
                                                      atol=max(10 * atol, 1e-9 * float(np.abs(b).max(initial=0)))):
                detail += "; it is the expected answer transposed (the last two axes swapped)"
            else:
                detail += ("; the expected shape with its last two axes swapped, but not the expected answer "
                           "transposed: another array in its place?")
        return Result(name, False, detail)
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
        diagnosis = diagnose(a, b, rtol, atol, factors, terms, zero_sum, wrongs)
        if diagnosis:
            detail += f". {diagnosis}"
    return Result(name, check.ok, detail)


COMMON_FACTORS = {"2": 2.0, "-1": -1.0}  # always tried: a doubled or a negated answer


def _now(table):
    """A dict of terms or wrong answers, or the function that computes it (run now)."""
    return table() if callable(table) else table


def _named_wrong(got: np.ndarray, wrongs: dict[str, Any] | None, rtol: float, atol: float) -> str:
    """The words of the first of `wrongs` ({words: the answer that mistake gives}) that `got`
    equals (to ten times the tolerance), or ""."""
    for words, value in (_now(wrongs) or {}).items():
        w = np.asarray(value, dtype=np.float64)
        scale = float(np.abs(w).max()) if w.size else 0.0
        if got.shape == w.shape and np.all(np.isfinite(got)) and np.allclose(
                got, w, rtol=max(10 * rtol, 1e-6), atol=max(10 * atol, 1e-9 * scale)):
            return f"it equals what this mistake gives: {words}"
    return ""


def diagnose(got: np.ndarray, want: np.ndarray, rtol: float = 1e-5, atol: float = 1e-8,
             factors: dict[str, float] | None = None, terms: dict[str, Any] | None = None,
             zero_sum: str | None = None, wrongs: dict[str, Any] | None = None) -> str:
    """What a wrong float answer looks like, in words ("" when it is none of these): `got` is what
    one of the named mistakes `wrongs` gives (only that is said); the rows of `want` sum to 0 over
    the last axis and those of `got` do not (names `zero_sum`, the part that makes them: missing,
    or there but wrong); `got` equals `want` without one of `terms` (or with it twice, or with
    its sign flipped); `got` is `want` transposed; `got` is `want` times a constant: -1 (the wrong
    sign), one of `factors` or its inverse (named), or another number (given). An answer close to
    `want` but outside the tolerance is said to be so, not "1 times the expected one"."""
    named = _named_wrong(got, wrongs, rtol, atol)
    if named:
        return named
    scale = float(np.abs(want).max()) if want.size else 0.0
    loose = dict(rtol=max(10 * rtol, 1e-6), atol=max(10 * atol, 1e-9 * scale))

    def same(x, y):
        return x.shape == y.shape and bool(np.allclose(x, y, **loose))

    found, term_found = [], False
    for term_name, term in (_now(terms) or {}).items():
        t = np.asarray(term, dtype=np.float64)
        if same(got, want - t):
            found.append(f"it misses {term_name}")
        elif same(got, want + t):
            found.append(f"it counts {term_name} twice")
        elif same(got, want - 2 * t):
            found.append(f"{term_name} has the wrong sign")
        term_found = term_found or bool(found)
    if zero_sum and want.ndim >= 1 and want.shape[-1] > 1:
        rows_want, rows_got = np.abs(want.sum(-1)).max(), np.abs(got.sum(-1)).max()
        if rows_want <= loose["atol"] + loose["rtol"] * scale and rows_got > 1e3 * max(rows_want, 1e-12):
            words = (f"your rows should sum to 0 over the last axis and reach {rows_got:.2g}: "
                     f"{zero_sum} is missing, or there but not the right one")
            if not term_found:
                found.insert(0, words)
    if got.ndim >= 2 and got.shape[-1] == got.shape[-2] and same(np.swapaxes(got, -1, -2), want):
        found.append("it is the expected answer transposed (the last two axes swapped)")
    if not found and not np.any(got) and np.any(want):
        found.append("your answer is 0 everywhere: the part this check measures is missing")
    if not found and np.count_nonzero(want) >= 2:  # one number is always "a constant times" another
        r = float(np.sum(got * want) / np.sum(want * want))  # the best constant: got ~ r * want
        if same(got, r * want) and np.isclose(r, 1.0, rtol=1e-3):  # no factor: just outside the tolerance
            found.append("your answer is within ten times the tolerance of the expected one, not within it: "
                         "a small term off, or a float32 step in a float64 check?")
        elif same(got, r * want):
            named = {label: f for label, f in {**(factors or {}), **COMMON_FACTORS}.items()  # the grader's own first:
                     if not np.isclose(f, 1.0)}  # in lesson 22, 2 is sqrt(HS); a factor of 1 (dloss = 1) says nothing
            words = None
            for label, f in named.items():
                if np.isclose(r, f, rtol=1e-4):
                    words = "of the wrong sign" if f == -1 else f"{label} times the expected answer: an extra factor {label}"
                elif f != -1 and np.isclose(r, 1 / f, rtol=1e-4):
                    words = f"the expected answer divided by {label}: a factor {label} is missing"
                elif f != -1 and np.isclose(r, -f, rtol=1e-4):
                    words = f"-{label} times the expected answer: of the wrong sign, with an extra factor {label}"
                elif f != -1 and np.isclose(r, -1 / f, rtol=1e-4):
                    words = f"of the wrong sign, and a factor {label} is missing"
                if words:
                    break
            found.append(f"your answer is {words}" if words else
                         f"your answer is {r:.4g} times the expected one: off by a constant factor")
    return "; ".join(found)


def out_of_order(names: tuple[str, ...], wants: tuple, name: str) -> dict[str, Any]:
    """For `close(..., wrongs=...)` on one item of a backward that returns several (`names`, their
    expected values `wants`): every other item's expected value, named, so that gradients returned
    in the wrong order are said to be so (and not "transposed", when their shapes happen to be)."""
    order = ", ".join(names)
    return {f"the expected {other} in {name}'s place: the gradients are returned out of order (the order is {order})":
            want for other, want in zip(names, wants) if other != name}


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
    """Exact equality, for ids, tokens, counts and shapes (never for computed floats). Two lists
    that differ: where they first differ, with that element of each (and both lengths)."""
    g, w = _plain(got), _plain(want)
    ok = g == w
    if ok:
        return Result(name, True, "")
    if isinstance(g, list) and isinstance(w, list):
        lengths = f"{len(g)} elements, expected {len(w)}; " if len(g) != len(w) else f"{len(w)} elements; "
        index = []
        while isinstance(g, list) and isinstance(w, list):  # down to the first differing element
            first = next((i for i, (x, y) in enumerate(zip(g, w)) if x != y), min(len(g), len(w)))
            index.append(first)
            if first >= min(len(g), len(w)):
                ends = "yours ends" if len(g) < len(w) else "expected ends"
                where = index[0] if len(index) == 1 else tuple(index)
                return Result(name, False, f"{lengths}the first difference at index {where}: {ends} there")
            context = f" (after {_short(w[max(0, first - 3):first], 80)})" if first else ""
            g, w = g[first], w[first]
        where = index[0] if len(index) == 1 else tuple(index)
        return Result(name, False, f"{lengths}the first difference at index {where}{context}: "
                                   f"got {_short(g, 80)}, expected {_short(w, 80)}")
    return Result(name, False, f"got {_short(got)}, expected {_short(want)}")


def count(name: str, got, want: int, parts: dict[str, int] | None = None) -> Result:
    """A count (of parameters, tokens, ...) against the expected one. When it is wrong by exactly
    one of `parts` ({"the pooler": 72, ...}, sizes measured on real tensors), says which part is
    missing or counted twice; otherwise gives the difference and the parts' sizes."""
    try:
        g = int(got)
    except (TypeError, ValueError):
        return Result(name, False, f"got {_short(got)}, not a whole number")
    if g == int(want):
        return Result(name, True, "")
    diff = g - int(want)
    detail = f"got {g:,}, expected {int(want):,} ({diff:+,})"
    for label, n in (parts or {}).items():
        if diff == -n:
            return Result(name, False, f"{detail}: exactly {label} ({n:,}), left out")
        if diff == n:
            return Result(name, False, f"{detail}: exactly {label} ({n:,}), counted once too often")
    if parts:
        detail += "; no single part explains it. The parts: " + ", ".join(f"{k} {v:,}" for k, v in parts.items())
    return Result(name, False, detail)


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


class LibraryAnswer(Exception):
    """Your function called a library function that is the exercise's answer."""


class Guards:
    """While a check runs: each library function that answers exercise `number` swapped for a
    guard that refuses calls made from the function being graded (its code object is on the
    stack and the caller is not minibert itself). A context manager: `with Guards(...):` swaps,
    and leaving it, whatever happened, puts every original back."""

    def __init__(self, number: int, specs: tuple[str, ...], namespaces: list[dict], fn: Callable | None):
        self.number, self.specs, self.namespaces = number, tuple(specs), namespaces
        self.codes = _codes(fn)
        self.refused: list[str] = []  # the guarded names your function called
        self._swapped: list[tuple[Any, str, Any, bool]] = []  # (holder, name, original, is_dict)

    def message(self, spec: str) -> str:
        return f"exercise {self.number} asks you to derive this; `{spec}` is the library's answer"

    def _from_graded_code(self, caller) -> bool:
        if Path(caller.f_code.co_filename).resolve().is_relative_to(_PACKAGE):
            return False  # the library calling its own function (e.g. from a helper the grader uses)
        frame = caller
        while frame is not None:
            if frame.f_code in self.codes:
                return True
            frame = frame.f_back
        return False

    def _guard(self, spec: str, original):
        if isinstance(original, type):  # a class: a subclass whose construction is refused
            guards = self

            def __new__(cls, *args, **kwargs):
                if guards._from_graded_code(sys._getframe(1)):
                    guards.refused.append(spec)
                    raise LibraryAnswer(guards.message(spec))
                return object.__new__(cls) if original.__new__ is object.__new__ else \
                    original.__new__(cls, *args, **kwargs)

            return type(original.__name__, (original,), {"__new__": __new__, "__module__": original.__module__,
                                                         "__qualname__": original.__qualname__})

        def guard(*args, **kwargs):
            if self._from_graded_code(sys._getframe(1)):
                self.refused.append(spec)
                raise LibraryAnswer(self.message(spec))
            return original(*args, **kwargs)
        guard.__wrapped__ = original
        guard.__name__ = getattr(original, "__name__", spec)
        return guard

    def _resolve(self, spec: str):
        """-> (holder, attribute name, original) for "layers.linear_backward",
        "text.tokenizer.BertTokenizer.tokenize" (under minibert.) or a bare lesson name."""
        if "." not in spec:
            for ns in self.namespaces:
                if spec in ns:
                    return None, spec, ns[spec]
            raise AssertionError(f"exercise {self.number}: the guarded name {spec!r} is not in the lesson")
        parts = spec.split(".")
        for cut in range(len(parts) - 1, 0, -1):  # the longest importable module prefix
            name = "minibert." + ".".join(parts[:cut])
            try:
                holder = importlib.import_module(name)
            except ImportError:
                continue
            for attr in parts[cut:-1]:
                holder = getattr(holder, attr)
            return holder, parts[-1], getattr(holder, parts[-1])
        raise AssertionError(f"exercise {self.number}: cannot find minibert.{spec}")

    def __enter__(self):
        try:
            for spec in self.specs:
                holder, attr, original = self._resolve(spec)
                guard = self._guard(spec, original)
                if holder is not None:
                    self._swap(holder, attr, original, guard, False)
                # every other place that holds it by name: the lesson, your module, minibert's modules
                # (a class only in the lesson and your module: the library's isinstance checks stay as they are)
                places = [*self.namespaces]
                if not isinstance(original, type):
                    places += [vars(m) for n, m in list(sys.modules.items())
                               if m is not None and (n == "minibert" or n.startswith("minibert."))]
                seen = set()
                for ns in places:
                    if id(ns) in seen:
                        continue
                    seen.add(id(ns))
                    for key, value in list(ns.items()):
                        if value is original:
                            self._swap(ns, key, original, guard, True)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _swap(self, holder, name, original, guard, is_dict):
        if is_dict:
            self._swapped.append((holder, name, original, True))
            holder[name] = guard
        else:  # what the holder itself held: a class may inherit the attribute (restored by deleting it)
            self._swapped.append((holder, name, vars(holder).get(name, _MISSING), False))
            setattr(holder, name, guard)

    def __exit__(self, *exc):
        while self._swapped:
            holder, name, original, is_dict = self._swapped.pop()
            if is_dict:
                holder[name] = original
            elif original is _MISSING:
                delattr(holder, name)
            else:
                setattr(holder, name, original)
        return False


_PACKAGE = Path(importlib.util.find_spec("minibert").origin).resolve().parent
_MISSING = object()


def _codes(fn) -> set:
    """The code objects whose frames mean "the function being graded is running"."""
    out, seen = set(), 0
    while fn is not None and seen < 5:
        seen += 1
        code = getattr(fn, "__code__", None) or getattr(getattr(fn, "py_func", None), "__code__", None)
        if code is not None:
            out.add(code)
        fn = getattr(fn, "__wrapped__", None)
    return out


def _refusal(guards: Guards) -> Result:
    return Result("derived, not the library's answer", False, guards.message(guards.refused[0]))


def run_check(check: Callable[[Callable], Any], fn: Callable, guards: Guards | None = None) -> list[Result]:
    """Run `check(fn)`, with `guards` in place if given. Raises Stub if fn raised
    NotImplementedError; a guarded library call ends the check with one failed Result that
    names it; any other exception of fn becomes one failed Result naming it and its line."""
    try:
        if guards is None:
            return _as_results(check(fn))
        with guards:
            results = _as_results(check(fn))
        if guards.refused:  # your code caught the refusal and went on: still refused
            return [_refusal(guards)] + results
        return results
    except NotImplementedError as e:
        raise Stub(str(e) or "NotImplementedError") from None
    except LibraryAnswer:
        return [_refusal(guards)]
    except Exception as e:
        named = [spec for spec in (guards.specs if guards else ()) if spec.split(".")[-1] in str(e)]
        if named and type(e).__module__.startswith("numba"):  # a compiled function that calls a guarded one
            guards.refused.append(named[0])
            return [_refusal(guards)]
        return _crash(e)


def _crash(e: Exception) -> list[Result]:
    """Your code crashed inside the check: say where."""
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

    def __init__(self, lesson: str, namespace: dict | None = None):
        self.lesson = lesson  # e.g. "00_numerical_gradients"
        self.solution_path = SOLUTIONS / f"{lesson}.py"
        self._module = None
        # the lesson's own names (where `from minibert.x import f` put f): guarded too
        self.namespace = namespace if namespace is not None else sys._getframe(1).f_globals

    def solution(self, name: str) -> Callable:
        """The reference solution `name` from lessons/solutions/<lesson>.py (loaded on first use)."""
        if self._module is None:
            spec = importlib.util.spec_from_file_location(f"solutions_{self.lesson}", self.solution_path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # Numba's on-disk cache finds compiled functions by module
            spec.loader.exec_module(module)
            self._module = module
        return getattr(self._module, name)

    def guards(self, number: int, refuses: tuple[str, ...], fn: Callable) -> Guards:
        """The guards of exercise `number` for a run of `fn` (see Guards)."""
        namespaces = [self.namespace]
        fn_globals = getattr(fn, "__globals__", None) or getattr(getattr(fn, "py_func", None), "__globals__", None)
        if fn_globals is not None and fn_globals is not self.namespace:
            namespaces.append(fn_globals)
        return Guards(number, refuses, namespaces, fn)

    def grade(self, number: int, fn: Callable, check: Callable[[Callable], Any],
              paths: tuple[str, ...] | None = None, refuses: tuple[str, ...] = ()) -> Callable:
        """`paths`: for a backward that returns one gradient per path (e.g. ("dq", "dk", "dv")),
        the name of each returned item; the check names each of its checks after the item it
        judges ("dk, ..."), so that a mistake in one path fails that path's checks only (the
        grading log tests it: each item is made wrong in turn).
        `refuses`: the library functions that compute the answer ("layers.layernorm_backward"),
        refused while the graded function runs (see Guards); the solution is graded under them too."""
        name = fn.__name__
        title = f"exercise {number}, {name}"
        rel = self.solution_path.relative_to(ROOT).as_posix()
        log = os.environ.get("MINIBERT_GRADING_LOG")
        record: dict[str, Any] = {"lesson": self.lesson, "number": number, "name": name,
                                  "paths": list(paths) if paths else None, "refuses": list(refuses)}

        def run(f):
            return run_check(check, f, self.guards(number, refuses, f))

        if os.environ.get("MINIBERT_SOLUTIONS") == "1":
            solution = self.solution(name)
            results = run(solution)
            self._require(results, f"{title}: the reference solution ({rel})")
            print(f"{title}: MINIBERT_SOLUTIONS=1, the reference solution from {rel} passes")
            _print_rows(results)
            record["solution"] = _summary(results)
            record["mine"] = {"skipped": "MINIBERT_SOLUTIONS=1"}
            self._log(log, record, run, solution)
            return solution

        try:
            results = run(fn)
        except Stub as stub:
            message = f"{title}: not written yet ({stub})"
            print(f"{message}; the lesson goes on with the reference solution from {rel}:")
            solution = self.solution(name)
            results = run(solution)
            self._require(results, f"{title}: the reference solution ({rel})")
            _print_rows(results)
            record["mine"] = {"ok": False, "stub": True, "message": message}
            record["solution"] = _summary(results)
            self._log(log, record, run, solution)
            return solution

        failed = [r for r in results if not r.ok]
        record["mine"] = {**_summary(results), "stub": False}
        if failed:
            _print_rows(results)
            message = _failure_message(title, failed, len(results))
            record["mine"]["message"] = message
            self._log(log, record, run, None)
            raise ExerciseFailed(message)
        print(f"{title}: passed ({len(results)} check{'s' if len(results) > 1 else ''})")
        _print_rows(results)
        self._log(log, record, run, None)
        return fn

    @staticmethod
    def _require(results: list[Result], who: str) -> None:
        failed = [r for r in results if not r.ok]
        if failed:  # a bug in the lesson or its solution, not in the learner's code
            _print_rows(results)
            raise AssertionError(_failure_message(who, failed, len(results)))

    def pasted(self, variable: str, name: str) -> dict[str, Callable]:
        """The functions of <$variable>/<lesson>.py for exercise `name`, each as a function of the
        lesson's namespace, as if it had been typed into the stub: {"": the function `name`,
        label: the function `name__label`}; {} if there is none. MINIBERT_SHORTCUTS holds the
        library's answers pasted in, MINIBERT_MISTAKES plausible wrong answers (the tests set both)."""
        folder = os.environ.get(variable)
        path = Path(folder) / f"{self.lesson}.py" if folder else None
        if path is None or not path.exists():
            return {}
        scratch: dict[str, Any] = {"__name__": f"pasted_{self.lesson}"}
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), scratch)
        out = {}
        for key, f in scratch.items():
            if isinstance(f, types.FunctionType) and (key == name or key.startswith(name + "__")):
                out[key[len(name) + 2:]] = types.FunctionType(f.__code__, self.namespace, f.__name__,
                                                              f.__defaults__, f.__closure__)
        return out

    def _log(self, log: str | None, record: dict, run: Callable, solution) -> None:
        if not log:
            return
        if "solution" not in record:
            record["solution"] = _summary(run(self.solution(record["name"])))
        wrong_fn = solution or self.solution(record["name"])

        def wrong(*args, **kwargs):
            return _perturb(wrong_fn(*args, **kwargs))

        wrong.__wrapped__ = wrong_fn
        try:
            wrong_results = run(wrong)
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

                wrong_in_one.__wrapped__ = wrong_fn
                results = run(wrong_in_one)
                record["wrong_paths"][path] = {"failed": [r.name for r in results if not r.ok],
                                               "checks": [r.name for r in results]}
        for variable, key in (("MINIBERT_SHORTCUTS", "shortcut"), ("MINIBERT_MISTAKES", "mistakes")):
            for label, f in self.pasted(variable, record["name"]).items():  # graded as if typed in
                try:
                    results = run(f)
                except Stub as e:
                    results = [Result(key, False, f"NotImplementedError: {e}")]
                failed = [r for r in results if not r.ok]
                title = f"exercise {record['number']}, {record['name']}"
                summary = {**_summary(results), "message": _failure_message(title, failed, len(results)) if failed else ""}
                if key == "shortcut":
                    record["shortcut"] = summary
                else:
                    record.setdefault("mistakes", {})[label] = summary
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
