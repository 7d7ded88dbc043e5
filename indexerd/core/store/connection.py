"""What every state store connection offers the row kinds: reads through ``_db``, write
transactions, the ``meta`` table, closing.

The row kinds (:mod:`.documents`, :mod:`.crawl`, :mod:`.runs`, :mod:`.cluster`) build on
:class:`StoreConnection` and write portable SQL: ``?`` placeholders (so no ``?`` in any SQL text but those), ``INSERT ... ON CONFLICT
DO UPDATE`` (SQLite 3.24+ and PostgreSQL 9.5+), no engine-specific functions.  The two
connections are :class:`~.sqlite.SqliteConnection` (the default, one file in the state dir) and
:class:`~.postgresql.PgConnection` (a schema on a PostgreSQL server, shared by several nodes).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Self

__all__ = ["META_UPSERT", "StoreConnection"]

#: Set one ``meta`` value (both stores).
META_UPSERT = "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"


class StoreConnection:
    """The base of both store connections.

    ``_db.execute(sql, args)`` returns a cursor: iterable, ``fetchone()``; its rows can be
    unpacked like tuples and read by column name (``row["key"]``, ``dict(row)``).

    Attributes:
        where: the store as messages name it (the file, or the masked URL and schema).
        shared: True when several nodes may use this store at once (PostgreSQL).
        readonly: opened for reading only.
    """

    where: str = "state store"
    shared: bool = False
    readonly: bool = False
    _db: Any = None
    #: the PostgreSQL connection's lock (statements of several threads, one at a time)
    _lock: Any = None
    #: the ``crawl`` table's columns (:class:`~indexerd.core.store.crawl.CrawlRows`)
    CRAWL_COLUMNS: tuple[str, ...] = ()

    @property
    def schema_version(self) -> int:
        """The store's schema version: its connection's ``SCHEMA_VERSION`` once open."""
        raise NotImplementedError

    def _tuples(self, sql: str, args=()) -> list[tuple]:
        """All the rows of one read as plain tuples (read by position only)."""
        return [tuple(r) for r in self._db.execute(sql, args).fetchall()]

    def _stream(self, sql: str, args=()):
        """The rows of one read, fetched as they are iterated rather than all at once (a report
        over millions of rows); the connection runs nothing else until the iteration ends."""
        return self._db.execute(sql, args)

    def get_meta(self, key: str) -> str | None:
        """A value from the ``meta`` table (e.g. ``index_generation``), or None."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _exec_many(self, sql: str, rows: Iterable[tuple]) -> None:
        self._transaction([(sql, list(rows))])

    def _transaction(self, steps: list[tuple[str, list[tuple]]]) -> None:
        """Run ``executemany`` steps in one write transaction; roll back on any error.

        Raises:
            StoreError: naming the store and the database's reason.
        """
        raise NotImplementedError

    def _read_then_write(self, steps: Callable[[Callable[[str, tuple], list]], list[tuple[str, list[tuple]]]],
                         returned: list | None = None) -> None:
        """A write transaction whose steps depend on a read in it, ``returned`` receiving what
        its ``RETURNING`` steps returned (PostgreSQL only:
        :meth:`~indexerd.core.store.postgresql.PgConnection._read_then_write`)."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the connection; safe to call twice."""
        db, self._db = self._db, None
        if db is not None:
            db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
