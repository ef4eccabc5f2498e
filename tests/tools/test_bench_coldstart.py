"""The cold-start bench's pieces: the tree copy, the compile notice (the compile recorder it uses is
compile_ahead.record_compiles: tests/test_compile_ahead.py)."""
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
    assert (copy / "minibert" / "kernels.py").read_bytes() == (bench_coldstart.ROOT / "minibert" / "kernels.py").read_bytes()
    assert (copy / "lessons" / "06_attention_numba.py").is_file()
    assert not (copy / ".venv").exists()
    assert not list(copy.rglob("*.nbi"))  # no Numba cache: the copy starts cold
