"""Which module of layer functions the model runs: the visible switch between the two.

`minibert.layers` is the NumPy reference, the code to read; `minibert.kernels` has the same
function names, with the hot layers compiled by Numba and the rest taken from the reference.
The model's functions take the module as their `ops` argument (default: `layers`), and
`BertForPreTraining` passes `get_ops()`: `kernels` unless MINIBERT_BACKEND=numpy.
"""
from __future__ import annotations

import os
from types import ModuleType

BACKENDS = ("numba", "numpy")


def backend_name(name: str | None = None) -> str:
    name = (name or os.environ.get("MINIBERT_BACKEND") or "numba").lower()
    if name not in BACKENDS:
        raise ValueError(f"MINIBERT_BACKEND={name!r} is not one of {BACKENDS}")
    return name


def get_ops(name: str | None = None) -> ModuleType:
    """minibert.kernels for "numba" (the default), minibert.layers for "numpy"."""
    if backend_name(name) == "numba":
        from minibert import kernels

        return kernels
    from minibert import layers

    return layers
