"""Lesson 20's exercises answered by the library (see README.md): the grader must refuse them."""


def my_rtd_labels(original_ids, sampled, positions):
    positions = np.asarray(positions)  # noqa: F821
    flat = positions[:, 0] * original_ids.shape[1] + positions[:, 1]
    return electra.replace_tokens(original_ids, flat, original_ids.reshape(-1)[flat], sampled)[1]  # noqa: F821


def my_bce_backward(logits, labels, mask):
    _, cache = electra.bce_with_logits_forward(logits, labels, mask)  # noqa: F821
    return electra.bce_with_logits_backward(1.0, cache)  # noqa: F821
