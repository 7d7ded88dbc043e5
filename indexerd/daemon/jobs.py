"""The daemon's job scheduling (APScheduler): one periodic pass per source, one-off passes asked
for now, and the retry of sources whose writes failed.

Jobs: ``reconcile:<source>`` (every ``interval``, jittered; ``max_instances=1``, missed runs
coalesced), ``reconcile-now:<source>`` (one-off; a second instance may start while the first ends),
``retry-failed-writes`` (one-off, backing off).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from indexerd.runtime.recovery import rebuilt_at
from indexerd.daemon.sourcestate import first_run_time

if TYPE_CHECKING:
    from indexerd.daemon.main import Daemon

log = logging.getLogger(__name__)
#: In a cluster, seconds between two looks for web passes other nodes began (one read of the
#: pass state per shared source: a pass begun by hand elsewhere is joined within about a second).
JOIN_POLL_SECONDS = 1.0
#: Passes one daemon runs at once.
PASS_THREADS = 4
#: In a cluster, at most this many more threads for the web passes every node takes part in.
MAX_SHARED_PASS_THREADS = 28
UTC = timezone.utc


class Jobs:
    """The scheduler of the daemon's passes.

    Args:
        daemon: the daemon whose sources, states and passes are scheduled.

    Thread safety: :meth:`run_soon` and :meth:`writer_failed` may be called from any thread;
    :meth:`start`, :meth:`arm` and :meth:`shutdown` from the main thread.
    """

    def __init__(self, daemon: Daemon) -> None:
        self.d = daemon
        self.scheduler: Any = None  # APScheduler's BackgroundScheduler (untyped) once started
        self._failed_sources: set[str] = set()
        self._failure_streak = 0
        self._last_failure = 0.0

    def start(self) -> None:
        """Start the scheduler's pool: :data:`PASS_THREADS` threads (passes of different sources
        run at once); in a cluster one more for each web source configured at start, since
        every node takes part in every web pass (:mod:`indexerd.sources.web.sharedfrontier`)
        and a pass waits for its hosts' politeness delays most of its time."""
        from apscheduler.schedulers.background import BackgroundScheduler
        from indexerd.sources.registry import KINDS

        threads = PASS_THREADS
        if self.d.indexer.state.shared:
            shared = sum(len(getattr(self.d.cfg.sources, k.name, None) or ()) for k in KINDS.values() if k.pass_shared)
            threads += min(MAX_SHARED_PASS_THREADS, shared)

        # APScheduler logs every job run at INFO; ours says what a pass did. Its warnings
        # (skipped or missed runs) still show.
        logging.getLogger("apscheduler").setLevel(max(logging.WARNING, log.getEffectiveLevel()))
        self.scheduler = BackgroundScheduler(
            timezone="UTC", executors={"default": {"type": "threadpool", "max_workers": threads}},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 3600})
        self.scheduler.start()
        if self.d.indexer.state.shared:
            self.scheduler.add_job(self._join_shared_passes, "interval", seconds=JOIN_POLL_SECONDS,
                                   id="cluster-join", replace_existing=True, max_instances=1, coalesce=True)

    def _join_shared_passes(self) -> None:
        """In a cluster: a web pass another node began (``ctl crawl`` there, or a node that
        stopped left it to the others) is joined here within :data:`JOIN_POLL_SECONDS`, not at
        this node's own next schedule."""
        for name in list(self.d.sources):
            if self.join_if_running(name) is None:
                return  # the store is unreachable: the passes' own retries cover it

    def join_if_running(self, name: str) -> bool | None:
        """In a cluster: when a pass of source ``name`` (a kind whose passes the nodes share)
        runs on another node and none runs here, join it now; True if joined, False if there is
        nothing to join, None when the store cannot be read.  Also asked when this node's part
        of a pass ends: another node may have begun the next one meanwhile (``ctl reindex
        --source`` there), which this node would otherwise join only at the next poll."""
        from indexerd.core.errors import IndexerdError
        from indexerd.sources.registry import kind

        d = self.d
        src, st = d.sources.get(name), d.states.get(name)
        if src is None or st is None or st.running or not kind(src.kind).pass_shared:
            return False
        pass_running = getattr(src, "pass_running", None)  # kinds whose passes the cluster shares
        if pass_running is None:
            return False
        try:
            running = bool(pass_running(d.indexer.store))
        except IndexerdError:
            return None
        if running:
            self.run_later(name, 0.0)
        return running

    def shutdown(self) -> None:
        """Stop starting jobs; running ones are not waited for (the stop sequence does that)."""
        if self.scheduler is not None:
            self.scheduler.shutdown(wait=False)

    def next_run(self, name: str) -> datetime | None:
        """When source ``name``'s periodic pass runs next (aware UTC), or None."""
        job = self.scheduler.get_job(f"reconcile:{name}") if self.scheduler else None
        return job.next_run_time if job else None

    def arm(self, initial: bool, changed: set[str] | None = None) -> None:
        """(Re)arm the periodic job of every current source: at the start by the start-up rule
        (:func:`first_run_time`), a new or changed source's now, an unchanged one keeps its
        schedule across a reload."""
        from apscheduler.triggers.interval import IntervalTrigger

        d = self.d
        for job in self.scheduler.get_jobs():
            name = job.id.partition(":")[2]
            if job.id.startswith("reconcile:") and (name not in d.sources or (changed and name in changed)):
                job.remove()  # unchanged sources keep their schedule across a reload
        now = datetime.now(UTC)
        runs = d.indexer.store.source_runs() if initial else {}
        rebuilt = rebuilt_at(d.indexer.store) if initial else None
        for name, src in d.sources.items():
            st = d.states[name]
            interval = float(src.cfg.interval)
            if initial:
                first = first_run_time(src.kind, interval, runs.get(name), now, rebuilt)
                if first > now:  # not run at start: status shows the pass the next run counts from
                    r = runs[name]
                    st.last_started, st.last_finished, st.last_counts = (r["started_at"], r["finished_at"],
                                                                         r["counts"])
            elif changed is not None and name in changed:
                first = now
            elif self.scheduler.get_job(f"reconcile:{name}") is not None:
                continue
            else:
                first = None  # one interval from now
            extra = {"next_run_time": first} if first is not None else {}
            self.scheduler.add_job(d.passes.run, IntervalTrigger(seconds=interval, jitter=min(60, interval / 10)),
                                   args=[name], id=f"reconcile:{name}", replace_existing=True, **extra)

    def run_soon(self, names) -> None:
        """A pass of each source in ``names`` now (one already running runs again when it ends)."""
        if self.scheduler is None:
            return
        d = self.d
        now = datetime.now(UTC)
        for n in names:
            st = d.states.get(n)
            if st is None:
                continue
            with d.lock:
                if st.running:
                    st.rerun = True  # run again when this pass ends (a second instance would be skipped)
                    continue
            # a one-off job of its own: the periodic job may be the caller, still "running"; so may
            # this very job, asking from the end of its pass for the pass queued meanwhile: a second
            # instance is allowed (with one, APScheduler skipped that pass: "maximum number of
            # running instances reached"), the source's lock still lets one pass run at a time
            self.scheduler.add_job(d.passes.run, "date", run_date=now, args=[n], kwargs={"asked": True},
                                   id=f"reconcile-now:{n}", max_instances=2,
                                   replace_existing=True, misfire_grace_time=None)

    def run_later(self, name: str, seconds: float, *, asked: bool = False) -> None:
        """A pass of source ``name`` in ``seconds`` (a node standing by for a pass another node
        of the cluster runs; ``asked``: for a request); one such job per source."""
        if self.scheduler is None or name not in self.d.sources:
            return
        self.scheduler.add_job(self.d.passes.run, "date", run_date=datetime.now(UTC) + timedelta(seconds=seconds),
                               args=[name], kwargs={"asked": asked, "standby": True}, id=f"standby:{name}",
                               replace_existing=True, max_instances=2,  # the caller may be this job (run_soon)
                               misfire_grace_time=None)

    def writer_failed(self, sources: set[str] | None) -> None:
        """The writer dropped changes (disk full, read-only state dir), or a change or pass
        found the store or the index unreachable: reconcile their sources again after 2, 4, 8
        ... 256 s (the streak restarts after 10 quiet minutes), so they are
        indexed once the disk has room again without waiting for the interval.  ``sources``
        None: every source."""
        import time

        d = self.d
        now = time.monotonic()
        with d.lock:
            self._failed_sources |= sources if sources is not None else set(d.sources)
            if self.scheduler is not None and self.scheduler.get_job("retry-failed-writes") is not None:
                return  # the retry already scheduled covers these sources too (one line, not one per document)
            if now - self._last_failure > 600:
                self._failure_streak = 0
            self._failure_streak += 1
            self._last_failure = now
            delay = 2.0 ** min(self._failure_streak, 8)
        if self.scheduler is not None and not d.stop_event.is_set():
            log.warning("changes could not be written (the index or the store failed); reconciling %s in %.0f s",
                        ", ".join(sorted(self._failed_sources)) or "the sources", delay)
            self.scheduler.add_job(self._retry_failed, "date", run_date=datetime.now(UTC) + timedelta(seconds=delay),
                                   id="retry-failed-writes", replace_existing=True, misfire_grace_time=None)

    def _retry_failed(self) -> None:
        with self.d.lock:
            names, self._failed_sources = self._failed_sources, set()
        self.run_soon(sorted(names))
