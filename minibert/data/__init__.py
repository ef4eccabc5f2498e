"""Pretraining data: the default corpus (one sentence a line, documents split by blank lines),
Google's MLM/NSP instance generator, and the shards on disk with the batches drawn from them.
(The fine-tuning tasks' files are read by minibert/taskdata/.)

No imports here: import the modules one by one."""
