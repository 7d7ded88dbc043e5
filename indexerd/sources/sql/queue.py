"""A SQL source's change queue drained in sequence order, acknowledged only after the index
commit (see :mod:`indexerd.sources.sql.feed` for the whole model)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Mapping

from indexerd.core.errors import IndexerdError
from indexerd.pipeline.stages import PassCounts, Pipeline
from indexerd.sources.sql.conn import interruptible
from indexerd.sources.sql.placeholders import bind_placeholders
from indexerd.sources.sql.rows import BadRow

if TYPE_CHECKING:
    from indexerd.sources.sql.feed import SqlFeed

log = logging.getLogger(__name__)

#: the queue's action column: I(nsert), U(pdate), D(elete), N(one: nothing to do)
ACTIONS = {"I": "insert", "U": "update", "D": "delete", "N": "none"}


def drain(feed: SqlFeed, pipeline: Pipeline, counts: PassCounts, *, cancel=None) -> None:
    """One drain of ``feed``'s queue: ``pre_update_sql``, ``incremental_sql``, each row in
    increasing sequence order (I/U index, D deletes, N counts as unchanged), the index commit,
    then ``post_update_sql`` per processed row (:func:`acknowledge`).  A bad row is counted in
    ``errors`` and stays queued; ``cancel`` (a :class:`threading.Event`) stops before the next
    row and acknowledges only what was done.

    Raises:
        IndexerdError: the index or store cannot go on (the pass fails; nothing acknowledged).
    """
    from sqlalchemy import text

    c = feed.cfg
    eng = feed.engine()
    assert c.incremental_sql is not None, "a queue source has its incremental_sql (config check)"
    if c.pre_update_sql:
        with eng.begin() as conn, interruptible(conn, cancel):
            conn.execute(text(bind_placeholders(c.pre_update_sql)), feed.params(c.pre_update_sql))
    with eng.connect() as conn, interruptible(conn, cancel):
        rows = conn.execute(text(bind_placeholders(c.incremental_sql)),
                            feed.params(c.incremental_sql)).mappings().all()
    rows = sorted(rows, key=lambda r: sort_key(r.get(c.sequence_column)))
    done: list[tuple[Mapping[str, Any], str]] = []  # (row, verdict)
    for row in rows:
        if cancel is not None and cancel.is_set():
            break
        try:
            action = row.get(c.action_column)
            action = action.strip().upper() if isinstance(action, str) else action
            if action not in ACTIONS:
                raise BadRow(f"unknown action {row.get(c.action_column)!r} (expected I, U, D or N)")
            if action in ("I", "U"):
                verdict = feed.rows.index(pipeline, row, counts)[1]
            elif action == "D":
                verdict = feed.rows.delete(pipeline, row, counts)
            else:
                verdict = pipeline.unchanged(counts, "action-n").verdict
                pipeline.counters.inc("sql.action-n")
            done.append((row, verdict))
        except IndexerdError:
            raise
        except Exception as e:  # bad data in one row: it stays in the queue
            feed.rows.bad(pipeline, row, counts, e, f"queue row {row.get(c.sequence_column)!r}")
    if not done:
        return
    pipeline.flush()  # the index commit comes before any row is marked done
    if c.post_update_sql:
        acknowledge(feed, done, counts, pipeline)

def acknowledge(feed: SqlFeed, rows: list[tuple[Mapping[str, Any], str]], counts: PassCounts,
                 pipeline: Pipeline) -> None:
    """Acknowledge processed rows; a row that cannot be acknowledged moves from its verdict to
    ``errors`` (it stays queued), so ``seen = indexed + unchanged + skipped + errors`` holds."""
    from sqlalchemy import text

    c = feed.cfg
    assert c.post_update_sql is not None, "called only when post_update_sql is set"
    stmt = text(bind_placeholders(c.post_update_sql))

    def params(row):
        return feed.params(c.post_update_sql, row)

    eng = feed.engine()
    try:
        with eng.begin() as conn:  # one transaction for the batch: the fast path
            conn.execute(stmt, [params(r) for r, _ in rows])
        return
    except Exception as e:
        log.warning("source %s: post_update_sql failed for the batch (%s); retrying row by row",
                    feed.name, short_error(e))
    for r, verdict in rows:  # one transaction per row: a failing row stays, the others are done
        try:
            with eng.begin() as conn:
                conn.execute(stmt, params(r))
        except Exception as e:
            # the row is not acknowledged: whatever it was counted as, it is now an error
            counts.revise_to_error(verdict, f"post_update_sql failed for queue row "
                                            f"{r.get(c.sequence_column)} (id {r.get(c.id_column)}): {short_error(e)}")
            pipeline.counters.inc("error.sql-post-update")
            log.error("source %s: post_update_sql failed for queue row %s (id %s): %s", feed.name,
                      r.get(c.sequence_column), r.get(c.id_column), short_error(e))


def sort_key(seq: Any):
    """Numbers in order, before anything else (sorted by its text)."""
    return (0, seq) if isinstance(seq, (int, float)) else (1, str(seq))


def short_error(e: Exception) -> str:
    """The first line of an exception's text, at most 300 characters (drivers' errors are long)."""
    return str(e).splitlines()[0][:300]
