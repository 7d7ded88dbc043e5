"""``indexerd run``: the long-running service.

Start order (stop runs in reverse): lock the state dir and open the store/index (reconciling
after a crash) -> control socket -> watchers -> scheduler, whose first run of every source's job
is the start-up reconcile, in the background -> ``READY=1`` to systemd.  So a long first scan
never trips systemd's start timeout, and ``ctl status`` shows its progress.

Threads: the index writer (one); the change worker (watcher events, one path at a time); the
scheduler's pool (reconcile jobs; ``max_instances=1`` per job, missed runs coalesced); the control
server's connection threads; the watchdog pinger.  Each thread that reads the store opens its own
connection (:meth:`Daemon._pipeline`).

Signals stay at this edge: SIGTERM/SIGINT set one stop Event; SIGHUP sets a reload Event; the
main thread acts on both.
"""

from __future__ import annotations

import logging
import os
import signal
import stat as stat_mod
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

from indexerd.daemon import notify
from indexerd.config import Config, load_config, resolve_control_socket
from indexerd.core.errors import ConfigError, IndexerdError, RetryLater
from indexerd.sources.files.keys import display_path, key_to_path, path_to_key
from indexerd.sources.files.scan import FileSource
from indexerd.core.indexer import Indexer, build_sources, mark_pass_started
from indexerd.core.counts import PassCounts
from indexerd.core.pipeline import Pipeline
from indexerd.core.progress import UNITS, Progress
from indexerd.core.store import Store
from indexerd.sources.files.watch import ChangeQueue, TreeWatcher

log = logging.getLogger(__name__)
UTC = timezone.utc
#: how long ``ctl reload`` waits for the main thread's reload (under the unit's 60 s start timeout)
RELOAD_WAIT_SECONDS = 50.0

#: Seconds a stop waits for running passes before it commits and exits without them: well under
#: systemd's ``TimeoutStopSec`` (20 s in the shipped unit), whatever the sources' timeouts.
STOP_WAIT_SECONDS = 4.0
#: After the passes, how long a stop waits for the index writer's last commit (seconds).
WRITER_STOP_WAIT_SECONDS = 4.0
#: How long (seconds) a reload waits for the cancelled pass of a removed source to end before it
#: forgets the source; a pass still running then forgets its source itself when it ends.
REMOVE_WAIT_SECONDS = 10.0


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
        self.lock = threading.Lock()  # one pass of a source at a time
        #: set to end this source's running pass early: at a stop, or when a reload removes it
        self.cancel = threading.Event()
        self.removed = False  # a reload removed the source: no pass of it may write again
        self.forget_on_end = False  # the reload gave up waiting: the pass forgets the source


class PassFailed(IndexerdError):
    """A pass a control request waited for failed; the reply says why (exit 1)."""


def first_run_time(kind: str, interval_seconds: float, run: dict | None, now: datetime) -> datetime:
    """When a source's first pass after a start runs (the start-up rule).

    A local tree: now (its stat reconcile is cheap, and the watch was off).  A web or SQL source:
    now if it never completed a pass or its last pass was interrupted (``running_since`` set: it
    resumes); else when its interval since the end of its last completed pass is due -- so a
    restart, or ``indexerd index`` followed by ``indexerd run``, does not crawl or poll again.

    Args:
        run: the source's row of :meth:`Store.source_runs`, or None.
    """
    if kind == "filesystem" or run is None or run["running_since"] is not None or run["completed_at"] is None:
        return now
    return max(now, run["completed_at"] + timedelta(seconds=interval_seconds))


