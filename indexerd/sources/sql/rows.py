"""One row of a SQL source -> pipeline calls: its key, the ``max_size`` bound, bad rows, deletes.

Bad rows: a row without a usable id, or whose title or text columns are not UTF-8
(:class:`~indexerd.sources.sql.conn.Undecodable`), raises :class:`BadRow`; the feed hands it to
:meth:`SqlRows.bad`, which counts it in ``errors`` and lets the pass go on.  A row whose text
(title plus text columns) exceeds ``max_size``, or that holds a value the driver already cut
(:class:`~indexerd.sources.sql.conn.TooLarge`), is skipped as ``too-large``, like a file.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from indexerd.sources.sql.table import SqlSource
from indexerd.core.counts import PassCounts
from indexerd.pipeline.fetched import Fetched, Policy
from indexerd.pipeline.stages import Pipeline
from indexerd.sources.sql.conn import TooLarge, Undecodable
from indexerd.sources.sql.keys import key_for

log = logging.getLogger(__name__)


class BadRow(ValueError):
    """A row that cannot be a document (no id, unknown action, text that is not UTF-8)."""


class SqlRows:
    """The rows of one ``[[sources.sql]]`` source.

    Args:
        cfg: the source's config table (column names).
        max_size_bytes: the source's ``max_size``.
        pipeline_policy: what the pipeline needs to know about the source.
    """

    def __init__(self, cfg: SqlSource, max_size_bytes: int, pipeline_policy: Policy) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.max_size_bytes = max_size_bytes
        self.pipeline_policy = pipeline_policy

    def key_for(self, row_id: Any) -> str:
        """``sql:<source>/<id>`` (:func:`indexerd.sources.sql.keys.key_for`)."""
        return key_for(self.name, row_id)

    def bad(self, pipeline: Pipeline, row: Mapping[str, Any], counts: PassCounts, e: Exception,
            where: str) -> str | None:
        """Count and log a row that cannot be a document; returns its key when it has one (its
        record then says why, and an indexed copy is removed: it no longer matches the row)."""
        row_id = row.get(self.cfg.id_column)
        if isinstance(row_id, (int, str)) and not isinstance(row_id, bool):
            key = self.key_for(row_id)
            pipeline.skip(key, self.name, "sql-row", f"{where}: {e}", counts, status="error")
            return key
        counts.fail(f"{where} (id {row_id!r}) skipped: {e}")
        pipeline.counters.inc("error.sql-row")
        log.error("source %s: %s (id %r) skipped: %s", self.name, where, row_id, e)
        return None

    def _main_row_gone(self, row: Mapping[str, Any]) -> bool:
        cols = [c for c in (self.cfg.title_column, self.cfg.date_column, *self.cfg.text_columns) if c]
        return bool(cols) and all(row.get(c) is None for c in cols)

    def delete(self, pipeline: Pipeline, row: Mapping[str, Any], counts: PassCounts) -> str:
        """A row whose document is gone (action D, or an I/U whose main-table row is gone)."""
        key = self.key_for(row.get(self.cfg.id_column))
        if pipeline.stored(key) is not None:
            return pipeline.gone(key, counts, "action D").verdict
        pipeline.counters.inc("sql.delete-unknown")
        return "deleted-unknown"

    def index(self, pipeline: Pipeline, row: Mapping[str, Any], counts: PassCounts, *,
              forced: bool = False) -> tuple[str | None, str]:
        """Index one row; returns (key or None when it was a delete, verdict).

        Raises:
            BadRow: no usable id, or a text value that is not UTF-8.
        """
        c = self.cfg
        row_id = row.get(c.id_column)
        if row_id is None or isinstance(row_id, (TooLarge, Undecodable)):
            raise BadRow(f"no usable {c.id_column} ({row_id!r})")
        key = self.key_for(row_id)
        if self._main_row_gone(row):  # an I/U whose main-table row is gone: a delete
            return None, self.delete(pipeline, row, counts)
        cols = ([c.title_column] if c.title_column else []) + list(c.text_columns)
        too_large = 0
        for col in cols:
            value = row.get(col)
            if isinstance(value, Undecodable):
                raise BadRow(f"column {col} is not valid UTF-8 ({value!r})")
            if isinstance(value, TooLarge):
                too_large += value.size_bytes
        if too_large:
            return key, pipeline.skip(key, self.name, "too-large",
                                      f"a column of {too_large} bytes; max_size is {self.max_size_bytes} bytes",
                                      counts, size=too_large).verdict
        title = _text(row.get(c.title_column)) if c.title_column else ""
        texts = [_text(row.get(col)) for col in c.text_columns if row.get(col) is not None]
        body = "\n\n".join(t for t in texts if t) or title
        data = body.encode("utf-8", "replace")
        size = len(data) + (len(title.encode("utf-8", "replace")) if body is not title else 0)
        if size > self.max_size_bytes:
            return key, pipeline.skip(key, self.name, "too-large",
                                      f"{size} bytes of text; max_size is {self.max_size_bytes} bytes",
                                      counts, size=size).verdict
        date = row.get(c.date_column) if c.date_column else None
        f = Fetched(key=key, source=self.name, url=key, data=data, fetched_at=pipeline.clock(),
                    declared_type="text/plain",
                    protocol_date=None if isinstance(date, (TooLarge, Undecodable)) else date,
                    protocol_kind="column", size=len(data), title=title or None)
        out = pipeline.handle(f, self.pipeline_policy, counts, forced=forced, fallback_title=title or key)
        return key, out.verdict



def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
