"""Searches on a read replica (``[index.postgresql] read_url``): how far behind it is, and whether
it is taken for reads now.

Outside contract relied on (PostgreSQL 15, "Hot Standby" and "Monitoring" in its manual): a
streaming-replication standby answers read-only queries on the data it has *replayed*;
``pg_is_in_recovery()`` is true on a standby; ``pg_last_wal_receive_lsn()`` is the WAL it has
received from the primary and ``pg_last_wal_replay_lsn()`` the WAL it has replayed (both NULL on
a primary); ``pg_last_xact_replay_timestamp()`` is the primary's commit time of the last
transaction replayed (NULL until one is, after the standby starts).  So a standby that has
replayed all it received shows the primary as of then; one that has received more than it
replayed is behind by at least ``now() - pg_last_xact_replay_timestamp()``: the commits after
that one are not visible yet.  WAL the primary wrote but has not yet sent is not seen here (on
a loopback or LAN link that is milliseconds).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)

#: One statement on the replica: in recovery?, received more than replayed?, seconds since the
#: last replayed commit (since the standby started when none was replayed yet).
LAG_SQL = ("SELECT pg_is_in_recovery(), "
           "coalesce(pg_last_wal_receive_lsn() > pg_last_wal_replay_lsn(), false), "
           "extract(epoch FROM now() - coalesce(pg_last_xact_replay_timestamp(), "
           "pg_postmaster_start_time()))::float8")
#: Seconds the replica is left alone after it failed to answer (reads go to the primary).
REPLICA_RETRY_SECONDS = 30.0


def lag_seconds(in_recovery: bool, behind: bool, since_replay_seconds: float | None) -> float:
    """How far behind its primary a replica is, in seconds, from :data:`LAG_SQL`'s row: 0.0
    when it is no standby (promoted, or ``read_url`` names a primary) or has replayed all the
    WAL it received; else the age of the last replayed commit (at least 0.0)."""
    if not in_recovery or not behind or since_replay_seconds is None:
        return 0.0
    return max(0.0, float(since_replay_seconds))


class ReplicaHealth:
    """Whether reads go to the replica now.  After a failure they go to the primary for
    :data:`REPLICA_RETRY_SECONDS`, then the replica is tried again; the log says once that it
    stopped answering and once that it answers again (not once per query).

    Args:
        shown: the replica's masked URL and schema, for the log.
        clock: monotonic seconds (tests pass their own).

    Thread safety: every method may be called from any thread.
    """

    def __init__(self, shown: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.shown = shown
        self._clock = clock
        self._lock = threading.Lock()
        self._down_since: float | None = None

    @property
    def down(self) -> bool:
        """True from a failure until the replica answers again."""
        with self._lock:
            return self._down_since is not None

    def usable(self) -> bool:
        """True when a read should try the replica (it answers, or its retry time has come)."""
        with self._lock:
            return self._down_since is None or self._clock() - self._down_since >= REPLICA_RETRY_SECONDS

    def failed(self, why: str) -> None:
        """The replica did not answer (``why``): reads go to the primary for a while."""
        with self._lock:
            first = self._down_since is None
            self._down_since = self._clock()
        if first:
            log.warning("read replica at %s does not answer (%s); searching the primary until it does "
                        "(tried again every %g s)", self.shown, why, REPLICA_RETRY_SECONDS)

    def answered(self) -> None:
        """The replica answered a read."""
        with self._lock:
            was_down, self._down_since = self._down_since is not None, None
        if was_down:
            log.info("read replica at %s answers again; searches go to it", self.shown)
