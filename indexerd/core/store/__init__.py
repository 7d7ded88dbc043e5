"""SQLite state store: one row per document key, plus per-source run records and the crawl rows.

Contract relied on: SQLite in WAL mode allows one writer and many concurrent readers across
threads and processes; every connection here sets ``busy_timeout`` so a reader never fails on a
momentary write lock.  The writer thread (:mod:`indexerd.core.writer`) is the only code that writes
document rows during a pass; readers (the scan's stat map, ``ctl report``) open their own
connection.  The few writes that bypass the writer are listed, each with why it is safe, in
:data:`WRITES_OUTSIDE_THE_WRITER` (tests/test_store_writers.py holds every module to that list).

The package, by job: :mod:`.connection` (open, transactions, close), :mod:`.migrations` (numbered
schema steps; a database newer than the code is refused with
:class:`~indexerd.core.errors.SchemaTooNew`), :mod:`.documents` (document rows),
:mod:`.runs` (a source's passes, and the source as a whole), :mod:`.crawl` (the web crawl's rows),
:mod:`.values` (times as sortable UTC text).  :class:`Store` is all of them on one connection.
"""

from __future__ import annotations

from indexerd.core.store.crawl import CrawlRows
from indexerd.core.store.documents import DocumentRecord, DocumentRows
from indexerd.core.store.runs import SourceRuns
from indexerd.core.store.values import from_db_time, to_db_time

__all__ = ["Store", "DocumentRecord", "WRITES_OUTSIDE_THE_WRITER", "from_db_time", "to_db_time"]

#: Store writes made outside the writer thread: method -> (the package paths, relative to
#: ``indexerd/``, allowed to call it; why that is safe).  Every other write goes through
#: :class:`~indexerd.core.writer.IndexWriter`.  SQLite serialises the transactions themselves
#: (WAL, ``busy_timeout``); what makes each safe is that no other thread writes the same rows.
WRITES_OUTSIDE_THE_WRITER: dict[str, tuple[tuple[str, ...], str]] = {
    "crawl_write": (("sources/web/",), "the crawl table is written only by the one pass of its "
                    "web source (a source runs one pass at a time); the writer never writes it"),
    "crawl_drop_spilled": (("sources/web/",), "the same rows as crawl_write, the same owner"),
    "crawl_due_now": (("sources/web/source.py",), "one crawl row's schedule, for `ctl forget`; a crawl "
                      "running meanwhile keeps its own schedule for that page (documented there)"),
    "pass_started": (("core/indexer.py",), "the source_runs row of the source whose pass starts, "
                     "from the thread that runs that pass, under the source's pass lock"),
    "record_run": (("core/indexer.py", "daemon/passes.py"), "the same row as pass_started, from the "
                   "same thread, after the pass's last flush"),
    "write_batch": (("core/recovery.py", "sources/sql/"), "the reconcile at start, before the writer "
                    "thread exists, under the state dir lock; the SQL source's own meta keys "
                    "(full-load time, forgotten ids), which nothing else writes"),
    "reset_stats": (("core/recovery.py",), "the reconcile and rebuild at start, before the writer "
                    "thread exists"),
    "forget_source": (("core/indexer.py",), "a removed source's rows after its removals were "
                      "flushed by the writer; no pass of that source runs any more"),
}


class Store(DocumentRows, SourceRuns, CrawlRows):
    """The state store at ``<state_dir>/state.sqlite3``.

    One object per thread (sqlite3 connections are not shared across threads here); open as many
    as needed, WAL lets them coexist.  ``close()`` is safe to call twice.

    Raises (from the constructor):
        SchemaTooNew: the file was written by a newer indexerd.
        StoreError: the file cannot be opened or is not a database.
    """
