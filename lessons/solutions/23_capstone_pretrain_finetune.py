"""Reference solutions for lesson 23's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import math


def my_question_labels(articles):
    """list of SQuAD articles -> [(question text, article index), ...]"""
    return [(qa["question"], i)  # every question of every paragraph, labelled with its article
            for i, article in enumerate(articles)
            for paragraph in article["paragraphs"]
            for qa in paragraph["qas"]]


def my_accuracy_interval(hits, n, z=1.96):
    """hits, n ints -> (low, high): the normal-approximation interval of hits / n, within [0, 1]"""
    p = hits / n
    half = z * math.sqrt(p * (1 - p) / n)  # z standard errors of a proportion
    return max(0.0, p - half), min(1.0, p + half)


# What tests/lessons/test_exercises.py holds lesson 23 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_question_labels": {"shows": ['(qa["question"], i)'], "calls": ["read_squad"]},
    "my_accuracy_interval": {"shows": ["z * math.sqrt(p * (1 - p) / n)", "sqrt(p (1 - p) / n)", "1.96 * 0.05"],
                             "calls": []},
}
