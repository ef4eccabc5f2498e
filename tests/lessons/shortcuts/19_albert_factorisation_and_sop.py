"""Lesson 19's exercises answered by the library (see README.md): the grader must refuse them."""


def my_albert_num_parameters(V, E, C, FF, L, MAXPOS, TV, shared=True):
    c = AlbertConfig(vocab_size=V, embedding_size=E, hidden_size=C, num_hidden_layers=L,  # noqa: F821
                     num_attention_heads=1, intermediate_size=FF, max_position_embeddings=MAXPOS,
                     type_vocab_size=TV)
    return AlbertForPreTraining(c).num_parameters if shared else _unshared_count(c)  # noqa: F821


def my_embedding_map_backward(dx, e, W):
    return layers.linear_backward(dx, layers.LinearCache(e, W))  # noqa: F821


# --- the other ways around ---

def my_albert_num_parameters__sibling_param_shapes(V, E, C, FF, L, MAXPOS, TV, shared=True):
    import numpy as np
    from minibert.family import albert
    c = albert.AlbertConfig(vocab_size=V, embedding_size=E, hidden_size=C, num_hidden_layers=L, num_attention_heads=1,
                            intermediate_size=FF, max_position_embeddings=MAXPOS, type_vocab_size=TV)
    n = sum(int(np.prod(s)) for s in albert.param_shapes(c).values())
    return n


def my_albert_num_parameters__object_new(V, E, C, FF, L, MAXPOS, TV, shared=True):
    from minibert.family import albert
    c = albert.AlbertConfig(vocab_size=V, embedding_size=E, hidden_size=C, num_hidden_layers=L, num_attention_heads=1,
                            intermediate_size=FF, max_position_embeddings=MAXPOS, type_vocab_size=TV)
    m = object.__new__(albert.AlbertForPreTraining)  # no __init__: a guard on construction skipped
    m.config, m.params = c, {k: __import__("numpy").zeros(s) for k, s in albert.param_shapes(c).items()}
    return m.num_parameters


def my_albert_num_parameters__base_class(V, E, C, FF, L, MAXPOS, TV, shared=True):
    from minibert.family import albert
    klass = albert.AlbertForPreTraining
    base = klass.__mro__[1] if klass.__mro__[1] is not object else klass  # a guard subclass's base: the original
    c = albert.AlbertConfig(vocab_size=V, embedding_size=E, hidden_size=C, num_hidden_layers=L, num_attention_heads=1,
                            intermediate_size=FF, max_position_embeddings=MAXPOS, type_vocab_size=TV)
    return base(c).num_parameters


def my_embedding_map_backward__sibling_classifier(dx, e, W):
    import numpy as np
    from minibert import layers
    from minibert.finetune import heads
    E = e.shape[-1]
    cache = heads.ClassifierCache(layers.DropoutCache(None), layers.LinearCache(e.reshape(-1, E), W))
    de, dW, db = heads.classifier_backward(dx.reshape(-1, W.shape[1]), cache)
    return de.reshape(e.shape), dW, np.asarray(db)
