"""Imports stand at the top of the file, so a file's header shows what it depends on: an import
inside a function is there for a reason tests/devtools/hoist_imports.py can name (a start it keeps
NumPy, Numba or matplotlib out of, an optional package, a name tests replace, a module above
this one), written on the line above it as `# lazy: <why>`."""
from __future__ import annotations

import shutil
import subprocess
import sys

from corpora import REPO


def test_every_import_inside_a_function_has_a_reason():
    run = subprocess.run([sys.executable, str(REPO / "tests" / "devtools" / "hoist_imports.py"), str(REPO), "--check"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"imports that belong at the top of their files:\n{run.stdout}{run.stderr}"
    assert "minibert's own imports inside functions" in run.stdout


def test_the_check_catches_an_import_that_belongs_at_the_top(tmp_path):
    tree = tmp_path / "repo"
    shutil.copytree(REPO / "minibert", tree / "minibert", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "tests", tree / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tree / "pyproject.toml")
    optim = tree / "minibert" / "optim.py"
    optim.write_text(optim.read_text(encoding="utf-8") + "\n\ndef _late():\n    import json\n    return json\n",
                     encoding="utf-8")
    run = subprocess.run([sys.executable, str(REPO / "tests" / "devtools" / "hoist_imports.py"), str(tree), "--check"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "optim.py" in run.stdout, run.stdout + run.stderr
