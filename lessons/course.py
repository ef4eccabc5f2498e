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

Your own function is graded in the exam room (lessons/room.py: why it holds, in one screen): a
process of its own, one per lesson run, where minibert and the lessons are never loaded and an
audit hook refuses importing them or reading their files; your exercise's cell runs there from its
source (with your earlier answers of the same lesson that it calls), and the grader's inputs and
your results cross as plain data. `grade(..., allows=(...))` names the library pieces the room
holds as copies made from their source (07's FFN backward composes `layers.linear_backward` and
`layers.gelu_backward`); `grade(..., refuses=("layers.layernorm_backward",))` names the library
functions that are the answer, which its messages then call "the library's answer". Only the
repository's own code runs in this process: the reference solutions, and the made-wrong versions
of them that the grading log uses to test the graders.
`MINIBERT_SHORTCUTS=dir` (the tests set it) also grades `dir/<lesson>.py`'s functions, the library
call pasted in as the answer and other ways around, in the exam room as if typed into the stub, and
logs whether each was refused; `MINIBERT_MISTAKES=dir` grades plausible wrong answers
(`my_fn__label`) there and logs what the grader said about each.

What a grader compares with: numbers (numerical gradients, values worked out by hand, arrays the
lesson computed earlier), never the library function that is the exercise's answer. `close`
compares floats with a tolerance and, when they differ, `diagnose`s the kind of mistake: one of
the named mistakes the grader computed on the same inputs (`wrongs`, e.g. "dout forgotten";
`out_of_order` names a backward's other gradients, `repeated_rows` a gather's backward that
drops or averages repeated rows), else rows that should sum to 0, a constant
factor such as 1/sqrt(HS) or 1/n, transposed, the wrong sign, a missing term; `entries`/`mask` compare exact arrays and name the first wrong entry and the
rule it breaks; `equal` compares ids and strings, and lists from their first difference (naming `wrongs` too); `count`
compares counts and names the part they are off by; `true` checks a known-answer condition;
`gradient_table` grades a whole backward's named gradients row by row, the first wrong one in words.

Pictures of ideas (not of data): `flow` draws a column of boxes with arrows and residual
connections, for the encoder block (07) and the whole model (10).
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import linecache
import os
import re
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
    last axis and do not (`zero_sum`: the part that makes them, e.g. "the mean term"). An answer of
    the wrong shape that sums over its extra leading axes to `want` is said to miss that sum.
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
        lead = a.ndim - b.ndim  # a gradient of a parameter used at every position, not summed over them
        if lead > 0 and a.shape[lead:] == b.shape and np.all(np.isfinite(a)) and np.allclose(
                a.reshape(-1, *b.shape).sum(0), b, rtol=max(10 * rtol, 1e-6),
                atol=max(10 * atol, 1e-9 * float(np.abs(b).max(initial=0)))):
            return Result(name, False, f"{detail}; summed over its leading axes {a.shape[:lead]} it is the expected "
                                       f"answer: the sum over its uses (every example and position it served) "
                                       f"is missing")
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
        (f"max_abs {check.max_abs:.1e} (rtol {rtol:g} is so small next to atol {atol:g} here that atol alone "
         f"judges every entry)")
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
    or there but wrong); `got` equals `want` without one of `terms` (or with it twice, its sign
    flipped, or scaled by another constant: named when it is one of `factors` or its inverse);
    `got` is `want` transposed; `got` is `want` times a constant: -1 (the wrong sign), one of
    `factors` or its inverse (named), or another number (given; for a single number, only a factor
    of `factors` is said, since any number is some constant times another). An answer close to
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
        elif np.any(t):  # the term there, scaled by a constant: got = want + (k - 1) t
            k = 1 + float(np.sum((got - want) * t) / np.sum(t * t))
            if not np.isclose(k, 1.0, rtol=1e-3) and same(got, want + (k - 1) * t):
                label = next((lab for lab, f in (factors or {}).items() if np.isclose(k, f, rtol=1e-4)), None)
                inverse = next((lab for lab, f in (factors or {}).items() if np.isclose(k * f, 1.0, rtol=1e-4)), None)
                found.append(f"{term_name} is there, {k:.4g} times what it should be"
                             + (f": an extra factor {label} on it" if label else
                                f": a factor {inverse} on it is missing" if inverse else ""))
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
    # one number is always "a constant times" another: for it, only a factor the grader names is said
    if not found and (np.count_nonzero(want) >= 2 or (np.count_nonzero(want) == 1 and factors)):
        r = float(np.sum(got * want) / np.sum(want * want))  # the best constant: got ~ r * want
        several = np.count_nonzero(want) >= 2
        if several and same(got, r * want) and np.isclose(r, 1.0, rtol=1e-3):  # no factor: just outside the tolerance
            found.append("your answer is within ten times the tolerance of the expected one, not within it: "
                         "a small term off, or a float32 step in a float64 check?")
        elif got.shape == want.shape and np.allclose(got, r * want, rtol=1e-4, atol=1e-9 * scale + 1e-300):
            named = {label: f for label, f in {**(factors or {}), **(COMMON_FACTORS if several else {})}.items()
                     if not np.isclose(f, 1.0)}  # the grader's own first: in lesson 22, 2 is sqrt(HS); a factor
            # of 1 (dloss = 1) says nothing
            words = None
            for label, f in named.items():
                short = label.split(" (")[0]  # "1/ln 2 (base 2: bits)": its why is said once
                if np.isclose(r, f, rtol=1e-4):
                    words = ("of the wrong sign" if f == -1 else
                             f"{short} times the expected answer: an extra factor {label}")
                elif f != -1 and np.isclose(r, 1 / f, rtol=1e-4):
                    words = f"the expected answer divided by {short}: a factor {label} is missing"
                elif f != -1 and np.isclose(r, -f, rtol=1e-4):
                    words = f"-{short} times the expected answer: of the wrong sign, with an extra factor {label}"
                elif f != -1 and np.isclose(r, -1 / f, rtol=1e-4):
                    words = f"of the wrong sign, and a factor {label} is missing"
                if words:
                    break
            if words or several:
                found.append(f"your answer is {words}" if words else
                             f"your answer is {r:.4g} times the expected one: off by a constant factor")
    return "; ".join(found)


