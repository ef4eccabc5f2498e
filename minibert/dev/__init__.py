"""Development versions of the model's kernels, as llm.c's dev/: the earlier attention cores (v1,
all loops in Numba; v3, batched OpenBLAS matmuls around the fused softmax) that docs/speed.md's
story measures against the model's v4 in minibert/kernels/attention.py. The model never runs them; the
attention bench (`python -m minibert bench --only attention`) and the tests that hold them to the
reference (tests/kernels/test_kernels.py, tests/native/test_blas.py) do.

No imports here: import the modules one by one."""
