"""Lesson 19's exercises answered by the library (see README.md): the grader must refuse them."""


def my_albert_num_parameters(V, E, C, FF, L, MAXPOS, TV, shared=True):
    c = AlbertConfig(vocab_size=V, embedding_size=E, hidden_size=C, num_hidden_layers=L,  # noqa: F821
                     num_attention_heads=1, intermediate_size=FF, max_position_embeddings=MAXPOS,
                     type_vocab_size=TV)
    return AlbertForPreTraining(c).num_parameters if shared else _unshared_count(c)  # noqa: F821


def my_embedding_map_backward(dx, e, W):
    return layers.linear_backward(dx, layers.LinearCache(e, W))  # noqa: F821
