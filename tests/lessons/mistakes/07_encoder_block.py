"""Plausible wrong answers to lesson 07's exercises (see README.md)."""


def my_block_param_count__no_biases(C, FF):
    return C * 3 * C + C * C + C * FF + FF * C + 4 * C


def my_ffn_backward__wrong_cache_order(dh, c_in, c_gelu, c_fo):
    dg, dw_out, db_out = layers.linear_backward(dh, c_fo)  # noqa: F821
    dx1, dw_in, db_in = layers.linear_backward(dg, c_in)  # noqa: F821  the GELU skipped
    return dx1, dw_in, db_in, dw_out, db_out


def my_stack_blocks__one_layer_twice(x, params, attn_mask, block, n_layers):
    for _ in range(n_layers):
        x, _ = block(x, params, attn_mask, pre="h0.")  # always layer 0's parameters
    return x


def my_ffn_backward__in_out_swapped(dh, c_in, c_gelu, c_fo):
    dg, dw_out, db_out = layers.linear_backward(dh, c_fo)  # noqa: F821
    dx1, dw_in, db_in = layers.linear_backward(layers.gelu_backward(dg, c_gelu), c_in)  # noqa: F821
    return dx1, dw_out, db_out, dw_in, db_in  # the out layer's gradients where the in layer's go


def my_stack_blocks__same_input(x, params, attn_mask, block, n_layers):
    for layer in range(n_layers):
        out, _ = block(x, params, attn_mask, pre=f"h{layer}.")  # every block reads x: nothing feeds forward
    return out


def my_stack_blocks__off_by_one(x, params, attn_mask, block, n_layers):
    for layer in range(n_layers - 1):  # one block short
        x, _ = block(x, params, attn_mask, pre=f"h{layer}.")
    return x
