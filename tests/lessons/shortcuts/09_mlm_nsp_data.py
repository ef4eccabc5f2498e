"""Lesson 09's exercises answered by the library (see README.md): the grader must refuse them."""


def my_num_predictions(n_tokens):
    return pd.num_predictions(n_tokens, 0.15, 20)  # noqa: F821  (the lesson's name)


def my_truncate_pair(tokens_a, tokens_b, max_num_tokens, draws):
    class Draws:  # an rng that returns the given uniforms, in order
        random = iter(draws).__next__

    a, b = list(tokens_a), list(tokens_b)
    pd.truncate_seq_pair(a, b, max_num_tokens, Draws())  # noqa: F821
    return a, b


def my_mask_choice(u1, u2, original, random_token):
    class Draws:  # no shuffle, then u1 and u2, then the first vocabulary word
        random = iter([u1, u2]).__next__
        shuffle = staticmethod(lambda x: None)
        randint = staticmethod(lambda a, b: a)

    out, _, _ = pd.create_masked_lm_predictions(["[CLS]", original, "[SEP]"], 1.0, 1, [random_token],  # noqa: F821
                                                Draws())
    return out[1]
