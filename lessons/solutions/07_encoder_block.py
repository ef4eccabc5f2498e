"""Reference solutions for lesson 07's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
from minibert import layers


def my_ffn_backward(dh, c_in, c_gelu, c_fo):
    """dh (B, T, C) and the three caches -> dx1 (B, T, C), dw_in, db_in, dw_out, db_out"""
    # forward was: h = linear_out(gelu(linear_in(x1))), so undo the three from the outside in
    dg, dw_out, db_out = layers.linear_backward(dh, c_fo)  # (B, T, FF)
    da = layers.gelu_backward(dg, c_gelu)  # (B, T, FF)
    dx1, dw_in, db_in = layers.linear_backward(da, c_in)  # (B, T, C)
    return dx1, dw_in, db_in, dw_out, db_out


def my_block_param_count(C, FF):
    """-> int: the number of parameters in one encoder block"""
    attention = C * 3 * C + 3 * C + C * C + C  # qkv (C, 3C) + bias, output projection (C, C) + bias
    ffn = C * FF + FF + FF * C + C  # in (C, FF) + bias, out (FF, C) + bias
    layernorms = 2 * (C + C)  # w and b of ln1 and ln2
    return attention + ffn + layernorms


def my_stack_blocks(x, params, attn_mask, block, n_layers):
    """x (B, T, C) -> (B, T, C) after n_layers blocks"""
    for layer in range(n_layers):
        x, _ = block(x, params, attn_mask, pre=f"h{layer}.")  # (B, T, C): each block feeds the next
    return x


# What tests/lessons/test_exercises.py holds lesson 07 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_ffn_backward": {"shows": ["layers.gelu_backward(dg, c_gelu)", "layers.linear_backward(da, c_in)"],
                        "calls": []},
    "my_block_param_count": {"shows": ["C * 3 * C + 3 * C + C * C + C"], "calls": [], "numbers": ["7087872"]},
    "my_stack_blocks": {"shows": ['block(x, params, attn_mask, pre=f"h{layer}.")'], "calls": []},
}
