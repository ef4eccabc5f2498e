"""Plausible wrong answers to lesson 10's exercises (see README.md)."""


def my_tied_decoder_backward__dtok_transposed(dlogits, t, tok_emb):
    return dlogits @ tok_emb, t.T @ dlogits  # the gradient of tok_emb.T, not of tok_emb