def gradient_table(got, want: dict, wrongs: Callable[[], dict[str, dict[str, Any]]] | None = None,
                   hints: dict[str, str] | None = None, factors: dict[str, float] | None = None,
                   rtol: float = 1e-5, atol: float = 1e-8) -> list[Result]:
    """A whole backward's grade, one row per named gradient in `want`'s order (the order backward
    computes them), as makemore's cmp() prints it: exact (bit for bit, shown, never the verdict),
    close (the verdict: `close`'s tolerance) and the largest difference. The first wrong gradient
    is diagnosed in words: `wrongs()` ({name: {words: the answer that mistake gives}}, computed only
    when one is wrong), `factors`, and `hints[name]`, the question to ask yourself there. Rows after
    it say only their numbers: a mistake upstream makes everything below it wrong too."""
    if not isinstance(got, dict):
        return [Result("a dict of named gradients", False, f"got {_short(got)}")]
    rows, first = [], None
    for name, w in want.items():
        if name not in got:
            rows.append(Result(f"{name:<14} missing", False, "not in your dict"))
            first = first or name
            continue
        verdict = close(name, got[name], w, rtol, atol, factors=factors,
                        wrongs=None if first else (lambda name=name: (_now(wrongs) or {}).get(name, {})))
        a = np.asarray(got[name], dtype=np.float64) if verdict.ok or "shape" not in verdict.detail else None
        exact = a is not None and a.shape == np.shape(w) and bool(np.array_equal(a, np.asarray(w, dtype=np.float64)))
        detail = verdict.detail if first is None or verdict.ok else verdict.detail.split("; ")[0]
        if not verdict.ok and first is None:
            first = name
            detail += f". {name} is the first wrong gradient" + (f": {hints[name]}" if hints and name in hints else "")
        rows.append(Result(f"{name:<14} exact: {str(exact):<5} close: {str(verdict.ok):<5}", verdict.ok, detail))
    extra = sorted(set(got) - set(want))
    if extra:
        rows.append(Result("no unknown names", False, f"{extra}: the names are {list(want)}"))
    return rows


def out_of_order(names: tuple[str, ...], wants: tuple, name: str) -> dict[str, Any]:
    """For `close(..., wrongs=...)` on one item of a backward that returns several (`names`, their
    expected values `wants`): every other item's expected value, named, so that gradients returned
    in the wrong order are said to be so (and not "transposed", when their shapes happen to be)."""
    order = ", ".join(names)
    return {f"the expected {other} in {name}'s place: the gradients are returned out of order (the order is {order})":
            want for other, want in zip(names, wants) if other != name}


