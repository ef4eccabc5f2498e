"""Plausible wrong answers to lesson 18's exercises (see README.md)."""


def my_full_sentences__no_separator(sentence_lengths, max_tokens):
    out, current = [], 0
    for document in sentence_lengths:
        for n in document:  # no [SEP] where a document ends inside a sequence
            if current and current + n > max_tokens:
                out.append(current)
                current = 0
            current += n
            while current > max_tokens:
                out.append(max_tokens)
                current -= max_tokens
    return out + [current] if current else out


def my_batch_stats__per_sequence(input_mask, masked_lm_weights, batch_size):
    N, T = input_mask.shape
    real = input_mask.sum() / N
    preds = (masked_lm_weights > 0).sum() / N
    return float(T - real), float(real / T), float(preds)  # per sequence, not per batch


def my_batch_stats__padding_share(input_mask, masked_lm_weights, batch_size):
    N, T = input_mask.shape
    real = input_mask.sum() / N
    return float(batch_size * (T - real)), float((T - real) / T), float(batch_size * (masked_lm_weights > 0).sum() / N)


def my_full_sentences__no_cut(sentence_lengths, max_tokens):
    out, current = [], 0
    for document in sentence_lengths:
        for s, n in enumerate(document):
            cost = n + (1 if s == 0 and current else 0)
            if current and current + cost > max_tokens:
                out.append(current)
                current, cost = 0, n
            current += cost  # a sentence longer than max_tokens stays whole
    return out + [current] if current else out
