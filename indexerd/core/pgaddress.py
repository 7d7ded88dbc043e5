"""Where a PostgreSQL server is and how to reach it: :class:`PgAddress`, shared by the state
store on PostgreSQL (``[store]``) and the PostgreSQL index (``[index.postgresql]``).

A process without the config (``indexerd ctl search`` reading a state dir) finds the same server
in a small JSON file the writer left in the state dir: the URL without any password, the *names*
of the password's variable or file, the schema and the timeout -- never a password.

Every statement runs with ``statement_timeout`` = the timeout and the connection is made with
``connect_timeout`` = the same (house rule: every network call has a timeout).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

from indexerd.core.errors import ConfigError, IndexerdError
from indexerd.core.secrets import mask_url, read_password

if TYPE_CHECKING:
    import psycopg

__all__ = ["PgAddress", "mask", "strip_password"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def mask(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages)."""
    return mask_url(url)


def strip_password(url: str) -> str:
    """``url`` without the password of its user info (what the address file may hold)."""
    head, sep, rest = url.partition("://")
    netloc, slash, tail = rest.partition("/")
    if not sep or "@" not in netloc:
        return url
    userinfo, _, hostport = netloc.rpartition("@")
    return f"{head}://{userinfo.partition(':')[0]}@{hostport}{slash}{tail}"


@dataclass(frozen=True)
class PgAddress:
    """A server and a schema.  ``url`` is a libpq URL (a ``+psycopg`` driver suffix is dropped);
    ``timeout_seconds`` bounds connecting and every statement.  ``read_url`` (None: none) is a
    read-only server, a streaming-replication hot standby of ``url``'s, reached with the same
    password and schema (:meth:`reader`).

    Subclasses name what they address: :attr:`OWNER` (the config table, first word of every
    message), :attr:`WHAT` (``PostgreSQL index``), :attr:`ERROR` (the exception a failed
    connection raises) and :attr:`FILENAME` (the address file).
    """

    url: str
    schema: str = "indexerd"
    password_env: str | None = None
    password_file: str | None = None
    timeout_seconds: float = 30.0
    #: a read-only server (a hot standby of ``url``'s) for reads that may lag; None: none
    read_url: str | None = None

    OWNER: ClassVar[str] = "postgresql"
    WHAT: ClassVar[str] = "PostgreSQL server"
    ERROR: ClassVar[type[IndexerdError]] = IndexerdError
    FILENAME: ClassVar[str] = "postgresql.json"
    APPLICATION: ClassVar[str] = "indexerd"

    @classmethod
    def from_settings(cls, settings: Any, default_schema: str = "indexerd") -> Self:
        """From a config table with ``url``, ``password_env``, ``password_file``, ``schema`` and
        ``timeout``.

        Raises:
            ConfigError: no table or no URL, or a schema that is not a plain identifier.
        """
        if settings is None or not getattr(settings, "url", None):
            raise ConfigError(f"{cls.OWNER}.url: required")
        schema = str(getattr(settings, "schema", default_schema) or default_schema)
        if not _IDENT.fullmatch(schema):
            raise ConfigError(f"{cls.OWNER}.schema: expected a plain SQL name (letters, digits, _), got {schema!r}")
        read_url = getattr(settings, "read_url", None)
        return cls(url=_libpq_url(str(settings.url)), schema=schema,
                   password_env=getattr(settings, "password_env", None),
                   password_file=getattr(settings, "password_file", None),
                   timeout_seconds=float(getattr(settings, "timeout", 30.0)),
                   read_url=_libpq_url(str(read_url)) if read_url else None,
                   **cls._extra_from_settings(settings))

    @classmethod
    def _extra_from_settings(cls, settings: Any) -> dict[str, Any]:
        """A subclass's own fields from its config table (none here)."""
        return {}

    @classmethod
    def _extra_from_file(cls, d: dict[str, Any], where: str) -> dict[str, Any]:
        """A subclass's own fields from its address file's object ``d`` (none here).

        Raises:
            ERROR: a field of the wrong type, as ``where: ...``."""
        return {}

    @classmethod
    def from_file(cls, directory: Path) -> Self | None:
        """The address recorded in ``directory`` (:attr:`FILENAME`), None when there is none.

        Raises:
            ERROR: the file exists but cannot be read or parsed.
        """
        f = Path(directory) / cls.FILENAME
        where = f"{f}: cannot read the {cls.WHAT}'s address"
        try:
            d = json.loads(f.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except OSError as e:
            raise cls.ERROR(f"{where}: {e.strerror}") from None
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
            raise cls.ERROR(f"{where}: not JSON ({e})") from None
        if not isinstance(d, dict):
            raise cls.ERROR(f"{where}: not a JSON object")
        for key, types in (("url", str), ("schema", str), ("password_env", (str, type(None))),
                           ("password_file", (str, type(None))), ("timeout_seconds", (int, float)),
                           ("read_url", (str, type(None)))):
            if key in ("url", "schema") and key not in d:
                raise cls.ERROR(f"{where}: no {key!r}")
            if key in d and (not isinstance(d[key], types) or isinstance(d[key], bool)):
                raise cls.ERROR(f"{where}: {key!r} is {json.dumps(d[key])[:60]}, not a "
                                f"{'number' if key == 'timeout_seconds' else 'string'}")
        return cls(url=d["url"], schema=d["schema"], password_env=d.get("password_env"),
                   password_file=d.get("password_file"), timeout_seconds=float(d.get("timeout_seconds", 30.0)),
                   read_url=d.get("read_url"), **cls._extra_from_file(d, where))

    def record(self, directory: Path) -> None:
        """Write :attr:`FILENAME` in ``directory`` (atomically; the URL without its password)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        d = asdict(self)
        d["url"] = strip_password(self.url)
        if self.read_url is not None:
            d["read_url"] = strip_password(self.read_url)
        tmp = directory / (self.FILENAME + ".tmp")
        tmp.write_text(json.dumps(d, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, directory / self.FILENAME)

    def reader(self) -> Self | None:
        """The read-only server's address (``read_url`` as the URL, same schema, password and
        timeout, no further reader); None when there is none."""
        if self.read_url is None:
            return None
        return replace(self, url=self.read_url, read_url=None)

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
                              "application_name": self.APPLICATION}
        pw = read_password(self.OWNER, self.password_env, self.password_file)
        if pw is not None:
            kw["password"] = pw
        return kw

    def connect(self, *, autocommit: bool = False,
                application_name: str | None = None) -> psycopg.Connection[Any]:
        """A new connection (``application_name``: how ``pg_stat_activity`` names it, else
        :attr:`APPLICATION`).

        Raises:
            ConfigError: the password cannot be read.
            ERROR: the server cannot be reached or refuses the login (the message shows the
                masked URL, never the password).
        """
        import psycopg

        kw = self.connect_kwargs()
        if application_name:
            kw["application_name"] = application_name[:63]
        try:
            return psycopg.connect(self.url, autocommit=autocommit, **kw)
        except psycopg.Error as e:
            raise self.ERROR(f"{self.WHAT} at {self.shown}: cannot connect: {first_line(e)}") from None


def _libpq_url(url: str) -> str:
    """``url`` with an SQLAlchemy driver suffix dropped (``postgresql+psycopg://`` ->
    ``postgresql://``)."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme.startswith("postgresql+"):
        return "postgresql://" + rest
    return url


def first_line(e: BaseException) -> str:
    """The first line of a driver error's text (its class name when it has none)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
