"""The lessons as Jupyter notebooks: `python -m minibert notebooks` (`make notebooks`).

Each lesson is a "percent" script (`# %% [markdown]` text cells, `# %%` code cells, the format
jupytext reads). This module writes `lessons/NN_*.ipynb` from them, next to the scripts, so a
notebook finds `lessons/course.py`, `lessons/solutions/` and `lessons/out/` as the script does.
The files are generated and git-ignored: edit the `.py`, regenerate the notebook.

Dependency-free on purpose: the conversion is a few lines of parsing plus nbformat-4 JSON, so it
needs neither jupytext nor nbformat, and `--execute` runs a notebook without a Jupyter kernel:

    python -m minibert notebooks                 # write every lessons/NN_*.ipynb (no outputs)
    python -m minibert notebooks 03 05           # only lessons 03 and 05
    python -m minibert notebooks --execute 05    # and run it, saving outputs and inline pictures

`--execute` runs each notebook in its own process, cell by cell in one namespace, the way a
kernel does, and records what a notebook shows: printed text, the value of a cell's last
expression, errors, and figures. Figures follow the rules of matplotlib's inline backend (this
module is that backend while it runs: "module://minibert.tools.notebooks"): `plt.show()` displays every
open figure and closes it, and figures still open when a cell ends are displayed then. To open
the notebooks in Jupyter instead, install it into the same environment (`.venv/bin/pip install
jupyterlab`, then `.venv/bin/jupyter lab lessons/`).
"""
from __future__ import annotations

import argparse
import ast
import base64
import contextlib
import linecache
import io
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

from minibert.io.cli import command_parser
from minibert.io.outputs import check_output, make_dir, write_output
from minibert.io.paths import repo_root

ROOT = repo_root()
LESSONS = ROOT / "lessons"
BACKEND = "module://minibert.tools.notebooks"

# ---------------------------------------------------------------------------------------------
# percent script -> notebook


def split_cells(source: str) -> list[tuple[str, str]]:
    """A percent-format script -> [(cell_type, text)], cell_type "markdown" or "code".

    `# %% [markdown]` starts a text cell whose lines lose their leading "# " (or "#");
    `# %%` starts a code cell. Blank lines at either end of a cell are dropped; text before
    the first marker is a code cell if it holds anything."""
    cells: list[tuple[str, list[str]]] = []
    kind, lines = "code", []
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith("# %%"):
            cells.append((kind, lines))
            kind = "markdown" if "[markdown]" in stripped else "code"
            lines = []
            continue
        if kind == "markdown":
            line = line[2:] if line.startswith("# ") else line[1:] if line.startswith("#") else line
        lines.append(line)
    cells.append((kind, lines))
    out = []
    for kind, lines in cells:
        while lines and not lines[0].strip():
            lines = lines[1:]
        while lines and not lines[-1].strip():
            lines = lines[:-1]
        if lines:
            out.append((kind, "\n".join(lines)))
    return out


def _source_lines(text: str) -> list[str]:
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + [lines[-1]]


def to_notebook(source: str) -> dict:
    """nbformat 4.5 JSON (as a dict) for a percent-format script; code cells have no outputs."""
    cells = []
    for i, (kind, text) in enumerate(split_cells(source)):
        cell = {"cell_type": kind, "id": f"cell-{i:03d}", "metadata": {}, "source": _source_lines(text)}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        cells.append(cell)
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python", "version": f"{sys.version_info.major}.{sys.version_info.minor}"},
            "jupytext": {"formats": "ipynb,py:percent"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def write_notebook(nb: dict, path: Path) -> Path:
    """The notebook written into its folder (atomically; a link, a FIFO or a folder at `path` is
    refused: a FIFO there hung the command, waiting for a reader)."""
    return write_output(path, json.dumps(nb, indent=1, ensure_ascii=False) + "\n", root=path.parent)


# ---------------------------------------------------------------------------------------------
# the inline backend: while a notebook executes, matplotlib draws through this module


def _figure_output(fig) -> dict:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", dpi=72)
    w, h = fig.get_size_inches()
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"),
                     "text/plain": f"<Figure size {w * 72:.0f}x{h * 72:.0f} with {len(fig.axes)} Axes>"}}


class _Cell:
    """Where the running cell's outputs go (set by the executor)."""

    outputs: list | None = None


class _Stream(io.TextIOBase):
    """sys.stdout / sys.stderr during a cell: text becomes "stream" outputs, in order with the
    pictures (consecutive writes to the same stream join one output, as in Jupyter)."""

    def __init__(self, name: str):
        self.name = name

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        outputs = _Cell.outputs
        if outputs is not None and text:
            if outputs and outputs[-1].get("output_type") == "stream" and outputs[-1]["name"] == self.name:
                outputs[-1]["text"] += text
            else:
                outputs.append({"output_type": "stream", "name": self.name, "text": text})
        return len(text)


def _flush_figures() -> None:
    """Display every open figure in the running cell, then close it (the inline backend's rule)."""
    # lazy: keeps NumPy and matplotlib out of the start of `python -m minibert notebooks`
    import matplotlib.pyplot as plt

    for num in plt.get_fignums():
        fig = plt.figure(num)
        if _Cell.outputs is not None:
            _Cell.outputs.append(_figure_output(fig))
    plt.close("all")


def show(*args, **kwargs) -> None:
    """pyplot.show() under this backend: display the open figures inline and close them."""
    _flush_figures()


def _backend_classes():
    # lazy: keeps NumPy and matplotlib out of the start of `python -m minibert notebooks`
    from matplotlib.backend_bases import FigureManagerBase
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    return FigureCanvasAgg, FigureManagerBase


