"""Which module of layer functions the model runs: the visible switch between the two.

`minibert.layers` is the NumPy reference, the code to read; `minibert.kernels` has the same
function names, with the hot layers compiled by Numba and the rest taken from the reference.
The model's functions take the module as their `ops` argument (default: `layers`), and
`BertForPreTraining` passes `get_ops()`: `kernels` unless MINIBERT_BACKEND=numpy.

MINIBERT_BACKEND is read once per process, at the first question (`chosen`); a program that
compares the two backends in one process (a test, a benchmark) sets `chosen` itself. Handing out
the kernels is also where the process gets the settings they run best with (kernels.setup: Numba's
threading layer, OpenBLAS's idle threads, glibc's freed memory).
"""
from __future__ import annotations

import os
from types import ModuleType

from minibert import layers

BACKENDS = ("numba", "numpy")

# The process's backend: None until the first question, then MINIBERT_BACKEND's value (or "numba").
chosen: str | None = None


def _checked(name: str) -> str:
    name = name.lower()
    if name not in BACKENDS:
        raise ValueError(f"MINIBERT_BACKEND={name!r} is not one of {BACKENDS}")
    return name


def backend_name(name: str | None = None) -> str:
    """`name` checked, or the process's backend: MINIBERT_BACKEND as it was at the first call."""
    global chosen
    if name:
        return _checked(name)
    if chosen is None:
        chosen = _checked(os.environ.get("MINIBERT_BACKEND") or "numba")
    return chosen


def get_ops(name: str | None = None) -> ModuleType:
    """minibert.kernels for "numba" (the default), minibert.layers for "numpy"."""
    if backend_name(name) == "numba":
        return numba_kernels()
    return layers


def numba_kernels() -> ModuleType:
    """minibert.kernels, with the process set up for it (kernels.setup, once). Imported on first
    use: `python -m minibert --help` and the NumPy backend never load Numba (startup time)."""
    # lazy: keeps Numba out of the start of `python -m minibert ablate` and 62 more
    from minibert import kernels  # noqa: PLC0415 - Numba's import takes ~0.5 s: only when the kernels run

    kernels.setup()
    return kernels
