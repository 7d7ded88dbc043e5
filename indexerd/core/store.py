"""SQLite state store: one row per document key, plus per-source run records.

Contract relied on: SQLite in WAL mode allows one writer and many concurrent readers across
threads and processes; every connection here sets ``busy_timeout`` so a reader never fails on a
momentary write lock.  The writer thread (:mod:`indexerd.core.writer`) is the only code that writes
document rows during a pass; readers (the scan's stat map, ``ctl report``) open their own
connection.  The few writes that bypass the writer are listed, each with why it is safe, in
:data:`WRITES_OUTSIDE_THE_WRITER` (tests/test_store_writers.py holds every module to that list).

Schema changes go through numbered migrations (:data:`MIGRATIONS`); a database whose
``schema_version`` is newer than the code is refused with :class:`~indexerd.core.errors.SchemaTooNew`.

All times are stored as ISO 8601 UTC text with a ``Z`` suffix and microseconds, so they sort and
compare as text; they come back as aware UTC datetimes.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Iterator

from indexerd.core.errors import SchemaTooNew, StoreError

UTC = timezone.utc

#: Store writes made outside the writer thread: method -> (the package paths, relative to
#: ``indexerd/``, allowed to call it; why that is safe).  Every other write goes through
#: :class:`~indexerd.core.writer.IndexWriter`.  SQLite serialises the transactions themselves
#: (WAL, ``busy_timeout``); what makes each safe is that no other thread writes the same rows.
WRITES_OUTSIDE_THE_WRITER: dict[str, tuple[tuple[str, ...], str]] = {
    "crawl_write": (("sources/web/",), "the crawl table is written only by the one pass of its "
                    "web source (a source runs one pass at a time); the writer never writes it"),
    "crawl_drop_spilled": (("sources/web/",), "the same rows as crawl_write, the same owner"),
    "crawl_due_now": (("cli/ctlverbs.py",), "one crawl row's schedule, for `ctl forget`; a crawl "
                      "running meanwhile keeps its own schedule for that page (documented there)"),
    "pass_started": (("core/indexer.py",), "the source_runs row of the source whose pass starts, "
                     "from the thread that runs that pass, under the source's pass lock"),
    "record_run": (("core/indexer.py", "daemon/main.py"), "the same row as pass_started, from the "
                   "same thread, after the pass's last flush"),
    "write_batch": (("core/indexer.py", "sources/sql/"), "the reconcile at start, before the writer "
                    "thread exists, under the state dir lock; the SQL source's own meta keys "
                    "(full-load time, forgotten ids), which nothing else writes"),
    "reset_stats": (("core/indexer.py",), "the reconcile and rebuild at start, before the writer "
                    "thread exists"),
    "forget_source": (("core/indexer.py",), "a removed source's rows after its removals were "
                      "flushed by the writer; no pass of that source runs any more"),
}

#: Numbered migration steps; index i moves the schema from version i to i + 1.
MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1: the first release
    """
    CREATE TABLE documents (
        key                  TEXT PRIMARY KEY,
        source               TEXT NOT NULL,
        status               TEXT NOT NULL,      -- indexed | skipped | error
        reason               TEXT,               -- last decision or skip reason (a fixed word)
        detail               TEXT,               -- human text for errors and skips
        title                TEXT,
        media_type           TEXT,
        size                 INTEGER,
        mtime_ns             INTEGER,            -- files: stat mtime in ns at the last verdict
        last_modified        TEXT,               -- the resolved date (ISO UTC)
        date_source          TEXT,               -- meta:<name> | header | mtime | column | sitemap | fallback
        date_notes           TEXT,               -- why each date candidate was taken or dropped
        etag                 TEXT,               -- web: ETag as received
        last_modified_header TEXT,               -- web: Last-Modified exactly as received
        content_hash         TEXT,
        indexed_at           TEXT,
        checked_at           TEXT,
        decided_at           TEXT
    );
    CREATE INDEX documents_source ON documents(source, key);
    CREATE INDEX documents_last_modified ON documents(last_modified);
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT
    );
    CREATE TABLE source_runs (
        source      TEXT PRIMARY KEY,
        kind        TEXT NOT NULL,
        started_at  TEXT,
        finished_at TEXT,
        counts      TEXT                         -- JSON of the pass summary
    );
    """,
    # 1 -> 2: the status-change time of files whose last verdict was an error, so that fixing a
    # permission (which changes ctime, not mtime) makes the next pass retry them
    """
    ALTER TABLE documents ADD COLUMN ctime_ns INTEGER;
    """,
    # 2 -> 3: the web crawler's frontier and seen set (so a crawl resumes after a restart), with
    # what each URL taught us: where it led (doc_key), its links at the last parse (followed again
    # on a 304), its sitemap date, and its run of 404s and failures
    """
    CREATE TABLE crawl (
        source          TEXT NOT NULL,
        url             TEXT NOT NULL,           -- canonical URL as requested
        pass_id         INTEGER NOT NULL,        -- the pass the state below belongs to
        state           TEXT NOT NULL,           -- queued | done
        hops            INTEGER NOT NULL,        -- links followed from a seed
        seed_depth      INTEGER NOT NULL,        -- path depth of that seed (LCWA +N / -N)
        seq             INTEGER NOT NULL,        -- discovery order within the pass
        via             TEXT NOT NULL,           -- seed | link | sitemap | sitemapfile | recheck | redirect
        origin          TEXT,                    -- redirect hops: the URL first requested
        redirects       INTEGER NOT NULL DEFAULT 0,
        doc_key         TEXT,                    -- the document key it resolved to
        links           TEXT,                    -- JSON list of canonical outlinks at the last parse
        sitemap_lastmod TEXT,
        gone_count      INTEGER NOT NULL DEFAULT 0,  -- consecutive 404/410 answers
        fail_count      INTEGER NOT NULL DEFAULT 0,  -- consecutive 5xx / timeouts / connection errors
        last_status     INTEGER,
        last_outcome    TEXT,
        checked_at      TEXT,
        PRIMARY KEY (source, url)
    );
    CREATE INDEX crawl_pass ON crawl(source, pass_id, state);
    """,
    # 3 -> 4: look documents up by content hash (a web page with the bytes of another page of
    # its host is that page's alias, not a document of its own)
    """
    CREATE INDEX documents_hash ON documents(source, content_hash);
    """,
    # 4 -> 5: files: the inode number at the last verdict.  From this version ``ctime_ns`` is
    # kept for every file verdict, not only errors, so a rewrite that keeps size and mtime is seen
    # (see indexerd.sources.files.scan).  Old rows keep NULL in both: the next scan records them as they are,
    # without reading the file
    """
    ALTER TABLE documents ADD COLUMN ino INTEGER;
    """,
    # 5 -> 6: adaptive recrawl: each URL's learnt interval, when it is next due and why, and the
    # sitemap's changefreq hint (NULL: never scheduled, due at the next pass)
    """
    ALTER TABLE crawl ADD COLUMN recrawl_seconds REAL;
    ALTER TABLE crawl ADD COLUMN due_at TEXT;
    ALTER TABLE crawl ADD COLUMN due_reason TEXT;
    ALTER TABLE crawl ADD COLUMN changefreq TEXT;
    """,
    # 6 -> 7: per source, the end of its last completed pass (a web or SQL source runs at start
    # only when its interval since then is due) and the start of a pass that has not ended (it was
    # interrupted: it resumes at start); a pass recorded before counts as completed
    """
    ALTER TABLE source_runs ADD COLUMN completed_at TEXT;
    ALTER TABLE source_runs ADD COLUMN running_since TEXT;
    UPDATE source_runs SET completed_at = finished_at;
    """,
    # 7 -> 8: the scan's change test reads every row of a tree (stat_map) from one covering index
    # instead of a row lookup per document; it still serves key ranges by source (its prefix is
    # the index it replaces)
    """
    DROP INDEX documents_source;
    CREATE INDEX documents_source ON documents(source, key, mtime_ns, size, ctime_ns, ino, reason);
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


