"""candidate -> extract -> resolve date -> decide -> hand to the writer.

Sources only discover and fetch: they give the pipeline a :class:`~indexerd.pipeline.fetched.Fetched` (bytes plus the
protocol facts) or tell it a document is gone, skipped or failed.  The pipeline never touches
the index or SQLite rows itself: it submits operations to the one :class:`~indexerd.pipeline.writer.IndexWriter`.

Every outcome the pipeline returns (:mod:`indexerd.core.outcome`) is counted in the pass's
:class:`~indexerd.core.counts.PassCounts` in one place, :meth:`Pipeline._counted`, through
:meth:`~indexerd.core.counts.PassCounts.record`: no caller increments a count by hand, so
``seen = indexed + unchanged + skipped + errors`` holds.  What a source hands in is
:mod:`indexerd.pipeline.fetched`.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable

from indexerd.core import decide as decide_mod
from indexerd.core.counts import Counters, PassCounts
from indexerd.core.errors import SkipDocument, is_environment_failure
from indexerd.core.outcome import Outcome, PageLinks, Verdict
from indexerd.core.store import DocumentRecord, StateStore
from indexerd.core.store.sharedfrontier import ClaimFence

if TYPE_CHECKING:
    from indexerd.pipeline.fetched import Fetched, Policy

__all__ = ["Pipeline"]

log = logging.getLogger(__name__)
UTC = timezone.utc

#: Skip verdicts that cost a whole bounded extraction (a worker ran into its time bound, died, or
#: could not read the document): they stand while the document's bytes are the same, so a
#: hostile page served without validators (no 304 possible) is not parsed again at every pass.
#: Cheap verdicts are not kept this way (``noindex`` hands back links; ``too-large`` and
#: ``unsupported-type`` depend on the config and the installed helpers).
COSTLY_SKIPS = frozenset({"timeout", "parse-error"})


def bytes_digest(data: bytes) -> str:
    """``"bytes:"`` + the SHA-256 hex digest of a document's bytes: what a skipped record of
    :data:`COSTLY_SKIPS` keeps in ``content_hash`` (an indexed record keeps its text's hash
    there, :func:`~indexerd.extract.content_hash`; every reader of hashes reads indexed rows
    only)."""
    return "bytes:" + hashlib.sha256(data).hexdigest()


def _now() -> datetime:
    return datetime.now(UTC)


class Pipeline:
    """Turns fetched documents into writer operations.

    Args:
        writer_factory: returns the :class:`~indexerd.pipeline.writer.IndexWriter`; called lazily on the
            first write, so a pass over an unchanged tree never opens the index.
        store: a read connection to the state store (stored records for the decision).
        counters: named counters shared with ``ctl status``.

    Thread safety: one Pipeline per thread (the store connection is per thread).
    """

    def __init__(self, writer_factory: Callable[[], object], store: StateStore,
                 counters: Counters | None = None, clock: Callable[[], datetime] = _now) -> None:
        self._writer_factory = writer_factory
        self._writer = None
        #: live mode: this pipeline's index changes are committed as soon as the writer's queue
        #: drains (live file events); False for scheduled passes, which commit about once a second
        self.urgent = True
        #: the host claim the document being handled was fetched under (a cluster's crawl sets
        #: it around each answer it handles), given with every writer operation: the writer
        #: writes nothing of it once that claim no longer holds; None: not fenced
        self.fence: ClaimFence | None = None
        self.store = store
        self.counters = counters or Counters()
        self.clock = clock

    @property
    def writer(self):
        if self._writer is None:
            self._writer = self._writer_factory()
            # failed writes before this pipeline's first one are not its own (see flush)
            self._failures_before = self._writer.stats.write_failures
        return self._writer

    @property
    def writer_opened(self) -> bool:
        return self._writer is not None

    def flush(self, timeout: float | None = None) -> None:
        """Commit every submitted change (no-op when nothing was written).

        Raises:
            RetryLater: a write or commit failed since this pipeline's first write.
        """
        if self._writer is not None:
            self._writer.flush(timeout, since=self._failures_before)

    def write_pending(self, key: str) -> bool:
        """True when a write (or removal) of ``key`` is queued in the writer and not yet
        committed to the index and the store."""
        return self._writer is not None and self._writer.pending_record(key)[0]

    def removal_queued(self, key: str) -> bool:
        """True when the removal of ``key`` is queued in the writer and not yet committed."""
        if self._writer is not None:
            queued, rec = self._writer.pending_record(key)
            return queued and rec is None
        return False

    def still_stored(self, keys: Iterable[str]) -> list[str]:
        """Those of ``keys`` (read from the store earlier) whose removal is not queued and whose
        row the store holds now, sorted: the keys a removal must still take.  The store is read
        again *after* the queue is checked: a removal the writer committed in between (it writes
        the store before it forgets the queued write) is in neither, never counted twice."""
        unqueued = [k for k in keys if not self.removal_queued(k)]
        return sorted(self.store.existing_keys(unqueued)) if unqueued else []

    def stored(self, key: str) -> DocumentRecord | None:
        """The latest record for ``key`` as the pass must see it: a queued write if there is one
        (None for a queued removal), else the store's row.  Sources read the store through this
        one call."""
        if self._writer is not None:
            queued, rec = self._writer.pending_record(key)
            if queued:
                return rec
        return self.store.get(key)

    # -- outcomes without a body ----------------------------------------------------------
    def skip(self, key: str, source: str, reason: str, detail: str, counts: PassCounts, *,
             size: int | None = None, mtime_ns: int | None = None, status: str = "skipped",
             stored: DocumentRecord | None = None, title: str | None = None,
             ctime_ns: int | None = None, ino: int | None = None, etag: str | None = None,
             last_modified_header: str | None = None, data: bytes | None = None) -> Outcome:
        """Record that ``key`` cannot be indexed now (``reason`` is a fixed word).

        ``data``: the document's bytes, when they were read; a verdict of :data:`COSTLY_SKIPS`
        keeps their digest (:func:`bytes_digest`), on which it stands at the next read
        (:meth:`handle`).

        ``etag`` / ``last_modified_header`` (web) are kept so that the next pass can ask with a
        conditional GET instead of downloading a known-unindexable body again.

        A previously indexed copy is removed from the index: it no longer matches the document.
        ``status`` is ``skipped`` or ``error`` (errors are counted in ``errors``).  For files,
        ``ctime_ns`` and ``ino`` let the next scan see a rewrite that keeps size and mtime, and
        retry an error once the file's status changes (a chmod).
        """
        now = self.clock()
        stored = stored if stored is not None else self.stored(key)
        rec = DocumentRecord(key=key, source=source, status=status, reason=reason, detail=detail[:500],
                             size=size, mtime_ns=mtime_ns, checked_at=now, decided_at=now,
                             ctime_ns=ctime_ns, ino=ino, etag=etag,
                             last_modified_header=last_modified_header,
                             content_hash=bytes_digest(data) if data is not None and status == "skipped"
                             and reason in COSTLY_SKIPS else None,
                             title=title if title is not None else (stored.title if stored else None))
        if stored is not None and stored.status in ("indexed", "stale"):
            # stale: the start-up reconcile found it in the index without a trustworthy row
            self.writer.submit_remove(key, rec, urgent=self.urgent, fence=self.fence)
        else:
            self.writer.submit_record(rec, fence=self.fence)
        # counted only once the writer took it: a failure above is counted by the caller
        if (status == "skipped" and stored is not None and stored.status == "skipped"
                and stored.reason == reason and stored.ctime_ns == 0 and ino is not None
                and (stored.mtime_ns, stored.size, stored.ino) == (mtime_ns, size, ino)):
            # a file read again only because its last stat was too close to a change to be
            # trusted (indexerd.sources.files.keys.trusted_ctime_ns), with the same verdict: its stat had not
            # changed since that verdict, so it counts as unchanged
            return self._counted(Outcome(Verdict.UNCHANGED, reason), counts)
        if status == "error":
            message = f"{reason}: {key}" + (f" ({detail})" if detail else "")
            self.counters.inc(f"error.{reason}")
            log.warning("error %s: %s (%s)", reason, key, detail)
            return self._counted(Outcome(Verdict.ERRORS, reason), counts, message=message)
        self.counters.inc(f"skip.{reason}")
        log.debug("skipped %s: %s (%s)", reason, key, detail)  # counted by reason at the pass's end
        return self._counted(Outcome(Verdict.SKIPPED, reason), counts)

    def unchanged(self, counts: PassCounts, reason: str = "stat-unchanged", n: int = 1) -> Outcome:
        """``n`` documents the source itself found unchanged without reading them (the same stat
        as stored): nothing to write.  A walk counts them in batches (one call per file cost a
        sixth of an unchanged pass over a million files)."""
        return self._counted(Outcome(Verdict.UNCHANGED, reason), counts, n)

    @staticmethod
    def _counted(out: Outcome, counts: PassCounts, n: int = 1, message: str | None = None) -> Outcome:
        """The one place a pass's counts change: record ``out``'s verdict and hand it back."""
        counts.record(out.verdict, n, message=message, reason=out.reason)
        return out

    def gone(self, key: str, counts: PassCounts, why: str = "") -> Outcome:
        """The document no longer exists at its source: delete it from the index and the store."""
        return self.gone_many([key], counts, why)

    def gone_many(self, keys: list[str], counts: PassCounts, why: str = "") -> Outcome:
        """:meth:`gone` for many keys at once (a directory removed, a pass's leftovers): one
        writer operation, so the writer deletes them in one batch and a live commit does not
        cut it into pieces.  Returns the outcome of the last key."""
        d = decide_mod.decide(None, decide_mod.NewFacts(None, None, gone=True), self.clock())
        if not keys:
            return Outcome(Verdict.DELETED, d.reason)
        self.writer.submit_remove_many(keys, urgent=self.urgent, fence=self.fence)
        self.counters.inc(f"decide.{d.reason}", len(keys))
        for key in keys:
            log.info("deleted %s%s", key, f" ({why})" if why else "")
        return self._counted(Outcome(Verdict.DELETED, d.reason), counts, len(keys))

    def not_modified(self, key: str, counts: PassCounts, stored: DocumentRecord | None = None) -> Outcome:
        """The source says ``key`` is unchanged without sending it (HTTP 304, RFC 9110 §15.4.5):
        no parse, no index write.  ``checked_at`` is refreshed; an indexed document's decision
        becomes ``not-modified``, made now (``decided_at``, no stale ``detail``: a reason is
        never shown with the time of an older decision); a skipped one keeps its skip reason
        (binary, noindex ...) with its own time."""
        stored = stored if stored is not None else self.stored(key)
        now = self.clock()
        if stored is not None and stored.status == "indexed":
            self.writer.submit_record(replace(stored, checked_at=now, reason="not-modified",
                                              decided_at=now, detail=None), fence=self.fence)
        elif stored is not None:
            self.writer.submit_record(replace(stored, checked_at=now), fence=self.fence)
        self.counters.inc("decide.not-modified")
        return self._counted(Outcome(Verdict.UNCHANGED, "not-modified", None, key,
                                     stored.last_modified if stored is not None else None), counts)

    def _verdict_stands(self, f: Fetched, stored: DocumentRecord, counts: PassCounts) -> Outcome:
        """``f``'s bytes are those a costly skip verdict was given on: it stands, unread
        (``checked_at``, the stat and the validators refreshed; the verdict keeps its time)."""
        self.writer.submit_record(replace(stored, checked_at=self.clock(), size=f.size,
                                          mtime_ns=f.mtime_ns, ctime_ns=f.ctime_ns, ino=f.ino,
                                          etag=f.etag, last_modified_header=f.last_modified_header),
                                  fence=self.fence)
        self.counters.inc("decide.same-bytes")
        log.debug("unchanged %s: the same bytes as its %s verdict", f.key, stored.reason)
        return self._counted(Outcome(Verdict.UNCHANGED, "same-bytes", None, f.key), counts)

    # -- the main path --------------------------------------------------------------------
    def handle(self, f: Fetched, policy: Policy, counts: PassCounts, *, forced: bool = False,
               stored: DocumentRecord | None = None, fallback_title: str = "",
               rekey: Callable[[object], str | None] | None = None, redirects: bool = False,
               duplicate_of: Callable[[str, str], str | None] | None = None) -> Outcome:
        """Extract, date, decide and submit one fetched document.

        ``rekey(links)`` (a :class:`PageLinks`) may name another key for the document (a web page's
        ``rel=canonical``); the decision is then made against that key's stored record.
        ``redirects``: the source follows HTML-level redirects (``Extracted.redirect``): such a
        page is not a document; the outcome is ``redirect`` with nothing written or counted,
        and the caller follows it.  Without it, a refresh stub with no text is skipped ``empty``.
        ``duplicate_of(key, content_hash)`` may name a document to keep instead of this one (the
        same content under another URL): this one is then skipped as ``duplicate``, its alias.
        A document skipped with a verdict of :data:`COSTLY_SKIPS` whose bytes are the same as
        then is not extracted again (unless ``forced``): the verdict stands, counted unchanged
        (``decide.same-bytes``).
        """
        # the document path's modules, at the first changed document (an unchanged pass never
        # extracts: ``indexerd index`` over an unchanged tree starts without them)
        from indexerd.core.datechain import DateEvidence, resolve_date
        from indexerd.extract import content_hash, extract
        from indexerd.index import IndexDoc

        stored = stored if stored is not None else self.stored(f.key)
        if (not forced and stored is not None and stored.status == "skipped"
                and stored.reason in COSTLY_SKIPS and stored.content_hash == bytes_digest(f.data)):
            return self._verdict_stands(f, stored, counts)
        try:
            ex = extract(f.data, f.declared_type, charset=f.charset, base_url=f.base_url, name=f.name,
                         max_bytes=policy.max_bytes)
        except SkipDocument as e:
            return self.skip(f.key, f.source, e.reason, e.detail or f.url, counts, size=f.size,
                             mtime_ns=f.mtime_ns, ctime_ns=f.ctime_ns, ino=f.ino, stored=stored, etag=f.etag,
                             last_modified_header=f.last_modified_header, data=f.data)
        except Exception as e:  # an extractor bug must not stop the pass
            log.debug("extraction of %s failed", f.url, exc_info=True)  # the error itself: below
            # this machine's fault (a helper that cannot start, EACCES, ENOSPC): read again at
            # the next pass, whatever the stat says (indexerd.sources.files.change.unchanged)
            reason = "environment" if is_environment_failure(e) else "parse-error"
            return self.skip(f.key, f.source, reason, f"{type(e).__name__}: {e}", counts,
                             size=f.size, mtime_ns=f.mtime_ns, ctime_ns=f.ctime_ns, ino=f.ino,
                             status="error", stored=stored)
        for note in ex.notes:  # read, but not as its format: indexed as raw text
            self.counters.inc("extract.fallback")
            log.warning("extraction of %s: %s", f.key, note)
        if ex.redirect is not None and redirects:
            return Outcome(Verdict.REDIRECT, "meta-refresh", PageLinks.of(ex), f.key)
        if not (ex.title or ex.text):  # a refresh that goes nowhere here
            return self.skip(f.key, f.source, "empty", f"{f.url}: no title and no text", counts,
                             size=f.size, mtime_ns=f.mtime_ns, ctime_ns=f.ctime_ns, ino=f.ino,
                             stored=stored, etag=f.etag,
                             last_modified_header=f.last_modified_header)
        if rekey is not None:
            new_key = rekey(PageLinks.of(ex))
            if new_key and new_key != f.key:
                f = replace(f, key=new_key)
                stored = None
        stored = stored if stored is not None else self.stored(f.key)
        if ex.noindex:  # its links may still be followed (unless nofollow): hand them back
            out = self.skip(f.key, f.source, "noindex", "meta robots noindex", counts, size=f.size,
                            mtime_ns=f.mtime_ns, ctime_ns=f.ctime_ns, ino=f.ino, stored=stored, etag=f.etag,
                            last_modified_header=f.last_modified_header)
            return replace(out, links=PageLinks.of(ex), key=f.key)
        resolved = resolve_date(
            DateEvidence(fetched_at=f.fetched_at, meta=ex.meta, protocol=f.protocol_date,
                         protocol_kind=f.protocol_kind, sitemap=f.sitemap_date, server_date=f.server_date,
                         document=ex.document_date),
            policy.meta_map, policy.date_order)
        title = f.title if f.title else (ex.title or fallback_title)
        chash = content_hash(title, ex.text)
        keep = duplicate_of(f.key, chash) if duplicate_of is not None else None
        if keep is not None and keep != f.key:
            out = self.skip(f.key, f.source, "duplicate", f"same content as {keep}", counts, size=f.size,
                            mtime_ns=f.mtime_ns, stored=stored, title=title)
            return replace(out, links=PageLinks.of(ex), key=f.key)
        now = self.clock()
        usable = stored if stored is not None and stored.status == "indexed" else None
        stored_facts = None if usable is None else decide_mod.StoredFacts(
            usable.last_modified, usable.date_source, usable.content_hash, usable.indexed_at)
        d = decide_mod.decide(stored_facts,
                              decide_mod.NewFacts(resolved.value, resolved.source, chash, forced=forced),
                              now, policy.settings)
        self.counters.inc(f"decide.{d.reason}")
        common: dict[str, Any] = dict(key=f.key, source=f.source, size=f.size, mtime_ns=f.mtime_ns, ctime_ns=f.ctime_ns,
                      ino=f.ino, etag=f.etag,
                      last_modified_header=f.last_modified_header, media_type=ex.media_type,
                      checked_at=now, decided_at=now, reason=d.reason)
        if d.action is decide_mod.Action.INDEX:
            rec = DocumentRecord(status="indexed", title=title, last_modified=resolved.value,
                                 date_source=resolved.source, date_notes="; ".join(resolved.notes),
                                 content_hash=chash, indexed_at=now, **common)
            doc = IndexDoc(key=f.key, source=f.source, url=f.url, path=f.path, title=title,
                           content=ex.text, last_modified=resolved.value, date_source=resolved.source,
                           media_type=ex.media_type, size=f.size, snippet_text=ex.main_text,
                           headings=ex.headings or "")
            self.writer.submit_index(doc, rec, urgent=self.urgent, fence=self.fence)
            log.debug("indexed %s (%s; date %s from %s)", f.key, d.reason, resolved.value, resolved.source)
            return self._counted(Outcome(Verdict.INDEXED, d.reason, PageLinks.of(ex), f.key,
                                         resolved.value, chash), counts)
        # skip: keep what the index holds (date, hash, indexed_at), refresh the validators/stat
        base = usable or stored
        rec = replace(base, status="indexed", **common) if base is not None else DocumentRecord(
            status="indexed", **common)
        self.writer.submit_record(rec, fence=self.fence)
        return self._counted(Outcome(Verdict.UNCHANGED, d.reason, PageLinks.of(ex), f.key,
                                     base.last_modified if base is not None else None, chash), counts)
