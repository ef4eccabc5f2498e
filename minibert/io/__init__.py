"""The process boundary. Where the repository is (paths). File formats: text read as strict UTF-8 (textio), files written atomically (atomic), safetensors
files with a digest (tensorfile), JSON (jsonfile), progress lines (progress) and where a model name
points (hub), and every command's argument parser (cli); transformers' BERT directories are one floor up, in minibert/checkpoint.py.

No imports here: import the modules one by one."""
