"""The PostgreSQL engine (``[index] engine = "postgresql"``): one index in a PostgreSQL schema,
shared by every indexerd node that names it (``pip install 'indexerd[postgresql]'``).

Importing this package does not import psycopg: :data:`ENGINE` imports it when an index opens.
:mod:`.connect` finds the server (config or the state dir's record) and makes connections,
:mod:`.schema` the tables, :mod:`.documents` the rows and their ``tsvector``, :mod:`.compile`
the query tree -> SQL and ``tsquery``, :mod:`.session` the write transaction and
:mod:`.engine` the index (search, count, keys, status).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

#: Changes whenever the tables or the ``tsv`` layout change: an index written with another
#: format is emptied and rebuilt from the sources.  2: the ``terms`` table; 3: the headings' lexemes
#: (weight ``D``) in the ``tsv``.
FORMAT_VERSION = 3


class PostgresqlEngine:
    """The engine object :func:`indexerd.index.base.load_engine` finds as ``ENGINE``."""

    name = "postgresql"
    format_version = FORMAT_VERSION
    extra = "postgresql"
    #: each query waits on the server
    query_threads = 4

    def available(self) -> bool:
        """True when psycopg 3 and psycopg_pool are installed (not imported here)."""
        try:
            return all(importlib.util.find_spec(m) is not None for m in ("psycopg", "psycopg_pool"))
        except (ImportError, ValueError):
            return False

    def open(self, path: Path, settings: Any | None, *, create: bool, fold_diacritics: bool = True):
        """Open (with ``create``, create) the index ``settings`` (``[index.postgresql]``) names,
        or, with None, the one recorded in ``path``.  See :meth:`.engine.PgIndex.open`."""
        from .engine import PgIndex

        return PgIndex.open(path, settings, create=create, format_version=FORMAT_VERSION,
                            fold_diacritics=fold_diacritics)

    def on_disk_token(self, path: Path) -> str | None:
        """The commit counter of the index recorded in ``path``, None when ``path`` records none
        or its tables do not exist.

        Raises:
            IndexUnavailable: the server cannot be reached (the reconcile must not take an
                unreachable index for an empty one).
        """
        from .connect import PgTarget

        target = PgTarget.from_index_dir(path)
        if target is None:
            return None
        import psycopg
        from psycopg import sql

        from indexerd.core.errors import IndexUnavailable

        from . import schema

        conn = target.connect(autocommit=True)
        try:
            if not schema.exists(conn, target.schema):
                return None
            q = sql.SQL("SELECT n FROM {}.commits").format(sql.Identifier(target.schema))
            row = conn.execute(q).fetchone()
            return str(row[0]) if row is not None else None
        except psycopg.Error as e:
            raise IndexUnavailable(f"PostgreSQL index at {target.shown}: {e}") from None
        finally:
            conn.close()

    def holds_index(self, path: Path) -> bool:
        """True when ``path`` records a PostgreSQL index (:data:`.connect.TARGET_FILE`)."""
        from .connect import TARGET_FILE

        return (Path(path) / TARGET_FILE).is_file()


ENGINE = PostgresqlEngine()
