"""Plausible wrong answers to lesson 09's exercises (see README.md)."""


def my_num_predictions__floor(n_tokens):
    return min(20, max(1, int(n_tokens * 0.15)))  # int() floors; the original rounds


def my_truncate_pair__a_on_ties(tokens_a, tokens_b, max_num_tokens, draws):
    a, b = list(tokens_a), list(tokens_b)
    draws = iter(draws)
    while len(a) + len(b) > max_num_tokens:
        longer = a if len(a) >= len(b) else b  # A on ties: the original trims B
        if next(draws) < 0.5:
            del longer[0]
        else:
            longer.pop()
    return a, b


def my_mask_choice__one_draw(u1, u2, original, random_token):
    if u1 < 0.8:
        return "[MASK]"
    if u1 < 0.9:  # the second draw never used
        return original
    return random_token
