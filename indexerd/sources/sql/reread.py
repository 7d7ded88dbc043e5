"""Rows of a SQL source read by their ids: ``ctl reindex sql:NAME/ID``, and the rows ``ctl
forget`` dropped, read again at the source's next pass (their ids kept in the store's meta)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from indexerd.core.store.protocols import StateStore
    from indexerd.pipeline.stages import PassCounts, Pipeline
    from indexerd.sources.sql.feed import SqlFeed


def _forgotten_key(name: str) -> str:
    return f"sql:{name}:forgotten"


def forgotten_ids(store: StateStore, name: str) -> list[str]:
    """Ids ``ctl forget`` dropped from source ``name`` since its last pass (read again at the next)."""
    return json.loads(store.get_meta(_forgotten_key(name)) or "[]")


def remember_forgotten(store: StateStore, name: str, row_id: str) -> None:
    """``ctl forget sql:NAME/ID``: the next pass reads this row again (it comes back if
    ``full_sql`` still returns it), as a forgotten file or page comes back at the next pass."""
    ids = forgotten_ids(store, name)
    if row_id not in ids:
        store.write_batch([], meta={_forgotten_key(name): json.dumps(ids + [row_id])})


def reread_forgotten(feed: SqlFeed, pipeline: Pipeline, counts: PassCounts, *, loaded: bool) -> None:
    """Read the forgotten rows again, unless this pass's full load (``loaded``) already did."""
    ids = forgotten_ids(pipeline.store, feed.name)
    if not ids:
        return
    if not loaded:
        reread(feed, ids, pipeline, counts, forced=False)
        pipeline.flush()
    left = [i for i in forgotten_ids(pipeline.store, feed.name) if i not in ids]  # forgotten meanwhile
    pipeline.store.write_batch([], meta={_forgotten_key(feed.name): json.dumps(left)})


def reread(feed: SqlFeed, ids: list[str], pipeline: Pipeline, counts: PassCounts, *,
           forced: bool = True) -> list[str]:
    """``ctl reindex sql:NAME/ID`` (and a forgotten row at the next pass): read these rows
    now, each by its id through ``full_sql`` (``SELECT * FROM (full_sql) WHERE id_column =
    :id``), and index them (``forced``: whatever the decision would say).  A row the query
    no longer returns is deleted when it is indexed (as the full load would).  Returns the
    ids that are neither returned nor stored (unknown).

    An id of digits is tried as an integer first, then as text (a key holds the id as text;
    SQLite compares a subquery's integer column with text as unequal).

    Raises:
        ConfigError: the password cannot be read.
        sqlalchemy.exc.SQLAlchemyError: the query failed for every spelling of an id.
    """
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    from indexerd.sources.sql.placeholders import bind_placeholders, used_params

    c = feed.cfg
    eng = feed.engine()
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
        key = feed.key_for(row_id)
        if row is not None:
            feed.rows.index(pipeline, row, counts, forced=forced)
        elif pipeline.stored(key) is not None:
            pipeline.gone(key, counts, "no longer returned by full_sql")
        else:
            unknown.append(row_id)
    return unknown
