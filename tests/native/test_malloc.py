"""minibert.native.malloc: with glibc, memory freed by one step is reused by the next without page faults."""
from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from minibert.native import malloc

# Allocate and free a step's worth of arrays of mixed sizes (1-24 MiB, 120 MiB in all) twice;
# print the page faults of the second round. Every array is written (np.ones), as activations are.
SCRIPT = """
import json, os, resource, sys
import numpy as np
from minibert.native import malloc
applied = malloc.keep_freed_memory()
sizes = [s << 20 for s in (24, 1, 8, 3, 16, 2, 12, 1, 20, 4, 6, 1, 9, 5, 8)]
def step():
    arrays = [np.ones(s // 4, dtype=np.float32) for s in sizes]
    del arrays
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
step()
print(json.dumps({"applied": applied, "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before}))
"""


def _second_step_faults(keep: str) -> dict:
    env = {"MINIBERT_KEEP_MEMORY": keep, "PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc" or not sys.platform.startswith("linux"),
                    reason="mallopt and ru_minflt: Linux with glibc only")
def test_kept_memory_is_reused_without_page_faults():
    kept, default = _second_step_faults("1"), _second_step_faults("0")
    assert kept["applied"] and not default["applied"]
    pages = (120 << 20) // 4096  # a fault per 4 KiB page if none of it were reused
    # kept, almost every page of the first round is reused; glibc's default gives most of it back
    # to the kernel (here: a fault for each of the 30,720 pages; fewer where the kernel backs the
    # memory with 2 MiB pages, so the default's count is only compared, not bounded)
    assert kept["faults"] < pages // 100, kept
    assert default["faults"] >= kept["faults"], (default, kept)


def test_off_switch_and_other_libcs_leave_malloc_alone(monkeypatch):
    monkeypatch.setenv(malloc.ENV, "0")
    assert malloc.keep_freed_memory() is False
    monkeypatch.setenv(malloc.ENV, "1")
    monkeypatch.setattr(malloc.platform, "libc_ver", lambda: ("", ""))
    assert malloc.keep_freed_memory() is False
