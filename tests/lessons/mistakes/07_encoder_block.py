"""Plausible wrong answers to lesson 07's exercises (see README.md)."""


def my_block_param_count__no_biases(C, FF):
    return C * 3 * C + C * C + C * FF + FF * C + 4 * C
