"""Plausible wrong answers to lesson 12's exercises (see README.md)."""


def my_top_k__logits_not_probabilities(logits, k):
    top = np.argsort(-logits, kind="stable")[:k]  # noqa: F821
    return top, logits[top]  # the scores, not probabilities


def my_encode_with_masks__no_special_tokens(text, tok):
    ids, positions = [], []
    pieces = text.split("[MASK]")
    for i, piece in enumerate(pieces):
        ids += tok.convert_tokens_to_ids(tok.tokenize(piece))
        if i < len(pieces) - 1:
            positions.append(len(ids))
            ids.append(tok.mask_id)
    return ids, positions  # no [CLS] in front, no [SEP] at the end


def my_head_entropy__log2(maps):
    return -(maps * np.log2(np.maximum(maps, 1e-300))).sum(-1).mean(-1)  # noqa: F821  bits, not nats


def my_head_entropy__rows_summed(maps):
    plogp = maps * np.log(np.maximum(maps, 1e-300))  # noqa: F821
    return -plogp.sum(-1).sum(-1)  # the rows' entropies added up, not averaged
