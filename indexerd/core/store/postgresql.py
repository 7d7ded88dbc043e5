"""The state store on a PostgreSQL server (``[store] url``): one schema shared by every node.

Connections are autocommit; a write batch is one explicit transaction (``_transaction``), as on
SQLite.  The row kinds' portable SQL is run as written but for the placeholders (``?`` becomes
``%s``).  A connection that broke (the server restarted) is replaced and the statement (or the
whole write transaction: upserts and deletes by key, harmless twice) is tried once more on the new one; a
second failure raises :class:`~indexerd.core.errors.StoreError`, as a failed SQLite write does,
and the writer retries its batch.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Self

from indexerd.core.errors import SchemaTooNew, StoreError
from indexerd.core.pgaddress import PgAddress, first_line
from indexerd.core.store.cluster import DEFAULT_LEASE_SECONDS
from indexerd.core.store.connection import StoreConnection
from indexerd.core.store.pg_migrations import MIGRATE_LOCK_KEY, PG_MIGRATIONS, PG_SCHEMA_VERSION

__all__ = ["PgConnection", "PgStoreAddress"]

log = logging.getLogger(__name__)

#: Seconds a statement whose connection broke waits for the server to accept a new one (a
#: ``pg_ctl restart`` takes a second or two; a server down for longer fails the statement).
RECONNECT_PATIENCE_SECONDS = 20.0


@dataclass(frozen=True)
class PgStoreAddress(PgAddress):
    """The store's server and schema, from ``[store]`` or ``<state_dir>/store-postgresql.json``;
    ``lease_seconds`` is ``[store] lease``, the cluster timings of the node that opens it
    (:class:`~indexerd.core.store.cluster.ClusterTimings`)."""

    lease_seconds: float = DEFAULT_LEASE_SECONDS

    OWNER: ClassVar[str] = "store"
    WHAT: ClassVar[str] = "PostgreSQL state store"
    ERROR: ClassVar[type] = StoreError
    FILENAME: ClassVar[str] = "store-postgresql.json"
    APPLICATION: ClassVar[str] = "indexerd-store"

    @classmethod
    def _extra_from_settings(cls, settings: Any) -> dict[str, Any]:
        return {"lease_seconds": float(getattr(settings, "lease", DEFAULT_LEASE_SECONDS))}

    @classmethod
    def _extra_from_file(cls, d: dict[str, Any], where: str) -> dict[str, Any]:
        lease = d.get("lease_seconds", DEFAULT_LEASE_SECONDS)
        if not isinstance(lease, (int, float)) or isinstance(lease, bool):
            raise cls.ERROR(f"{where}: 'lease_seconds' is {json.dumps(lease)[:60]}, not a number")
        return {"lease_seconds": float(lease)}


def _placeholders(sql: str) -> str:
    """The row kinds' SQL with psycopg's placeholders (``?`` -> ``%s``, a literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class _Row(tuple):
    """A result row read by position or by column name, like :class:`sqlite3.Row`."""

    _names: dict[str, int]

    def __new__(cls, values, names: dict[str, int]):
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key):
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor):
    names = {c.name: i for i, c in enumerate(cursor.description or ())}
    return lambda values: _Row(values, names)


