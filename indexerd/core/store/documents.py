"""Document rows: one per document key, the verdict, the date and why, the stat and hash.

The writer thread (:mod:`indexerd.pipeline.writer`) writes them (:meth:`DocumentRows.write_batch`);
the sources and ``ctl`` read them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Iterable, Iterator

from indexerd.core.store.connection import META_UPSERT, StoreConnection
from indexerd.core.store.values import db_text, from_db_time, prefix_range, to_db_time

__all__ = ["DocumentRecord", "DocumentRows", "STAT_CHUNK"]

#: Rows read per query by the chunked reads (:meth:`DocumentRows.stat_rows`, :meth:`DocumentRows.iter_keys`).
STAT_CHUNK = 2000


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


_INSERT_NEW = (f"INSERT INTO documents ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))}) "
               f"ON CONFLICT(key) DO NOTHING")


def _row_to_record(row) -> DocumentRecord:
    values: dict[str, Any] = {c: (from_db_time(row[c]) if c in _TIME_COLUMNS else row[c]) for c in _COLUMNS}
    return DocumentRecord(**values)


def _key_filter(source: str | None, status: str | None) -> tuple[str, list[str]]:
    """The ``" AND ..."`` conditions (empty: none) and their arguments that keep the rows of
    ``source`` and with ``status``, each when given."""
    where, args = "", []
    if source is not None:
        where += " AND source = ?"
        args.append(source)
    if status is not None:
        where += " AND status = ?"
        args.append(status)
    return where, args


def _record_to_row(rec: DocumentRecord) -> tuple:
    return tuple(to_db_time(getattr(rec, c)) if c in _TIME_COLUMNS else db_text(getattr(rec, c))
                 for c in _COLUMNS)



class DocumentRows(StoreConnection):
    """The ``documents`` table: reads by key, source, prefix, hash and date; batched writes."""

    def get(self, key: str) -> DocumentRecord | None:
        """The record for ``key``, or None."""
        row = self._db.execute("SELECT * FROM documents WHERE key = ?", (key,)).fetchone()
        return _row_to_record(row) if row else None

    def stat_rows(self, source: str, prefix: str | None = None, *,
                  chunk: int | None = None) -> Iterator[tuple[str, int | None, int | None, int | None, int | None, str | None]]:
        """``(key, mtime_ns, size, ctime_ns, ino, reason)`` of every document of ``source`` (whose
        key starts with ``prefix`` when given) in ascending key order, read ``chunk`` rows at a
        time by key (keyset pagination on the ``(source, key, ...)`` index: each chunk is one
        whole query, so no cursor stays open and the connection is free between chunks).  The
        reconcile merges them with the walk (:meth:`indexerd.sources.files.scan.FileSource.scan`):
        its change test (:func:`indexerd.sources.files.change.unchanged`).  ``ctime_ns`` and
        ``ino`` are None on rows written before schema 5 (and ``ctime_ns`` 0 when the stat was
        taken too close to a change to be trusted).  A row written behind the last key read is
        not seen; one written ahead of it is."""
        chunk = chunk or STAT_CHUNK
        lo, hi = prefix_range(prefix) if prefix else ("", None)
        op = ">="
        while True:
            sql = ("SELECT key, mtime_ns, size, ctime_ns, ino, reason FROM documents "
                   f"WHERE source = ? AND key {op} ?" + (" AND key < ?" if hi is not None else "") +
                   " ORDER BY key LIMIT ?")
            args = (source, lo) + ((hi,) if hi is not None else ()) + (chunk,)
            rows = self._tuples(sql, args)
            yield from rows
            if len(rows) < chunk:
                return
            lo, op = rows[-1][0], ">"

    def iter_keys(self, source: str | None = None, status: str | None = None, *,
                  chunk: int | None = None) -> Iterator[str]:
        """Every key (of one source / with one status when given) in ascending order, read
        ``chunk`` at a time by key as :meth:`stat_rows`: the streamed form of :meth:`keys`."""
        chunk = chunk or STAT_CHUNK
        where, args = _key_filter(source, status)
        last, op = "", ">="
        while True:
            rows = self._db.execute(f"SELECT key FROM documents WHERE key {op} ?{where} ORDER BY key LIMIT ?",
                                    [last, *args, chunk]).fetchall()
            yield from (r[0] for r in rows)
            if len(rows) < chunk:
                return
            last, op = rows[-1][0], ">"

    def set_stat_baseline(self, rows: Iterable[tuple[int, int, str, int, int]]) -> None:
        """Record ``(ctime_ns, ino, key, mtime_ns, size)`` on rows that have no ctime yet (written
        before schema 5) and still hold that mtime and size, in one transaction; a row rewritten
        meanwhile is left alone."""
        self._exec_many("UPDATE documents SET ctime_ns = ?, ino = ? WHERE key = ? AND mtime_ns = ? "
                        "AND size = ? AND ctime_ns IS NULL", rows)

    def keys(self, source: str | None = None, status: str | None = None) -> set[str]:
        """Every key (of one source / with one status when given)."""
        where, args = _key_filter(source, status)
        return {r[0] for r in self._db.execute(f"SELECT key FROM documents WHERE 1=1{where}", args)}

    def existing_keys(self, keys: Iterable[str], *, chunk: int = 500) -> set[str]:
        """Those of ``keys`` that have a row, looked up ``chunk`` at a time."""
        keys = list(keys)
        found: set[str] = set()
        for i in range(0, len(keys), chunk):
            part = keys[i:i + chunk]
            sql = f"SELECT key FROM documents WHERE key IN ({', '.join('?' * len(part))})"
            found.update(r[0] for r in self._db.execute(sql, part).fetchall())
        return found

    def content_hashes(self, keys: Iterable[str], *, chunk: int = 500) -> dict[str, str]:
        """``{key: content hash}`` of those of ``keys`` that are indexed with a recorded hash,
        looked up ``chunk`` at a time."""
        keys = list(keys)
        out: dict[str, str] = {}
        for i in range(0, len(keys), chunk):
            part = keys[i:i + chunk]
            sql = (f"SELECT key, content_hash FROM documents WHERE key IN ({', '.join('?' * len(part))}) "
                   f"AND status = 'indexed' AND content_hash IS NOT NULL")
            out.update((r[0], r[1]) for r in self._db.execute(sql, part).fetchall())
        return out

    def count_documents(self) -> int:
        """How many rows the store holds (every source, every status)."""
        return self._db.execute("SELECT count(*) FROM documents").fetchone()[0]

    def indexed_with_hash(self, source: str, content_hash: str) -> list[str]:
        """Keys of the indexed documents of ``source`` whose content hash is ``content_hash``."""
        # sorted here: an ORDER BY key lets SQLite's planner walk the whole source in key order
        # (documents_source) instead of looking the hash up (documents_hash)
        cur = self._db.execute("SELECT key FROM documents WHERE source = ? AND content_hash = ? "
                               "AND status = 'indexed'", (source, content_hash))
        return sorted(r[0] for r in cur)

    def keys_with_prefix(self, source: str, prefix: str) -> set[str]:
        """Keys of ``source`` that start with ``prefix`` (every document below a directory)."""
        cur = self._db.execute("SELECT key FROM documents WHERE source = ? AND key >= ? AND key < ?",
                               (source, *prefix_range(prefix)))
        return {r[0] for r in cur}

    def iter_records(self, *, source: str | None = None, lm_from: datetime | None = None,
                     lm_to: datetime | None = None, order: str = "key") -> Iterator[DocumentRecord]:
        """Records, optionally of one source and with ``lm_from <= last_modified < lm_to``."""
        sql = "SELECT * FROM documents WHERE 1=1"
        args: list[str | None] = []
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
        for row in self._stream(sql, args):
            yield _row_to_record(row)

    #: Rows of ``document_counts`` past which :meth:`counts_by_source` folds them into one per
    #: (source, status) (PostgreSQL appends a row per statement; SQLite keeps one per pair).
    COUNT_ROWS_FOLD = 1000

    def counts_by_source(self) -> dict[str, dict[str, int]]:
        """``{source: {status: n}}``, from the counts the store keeps as document rows change
        (``document_counts``, kept by triggers): the cost is the number of sources and
        statuses, not of documents."""
        out: dict[str, dict[str, int]] = {}
        rows = self._db.execute("SELECT source, status, sum(n), count(*) FROM document_counts "
                                "GROUP BY source, status").fetchall()
        for src, status, n, _ in rows:
            if n:
                out.setdefault(src, {})[status] = int(n)
        if sum(r[3] for r in rows) > self.COUNT_ROWS_FOLD:
            self._fold_document_counts()
        return out

    def _fold_document_counts(self) -> None:
        """Fold the appended count rows into one per (source, status) (PostgreSQL's)."""

    def media_types(self) -> list[str]:
        """The media types of indexed documents, sorted."""
        return [mt for (mt,) in self._db.execute(
            "SELECT DISTINCT media_type FROM documents WHERE status = 'indexed' AND media_type IS NOT NULL "
            "ORDER BY media_type")]

    def write_batch(self, upserts: Iterable[DocumentRecord], deletes: Iterable[str] = (),
                    meta: dict[str, str] | None = None, *, only_new: bool = False) -> None:
        """Apply upserts, deletions and ``meta`` values in one transaction (all or nothing).
        ``only_new``: a record whose key has a row already leaves that row as it is.

        Raises:
            ValueError: a record holds a naive datetime (checked before anything is written).
            StoreError: the transaction failed (disk full, read-only file system); nothing of
                the batch was written.
        """
        rows = [_record_to_row(r) for r in upserts]  # ValueError (naive time) before any write
        self._transaction([(_INSERT_NEW if only_new else _UPSERT, rows),
                           ("DELETE FROM documents WHERE key = ?", [(k,) for k in deletes]),
                           (META_UPSERT, list((meta or {}).items()))])

    def reset_every_stat(self) -> None:
        """:meth:`reset_stats` of every row in one statement: every document is read and
        indexed again by the next pass of its source (the index is rebuilt)."""
        self._exec_many("UPDATE documents SET mtime_ns = NULL, content_hash = NULL, status = 'stale'", [()])

    def reset_stats(self, keys: Iterable[str]) -> None:
        """Forget the stored stat and hash of ``keys`` so the next pass reads and re-indexes them."""
        self._exec_many("UPDATE documents SET mtime_ns = NULL, content_hash = NULL, "
                        "status = 'stale' WHERE key = ?", ((k,) for k in keys))
