"""Reference solutions for lesson 18's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np


def my_batch_stats(input_mask, masked_lm_weights, batch_size):
    """input_mask (N, T), masked_lm_weights (N, P) -> (padding per batch, share real, predictions per batch)"""
    N, T = input_mask.shape
    real_per_seq = input_mask.sum() / N  # mean real tokens per sequence ([CLS] and [SEP] included)
    preds_per_seq = (masked_lm_weights > 0).sum() / N  # mean predictions per sequence
    return float(batch_size * (T - real_per_seq)), float(real_per_seq / T), float(batch_size * preds_per_seq)


def my_full_sentences(sentence_lengths, max_tokens):
    """[[n_11, n_12, ...], [n_21, ...], ...] -> [length of packed sequence 1, 2, ...]"""
    out, current = [], 0
    for document in sentence_lengths:
        for s, n in enumerate(document):
            sep = 1 if current and s == 0 else 0  # a document boundary inside the sequence
            if current and current + sep + n > max_tokens:  # does not fit: close the sequence
                out.append(current)
                current, sep = 0, 0
            current += sep + n
            while current > max_tokens:  # a sentence longer than a whole sequence
                out.append(max_tokens)
                current -= max_tokens
    if current:
        out.append(current)
    return out

# What tests/lessons/test_exercises.py holds lesson 18 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_batch_stats": {"shows": ["batch_size * (T - real_per_seq)", "BATCH * (T - real_per_seq)", "4 * (4 - 2.5)"],
                       "calls": ["generation_stats"]},
    "my_full_sentences": {"shows": ["sep = 1 if current and s == 0 else 0"], "calls": ["pack_documents"]},
}
