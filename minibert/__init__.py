"""minibert: BERT built from scratch in NumPy, with every gradient written by hand."""

__version__ = "0.1.0"
