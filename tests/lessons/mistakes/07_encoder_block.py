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



def _block_backward(dx2, c, layers, np, residual=True, row_sum=True):
    """The whole block's backward with one of two mistakes built in (each def below passes the
    lesson's `layers` and `np`: a planted mistake runs with the lesson's names)."""
    d = {}
    d["dln2_in"], d["ln2.w"], d["ln2.b"] = layers.layernorm_backward(dx2, c.ln2)
    d["dffn_out"] = d["dln2_in"]
    d["dgelu_out"], d["ffn.out.w"], d["ffn.out.b"] = layers.linear_backward(d["dffn_out"], c.ffn_out)
    d["dgelu_in"] = layers.gelu_backward(d["dgelu_out"], c.gelu)
    dx1_ffn, d["ffn.in.w"], d["ffn.in.b"] = layers.linear_backward(d["dgelu_in"], c.ffn_in)
    d["dx1"] = dx1_ffn + d["dln2_in"] if residual else dx1_ffn  # the mistake: the residual's share left out
    d["dln1_in"], d["ln1.w"], d["ln1.b"] = layers.layernorm_backward(d["dx1"], c.ln1)
    d["dattn_out"] = d["dln1_in"]
    d["dcontext"], d["attn.out.w"], d["attn.out.b"] = layers.linear_backward(d["dattn_out"], c.out)
    q, k, v, probs, scale = c.attn.q, c.attn.k, c.attn.v, c.attn.att, c.attn.scale
    Bn, NH, Tn, HS = q.shape
    dout = d["dcontext"].reshape(Bn, Tn, NH, HS).transpose(0, 2, 1, 3)
    d["dprobs"] = dout @ v.swapaxes(-1, -2)
    row = (d["dprobs"] * probs).sum(-1, keepdims=True) if row_sum else 0.0  # the mistake: the row-sum term forgotten
    d["dscores"] = probs * (d["dprobs"] - row)
    d["dq"], d["dk"] = d["dscores"] @ k * scale, d["dscores"].swapaxes(-1, -2) @ q * scale
    d["dv"] = probs.swapaxes(-1, -2) @ dout
    d["dqkv"] = np.concatenate([t.transpose(0, 2, 1, 3).reshape(Bn, Tn, NH * HS) for t in (d["dq"], d["dk"], d["dv"])], -1)
    dx_attn, d["attn.qkv.w"], d["attn.qkv.b"] = layers.linear_backward(d["dqkv"], c.qkv)
    d["dx"] = dx_attn + d["dln1_in"]
    return d


def my_block_backward__no_residual(dx2, c, _backward=_block_backward):
    return _backward(dx2, c, layers, np, residual=False)  # noqa: F821


def my_block_backward__softmax_no_row_sum(dx2, c, _backward=_block_backward):
    return _backward(dx2, c, layers, np, row_sum=False)  # noqa: F821
