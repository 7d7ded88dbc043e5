"""Which of a query's words a best document's stored text cannot hold, read from the postings
its scoring read.

A snippet scans a document's stored text until one window holds every word of the query
(:meth:`indexerd.index.snippets.SnippetQuery.scan`); a word the document lacks kept it scanning
to the text's end, inflating and reading all of it: most of an ``a OR b`` query's snippets, and
of any query whose words are in some documents' titles only.  The bulk scorer
(:func:`~indexerd.index.whoosh.bulkscore.top_documents`) has read, in each segment, the
``content`` postings of the query's words; a word a document's ``content`` lacks is not in the
text its snippets are cut from either (that text is ``content`` or a part of it:
:attr:`indexerd.index.IndexDoc.snippet_text`).  A word whose postings no evaluation read there
(under a matcher Whoosh walked itself) counts as held: nothing is taken for absent unless known.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable

import numpy as np

#: the field whose postings say which words the stored text holds
TEXT_FIELD = "content"


def words_absent(kept: list, docnums: Iterable[int], words: Iterable[str]) -> dict[int, frozenset[str]]:
    """``{docnum: the words of `words` its content field lacks}`` for each global document
    number of ``docnums`` (each one :func:`~indexerd.index.whoosh.bulkscore.top_documents`
    returned with ``kept``); ``kept``: that call's ``(segment evaluation, offset)`` pairs, in
    document order.  Empty when ``kept`` is (the collector scored the query).

    Raises:
        OSError: reading a postings block failed.
    """
    if not kept:
        return {}
    encoded = [(w, w.encode("utf-8")) for w in set(words)]
    offsets = [offset for _seg, offset in kept]
    by_segment: dict[int, list[int]] = {}
    for docnum in docnums:
        by_segment.setdefault(bisect_right(offsets, docnum) - 1, []).append(docnum)
    out: dict[int, frozenset[str]] = {}
    for i, mine in by_segment.items():
        seg, offset = kept[i]
        local = np.array(sorted({d - offset for d in mine}), dtype=np.int64)
        absent: dict[int, set[str]] = {d: set() for d in mine}
        for word, tbytes in encoded:
            blocks = seg.term_blocks(TEXT_FIELD, tbytes)
            if blocks is None:
                if (TEXT_FIELD, word) in seg.reader:
                    continue             # not read here: unknown, taken as held
                held: set[int] = set()   # not a word of this segment at all
            else:
                held = set((blocks.read(local).ids + offset).tolist())
            for d in mine:
                if d not in held:
                    absent[d].add(word)
        out.update((d, frozenset(a)) for d, a in absent.items())
    return out
