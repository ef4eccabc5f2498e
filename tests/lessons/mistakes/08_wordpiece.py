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
