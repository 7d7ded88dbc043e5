"""Rows of a SQL source read again by id: ``ctl reindex sql:NAME/ID``, and the ids ``ctl forget``
dropped, which the next pass reads again (a forgotten row comes back if ``full_sql`` still returns
it, as a forgotten file or page comes back at its source's next pass).

The forgotten ids are kept in the store's meta table under ``sql:<source>:forgotten`` (JSON list).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from indexerd.config import SqlSource
from indexerd.core.counts import PassCounts
from indexerd.core.pipeline import Pipeline
from indexerd.sources.sql.rows import SqlRows
from indexerd.sources.sql.statements import bind_placeholders, used_params

__all__ = ["ForgottenRows", "reread_rows"]


class ForgottenRows:
    """The ids ``ctl forget`` dropped from one SQL source since its last pass.

    Args:
        name: the source's name.
    """

    def __init__(self, name: str) -> None:
        self.meta_key = f"sql:{name}:forgotten"

    def ids(self, store) -> list[str]:
        """Ids ``ctl forget`` dropped since this source's last pass (read again at the next)."""
        return json.loads(store.get_meta(self.meta_key) or "[]")

    def remember(self, store, row_id: str) -> None:
        """``ctl forget sql:NAME/ID``: the next pass reads this row again."""
        ids = self.ids(store)
        if row_id not in ids:
            store.write_batch([], meta={self.meta_key: json.dumps(ids + [row_id])})

    def reread(self, cfg: SqlSource, engine: Callable[[], Any], rows: SqlRows, pipeline: Pipeline,
               counts: PassCounts, *, loaded: bool) -> None:
        """Read the forgotten rows again (through ``engine()``, the source's engine), unless this
        pass's full load (``loaded``) already did; then forget the ids read (keeping any forgotten
        meanwhile)."""
        ids = self.ids(pipeline.store)
        if not ids:
            return
        if not loaded:
            reread_rows(cfg, engine(), rows, ids, pipeline, counts, forced=False)
            pipeline.flush()
        left = [i for i in self.ids(pipeline.store) if i not in ids]  # forgotten meanwhile
        pipeline.store.write_batch([], meta={self.meta_key: json.dumps(left)})


def reread_rows(cfg: SqlSource, eng, rows: SqlRows, ids: list[str], pipeline: Pipeline, counts: PassCounts, *,
                forced: bool = True) -> list[str]:
    """Read these rows now, each by its id through ``full_sql`` (``SELECT * FROM (full_sql) WHERE
    id_column = :id``), and index them (``forced``: whatever the decision would say).  A row the
    query no longer returns is deleted when it is indexed (as the full load would).  Returns the
    ids that are neither returned nor stored (unknown).

    An id of digits is tried as an integer first, then as text (a key holds the id as text;
    SQLite compares a subquery's integer column with text as unequal).

    Args:
        cfg: the source's config table; ``eng``: its SQLAlchemy engine; ``rows``: its rows.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the query failed for every spelling of an id.
    """
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    c = cfg
    column = eng.dialect.identifier_preparer.quote(c.id_column)
    sql = bind_placeholders(c.full_sql).strip().rstrip(";")
    stmt = text(f"SELECT * FROM ({sql}) AS indexerd_row WHERE indexerd_row.{column} = :indexerd_id")
    base = {k: v for k, v in {"batchSize": c.batch_size}.items() if k in used_params(c.full_sql)}
    unknown = []
    for row_id in ids:
        row, error = None, None
        for value in ([int(row_id), row_id] if row_id.lstrip("-").isdigit() else [row_id]):
            try:
                with eng.connect() as conn:  # one per try: a failed try aborts a PostgreSQL transaction
                    row = conn.execute(stmt, {**base, "indexerd_id": value}).mappings().first()
                error = None
            except SQLAlchemyError as e:
                error = e
            if row is not None:
                break
        if error is not None:
            raise error
        key = rows.key_for(row_id)
        if row is not None:
            rows.index(pipeline, row, counts, forced=forced)
        elif pipeline.stored(key) is not None:
            pipeline.gone(key, counts, "no longer returned by full_sql")
        else:
            unknown.append(row_id)
    return unknown
