"""The commands beside the course: benchmarks, the ablations, the full gradient-check table, looking
inside a run, exporting data, notebooks. Nothing in minibert imports them.

No imports here: import the modules one by one."""
