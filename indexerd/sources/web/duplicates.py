"""Duplicate detection for one crawl pass: identical content under two URLs of one host is one
document (what Heritrix and Nutch call duplicate detection; ``/`` and ``/index.html``).

The content hash (:func:`indexerd.extract.content_hash`: title and visible text) and the canonical
key decide: of two URLs of one host whose pages hash the same, the one :func:`preferred_key`
names is the document, the other its alias (skipped as ``duplicate``, "same content as ...").
A ``rel=canonical`` has already chosen a page's key before this runs.  The lookup covers the
pages kept earlier in the pass (their rows may not be committed yet) and the indexed documents
of earlier passes (the store's ``documents_hash`` index).
"""

from __future__ import annotations

from indexerd.core.counts import PassCounts
from indexerd.pipeline.stages import Pipeline
from indexerd.sources.web.urls import host_key, preferred_key


class DuplicateFinder:
    """The duplicate rule of one web source for one pass; used by the pass's coordinator thread
    only (not thread-safe).

    Args:
        source: the source name (documents of other sources are never compared).
        pipeline: the pass's pipeline (stored records, including queued writes; skips).
    """

    def __init__(self, source: str, pipeline: Pipeline) -> None:
        self.source = source
        self.pipeline = pipeline
        self.by_hash: dict[tuple[str, str], str] = {}  # (host, content hash) -> key kept this pass
        self.demoted: list[str] = []  # kept keys that the page being handled replaces

    def begin(self) -> None:
        """A new page is about to be handled: forget the previous page's pending demotions."""
        self.demoted = []

    def duplicate_of(self, key: str, chash: str) -> str | None:
        """The key to keep instead of ``key`` (an indexed page of the same host with content
        ``chash`` that names the document better), else None.  When ``key`` is the better name,
        the other page is demoted to its alias once ``key`` is kept (:meth:`kept`)."""
        host = host_key(key)
        other = self.by_hash.get((host, chash))
        if other is None:
            for k in self.pipeline.store.indexed_with_hash(self.source, chash):
                rec = self.pipeline.stored(k)  # a queued write may have changed it since
                if k != key and host_key(k) == host and rec is not None and rec.status == "indexed" \
                        and rec.content_hash == chash:
                    other = k
                    break
        if other is None or other == key:
            return None
        if preferred_key(key, other) == other:
            return other
        self.demoted.append(other)
        return None

    def kept(self, key: str, chash: str) -> list[str]:
        """``key`` is indexed with content ``chash``: remember it, and make each page it replaces
        its alias (their next fetch finds them duplicates again, or documents if they changed).
        Returns the keys demoted."""
        self.by_hash[(host_key(key), chash)] = key
        demoted, self.demoted = self.demoted, []
        out = []
        for other in demoted:
            if other != key and self.pipeline.stored(other) is not None:
                self.pipeline.skip(other, self.source, "duplicate", f"same content as {key}", PassCounts())
                out.append(other)
        return out
