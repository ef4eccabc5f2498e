"""The BERT family: the models of BERT's successors (ALBERT, ELECTRA, XLNet, T5), built on minibert's
layers, and their gradient checks. How they are trained is in minibert/train/, how they are
fine-tuned in minibert/finetune/.

No imports here: import the modules one by one."""
