"""What a PostgreSQL index answers beside a search: a query's matches counted per media type and
source (facets), the index's terms near a word ("did you mean"), each in a statement or two, and
every live document's key (a server-side cursor).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

from indexerd.core.errors import IndexUnavailable

from indexerd.index.base import FACET_FIELDS

from .compile import Where, compile_where
from .documents import quote_lexeme
from .session import _first_line

if TYPE_CHECKING:
    from .engine import PgIndex

#: :func:`similar_terms` counts a term's documents up to this many (a tie-break only).
TERM_COUNT_CAP = 1000
#: Rows per fetch of :func:`keys`'s server-side cursor.
KEYS_PAGE = 10_000


def facets(ix: PgIndex, query: str | None, since: datetime | None,
           until: datetime | None) -> dict[str, list[tuple[str, int]]]:
    """Matching documents counted per media type and per source in one statement
    (``GROUP BY GROUPING SETS ((media_type), (source))``: the rows the query's ``tsv``
    condition selects, counted by the server), most first.

    Raises:
        QueryError: the query is malformed.
        IndexUnavailable: the server cannot be reached.
    """
    where = Where("TRUE") if query is None else compile_where(ix._analysed(query))
    out: dict[str, list[tuple[str, int]]] = {name: [] for name in FACET_FIELDS}
    if where is None:
        return out
    where = ix._with_range(where, since, until)
    q = sql.SQL("SELECT media_type, source, GROUPING(media_type), count(*) FROM {} WHERE {} "
                "GROUP BY GROUPING SETS ((media_type), (source))").format(ix._docs, sql.SQL(where.sql))
    for media_type, source, by_source, n in ix._search_read(q, where.params):
        value, name = (source, "source") if by_source else (media_type, "media_type")
        if value:
            out[name].append((value, int(n)))
    for values in out.values():
        values.sort(key=lambda p: (-p[1], p[0]))
    return out


def similar_terms(ix: PgIndex, token: str, max_edits: int = 2) -> list[tuple[str, int]]:
    """Terms of the ``terms`` table near ``token`` (:func:`indexerd.index.suggest.near_terms`
    over those of its first character and a length within ``max_edits``, read through the
    table's B-tree), each with the number of live documents holding it in the title or
    content (through the ``tsv`` GIN index; counted up to :data:`TERM_COUNT_CAP`); terms
    no document holds any more are left out.

    Raises:
        IndexUnavailable: the server cannot be reached.
    """
    from indexerd.index.suggest import near_terms

    if not token:
        return []
    q = sql.SQL("SELECT DISTINCT term FROM {} WHERE left(term, 1) = %s AND length(term) BETWEEN %s AND %s").format(
        ix._terms)
    rows = ix._search_read(q, (token[0], len(token) - max_edits, len(token) + max_edits))
    near = near_terms(token, (t for (t,) in rows), max_edits)
    counted = sql.SQL("SELECT count(*) FROM (SELECT 1 FROM {} WHERE tsv @@ %s::tsquery LIMIT %s) AS m").format(
        ix._docs)
    out = []
    for t in near:
        n = int(ix._search_read(counted, (f"{quote_lexeme(t)}:AB", TERM_COUNT_CAP), one=True)[0])
        if n > 0:
            out.append((t, n))
    return out


def keys(ix: PgIndex) -> Iterator[tuple[str, str]]:
    """``(key, source)`` of every live document of ``ix``, from one snapshot (a server-side
    cursor on a connection of its own, :data:`KEYS_PAGE` rows per fetch).

    Raises:
        IndexUnavailable: the server cannot be reached.
    """
    conn = ix.target.connect()
    try:
        with conn.cursor(name="indexerd_keys") as cur:
            cur.itersize = KEYS_PAGE
            cur.execute(sql.SQL("SELECT key, source FROM {}").format(ix._docs))
            yield from cur
    except psycopg.Error as e:
        raise IndexUnavailable(f"{ix.where}: reading the keys: {_first_line(e)}") from None
    finally:
        conn.close()
