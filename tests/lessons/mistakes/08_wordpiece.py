"""Plausible wrong answers to lesson 08's exercises (see README.md)."""


def my_wordpiece__shortest_first(word, vocab):
    pieces, start = [], 0
    while start < len(word):
        for end in range(start + 1, len(word) + 1):  # shortest candidate first
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
        else:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


def my_merge__keeps_hashes(split, a, b):
    out, i = [], 0
    while i < len(split):
        if i + 1 < len(split) and split[i] == a and split[i + 1] == b:
            out.append(a + b)  # 'h' + '##u' -> 'h##u': the ## of b kept
            i += 2
        else:
            out.append(split[i])
            i += 1
    return out


def my_best_pair__by_frequency(word_counts, splits):
    pair_freq = {}
    for word, count in word_counts.items():
        pieces = splits[word]
        for pair in zip(pieces, pieces[1:]):
            pair_freq[pair] = pair_freq.get(pair, 0) + count
    return max(pair_freq, key=pair_freq.get)  # BPE's rule, not WordPiece's score
