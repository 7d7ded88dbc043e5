"""The change queue of a SQL source: mark, read in sequence order, index, commit, acknowledge.

``pre_update_sql`` once (typically marks up to ``{batchSize}`` waiting rows W -> I);
``incremental_sql`` once: the changed rows with id, sequence and action, processed in increasing
sequence order, one at a time; the index commits, and only then ``post_update_sql`` runs for each
processed row (typically I -> C).  A row that fails stays in I and is counted in ``errors``.
Logs under the feed's logger, ``indexerd.sources.sql.feed``.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from indexerd.config import SqlSource
from indexerd.core.counts import PassCounts
from indexerd.core.errors import IndexerdError
from indexerd.core.pipeline import Pipeline
from indexerd.sources.sql.conn import interruptible
from indexerd.sources.sql.rows import BadRow, SqlRows
from indexerd.sources.sql.statements import ACTIONS, bind_placeholders, params_for, sequence_order, short_error

__all__ = ["drain_queue"]

log = logging.getLogger("indexerd.sources.sql.feed")  # the feed's one logger


def drain_queue(cfg: SqlSource, eng, rows: SqlRows, pipeline: Pipeline, counts: PassCounts, *,
                cancel=None) -> None:
    """pre_update_sql, incremental_sql, index in sequence order, commit, post_update_sql.

    Args:
        cfg: the source's config table; ``eng``: its SQLAlchemy engine; ``rows``: its rows.
        cancel: a :class:`threading.Event`; set, it interrupts the statement running and stops
            before the next row (nothing after it is acknowledged).

    Raises:
        sqlalchemy.exc.SQLAlchemyError: a statement failed (or was interrupted).
        RetryLater: the index commit failed: nothing was acknowledged.
    """
    from sqlalchemy import text

    c = cfg
    if c.pre_update_sql:
        with eng.begin() as conn, interruptible(conn, cancel):
            conn.execute(text(bind_placeholders(c.pre_update_sql)), params_for(c, c.pre_update_sql))
    with eng.connect() as conn, interruptible(conn, cancel):
        queued = conn.execute(text(bind_placeholders(c.incremental_sql)),
                              params_for(c, c.incremental_sql)).mappings().all()
    queued = sorted(queued, key=lambda r: sequence_order(r.get(c.sequence_column)))
    done: list[tuple[Mapping[str, Any], str]] = []  # (row, verdict)
    for row in queued:
        if cancel is not None and cancel.is_set():
            break
        try:
            action = row.get(c.action_column)
            action = action.strip().upper() if isinstance(action, str) else action
            if action not in ACTIONS:
                raise BadRow(f"unknown action {row.get(c.action_column)!r} (expected I, U, D or N)")
            if action in ("I", "U"):
                verdict = rows.index(pipeline, row, counts)[1]
            elif action == "D":
                verdict = rows.delete(pipeline, row, counts)
            else:
                verdict = pipeline.unchanged(counts, "action-n").verdict
                pipeline.counters.inc("sql.action-n")
            done.append((row, verdict))
        except IndexerdError:
            raise
        except Exception as e:  # bad data in one row: it stays in the queue
            rows.bad(pipeline, row, counts, e, f"queue row {row.get(c.sequence_column)!r}")
    if not done:
        return
    pipeline.flush()  # the index commit comes before any row is marked done
    if c.post_update_sql:
        _post_update(c, eng, done, counts, pipeline)


def _post_update(cfg: SqlSource, eng, rows: list[tuple[Mapping[str, Any], str]], counts: PassCounts,
                 pipeline: Pipeline) -> None:
    """Acknowledge processed rows; a row that cannot be acknowledged moves from its verdict to
    ``errors`` (it stays queued), so ``seen = indexed + unchanged + skipped + errors`` holds."""
    from sqlalchemy import text

    c = cfg
    stmt = text(bind_placeholders(c.post_update_sql))

    def params(row):
        return params_for(c, c.post_update_sql, row)

    try:
        with eng.begin() as conn:  # one transaction for the batch: the fast path
            conn.execute(stmt, [params(r) for r, _ in rows])
        return
    except Exception as e:
        log.warning("source %s: post_update_sql failed for the batch (%s); retrying row by row",
                    c.name, short_error(e))
    for r, verdict in rows:  # one transaction per row: a failing row stays, the others are done
        try:
            with eng.begin() as conn:
                conn.execute(stmt, params(r))
        except Exception as e:
            # the row is not acknowledged: whatever it was counted as, it is now an error
            counts.revise_to_error(verdict, f"post_update_sql failed for queue row "
                                            f"{r.get(c.sequence_column)} (id {r.get(c.id_column)}): {short_error(e)}")
            pipeline.counters.inc("error.sql-post-update")
            log.error("source %s: post_update_sql failed for queue row %s (id %s): %s", c.name,
                      r.get(c.sequence_column), r.get(c.id_column), short_error(e))
