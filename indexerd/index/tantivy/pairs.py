"""Word pairs: the ``content_pairs`` field's terms, and which pairs a phrase must have.

A phrase of two or more tokens at consecutive positions holds every pair of neighbouring tokens
as one term of ``content_pairs`` (tokens joined by :data:`PAIR_JOIN`), written at index time
from the same token list as ``content``.  So a phrase's documents are among those holding all
of its pairs, and a two-token phrase's documents are exactly those holding its one pair (both
fields come from one token list); longer phrases still need the positions (``a b`` and ``b c``
apart do not make ``a b c``).  Lucene's ``ShingleFilter`` and Xapian's "bigram" indexes do the
same (a "shingle" of two words).

The analyzer (:mod:`indexerd.index.analysis`) never leaves a ``.`` inside a token (a word with a
dot is an identifier, split at its dots), so ``a.b`` names one pair only.  A two-token phrase
answered by its pair term is weighed as tantivy weighs the phrase (:func:`pair_boost`).  Pure
functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: What joins the two tokens of a pair term (a character no token holds).
PAIR_JOIN = "."
#: One more term of ``content_pairs`` in every document with content, which no phrase asks for
#: (not a pair: nothing on either side of the joiner): the field then holds as many terms as
#: ``content``, so BM25's length normalisation is the same on both (:func:`pair_boost`).
PAIR_PAD = PAIR_JOIN


def pair_terms(tokens: Sequence[str]) -> list[str]:
    """The pair terms of consecutive ``tokens`` in order, ``len(tokens) - 1`` of them (none for
    fewer than 2 tokens), repeats kept: ``["difo", "masuf", "difo"]`` -> ``["difo.masuf",
    "masuf.difo"]``."""
    return [a + PAIR_JOIN + b for a, b in zip(tokens, tokens[1:])]


def field_terms(tokens: Sequence[str]) -> list[str]:
    """The ``content_pairs`` terms of a document whose content tokens are ``tokens``: its
    :func:`pair_terms` and, when there is any token, :data:`PAIR_PAD`; as many terms as tokens."""
    return pair_terms(tokens) + [PAIR_PAD] if tokens else []


def phrase_pairs(tokens: Sequence[str]) -> list[str]:
    """The distinct pair terms a document holding the phrase ``tokens`` has, first occurrence
    order (empty for fewer than 2 tokens)."""
    return list(dict.fromkeys(pair_terms(tokens)))


def bm25_idf(doc_freq: int, num_docs: int) -> float:
    """BM25's inverse document frequency as tantivy computes it,
    ``ln(1 + (num_docs - doc_freq + 0.5) / (doc_freq + 0.5))``: above 0 for ``0 <= doc_freq <=
    num_docs``.  A ``doc_freq`` above ``num_docs`` (deleted documents not yet merged away still
    count in it) is taken as ``num_docs``."""
    doc_freq = min(max(0, doc_freq), num_docs)
    return math.log(1.0 + (num_docs - doc_freq + 0.5) / (doc_freq + 0.5))


def pair_boost(word_doc_freqs: Sequence[int], pair_doc_freq: int, num_docs: int) -> float:
    """The boost that gives a pair term the weight tantivy gives the phrase of its two words.

    tantivy scores a phrase by BM25 with the phrase's count in the document and, as idf, the sum
    of its words' idfs (``Bm25Weight::for_terms``); a term of ``content_pairs`` scores by BM25
    with the same count (the pair occurs where the phrase does) and the pair's own idf.  The
    ratio of the two idfs makes the pair weigh what the phrase weighed beside a query's other
    clauses.  The length normalisation is the same (``content_pairs`` holds as many terms as
    ``content``: :func:`field_terms`), and so the score, to float rounding, but for deleted
    documents not yet merged away (tantivy's idf counts them in the documents, this boost does
    not: ``num_docs`` is the live count).  ``word_doc_freqs``: each word's
    document frequency in ``content``; ``pair_doc_freq``: the pair's in ``content_pairs``;
    ``num_docs``: documents in the index (at least 1).  Returns a factor above 0.
    """
    num_docs = max(1, num_docs)
    return sum(bm25_idf(df, num_docs) for df in word_doc_freqs) / bm25_idf(pair_doc_freq, num_docs)
