"""The state store: one row per document key, plus per-source run records and the crawl rows.

Two implementations behind one interface, chosen by the config's ``[store] url``:
:class:`Store` on one SQLite file in the state dir (the default: no server) and :class:`PgStore`
on a schema of a PostgreSQL server, which several nodes share (:mod:`.cluster`'s rows are
only there).  :func:`open_store` opens either from a :data:`StoreLocation`.

Contract relied on: on SQLite, WAL mode allows one writer and many concurrent readers across
threads and processes; on PostgreSQL every write batch is one transaction and an upsert is
atomic under concurrent writers.  The writer thread (:mod:`indexerd.pipeline.writer`) is the only
code that writes document rows during a pass; readers (the scan's stat map, ``ctl report``) open
their own connection.  The few writes that bypass the writer are listed, each with why it is
safe, in :data:`WRITES_OUTSIDE_THE_WRITER` (tests/test_store_writers.py holds every module to
that list).

The package, by job: :mod:`.connection` (what both connections offer), :mod:`.sqlite` and
:mod:`.postgresql` (open, transactions, close), :mod:`.migrations` and :mod:`.pg_migrations`
(numbered schema steps; a database newer than the code is refused with
:class:`~indexerd.core.errors.SchemaTooNew`), :mod:`.documents` (document rows),
:mod:`.runs` (a source's passes, and the source as a whole), :mod:`.crawl` (the web crawl's rows),
:mod:`.cluster` (nodes and host leases), :mod:`.values` (times as sortable UTC text).
What a consumer may ask of a store is declared by concern in :mod:`.protocols`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Union

from indexerd.core.store.cluster import ClusterRows
from indexerd.core.store.crawl import CrawlRows
from indexerd.core.store.documents import DocumentRecord, DocumentRows
from indexerd.core.store.postgresql import PgConnection, PgStoreAddress
from indexerd.core.store.protocols import ClusterStateStore, StateStore
from indexerd.core.store.runs import SourceRuns
from indexerd.core.store.sharedfrontier import SharedFrontierRows
from indexerd.core.store.sqlite import SqliteConnection
from indexerd.core.store.values import from_db_time, to_db_time

__all__ = ["Store", "PgStore", "StateStore", "ClusterStateStore", "StoreLocation", "DocumentRecord", "PgStoreAddress",
           "WRITES_OUTSIDE_THE_WRITER", "open_store", "open_store_in_dir", "store_address", "from_db_time", "to_db_time"]

#: Store writes made outside the writer thread: method -> (the package paths, relative to
#: ``indexerd/``, allowed to call it; why that is safe).  Every other write goes through
#: :class:`~indexerd.pipeline.writer.IndexWriter`.  SQLite serialises the transactions themselves
#: (WAL, ``busy_timeout``); what makes each safe is that no other thread writes the same rows.
WRITES_OUTSIDE_THE_WRITER: dict[str, tuple[tuple[str, ...], str]] = {
    "crawl_write": (("sources/web/",), "the crawl table is written only by the one pass of its "
                    "web source (a source runs one pass at a time); the writer never writes it"),
    "crawl_drop_spilled": (("sources/web/",), "the same rows as crawl_write, the same owner"),
    "crawl_forget_unasked": (("sources/web/",), "the same rows as crawl_write, the same owner"),
    "crawl_drop_requisites": (("sources/web/",), "the same rows as crawl_write, the same owner"),
    "crawl_trust_requisite_references": (("sources/web/",), "the same rows as crawl_write, the same owner"),
    "crawl_requisites_checked": (("sources/web/",), "the same rows as crawl_write, the same owner"),
    "crawl_due_now": (("sources/web/source.py",), "one crawl row's schedule, for `ctl forget`; a crawl "
                      "running meanwhile keeps its own schedule for that page (documented there)"),
    "pass_started": (("runtime/indexer.py",), "the source_runs row of the source whose pass starts, "
                     "from the thread that runs that pass, under the source's pass lock"),
    "record_run": (("runtime/indexer.py", "daemon/passes.py"), "the same row as pass_started, from the "
                   "same thread, after the pass's last flush"),
    "write_batch": (("runtime/recovery.py", "sources/sql/"), "the reconcile at start, before the writer "
                    "thread exists, under the state dir lock; the SQL source's own meta keys "
                    "(full-load time, forgotten ids), which nothing else writes"),
    "reset_stats": (("runtime/recovery.py",), "the reconcile and rebuild at start, before the writer "
                    "thread exists"),
    "forget_source": (("runtime/removal.py",), "a removed source's rows after its removals were "
                      "flushed by the writer; no pass of that source runs any more"),
}


class Store(DocumentRows, SourceRuns, CrawlRows, SqliteConnection):
    """The state store at ``<state_dir>/state.sqlite3``.

    One object per thread (sqlite3 connections are not shared across threads here); open as many
    as needed, WAL lets them coexist.  ``close()`` is safe to call twice.

    Raises (from the constructor):
        SchemaTooNew: the file was written by a newer indexerd.
        StoreError: the file cannot be opened or is not a database.
    """


class PgStore(DocumentRows, SourceRuns, CrawlRows, ClusterRows, SharedFrontierRows, PgConnection):
    """The state store in a schema of a PostgreSQL server, shared by every node of a cluster.

    One object per thread, as :class:`Store`.  ``close()`` is safe to call twice.

    Raises (from the constructor):
        ConfigError: the password cannot be read.
        SchemaTooNew: the schema was written by a newer indexerd.
        StoreError: the server cannot be reached, or (``readonly``) holds no store yet.
    """


#: Where a store is: the SQLite file's path, or the PostgreSQL server's address.
StoreLocation = Union[Path, PgStoreAddress]


def store_address(cfg) -> PgStoreAddress | None:
    """The PostgreSQL store the config's ``[store]`` names, or None (the SQLite file).

    Raises:
        ConfigError: a schema that is not a plain SQL name.
    """
    if getattr(cfg, "store", None) is None:
        return None
    return PgStoreAddress.from_settings(cfg.store, "indexerd_state")


def open_store(location: StoreLocation, *, readonly: bool = False) -> StateStore:
    """Open the store at ``location`` (a new connection, for the calling thread).

    Raises: as :class:`Store` or :class:`PgStore`.
    """
    if isinstance(location, PgStoreAddress):
        return PgStore(location, readonly=readonly)
    return Store(location, readonly=readonly)


def open_store_in_dir(state_dir: str | Path, *, readonly: bool = False) -> StateStore:
    """The store of the state dir ``state_dir``: the PostgreSQL store its writer recorded there
    (:attr:`PgStoreAddress.FILENAME`), else its SQLite file.

    Raises: as :func:`open_store`; StoreError when the address file cannot be read.
    """
    address = PgStoreAddress.from_file(Path(state_dir))
    if address is not None:
        return PgStore(address, readonly=readonly)
    return Store.in_dir(state_dir, readonly=readonly)
