"""Where the PostgreSQL index is and how to reach it: :class:`PgTarget`, and its connections.

The ``[index.postgresql]`` table names the server (``url``), the password's source and the
schema.  A process without the config (``indexerd ctl search`` reading a state dir) finds the
same target in ``<state_dir>/index/postgresql.json`` (:data:`TARGET_FILE`), written when a
writer opens the index: the URL without any password, the *names* of the password's variable or
file, the schema and the timeout -- never a password.

Connections: every statement runs with ``statement_timeout`` = the target's timeout and the
connection is made with ``connect_timeout`` = the same (house rule: every network call has a
timeout).  Readers share a :class:`psycopg_pool.ConnectionPool` (thread-safe; a connection that
broke is dropped when it is given back, and the read is tried once more on a new one); the write
session has a connection of its own for its transaction.
"""

from __future__ import annotations

import logging

from pathlib import Path
from typing import Any, ClassVar

from indexerd.core.errors import ConfigError, IndexUnavailable
from indexerd.core.pgaddress import PgAddress, mask, strip_password

__all__ = ["PgTarget", "TARGET_FILE", "POOL_MAX", "mask", "strip_password"]

#: The file in the index directory naming the server and schema (no password).
TARGET_FILE = "postgresql.json"
#: Readers' pool: connections kept open at most (search threads of the HTTP listener, ctl status).
POOL_MAX = 4


class PgTarget(PgAddress):
    """The index's server and schema (:class:`~indexerd.core.pgaddress.PgAddress`), from
    ``[index.postgresql]`` or the index directory's :data:`TARGET_FILE`."""

    OWNER: ClassVar[str] = "index.postgresql"
    WHAT: ClassVar[str] = "PostgreSQL index"
    ERROR: ClassVar[type] = IndexUnavailable
    FILENAME: ClassVar[str] = TARGET_FILE

    @classmethod
    def from_settings(cls, settings: Any, default_schema: str = "indexerd") -> "PgTarget":
        """From the ``[index.postgresql]`` table.

        Raises:
            ConfigError: no table, or a schema that is not a plain identifier.
        """
        if settings is None or not getattr(settings, "url", None):
            raise ConfigError("index.postgresql.url: required when index.engine = 'postgresql'")
        return super().from_settings(settings, default_schema)

    @classmethod
    def from_index_dir(cls, path: Path) -> "PgTarget | None":
        """The target recorded in ``path`` (:data:`TARGET_FILE`), None when there is none.

        Raises:
            IndexUnavailable: the file exists but cannot be read or parsed.
        """
        return cls.from_file(path)

    def pool(self):
        """A readers' pool of autocommit connections (opened lazily, at most :data:`POOL_MAX`)."""
        from psycopg_pool import ConnectionPool

        # the pool logs every failed attempt of its background reconnects (a line a second while
        # the server is down); a read that cannot get a connection says so itself (IndexUnavailable)
        logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
        kwargs = dict(self.connect_kwargs(), autocommit=True)
        return ConnectionPool(self.url, min_size=0, max_size=POOL_MAX, kwargs=kwargs, open=True,
                              timeout=self.timeout_seconds, name="indexerd-index")
