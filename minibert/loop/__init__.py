"""The one training loop that every trainer runs (pretraining, fine-tuning, T5, XLNet): the run
directory and its checkpoints (rundir), one optimizer step (step), the loop itself (engine).

No imports here: import the modules one by one."""
