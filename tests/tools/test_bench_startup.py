"""`bench --only startup`: the script the start-up section times imports what exists."""
from __future__ import annotations

import os
import subprocess
import sys

from corpora import REPO

from minibert.tools.bench_startup import STARTUP_SCRIPT


def test_bench_startup_script_imports():
    """The start-up section timed a script that imported `minibert.bench`, gone since bench moved
    to minibert/tools: every `bench --only startup` ended in a traceback. Its imports, run alone:"""
    imports = STARTUP_SCRIPT.split("t1 = ")[0] + "assert bench_common.CONFIGS['tiny'] and bench_step.minibert_step_fn\n"
    res = subprocess.run([sys.executable, "-c", imports], capture_output=True, text=True, cwd=REPO, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert res.returncode == 0, res.stderr[-2000:]
