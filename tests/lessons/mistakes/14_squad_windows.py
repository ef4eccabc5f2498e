"""Plausible wrong answers to lesson 14's exercises (see README.md)."""


def my_best_span__no_length_limit(start_logits, end_logits, max_answer_length):
    best, best_score = (0, 0), None
    for s in range(len(start_logits)):
        for e in range(s, len(end_logits)):  # any length
            score = start_logits[s] + end_logits[e]
            if best_score is None or score > best_score:
                best, best_score = (s, e), score
    return best


def my_max_context_score__no_length_term(start, length, position):
    return min(position - start, start + length - 1 - position)  # ties between windows not broken


def my_max_context_score__right_with_self(start, length, position):
    return min(position - start, start + length - position) + 0.01 * length  # the token counted on its right


def my_max_context_score__max_not_min(start, length, position):
    return max(position - start, start + length - 1 - position) + 0.01 * length  # the larger side
