"""minibert: BERT built from scratch in NumPy, with every gradient written by hand."""
import os

# OpenBLAS's idle threads spin for 2**28 cycles (~0.1 s) after each matmul before they sleep,
# and in a training step every matmul is followed by a Numba kernel that wants the same cores:
# with 2**4 cycles the tiny training step took 0.40-0.41 s instead of 0.44-0.48 s (2 cores).
# Read by OpenBLAS when NumPy loads it, so it only takes effect if minibert is imported before
# numpy (as `python -m minibert ...` does); an explicit setting in the environment wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

__version__ = "0.1.0"