class _Db:
    """The ``_db`` of :class:`PgConnection`: ``execute`` with SQLite-style placeholders, a
    connection opened again after it broke, and driver errors as :class:`StoreError`."""

    def __init__(self, owner: "PgConnection") -> None:
        self.owner = owner
        self.conn = None

    def connection(self):
        if self.conn is None or self.conn.closed or self.conn.broken:
            self.conn = self.owner.address.connect(autocommit=True, application_name=self.owner.application_name)
            self.conn.row_factory = _row_factory
            with self.conn.cursor() as cur:
                cur.execute(f'SET search_path = "{self.owner.address.schema}"')
                if self.owner.readonly:
                    cur.execute("SET default_transaction_read_only = on")
        return self.conn

    def execute(self, sql: str, args: Iterable[Any] = ()):
        import psycopg

        for attempt in (1, 2):
            try:
                cur = (self.connection() if attempt == 1 else self.reconnect()).cursor()
                cur.execute(_placeholders(sql), tuple(args))
                return cur
            except psycopg.OperationalError as e:
                if attempt == 2 or not self.gone():
                    raise StoreError(f"{self.owner.where}: {first_line(e)}") from None
            except psycopg.Error as e:
                raise StoreError(f"{self.owner.where}: {first_line(e)}") from None

    def reconnect(self):
        """A new connection after the last one broke, waiting up to
        :data:`RECONNECT_PATIENCE_SECONDS` for the server to accept one (a restart refuses
        connections while it shuts down and starts up: a write made then waits for it rather
        than failing, and the crawl that made it goes on without fetching anything again).

        Raises:
            StoreError: the server did not come back in time.
        """
        deadline = time.monotonic() + RECONNECT_PATIENCE_SECONDS
        pause = 0.05
        while True:
            try:
                return self.connection()
            except StoreError:
                if time.monotonic() + pause > deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 1.0)

    def gone(self) -> bool:
        """True when the connection is closed or broken (the server restarted): it is dropped,
        and the statement may be tried once more on a new one."""
        if self.conn is None or self.conn.closed or self.conn.broken:
            self.close()
            return True
        return False

    def stream(self, sql: str, args: Iterable[Any] = ()):
        """Rows of one read as the server sends them (psycopg's single-row mode)."""
        import psycopg

        try:
            yield from self.connection().cursor().stream(_placeholders(sql), tuple(args))
        except psycopg.Error as e:
            raise StoreError(f"{self.owner.where}: {first_line(e)}") from None

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.close()


