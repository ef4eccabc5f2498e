"""Lesson 03's exercises answered by the library (see README.md): the grader must refuse them."""


def my_cross_entropy_backward(dloss, probs, t0, weight):
    return layers.cross_entropy_backward(dloss, layers.CrossEntropyCache(probs, t0, weight, probs.shape))  # noqa: F821


def my_tempered_ce_backward(dloss, z, t0, weight, tau):
    _, cache = layers.cross_entropy_forward(z / tau, t0)  # noqa: F821
    return layers.cross_entropy_backward(dloss, cache._replace(weight=weight)) / tau  # noqa: F821


# --- the other ways around ---

def my_cross_entropy_backward__sibling_task_loss(dloss, probs, t0, weight):
    import types
    from minibert import layers
    from minibert.finetune import heads
    loss = layers.CrossEntropyCache(probs, t0, weight, probs.shape)
    cache = types.SimpleNamespace(task="token", seq_shape=(1, probs.shape[0], probs.shape[-1]), loss=loss)
    return heads.head_loss_backward(cache).reshape(probs.shape) * dloss
