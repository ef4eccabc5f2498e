"""Fine-tuning: BERT's second half (paper §3.2, §4). Heads, task data, metrics, SQuAD, the loop.

No imports here: the modules are imported one by one (see the README's file map).
"""
