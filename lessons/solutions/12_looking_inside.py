"""Reference solutions for lesson 12's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""
import numpy as np


def my_top_k(logits, k):
    """logits (V,) -> ids (k,), probabilities (k,), most likely first"""
    p = np.exp(logits - logits.max())  # (V,) stable softmax
    p /= p.sum()
    top = np.argsort(-p, kind="stable")[:k]  # (k,) stable: equal probabilities keep id order
    return top, p[top]


def my_encode_with_masks(text, tok):
    """text with literal [MASK]s -> (list of ids with [CLS] and [SEP], list of mask positions)"""
    ids, positions = [tok.cls_id], []
    pieces = text.split("[MASK]")  # n markers -> n + 1 pieces of ordinary text
    for i, piece in enumerate(pieces):
        ids += tok.convert_tokens_to_ids(tok.tokenize(piece))
        if i < len(pieces) - 1:  # a marker followed this piece
            positions.append(len(ids))
            ids.append(tok.mask_id)
    return ids + [tok.sep_id], positions


def my_head_entropy(maps):
    """maps (L, NH, T, T), rows summing to 1 -> (L, NH) mean entropy of the rows"""
    plogp = maps * np.log(np.maximum(maps, 1e-300))  # (L, NH, T, T); 0 * log(tiny) is 0
    return -plogp.sum(-1).mean(-1)  # entropy of each row, then the mean over the T rows


# What tests/lessons/test_exercises.py holds lesson 12 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_top_k": {"shows": ['np.argsort(-p, kind="stable")[:k]', 'np.argsort(-probs, kind="stable")'],
                 "calls": ["fill_mask"]},
    "my_encode_with_masks": {"shows": ['text.split("[MASK]")'], "calls": ["encode_with_masks"]},
    "my_head_entropy": {"shows": ["maps * np.log(np.maximum(maps, 1e-300))"], "calls": []},
}
