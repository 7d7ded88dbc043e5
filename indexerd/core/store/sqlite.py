"""The state store in one SQLite file (``<state_dir>/state.sqlite3``): the default.

Contract relied on: SQLite in WAL mode allows one writer and many concurrent readers across
threads and processes; every connection sets ``busy_timeout`` so a reader never fails on a
momentary write lock.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Self

from indexerd.core.errors import StoreError
from indexerd.core.store.connection import StoreConnection
from indexerd.core.store.migrations import migrate

__all__ = ["SqliteConnection"]


class SqliteConnection(StoreConnection):
    """One connection to the store file ``path``.

    Raises (from the constructor):
        SchemaTooNew: the file was written by a newer indexerd.
        StoreError: the file cannot be opened or is not a database; ``readonly`` and no file yet.
    """

    FILENAME = "state.sqlite3"

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.where = str(self.path)
        self.readonly = readonly
        try:
            if readonly:
                if not self.path.exists():
                    raise StoreError(f"{self.path}: no state store yet (nothing has been indexed)")
                self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30,
                                           check_same_thread=False)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(self.path, timeout=30, check_same_thread=False,
                                           isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA busy_timeout = 30000")
            if not readonly:
                self._db.execute("PRAGMA journal_mode = WAL")
                self._db.execute("PRAGMA synchronous = NORMAL")
            migrate(self._db, self.path, readonly=readonly)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: cannot open the state store: {e}") from None
        self._lock = threading.Lock()

    def _tuples(self, sql: str, args=()) -> list[tuple]:
        """All the rows of one read as plain tuples: sqlite3's own, no :class:`sqlite3.Row` made
        and copied (a third of reading a million stat rows)."""
        cur = self._db.cursor()
        cur.row_factory = None
        try:
            return cur.execute(sql, args).fetchall()
        finally:
            cur.close()

    @classmethod
    def in_dir(cls, state_dir: str | Path, *, readonly: bool = False) -> Self:
        """Open the store file inside ``state_dir``."""
        return cls(Path(state_dir) / cls.FILENAME, readonly=readonly)

    @property
    def schema_version(self) -> int:
        """The file's schema version (``PRAGMA user_version``): :data:`~.migrations.SCHEMA_VERSION` once open."""
        return self._db.execute("PRAGMA user_version").fetchone()[0]

    def _transaction(self, steps: list[tuple[str, list[tuple]]]) -> None:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                for sql, rows in steps:
                    if rows:
                        self._db.executemany(sql, rows)
                self._db.execute("COMMIT")
            except sqlite3.Error as e:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise StoreError(f"{self.path}: write failed: {e}") from None
