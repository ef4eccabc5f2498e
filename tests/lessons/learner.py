"""A lesson as a learner leaves it: every stub replaced by the reference solution's function (and
the solution's helpers), typed into the exercise's cell; optionally each answer written in a
natural style of its own (VARIANTS), which must pass as the plain answer does."""
from __future__ import annotations

import ast
from pathlib import Path

# each wraps the solution (renamed `_impl_<name>`) in one way a learner writes code: a constant of
# the cell, a functools.lru_cache helper, a functools.partial, an answer that raises (and silences) a
# NumPy RuntimeWarning, a class, a closure, np.einsum, the learner's own @numba.njit
VARIANTS = {
    "constant": ("ONE_{n} = 1.0\n", "assert ONE_{n} == 1.0"),
    "lru_cache": ("import functools\n@functools.lru_cache(maxsize=None)\ndef _one_{n}():\n    return 1\n",
                  "assert _one_{n}() == 1"),
    "partial": ("import functools\n_part_{n} = functools.partial(_impl_{n})\n", "return _part_{n}(*args, **kwargs)"),
    "warning": ("", "import numpy as np\n    with np.errstate(all='warn'):\n        z = np.zeros(2) / np.zeros(2)\n"
                    "    z[np.isnan(z)] = 0.0"),
    "class": ("class _Impl_{n}:\n    def __call__(self, *args, **kwargs):\n        return _impl_{n}(*args, **kwargs)\n",
              "return _Impl_{n}()(*args, **kwargs)"),
    "closure": ("def _make_{n}():\n    inner = _impl_{n}\n    def call(*args, **kwargs):\n"
                "        return inner(*args, **kwargs)\n    return call\n_closed_{n} = _make_{n}()\n",
                "return _closed_{n}(*args, **kwargs)"),
    "einsum": ("", "import numpy as np\n    assert np.einsum('i,i->', np.ones(3), np.ones(3)) == 3.0"),
    "njit": ("import numba\n@numba.njit\ndef _one_jit_{n}(a):\n    return a.sum()\n",
             "import numpy as np\n    assert _one_jit_{n}(np.ones(2)) == 2.0"),
}


def _defs(source: str) -> dict[str, ast.stmt]:
    return {n.name: n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}


def learner_lesson(lesson: Path, solution: Path, variants: tuple[str, ...] = ()) -> str:
    """The lesson's text with each stub replaced by its answer (in the same cell)."""
    text = lesson.read_text(encoding="utf-8")
    sol_text = solution.read_text(encoding="utf-8")
    sol_tree = ast.parse(sol_text)
    exercises = [n.name for n in sol_tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
    helpers = [ast.get_source_segment(sol_text, n) for n in sol_tree.body
               if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name.startswith("_")
               or isinstance(n, (ast.Assign,)) and all(isinstance(t, ast.Name) and t.id.isupper() and t.id != "KEYS"
                                                       for t in n.targets)
               or isinstance(n, (ast.Import, ast.ImportFrom)) and "__future__" not in ast.dump(n)
               and "minibert" not in ast.dump(n)]
    # a constant the solution imports from the library, as a learner writes it: through the lesson's `layers`
    helpers += [ast.get_source_segment(sol_text, n) for n in sol_tree.body if isinstance(n, ast.ImportFrom)
                and (n.module or "").startswith("minibert")]  # allowed pieces, typed as the solution imports them
    sol_defs = _defs(sol_text)
    stubs = _defs(text)
    lines = text.splitlines(keepends=True)
    for name in sorted(exercises, key=lambda n: -stubs[n].lineno):  # from the bottom: line numbers hold
        stub = stubs[name]
        start = stub.lineno - 1 - len(stub.decorator_list)
        answer = ast.get_source_segment(sol_text, sol_defs[name])
        decorated = sol_defs[name].decorator_list
        if decorated:
            answer = "\n".join("@" + ast.get_source_segment(sol_text, d) for d in decorated) + "\n" + answer
        if variants and not decorated:  # a Numba kernel stays one: its grader looks at how it was compiled
            impl = answer.replace(f"def {name}(", f"def _impl_{name}(", 1)
            pre, body = "", []
            for v in variants:
                head, line = VARIANTS[v]
                pre += head.format(n=name)
                body.append(line.format(n=name))
            if not any(b.startswith("return") for b in body):
                body.append(f"return _impl_{name}(*args, **kwargs)")
            body = body[:next(i for i, b in enumerate(body) if b.startswith("return")) + 1]
            answer = impl + "\n\n\n" + pre + f"def {name}(*args, **kwargs):\n    " + "\n    ".join(body) + "\n"
        lines[start:stub.end_lineno] = [answer + "\n"]
    # the solution's helpers and imports, typed into the first exercise's cell
    first = min(stubs[n].lineno - 1 - len(stubs[n].decorator_list) for n in exercises)
    lines.insert(first, "\n".join(helpers) + "\n\n\n")
    return "".join(lines)
