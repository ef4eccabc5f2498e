"""`python -m minibert bench --only startup`: Numba's compile time on a cold cache, and a process's
import plus its first tiny training step on a warm one."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

from minibert.tools.bench_common import ROOT, fmt_table


STARTUP_SCRIPT = """
import time
t0 = time.perf_counter()
import numpy as np
import minibert
from minibert import kernels  # loads (or compiles) the Numba functions
from minibert.tools import bench_common, bench_step
from minibert.analysis.gradcheck import random_batch
from minibert.model import BertConfig
t1 = time.perf_counter()
cfg = BertConfig(**bench_common.CONFIGS["tiny"])
batch = random_batch(cfg, 32, 128, 20, np.random.default_rng(0))
bench_step.minibert_step_fn(cfg, batch, "numba")()
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def _run_startup(cache_dir: str) -> tuple[float, float, float]:
    """(wall seconds of the whole process, import seconds, first-step seconds) in a subprocess."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, MINIBERT_BACKEND="numba")
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", STARTUP_SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"start-up subprocess failed:\n{res.stderr[-2000:]}")
    t_import, t_step = map(float, res.stdout.split()[-2:])
    return wall, t_import, t_step


def bench_startup(report: dict, reps: int) -> None:
    with tempfile.TemporaryDirectory(prefix="minibert-numba-cache-") as cache:
        cold = _run_startup(cache)  # empty cache: every kernel compiles
        warm = [_run_startup(cache) for _ in range(reps)]  # the same cache, now filled
    warm_wall = statistics.median(w[0] for w in warm)
    warm_import = statistics.median(w[1] for w in warm)
    warm_step = statistics.median(w[2] for w in warm)
    out = {"cold_wall_s": cold[0], "cold_import_s": cold[1], "cold_first_step_s": cold[2],
           "warm_wall_s": warm_wall, "warm_import_s": warm_import, "warm_first_step_s": warm_step,
           "compile_s": cold[0] - warm_wall}
    report["startup"] = out
    print(f"\n== start-up (python process: import minibert + kernels, then the first tiny training step); "
          f"warm = median of {reps}")
    print(fmt_table(["cache", "process s", "import s", "first step s"],
                    [["cold (fresh NUMBA_CACHE_DIR)", f"{cold[0]:.2f}", f"{cold[1]:.2f}", f"{cold[2]:.2f}"],
                     ["warm", f"{warm_wall:.2f}", f"{warm_import:.2f}", f"{warm_step:.2f}"]]))
    print(f"Numba compile time (cold - warm): {out['compile_s']:.1f} s; target: warm process < 3 s")
