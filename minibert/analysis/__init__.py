"""Looking at a model rather than training it: numerical gradients and the comparisons that
check every backward (gradcheck), fill-mask and attention maps (inspect), and how far word
overlap alone goes on the NSP task (nsp_baseline).

No imports here: import the modules one by one."""
