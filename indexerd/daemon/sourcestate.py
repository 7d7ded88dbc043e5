"""What the daemon keeps per source between passes (``ctl status``'s view), and the start-up rule
of a source's first pass."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from indexerd.pipeline.stages import PassCounts
from indexerd.core.progress import Progress
from indexerd.sources.registry import kind


class SourceState:
    """What ``ctl status`` shows for one source's jobs (guarded by the daemon's lock).

    ``current_*`` describe the pass running now; ``last_*`` the last pass that ENDED (its own
    start and end, never the running pass's start); ``last_error`` is set when that pass itself
    failed (raised), None otherwise; ``last_message`` is the last error message of that pass (its
    failure, or the last document or step that failed: status shows why ``errors`` is not 0);
    ``latest_error`` keeps the most recent such message of any pass since the daemon started,
    with the time (aware UTC) its pass ended; ``last_interrupted`` is True when the daemon's stop
    cut that pass short (its counts are what was done before the stop; it resumes at the next
    start).
    """

    def __init__(self) -> None:
        self.running = False
        self.current: PassCounts | None = None
        self.current_started: datetime | None = None
        self.progress: Progress | None = None
        self.last_started: datetime | None = None
        self.last_finished: datetime | None = None
        self.last_counts: dict | None = None
        self.last_error: str | None = None
        self.last_interrupted = False
        self.last_message: str | None = None
        self.latest_error: tuple[datetime, str] | None = None
        self.watched = False
        self.watch_error: str | None = None  # why a tree configured to be watched is not
        self.rerun = False  # a reconcile was asked for while one was running
        self.recheck_asked = False  # `ctl crawl NAME --all`: the next pass asks everything, conditionally
        #: `ctl reindex` asked while a pass ran: the next pass to begin is forced, whoever starts it
        self.rerun_forced = False
        #: passes this node began, the number of the running one and of the last one ended (or, in
        #: a cluster, whose part ended): a request a running pass does not cover (forced, ``--all``)
        #: waits for a pass whose number is above the count when it was made
        self.passes_begun = 0
        self.current_number = 0
        self.last_number = 0
        #: passes (or, in a cluster, parts of a pass) this node ended, and the counts of the last
        #: one: a ``--wait`` request tells from them whether a pass ran while it waited
        self.pass_serial = 0
        self.last_part: dict | None = None
        self.lock = threading.Lock()  # one pass of a source at a time
        #: set to end this source's running pass early: at a stop, or when a reload removes it
        self.cancel = threading.Event()
        self.removed = False  # a reload removed the source: no pass of it may write again
        self.forget_on_end = False  # the reload gave up waiting: the pass forgets the source
        #: in a cluster: why this node did not run the source's last scheduled pass (another node
        #: runs it, or ran it lately), None when it did
        self.cluster_note: str | None = None
        #: in a cluster: another live node owns this tree (its claim was refused), so this node
        #: applies no live change of it either
        self.owned_elsewhere = False


def first_run_time(kind_name: str, interval_seconds: float, run: dict | None, now: datetime,
                   rebuilt_at: datetime | None = None) -> datetime:
    """When a source's first pass after a start runs (the start-up rule).

    A kind whose :attr:`~indexerd.sources.registry.Kind.reconcile_at_start` is set (a local
    tree: its stat reconcile is cheap, and the watch was off): now.  Any other (web, SQL): now if
    it never completed a pass or its last pass was interrupted (``running_since`` set: it
    resumes) or if that pass ended before the index was rebuilt (``rebuilt_at``, aware UTC: its
    documents are no longer in the index); else when its interval since the end of its last
    completed pass is due -- so a restart, or ``indexerd index`` followed by ``indexerd run``,
    does not crawl or poll again.

    Args:
        kind_name: the source's kind (``Source.kind``).
        run: the source's row of :meth:`Store.source_runs`, or None.
    """
    if kind(kind_name).reconcile_at_start or run is None or run["running_since"] is not None \
            or run["completed_at"] is None or (rebuilt_at is not None and run["completed_at"] < rebuilt_at):
        return now
    return max(now, run["completed_at"] + timedelta(seconds=interval_seconds))
