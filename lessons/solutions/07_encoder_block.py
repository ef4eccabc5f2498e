"""Reference solutions for lesson 07's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np

from minibert import layers


def my_ffn_backward(dh, c_in, c_gelu, c_fo):
    """dh (B, T, C) and the three caches -> dx1 (B, T, C), dw_in, db_in, dw_out, db_out"""
    # forward was: h = linear_out(gelu(linear_in(x1))), so undo the three from the outside in
    dg, dw_out, db_out = layers.linear_backward(dh, c_fo)  # (B, T, FF)
    da = layers.gelu_backward(dg, c_gelu)  # (B, T, FF)
    dx1, dw_in, db_in = layers.linear_backward(da, c_in)  # (B, T, C)
    return dx1, dw_in, db_in, dw_out, db_out


def my_block_backward(dx2, c):
    """dx2 (B, T, C) and the block's cache -> {name: gradient}, every name of the table above"""
    d = {}
    # forward was: x2 = LN2(h + x1)
    d["dln2_in"], d["ln2.w"], d["ln2.b"] = layers.layernorm_backward(dx2, c.ln2)  # (B, T, C)
    d["dffn_out"] = d["dln2_in"]  # a sum passes its gradient to both terms: h ...
    # forward was: h = linear_out(gelu(linear_in(x1)))
    d["dgelu_out"], d["ffn.out.w"], d["ffn.out.b"] = layers.linear_backward(d["dffn_out"], c.ffn_out)  # (B, T, FF)
    d["dgelu_in"] = layers.gelu_backward(d["dgelu_out"], c.gelu)  # (B, T, FF)
    dx1_ffn, d["ffn.in.w"], d["ffn.in.b"] = layers.linear_backward(d["dgelu_in"], c.ffn_in)  # (B, T, C)
    d["dx1"] = dx1_ffn + d["dln2_in"]  # ... and x1: x1 feeds the FFN and the residual, the two add up
    # forward was: x1 = LN1(a + x)
    d["dln1_in"], d["ln1.w"], d["ln1.b"] = layers.layernorm_backward(d["dx1"], c.ln1)  # (B, T, C)
    d["dattn_out"] = d["dln1_in"]
    # forward was: a = linear_o(merge(probs @ v)), probs = softmax(q k^T * scale + mask)
    d["dcontext"], d["attn.out.w"], d["attn.out.b"] = layers.linear_backward(d["dattn_out"], c.out)  # (B, T, C)
    q, k, v, probs, scale = c.attn.q, c.attn.k, c.attn.v, c.attn.att, c.attn.scale  # (B, NH, T, HS) x3, (B, NH, T, T)
    Bn, NH, Tn, HS = q.shape
    dout = d["dcontext"].reshape(Bn, Tn, NH, HS).transpose(0, 2, 1, 3)  # (B, NH, T, HS) the heads split
    d["dprobs"] = dout @ v.swapaxes(-1, -2)  # (B, NH, T, T)
    d["dscores"] = probs * (d["dprobs"] - (d["dprobs"] * probs).sum(-1, keepdims=True))  # (B, NH, T, T)
    d["dq"] = d["dscores"] @ k * scale  # (B, NH, T, HS)
    d["dk"] = d["dscores"].swapaxes(-1, -2) @ q * scale  # (B, NH, T, HS)
    d["dv"] = probs.swapaxes(-1, -2) @ dout  # (B, NH, T, HS)
    d["dqkv"] = np.concatenate([t.transpose(0, 2, 1, 3).reshape(Bn, Tn, NH * HS)
                                for t in (d["dq"], d["dk"], d["dv"])], axis=-1)  # (B, T, 3C)
    dx_attn, d["attn.qkv.w"], d["attn.qkv.b"] = layers.linear_backward(d["dqkv"], c.qkv)  # (B, T, C)
    d["dx"] = dx_attn + d["dln1_in"]  # x feeds the attention and the residual: the two add up
    order = ("dln2_in", "ln2.w", "ln2.b", "dffn_out", "dgelu_out", "ffn.out.w", "ffn.out.b", "dgelu_in",
             "ffn.in.w", "ffn.in.b", "dx1", "dln1_in", "ln1.w", "ln1.b", "dattn_out", "dcontext", "attn.out.w",
             "attn.out.b", "dprobs", "dscores", "dq", "dk", "dv", "dqkv", "attn.qkv.w", "attn.qkv.b", "dx")
    return {name: d[name] for name in order}  # the table's order: the order backward reaches them


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
    "my_block_backward": {"shows": ["(d[\"dprobs\"] * probs).sum(-1, keepdims=True)",
                                    "layers.layernorm_backward(d[\"dx1\"], c.ln1)", "dx_attn + d[\"dln1_in\"]"],
                          "calls": ["layers.attention_backward"]},
    "my_block_param_count": {"shows": ["C * 3 * C + 3 * C + C * C + C"], "calls": [], "numbers": ["7087872"]},
    "my_stack_blocks": {"shows": ['block(x, params, attn_mask, pre=f"h{layer}.")'], "calls": []},
}
