"""The daemon's stop sequence: everything started is stopped in reverse start order within
:data:`STOP_WAIT_SECONDS`, then what is done is committed and the state dir closed."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from indexerd.daemon.main import Daemon

log = logging.getLogger(__name__)

#: Seconds a stop waits for running passes before it commits and exits without them: well under
#: systemd's ``TimeoutStopSec`` (20 s in the shipped unit), whatever the sources' timeouts.
STOP_WAIT_SECONDS = 4.0
#: After the passes, how long a stop waits for the index writer's last commit (seconds).
WRITER_STOP_WAIT_SECONDS = 4.0


def shutdown(d: Daemon) -> None:
    """Stop ``d`` in reverse start order within :data:`STOP_WAIT_SECONDS`, then commit and close.

    A stop cuts the web requests in flight (the fetcher's cancel) and every pass ends at its
    next check of ``stop_event``; a pass still running when the bound is spent is left behind
    (``d.abandoned``: source names, ``change-worker``, ``index-writer``): what it queued stays
    in the store and resumes at the next start, and :func:`~indexerd.daemon.main.run_daemon`
    ends the process without waiting for its thread.
    """
    by = time.monotonic() + STOP_WAIT_SECONDS

    def left() -> float:
        return max(0.0, by - time.monotonic())

    d.stop_event.set()
    for st in list(d.states.values()):
        st.cancel.set()
    d.reloader.release_for_stop()
    if d.pinger is not None:
        d.pinger.stop()
    if d.http is not None:
        d.http.stop()
    if d.control is not None:
        d.control.stop()
    d.queries.close()
    d.live.stop()
    d.jobs.shutdown()
    worker_done = d.live.join(timeout=left())
    for name, st in d.states.items():  # a running pass notices stop_event and ends early
        if not st.lock.acquire(timeout=left()):
            d.abandoned.append(name)
    if not worker_done and not d.live.join(timeout=0):
        d.abandoned.append("change-worker")
    if d.abandoned:
        log.warning("stop: %s still running after %.0f s; committing what is done, the rest resumes "
                    "at the next start", ", ".join(d.abandoned), STOP_WAIT_SECONDS)
    # commits what is pending; a writer busy past the bound (one huge document) is left
    # behind like a pass, and run_daemon ends the process
    if not d.indexer.close(writer_timeout=left() + WRITER_STOP_WAIT_SECONDS):
        d.abandoned.append("index-writer")
    if not d.ready:  # start-up failed: the caller reports why; "stopped cleanly" would mislead
        log.debug("start-up failed; closed what was opened")
    else:
        log.info("stopped cleanly" if not d.abandoned else "stopped")
