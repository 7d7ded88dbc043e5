"""The PostgreSQL engine's tables, their creation and the check of who wrote them.

In the configured schema (``[index.postgresql] schema``, default ``indexerd``):

- ``documents``: one row per live document, keyed by ``key_hash`` (SHA-256 of the key: a key
  may exceed what a B-tree entry holds); ``key``, ``source``, ``media_type``, ``date_source``
  as text; ``title`` and ``path`` as UTF-8 bytes with surrogate escapes (a file name that is not
  UTF-8 comes back as it went in); ``last_modified`` ``timestamptz``; ``size`` bytes; ``tsv``
  the ``tsvector`` of :mod:`.documents` with a GIN index; ``body`` the snippet text (TOAST
  compresses it).  B-tree indexes on ``last_modified`` (date sort, since/until) and ``source``;
- ``terms``: the title and content tokens (stems) written so far, one row per term and writer
  that first wrote it (a term two nodes write at once may appear twice: no unique constraint, so
  no writer waits on another), for "did you mean" (:meth:`~.engine.PgIndex.similar_terms`),
  which counts a candidate's live documents through the ``tsv`` index; a term whose documents
  are all gone stays (it counts 0).  Its B-tree is on ``(left(term, 1), length(term), term)``;
- ``commits``: one row: ``n``, the commit counter (the commit token), ``documents``, the live
  count kept exact by every commit, and ``committed_at``;
- ``meta``: who wrote the index: ``engine``, ``analysis`` (:data:`~indexerd.index.base.ANALYSIS_VERSION`)
  and ``format`` (:data:`~indexerd.index.postgresql.FORMAT_VERSION`).

Creation is idempotent (``CREATE ... IF NOT EXISTS`` under an advisory lock, so two nodes
starting at once do not race).  Tables written with another analysis or format are emptied and
marked anew by a writer (every node re-reads its sources: the state store's rebuild); a reader
refuses them.
"""

from __future__ import annotations

import logging

from psycopg import sql

from indexerd.core.errors import IndexUnavailable

log = logging.getLogger(__name__)

#: The columns a write gives, in :func:`~.documents.row`'s order.
ROW_COLUMNS = ("key_hash", "key", "source", "title", "path", "media_type", "date_source",
               "last_modified", "size", "tsv", "body")
#: The advisory lock key (``pg_advisory_xact_lock``) taken while the tables are created.
_DDL_LOCK = 0x1D3E_0001

_DDL = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.meta (name text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.commits (
    id int PRIMARY KEY CHECK (id = 1),
    n bigint NOT NULL,
    documents bigint NOT NULL,
    committed_at timestamptz NOT NULL);
INSERT INTO {s}.commits VALUES (1, 0, 0, now()) ON CONFLICT (id) DO NOTHING;
CREATE TABLE IF NOT EXISTS {s}.documents (
    key_hash bytea PRIMARY KEY,
    key text NOT NULL,
    source text NOT NULL,
    title bytea NOT NULL,
    path bytea,
    media_type text NOT NULL,
    date_source text NOT NULL,
    last_modified timestamptz NOT NULL,
    size bigint NOT NULL,
    tsv tsvector NOT NULL,
    body bytea NOT NULL);
CREATE INDEX IF NOT EXISTS documents_tsv ON {s}.documents USING gin (tsv);
CREATE INDEX IF NOT EXISTS documents_last_modified ON {s}.documents (last_modified);
CREATE INDEX IF NOT EXISTS documents_source ON {s}.documents (source);
"""

#: Tables added after the first format: created in every index that lacks them.
_DDL_ADDED = """
CREATE TABLE IF NOT EXISTS {s}.terms (term text NOT NULL);
CREATE INDEX IF NOT EXISTS terms_near ON {s}.terms (left(term, 1), length(term), term);
"""


def ident(schema: str) -> sql.Identifier:
    return sql.Identifier(schema)


def exists(conn, schema: str) -> bool:
    """True when ``schema`` holds this engine's tables."""
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
                        (f'"{schema}".commits', f'"{schema}".documents')).fetchone()[0]


def written_by(conn, schema: str) -> dict[str, str]:
    """The ``meta`` rows (``engine``, ``analysis``, ``format``)."""
    q = sql.SQL("SELECT name, value FROM {}.meta").format(ident(schema))
    return dict(conn.execute(q).fetchall())


def ensure(conn, schema: str, wanted: dict[str, str], *, create: bool, where: str) -> None:
    """Make ``schema`` hold the tables of an index written as ``wanted`` (``engine``,
    ``analysis``, ``format`` as text), in one transaction on ``conn`` (not autocommit).

    With ``create``: the tables are created when missing, and emptied and re-marked when they
    were written with another analysis or format (logged).  Without: nothing is changed.

    Raises:
        IndexUnavailable: no tables (``create`` False), or tables of another analysis or format
            (``create`` False); the message says to run ``indexerd index``.
    """
    with conn.transaction():
        if not create:
            if not exists(conn, schema):
                raise IndexUnavailable(f"{where}: no index yet (run `indexerd index` first)")
            found = written_by(conn, schema)
            if found != wanted:
                raise IndexUnavailable(f"{where}: the index was written as {found} and this indexerd "
                                       f"writes {wanted}; run `indexerd index` to rebuild it")
            return
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK,))
        s = ident(schema)
        if not exists(conn, schema):
            conn.execute(sql.SQL(_DDL).format(s=s))
        conn.execute(sql.SQL(_DDL_ADDED).format(s=s))
        found = written_by(conn, schema)
        if found and found != wanted:
            log.warning("%s: the index was written as %s, this indexerd writes %s: emptying it "
                        "(every node re-reads its sources)", where, found, wanted)
            conn.execute(sql.SQL("TRUNCATE {0}.documents, {0}.terms").format(s))
            conn.execute(sql.SQL("UPDATE {}.commits SET n = n + 1, documents = 0, committed_at = now()").format(s))
        if found != wanted:
            conn.execute(sql.SQL("DELETE FROM {}.meta").format(s))
            for name, value in wanted.items():
                conn.execute(sql.SQL("INSERT INTO {}.meta VALUES (%s, %s)").format(s), (name, value))
