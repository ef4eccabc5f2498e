"""docs/architecture.md's traced pretraining and fine-tuning steps are today's code's: the test
runs the generator (tests/devtools/trace_step.py) and compares, so a moved or renamed function
fails here, with the command that writes the page again."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from corpora import REPO
from devtools import trace_step
from minibert.native import blas

GENERATOR = REPO / "tests" / "devtools" / "trace_step.py"


@pytest.mark.skipif(blas.gemm_for_kernels(np.float32) is None, reason="the page traces NumPy on OpenBLAS (attention v4's path)")
def test_the_architecture_page_shows_the_steps_of_todays_code():
    run = subprocess.run([sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr


TRACES = {"python -m minibert train": ["minibert/__main__.py:main", "  minibert/train/commands.py:cli"],
          "python -m minibert finetune": ["minibert/__main__.py:main", "  minibert/finetune/commands.py:cli"]}


def page(first: str, second: str) -> str:
    return f"# x\n\nPretraining:\n\n```\n{first}\n```\n\ntext\n\n```\nnot a trace\n```\n\nFine-tuning:\n\n```\n{second}\n```\n"


def test_the_check_sees_a_function_that_moved_and_the_write_mends_it():
    current = page(*("\n".join(lines) for lines in TRACES.values()))
    assert trace_step.documented(current) == ["\n".join(lines) for lines in TRACES.values()]
    assert trace_step.difference(current, TRACES) == ""
    stale = current.replace("minibert/finetune/commands.py:cli", "minibert/finetune/old_place.py:cli")
    diff = trace_step.difference(stale, TRACES)
    assert "-  minibert/finetune/old_place.py:cli" in diff and "+  minibert/finetune/commands.py:cli" in diff
    assert trace_step.rewrite(stale, TRACES) == current  # the other blocks and the text stay as they are
    with pytest.raises(ValueError, match="1 trace blocks, expected 2"):
        trace_step.rewrite("```\nminibert/__main__.py:main\n```\n", TRACES)
