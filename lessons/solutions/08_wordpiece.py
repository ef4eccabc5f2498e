"""Reference solutions for lesson 08's exercises. Try them yourself first: the lesson grades your
version and says what is wrong; come here when you are done, or truly stuck."""


def my_merge(split, a, b):
    """list of pieces, a, b -> the list with every adjacent (a, b) merged, left to right"""
    out, i = [], 0
    while i < len(split):
        if i + 1 < len(split) and split[i] == a and split[i + 1] == b:
            out.append(a + b.removeprefix("##"))  # ('h', '##u') -> 'hu', ('##g', '##s') -> '##gs'
            i += 2  # skip both: a piece is merged at most once per pass
        else:
            out.append(split[i])
            i += 1
    return out


def my_wordpiece(word, vocab):
    """word, vocab (a dict or set of tokens) -> list of pieces, or ["[UNK]"]"""
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):  # longest candidate first
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
        else:  # no piece starting here is in the vocab: the whole word is unknown
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


def my_best_pair(word_counts, splits):
    """{word: count}, {word: list of pieces} -> (a, b), the best pair by the score rule"""
    token_freq, pair_freq = {}, {}  # dicts keep insertion order: the first pair met comes first
    for word, count in word_counts.items():
        pieces = splits[word]
        for t in pieces:
            token_freq[t] = token_freq.get(t, 0) + count
        for pair in zip(pieces, pieces[1:]):
            pair_freq[pair] = pair_freq.get(pair, 0) + count

    def score(pair):
        return pair_freq[pair] / (token_freq[pair[0]] * token_freq[pair[1]])

    return max(pair_freq, key=score)  # max keeps the first of equal scores


# What tests/lessons/test_exercises.py holds lesson 08 to: before it grades an exercise, the lesson shows
# none of the expressions under "shows" (whitespace aside), and the exercise's grader calls none
# of the library functions under "calls" (they compute the answer).
KEYS = {
    "my_merge": {"shows": ['a + b.removeprefix("##")'], "calls": ["merge_pair", "apply_merge"]},
    "my_wordpiece": {"shows": ['for end in range(len(word), start, -1)'], "calls": ["wordpiece"]},
    "my_best_pair": {"shows": ["pair_freq[pair] / (token_freq[pair[0]] * token_freq[pair[1]])"],
                     "calls": ["pair_scores", "count_pairs"]},
}
