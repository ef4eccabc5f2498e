"""Reference solutions for lesson 14's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""


def my_max_context_score(start, length, position):
    """a window (start, length) over the passage tokens, a token position in it -> its score"""
    left = position - start  # tokens of the window before it
    right = start + length - 1 - position  # tokens of the window after it
    return min(left, right) + 0.01 * length


def my_best_span(start_logits, end_logits, max_answer_length):
    """start_logits (T,), end_logits (T,), max length -> (s, e) of the best valid span"""
    T = len(start_logits)
    best, best_score = (0, 0), None
    for s in range(T):
        for e in range(s, min(T, s + max_answer_length)):  # e >= s and at most max_answer_length tokens
            score = start_logits[s] + end_logits[e]
            if best_score is None or score > best_score:
                best, best_score = (s, e), score
    return best


# What tests/lessons/test_exercises.py holds lesson 14 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_max_context_score": {"shows": ["start + length - 1 - position"], "calls": ["_check_is_max_context"]},
    "my_best_span": {"shows": ["range(s, min(T, s + max_answer_length))"], "calls": ["postprocess", "_span_candidates"]},
}
