"""Reference solutions for lesson 09's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""


def my_num_predictions(n_tokens):
    """-> int: how many positions of an n_tokens-long instance become prediction targets"""
    # round() rounds halves to the even neighbour, as in Google's Python 3 run: 7.5 -> 8, 2.5 -> 2
    return min(20, max(1, int(round(n_tokens * 0.15))))


def my_segment_ids(tokens):
    """list of token strings [CLS] A [SEP] B [SEP] -> list of 0/1 segment ids"""
    first_sep = tokens.index("[SEP]")  # the first [SEP] still belongs to A
    return [0] * (first_sep + 1) + [1] * (len(tokens) - first_sep - 1)


def my_mask_choice(u1, u2, original, random_token):
    """-> the token the input shows at a prediction target"""
    if u1 < 0.8:  # 80%: hide it
        return "[MASK]"
    if u2 < 0.5:  # 10% (half of the other 20%): keep the original
        return original
    return random_token  # 10%: a random token