def __getattr__(name: str):
    # matplotlib asks the backend module for FigureCanvas (and FigureManager); importing them
    # lazily keeps `python -m minibert notebooks` (no --execute) free of matplotlib
    # (pyplot then copies the module's globals, so the classes are stored there on first use)
    if name in ("FigureCanvas", "FigureManager"):
        globals()["FigureCanvas"], globals()["FigureManager"] = _backend_classes()
        return globals()[name]
    raise AttributeError(name)


# ---------------------------------------------------------------------------------------------
# executing a notebook


def _run_cell(code: str, namespace: dict, outputs: list, count: int) -> bool:
    """Run one code cell; append its outputs. False if it raised (the run stops there)."""
    _Cell.outputs = outputs
    ok = True
    try:
        tree = ast.parse(code)
        # the cell's text where inspect and tracebacks look for it (as IPython does): the lessons'
        # exam room grades an exercise from its cell's source
        linecache.cache[f"<cell {count}>"] = (len(code), None, code.splitlines(True), f"<cell {count}>")
        last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        body = ast.Module(body=tree.body[:-1] if last else tree.body, type_ignores=[])
        with contextlib.redirect_stdout(_Stream("stdout")), contextlib.redirect_stderr(_Stream("stderr")):
            exec(compile(body, f"<cell {count}>", "exec"), namespace)
            result = None
            if last is not None:
                result = eval(compile(ast.Expression(last.value), f"<cell {count}>", "eval"), namespace)
            if result is not None:
                outputs.append({"output_type": "execute_result", "execution_count": count, "metadata": {},
                                "data": {"text/plain": repr(result)}})
            _flush_figures()  # figures left open at the end of a cell are displayed, as inline does
    except BaseException as e:  # noqa: BLE001 - a notebook shows every error in its cell
        ok = False
        tb = traceback.format_exception(type(e), e, e.__traceback__)
        outputs.append({"output_type": "error", "ename": type(e).__name__, "evalue": str(e), "traceback": tb})
    finally:
        _Cell.outputs = None
    return ok


def execute(nb: dict, workdir: Path = LESSONS) -> tuple[dict, bool]:
    """Run a notebook's code cells in order in this process (cwd and sys.path at `workdir`, as
    a kernel started there). Returns (the notebook with outputs, True if every cell ran)."""
    # lazy: keeps NumPy and matplotlib out of the start of `python -m minibert notebooks`
    import matplotlib

    matplotlib.use(BACKEND)
    os.chdir(workdir)
    sys.path.insert(0, str(workdir))
    namespace = {"__name__": "__main__"}
    count = 0
    ok = True
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        if not ok:  # after an error, the rest is left unrun
            break
        count += 1
        outputs: list = []
        ok = _run_cell("".join(cell["source"]), namespace, outputs, count)
        cell["outputs"], cell["execution_count"] = outputs, count
    return nb, ok


def count_images(nb: dict) -> int:
    """The number of PNG pictures in a notebook's outputs."""
    return sum("image/png" in o.get("data", {}) for c in nb["cells"] if c["cell_type"] == "code"
               for o in c.get("outputs", []))


# ---------------------------------------------------------------------------------------------
# the command


def lesson_paths(selected: list[str]) -> list[Path]:
    """lessons/NN_*.py, all or those whose name starts with one of `selected` ("03", "03_soft")."""
    paths = sorted(LESSONS.glob("[0-9][0-9]_*.py"))
    if selected:
        chosen = [p for p in paths if any(p.name.startswith(s) for s in selected)]
        unknown = [s for s in selected if not any(p.name.startswith(s) for p in paths)]
        if unknown:
            raise ValueError(f"no lesson matches {', '.join(unknown)}; lessons are "
                             f"{', '.join(p.stem for p in paths)}")
        return chosen
    return paths


def cli(argv: list[str]) -> int:
    p = command_parser("notebooks", "Write lessons/NN_*.ipynb from the lesson scripts.")
    p.add_argument("lessons", nargs="*", help="lesson numbers or name prefixes (default: all)")
    p.add_argument("--execute", action="store_true",
                   help="run each notebook (in its own process) and save its outputs and pictures")
    p.add_argument("--out", default=None,
                   help="directory for the .ipynb files (default lessons/; a notebook elsewhere runs "
                        "here with --execute, but Jupyter would not find lessons/course.py)")
    p.add_argument("--execute-one", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.execute_one:  # the child process of --execute: run one notebook file in place
        path = Path(args.execute_one)
        nb, ok = execute(json.loads(path.read_text(encoding="utf-8")))
        write_notebook(nb, path)
        print(f"{path.name}: {'ran' if ok else 'stopped at an error'}, {count_images(nb)} pictures")
        return 0 if ok else 1
    out_dir = Path(args.out) if args.out else LESSONS
    check_output(out_dir, kind="dir")  # not inside a run, not a file, not a link
    make_dir(out_dir)
    failed = []
    for src in lesson_paths(args.lessons):
        path = write_notebook(to_notebook(src.read_text(encoding="utf-8")), out_dir / f"{src.stem}.ipynb")
        print(f"wrote {path}", flush=True)
        if args.execute:
            rc = subprocess.call([sys.executable, "-m", "minibert", "notebooks", "--execute-one", str(path)],
                                 cwd=LESSONS)
            if rc != 0:
                failed.append(src.name)
    if failed:
        print(f"error: {', '.join(failed)} stopped at an error (the notebook shows where)", file=sys.stderr)
        return 1
    return 0
