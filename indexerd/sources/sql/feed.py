"""The SQL change-queue source (the Aspire RDB connector model).

A trigger writes each change of a main table into a queue table (sequence, id, action I/U/D/N,
status W/I/C).  One pass:

1. the first time (or ``ctl reindex``): ``full_sql`` indexes every row, and documents of this
   source that the full load did not return are deleted;
2. ``pre_update_sql`` once (typically marks up to ``{batchSize}`` waiting rows W -> I);
3. ``incremental_sql`` once: the changed rows joined to the main table, with id, sequence and
   action; they are processed in increasing sequence order, one at a time (so two jobs for one
   id never run at once, and a later change of an id always follows the earlier one);
4. the index commits, and only then ``post_update_sql`` runs for each processed row (typically
   I -> C).  A crash between the commit and ``post_update_sql`` leaves rows in I: the next pass
   indexes them again (harmless, update-by-key) -- never a lost update.  A row that fails stays
   in I and is counted in ``errors``; the rest of the batch goes on.

Rows are selected by status, not by ``sequence > last seen``, so a row whose transaction commits
after a higher sequence was processed is not lost (CASES B29).

Placeholders ``{id}``, ``{sequenceId}``, ``{action}``, ``{batchSize}`` (Aspire's spelling) become
SQLAlchemy bound parameters; nothing from a row is pasted into SQL text.  The password comes from
``password_env`` or ``password_file`` and is set on the URL object, never logged.

Bad rows: a row without an id, with an action other than I/U/D/N, or with text that is not
UTF-8 is skipped, logged and counted in ``errors`` (a queue row stays in I and is tried again at
the next pass); the other rows of the full load and of the queue go on.  A row whose text
columns (with its title) exceed the source's ``max_size`` is skipped as ``too-large``, like a file
(:mod:`indexerd.sources.sql.conn` keeps the value from being decoded at all).

Stopping: every statement runs under :func:`~indexerd.sources.sql.conn.interruptible`, so setting the
pass's cancel event interrupts a long query (SQLite ``interrupt()``, PostgreSQL cancel request);
the pass then ends as interrupted (not an error) and nothing is acknowledged.

Contract relied on: SQLAlchemy 2 (``text()``, ``engine.begin()``); datetimes the driver returns
without a zone are taken as UTC (the date layer's rule for naive values).
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any, Mapping, TYPE_CHECKING

from indexerd.config import SourcePolicy
from indexerd.sources.sql.table import SqlSource
from indexerd.core.secrets import mask_url
from indexerd.core.metamap import MetaMap
from indexerd.core.decide import DecideSettings
from indexerd.core.errors import ConfigError, IndexerdError, RetryLater
from indexerd.pipeline.fetched import Policy
from indexerd.pipeline.stages import PassCounts, Pipeline
from indexerd.core.secrets import read_password
from indexerd.sources.sql.conn import check_url, interruptible, make_engine, missing_sqlite_file
from indexerd.sources.sql import queue, reread
from indexerd.sources.sql.queue import short_error
from indexerd.sources.sql.placeholders import bind_placeholders, used_params  # noqa: F401 (re-exported)
from indexerd.sources.sql.rows import BadRow, SqlRows

if TYPE_CHECKING:
    from indexerd.core.store.protocols import StateStore

log = logging.getLogger(__name__)
UTC = timezone.utc



def queue_lock_name(src) -> tuple[str, str]:
    """The cluster lock of a SQL source's drain (:mod:`indexerd.sources.claims`): named by its
    database (URL without password) and the query that reads its queue, so that two sources
    reading one queue never drain it at once."""
    cfg = src.cfg
    return "queue", f"{mask_url(cfg.url)}|{(cfg.incremental_sql or cfg.full_sql).strip()}"


class SqlFeed:
    """One ``[[sources.sql]]`` source.

    Args:
        cfg: the config table.
        policy: effective per-source settings (refresh time, strict dates, date order).
        meta_map: unused for rows (no meta tags), kept for the shared pipeline policy.
    """

    kind = "sql"
    key_prefixes = ("sql:",)
    unknown_reason = "full_sql returns no such row"

    def __init__(self, cfg: SqlSource, policy: SourcePolicy, meta_map: MetaMap) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self._engine = None
        self.max_size_bytes = policy.max_size_bytes
        self.pipeline_policy = Policy(
            meta_map=meta_map, date_order=policy.date_sources, max_bytes=policy.max_size_bytes,
            settings=DecideSettings(refresh_time_seconds=policy.refresh_time_seconds,
                                    strict_dates=policy.strict_dates))
        self.rows = SqlRows(cfg, self.max_size_bytes, self.pipeline_policy)

    # -- connection -----------------------------------------------------------------------
    def password(self) -> str | None:
        """The password from ``password_env`` / ``password_file``, or None.

        Raises:
            ConfigError: the variable is unset or the file unreadable (names which, not the value).
        """
        return read_password(f"source {self.name}", self.cfg.password_env, self.cfg.password_file)

    def check(self, where: str, *, files: bool = True) -> None:
        """Check-time tests (``check-config``, daemon start, reload, ``indexerd index``): the
        password is available, the URL parses and (when ``files``: ``check-config``) a SQLite
        database file exists.  Nothing connects.

        Args:
            where: the source's key path, e.g. ``FILE: sources.sql[0]``.

        Raises:
            ConfigError: ``<where>.<key>: ...`` naming what is missing (never a password).
        """
        try:
            self.password()
        except ConfigError as e:
            key = "password_env" if self.cfg.password_env else "password_file"
            raise ConfigError(f"{where}.{key}: {str(e).removeprefix(f'source {self.name}: ')}") from None
        check_url(f"{where}.url", self.cfg.url, files=files)

    def engine(self):
        """The SQLAlchemy engine (created once; see :func:`indexerd.sources.sql.conn.make_engine`)."""
        if self._engine is None:
            from sqlalchemy.engine import make_url
            from sqlalchemy.exc import ArgumentError, NoSuchModuleError

            try:
                url = make_url(self.cfg.url)
                pw = self.password()
                if pw is not None:
                    url = url.set(password=pw)
                self._engine = make_engine(url, self.max_size_bytes)
            except (ArgumentError, NoSuchModuleError, ImportError) as e:
                raise ConfigError(f"source {self.name}: url {mask_url(self.cfg.url)}: {e}") from None
        return self._engine

    def status_facts(self) -> dict:
        return {"root": None}

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    # -- passes ---------------------------------------------------------------------------
    def _meta_key(self) -> str:
        return f"sql:{self.name}:full_loaded_at"

    def run_pass(self, pipeline: Pipeline, counts: PassCounts, *, progress=None, forced: bool = False,
                 cancel=None, start: str | None = None, recheck: bool = False) -> None:
        """One pass: the full load the first time (or when ``forced``), then the queue.

        A statement that fails, or a SQLite database file that does not exist, fails the pass
        (``counts.failed`` says why); a statement
        interrupted because ``cancel`` was set ends it quietly, nothing acknowledged."""
        from sqlalchemy.exc import SQLAlchemyError

        missing = missing_sqlite_file(self.cfg.url)
        if missing:  # like a missing tree root: this pass fails, the daemon and other sources run
            counts.fail(missing)
            counts.failed = missing
            pipeline.counters.inc("error.sql")
            log.error("source %s: %s", self.name, missing)
            return
        try:
            full = forced or not pipeline.store.get_meta(self._meta_key()) or not self.cfg.incremental_sql
            if full:
                self.full_load(pipeline, counts, progress=progress, forced=forced, cancel=cancel)
            if self.cfg.incremental_sql and not (cancel is not None and cancel.is_set()):
                self.drain_queue(pipeline, counts, cancel=cancel)
            if not (cancel is not None and cancel.is_set()):
                reread.reread_forgotten(self, pipeline, counts, loaded=full)
        except SQLAlchemyError as e:
            if cancel is not None and cancel.is_set():
                log.info("source %s: pass interrupted (stopping): %s", self.name, short_error(e))
                return
            counts.fail(short_error(e))  # the pass itself is the item that failed (as a missing root is)
            counts.failed = short_error(e)
            pipeline.counters.inc("error.sql")
            log.error("source %s: %s", self.name, short_error(e))
        except RetryLater as e:  # the index commit failed: nothing was acknowledged to the queue
            counts.fail(f"{e}; the queue rows stay for the next pass")
            counts.failed = f"index commit failed: {e}"
            pipeline.counters.inc("error.index-commit")
            log.error("source %s: %s; the queue rows stay for the next pass", self.name, e)

    def params(self, sql: str, row: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The bound values ``sql`` uses: ``batchSize``, and ``id``/``sequenceId``/``action`` of ``row``."""
        c = self.cfg
        p: dict[str, Any] = {"batchSize": c.batch_size}
        if row is not None:
            p.update(id=row.get(c.id_column), sequenceId=row.get(c.sequence_column), action=row.get(c.action_column))
        names = used_params(sql)
        return {k: v for k, v in p.items() if k in names}

    def full_load(self, pipeline: Pipeline, counts: PassCounts, *, progress=None, forced: bool = False,
                  cancel=None) -> None:
        """Index every row of ``full_sql``; delete this source's documents it did not return."""
        from sqlalchemy import text

        started = datetime.now(UTC)
        seen: set[str] = set()
        with self.engine().connect() as conn, interruptible(conn, cancel):
            result = conn.execution_options(stream_results=True).execute(
                text(bind_placeholders(self.cfg.full_sql)), self.params(self.cfg.full_sql))
            for rows in iter(lambda: result.mappings().fetchmany(1000), []):
                for row in rows:
                    if cancel is not None and cancel.is_set():
                        return  # nothing deleted, not marked loaded: the next pass starts again
                    try:
                        key = self.rows.index(pipeline, row, counts, forced=forced)[0]
                    except BadRow as e:
                        key = self.rows.bad(pipeline, row, counts, e, "full load row")
                    if key:
                        seen.add(key)
                    if progress:
                        progress.tick_walk()
        for key in pipeline.store.iter_keys(source=self.name):  # a chunk at a time
            if key not in seen and not pipeline.removal_queued(key):
                pipeline.gone(key, counts, "not in the full load")
        pipeline.flush()
        pipeline.store.write_batch([], meta={self._meta_key(): started.isoformat()})
        log.info("source %s: full load of %d rows", self.name, len(seen))

    def drain_queue(self, pipeline: Pipeline, counts: PassCounts, *, cancel=None) -> None:
        """pre_update_sql, incremental_sql, index in sequence order, commit, post_update_sql
        (:func:`indexerd.sources.sql.queue.drain`)."""
        queue.drain(self, pipeline, counts, cancel=cancel)

    # -- one row --------------------------------------------------------------------------
    def key_for(self, row_id: Any) -> str:
        """``sql:<source>/<id>``."""
        return self.rows.key_for(row_id)

    def owns(self, key: str) -> bool:
        """``sql:<this source>/<id>`` with an id."""
        return key.startswith(f"sql:{self.name}/") and len(key) > len(f"sql:{self.name}/")

    def on_forgotten(self, store: StateStore, key: str) -> None:
        """``ctl forget``: :meth:`remember_forgotten` the row of ``key``."""
        self.remember_forgotten(store, key[len(f"sql:{self.name}/"):])

    def reindex(self, keys: list[str], pipeline: Pipeline, counts: PassCounts, *, cancel=None) -> list[str]:
        """``ctl reindex sql:NAME/ID``: :meth:`reread` these rows; returns the unknown keys.

        Raises:
            IndexerdError: the query failed (``source NAME: reading ID, ... failed: ...``).
        """
        from sqlalchemy.exc import SQLAlchemyError

        ids = [k[len(f"sql:{self.name}/"):] for k in keys]
        try:
            return [self.key_for(i) for i in self.reread(ids, pipeline, counts)]
        except SQLAlchemyError as e:
            raise IndexerdError(f"source {self.name}: reading {', '.join(ids)} failed: {short_error(e)}") from None

    def forgotten(self, store: StateStore) -> list[str]:
        """Ids ``ctl forget`` dropped since this source's last pass (:func:`reread.forgotten_ids`)."""
        return reread.forgotten_ids(store, self.name)

    def remember_forgotten(self, store: StateStore, row_id: str) -> None:
        """``ctl forget sql:NAME/ID``: :func:`reread.remember_forgotten`."""
        reread.remember_forgotten(store, self.name, row_id)

    def reread(self, ids: list[str], pipeline: Pipeline, counts: PassCounts, *, forced: bool = True) -> list[str]:
        """Read these rows now by their ids (:func:`reread.reread`); returns the unknown ids."""
        return reread.reread(self, ids, pipeline, counts, forced=forced)
