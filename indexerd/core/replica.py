"""Whether reads go to a read replica now: :class:`ReplicaHealth`, shared by the PostgreSQL
index (``[index.postgresql] read_url``) and the PostgreSQL state store (``[store] read_url``).

A replica that fails is left alone for :data:`REPLICA_RETRY_SECONDS` (its reads go to the
primary) and then tried again; the log says once that it stopped answering and once that it
answers again, not once per read.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)

#: Seconds a replica is left alone after it failed to answer (reads go to the primary).
REPLICA_RETRY_SECONDS = 30.0


#: a search read from a replica more than this many seconds behind its primary says so
#: (``replica_lag_seconds``), and so do ``ctl status``, the status page; less is the ordinary
#: delay of streaming replication
REPLICA_LAG_NOTE_SECONDS = 1.0


class ReplicaHealth:
    """Whether reads go to the replica now.  After a failure they go to the primary for
    :data:`REPLICA_RETRY_SECONDS`, then the replica is tried again; the log says once that it
    stopped answering and once that it answers again (not once per query).

    Args:
        shown: the replica's masked URL and schema, for the log.
        what: whose reads go to it (``searches``, ``the state store's search reads``), for the log.
        clock: monotonic seconds (tests pass their own).

    Thread safety: every method may be called from any thread.
    """

    def __init__(self, shown: str, clock: Callable[[], float] = time.monotonic, *,
                 what: str = "searches") -> None:
        self.shown = shown
        self.what = what
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
            log.warning("read replica at %s does not answer (%s); %s go to the primary until it does "
                        "(tried again every %g s)", self.shown, why, self.what, REPLICA_RETRY_SECONDS)

    def answered(self) -> None:
        """The replica answered a read."""
        with self._lock:
            was_down, self._down_since = self._down_since is not None, None
        if was_down:
            log.info("read replica at %s answers again; %s go to it", self.shown, self.what)
