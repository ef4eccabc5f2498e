"""Reference solutions for lesson 09's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""


def my_num_predictions(n_tokens):
    """-> int: how many positions of an n_tokens-long instance become prediction targets"""
    # round() rounds halves to the even neighbour, as in Google's Python 3 run: 7.5 -> 8, 2.5 -> 2
    return min(20, max(1, int(round(n_tokens * 0.15))))


def my_truncate_pair(tokens_a, tokens_b, max_num_tokens, draws):
    """two lists of tokens, a length, uniform numbers (one per lost token) -> (new a, new b)"""
    a, b = list(tokens_a), list(tokens_b)  # new lists: the caller's stay as they were
    draws = iter(draws)
    while len(a) + len(b) > max_num_tokens:
        longer = a if len(a) > len(b) else b  # A only when strictly longer: B on ties
        if next(draws) < 0.5:  # the front half of the time, so that no end is favoured
            del longer[0]
        else:
            longer.pop()
    return a, b


def my_mask_choice(u1, u2, original, random_token):
    """-> the token the input shows at a prediction target"""
    if u1 < 0.8:  # 80%: hide it
        return "[MASK]"
    if u2 < 0.5:  # 10% (half of the other 20%): keep the original
        return original
    return random_token  # 10%: a random token


# What tests/lessons/test_exercises.py holds lesson 09 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_num_predictions": {"shows": ["max(1, int(round(n_tokens * 0.15)))", "round(len(tokens) * 0.15)"],
                           "calls": ["num_predictions"]},
    "my_truncate_pair": {"shows": ["a if len(a) > len(b) else b"], "calls": ["truncate_seq_pair"]},
    "my_mask_choice": {"shows": ["u1 < 0.8", "u2 < 0.5"], "calls": ["create_masked_lm_predictions", "remask"]},
}
