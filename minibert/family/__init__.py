"""The BERT family: the models of BERT's successors, built on minibert's layers.

No imports here: the modules are imported one by one (see the README's file map).
"""
