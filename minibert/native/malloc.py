"""glibc's malloc, told to keep the memory a training step frees for the next step.

A training step allocates and frees the same few hundred MiB of NumPy arrays every step:
activations, their caches, the gradients. glibc's malloc serves large requests with mmap and
gives freed memory back to the kernel (munmap, or trimming the top of the heap), so the next step
gets fresh pages, and the kernel zeroes each 4 KiB page on its first write: a page fault. In the
tiny pretraining step (B=32, T=128, 2 cores) that was about 7,100 page faults and 60-90 ms of
system CPU time per step of about 200 ms (counted with getrusage: `ru_minflt`, `ru_stime`).

`keep_freed_memory()` sets two of malloc's parameters with mallopt(3):
    M_MMAP_THRESHOLD = 32 MiB  requests below this come from the heap, not from mmap (32 MiB is
                               glibc's largest allowed value on 64-bit; setting it also stops
                               glibc's own adjusting of the threshold);
    M_TRIM_THRESHOLD = 1 GiB   free memory at the top of the heap is given back to the kernel
                               only beyond this.
After the first step, the arrays of the next step reuse the pages of the last one: no page
faults, no system time. The cost: the process keeps the memory of its largest step until it
exits, which is what a training process needs anyway (the next step uses it again). The peak
does not grow: it is the same arrays.

It is applied when the Numba backend (minibert.kernels) loads, the process-wide settings for
speed live there; MINIBERT_KEEP_MEMORY=0 in the environment leaves malloc alone. Elsewhere than
glibc (macOS, musl) it does nothing: those allocators have their own policies.
"""
from __future__ import annotations

import ctypes
import os
import platform

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)
MMAP_THRESHOLD = 32 << 20  # bytes; glibc's maximum on 64-bit (HEAP_MAX_SIZE / 2)
TRIM_THRESHOLD = 1 << 30  # bytes
ENV = "MINIBERT_KEEP_MEMORY"


def keep_freed_memory() -> bool:
    """Set malloc's mmap and trim thresholds (see the module docstring). True if they were set;
    False without glibc or with MINIBERT_KEEP_MEMORY=0."""
    if os.environ.get(ENV, "1") == "0" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # mallopt returns 1 on success, 0 on a rejected value
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def available_memory() -> int | None:
    """Bytes of memory a new allocation can get now: MemAvailable of /proc/meminfo (Linux), else
    the free physical pages (os.sysconf); None where neither is known."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # in kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None
