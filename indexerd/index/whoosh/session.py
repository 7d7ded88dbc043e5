"""One Whoosh write session: the single writer, with "last write wins per key" until commit.

Whoosh's own rules for an uncommitted batch are not the writer's problem: ``update_document``
and ``delete_by_term`` reach only *committed* segments, so adding a key twice before a commit
would leave both copies, and deleting a key added in the same batch would not delete it.  This
session remembers the document number of every key it added; a second write of the key marks
the earlier copy deleted in the segment being written (``SegmentWriter.newsegment``, whose
deletion set is saved with the segment at commit), so the last write wins.

Deletes of committed documents are collected and applied at commit through one searcher
(Whoosh's ``delete_by_term`` opens a searcher over every segment per call).

A document's title and content reach Whoosh as their postings
(:mod:`~indexerd.index.whoosh.postingvalues`).  Updates are queued in batches of
:data:`~indexerd.index.offload.BATCH_DOCS` (fewer when they are big); a full batch has its
postings computed by the index's analysis worker on another core, the rest here at
:meth:`WhooshSession.commit`.
Operations reach Whoosh strictly in the order they were made (deletes queue behind updates).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable
from datetime import timezone
from pathlib import Path

from indexerd.index.base import IndexDoc
from indexerd.index.offload import AnalysisWorker, OrderedBatches
from indexerd.index.whoosh.postingvalues import PostingValues, posting_values
from indexerd.index.whoosh.mergepolicy import bounded, merge_thoroughly, reclaim_and_merge_small
from indexerd.index.whoosh.postingpool import MergeInterrupted

log = logging.getLogger(__name__)
UTC = timezone.utc
#: Batches a session lets the worker run ahead of Whoosh (bounds the memory held).
MAX_BATCHES_IN_FLIGHT = 2
#: the temp name Whoosh writes a TOC to before renaming it to ``_MAIN_<generation>.toc``
_TEMP_TOC = re.compile(r"_MAIN_\d+\.toc\.[0-9.e+-]+")


def _texts_of(doc: IndexDoc) -> tuple[str, str, str | None, str]:
    """What :func:`~indexerd.index.whoosh.postingvalues.posting_values` takes of a document."""
    return doc.title, doc.content, doc.snippet_text, doc.headings


def naive_utc(dt):
    """Whoosh's ``DATETIME`` drops tzinfo: hand it naive UTC."""
    if dt is None:
        return None
    return dt.astimezone(UTC).replace(tzinfo=None)


