"""Plausible wrong answers to lesson 01's exercises (see README.md)."""


def my_linear_backward__dw_transposed(dout, x, w):
    c_in, c_out = w.shape
    return dout @ w.T, dout.reshape(-1, c_out).T @ x.reshape(-1, c_in), dout.reshape(-1, c_out).sum(0)


def my_gelu_tanh_backward__one_path(dout, x):
    import math
    t = np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))  # noqa: F821
    return dout * 0.5 * (1 + t)  # only the factor (1 + t): the product rule's second term forgotten


def my_gelu_max_gap__coarse_grid(lo, hi):
    grid = np.linspace(lo, hi, 13)  # noqa: F821  a step of 1 on [-6, 6]: misses the peak of the gap
    return np.abs(layers.gelu_forward(grid)[0] - layers.gelu_forward(grid, approximate="tanh")[0]).max()  # noqa: F821


def my_gelu_tanh_backward__no_cubic_in_du(dout, x):
    import math
    k = math.sqrt(2 / math.pi)
    t = np.tanh(k * (x + 0.044715 * x**3))  # noqa: F821
    return dout * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k)  # du/dx taken as sqrt(2/pi): the cubic term's derivative dropped


def my_gelu_max_gap__signed(lo, hi):
    grid = np.linspace(lo, hi, 120_001)  # fine enough; the max of the signed difference, not of its size
    return (layers.gelu_forward(grid)[0] - layers.gelu_forward(grid, approximate="tanh")[0]).max()  # noqa: F821


def my_gelu_max_gap__typed_in(lo, hi):
    return 4.73e-04  # the number the lesson prints for [-6, 6], typed in