def to_db_time(dt: datetime | None) -> str | None:
    """Aware datetime -> ``'2001-09-09T01:46:40.000000Z'``; None stays None.

    Raises:
        ValueError: for a naive datetime (never store a time without a zone).
    """
    if dt is None:
        return None
    if dt.tzinfo is None:
        raise ValueError("naive datetime given to the state store")
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def from_db_time(s: str | None) -> datetime | None:
    """Inverse of :func:`to_db_time`: aware UTC or None."""
    if not s:
        return None
    return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(UTC)


@dataclass
class DocumentRecord:
    """One document's row.  Times are aware UTC; ``None`` means unknown or not applicable."""

    key: str
    source: str
    status: str = "indexed"
    reason: str | None = None
    detail: str | None = None
    title: str | None = None
    media_type: str | None = None
    size: int | None = None
    mtime_ns: int | None = None
    last_modified: datetime | None = None
    date_source: str | None = None
    date_notes: str | None = None
    etag: str | None = None
    last_modified_header: str | None = None
    content_hash: str | None = None
    indexed_at: datetime | None = None
    checked_at: datetime | None = None
    decided_at: datetime | None = None
    ctime_ns: int | None = None
    ino: int | None = None


_COLUMNS = tuple(f.name for f in fields(DocumentRecord))
_TIME_COLUMNS = frozenset({"last_modified", "indexed_at", "checked_at", "decided_at"})
_UPSERT = (f"INSERT INTO documents ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))}) "
           f"ON CONFLICT(key) DO UPDATE SET " + ", ".join(f"{c}=excluded.{c}" for c in _COLUMNS[1:]))


