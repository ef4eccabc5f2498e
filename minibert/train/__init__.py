"""Pretraining runs: BERT (and its presets), ELECTRA, T5 and XLNet on the loop of minibert/loop/,
with their commands. No imports here: import the modules one by one."""
