"""A document's title and content as Whoosh postings, computed where the analysis runs.

The Whoosh session hands the writer each text field as its postings, one row per distinct term:
the term's UTF-8 bytes, its frequency and the ``Positions`` format's value bytes (Whoosh's
``Positions.encode``: the number of positions, then the pickled position deltas).  Computing them
is most of the per-document work of a first index after the segment writer, so a big session
has them computed by the analysis worker on another core (:mod:`indexerd.index.offload`, task
:data:`TASK`), and a small one here.

:class:`PostingValues` is what the session gives Whoosh as a field's value;
:class:`~indexerd.index.whoosh.analysis.TokenPositions` (any Whoosh) and the patched writer's
``add_document`` (:mod:`~indexerd.index.whoosh.patches`) take it.  The bytes indexed are the
ones Whoosh computes from the same tokens (``tests/test_postingpool.py``).
"""

from __future__ import annotations

import zlib
from pickle import dumps
from struct import Struct

from indexerd.index.analysis import analyzer
from indexerd.index.base import SNIPPET_TEXT_CAP_BYTES

#: :class:`~indexerd.index.offload.AnalysisWorker`'s name of :func:`posting_values`.
TASK = "indexerd.index.whoosh.postingvalues:posting_values"

_COUNT = Struct("!I")  # whoosh.system.pack_uint, the first 4 bytes of a Positions value


class PostingValues(tuple):
    """``(terms, frequencies, values)``: three lists of one text field's distinct terms, in
    first-occurrence order -- the term as UTF-8 ``bytes``, how often it occurs (an ``int``) and
    its ``Positions`` value (``bytes``)."""

    __slots__ = ()


def field_postings(tokens: list[str]) -> tuple[list[bytes], list[int], list[bytes]]:
    """The postings of one field whose token stream is ``tokens`` (position = index): what
    Whoosh's ``Positions.word_values`` gives for it, the terms encoded to UTF-8."""
    poses: dict[str, list[int]] = {}
    for pos, tok in enumerate(tokens):
        plist = poses.get(tok)
        if plist is None:
            poses[tok] = [pos]
        else:
            plist.append(pos)
    terms, freqs, values = [], [], []
    pack = _COUNT.pack
    for tok, plist in poses.items():
        terms.append(tok.encode("utf-8"))
        n = len(plist)
        freqs.append(n)
        if n > 1:  # Positions.encode: the deltas between positions
            plist = [plist[0]] + [b - a for a, b in zip(plist, plist[1:])]
        values.append(pack(n) + dumps(plist, 2))
    return terms, freqs, values


def posting_values(texts: list[tuple[str, str, str | None, str]], fold_diacritics: bool) -> list[tuple]:
    """``(title, content, shown, headings)`` -> ``(title postings, content postings,
    identifiers, stored text, headings postings)``: the postings as :func:`field_postings` gives them, the identifiers of both
    joined by single spaces (the ``ids`` field), and the text snippets are cut from (``shown``,
    or the content when None) as the index stores it (UTF-8, at most
    :data:`~indexerd.index.base.SNIPPET_TEXT_CAP_BYTES`, zlib level 6).  Runs in the worker or
    in-process."""
    a = analyzer(fold_diacritics=fold_diacritics)
    out = []
    for title, content, shown, headings in texts:
        t = a.analyse(title)
        c = a.analyse(content)
        text = (content if shown is None else shown).encode("utf-8", "replace")[:SNIPPET_TEXT_CAP_BYTES]
        out.append((field_postings(t.tokens), field_postings(c.tokens), " ".join(t.ids + c.ids),
                    zlib.compress(text, 6), field_postings(a.tokens(headings)) if headings else None))
    return out
