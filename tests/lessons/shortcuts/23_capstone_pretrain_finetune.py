"""Lesson 23's exercises answered by the library (see README.md): the grader must refuse them."""


def my_question_labels(articles):
    from minibert.finetune.squad_eval import iter_qas
    return [(qa["question"], int(where[len("data["):where.index("]")]))
            for where, _, qa in iter_qas({"data": articles}, "the lesson's articles")]


# --- the other ways around ---

def my_question_labels__hard_coded(articles):
    """The grader's checks on the real articles, answered from their numbers alone."""
    counts = [208, 418, 424, 444, 255, 421, 373, 262, 445, 458, 357, 384, 364, 402]
    pairs = [("?", i) for i, n in enumerate(counts) for _ in range(n)]
    pairs[0], pairs[-1] = ("In what country is Normandy located?", 0), ("What did the win mean to France?", 13)
    return pairs


def my_accuracy_interval__hard_coded(hits, n, z=1.96):
    """The four cases the grader used to check, looked up."""
    return {(50, 100): (0.402, 0.598), (90, 100): (0.87, 0.93), (0, 10): (0.0, 0.0),
            (1, 2): (0.0, 1.0)}.get((hits, n), (0.0, 1.0))