class Daemon:
    """The service for one config file.

    Args:
        cfg: the validated configuration.
        config_path: where it came from (re-read on SIGHUP); None for defaults.
    """

    def __init__(self, cfg: Config, config_path: str | None) -> None:
        self.cfg = cfg
        self.config_path = config_path
        self.indexer = Indexer(cfg, live=True)
        self.stop_event = threading.Event()
        self.reload_event = threading.Event()
        self.changes = ChangeQueue()
        self.states: dict[str, SourceState] = {}
        self._lock = threading.Lock()
        self.started_at = datetime.now(UTC)
        self.watcher: TreeWatcher | None = None
        self.scheduler = None
        self.control = None
        self._worker: threading.Thread | None = None
        self._pinger: notify.WatchdogPinger | None = None
        self._failed_sources: set[str] = set()
        self._failure_streak = 0
        self._last_failure = 0.0
        #: what a stop left running (source names, ``change-worker``); see :meth:`_shutdown`
        self.abandoned: list[str] = []
        self._ready = False  # READY=1 was sent: start-up completed
        self._reload_waiters: list[tuple[threading.Event, dict]] = []
        #: the last reload's outcome (``ctl status`` "reload"): when (aware UTC), ok, error, how
        #: asked (``signal`` or ``ctl``), and when the config in use was loaded
        self.reload_info: dict = {"at": None, "ok": None, "error": None, "via": None,
                                  "loaded_at": self.started_at}
        from indexerd.daemon.http.metrics import DaemonMetrics
        from indexerd.daemon.queries import QueryRunner

        self.metrics = DaemonMetrics(self.status)
        #: searches on the open index (ctl search and the HTTP listener), bounded in time
        self.queries = QueryRunner(lambda: self.indexer._index, timeout_seconds=cfg.http.query_timeout,
                                   observe=lambda via, s: self.metrics.query_seconds.labels(via=via).observe(s))
        self.http = None  # the HTTP listener, when [http] listen is set
        #: live edits submitted to the writer and not yet committed: (submitted, first event),
        #: monotonic seconds, for the edit-to-searchable metric
        self._edits: list[tuple[float, float]] = []

    @property
    def sources(self) -> dict[str, FileSource]:
        return self.indexer.sources

    # -- lifecycle ------------------------------------------------------------------------
    def run(self) -> int:
        """Run until SIGTERM/SIGINT; returns the exit code (0 after a clean stop)."""
        self._install_signals()
        from indexerd.daemon.writeaccess import read_warnings, write_warnings

        for msg in read_warnings(self.cfg) + write_warnings(self.cfg):  # once, not once per file/page/row
            log.warning("%s", msg)
        self.indexer.open("daemon")
        try:
            from indexerd.daemon.control import ControlServer

            sock = resolve_control_socket(self.cfg)
            self.control = ControlServer(sock, self.handle_request)
            self.control.start()
            self.indexer._get_writer().on_failure = self._writer_failed  # runs from the start
            self.indexer._get_writer().on_commit = self._committed
            self._seed_metrics()
            if self.cfg.http.listen:
                from indexerd.daemon.http.server import start_listener

                self.http = start_listener(self, self.cfg.http)
            self._worker = threading.Thread(target=self._change_loop, name="change-worker", daemon=True)
            self._worker.start()
            self.watcher = TreeWatcher(self.changes, self._accepts, self._on_overflow, self._on_watch_limit)
            self.watcher.start()
            # the configured sources are the truth at every start: finish forgetting removed ones
            # (a purge a kill -9 interrupted resumes here) before any pass of the others
            self.indexer.forget_sources(self.indexer.removed_sources(), cancel=self.stop_event)
            self._start_scheduler()
            self._apply_sources(initial=True)
            self._pinger = notify.WatchdogPinger(healthy=self._healthy)
            self._pinger.start()
            notify.ready(self._status_line())
            self._ready = True
            log.info("indexerd %s ready: %d sources, control socket %s", os.getpid(), len(self.sources), sock)
            last_status = 0.0
            while not self.stop_event.wait(0.5):
                if self.reload_event.is_set():
                    self.reload_event.clear()
                    self._reload_now()
                self._check_watches()
                if time.monotonic() - last_status > 10:
                    last_status = time.monotonic()
                    notify.status(self._status_line())
            log.info("stopping")
            notify.stopping()
            return 0
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        """Stop in reverse start order within :data:`STOP_WAIT_SECONDS`, then commit and close.

        A stop cuts the web requests in flight (the fetcher's cancel) and every pass ends at
        its next check of ``stop_event``; a pass still running when the bound is spent is left
        behind (:attr:`abandoned`): what it queued stays in the store and resumes at the next
        start, and :func:`run_daemon` ends the process without waiting for its thread.
        """
        by = time.monotonic() + STOP_WAIT_SECONDS

        def left() -> float:
            return max(0.0, by - time.monotonic())

        self.stop_event.set()
        for st in list(self.states.values()):
            st.cancel.set()
        with self._lock:  # a ctl reload waiting now gets its answer instead of a timeout
            waiters, self._reload_waiters = self._reload_waiters, []
        for done, slot in waiters:
            slot["stopping"] = True
            done.set()
        if self._pinger is not None:
            self._pinger.stop()
        if self.http is not None:
            self.http.stop()
        if self.control is not None:
            self.control.stop()
        self.queries.close()
        if self.watcher is not None:
            self.watcher.stop()
        if self.scheduler is not None:
            self.scheduler.shutdown(wait=False)
        self.changes.wake()
        if self._worker is not None:
            self._worker.join(timeout=left())
        for name, st in self.states.items():  # a running pass notices stop_event and ends early
            if not st.lock.acquire(timeout=left()):
                self.abandoned.append(name)
        if self._worker is not None and self._worker.is_alive():
            self.abandoned.append("change-worker")
        if self.abandoned:
            log.warning("stop: %s still running after %.0f s; committing what is done, the rest resumes "
                        "at the next start", ", ".join(self.abandoned), STOP_WAIT_SECONDS)
        # commits what is pending; a writer busy past the bound (one huge document) is left
        # behind like a pass, and run_daemon ends the process
        if not self.indexer.close(writer_timeout=left() + WRITER_STOP_WAIT_SECONDS):
            self.abandoned.append("index-writer")
        if not self._ready:  # start-up failed: the caller reports why; "stopped cleanly" would mislead
            log.debug("start-up failed; closed what was opened")
        else:
            log.info("stopped cleanly" if not self.abandoned else "stopped")

    def _install_signals(self) -> None:
        def stop(signum, frame):
            self.stop_event.set()

        def hup(signum, frame):
            self.reload_event.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGHUP, hup)

    def _healthy(self) -> bool:
        w = self.indexer._writer
        return w is not None and w._thread.is_alive() and (self._worker is None or self._worker.is_alive())

    # -- sources, watches, jobs -----------------------------------------------------------
    def _start_scheduler(self) -> None:
        from apscheduler.schedulers.background import BackgroundScheduler

        # APScheduler logs every job run at INFO; ours says what a pass did. Its warnings
        # (skipped or missed runs) still show.
        logging.getLogger("apscheduler").setLevel(max(logging.WARNING, log.getEffectiveLevel()))
        self.scheduler = BackgroundScheduler(
            timezone="UTC", executors={"default": {"type": "threadpool", "max_workers": 4}},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 3600})
        self.scheduler.start()

    def _apply_sources(self, initial: bool, changed: set[str] | None = None) -> None:
        """(Re)arm watches and jobs for the current sources; reconcile new/changed ones now."""
        from apscheduler.triggers.interval import IntervalTrigger

        self.watcher.unwatch_all()
        for job in self.scheduler.get_jobs():
            name = job.id.partition(":")[2]
            if job.id.startswith("reconcile:") and (name not in self.sources or (changed and name in changed)):
                job.remove()  # unchanged sources keep their schedule across a reload
        now = datetime.now(UTC)
        runs = self.indexer.store.source_runs() if initial else {}
        for name, src in self.sources.items():
            st = self.states.setdefault(name, SourceState())
            st.watched = (src.kind == "filesystem" and bool(src.cfg.watch) and os.path.isdir(src.root)
                          and self.watcher.watch(name, src.root))
            st.watch_error = self.watcher.errors.get(name) if src.kind == "filesystem" else None
            if st.watch_error:
                log.warning("%s: not watched (%s): kept current by scheduled reconciles every %s s",
                            name, st.watch_error, src.cfg.interval)
            interval = float(src.cfg.interval)
            if initial:
                first = first_run_time(src.kind, interval, runs.get(name), now)
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
            self.scheduler.add_job(self.reconcile, IntervalTrigger(seconds=interval, jitter=min(60, interval / 10)),
                                   args=[name], id=f"reconcile:{name}", replace_existing=True, **extra)

    def _reload_now(self) -> None:
        """Run one reload in the main thread for a SIGHUP and every ``ctl reload`` waiting.

        A SIGHUP reload speaks systemd's reload protocol itself (``RELOADING=1`` ... ``READY=1``,
        sd_notify(3)); a ``ctl reload`` (the unit's ``ExecReload=``) does not: there systemd
        waits for that command, whose exit status tells ``systemctl reload`` the outcome.
        """
        with self._lock:
            waiters, self._reload_waiters = self._reload_waiters, []
        signalled = not waiters
        if signalled:
            notify.reloading()
        error = self.reload()
        with self._lock:
            self.reload_info = {**self.reload_info, "at": datetime.now(UTC), "ok": error is None,
                                "error": error, "via": "signal" if signalled else "ctl"}
            if error is None:
                self.reload_info["loaded_at"] = self.reload_info["at"]
        if signalled:
            notify.ready(self._status_line())
        else:
            notify.status(self._status_line())
        for done, slot in waiters:
            slot["error"] = error
            done.set()

    def reload(self) -> str | None:
        """Re-read the config; on any error keep the old one and return why (None: reloaded)."""
        try:
            new = load_config(self.config_path) if self.config_path else self.cfg
            new_sources = build_sources(new)
        except IndexerdError as e:
            log.error("reload refused, keeping the old config: %s", e)
            return str(e)
        old = self.sources
        removed = set(old) - set(new_sources)
        changed = {n for n, s in new_sources.items() if n not in old or old[n].cfg != s.cfg}
        if new.index != self.cfg.index or new.state_dir != self.cfg.state_dir:
            log.warning("reload: [index] and state_dir changes take effect at the next restart")
        self.cfg = new
        self.indexer.cfg = new
        self.indexer.sources = new_sources
        still_running = self._end_passes_of(removed)
        try:  # before the new sources' first pass: a renamed source shares its keys with its old name
            self.indexer.forget_sources([n for n in self.indexer.removed_sources() if n not in still_running],
                                        cancel=self.stop_event)
        except IndexerdError as e:
            log.error("removing sources: %s; the rest is done at the next start", e)
        self._apply_sources(initial=False, changed=changed)
        log.info("reloaded %s: %d sources (%d new or changed, %d removed)", self.config_path,
                 len(new_sources), len(changed), len(removed))
        return None

    def _end_passes_of(self, removed: set[str]) -> set[str]:
        """Cancel the running pass of each removed source and wait (at most
        :data:`REMOVE_WAIT_SECONDS` in all) until it has ended, so that nothing it writes can
        land after the source is forgotten.  A removed source's lock stays held: no later pass
        of it starts.  Returns the names whose pass had not ended in time (each forgets its
        source itself when it ends, see :meth:`reconcile`)."""
        by = time.monotonic() + REMOVE_WAIT_SECONDS
        ending = []
        with self._lock:
            for name in removed:
                st = self.states.pop(name, None)
                if st is not None:
                    st.removed = True
                    st.cancel.set()
                    ending.append((name, st))
        late = set()
        for name, st in ending:
            if st.lock.acquire(timeout=max(0.0, by - time.monotonic())):
                continue
            with self._lock:  # the pass reads forget_on_end under this lock after releasing its own
                if st.lock.acquire(blocking=False):
                    continue          # it ended just now: forgotten below, like the others
                st.forget_on_end = True
            late.add(name)
            log.warning("removed source %s: its pass is still running after %.0f s; it is forgotten "
                        "when that pass ends", name, REMOVE_WAIT_SECONDS)
        return late

    def _forget_after_pass(self, name: str) -> None:
        """Forget source ``name``, removed by a reload while its pass ran longer than
        :data:`REMOVE_WAIT_SECONDS` (that pass's thread, after it ended)."""
        if name in self.sources:     # added again since: its new passes keep what they index
            return
        try:
            with self._pipeline() as pipeline:
                self.indexer.forget_sources([name], pipeline=pipeline, cancel=self.stop_event)
        except IndexerdError as e:
            log.error("removing source %s: %s; the rest is done at the next start", name, e)

    @contextmanager
    def _pipeline(self):
        store = Store(self.indexer.state.store_path)
        try:
            yield Pipeline(self.indexer._get_writer, store, self.indexer.counters)
        finally:
            store.close()

    def reconcile(self, name: str, forced: bool = False, start: str | None = None) -> dict | None:
        """One stat reconcile of source ``name`` (the scheduled job, ``ctl scan``, overflow)."""
        src = self.sources.get(name)
        st = self.states.get(name)
        if src is None or st is None:
            return None
        if not st.lock.acquire(timeout=0.1 if not forced else 30):
            with self._lock:
                st.rerun = True  # the running pass starts another when it ends
            log.info("%s: a pass is already running; another will follow it", name)
            return None
        if st.removed:   # removed by a reload while this waited for the lock
            st.lock.release()
            return None
        counts = PassCounts()
        pass_error = None
        try:
            with self._lock:
                st.rerun = False  # this pass covers every request made before it started
                st.running, st.current = True, counts
                st.current_started = datetime.now(UTC)
                st.progress = Progress(name, tty=False, log_every_seconds=10,
                                       unit=UNITS.get(src.kind, "files"))
            with self._pipeline() as pipeline:
                mark_pass_started(pipeline.store, name, src.kind, st.current_started)
                pipeline.urgent = False  # a pass commits about once a second, not per drain
                src.run_pass(pipeline, counts, progress=st.progress, forced=forced, start=start,
                             cancel=st.cancel)
                pipeline.flush(timeout=60)  # RetryLater: a write or commit of this pass failed
        except RetryLater as e:
            pass_error = f"index commit failed: {e}"
            log.error("%s: %s; what was not committed is retried", name, pass_error)
        except Exception as e:
            pass_error = f"{type(e).__name__}: {e}"
            log.exception("%s: reconcile failed", name)
        finally:
            pass_error = pass_error or counts.failed  # raised, or the source says its pass failed
            with self._lock:
                st.running, st.current = False, None
                st.last_started, st.last_finished = st.current_started, datetime.now(UTC)
                st.last_counts = counts.as_dict()
                st.last_error = pass_error
                st.last_interrupted = self.stop_event.is_set()
                st.last_message = pass_error or counts.last_error
                if st.last_message:
                    st.latest_error = (st.last_finished, st.last_message)
                rerun, st.rerun = st.rerun, False
            try:  # under the pass's lock: a reload removing the source forgets it after this
                if not (self.stop_event.is_set() or st.cancel.is_set()):  # interrupted: keeps its running mark
                    with Store(self.indexer.state.store_path) as store:
                        store.record_run(name, src.kind, st.last_started, st.last_finished, st.last_counts,
                                         completed=not pass_error)
            except IndexerdError as e:
                log.error("%s", e)
            self.metrics.observe_pass(name, src.kind, (st.last_finished - st.last_started).total_seconds(),
                                      ok=not pass_error, ended_at=st.last_finished.timestamp())
            st.lock.release()
            with self._lock:
                forget_now, st.forget_on_end = st.forget_on_end, False
            if forget_now:
                self._forget_after_pass(name)
            if rerun and not self.stop_event.is_set() and not st.removed:
                log.info("%s: another reconcile was requested during this one; running it now", name)
                self._reconcile_soon({name})
        if st.removed:
            log.info("%s: pass cancelled, the source was removed (%s)", name, st.last_counts)
            return st.last_counts
        log.info("%s: reconcile %s", name, st.last_counts)
        self._rewatch_after_pass(name, src, st)
        return st.last_counts

    # -- live changes ---------------------------------------------------------------------
    def _source_for(self, path: str) -> FileSource | None:
        best = None
        for src in self.sources.values():
            if src.kind == "filesystem" and src.contains(path) and (best is None or len(src.root) > len(best.root)):
                best = src
        return best

    def _accepts(self, source: str, path: str, is_dir: bool) -> bool:
        src = self.sources.get(source)
        if src is None or src.kind != "filesystem" or not src.contains(path) or path == src.root:
            return False
        rel = src.relpath(path)
        if is_dir:
            parts = rel.split("/")
            return not any(src.matcher.dir_excluded(parts[i], "/".join(parts[:i + 1])) for i in range(len(parts)))
        return src.matcher.path_selected(rel)

    def _on_overflow(self) -> None:
        log.warning("file events were lost (inotify queue overflow): reconciling every watched tree now")
        self.indexer.counters.inc("watch.overflow")
        self._reconcile_soon(self.watcher.watched_sources() if self.watcher else set(self.sources))

    def _check_watches(self) -> None:
        """A watch whose thread died (an exception in watchdog: a tree too deep for its walk
        moved in) is reported and set up again; while that fails, the tree is kept current by
        its scheduled reconciles (each retries the watch).  Either way a reconcile runs now: the
        events since the death were lost."""
        if self.watcher is None:
            return
        for name, why in self.watcher.check().items():
            st, src = self.states.get(name), self.sources.get(name)
            if st is None or src is None:
                continue
            self.indexer.counters.inc("watch.died")
            log.error("%s: the watcher of %s stopped (%s); setting it up again", name,
                      display_path(src.root), why)
            ok = os.path.isdir(src.root) and self.watcher.watch(name, src.root)
            with self._lock:
                st.watched = ok
                st.watch_error = None if ok else self.watcher.errors.get(name, why)
            if not ok:
                log.warning("%s: not watched (%s): kept current by scheduled reconciles every %s s",
                            name, st.watch_error, src.cfg.interval)
            notify.status(self._status_line())
            self._reconcile_soon({name})

    def _rewatch_after_pass(self, name: str, src, st: SourceState) -> None:
        """After a pass of a tree whose watch failed: try to watch it again (the deep tree may
        be gone)."""
        if self.watcher is None or src.kind != "filesystem" or not src.cfg.watch or not st.watch_error \
                or self.stop_event.is_set() or not os.path.isdir(src.root):
            return
        if self.watcher.watch(name, src.root):
            with self._lock:
                st.watched, st.watch_error = True, None
            log.info("%s: watched again", name)
            notify.status(self._status_line())
        else:
            with self._lock:
                st.watch_error = self.watcher.errors.get(name, st.watch_error)

    def _on_watch_limit(self, name: str) -> None:
        self.indexer.counters.inc("watch.limit")
        self._reconcile_soon({name})

    def _writer_failed(self, sources: set[str] | None) -> None:
        """The writer dropped changes (disk full, read-only state dir): reconcile their sources
        again after 2, 4, 8 ... 256 s (the streak restarts after 10 quiet minutes), so they are
        indexed once the disk has room again without waiting for the interval."""
        import time as _time

        now = _time.monotonic()
        with self._lock:
            self._failed_sources |= sources if sources is not None else set(self.sources)
            if self.scheduler is not None and self.scheduler.get_job("retry-failed-writes") is not None:
                return  # the retry already scheduled covers these sources too (one line, not one per document)
            if now - self._last_failure > 600:
                self._failure_streak = 0
            self._failure_streak += 1
            self._last_failure = now
            delay = 2.0 ** min(self._failure_streak, 8)
        if self.scheduler is not None and not self.stop_event.is_set():
            log.warning("index writes failed; reconciling %s in %.0f s",
                        ", ".join(sorted(self._failed_sources)) or "the sources", delay)
            self.scheduler.add_job(self._retry_failed, "date", run_date=datetime.now(UTC) + timedelta(seconds=delay),
                                   id="retry-failed-writes", replace_existing=True, misfire_grace_time=None)

    def _retry_failed(self) -> None:
        with self._lock:
            names, self._failed_sources = self._failed_sources, set()
        self._reconcile_soon(sorted(names))

    def _reconcile_soon(self, names) -> None:
        if self.scheduler is None:
            return
        now = datetime.now(UTC)
        for n in names:
            st = self.states.get(n)
            if st is None:
                continue
            with self._lock:
                if st.running:
                    st.rerun = True  # run again when this pass ends (a second instance would be skipped)
                    continue
            # a one-off job of its own: the periodic job may be the caller, still "running"
            self.scheduler.add_job(self.reconcile, "date", run_date=now, args=[n], id=f"reconcile-now:{n}",
                                   replace_existing=True, misfire_grace_time=None)

    def _change_loop(self) -> None:
        with self._pipeline() as pipeline:
            while not self.stop_event.is_set():
                for ch in self.changes.take_due(timeout=0.5):
                    try:
                        counts = self._apply_change(pipeline, ch.source, ch.path, ch.was_dir)
                        if counts is not None and (counts.indexed or counts.deleted):
                            with self._lock:
                                self._edits.append((time.monotonic(), ch.first))
                                del self._edits[:-10_000]  # commits failing: keep the newest
                    except IndexerdError as e:
                        log.error("%s: %s", display_path(ch.path), e)
                    except Exception:
                        log.exception("failed on %s", display_path(ch.path))

    def _apply_change(self, pipeline: Pipeline, name: str, path: str, was_dir: bool) -> PassCounts | None:
        """Process one path from the change queue.  What the path is *now* decides, not what
        the events said (a file may have been replaced by a directory of the same name, or the
        reverse, between them): a directory is scanned, and a document stored for a file of
        that name is deleted; anything else (a file, a symlink the source does not follow,
        nothing) deletes every document stored below a directory of that name, then is handled
        as one path."""
        src = self.sources.get(name)
        if src is None or src.kind != "filesystem":
            return None
        counts = PassCounts()
        key = path_to_key(path)
        st = src.stat_path(path)
        if st is not None and stat_mod.S_ISDIR(st.st_mode):
            if pipeline.stored(key) is not None:  # None too when its removal is queued
                pipeline.gone(key, counts, "replaced by a directory")
            src.scan(pipeline, counts, start=path, cancel=self.stop_event)  # moved in or created
        else:
            if was_dir or st is None:
                # nothing can be below a path that is not a directory: a directory moved out,
                # deleted or replaced by a file takes all its documents with it
                below = [k for k in pipeline.store.keys_with_prefix(name, key.rstrip("/") + "/")
                         if not pipeline.removal_queued(k)]  # else already being removed
                pipeline.gone_many(sorted(below), counts, "deleted or moved away")
            src.handle_path(path, pipeline, counts)
        if counts.indexed or counts.deleted or counts.skipped or counts.errors:
            log.info("%s: %s %s", name, display_path(path), counts.as_dict())
        return counts

    # -- metrics --------------------------------------------------------------------------
    def _committed(self, seconds: float, started: float) -> None:
        """The writer committed (in its thread): its latency, and edit-to-searchable for every
        live edit submitted before the commit started."""
        self.metrics.commit_seconds.observe(seconds)
        now = time.monotonic()
        with self._lock:
            done = [first for submitted, first in self._edits if submitted <= started]
            self._edits = [e for e in self._edits if e[0] > started]
        for first in done:
            self.metrics.edit_to_searchable_seconds.observe(now - first)

    def _seed_metrics(self) -> None:
        """Each source's last successful pass before this start, from the store."""
        try:
            with Store(self.indexer.state.store_path, readonly=True) as store:
                runs = store.source_runs()
        except IndexerdError as e:
            log.debug("no run records for the metrics: %s", e)
            return
        for name, run in runs.items():
            if name in self.sources and run.get("completed_at") is not None:
                self.metrics.seed_last_success(name, run["completed_at"].timestamp())

    # -- control --------------------------------------------------------------------------
    def _status_line(self) -> str:
        """systemd's one-line STATUS=: sources, watches, running passes, a refused reload."""
        from indexerd.core.dates import format_utc

        running = [n for n, s in self.states.items() if s.running]
        rl = self.reload_info
        refused = (f"; RELOAD REFUSED at {format_utc(rl['at'])}, running on the old config: {rl['error']}"
                   if rl["ok"] is False else "")
        failed = [f"{n} ({s.watch_error})" for n, s in self.states.items() if s.watch_error]
        return (f"{len(self.sources)} sources, {sum(s.watched for s in self.states.values())} watched"
                + (f", NOT WATCHED: {', '.join(failed)}" if failed else "")
                + (f", reconciling {', '.join(running)}" if running else "") + refused)

    def _cmd_reload(self) -> dict:
        """``ctl reload``: ask the main thread for a reload and wait for its outcome.

        Raises:
            ConfigError: the new config was refused (the old one stays; exit 2).
            IndexerdError: no outcome within :data:`RELOAD_WAIT_SECONDS`.
        """
        done, slot = threading.Event(), {}
        with self._lock:
            self._reload_waiters.append((done, slot))
        self.reload_event.set()
        if not done.wait(RELOAD_WAIT_SECONDS):
            raise IndexerdError(f"the reload did not finish within {RELOAD_WAIT_SECONDS:.0f} s")
        if slot.get("stopping"):
            raise IndexerdError("the daemon is stopping; the config was not reloaded")
        if slot["error"]:
            raise ConfigError(f"reload refused, still running on the old config: {slot['error']}")
        return {"config": self.config_path, "sources": len(self.sources)}

    def handle_request(self, req: dict) -> dict:
        """Answer one control request (called from the control server's threads)."""
        cmd = req.get("cmd")
        if cmd == "status":
            return self.status()
        if cmd == "scan":
            return self._cmd_scan(req)
        if cmd == "reindex":
            return self._cmd_reindex(req)
        if cmd == "forget":
            return self._cmd_forget(req)
        if cmd == "reload":
            return self._cmd_reload()
        if cmd in ("crawl", "poll"):
            return self._cmd_scan(req, kind="web" if cmd == "crawl" else "sql")
        from indexerd.daemon import reads

        if cmd in reads.READ_COMMANDS:
            return reads.answer(self, req)
        raise ConfigError(f"unknown control command {cmd!r}")

    def status(self) -> dict:
        from indexerd.core.dates import format_utc

        w = self.indexer._writer
        try:
            with Store(self.indexer.state.store_path) as store:
                counts = store.counts_by_source()
        except IndexerdError:
            counts = {}
        ix = self.indexer._index
        sources = {}
        for name, src in self.sources.items():
            st = self.states.get(name) or SourceState()
            job = self.scheduler.get_job(f"reconcile:{name}") if self.scheduler else None
            with self._lock:
                running = st.running
                cur = st.current.as_dict() if st.current else None
                prog = {"found": st.progress.found, "done": st.progress.done, "total": st.progress.total,
                        "unit": st.progress.unit} if running and st.progress else None
                current_run = {"started": format_utc(st.current_started), "counts": cur, "progress": prog,
                               "error": st.current.last_error if st.current else None} if running else None
                latest = {"at": format_utc(st.latest_error[0]), "message": st.latest_error[1]} \
                    if st.latest_error else None
                last_run = {"started": format_utc(st.last_started), "finished": format_utc(st.last_finished),
                            "counts": st.last_counts, "error": st.last_message}
            sources[name] = {
                "kind": src.kind, "root": display_path(src.root) if src.root else None, "watched": st.watched,
                "watch_error": st.watch_error,
                "documents": counts.get(name, {}), "running": running, "current": cur, "progress": prog,
                "current_run": current_run, "last_run": last_run, "last_error": latest,
                "next_run": format_utc(job.next_run_time) if job and job.next_run_time else None}
        return {
            "pid": os.getpid(), "uptime_seconds": round((datetime.now(UTC) - self.started_at).total_seconds(), 1),
            "state_dir": str(self.indexer.state.path), "config": self.config_path,
            "reload": self._reload_status(),
            "sources": sources, "change_queue": len(self.changes),
            "writer": {"queue": w.queue_depth() if w else 0, "commits": w.stats.commits if w else 0,
                       "last_commit": format_utc(w.stats.last_commit_at) if w else None,
                       "commit_errors": w.stats.commit_errors if w else 0,
                       "last_error": w.stats.last_error if w else None},
            "index": self._index_status(ix),
            "counters": self.indexer.counters.snapshot(),
            "hosts": self._hosts()}

    def _reload_status(self) -> dict:
        from indexerd.core.dates import format_utc

        with self._lock:
            rl = dict(self.reload_info)
        return {**rl, "at": format_utc(rl["at"]), "loaded_at": format_utc(rl["loaded_at"])}

    @staticmethod
    def _index_status(ix) -> dict:
        """The index's status (engine, documents, bytes, segments: :meth:`SearchIndex.status`);
        a read that keeps failing is reported in ``error`` instead of failing the whole status."""
        if ix is None:
            return {"documents": None, "size_bytes": None, "segments": None}
        try:
            return ix.status()
        except IndexerdError as e:
            return {"engine": ix.engine, "documents": None, "size_bytes": None, "segments": None, "error": str(e)}

    def _hosts(self) -> dict:
        """Politeness state of every host a web source talks to (empty without web sources)."""
        if not any(s.kind == "web" for s in self.sources.values()):
            return {}
        from indexerd.sources.web.politeness import HOST_SLOTS

        return HOST_SLOTS.snapshot()

    def _cmd_scan(self, req: dict, kind: str = "filesystem") -> dict:
        name = req.get("source")
        src = self.sources.get(name)
        if src is None or src.kind != kind:
            same = [n for n, s in self.sources.items() if s.kind == kind]
            raise ConfigError(f"no {kind} source named {name!r} (configured {kind} sources: "
                              f"{', '.join(same) or 'none'})")
        if req.get("wait"):
            counts = self.reconcile(name, forced=False)
            if counts is None:  # another pass held the lock: wait for it instead
                self.states[name].lock.acquire()
                self.states[name].lock.release()
                counts = self.states[name].last_counts
            self._raise_if_failed([name])
            return {"source": name, "counts": counts}
        running = self.states[name].running
        self._reconcile_soon({name})
        return {"source": name, "started": not running, "queued": running}

    def _raise_if_failed(self, names) -> None:
        """A ``--wait`` reply must not claim what was not committed or not done: fail naming each
        source whose pass failed (commit failed, root missing, statement failed, no site
        reachable) or was interrupted by the daemon's stop.

        Raises:
            PassFailed: exit code 1.
        """
        cut = [n for n in names if n in self.states and self.states[n].last_interrupted]
        if cut:
            raise PassFailed("; ".join(f"the pass of {n} was interrupted: the daemon is stopping (its "
                                       f"counts are what was done before the stop; a web crawl resumes "
                                       f"at the next start, a forced one still forced)" for n in cut))
        failed = {n: self.states[n].last_error for n in names if n in self.states and self.states[n].last_error}
        if failed:
            raise PassFailed("; ".join(f"the pass of {n} failed: {why} (its counts are what was read, not "
                                       f"what is searchable; it is retried)" for n, why in failed.items()))

    def _cmd_reindex(self, req: dict) -> dict:
        targets = req.get("targets") or []
        name = req.get("source")
        if name is not None and name not in self.sources:
            raise ConfigError(f"no source named {name!r}")
        if not (targets or name or req.get("all")):
            raise ConfigError("reindex: name targets, a source, or all (a forced pass of every source)")
        counts = PassCounts()
        if not targets:
            names = [name] if name else list(self.sources)
            for n in names:
                c = self.reconcile(n, forced=True)
                if c:
                    counts.add(PassCounts(**c))
            gone = [n for n in names if n not in self.sources]
            if gone:
                raise PassFailed(f"source {', '.join(gone)} was removed by a reload while its pass ran: "
                                 f"the pass was cancelled and the source forgotten")
            self._raise_if_failed(names)
            return {"counts": counts.as_dict()}
        from indexerd.cli import ctlverbs

        try:
            with self._pipeline() as pipeline:
                ctlverbs.reindex(self.sources, targets, pipeline, counts, confined_path=self._confined_path,
                                 cancel=self.stop_event)
        finally:  # an unknown key fails the request after the other targets were read: commit them
            self.indexer.flush(timeout=60)
        if self.stop_event.is_set():  # a request in flight was cut: not every target was read
            raise PassFailed(f"reindex interrupted: the daemon is stopping; what was read is committed "
                             f"({counts.indexed} indexed), the rest was not read: ask again after the start")
        return {"counts": counts.as_dict()}

    def _confined_path(self, target: str) -> tuple[FileSource, str]:
        """A ``file:`` key or an absolute path from the control socket -> its source and the
        path to read, confined to the source (:meth:`FileSource.confine`).

        Raises:
            ConfigError: not a file key or absolute path, not inside any filesystem source, or
                refused by the source (``..``, a symlink the source does not follow).
        """
        try:
            path = key_to_path(target) if target.startswith("file:") else target
        except ValueError as e:
            raise ConfigError(f"{target}: {e}") from None
        if not os.path.isabs(path):
            raise ConfigError(f"{target}: not an absolute path (the CLI sends real paths)")
        src = self._source_for(path)
        if src is None:
            raise ConfigError(f"{target}: not inside any configured source")
        try:
            return src, src.confine(path)
        except ValueError as e:
            raise ConfigError(f"{target}: refused: {e}") from None

    def _cmd_forget(self, req: dict) -> dict:
        from indexerd.cli import ctlverbs

        with self._pipeline() as pipeline:
            key = ctlverbs.forget(self.sources, req.get("key") or "", pipeline)
        self.indexer.flush(timeout=60)
        return {"forgotten": key}


def run_daemon(config_path: str | None) -> int:
    """Entry point of ``indexerd run``.

    Raises:
        ConfigError, StateDirLocked, SchemaTooNew, IndexUnavailable: refused at start.
    """
    from indexerd.config import find_config_path

    path = find_config_path(config_path)
    cfg = load_config(config_path, required=True)  # a daemon with no sources would watch nothing
    daemon = Daemon(cfg, str(path))
    code = daemon.run()
    if daemon.abandoned:
        # the interpreter would wait for the left-behind pass's thread (the scheduler's pool
        # threads are joined at exit): everything is committed and closed, so end here
        logging.shutdown()
        os._exit(code)
    return code
