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

import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from indexerd.core.errors import ConfigError, IndexUnavailable
from indexerd.core.secrets import read_password

#: The file in the index directory naming the server and schema (no password).
TARGET_FILE = "postgresql.json"
#: Readers' pool: connections kept open at most (search threads of the HTTP listener, ctl status).
POOL_MAX = 4
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def mask(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages)."""
    from indexerd.config import mask_url

    return mask_url(url)


def strip_password(url: str) -> str:
    """``url`` without the password of its user info (what :data:`TARGET_FILE` may hold)."""
    head, sep, rest = url.partition("://")
    netloc, slash, tail = rest.partition("/")
    if not sep or "@" not in netloc:
        return url
    userinfo, _, hostport = netloc.rpartition("@")
    return f"{head}://{userinfo.partition(':')[0]}@{hostport}{slash}{tail}"


@dataclass(frozen=True)
class PgTarget:
    """The index's server and schema.  ``url`` is a libpq URL (a ``+psycopg`` driver suffix is
    dropped); ``timeout_seconds`` bounds connecting and every statement."""

    url: str
    schema: str = "indexerd"
    password_env: str | None = None
    password_file: str | None = None
    timeout_seconds: float = 30.0

    @classmethod
    def from_settings(cls, settings: Any) -> "PgTarget":
        """From the ``[index.postgresql]`` table.

        Raises:
            ConfigError: no table, or a schema that is not a plain identifier.
        """
        if settings is None or not getattr(settings, "url", None):
            raise ConfigError("index.postgresql.url: required when index.engine = 'postgresql'")
        schema = str(getattr(settings, "schema", "indexerd"))
        if not _IDENT.fullmatch(schema):
            raise ConfigError(f"index.postgresql.schema: expected a plain SQL name (letters, digits, _), got {schema!r}")
        url = str(settings.url)
        scheme, sep, rest = url.partition("://")
        if sep and scheme.startswith("postgresql+"):
            url = "postgresql://" + rest
        return cls(url=url, schema=schema, password_env=getattr(settings, "password_env", None),
                   password_file=getattr(settings, "password_file", None),
                   timeout_seconds=float(getattr(settings, "timeout", 30.0)))

    @classmethod
    def from_index_dir(cls, path: Path) -> "PgTarget | None":
        """The target recorded in ``path`` (:data:`TARGET_FILE`), None when there is none.

        Raises:
            IndexUnavailable: the file exists but cannot be read or parsed.
        """
        f = Path(path) / TARGET_FILE
        try:
            d = json.loads(f.read_text(encoding="utf-8"))
            return cls(url=str(d["url"]), schema=str(d["schema"]), password_env=d.get("password_env"),
                       password_file=d.get("password_file"), timeout_seconds=float(d.get("timeout_seconds", 30.0)))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise IndexUnavailable(f"{f}: cannot read the PostgreSQL index's address: {e}") from None

    def record(self, path: Path) -> None:
        """Write :data:`TARGET_FILE` in ``path`` (atomically; the URL without its password)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        d = asdict(self)
        d["url"] = strip_password(self.url)
        tmp = path / (TARGET_FILE + ".tmp")
        tmp.write_text(json.dumps(d, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, path / TARGET_FILE)

    @property
    def shown(self) -> str:
        """The URL and schema for messages (password masked)."""
        return f"{mask(self.url)} schema {self.schema}"

    def connect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``psycopg.connect`` besides the URL (password, timeouts).

        Raises:
            ConfigError: the password's variable is unset or its file unreadable.
        """
        kw: dict[str, Any] = {"connect_timeout": max(1, int(round(self.timeout_seconds))),
                              "options": f"-c statement_timeout={int(self.timeout_seconds * 1000)}",
                              "application_name": "indexerd"}
        pw = read_password("index.postgresql", self.password_env, self.password_file)
        if pw is not None:
            kw["password"] = pw
        return kw

    def connect(self, *, autocommit: bool = False):
        """A new connection.

        Raises:
            ConfigError: the password cannot be read.
            IndexUnavailable: the server cannot be reached or refuses the login (the message
                shows the masked URL, never the password).
        """
        import psycopg

        try:
            return psycopg.connect(self.url, autocommit=autocommit, **self.connect_kwargs())
        except psycopg.Error as e:
            raise IndexUnavailable(f"PostgreSQL index at {self.shown}: cannot connect: "
                                   f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}") from None

    def pool(self):
        """A readers' pool of autocommit connections (opened lazily, at most :data:`POOL_MAX`)."""
        from psycopg_pool import ConnectionPool

        kwargs = dict(self.connect_kwargs(), autocommit=True)
        return ConnectionPool(self.url, min_size=0, max_size=POOL_MAX, kwargs=kwargs, open=True,
                              timeout=self.timeout_seconds, name="indexerd-index")
