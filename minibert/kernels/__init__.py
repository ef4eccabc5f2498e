"""Numba versions of the hot layers, with the same signatures and caches as `minibert.layers`
(the exceptions keep less: GELU's cache holds the derivative (`GeluGradCache`), dropout's and
attention v4's the dropout key instead of the mask (`DropoutKey`), the packed attention's the
heads' blocks (`PackedHeadsCache`)).

This package is what the model runs when MINIBERT_BACKEND=numba (the default; see
minibert/backend.py): it has every function name of `minibert.layers` that the model uses, the
ones that pay compiled, the rest the reference's own (`kernels.split_heads is
layers.split_heads`). Everything of a training step that is more than a few kilobytes runs in
parallel here, on Numba's threads or OpenBLAS's: what stays on one thread costs the same at 16
cores as at 2 (docs/speed.md, "Many cores"). `minibert/layers.py` stays the source of truth;
tests/kernels/test_kernels.py checks every kernel against it (float64 to 1e-10 relative, float32 scaled
to magnitude).

One module per family of kernels, each standing on the last two (vector_math and runtime):
    attention.py      the attention core: v4 (one pass per head calling OpenBLAS's gemm), on the
                      grid and on packed rows, and v2, its fallback without OpenBLAS
    elementwise.py    linear's bias and column sums, GELU, add and multiply
    dropout.py        dropout, and the Philox bits every kernel that drops draws inside its pass
    normalisation.py  LayerNorm
    embedding.py      the embedding sum and its scatter-add; a parallel `zeros`
    cross_entropy.py  softmax cross-entropy, with class weights
    optimizer.py      the global gradient norm, clipping and AdamW over every parameter at once
    vector_math.py    exp and erf that vectorize, row sums, maxima, dot products and softmax: the
                      building blocks compiled into the kernels above
    runtime.py        the process setup (threads, OpenBLAS, memory), `kernel_jit` and its registry,
                      serial twins, the compile notice, the cache's freshness stamp
    compile_ahead.py  the kernels of a tiny step and of the lessons compiled ahead, in several
                      processes (`python -m minibert compile-ahead`, run by `make venv`)
The package's names are the public names of the families (what the model, the optimizer, the
lessons and the benchmarks call); a family's private helpers are reached through its module
(`kernels.attention._softmax_rows_kernel`). A new kernel goes into its family's module, with its
public name added below and a check against the reference in tests/kernels/test_kernels.py; a call of
a tiny step or a lesson that compile-ahead's plans do not make yet is a plan's line there.

Rules: no fastmath (everything here is gradient-checked), `cache=True` (the second run does not
compile again; the cache lives in __pycache__), parallel loops only over independent outputs
(each (b, h) owns its rows of att, out, dq, dk, dv). Sums that would be serial reductions are
split into 8 partial sums so they vectorize; this changes the summation order, not the math.
Work is cut into pieces of a fixed size, not one per thread, so results do not depend on the
number of threads (layernorm_backward's weight sums excepted). For debugging, run with
NUMBA_DISABLE_JIT=1: every kernel then runs as plain Python (slow) and can be stepped through.
"""
from minibert.kernels.runtime import KERNELS, kernel_jit, serial_version, setup, threads  # noqa: F401
from minibert.kernels.vector_math import masked_softmax_row  # noqa: F401
from minibert.kernels.dropout import DropoutKey, dropout_backward, dropout_forward  # noqa: F401
from minibert.kernels.attention import (PARALLEL_MIN_WORK, PackedHeadsCache, attention_backward,  # noqa: F401
                                        attention_backward_fallback, attention_dropout_mask, attention_forward,
                                        attention_forward_fallback, attention_inputs, attention_packed_backward,
                                        attention_packed_forward, mask_array, merge_qkv, pick_kernel,
                                        softmax_backward_head, times_drop)
from minibert.kernels.elementwise import (GeluGradCache, add, add_bias, column_sum, gelu_backward,  # noqa: F401
                                          gelu_forward, linear_backward, linear_forward, multiply)
from minibert.kernels.normalisation import layernorm_backward, layernorm_forward  # noqa: F401
from minibert.kernels.embedding import embedding_backward, embedding_forward, scatter_add_rows, zeros  # noqa: F401
from minibert.kernels.cross_entropy import cross_entropy_backward, cross_entropy_forward  # noqa: F401
from minibert.kernels.optimizer import adamw_update, adamw_update_all, scaled, sum_of_squares  # noqa: F401
# the rest of what the model uses: the NumPy reference itself (not worth compiling)
from minibert.layers import MASK_VALUE, merge_heads, split_heads  # noqa: F401
