"""Facets of a Whoosh query counted in bulk: how many of its matches hold each value of a
keyword field (a media type, a source), for the search page and the API.

Whoosh's grouped facets (``groupedby`` with ``Count`` maps) file each matching document by its
value in Python: 2.2 s for a broad query on 100,000 documents.  Here a segment's matches
(:class:`indexerd.index.whoosh.bulkscore._Segment`, as a count evaluates them) are a mask, and
each value's documents, read once per segment and kept (a segment never changes), are counted
against it.  ``tests/test_whoosh_bulkscore.py`` compares the counts with Whoosh's own.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from indexerd.index.whoosh.bulkscore import segment_matches


def facet_counts(searcher, q, fields: tuple[str, ...], allow: set | None = None) -> dict[str, dict[str, int]]:
    """How many documents Whoosh query ``q`` matches (of the global document numbers ``allow``;
    None: all), per value of each of ``fields`` (keyword fields of few values: a media type, a
    source): what ``searcher.search(q, groupedby=..., maptype=Count)`` counts, where Whoosh's
    collector files each matching document in Python (2.2 s for a broad query on 100,000
    documents).  Here a segment's matches are a mask and each value's postings are counted
    against it.

    Raises:
        Unsupported: as :func:`top_documents` (the caller counts with Whoosh's collector).
    """
    return count_and_facet_counts(searcher, q, fields, allow)[1]


def count_and_facet_counts(searcher, q, fields: tuple[str, ...],
                           allow: set | None = None) -> tuple[int, dict[str, dict[str, int]]]:
    """How many documents Whoosh query ``q`` matches (as
    :func:`~indexerd.index.whoosh.bulkscore.count_documents`) and those counts per value of each
    of ``fields`` (as :func:`facet_counts`), from one evaluation of its matches: an exact
    phrase's candidates are checked once, not once for the count and again for the facets.

    Raises:
        Unsupported: as :func:`top_documents` (the caller counts with Whoosh's collector).
    """
    total = 0
    out: dict[str, dict[str, int]] = {name: {} for name in fields}
    for reader, ids in segment_matches(searcher, q, allow):
        if not len(ids):
            continue
        total += len(ids)
        mask = np.zeros(int(ids.max()) + 1, dtype=bool)
        mask[ids] = True
        for name in fields:
            counts = out[name]
            for label, held in _value_ids(reader, name).items():
                n = int(mask[held[held < len(mask)]].sum())
                if n:
                    counts[label] = counts.get(label, 0) + n
    return total, out


#: ``(segment id, field) -> {value: its documents}`` of the segments read lately (a segment
#: never changes; its deletions are not in a query's matches)
_VALUE_IDS: OrderedDict[tuple[str, str], dict[str, np.ndarray]] = OrderedDict()
_VALUE_IDS_KEPT = 256
_value_ids_lock = threading.Lock()


def _value_ids(reader, name: str) -> dict[str, np.ndarray]:
    """Each value of keyword field ``name`` in the segment of ``reader`` with the documents
    holding it (increasing ids), read once per segment and kept (:data:`_VALUE_IDS`)."""
    key = (reader.segment().segment_id(), name)
    with _value_ids_lock:
        cached = _VALUE_IDS.get(key)
        if cached is not None:
            _VALUE_IDS.move_to_end(key)
            return cached
    found: dict[str, np.ndarray] = {}
    if name in reader.schema:
        for value in reader.lexicon(name):
            label = value if isinstance(value, str) else bytes(value).decode("utf-8", "replace")
            found[label] = np.fromiter(reader.postings(name, value).all_ids(), dtype=np.int64)
    with _value_ids_lock:
        _VALUE_IDS[key] = found
        while len(_VALUE_IDS) > _VALUE_IDS_KEPT:
            _VALUE_IDS.popitem(last=False)
    return found
