"""Whoosh matchers built *unread*: without moving to their first match or reading ahead, for
the bulk scorer (:mod:`indexerd.index.whoosh.bulkscore`), which evaluates them from their
children's posting arrays.  Apart from it so that installing the class
(:func:`indexerd.index.whoosh.patches.install`, at every index open) does not import numpy:
a command that never searches (an unchanged ``indexerd index``) does not pay for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from whoosh.matching.combo import ArrayUnionMatcher, CombinationMatcher

from indexerd.index.whoosh.compile import unpositioned_and_not

__all__ = ["UnreadArrayUnion", "unpositioned"]

#: set while :func:`unpositioned` holds: an ``ArrayUnionMatcher`` is built without reading
#: its first part of documents (a Python walk of up to 2,048 documents of every child)
_unread: ContextVar[bool] = ContextVar("indexerd_unread_array_union", default=False)


class UnreadArrayUnion(ArrayUnionMatcher):
    """Whoosh's ``ArrayUnionMatcher`` (``Or`` builds it on segments of at most 5,000 documents),
    built unread while :func:`unpositioned` holds; then it says so (``unpositioned``) and must
    not be walked.  :func:`indexerd.index.whoosh.patches.install` installs it as
    ``whoosh.matching.ArrayUnionMatcher``, the name ``whoosh.query.compound`` builds it by
    (without it, Whoosh's own reads ahead when built, and the bulk scorer evaluates that too)."""

    unpositioned = False

    def __init__(self, submatchers, doccount, boost=1.0, scored=True, partsize=2048):
        if not _unread.get():
            super().__init__(submatchers, doccount, boost=boost, scored=scored, partsize=partsize)
            return
        CombinationMatcher.__init__(self, submatchers, boost=boost)
        self._scored = scored
        self._doccount = doccount
        self._partsize = partsize or doccount
        self.unpositioned = True


@contextmanager
def unpositioned() -> Iterator[None]:
    """While the block runs (in this thread), matchers are built without moving to their first
    match or reading ahead: and-not matchers (:func:`unpositioned_and_not`) and
    ``ArrayUnionMatcher`` (:class:`UnreadArrayUnion`, once installed); only the bulk scorer
    (:mod:`indexerd.index.whoosh.bulkscore`) evaluates them."""
    token = _unread.set(True)
    try:
        with unpositioned_and_not():
            yield
    finally:
        _unread.reset(token)