def repeated_rows(rows, d, want) -> dict[str, np.ndarray]:
    """For `close(..., wrongs=...)` on the backward of a gather (an embedding lookup, picking
    positions): `rows` (N,) the rows read, `d` (N, C) their gradients, `want` the expected
    gradient of the table (its rows flattened to (-1, C)). The answers that mishandle a row read
    more than once: a write per use (fancy-index `+=`, or `=` in a loop: the last use's gradient
    stays) and the uses averaged, each named."""
    table = np.asarray(want, dtype=np.float64)
    flat = table.reshape(-1, table.shape[-1])  # (V, C)
    rows = np.asarray(rows).reshape(-1)  # (N,)
    one_write = np.zeros_like(flat)
    one_write[rows] = np.asarray(d).reshape(len(rows), -1)  # a write per use: the last one stays
    uses = np.bincount(rows, minlength=len(flat))[:, None]  # (V, 1)
    return {"each row read more than once holds one use's gradient (a write per use, the last one kept), not "
            "the sum over its uses: every use adds its gradient to the row": one_write.reshape(table.shape),
            "the gradients of a row's uses averaged, not added": (flat / np.maximum(uses, 1)).reshape(table.shape)}


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


def equal(name: str, got, want, wrongs: dict[str, Any] | None = None) -> Result:
    """Exact equality, for ids, tokens, counts and shapes (never for computed floats). Two lists
    that differ: where they first differ, with that element of each (and both lengths). `wrongs`
    ({words: what that mistake gives}, or a function that returns it, run only on a failure): an
    answer equal to one of them is told the words too."""
    g, w = _plain(got), _plain(want)
    ok = g == w
    if ok:
        return Result(name, True, "")
    result = _unequal(name, g, w, got, want)
    named = next((words for words, value in (_now(wrongs) or {}).items() if _plain(value) == g), None)
    return result._replace(detail=f"{result.detail}. it equals what this mistake gives: {named}") if named else result


def _unequal(name: str, g, w, got, want) -> Result:
    """equal's verdict on two values that differ (g, w: got and want as plain lists and numbers)."""
    if isinstance(g, list) and isinstance(w, list):
        def n(k: int) -> str:
            return f"{k} element" + ("" if k == 1 else "s")

        lengths = f"{n(len(g))}, expected {len(w)}; " if len(g) != len(w) else f"{n(len(w))}; "
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


def count(name: str, got, want: int, parts: dict[str, int] | None = None,
          wrongs: dict[str, int] | None = None) -> Result:
    """A count (of parameters, tokens, ...) against the expected one. When it is one of the named
    mistakes `wrongs` ({words: the count that mistake gives}), says so in its words; when it is
    wrong by exactly one of `parts` ({"the pooler": 72, ...}, sizes measured on real tensors), says
    which part is missing or counted twice; otherwise gives the difference and the parts' sizes."""
    try:
        g = int(got)
    except (TypeError, ValueError):
        return Result(name, False, f"got {_short(got)}, not a whole number")
    if g == int(want):
        return Result(name, True, "")
    diff = g - int(want)
    detail = f"got {g:,}, expected {int(want):,} ({diff:+,})"
    named = next((words for words, value in (wrongs or {}).items() if g == int(value)), None)
    if named:
        return Result(name, False, f"{detail}. it equals what this mistake gives: {named}")
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


