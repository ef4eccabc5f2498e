"""The cold-start bench's pieces: the tree copy (in a git work tree and outside one), the compile
notice (the compile recorder it uses is compile_ahead.record_compiles: tests/kernels/test_compile_ahead.py)."""
import shutil

import numba
import pytest

from minibert import kernels  # noqa: F401  registers the compile notice
from minibert.tools import bench_coldstart


def _fresh_function(module):
    """A new Python function (so nothing of it is compiled or cached) that claims `module`."""
    def add_one(x):
        return x + 1

    add_one.__module__ = module
    return numba.njit(add_one)  # no cache=True: it compiles in this process


def test_a_minibert_kernel_that_compiles_says_so_on_stderr(capsys):
    _fresh_function("minibert.kernels")(1)
    assert "compiling Numba kernel add_one (first run only" in capsys.readouterr().err
    _fresh_function("tests.tools")(1)  # not minibert's: silent
    assert capsys.readouterr().err == ""


def test_copy_tree_copies_the_sources_and_not_the_ignored_files(tmp_path):
    copy = bench_coldstart.copy_tree(tmp_path)
    assert (copy / "minibert" / "kernels" / "attention.py").read_bytes() == \
        (bench_coldstart.ROOT / "minibert" / "kernels" / "attention.py").read_bytes()
    assert (copy / "lessons" / "06_attention_numba.py").is_file()
    assert not (copy / ".venv").exists()
    assert not list(copy.rglob("*.nbi"))  # no Numba cache: the copy starts cold


def test_outside_a_git_work_tree_the_copy_is_what_gitignore_leaves(tmp_path, monkeypatch):
    """An unpacked `git archive` has no .git: the copy walks the tree and leaves out what .gitignore
    names (it was git's CalledProcessError traceback)."""
    src = tmp_path / "src"
    files = {"minibert/kernels/attention.py": "x = 1\n", "minibert/kernels/__pycache__/attention.k.nbi": "cache",
             ".venv/lib/site.py": "", "lessons/06_attention_numba.py": "",
             "/".join(("lessons", "06_attention_numba.ipynb")): "{}",  # a generated notebook (the docs test reads paths)
             "data/generated/vocab.txt": "", "data/sample.txt": "text\n", "runs/tiny/config.json": "{}"}
    for name, text in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text, encoding="utf-8")
    shutil.copy(bench_coldstart.ROOT / ".gitignore", src / ".gitignore")
    monkeypatch.setattr(bench_coldstart, "ROOT", src)
    copy = bench_coldstart.copy_tree(tmp_path / "out")
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()) == \
        [".gitignore", "data/sample.txt", "lessons/06_attention_numba.py", "minibert/kernels/attention.py"]


@pytest.mark.skipif(not (bench_coldstart.ROOT / ".git").exists(), reason="needs the git work tree to compare with")
def test_the_walk_without_git_lists_what_git_lists():
    """.gitignore read by `ignored` leaves the same files as git itself (a pattern git reads otherwise
    would make a copy outside git differ from one inside)."""
    root = bench_coldstart.ROOT
    assert bench_coldstart.walked_files(root) == sorted(name for name in bench_coldstart.tree_files(root)
                                                        if (root / name).is_file())
