"""The PostgreSQL engine's write session: one transaction on a connection of its own.

Writes are buffered per key (the last write of a key wins, whatever came before it in the
session) and sent every :data:`FLUSH_DOCS` documents or :data:`FLUSH_BYTES` of text inside the
session's transaction, so nothing is visible to searchers before :meth:`PgSession.commit`.  A
flush sends one ``DELETE ... WHERE key_hash = ANY(...)`` and one ``INSERT ... SELECT FROM
unnest(...) ON CONFLICT (key_hash) DO UPDATE``: writers of different keys (other nodes) never
wait on each other; rows are written in ``key_hash`` order, so two sessions writing the same
keys lock them in the same order (no deadlock).  The flush also adds the terms of its
documents that the ``terms`` table lacks (those this process has not written before:
:meth:`~.terms.RecordedTerms.unrecorded`).  The commit bumps the one ``commits`` row (the
commit token, and the live document count kept exact with the inserted and deleted rows the
flushes counted) as its last statement, so that row is held only for the ``COMMIT`` itself.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import psycopg
from psycopg import sql

from indexerd.core.errors import IndexUnavailable
from indexerd.index.base import IndexDoc
from indexerd.core.pgaddress import first_line as _first_line

from .documents import key_hash, row
from .schema import ROW_COLUMNS

log = logging.getLogger(__name__)

#: Buffered documents (updates and deletes) that trigger a flush inside the transaction.
FLUSH_DOCS = 500
#: Buffered characters of title and content that trigger a flush.
FLUSH_BYTES = 16 * 1024 * 1024
_ARRAY_TYPES = ("bytea", "text", "text", "bytea", "bytea", "text", "text", "timestamptz", "bigint", "text", "bytea")


def _upsert_sql(schema: str) -> sql.Composed:
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in ROW_COLUMNS)
    arrays = sql.SQL(", ").join(sql.SQL("%s::" + t + "[]") for t in _ARRAY_TYPES)
    picked = sql.SQL(", ").join(sql.SQL("u.tsv::tsvector") if c == "tsv" else sql.SQL("u.") + sql.Identifier(c)
                                for c in ROW_COLUMNS)
    updates = sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in ROW_COLUMNS[1:])
    return sql.SQL("INSERT INTO {s}.documents ({cols}) SELECT {picked} FROM unnest({arrays}) AS u({cols}) "
                   "ON CONFLICT (key_hash) DO UPDATE SET {updates} RETURNING (xmax = 0)").format(
        s=sql.Identifier(schema), cols=cols, picked=picked, arrays=arrays, updates=updates)


class PgSession:
    """A batch of writes in one transaction; nothing is visible until :meth:`commit`.

    Errors of the server (connection lost, a statement timeout, a value PostgreSQL refuses) are
    raised as :class:`OSError` by the call that sent the flush (:meth:`update`, :meth:`delete`
    or :meth:`commit`); the session must then be cancelled.  Not thread-safe: the writer thread
    uses it.
    """

    def __init__(self, index, conn: psycopg.Connection) -> None:
        self._index = index
        self._conn: psycopg.Connection | None = conn
        self._pending: dict[str, IndexDoc | None] = {}  # key -> the document, or None for a delete
        self._pending_chars = 0
        self._delta = 0        # live documents added minus removed by the flushes so far
        self._wrote = False
        self._sent_terms: set[str] = set()  # terms this session added to the terms table
        self._upsert = _upsert_sql(index.target.schema)
        self._delete = sql.SQL("DELETE FROM {}.documents WHERE key_hash = ANY(%s)").format(
            sql.Identifier(index.target.schema))
        self._terms = sql.SQL("INSERT INTO {0}.terms (term) SELECT u.t FROM unnest(%s::text[]) AS u(t) "
                              "WHERE NOT EXISTS (SELECT 1 FROM {0}.terms x WHERE left(x.term, 1) = left(u.t, 1) "
                              "AND length(x.term) = length(u.t) AND x.term = u.t)").format(
            sql.Identifier(index.target.schema))

    def _live(self) -> psycopg.Connection:
        if self._conn is None:
            raise IndexUnavailable(f"{self._index.where}: this index session has ended")
        return self._conn

    def update(self, doc) -> None:
        """Add ``doc`` (an :class:`~indexerd.index.IndexDoc`), replacing any document of its key.

        Raises:
            OSError: a flush this call made failed (see the class).
        """
        self._live()
        self._pending[doc.key] = doc
        self._pending_chars += len(doc.content) + len(doc.title)
        self._maybe_flush()

    def delete(self, key: str) -> None:
        """Delete the document ``key`` (committed or written earlier in this session)."""
        self._live()
        self._pending[key] = None
        self._maybe_flush()

    def delete_many(self, keys: Iterable[str]) -> None:
        """:meth:`delete` for every key (sent together with the other buffered writes)."""
        self._live()
        for k in keys:
            self._pending[k] = None
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if len(self._pending) >= FLUSH_DOCS or self._pending_chars >= FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        """Send the buffered writes inside the transaction."""
        if not self._pending:
            return
        conn = self._live()
        pending, self._pending, self._pending_chars = self._pending, {}, 0
        deletes = sorted(key_hash(k) for k, d in pending.items() if d is None)
        docs = [d for d in pending.values() if d is not None]
        a = self._index.analyzer
        rows: list[tuple] = []
        truncated = 0
        terms: set[str] = set()
        for d in docs:
            t, c = a.analyse(d.title), a.analyse(d.content)
            values, cut = row(d, (t, c, a.tokens(d.headings) if d.headings else []))
            rows.append(values)
            truncated += cut
            terms.update(t.tokens)
            terms.update(c.tokens)
        rows.sort(key=lambda r: r[0])
        new_terms = self._index.recorded_terms.unrecorded(terms)
        try:
            if deletes:
                self._delta -= conn.execute(self._delete, (deletes,)).rowcount
            if rows:
                cur = conn.execute(self._upsert, [list(col) for col in zip(*rows)])
                self._delta += sum(1 for (inserted,) in cur.fetchall() if inserted)
            if new_terms:
                conn.execute(self._terms, (new_terms,))
                self._sent_terms.update(new_terms)
        except psycopg.Error as e:
            raise OSError(f"{self._index.where}: writing {len(pending)} documents failed: {_first_line(e)}") from None
        self._wrote = True
        if truncated:
            log.info("%s: %d documents exceeded PostgreSQL's tsvector limits; their tail is only "
                     "partly searchable", self._index.where, truncated)

    def commit(self, *, merge: bool) -> str:
        """Make the session's writes searchable and durable, end the session; returns the new
        commit token (the ``commits`` counter; unchanged when the session wrote nothing).

        ``merge`` is the protocol's: PostgreSQL has no segments (see :meth:`~.engine.PgIndex.maintain`).

        Raises:
            OSError: a write or the commit failed (connection lost, statement timeout); no
                write of the session is kept.
        """
        conn = self._live()
        try:
            self._flush()
            if not self._wrote:
                conn.rollback()
                return self._index.commit_token()
            q = sql.SQL("UPDATE {}.commits SET n = n + 1, documents = documents + %s, "
                        "committed_at = now() RETURNING n").format(sql.Identifier(self._index.target.schema))
            counted = conn.execute(q, (self._delta,)).fetchone()
            assert counted is not None  # UPDATE ... RETURNING of the one commits row
            n = counted[0]
            conn.commit()
            self._index.recorded_terms.remember(self._sent_terms)
            return str(n)
        except psycopg.Error as e:
            raise OSError(f"{self._index.where}: commit failed: {_first_line(e)}") from None
        finally:
            self._end()

    def full(self) -> bool:
        """Never: this engine's writes wait nowhere unbounded (the protocol's ``full``)."""
        return False

    def cancel(self) -> None:
        """Drop every write of the session (the transaction is rolled back) and end it."""
        self._pending.clear()
        self._pending_chars = 0
        if self._conn is not None:
            try:
                self._conn.rollback()
            except psycopg.Error as e:  # a broken connection: nothing was committed anyway
                log.warning("%s: cancelling the index session: %s", self._index.where, _first_line(e))
            self._end()

    def _end(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass
