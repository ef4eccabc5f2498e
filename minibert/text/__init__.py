"""Text: BERT's tokenizer (basic tokenization, then greedy longest-match WordPiece) and the
WordPiece trainer that learns a vocab.txt from text.

No imports here: import the modules one by one."""
