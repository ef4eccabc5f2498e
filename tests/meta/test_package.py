"""The package root: `from minibert import BertConfig, ...` works, and stays lazy.

`import minibert` must not import NumPy: minibert/__init__.py sets OPENBLAS_THREAD_TIMEOUT,
which OpenBLAS reads only when NumPy loads it, and `python -m minibert --help` must stay fast.
"""
from __future__ import annotations

import subprocess
import sys

import pytest
from corpora import REPO

import minibert

ROOT = REPO


def _run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_every_name_in_all_resolves():
    assert "BertForPreTraining" in minibert.__all__ and len(minibert.__all__) == len(set(minibert.__all__))
    for name in minibert.__all__:
        value = getattr(minibert, name)
        assert callable(value), name
    from minibert.train import pretrain

    assert minibert.pretrain is pretrain.train  # train.pretrain.train, renamed (see __init__)
    assert minibert.pretrain.__module__ == "minibert.train.pretrain"  # where the package defines it


def test_the_readme_names_import_from_the_root():
    from minibert import BertConfig, BertForPreTraining, BertTokenizer
    from minibert.bert import BertForPreTraining as Model
    from minibert.text.tokenizer import BertTokenizer as Tokenizer

    assert BertForPreTraining is Model and BertTokenizer is Tokenizer
    assert BertConfig.__module__ == "minibert.model"


def test_submodules_still_import_as_submodules():
    from minibert.analysis import gradcheck
    from minibert import train

    assert train.__name__ == "minibert.train" and gradcheck.__name__ == "minibert.analysis.gradcheck"
    assert minibert.layers.__name__ == "minibert.layers"  # loaded on attribute access


def test_dir_lists_the_exports_and_submodules():
    names = dir(minibert)
    assert set(minibert.__all__) <= set(names) and "io" in names and "__version__" in names


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="module 'minibert' has no attribute 'NoSuchThing'"):
        minibert.NoSuchThing  # noqa: B018
    assert not hasattr(minibert, "bert_forward")  # not exported: import it from minibert.model
    with pytest.raises(ImportError):
        from minibert import NoSuchThing  # noqa: F401


def test_import_minibert_does_not_import_numpy():
    out = _run("import sys, minibert; print('numpy' in sys.modules, 'numba' in sys.modules, "
               "sorted(m for m in sys.modules if m.startswith('minibert')))")
    assert out == "False False ['minibert']"


def test_a_root_name_loads_only_what_it_needs():
    out = _run("import sys; from minibert import BertTokenizer; print('numpy' in sys.modules)")
    assert out == "False"  # the tokenizer is pure Python
