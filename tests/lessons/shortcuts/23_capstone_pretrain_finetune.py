"""Lesson 23's exercises answered by the library (see README.md): the grader must refuse them."""


def my_question_labels(articles):
    from minibert.finetune.squad_eval import iter_qas
    return [(qa["question"], int(where[len("data["):where.index("]")]))
            for where, _, qa in iter_qas({"data": articles}, "the lesson's articles")]
