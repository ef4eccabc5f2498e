"""Lesson 07's exercises answered by the library (see README.md): the grader must refuse them."""


def my_block_param_count(C, FF):
    import numpy as np
    from minibert.model import param_shapes
    config = BertConfig(hidden_size=C, intermediate_size=FF, num_attention_heads=1)  # noqa: F821
    return sum(int(np.prod(s)) for n, s in param_shapes(config).items() if n.startswith("h0."))


def my_stack_blocks(x, params, attn_mask, block, n_layers):
    import types

    from minibert import model
    config = types.SimpleNamespace(num_hidden_layers=n_layers)  # what blocks_forward reads first
    return model.blocks_forward(params, config, x, attn_mask)[0]


def my_block_backward(dx2, c):
    from minibert import layers
    dx1 = layers.layernorm_backward(dx2, c.ln2)[0]  # (B, T, C)
    dx1 = dx1 + layers.linear_backward(layers.gelu_backward(layers.linear_backward(dx1, c.ffn_out)[0], c.gelu),
                                       c.ffn_in)[0]
    da = layers.linear_backward(layers.layernorm_backward(dx1, c.ln1)[0], c.out)[0]  # (B, T, C)
    Bn, NH, Tn, HS = c.attn.q.shape
    dq, dk, dv = layers.attention_backward(da.reshape(Bn, Tn, NH, HS).transpose(0, 2, 1, 3), c.attn)  # the library's
    return {"dq": dq, "dk": dk, "dv": dv}


# --- the other ways around ---

def my_ffn_backward__numerical(dh, c_in, c_gelu, c_fo):
    import math

    import numpy as np
    from minibert.analysis import gradcheck
    (x, w_in), (_, w_out) = c_in[:2], c_fo[:2]
    b_in, b_out = np.zeros(w_in.shape[1]), np.zeros(w_out.shape[1])  # the caches do not hold the biases
    erf = np.vectorize(math.erf)

    def ffn():
        a = x @ w_in + b_in
        return (0.5 * a * (1 + erf(a / math.sqrt(2)))) @ w_out + b_out

    return tuple(gradcheck.numerical_grad(ffn, arr, dh) for arr in (x, w_in, b_in, w_out, b_out))


def my_block_param_count__sibling_model(C, FF):
    from minibert.bert import BertForPreTraining
    from minibert.model import BertConfig
    config = BertConfig(vocab_size=8, hidden_size=C, intermediate_size=FF, num_attention_heads=1, num_hidden_layers=1)
    return sum(v.size for k, v in BertForPreTraining(config).params.items() if k.startswith("h0."))


def my_block_param_count__sibling_albert(C, FF):
    import numpy as np
    from minibert.family import albert
    config = albert.AlbertConfig(vocab_size=8, embedding_size=C, hidden_size=C, intermediate_size=FF,
                                 num_attention_heads=1, num_hidden_layers=1)
    return sum(int(np.prod(s)) for k, s in albert.param_shapes(config).items() if k.startswith("h0."))


def my_stack_blocks__sibling_block_states(x, params, attn_mask, block, n_layers):
    from minibert import model
    C = x.shape[-1]
    config = model.BertConfig(hidden_size=C, num_hidden_layers=n_layers, num_attention_heads=2,
                              intermediate_size=params["h0.ffn.in.w"].shape[1])
    return model.blocks_forward(params, config, x, attn_mask, states=True)[2][-1]  # the hidden states' last


def my_stack_blocks__sibling_forward(x, params, attn_mask, block, n_layers):
    from minibert import model
    return model.encoder_forward(params, cfg2, input_ids, segment_ids, attn_mask)[0]  # noqa: F821


def my_stack_blocks__lesson_variable(x, params, attn_mask, block, n_layers):
    return seq2  # noqa: F821  the lesson's 2-layer encoder output
