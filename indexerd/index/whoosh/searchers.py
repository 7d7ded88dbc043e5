"""Warm Whoosh searchers, kept between queries while no commit has come.

Opening a searcher reads the table of contents and opens every segment (its term index, its
length and stored-field columns): about a seventh of what a small query costs when each query
opens its own.  A searcher kept from the last query is used again while its generation is the
newest (``Searcher.up_to_date``: one directory listing); after a commit it is closed and a new
one opened.

Whoosh's own ``Searcher.refresh()`` is not used: it keeps the readers of segments "not
changed" by comparing segment ids, so a segment that gained deletions keeps its old deletion set,
and it adds the reused reader's segments to the new list, so segments a merge removed come back
(both in ``whoosh/index.py``, ``FileIndex._reader(reuse=...)``; tests/test_whoosh_searchers.py
shows both on whoosh-reloaded 2.7.5, the version pinned in pyproject.toml).

A searcher is used by one thread at a time: the pool lends an idle one (or opens one) and takes
it back when the query ends; one that failed is closed, not returned.  After each commit the idle
searchers are closed (:meth:`SearcherPool.close_stale`), so the files of segments a commit or a
merge removed are closed then, not whenever the next query comes: an idle daemon does not hold
the disk space of deleted segments.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

#: idle searchers kept at most (more threads than this open and close their own)
MAX_IDLE = 4


class SearcherPool:
    """Searchers of the Whoosh index ``ix`` lent to one thread at a time.

    Thread safety: every method may be called from any thread.
    """

    def __init__(self, ix) -> None:
        self._ix = ix
        self._lock = threading.Lock()
        self._idle: list = []
        self._closed = False

    @contextmanager
    def searcher(self) -> Iterator[object]:
        """A searcher on the newest committed generation, for the ``with`` block only.

        Raises:
            FileNotFoundError, whoosh.index.EmptyIndexError: a commit removed what the reader was
                opening (the caller retries; the searcher is closed, not kept).
        """
        with self._lock:
            s = self._idle.pop() if self._idle else None
        try:
            if s is not None and not s.up_to_date():
                _close(s)
                s = None
            if s is None:
                s = self._ix.searcher()
                remember_field_lengths(s)
        except BaseException:
            _close(s)
            raise
        try:
            yield s
        except BaseException:
            _close(s)
            raise
        with self._lock:
            if not self._closed and len(self._idle) < MAX_IDLE:
                self._idle.append(s)
                return
        _close(s)

    def close_stale(self) -> None:
        """Close the idle searchers that a commit left behind the newest generation (called after
        each commit); one whose generation cannot be checked is closed too."""
        with self._lock:
            idle, self._idle = self._idle, []
        kept: list = []
        stale: list = []
        for s in idle:
            try:
                (kept if s.up_to_date() else stale).append(s)
            except Exception:  # no TOC in this listing (a commit renaming one in)
                stale.append(s)
        with self._lock:
            if self._closed:
                stale += kept
            else:
                self._idle.extend(kept)
        for s in stale:
            _close(s)

    def close(self) -> None:
        """Close the idle searchers; searchers lent out are closed when they come back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for s in idle:
            _close(s)


def remember_field_lengths(s) -> None:
    """Make the Whoosh searcher ``s`` sum a field's length over its segments once.

    BM25F (``whoosh.scoring.BM25FScorer``) asks the top searcher for the field's average length
    for every term in every segment, and ``Searcher.avg_field_length`` sums it over every segment
    each time: terms x segments^2 reads of a length column (13% of a query on a daemon-built
    index of 58 segments).  A searcher reads one snapshot of the index, so the average cannot
    change while it lives.  The same values (``field_length / doc_count_all``), the same scores.
    Thread safety: as the searcher (one thread at a time)."""
    averages: dict[str, float | None] = {}
    compute = s.avg_field_length

    def avg_field_length(fieldname: str, default=None):
        if fieldname not in averages:
            averages[fieldname] = compute(fieldname, None)
        found = averages[fieldname]
        return default if found is None else found

    s.avg_field_length = avg_field_length


def _close(s) -> None:
    if s is None:
        return
    try:
        s.close()
    except Exception:  # closing what a failed open left half made
        pass
