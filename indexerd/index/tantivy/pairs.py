"""Word pairs: the ``content_pairs`` field's terms, and which pairs a phrase must have.

A phrase of two or more tokens at consecutive positions holds every pair of neighbouring tokens
as one term of ``content_pairs`` (tokens joined by :data:`PAIR_JOIN`), written at index time
from the same token list as ``content``.  So a phrase's documents are among those holding all
of its pairs, and a two-token phrase's documents are exactly those holding its one pair (both
fields come from one token list); longer phrases still need the positions (``a b`` and ``b c``
apart do not make ``a b c``).  Lucene's ``ShingleFilter`` and Xapian's "bigram" indexes do the
same (a "shingle" of two words).

The analyzer (:mod:`indexerd.index.analysis`) never leaves a ``.`` inside a token (a word with a
dot is an identifier, split at its dots), so ``a.b`` names one pair only.  Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence

#: What joins the two tokens of a pair term (a character no token holds).
PAIR_JOIN = "."


def pair_terms(tokens: Sequence[str]) -> list[str]:
    """The pair terms of consecutive ``tokens`` in order, ``len(tokens) - 1`` of them (none for
    fewer than 2 tokens), repeats kept: ``["difo", "masuf", "difo"]`` -> ``["difo.masuf",
    "masuf.difo"]``."""
    return [a + PAIR_JOIN + b for a, b in zip(tokens, tokens[1:])]


def phrase_pairs(tokens: Sequence[str]) -> list[str]:
    """The distinct pair terms a document holding the phrase ``tokens`` has, first occurrence
    order (empty for fewer than 2 tokens)."""
    return list(dict.fromkeys(pair_terms(tokens)))
