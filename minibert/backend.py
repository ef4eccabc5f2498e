"""Which implementation of the layer functions the model uses.

`get_ops()` returns a namespace with every `<layer>_forward` / `<layer>_backward` of
`minibert.layers`. `MINIBERT_BACKEND=numpy` selects the NumPy reference itself; `numba`
(the default) selects `minibert.kernels.OPS`, where the hot layers are Numba-compiled and the
rest are the NumPy reference. Until the kernels exist, both names give the NumPy reference.
"""
from __future__ import annotations

import importlib.util
import os

BACKENDS = ("numba", "numpy")


def backend_name(name: str | None = None) -> str:
    name = (name or os.environ.get("MINIBERT_BACKEND") or "numba").lower()
    if name not in BACKENDS:
        raise ValueError(f"MINIBERT_BACKEND={name!r} is not one of {BACKENDS}")
    return name


def get_ops(name: str | None = None):
    name = backend_name(name)
    if name == "numba" and importlib.util.find_spec("minibert.kernels") is not None:
        from minibert import kernels

        return kernels.OPS
    from minibert import layers

    return layers
