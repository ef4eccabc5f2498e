"""Reference solutions for lesson 22's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np


def my_span_corrupt(tokens, noise_mask, vocab_size, eos_id):
    """tokens (n,), noise_mask (n,) bool -> input ids, target ids (1-d int arrays, each ending with eos_id)"""
    inputs, targets, span = [], [], -1
    for j, tok in enumerate(tokens):
        if noise_mask[j]:
            if j == 0 or not noise_mask[j - 1]:  # the first token of a run: one sentinel for the run
                span += 1
                inputs.append(vocab_size - 1 - span)  # <extra_id_span>, counting down from the last id
                targets.append(vocab_size - 1 - span)
            targets.append(int(tok))  # dropped: it goes to the target, after its sentinel
        else:
            inputs.append(int(tok))  # kept: it stays in the input
    return np.array(inputs + [eos_id], dtype=np.int64), np.array(targets + [eos_id], dtype=np.int64)


def my_cross_attention_backward(dout, q, enc_out, w_k, w_v, enc_mask):
    """dout, q (S, HS), enc_out (T, C), w_k, w_v (C, HS), enc_mask (T,) -> dq (S, HS), denc_via_k, denc_via_v (T, C)"""
    HS = q.shape[1]
    k, v = enc_out @ w_k, enc_out @ w_v  # (T, HS) each
    preatt = q @ k.T / np.sqrt(HS) + (1 - enc_mask) * -10000.0  # (S, T)
    att = np.exp(preatt - preatt.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)  # (S, T)
    # forward was: out = att @ v
    dv = att.T @ dout  # (T, S) @ (S, HS) -> (T, HS): the value path, summed over the S queries
    datt = dout @ v.T  # (S, T)
    dpreatt = att * (datt - (datt * att).sum(-1, keepdims=True))  # (S, T) softmax backward: the score path
    dq = dpreatt @ k / np.sqrt(HS)  # (S, HS) forward was: preatt = q @ k.T / sqrt(HS)
    dk = dpreatt.T @ q / np.sqrt(HS)  # (T, HS)
    # forward was: k = enc_out @ w_k and v = enc_out @ w_v: enc_out feeds both (the caller adds the shares)
    return dq, dk @ w_k.T, dv @ w_v.T  # (S, HS), (T, C), (T, C)


# What tests/lessons/test_exercises.py holds lesson 22 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_span_corrupt": {"shows": ["inputs.append(vocab_size - 1 - span)"], "calls": ["span_corrupt"]},
    "my_cross_attention_backward": {"shows": ["dk @ w_k.T", "dv @ w_v.T", "dv = att^T @ dout"],
                                    "calls": ["cross_attention_backward", "linear_backward", "decoder_block_backward"]},
}