class WhooshSession:
    """An open Whoosh writer, the write lock taken for it (None on stock Whoosh, which holds its
    own), and the keys this session wrote.

    Whoosh releases its write lock at the very end of ``commit``/``cancel``, after removing its
    temp files; when that fails (a read-only or full state dir) the lock's file descriptor would
    stay open and this process could never write again, so the lock is released here whatever
    happens.  ``on_commit`` is called after each commit that succeeded (the index's searchers
    drop what the commit made stale).  Used by one thread.
    """

    def __init__(self, writer, lock, *, fold_diacritics: bool = True,
                 on_commit: Callable[[], None] | None = None, worker: AnalysisWorker | None = None,
                 path: Path | None = None) -> None:
        self._w = writer
        self._on_commit = on_commit
        self._fold = fold_diacritics
        self._worker = worker
        self._path = path
        self._lock = lock
        self._added: dict[str, int] = {}   # key -> its document number in the new segment
        self._removals: set[str] = set()   # keys whose committed copies go at commit
        self._batches = OrderedBatches(worker, posting_values, _texts_of, fold_diacritics,
                                       MAX_BATCHES_IN_FLIGHT)

    def _release(self) -> None:
        if self._lock is not None and getattr(self._lock, "fd", None) is not None:
            try:
                self._lock.release()
            except OSError:
                pass

    def _forget_added(self, key: str) -> None:
        local = self._added.pop(key, None)
        if local is not None:
            self._w.newsegment.delete_document(local)

    def update(self, doc: IndexDoc) -> None:
        """Add ``doc``, replacing the committed copy and any copy added in this session.  Its
        title and content are analysed once (:mod:`indexerd.index.analysis`) into their postings,
        in the worker when a batch is full, else at :meth:`commit`; their whole identifiers go
        to ``ids``.  A document Whoosh cannot take is reported by a later call of the session.

        Raises:
            OSError: Whoosh could not take a document of this session (named).
        """
        if self._batches.update(doc):
            self._apply(block=self._batches.behind())

    def delete(self, key: str) -> None:
        """Delete ``key``: its copy added in this session, and its committed copies at commit."""
        self._batches.delete(key)

    def delete_many(self, keys: Iterable[str]) -> None:
        """:meth:`delete` for every key."""
        for key in keys:
            self._batches.delete(key)

    def _apply(self, *, block: bool, last: bool = False) -> None:
        """Give Whoosh the queued operations in order (see :class:`OrderedBatches`)."""
        self._batches.apply(self._add, self._delete_now, block=block, last=last)

    def _delete_now(self, key: str) -> None:
        self._forget_added(key)
        self._removals.add(key)

    def _add(self, doc: IndexDoc, computed: tuple) -> None:
        title, content, ids, text_z, headings = computed
        self._forget_added(doc.key)
        local = self._w.docnum - self._w.docbase
        more = {"headings": PostingValues(headings)} if headings is not None else {}
        try:
            self._w.update_document(
                key=doc.key, source=doc.source, path=doc.path,
                title=PostingValues(title), _stored_title=doc.title,
                content=PostingValues(content), **more,
                ids=ids, text_z=text_z,
                last_modified=naive_utc(doc.last_modified), date_source=doc.date_source,
                media_type=doc.media_type, size=doc.size)
        except OSError:
            raise
        except Exception as e:  # the batch this document came in cannot be committed as it is
            raise OSError(f"{self._path}: cannot add {doc.key}: {type(e).__name__}: {e}") from e
        self._added[doc.key] = local
        # update_document deleted the committed copies already
        self._removals.discard(doc.key)

    def _apply_removals(self) -> int:
        """Delete the committed documents of the collected keys through one searcher."""
        from whoosh.query import Term

        keys, self._removals = self._removals, set()
        if not keys:
            return 0
        with self._w.searcher() as s:
            reader = s.reader()
            if reader.doc_count_all() == 0:  # nothing committed yet (an empty reader has no columns)
                return 0
            # one term lookup per key and segment, or one pass over the key column (sortable):
            # the column wins once the keys outnumber about a fifth of the documents per segment
            if len(keys) * len(reader.leaf_readers()) * 5 > reader.doc_count_all():
                docnums = [d for d, k in enumerate(reader.column_reader("key")) if k in keys]
            else:
                docnums = [d for k in keys for d in s.docs_for_query(Term("key", k), for_deletion=True)]
            for d in docnums:
                self._w.delete_document(d)
        return len(docnums)

    def commit(self, *, merge: bool, thorough: bool = False,
               interrupted: Callable[[], bool] | None = None) -> str:
        """Apply the deletes and commit; returns the new generation as the commit token.  With
        ``merge`` the idle merge policy runs (:func:`~.mergepolicy.reclaim_and_merge_small`, or
        with ``thorough`` :func:`~.mergepolicy.merge_thoroughly`); else (a live commit)
        segments left empty are dropped and, once there are
        :data:`~.mergepolicy.MERGE_AT_SEGMENTS`, the smallest are merged
        (:func:`~.mergepolicy.bounded`), so a daemon's searches never open more.
        ``interrupted`` is asked while the commit writes (:class:`~.postingpool.TermPostingPool`).

        Raises:
            MergeInterrupted: ``interrupted`` said True; the commit is cancelled.
            OSError: the index could not be written; the commit is cancelled."""
        policy = (merge_thoroughly if thorough else reclaim_and_merge_small) if merge else bounded
        if hasattr(self._w.pool, "interrupted"):
            self._w.pool.interrupted = interrupted
        try:
            self._apply(block=True, last=True)
            self._apply_removals()
            # each drops segments with no live document; only a merge rewrites (see mergepolicy)
            self._w.commit(mergetype=policy)
        except BaseException as e:
            self._remove_temp_tocs()  # still under our lock: no other writer can be making one
            try:
                if not self._w.is_closed:
                    self._w.cancel()
            except Exception:
                pass
            if isinstance(e, MergeInterrupted):  # raised before any TOC names the new segment
                self._remove_new_segment()
            raise
        finally:
            self._release()
        self._added.clear()
        if self._on_commit is not None:
            self._on_commit()
        return str(self._w.generation)

    def _remove_new_segment(self) -> None:
        """Remove the files of the segment an interrupted merge was writing (the next commit
        would, but a merge of 50,000 documents leaves hundreds of MB until then)."""
        folder = getattr(getattr(self._w, "storage", None), "folder", None)
        segment = getattr(self._w, "newsegment", None)
        if folder is None or segment is None:
            return
        prefix = segment.segment_id() + "."
        for name in os.listdir(folder):
            if name.startswith(prefix):
                try:
                    os.unlink(os.path.join(folder, name))
                except OSError as e:
                    log.warning("cannot remove %s: %s", os.path.join(folder, name), e.strerror)

    def _remove_temp_tocs(self) -> None:
        """Remove the ``_MAIN_<gen>.toc.<time>`` file a failed commit leaves (Whoosh writes the
        TOC to that name, then renames it; a full or read-only disk stops it in between)."""
        folder = getattr(getattr(self._w, "storage", None), "folder", None)
        if folder is None:
            return
        try:
            names = os.listdir(folder)
        except OSError:
            return
        for name in names:
            if _TEMP_TOC.fullmatch(name):
                try:
                    os.unlink(os.path.join(folder, name))
                except OSError as e:
                    log.warning("cannot remove %s: %s", os.path.join(folder, name), e.strerror)

    def full(self) -> bool:
        """Never: this engine's writes wait nowhere unbounded (the protocol's ``full``)."""
        return False

    def cancel(self) -> None:
        """Drop the session's writes and release the writer."""
        try:
            if not self._w.is_closed:
                self._w.cancel()
        finally:
            self._release()
            self._added.clear()
            self._removals.clear()
            self._batches.clear()