def nested_codes(code):
    """A code object and the ones defined inside it (lambdas, comprehensions, inner functions)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from nested_codes(const)


def run_check(check: Callable[[Callable], Any], fn: Callable) -> list[Result]:
    """Run `check(fn)` here, in the lesson's process: for the repository's own code only (the
    reference solution, and the grading log's made-wrong versions of it, which test the graders).
    Raises Stub if fn raised NotImplementedError; any other exception becomes one failed Result
    naming it and its line. Your function is graded in the exam room instead (below)."""
    try:
        return _as_results(check(fn))
    except NotImplementedError as e:
        raise Stub(str(e) or "NotImplementedError") from None
    except Exception as e:  # noqa: BLE001 - named in the result
        return _crash(e)


# ---------------------------------------------------------------------------------------------
# the exam room (lessons/room.py): your own function, graded in a process where the library does not exist

sys.path.insert(0, str(HERE)) if str(HERE) not in sys.path else None
import room as exam_room  # noqa: E402 - next to this file

# the lesson's imports a cell may use, given to the room as import lines: only these modules' names
_ROOM_MODULES = {"numpy", "numba", "math", "functools", "itertools", "collections", "re", "string", "heapq", "bisect",
                 "random", "statistics", "operator", "typing", "dataclasses", "unicodedata", "cmath", "fractions"}


class _NotPlainArgs(Exception):
    """The grader hands this exercise something that is not plain data: graded the old way."""


def _is_stub(fn) -> bool:
    """A function whose body is only a docstring and `raise NotImplementedError(...)` (the shipped stub)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    names = set(code.co_names)
    return names <= {"NotImplementedError"} and "NotImplementedError" in names and len(code.co_code) < 40


def cell_source(fn) -> tuple[str, str] | None:
    """(the text of the cell that defines `fn`, padded with blank lines so that its line numbers are
    the file's; the file's name), or None. A lesson script's cell runs from its `# %%` line to the
    next; a notebook cell or a file without cells is one cell."""
    code = _code_of(fn)
    if code is None:
        return None
    lines = linecache.getlines(code.co_filename)
    if not lines:
        return None
    if "<locals>" in getattr(fn, "__qualname__", ""):  # defined inside a function: the function alone
        import inspect
        import textwrap

        try:
            text = textwrap.dedent(inspect.getsource(fn))
        except (OSError, TypeError):
            return None
        return "\n" * (code.co_firstlineno - 1) + text, code.co_filename
    starts = [i for i, line in enumerate(lines) if line.startswith("# %%")]
    first = max([i for i in starts if i < code.co_firstlineno] or [0])
    last = min([i for i in starts if i >= code.co_firstlineno] or [len(lines)])
    return "\n" * first + "".join(lines[first:last]), code.co_filename


def given(fn: Callable, call: str, **bindings) -> "exam_room.Source":
    """The lesson's function `fn` handed to an exercise as its source: a function of no arguments
    that returns `call` (e.g. "f(x)"), over the plain data `bindings` (the same arrays the exercise
    is given, so that it sees them nudged)."""
    import inspect
    import textwrap

    text = textwrap.dedent(inspect.getsource(fn)) + f"\n\ndef _given():\n    return {call}\n"
    return exam_room.Source(text, "_given", **bindings)


def _code_of(fn):
    """A code object of the cell that defines `fn`: a function's, a Numba function's Python source, a
    partial's function, a class's (or its metaclass's) methods, a callable object's __call__."""
    for candidate in (fn, getattr(fn, "py_func", None), getattr(fn, "func", None)):
        if isinstance(candidate, types.FunctionType):
            return candidate.__code__
    holders = [fn, type(fn)] if isinstance(fn, type) else [type(fn)]
    for holder in holders:
        for value in vars(holder).values():
            value = getattr(value, "__func__", value)
            if isinstance(value, types.FunctionType):
                return value.__code__
    return None


def _prelude(namespace: dict, cell: str, allows: tuple[str, ...]) -> str:
    """Import lines for the lesson's own imports that the cell names (NumPy, Numba, the standard
    library: never minibert), then the copies of the allowed library pieces, made from their source."""
    import re

    lines, words = [], set(re.findall(r"\w+", cell))
    for name, value in namespace.items():
        if name not in words or name.startswith("__"):
            continue
        if isinstance(value, types.ModuleType) and value.__name__.split(".")[0] in _ROOM_MODULES:
            lines.append(f"import {value.__name__} as {name}")
        elif callable(value) and (getattr(value, "__module__", None) or "").split(".")[0] in _ROOM_MODULES \
                and getattr(sys.modules.get(value.__module__), getattr(value, "__name__", "") or "", None) is value:
            lines.append(f"from {value.__module__} import {value.__name__} as {name}")
    if "np" not in namespace:
        lines.append("import numpy as np")
    copies = library_copies(allows)
    for spec in allows:  # an allowed piece the lesson imported under its own name (`MASK_VALUE`)
        value = _allowed_value(spec)
        for name, v in namespace.items():
            if v is value and name in words and not isinstance(v, (int, bool)) and "." in spec:
                copies.append(f"{name} = {'.'.join(spec.split('.')[-2:])}")
    return "\n\n".join(lines + copies) + "\n"


def _split_spec(spec: str) -> tuple[str, str] | None:
    """("text.tokenizer", "BertTokenizer") for "text.tokenizer.BertTokenizer.tokenize": the longest
    importable minibert module and the top-level name in it."""
    parts = spec.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            importlib.import_module("minibert." + ".".join(parts[:cut]))
        except ImportError:
            continue
        return ".".join(parts[:cut]), parts[cut]
    return None


def _allowed_value(spec: str):
    found = _split_spec(spec)
    return getattr(importlib.import_module("minibert." + found[0]), found[1], None) if found else None


def library_copies(allows: tuple[str, ...]) -> list[str]:
    """Source that defines, in the room, copies of exactly the allowed pieces (`layers.gelu_forward`),
    each with what it needs from its module (helpers, constants, imports), under a namespace named
    like the lesson's (`layers`)."""
    import ast
    import inspect

    by_module: dict[str, list[str]] = {}
    for spec in allows:
        found = _split_spec(spec)
        if found:
            by_module.setdefault(found[0], []).append(found[1])
    out = []
    for module, names in by_module.items():
        mod = importlib.import_module(f"minibert.{module}")
        source = inspect.getsource(mod)
        tree = ast.parse(source)
        defs = {}  # top-level name -> its statement's source
        imports = []
        lines = source.splitlines(keepends=True)
        for node in tree.body:
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            text = "".join(lines[first - 1:node.end_lineno])  # with its decorators (@dataclass)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("minibert"):
                for a in node.names:  # a constant of another minibert module: its value, written out
                    value = getattr(importlib.import_module(node.module), a.name, None)
                    if isinstance(value, (int, float, str, bool)):
                        defs[a.asname or a.name] = (ast.parse("0").body[0], f"{a.asname or a.name} = {value!r}")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                if all((a.name if isinstance(node, ast.Import) else (node.module or "")).split(".")[0] in
                       _ROOM_MODULES | {"__future__"} for a in node.names):
                    if not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
                        imports.append(text)
            for target in ([node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else
                           [t.id for t in getattr(node, "targets", [getattr(node, "target", None)])
                            if isinstance(t, ast.Name)] if isinstance(node, (ast.Assign, ast.AnnAssign)) else []):
                defs[target] = (node, text)
        wanted, todo = [], list(names)
        while todo:  # the closure of what they name
            name = todo.pop()
            if name in wanted or name not in defs:
                continue
            wanted.append(name)
            todo += [n.id for n in ast.walk(defs[name][0]) if isinstance(n, ast.Name)]
        body = imports + [defs[n][1] for n in sorted(set(wanted), key=lambda n: (defs[n][0].lineno > 1, defs[n][0].lineno))]
        alias = module.split(".")[-1]
        name = "minibert." + module  # registered while its source runs (a dataclass looks its module up)
        out.append(f"import sys as _sys\nimport types as _types\n{alias} = _types.ModuleType({name!r})\n"
                   f"{alias}.__allowed_copy__ = True\n{alias}.__library_name__ = {name!r}\n"
                   f"_sys.modules[{name!r}] = {alias}\ntry:\n    exec({chr(10).join(body)!r}, {alias}.__dict__)\n"
                   f"finally:\n    del _sys.modules[{name!r}]")
    return out


def _room_call(ex: "Exercises", number: int, fn, allows: tuple[str, ...], inplace: bool = False) -> Callable | None:
    """`fn` as a function that runs in the lesson's exam room (None: its cell cannot be found)."""
    found = cell_source(fn)
    if found is None:
        return None
    cell, filename = found
    if _not_a_cell(filename):  # a function relabelled as the library's or the solutions' code: never sent as a cell
        raise exam_room.RoomError("PermissionError", f"your function says its source is {filename}, which is not "
                                  f"yours: the exam room refuses the library's and the solutions' files", None, "")
    key = f"{number}:{fn.__name__}:{id(fn)}"
    name = next((k for k, v in ex.namespace.items() if v is fn and k == getattr(fn, "__name__", None)),
                next((k for k, v in ex.namespace.items() if v is fn), fn.__name__))  # the name the cell binds
    prelude = _prelude(ex.namespace, cell, allows)
    words = set(re.findall(r"\w+", cell))
    # your earlier answers this cell calls (lesson 10's whole backward may call exercise 1's)
    earlier = tuple(text for answered, text in ex.passed.items() if answered in words and answered != name)
    # members of a library class the exercise allows (12's tokenizer.tokenize): an object the grader hands
    # over crosses as those alone, its methods called back in the lesson's process on plain data
    expose = tuple(spec.split(".")[-1] for spec in allows if (_split_spec(spec) or ("", ""))[1][:1].isupper()
                   and spec.count(".") > (_split_spec(spec) or ("", ""))[0].count(".") + 1)
    skipped = ex.exam_room().load(key, cell, prelude, earlier)
    broken = [line for line in skipped if line.startswith("the lesson's import or allowed copy")]
    if broken:  # a bug of the lesson or of this file, never of your code
        raise AssertionError(f"exercise {number}: the exam room could not make {broken[0]}")

    def in_the_room(*args, **kwargs):
        try:
            return ex.exam_room().call(key, name, args, kwargs, expose, inplace)
        except exam_room.NotPlain as e:
            raise _NotPlainArgs(str(e)) from None

    in_the_room.skipped = skipped
    in_the_room.graded_from = fn
    in_the_room.cell = cell  # padded: its line numbers are the file's
    return functools.update_wrapper(in_the_room, fn, updated=())


def _package() -> Path | None:
    """Where the `minibert` package is installed (its folder), or None."""
    spec = importlib.util.find_spec("minibert")
    return Path(spec.origin).resolve().parent if spec and spec.origin else None


def _not_a_cell(filename: str) -> bool:
    """The file is the library's, the solutions', or this grading code's: its text is not a cell."""
    try:
        where = Path(filename).resolve()
    except (OSError, ValueError):
        return False
    package = _package() or ROOT / "minibert"
    return (where.parent == SOLUTIONS.resolve() or where in (HERE / "course.py", HERE / "room.py")
            or any(p == where or p in where.parents for p in (package, ROOT / "minibert")))


def _answers_in(filename: str | None) -> list[str]:
    """The text of each answer the lesson file holds (an exercise function graded by `.grade(...)`
    that is not the shipped stub); none: no exam room is needed."""
    import ast

    try:
        source = Path(filename).read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (TypeError, OSError, SyntaxError, ValueError):
        return []
    graded = {a.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and n.func.attr == "grade" and len(n.args) >= 2 for a in n.args[1:2] if isinstance(a, ast.Name)}
    answers = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in graded:
            body = [b for b in node.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
            if not (len(body) == 1 and isinstance(body[0], ast.Raise)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                answers.append("".join(source.splitlines(keepends=True)[first - 1:node.end_lineno]))
    return answers


def _solution_cell(solution) -> str:
    """The reference solution's source with the solutions file's imports (never minibert's): what a
    later exercise's cell that calls it gets in the room, as the lesson goes on with it."""
    import inspect
    import textwrap

    module = sys.modules.get(solution.__module__)
    head = [line for line in inspect.getsource(module).splitlines() if line.startswith(("import ", "from "))
            and "minibert" not in line and "__future__" not in line] if module else []
    return "\n".join(head) + "\n\n" + textwrap.dedent(inspect.getsource(solution))


def graded_from(fn):
    """What the learner wrote (to look at, e.g. whether Numba compiled it), behind the exam room's
    function that a grader is handed; `fn` itself otherwise."""
    return getattr(fn, "graded_from", fn)


def _room_results(check, graded, number: int, namespace: dict, refuses: tuple[str, ...] = (),
                  allows: tuple[str, ...] = ()) -> list[Result]:
    """Run `check` on the room's function; your errors become rows (the stub: Stub). A name your
    cell needs and the room does not have (the library's, the lesson's) is said as such."""
    def derive(why: str) -> list[Result]:
        return [Result("derived, not the library's answer", False, f"exercise {number} asks you to derive this; {why}")]

    try:
        return _as_results(check(graded))
    except exam_room.RoomError as e:
        if e.kind == "NotImplementedError":
            raise Stub(e.message or "NotImplementedError") from None
        if e.kind != "NameError" and not e.missing:  # a Numba typing error about a name it could not find
            found = re.search(r"name '(\w+)' is not defined", e.message)
            e.missing = found.group(1) if found and found.group(1) in namespace else None
            e.kind = "NameError" if e.missing else e.kind
        cell = getattr(graded, "cell", "")
        lines = cell.splitlines()
        refusals = [line for line in getattr(graded, "skipped", []) if "exam room" in line  # refused, and the line
                    and re.search(rf"\b{re.escape(e.missing or '')}\b",  # would have defined the missing name
                                  _line_of(lines, line))]
        if e.kind == "NameError" and e.missing and refusals:  # a line of the cell could not run: refused there
            return derive(f"`{e.missing}` is not defined because {refusals[0]}")
        if e.kind == "NameError" and e.missing in namespace:  # (a name nobody defines is a plain NameError)
            value = namespace.get(e.missing)
            if (getattr(value, "__module__", None) or getattr(value, "__name__", "") or "").startswith("minibert"):
                used = re.findall(rf"\b{re.escape(e.missing)}\.(\w+)", cell)
                answer = next((f"{e.missing}.{u}" for u in used for r in refuses if r.endswith(f".{u}")), None)
                what = f"`{answer}` is the library's answer" if answer else f"`{e.missing}` is the library's"
                return derive(f"{what} (minibert does not exist in the exam room): your function sees np, what the "
                              f"lesson imports from NumPy and the standard library, and what the exercise's cell "
                              f"defines" + (f"; of the library, only {', '.join(allows)}" if allows else ""))
            return derive(f"`{e.missing}` is the lesson's, not yours: in the exam room your function sees np, what the "
                          f"lesson imports from NumPy and the standard library, and what the exercise's cell defines")
        missing = re.match(r"module '([\w.]+)' has no attribute '(\w+)'", e.message) if e.kind == "AttributeError" \
            else re.match(r"cannot import name '(\w+)' from '([\w.]+)'", e.message) if e.kind == "ImportError" else None
        module, attr = (missing.groups() if e.kind == "AttributeError" else missing.groups()[::-1]) if missing else ("", "")
        if module == "__main__" and attr in namespace:
            return derive(f"`__main__.{attr}` is the lesson's, not yours: the exam room's `__main__` is not the "
                          f"lesson's module")
        if module.startswith("minibert"):  # only the allowed copies are there, under the library's names
            piece = f"{module}.{attr}"
            what = "the library's answer" if any(piece.endswith("." + r) for r in refuses) else "the library's"
            return derive(f"`{piece}` is {what}: of the library, the exam room holds only "
                          f"{', '.join(allows) or 'nothing'}")
        key = re.fullmatch(r"'(\w+)'", e.message) if e.kind == "KeyError" else None
        if key and key.group(1) in namespace and re.search(r"f_globals|f_locals|globals\(\)|vars\(|__dict__", cell):
            return derive(f"`{key.group(1)}` is the lesson's, not yours: the frames and globals around your function "
                          f"in the exam room are the room's, not the lesson's")
        member = re.match(r"'(\w+)' object has no attribute '(\w+)'", e.message) if e.kind == "AttributeError" \
            else None
        if member and member.group(1) == "SimpleNamespace":  # an object handed over as its allowed members alone
            return derive(f"`.{member.group(2)}` is not one of the members the exercise hands over (the object "
                          f"crosses into the exam room as {', '.join(a.split('.')[-1] for a in allows) or 'data'} "
                          f"alone)")
        if e.kind in ("ImportError", "ModuleNotFoundError", "PermissionError") and "exam room" in e.message:
            return derive(e.message)
        where = f" (line {e.line}: {e.text})" if e.line else ""
        return [Result("runs without an error", False, f"{e.kind}: {e.message}{where}")]


def _line_of(lines: list[str], skipped: str) -> str:
    """The cell's text at the line a skipped-statement report names ("line 12: ImportError: ...")."""
    found = re.match(r"line (\d+):", skipped)
    k = int(found.group(1)) - 1 if found else -1
    return lines[k] if 0 <= k < len(lines) else ""


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
        # the lesson's own names: what a graded function may not see, and whose functions are the lesson's
        self.namespace = namespace if namespace is not None else sys._getframe(1).f_globals
        self._exam_room: exam_room.Room | None = None
        # {exercise: the source that answered it}: a later exercise's cell that names an earlier
        # one's function gets that source in the room too (yours, or the solution the lesson went on with)
        self.passed: dict[str, str] = {}
        answers = _answers_in(self.namespace.get("__file__"))
        if os.environ.get("MINIBERT_SOLUTIONS") != "1" and answers:
            self.exam_room().start(any("numba" in a for a in answers))  # now, while the lesson runs up to its first exercise: the room's start-up
            # (NumPy's import) overlaps the lesson's own work instead of waiting in front of the first grade

    def exam_room(self) -> "exam_room.Room":
        """This lesson's exam room process (lessons/room.py), started on first use."""
        if self._exam_room is None:
            self._exam_room = exam_room.Room(ROOT, _package(), self.lesson)
            import atexit

            atexit.register(self._exam_room.close)
        return self._exam_room

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
              paths: tuple[str, ...] | None = None, refuses: tuple[str, ...] = (),
              allows: tuple[str, ...] = (), inplace: bool = False) -> Callable:
        """Grade your `fn` with `check` in the exam room (lessons/room.py) and return the function
        the lesson goes on with. `allows` ("layers.linear_backward"): the library pieces the room
        holds, as copies made from their source, under the lesson's names. `refuses`: the library
        functions that are the answer, named as such when your cell reaches for one.
        `paths`: for a backward that returns one gradient per path (e.g. ("dq", "dk", "dv")),
        the name of each returned item; the check names each of its checks after the item it
        judges ("dk, ..."), so that a mistake in one path fails that path's checks only (the
        grading log tests it: each item is made wrong in turn). `inplace`: the grader looks at the
        arrays it handed over after the call (00: x restored), so your function's changes to them are
        made to the grader's too; otherwise they are not (a grader's input cannot be changed under it)."""
        name = fn.__name__
        title = f"exercise {number}, {name}"
        rel = self.solution_path.relative_to(ROOT).as_posix()
        log = os.environ.get("MINIBERT_GRADING_LOG")
        record: dict[str, Any] = {"lesson": self.lesson, "number": number, "name": name,
                                  "paths": list(paths) if paths else None, "refuses": list(refuses),
                                  "allows": list(allows)}

        def run(f):  # the repository's own code (the solution, its made-wrong versions): here
            return run_check(check, f)

        def run_mine(f):
            """Your function (or an answer the tests paste in): a stub says so at once; otherwise it
            is graded in the exam room, from its cell's source."""
            if _is_stub(f):  # the shipped stub: no room needed to see that it raises
                raise Stub(next((c for c in f.__code__.co_consts if isinstance(c, str) and c.startswith("exercise")),
                                "NotImplementedError"))
            try:
                graded = _room_call(self, number, f, allows, inplace)
            except exam_room.RoomError as e:
                return [Result("derived, not the library's answer", False,
                               f"exercise {number} asks you to derive this; {e.message}")]
            if graded is None:
                return [Result("graded from its source", False, f"the source of `{name}`'s cell was not found: "
                                                                   f"write it as a function in the exercise's cell")]
            try:
                results = _room_results(check, graded, number, self.namespace, refuses, allows)
            except _NotPlainArgs as e:  # a bug of the lesson's grader, not of your code
                raise AssertionError(f"{title}: the grader hands your function {e}, which cannot cross into the "
                                     f"exam room as plain data") from None
            if all(r.ok for r in results):
                self.passed[name] = graded.cell.strip("\n") + "\n"
            return results

        if os.environ.get("MINIBERT_SOLUTIONS") == "1":
            solution = self.solution(name)
            results = run(solution)
            self._require(results, f"{title}: the reference solution ({rel})")
            print(f"{title}: MINIBERT_SOLUTIONS=1, the reference solution from {rel} passes")
            _print_rows(results)
            record["solution"] = _summary(results)
            record["mine"] = {"skipped": "MINIBERT_SOLUTIONS=1"}
            self._log(log, record, run, run_mine, solution)
            self.passed[name] = _solution_cell(solution)
            return solution

        try:
            results = run_mine(fn)
        except Stub as stub:
            message = f"{title}: not written yet ({stub})"
            print(f"{message}; the lesson goes on with the reference solution from {rel}:")
            solution = self.solution(name)
            results = run(solution)
            self._require(results, f"{title}: the reference solution ({rel})")
            _print_rows(results)
            record["mine"] = {"ok": False, "stub": True, "message": message}
            record["solution"] = _summary(results)
            self._log(log, record, run, run_mine, solution)
            self.passed[name] = _solution_cell(solution)
            return solution

        failed = [r for r in results if not r.ok]
        record["mine"] = {**_summary(results), "stub": False}
        if failed:
            _print_rows(results)
            message = _failure_message(title, failed, len(results))
            record["mine"]["message"] = message
            self._log(log, record, run, run_mine, None)
            raise ExerciseFailed(message)
        print(f"{title}: passed ({len(results)} check{'s' if len(results) > 1 else ''})")
        _print_rows(results)
        self._log(log, record, run, run_mine, None)
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

    def _log(self, log: str | None, record: dict, run: Callable, run_mine: Callable, solution) -> None:
        if not log:
            return
        if "solution" not in record:
            record["solution"] = _summary(run(self.solution(record["name"])))
        wrong_fn = solution or self.solution(record["name"])

        def wrong(*args, **kwargs):
            return _perturb(wrong_fn(*args, **kwargs))

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

                results = run(wrong_in_one)
                record["wrong_paths"][path] = {"failed": [r.name for r in results if not r.ok],
                                               "checks": [r.name for r in results]}
        title = f"exercise {record['number']}, {record['name']}"
        for variable, key in (("MINIBERT_SHORTCUTS", "shortcuts"), ("MINIBERT_MISTAKES", "mistakes")):
            for label, f in self.pasted(variable, record["name"]).items():  # graded as if typed in
                try:
                    results = run_mine(f)
                except Stub as e:
                    results = [Result(key, False, f"NotImplementedError: {e}")]
                failed = [r for r in results if not r.ok]
                summary = {**_summary(results), "message": _failure_message(title, failed, len(results)) if failed else ""}
                record.setdefault(key, {})[label or "direct"] = summary
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
