"""Connections to a SQL source's database: the engine, bounded column values, interruption.

- **SQLite files** are opened read-write but never created (``mode=rw`` URI, SQLite's URI
  filename rules): a URL naming a file that does not exist is refused instead of silently making
  an empty database.  Each connection opens the file anew (SQLAlchemy ``NullPool``), so a queue
  database replaced by rename (a restore) is read at the next pass, not the deleted inode a
  pooled connection kept open.
- **Column values over the source's ``max_size``** come back as :class:`TooLarge` instead of a
  Python string: sqlite3's ``text_factory`` sees the bytes SQLite already holds and never decodes
  them; psycopg's text loader sees the bytes libpq received and never builds the ``str`` (for
  PostgreSQL the value still crosses the wire once: a query the user wrote cannot be rewritten to
  read it in pieces).  Text SQLite holds that is not UTF-8 comes back as :class:`Undecodable`
  (sqlite3 would otherwise fail the whole fetch, not the one row).
- **A running statement is interrupted** when the pass's cancel event is set (the daemon's stop):
  ``sqlite3.Connection.interrupt()``, psycopg's ``cancel_safe()`` (the PostgreSQL cancel
  request).  The statement then fails with the driver's error, which the caller treats as an
  interrupted pass, not a failure.

Contract relied on: SQLAlchemy 2 (``create_engine(creator=..., poolclass=...)``, the ``connect``
pool event, ``Connection.connection.dbapi_connection``); sqlite3 ``text_factory`` and
``interrupt()``; psycopg 3 ``adapters.register_loader`` and ``cancel_safe()`` (3.2+).
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import quote

from indexerd.core.secrets import mask_url
from indexerd.core.errors import ConfigError

log = logging.getLogger(__name__)

#: how often the interrupt watcher looks at the cancel event (seconds)
INTERRUPT_POLL_SECONDS = 0.2


@dataclass(frozen=True, slots=True)
class TooLarge:
    """A column value over ``max_size``: only its size in bytes (as the database holds it)."""

    size_bytes: int


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A SQLite text value that is not valid UTF-8, with the offset of its first bad byte."""

    offset: int


def sqlite_file(url) -> str | None:
    """The database file of a SQLite URL (absolute), or None (not SQLite, in memory, or a
    ``uri=true`` URL that names its own open mode)."""
    if url.get_backend_name() != "sqlite":
        return None
    db = url.database or ""
    if not db or db == ":memory:" or url.query.get("uri"):
        return None
    return os.path.abspath(db)


def missing_sqlite_file(url_text: str) -> str | None:
    """Why the SQLite database of ``url_text`` cannot be read now: its file does not exist
    (indexerd never creates it); None when it exists, for other databases, and for a URL that
    does not parse (:func:`check_url` reports that)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        path = sqlite_file(make_url(url_text))
    except ArgumentError:
        return None
    if path is not None and not os.path.isfile(path):
        return (f"the database file {path} does not exist (indexerd never creates it; give the path "
                "of the application's database)")
    return None


def check_url(where: str, url_text: str, *, files: bool = True) -> None:
    """Refuse a URL that does not parse and, when ``files``, a SQLite URL whose database file
    does not exist (``check-config``; at daemon start such a source's passes fail instead, as
    with a missing tree root, since the application may create its database later).

    Args:
        where: what the error starts with, e.g. ``FILE: sources.sql[0].url``.

    Raises:
        ConfigError: ``<where>: ...`` naming the file or the URL's error (never a password).
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        make_url(url_text)
    except ArgumentError as e:
        raise ConfigError(f"{where}: {mask_url(url_text)}: {e}") from None
    why = missing_sqlite_file(url_text) if files else None
    if why:
        raise ConfigError(f"{where}: {why}")


def make_engine(url, max_value_bytes: int):
    """An SQLAlchemy engine for ``url`` (a ``URL`` with the password set) whose connections
    return :class:`TooLarge` for values over ``max_value_bytes`` and :class:`Undecodable` for
    SQLite text that is not UTF-8; SQLite files are opened ``mode=rw``, unpooled.

    Raises:
        sqlalchemy.exc.ArgumentError, NoSuchModuleError, ImportError: a bad URL or driver.
    """
    from sqlalchemy import create_engine, event
    from sqlalchemy.pool import NullPool

    path = sqlite_file(url)
    if path is not None:
        import sqlite3

        uri = f"file:{quote(path)}?mode=rw"
        engine = create_engine(url, poolclass=NullPool, hide_parameters=True,
                               creator=lambda: sqlite3.connect(uri, uri=True, check_same_thread=False))
    else:
        engine = create_engine(url, pool_pre_ping=True, hide_parameters=True)

    @event.listens_for(engine, "connect")
    def _bound_values(dbapi_conn, _record) -> None:
        if hasattr(dbapi_conn, "text_factory"):  # sqlite3
            dbapi_conn.text_factory = _sqlite_text_factory(max_value_bytes)
        elif hasattr(dbapi_conn, "adapters"):  # psycopg 3
            _register_psycopg_loaders(dbapi_conn, max_value_bytes)

    return engine


def _sqlite_text_factory(limit: int):
    def text(data: bytes):
        if len(data) > limit:
            return TooLarge(len(data))
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            return Undecodable(e.start)
    return text


def _register_psycopg_loaders(conn, limit: int) -> None:
    from psycopg.types.string import ByteaLoader, TextLoader

    class BoundedText(TextLoader):
        def load(self, data):
            if len(data) > limit:
                return TooLarge(len(data))
            return super().load(data)

    class BoundedBytea(ByteaLoader):
        def load(self, data):
            if len(data) > 2 * limit + 2:  # text format: '\x' then two hex digits per byte
                return TooLarge((len(data) - 2) // 2)
            return super().load(data)

    for type_name in ("text", "varchar", "bpchar", "name"):
        conn.adapters.register_loader(type_name, BoundedText)
    conn.adapters.register_loader("bytea", BoundedBytea)


@contextmanager
def interruptible(conn, cancel: threading.Event | None):
    """While the block runs, a watcher thread interrupts ``conn``'s statement (an SQLAlchemy
    ``Connection``) once ``cancel`` is set.  Nothing happens when ``cancel`` is None."""
    if cancel is None:
        yield
        return
    dbapi = conn.connection.dbapi_connection
    done = threading.Event()

    def watch() -> None:
        while not done.wait(INTERRUPT_POLL_SECONDS):
            if cancel.is_set():
                try:
                    if hasattr(dbapi, "interrupt"):
                        dbapi.interrupt()
                    elif hasattr(dbapi, "cancel_safe"):
                        dbapi.cancel_safe(timeout=5.0)
                    else:
                        dbapi.cancel()
                    log.info("interrupted a running SQL statement (stopping)")
                except Exception as e:  # the statement may have just ended
                    log.debug("interrupt failed: %s", e)
                return

    t = threading.Thread(target=watch, name="sql-interrupt", daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()