class PgConnection(StoreConnection):
    """One connection to the store's schema at ``address`` (created and migrated when missing,
    unless ``readonly``); ``application_name`` names it in ``pg_stat_activity`` (a node's
    heartbeat connection: :data:`~indexerd.core.store.cluster.NODE_APPLICATION`).

    Raises (from the constructor):
        ConfigError: the password cannot be read.
        SchemaTooNew: the schema was written by a newer indexerd.
        StoreError: the server cannot be reached; ``readonly`` and no store there yet.
    """

    shared = True

    def __init__(self, address: PgStoreAddress, *, readonly: bool = False,
                 application_name: str | None = None) -> None:
        self.address = address
        self.application_name = application_name
        self.where = f"PostgreSQL state store at {address.shown}"
        self.readonly = readonly
        self._lock = threading.Lock()
        self._db = _Db(self)
        try:
            self._migrate()
        except BaseException:
            self._db.close()
            raise

    @classmethod
    def in_dir(cls, state_dir: str | Path, *, readonly: bool = False) -> Self:
        """Open the store a writer recorded in ``state_dir`` (:attr:`PgStoreAddress.FILENAME`).

        Raises:
            StoreError: no address recorded there.
        """
        address = PgStoreAddress.from_file(Path(state_dir))
        if address is None:
            raise StoreError(f"{state_dir}: no PostgreSQL state store recorded")
        return cls(address, readonly=readonly)

    def _version(self) -> int | None:
        row = self._db.execute("SELECT to_regclass(?) IS NOT NULL",
                               (f'"{self.address.schema}".store_schema',)).fetchone()
        if not row[0]:
            return None
        row = self._db.execute("SELECT version FROM store_schema").fetchone()
        return int(row[0]) if row else 0

    @property
    def schema_version(self) -> int:
        return self._version() or 0

    def _migrate(self) -> None:
        version = self._version()
        if version is not None and version > PG_SCHEMA_VERSION:
            raise SchemaTooNew(f"{self.where}: state store schema version {version} is newer than "
                               f"this indexerd understands ({PG_SCHEMA_VERSION}); upgrade indexerd")
        if version == PG_SCHEMA_VERSION:
            return
        if self.readonly:
            what = "no state store there yet (nothing has been indexed)" if version is None else \
                "the state store needs migration; start a node with it once"
            raise StoreError(f"{self.where}: {what}")
        import psycopg

        s = f'"{self.address.schema}"'
        conn = self._db.connection()
        try:
            while True:
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK_KEY,))
                    cur.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
                    cur.execute(f"CREATE TABLE IF NOT EXISTS {s}.store_schema (version integer NOT NULL)")
                    cur.execute(f"SELECT version FROM {s}.store_schema")
                    row = cur.fetchone()
                    if row is None:
                        cur.execute(f"INSERT INTO {s}.store_schema VALUES (0)")
                    step = int(row[0]) if row else 0
                    if step >= PG_SCHEMA_VERSION:
                        return
                    cur.execute(PG_MIGRATIONS[step].format(s=s))
                    cur.execute(f"UPDATE {s}.store_schema SET version = %s", (step + 1,))
        except psycopg.Error as e:
            raise StoreError(f"{self.where}: migrating the schema failed: {first_line(e)}") from None

    def _fold_document_counts(self) -> None:
        """Fold the count rows the triggers appended into one per (source, status), in one
        statement (a writer appending meanwhile is not blocked; two folds at once each fold
        the rows they deleted).  A store that cannot be written now folds at a later read."""
        try:
            self._exec_many("WITH gone AS (DELETE FROM document_counts RETURNING source, status, n) "
                            "INSERT INTO document_counts(source, status, n) SELECT source, status, sum(n) "
                            "FROM gone GROUP BY source, status HAVING sum(n) != 0", [()])
        except StoreError as e:
            log.debug("%s: the document counts were not folded: %s", self.where, e)

    def _stream(self, sql: str, args=()):
        return self._db.stream(sql, args)

    def _transaction(self, steps: list[tuple[str, list[tuple]]]) -> None:
        self._read_then_write(lambda read: steps)

    def _read_then_write(self, steps: Callable[[Callable[[str, tuple], list]], list[tuple[str, list[tuple]]]],
                         returned: list | None = None) -> None:
        """:meth:`_transaction` of the steps ``steps(read)`` returns, where ``read(sql, args) ->
        rows`` reads in the same transaction before any step: what is written may depend on what
        the transaction read (a fenced write,
        :meth:`~indexerd.core.store.sharedfrontier.SharedFrontierRows.frontier_write`).
        ``steps`` is called again when the transaction is tried again on a new connection.
        ``returned``, when given, receives the rows every step with a ``RETURNING`` clause
        returned (for each of its argument rows, in order), those of the committed attempt only.

        Raises:
            StoreError: naming the store and the database's reason.
        """
        import psycopg

        with self._lock:
            for attempt in (1, 2):
                try:
                    conn = self._db.connection() if attempt == 1 else self._db.reconnect()
                    got: list = []
                    with conn.transaction(), conn.cursor() as cur:
                        def read(sql: str, args: tuple, cur=cur) -> list:
                            return cur.execute(_placeholders(sql), args).fetchall()
                        for sql, rows in steps(read):
                            if not rows:
                                continue
                            back = returned is not None and " RETURNING " in sql
                            cur.executemany(_placeholders(sql), rows, returning=back)
                            while back:
                                got.extend(cur.fetchall())
                                back = bool(cur.nextset())
                    if returned is not None:
                        returned.extend(got)
                    return
                except psycopg.OperationalError as e:
                    # a connection the server ended (a restart): the transaction (upserts and
                    # deletes by key, harmless twice) is tried once more on a new connection; a
                    # batch cut mid-pipeline may leave it "busy" without saying it is broken
                    # ("cannot exit pipeline mode while busy"), so it is dropped either way
                    if attempt == 2:
                        raise StoreError(f"{self.where}: write failed: {first_line(e)}") from None
                    if not self._db.gone():
                        self._db.close()
                except psycopg.Error as e:
                    raise StoreError(f"{self.where}: write failed: {first_line(e)}") from None
