"""Lesson 18's exercises answered by the library (see README.md): the grader must refuse them."""


def my_full_sentences(sentence_lengths, max_tokens):
    documents = [[["x"] * n for n in document] for document in sentence_lengths]
    return [len(s) for s in pd.pack_documents(documents, max_tokens, "full_sentences")]  # noqa: F821
