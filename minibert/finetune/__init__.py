"""Fine-tuning: BERT's second half (paper §3.2, §4). Heads, the task classes of every encoder, task
data, metrics, SQuAD, the fine-tuning run on the loop and its commands.

No imports here: import the modules one by one."""
