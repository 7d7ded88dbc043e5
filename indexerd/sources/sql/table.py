"""The ``[[sources.sql]]`` table: its keys and defaults, the checks its types cannot say and its
secret (the password a URL may hold), as :mod:`indexerd.sources.registry` declares them."""

from __future__ import annotations

import os
from typing import Any


from indexerd.config.schema import _Struct
from indexerd.config.units import Bytes, Seconds
from indexerd.core.errors import ConfigError
from indexerd.core.secrets import mask_url


class SqlSource(_Struct, frozen=True):
    """One ``[[sources.sql]]`` table: a database change queue (the Aspire RDB connector model).

    ``url`` is an SQLAlchemy URL without the password; the password comes from
    ``password_env`` (an environment variable) or ``password_file`` and is never logged or shown.
    SQL texts may use ``{id}``, ``{sequenceId}``, ``{action}`` and ``{batchSize}``: they become
    bound parameters, never pasted into the SQL.
    """

    name: str
    url: str
    full_sql: str
    incremental_sql: str | None = None
    pre_update_sql: str | None = None
    post_update_sql: str | None = None
    interval: Seconds = Seconds(300.0)
    id_column: str = "id"
    sequence_column: str = "seq"
    action_column: str = "action"
    title_column: str | None = None
    text_columns: list[str] = []
    date_column: str | None = None
    batch_size: int = 1000
    max_size: Bytes | None = None
    password_env: str | None = None
    password_file: str | None = None
    date_sources: list[str] | None = None
    refresh_time: Seconds | None = None
    strict_dates: bool | None = None


def check_sql_source(src: SqlSource, where: str, origin: str) -> None:
    """An SQLAlchemy URL, a batch size, at most one password source.

    Raises:
        ConfigError: as ``ORIGIN: WHERE.KEY: what was expected``.
    """
    if "://" not in src.url:
        raise ConfigError(f"{origin}: {where}.url: expected an SQLAlchemy URL like "
                          f"'sqlite:////var/lib/app.db', got {mask_url(src.url)!r}")
    if src.batch_size < 1:
        raise ConfigError(f"{origin}: {where}.batch_size: expected a whole number >= 1, "
                          f"got {src.batch_size}")
    if src.password_env and src.password_file:
        raise ConfigError(f"{origin}: {where}: set password_env or password_file, not both")


def mask_sql_source(table: dict[str, Any]) -> None:
    """Hide the password of one table's ``url`` (builtins, in place), for ``check-config``."""
    table["url"] = mask_url(table["url"])


def sql_paths(src: SqlSource) -> list[tuple[str, str, str]]:
    """The SQLite queue database a SQL source writes in place (its ``pre_update_sql`` /
    ``post_update_sql`` mark rows; SQLite writes its journal beside it), if any (key, path,
    need as in :attr:`indexerd.sources.registry.Kind.paths`); a read-only feed or another
    database: none."""
    if not (src.pre_update_sql or src.post_update_sql):
        return []
    db = _sqlite_file(src.url)
    return [("url", db, "sqlite")] if db else []


def _sqlite_file(url: str) -> str | None:
    """The database file of an SQLite SQLAlchemy URL; None for another database or ``:memory:``."""
    if not url.lower().startswith("sqlite"):
        return None
    from sqlalchemy.engine import make_url

    try:
        db = make_url(url).database
    except Exception:  # noqa: BLE001 - the config check reports a bad URL; nothing to add here
        return None
    if not db or db == ":memory:" or db.startswith("file:"):
        return None
    return os.path.abspath(db)