def _row_to_record(row: sqlite3.Row) -> DocumentRecord:
    values = {c: (from_db_time(row[c]) if c in _TIME_COLUMNS else row[c]) for c in _COLUMNS}
    return DocumentRecord(**values)


def _db_text(value):
    """``value``, with any lone surrogate (a file name that is not UTF-8, decoded with
    ``surrogateescape``, quoted in a message or title) written as ``\\udcXX``: SQLite stores
    UTF-8, and one such string made the whole batch, and the writer thread, fail."""
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _record_to_row(rec: DocumentRecord) -> tuple:
    return tuple(to_db_time(getattr(rec, c)) if c in _TIME_COLUMNS else _db_text(getattr(rec, c))
                 for c in _COLUMNS)


class Store:
    """The state store at ``<state_dir>/state.sqlite3``.

    One object per thread (sqlite3 connections are not shared across threads here); open as many
    as needed, WAL lets them coexist.  ``close()`` is safe to call twice.

    Raises (from the constructor):
        SchemaTooNew: the file was written by a newer indexerd.
        StoreError: the file cannot be opened or is not a database.
    """

    FILENAME = "state.sqlite3"

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        try:
            if readonly:
                if not self.path.exists():
                    raise StoreError(f"{self.path}: no state store yet (nothing has been indexed)")
                self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30,
                                           check_same_thread=False)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(self.path, timeout=30, check_same_thread=False,
                                           isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA busy_timeout = 30000")
            if not readonly:
                self._db.execute("PRAGMA journal_mode = WAL")
                self._db.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: cannot open the state store: {e}") from None
        self._lock = threading.Lock()

    @classmethod
    def in_dir(cls, state_dir: str | Path, *, readonly: bool = False) -> "Store":
        """Open the store file inside ``state_dir``."""
        return cls(Path(state_dir) / cls.FILENAME, readonly=readonly)

    # -- schema ---------------------------------------------------------------------------
    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(f"{self.path}: state store schema version {version} is newer than this "
                               f"indexerd understands ({SCHEMA_VERSION}); upgrade indexerd")
        if version == SCHEMA_VERSION:
            return
        if self.readonly:
            raise StoreError(f"{self.path}: state store needs migration; run `indexerd index` once")
        for step in range(version, SCHEMA_VERSION):
            # executescript commits any open transaction first, so the BEGIN goes in the script
            try:
                self._db.executescript(f"BEGIN IMMEDIATE;{MIGRATIONS[step]};"
                                       f"PRAGMA user_version = {step + 1};COMMIT;")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    @property
    def schema_version(self) -> int:
        return self._db.execute("PRAGMA user_version").fetchone()[0]

    # -- reads ----------------------------------------------------------------------------
    def get(self, key: str) -> DocumentRecord | None:
        """The record for ``key``, or None."""
        row = self._db.execute("SELECT * FROM documents WHERE key = ?", (key,)).fetchone()
        return _row_to_record(row) if row else None

    def stat_map(self, source: str) -> dict[str, tuple[int | None, int | None, int | None, int | None, str | None]]:
        """``{key: (mtime_ns, size, ctime_ns, ino, reason)}`` for every document of ``source``:
        the scan's change test (:meth:`indexerd.sources.files.scan.FileSource.unchanged`).  ``ctime_ns`` and
        ``ino`` are None on rows written before schema 5 (and ``ctime_ns`` 0 when the stat was
        taken too close to a change to be trusted)."""
        cur = self._db.execute("SELECT key, mtime_ns, size, ctime_ns, ino, reason FROM documents "
                               "WHERE source = ?", (source,))
        return {k: (m, s, c, i, r) for k, m, s, c, i, r in cur}

    def set_stat_baseline(self, rows: Iterable[tuple[int, int, str, int, int]]) -> None:
        """Record ``(ctime_ns, ino, key, mtime_ns, size)`` on rows that have no ctime yet (written
        before schema 5) and still hold that mtime and size, in one transaction; a row rewritten
        meanwhile is left alone."""
        self._exec_many("UPDATE documents SET ctime_ns = ?, ino = ? WHERE key = ? AND mtime_ns = ? "
                        "AND size = ? AND ctime_ns IS NULL", rows)

    def keys(self, source: str | None = None, status: str | None = None) -> set[str]:
        """Every key (of one source / with one status when given)."""
        sql, args = "SELECT key FROM documents WHERE 1=1", []
        if source is not None:
            sql += " AND source = ?"
            args.append(source)
        if status is not None:
            sql += " AND status = ?"
            args.append(status)
        return {r[0] for r in self._db.execute(sql, args)}

    def indexed_with_hash(self, source: str, content_hash: str) -> list[str]:
        """Keys of the indexed documents of ``source`` whose content hash is ``content_hash``."""
        cur = self._db.execute("SELECT key FROM documents WHERE source = ? AND content_hash = ? "
                               "AND status = 'indexed' ORDER BY key", (source, content_hash))
        return [r[0] for r in cur]

    def keys_with_prefix(self, source: str, prefix: str) -> set[str]:
        """Keys of ``source`` that start with ``prefix`` (every document below a directory)."""
        hi = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        cur = self._db.execute("SELECT key FROM documents WHERE source = ? AND key >= ? AND key < ?",
                               (source, prefix, hi))
        return {r[0] for r in cur}

    def iter_records(self, *, source: str | None = None, lm_from: datetime | None = None,
                     lm_to: datetime | None = None, order: str = "key") -> Iterator[DocumentRecord]:
        """Records, optionally of one source and with ``lm_from <= last_modified < lm_to``."""
        sql, args = "SELECT * FROM documents WHERE 1=1", []
        if source is not None:
            sql += " AND source = ?"
            args.append(source)
        if lm_from is not None:
            sql += " AND last_modified >= ?"
            args.append(to_db_time(lm_from))
        if lm_to is not None:
            sql += " AND last_modified < ?"
            args.append(to_db_time(lm_to))
        sql += " ORDER BY " + {"key": "key", "last_modified": "last_modified DESC, key"}[order]
        for row in self._db.execute(sql, args):
            yield _row_to_record(row)

    def counts_by_source(self) -> dict[str, dict[str, int]]:
        """``{source: {status: n}}``."""
        out: dict[str, dict[str, int]] = {}
        for src, status, n in self._db.execute(
                "SELECT source, status, count(*) FROM documents GROUP BY source, status"):
            out.setdefault(src, {})[status] = n
        return out

    def media_types(self) -> list[str]:
        """The media types of indexed documents, sorted."""
        return [mt for (mt,) in self._db.execute(
            "SELECT DISTINCT media_type FROM documents WHERE status = 'indexed' AND media_type IS NOT NULL "
            "ORDER BY media_type")]

    def source_runs(self) -> dict[str, dict]:
        """Last run of each source: ``{source: {kind, started_at, finished_at, counts, completed_at,
        running_since}}`` (aware UTC or None; ``running_since`` set: a pass started and never
        ended, it was interrupted)."""
        import json

        out = {}
        for row in self._db.execute("SELECT * FROM source_runs"):
            out[row["source"]] = {"kind": row["kind"], "started_at": from_db_time(row["started_at"]),
                                  "finished_at": from_db_time(row["finished_at"]),
                                  "counts": json.loads(row["counts"] or "{}"),
                                  "completed_at": from_db_time(row["completed_at"]),
                                  "running_since": from_db_time(row["running_since"])}
        return out

    def known_sources(self) -> set[str]:
        """Every source name the store holds anything of (documents, crawl rows, run records)."""
        cur = self._db.execute("SELECT source FROM documents UNION SELECT source FROM crawl "
                               "UNION SELECT source FROM source_runs")
        return {r[0] for r in cur}

    # -- writes ---------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """A value from the ``meta`` table (e.g. ``index_generation``), or None."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def write_batch(self, upserts: Iterable[DocumentRecord], deletes: Iterable[str] = (),
                    meta: dict[str, str] | None = None) -> None:
        """Apply upserts, deletions and ``meta`` values in one transaction (all or nothing).

        Raises:
            ValueError: a record holds a naive datetime (checked before anything is written).
            StoreError: the transaction failed (disk full, read-only file system); nothing of
                the batch was written.
        """
        rows = [_record_to_row(r) for r in upserts]  # ValueError (naive time) before any write
        self._transaction([(_UPSERT, rows),
                           ("DELETE FROM documents WHERE key = ?", [(k,) for k in deletes]),
                           ("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", list((meta or {}).items()))])

    # -- the crawl frontier (web sources) ----------------------------------------------------
    #: The crawl columns kept in memory during a pass; ``links`` (JSON, kilobytes per page) is
    #: read only when a 304 needs it (:meth:`crawl_links`).
    CRAWL_COLUMNS = ("url", "pass_id", "state", "hops", "seed_depth", "seq", "via", "origin", "redirects",
                     "doc_key", "sitemap_lastmod", "gone_count", "fail_count", "last_status",
                     "last_outcome", "checked_at", "recrawl_seconds", "due_at", "due_reason", "changefreq")

    def crawl_rows(self, source: str) -> dict[str, dict]:
        """Every crawl row of ``source`` as ``{url: {column: value}}`` (without ``links``),
        except the frontier's overflow on disk (state ``spilled``: :meth:`crawl_spilled`)."""
        cur = self._db.execute(f"SELECT {', '.join(self.CRAWL_COLUMNS)} FROM crawl WHERE source = ? "
                               "AND state != 'spilled'", (source,))
        return {r["url"]: dict(r) for r in cur}

    def crawl_spilled(self, source: str, pass_id: int, limit: int) -> list[dict]:
        """At most ``limit`` rows of the frontier's overflow on disk (state ``spilled``) of pass
        ``pass_id``, best first (fewest hops, then discovery order)."""
        cur = self._db.execute(f"SELECT {', '.join(self.CRAWL_COLUMNS)} FROM crawl WHERE source = ? "
                               "AND state = 'spilled' AND pass_id = ? ORDER BY hops, seq LIMIT ?",
                               (source, pass_id, limit))
        return [dict(r) for r in cur]

    def crawl_drop_spilled(self, source: str) -> None:
        """Forget the frontier's overflow on disk of ``source`` (a pass finished or began)."""
        self._exec_many("DELETE FROM crawl WHERE source = ? AND state = 'spilled'", [(source,)])

    def crawl_links(self, source: str, url: str) -> str | None:
        """The JSON list of outlinks stored for ``url`` at its last parse, or None."""
        row = self._db.execute("SELECT links FROM crawl WHERE source = ? AND url = ?", (source, url)).fetchone()
        return row[0] if row is not None else None

    def crawl_write(self, source: str, rows: Iterable[dict], deletes: Iterable[str] = (),
                    meta: dict[str, str] | None = None, links: dict[str, str | None] | None = None) -> None:
        """Upsert crawl rows (dicts with every column of :attr:`CRAWL_COLUMNS`), set the
        ``links`` of the URLs in ``links``, delete URLs and set meta keys, in one transaction.
        A row's stored ``links`` are kept unless ``links`` names its URL."""
        cols = ("source",) + self.CRAWL_COLUMNS
        updates = ", ".join(f"{c} = excluded.{c}" for c in self.CRAWL_COLUMNS if c != "url")
        sql = (f"INSERT INTO crawl({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
               f"ON CONFLICT(source, url) DO UPDATE SET {updates}")
        self._transaction([
            (sql, [(source,) + tuple(r[c] for c in self.CRAWL_COLUMNS) for r in rows]),
            ("UPDATE crawl SET links = ? WHERE source = ? AND url = ?",
             [(v, source, u) for u, v in (links or {}).items()]),
            ("DELETE FROM crawl WHERE source = ? AND url = ?", [(source, u) for u in deletes]),
            ("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", list((meta or {}).items()))])

    def crawl_row(self, url: str) -> dict | None:
        """The crawl row of ``url`` (any web source; the first by source name), or None."""
        row = self._db.execute(f"SELECT source, {', '.join(self.CRAWL_COLUMNS)} FROM crawl WHERE url = ? "
                               "ORDER BY source LIMIT 1", (url,)).fetchone()
        return dict(row) if row is not None else None

    def crawl_due_now(self, source: str, key: str, reason: str) -> None:
        """Make the page indexed under ``key`` (its crawl row's URL, or a redirect's target
        ``doc_key``) due at the next pass of ``source``: its adaptive-recrawl ``due_at`` is
        cleared (None is due: :func:`indexerd.sources.web.recrawl.is_due`), its learnt interval kept."""
        self._exec_many("UPDATE crawl SET due_at = NULL, due_reason = ? "
                        "WHERE source = ? AND (url = ? OR doc_key = ?)", [(reason, source, key, key)])

    def forget_source(self, source: str) -> None:
        """Forget everything but the document rows of a removed source, in one transaction: its
        frontier and seen set, its run record, and its ``sql:<source>:`` / ``web:<source>:`` meta
        values (a SQL source's full-load mark).  Document rows go through the writer first."""
        prefixes = [(p, len(p), p) for p in (f"sql:{source}:", f"web:{source}:")]
        self._transaction([("DELETE FROM crawl WHERE source = ?", [(source,)]),
                           ("DELETE FROM source_runs WHERE source = ?", [(source,)]),
                           ("DELETE FROM meta WHERE substr(key, 1, ?) = ?", [(n, p) for p, n, _ in prefixes])])

    def reset_stats(self, keys: Iterable[str]) -> None:
        """Forget the stored stat and hash of ``keys`` so the next pass reads and re-indexes them."""
        self._exec_many("UPDATE documents SET mtime_ns = NULL, content_hash = NULL, "
                        "status = 'stale' WHERE key = ?", ((k,) for k in keys))

    def pass_started(self, source: str, kind: str, started_at: datetime) -> None:
        """Mark a pass of ``source`` as running (cleared by :meth:`record_run`; still set at the
        next start means it was interrupted)."""
        self._exec_many("INSERT INTO source_runs(source, kind, running_since) VALUES (?, ?, ?) "
                        "ON CONFLICT(source) DO UPDATE SET kind=excluded.kind, running_since=excluded.running_since",
                        [(source, kind, to_db_time(started_at))])

    def record_run(self, source: str, kind: str, started_at: datetime, finished_at: datetime | None,
                   counts: dict, *, completed: bool = True) -> None:
        """Remember the last pass of a source (for ``ctl status``) and clear its running mark;
        ``completed`` (it ran to its end and did not fail) also makes ``finished_at`` the time
        the next interval counts from."""
        import json

        self._exec_many("INSERT INTO source_runs(source, kind, started_at, finished_at, counts, completed_at) "
                        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(source) DO UPDATE SET kind=excluded.kind, "
                        "started_at=excluded.started_at, finished_at=excluded.finished_at, "
                        "counts=excluded.counts, running_since=NULL, "
                        "completed_at=coalesce(excluded.completed_at, completed_at)",
                        [(source, kind, to_db_time(started_at), to_db_time(finished_at), json.dumps(counts),
                          to_db_time(finished_at) if completed else None)])

    def _exec_many(self, sql: str, rows: Iterable[tuple]) -> None:
        self._transaction([(sql, list(rows))])

    def _transaction(self, steps: list[tuple[str, list[tuple]]]) -> None:
        """Run ``executemany`` steps in one write transaction; roll back on any error.

        Raises:
            StoreError: naming the store file and SQLite's reason.
        """
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                for sql, rows in steps:
                    if rows:
                        self._db.executemany(sql, rows)
                self._db.execute("COMMIT")
            except sqlite3.Error as e:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise StoreError(f"{self.path}: write failed: {e}") from None

    def close(self) -> None:
        """Close the connection; safe to call twice."""
        db, self._db = getattr(self, "_db", None), None
        if db is not None:
            db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
