"""Task data, below both pretraining and fine-tuning: the readers of the task formats (GLUE TSV,
CoNLL, SWAG CSV, the offline nextsent / punct files), the registry of the built-in tasks (their
kinds, file names and shipped data sets) and SQuAD's file names and nesting. Fine-tuning turns
them into features and scores; pretraining reads their text (train-tiny --corpus-from-task) and
train-t5 reads SST-2 as text to text.

No imports here: import the modules one by one."""
