"""File formats: text read as strict UTF-8 (textio), files written atomically (atomic), safetensors
files with a digest (tensorfile), and transformers' checkpoint directories for BERT (checkpoint).

No imports here: import the modules one by one."""
