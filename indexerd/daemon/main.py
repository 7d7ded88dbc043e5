"""``indexerd run``: the long-running service, wired from its parts.

Start order (stop runs in reverse, :mod:`indexerd.daemon.stop`): lock the state dir and open the
store/index (reconciling after a crash) -> control socket (:mod:`~indexerd.daemon.control`,
answering :mod:`~indexerd.daemon.commands`) -> HTTP listener -> change worker and watchers
(:mod:`~indexerd.daemon.live`) -> scheduler (:mod:`~indexerd.daemon.jobs`), whose first run of
every source's job is the start-up reconcile (:mod:`~indexerd.daemon.passes`), in the background
-> ``READY=1`` to systemd.  So a long first scan never trips systemd's start timeout, and ``ctl
status`` (:mod:`~indexerd.daemon.status`) shows its progress.

Threads: the index writer (one); the change worker (watcher events, one path at a time); the
scheduler's pool (reconcile jobs; ``max_instances=1`` per job, missed runs coalesced); the control
server's connection threads; the watchdog pinger.  Each thread that reads the store opens its own
connection (:meth:`Passes.pipeline`).

Signals stay at this edge: SIGTERM/SIGINT set one stop Event; SIGHUP sets a reload Event; the
main thread acts on both (a reload: :mod:`~indexerd.daemon.reload`).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from indexerd.config import Config, load_config, resolve_control_socket
from indexerd.core.errors import IndexerdError
from indexerd.runtime import removal
from indexerd.runtime.indexer import Indexer
from indexerd.daemon import commands, notify, status
from indexerd.daemon.jobs import Jobs
from indexerd.daemon.live import LivePath
from indexerd.daemon.passes import Passes
from indexerd.daemon.reload import Reloader
from indexerd.daemon.sourcestate import SourceState
from indexerd.daemon.stop import shutdown
from indexerd.sources.base import Source

if TYPE_CHECKING:
    from indexerd.daemon.control_server import ControlServer
    from indexerd.daemon.http.server import HttpListener

log = logging.getLogger(__name__)
UTC = timezone.utc


class Daemon:
    """The service for one config file.

    Args:
        cfg: the validated configuration.
        config_path: where it came from (re-read on SIGHUP); None for defaults.

    Parts: :attr:`passes` (one source's pass), :attr:`jobs` (their schedule), :attr:`live` (the
    watcher and the change worker), :attr:`reloader`, :attr:`queries` (searches on the open
    index), :attr:`metrics`; :attr:`states` holds each source's :class:`SourceState`, guarded by
    :attr:`lock`.
    """

    def __init__(self, cfg: Config, config_path: str | None) -> None:
        from indexerd.daemon.coverage import CoverageWatch
        from indexerd.daemon.http.metrics import DaemonMetrics
        from indexerd.daemon.queries import QueryRunner, workers_for

        self.cfg = cfg
        self.config_path = config_path
        self.indexer = Indexer(cfg, live=True)
        self.stop_event = threading.Event()
        self.reload_event = threading.Event()
        self.states: dict[str, SourceState] = {}
        self.lock = threading.Lock()
        self.started_at = datetime.now(UTC)
        self.passes = Passes(self)
        self.jobs = Jobs(self)
        self.live = LivePath(self)
        self.reloader = Reloader(self)
        self.control: ControlServer | None = None
        self.http: HttpListener | None = None  # the HTTP listener, when [http] listen is set
        self.pinger: notify.WatchdogPinger | None = None
        #: what a stop left running (source names, ``change-worker``); see :func:`shutdown`
        self.abandoned: list[str] = []
        self.ready = False  # READY=1 was sent: start-up completed
        self.metrics = DaemonMetrics(self.status)
        #: searches on the open index (ctl search and the HTTP listener), bounded in time
        self.queries = QueryRunner(lambda: self.indexer.opened_index, timeout_seconds=cfg.http.query_timeout,
                                   workers=workers_for(cfg.index.engine),
                                   observe=lambda via, s: self.metrics.query_seconds.labels(via=via).observe(s),
                                   hashes=self._content_hashes if cfg.index.collapse_duplicates else None)
        #: whether searches answer from a partial index (a rebuild, a first pass) and how far it is
        self.coverage = CoverageWatch(self)

    def _content_hashes(self, keys: list[str]) -> dict[str, str]:
        """The state store's content hash of each of ``keys`` that has one (a query worker's own
        read-only connection, to the store's read replica when it has one)."""
        try:
            with self.indexer.state.open_search_store() as store:
                return store.content_hashes(keys)
        except IndexerdError as e:  # the hits are still right, only not collapsed
            log.debug("identical hits not collapsed: %s", e)
            return {}

    @property
    def sources(self) -> dict[str, Source]:
        """The configured sources by name (replaced whole by a reload)."""
        return self.indexer.sources

    # -- lifecycle ------------------------------------------------------------------------
    def run(self) -> int:
        """Run until SIGTERM/SIGINT; returns the exit code (0 after a clean stop).

        Raises:
            ConfigError, StateDirLocked, SchemaTooNew, IndexUnavailable: refused at start.
        """
        self._install_signals()
        from indexerd.daemon.writeaccess import read_warnings, write_warnings

        for msg in read_warnings(self.cfg) + write_warnings(self.cfg):  # once, not once per file/page/row
            log.warning("%s", msg)
        self.indexer.open("daemon")
        if self.indexer.cluster_node is not None:
            self.indexer.cluster_node.working_on = lambda: status.working_on(self)
        try:
            from indexerd.daemon.control_server import ControlServer

            sock = resolve_control_socket(self.cfg)
            control = self.control = ControlServer(sock, self.handle_request)
            control.start()
            writer = self.indexer.writer()
            writer.on_failure = self.jobs.writer_failed  # runs from the start
            writer.on_commit = self.live.committed
            status.seed_metrics(self)
            if self.cfg.http.listen:
                from indexerd.daemon.http.server import start_listener

                self.http = start_listener(self, self.cfg.http)
            self.live.start()
            # the configured sources are the truth at every start: finish forgetting removed ones
            # (a purge a kill -9 interrupted resumes here) before any pass of the others
            removal.forget_sources(self.indexer.pipeline, removal.removed_sources(self.indexer), cancel=self.stop_event)
            self.jobs.start()
            self.apply_sources(initial=True)
            self.pinger = notify.WatchdogPinger(healthy=self.healthy)
            self.pinger.start()
            notify.ready(self.status_line())
            self.ready = True
            log.info("indexerd %s ready: %d sources, control socket %s", os.getpid(), len(self.sources), sock)
            self._main_loop()
            log.info("stopping")
            notify.stopping()
            return 0
        finally:
            shutdown(self)

    def _main_loop(self) -> None:
        """Until the stop event: reloads asked for, dead watches, systemd's STATUS every 10 s."""
        last_status = 0.0
        while not self.stop_event.wait(0.5):
            if self.reload_event.is_set():
                self.reload_event.clear()
                self.reloader.run_now()
            self.live.check()
            if time.monotonic() - last_status > 10:
                last_status = time.monotonic()
                notify.status(self.status_line())

    def _install_signals(self) -> None:
        def stop(signum, frame):
            self.stop_event.set()

        def hup(signum, frame):
            self.reload_event.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGHUP, hup)

    def healthy(self) -> bool:
        """For the watchdog and ``/healthz``: the writer and the change worker run."""
        return self.indexer.writer_running() and self.live.alive()

    def apply_sources(self, initial: bool, changed: set[str] | None = None) -> None:
        """(Re)arm watches and jobs for the current sources; reconcile new/changed ones now."""
        for name in self.sources:
            self.states.setdefault(name, SourceState())
        self.live.watch_all()
        self.jobs.arm(initial, changed)

    # -- what others ask ------------------------------------------------------------------
    def handle_request(self, req: dict) -> dict:
        """Answer one control request (called from the control server's threads):
        :func:`indexerd.daemon.commands.handle`."""
        return commands.handle(self, req)

    def status(self) -> dict:
        """The ``ctl status`` document (:func:`indexerd.daemon.status.status_document`)."""
        return status.status_document(self)

    def status_line(self) -> str:
        """systemd's one-line STATUS= (:func:`indexerd.daemon.status.status_line`)."""
        return status.status_line(self)


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
