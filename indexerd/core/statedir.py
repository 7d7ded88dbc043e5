"""The state directory: where the store, the index and the lock live, and who holds it.

One state dir, one writing process: ``indexerd run`` and ``indexerd index`` take an exclusive
``flock`` on ``<state_dir>/indexerd.lock`` (the kernel drops it when the process dies, so there
is never a stale lock) and write their pid and mode into it.  Readers (``ctl search``, reports)
take no lock.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import TYPE_CHECKING

from indexerd.core.errors import ConfigError, StateDirLocked, StoreError

if TYPE_CHECKING:
    from indexerd.core.store.postgresql import PgStoreAddress
    from indexerd.core.store import StoreLocation
    from indexerd.core.store.protocols import ClusterStateStore, StateStore


class StateDir:
    """Paths inside one state directory, and its single-writer lock.

    Raises (from :meth:`lock`):
        StateDirLocked: another process holds it; the message names its pid and mode and, when
            it is the daemon, says to use ``indexerd ctl scan`` instead.
        ConfigError: the directory cannot be created or written.
    """

    LOCKNAME = "indexerd.lock"

    def __init__(self, path: str | Path, store: PgStoreAddress | None = None) -> None:
        self.path = Path(path)
        self.store_address = store  # a PgStoreAddress, or None: the SQLite file here
        self._fd: int | None = None
        reader = store.reader() if store is not None else None
        #: whether the store's read replica (``[store] read_url``) takes search reads now
        self.store_replica = None
        if reader is not None:
            from indexerd.core.replica import ReplicaHealth

            self.store_replica = ReplicaHealth(reader.shown, what="the state store's search reads")

    @property
    def store_path(self) -> Path:
        """The SQLite store's file (used only when the store is not on PostgreSQL)."""
        return self.path / "state.sqlite3"

    @property
    def store_location(self) -> StoreLocation:
        """Where the state store is (:data:`indexerd.core.store.StoreLocation`): the
        PostgreSQL address of ``[store]``, else :attr:`store_path`."""
        return self.store_address if self.store_address is not None else self.store_path

    @property
    def shared(self) -> bool:
        """True when the store is on PostgreSQL (a cluster's nodes share it)."""
        return self.store_address is not None

    def open_store(self, *, readonly: bool = False) -> StateStore:
        """A new connection to the state store (one per thread).

        Raises: as :func:`indexerd.core.store.open_store`.
        """
        from indexerd.core.store import open_store

        return open_store(self.store_location, readonly=readonly)

    def open_cluster_store(self, *, readonly: bool = False) -> ClusterStateStore:
        """A new connection to the store a cluster shares (PostgreSQL), as :meth:`open_store`.

        Raises: as :func:`indexerd.core.store.open_store`; RuntimeError: the store is not
        shared (:attr:`shared` is False).
        """
        from indexerd.core.store import PgStore, open_store

        if self.store_address is None:
            raise RuntimeError("not in a cluster: the state store is not shared")
        store = open_store(self.store_address, readonly=readonly)
        assert isinstance(store, PgStore)
        return store

    def open_search_store(self) -> StateStore:
        """A new read-only connection for the store's reads that serve a search (collapsing
        identical hits, the search form's media types): on ``[store] read_url``'s replica when
        there is one and it answers (:class:`indexerd.core.replica.ReplicaHealth`), else as
        :meth:`open_store` with ``readonly``.

        Raises: as :func:`indexerd.core.store.open_store` (for the primary).
        """
        health, address = self.store_replica, self.store_address
        reader = address.reader() if address is not None else None
        if health is not None and reader is not None and health.usable():
            from indexerd.core.store import open_store

            try:
                store = open_store(reader, readonly=True)
            except StoreError as e:
                health.failed(str(e))
            else:
                health.answered()
                return store
        return self.open_store(readonly=True)

    def record_store(self) -> None:
        """Leave the PostgreSQL store's address (no password) in the state dir for readers
        without the config (``ctl search``, ``ctl report``); remove a stale one otherwise."""
        from indexerd.core.store import PgStoreAddress

        f = self.path / PgStoreAddress.FILENAME
        try:
            if self.store_address is not None:
                self.store_address.record(self.path)
            elif f.exists():
                f.unlink()
        except OSError as e:
            raise StoreError(f"state dir {self.path}: cannot write {f}: {e.strerror}") from None

    def create(self) -> None:
        """Create the directory (mode 0750) if needed."""
        try:
            self.path.mkdir(parents=True, exist_ok=True, mode=0o750)
        except OSError as e:
            raise ConfigError(f"state_dir {self.path}: cannot create it: {e.strerror}") from None

    def lock(self, mode: str) -> None:
        """Take the exclusive lock for ``mode`` (``daemon`` or ``index``)."""
        self.create()
        lock_path = self.path / self.LOCKNAME
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o640)
        except OSError as e:
            raise ConfigError(f"state_dir {self.path}: cannot open {lock_path}: {e.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
            os.close(fd)
            pid = holder[0] if holder else "?"
            what = holder[1] if len(holder) > 1 else "indexerd"
            hint = ("; use `indexerd ctl scan|crawl|poll NAME` to ask the running daemon for a pass"
                    if what == "daemon" else "")
            raise StateDirLocked(f"state dir {self.path} is in use by another indexerd "
                                 f"({what}, pid {pid}){hint}") from None
        try:  # who holds it, for the message a second process prints
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {mode}\n".encode(), 0)
        except OSError as e:
            os.close(fd)
            raise StoreError(f"state dir {self.path}: cannot write {lock_path}: {e.strerror}") from None
        self._fd = fd

    def unlock(self) -> None:
        """Release the lock; safe to call twice."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            os.close(fd)
