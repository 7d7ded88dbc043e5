"""The HTTP listener's lifecycle: waitress serving :class:`~indexerd.daemon.http.app.SearchApp`
in a thread of the daemon, and the daemon's side of the page (:class:`DaemonBackend`).

waitress is a pure-Python production WSGI server: one asyncore loop thread accepts and reads
requests, a fixed pool of ``threads`` runs the application, and slow or idle clients cost no
worker (waitress buffers the request and the response).  Limits set here: at most
:data:`CONNECTION_LIMIT` connections, a request body of at most :data:`MAX_REQUEST_BODY_BYTES`
(the listener only answers GET), idle connections closed after :data:`CHANNEL_TIMEOUT_SECONDS`,
and slow clients bounded by :mod:`indexerd.daemon.http.connections` (a request must arrive whole
within 10 s; at the limit the connection that waited longest makes room).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any
import time

from indexerd.config import HttpSettings
from indexerd.core.errors import ConfigError

log = logging.getLogger(__name__)

CONNECTION_LIMIT = 200
CHANNEL_TIMEOUT_SECONDS = 30
MAX_REQUEST_BODY_BYTES = 64 * 1024
STOP_JOIN_SECONDS = 3.0
#: how long the list of media types offered by the search page is reused (seconds)
MEDIA_TYPES_TTL_SECONDS = 60.0


class HttpListener:
    """Serve ``app`` on ``host:port`` until :meth:`stop`.

    Args:
        app: a WSGI application.
        host, port: where to listen (port 0: any free port; see :attr:`address`).
        threads: requests handled at once.

    Lifecycle: :meth:`start` binds (ConfigError naming the address when it cannot) and starts
    the serving thread; :meth:`stop` closes the socket and the connections and joins the thread
    (at most :data:`STOP_JOIN_SECONDS`); safe to call twice.
    """

    def __init__(self, app, host: str, port: int, *, threads: int = 8) -> None:
        self.app, self.host, self.port, self.threads = app, host, port, threads
        self._server: Any = None  # waitress's server (one TCP socket, or several)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        from indexerd.daemon.http.connections import create_bounded_server

        try:
            self._server = create_bounded_server(
                self.app, host=self.host, port=self.port, threads=self.threads, ident="indexerd",
                connection_limit=CONNECTION_LIMIT, channel_timeout=CHANNEL_TIMEOUT_SECONDS,
                max_request_body_size=MAX_REQUEST_BODY_BYTES, expose_tracebacks=False,
                clear_untrusted_proxy_headers=True)
        except OSError as e:
            raise ConfigError(f"http.listen: cannot listen on {self.host}:{self.port}: "
                              f"{e.strerror or e}") from None
        self._thread = threading.Thread(target=self._server.run, name="http-listener", daemon=True)
        self._thread.start()
        log.info("HTTP listener on http://%s", _netloc(*self.address))

    @property
    def address(self) -> tuple[str, int]:
        """The (host, port) actually bound."""
        return self._server.effective_host, self._server.effective_port

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        if self._thread is not None:
            self._thread.join(timeout=STOP_JOIN_SECONDS)
            if self._thread.is_alive():
                log.warning("HTTP listener thread did not stop within %.1f s", STOP_JOIN_SECONDS)
        self._thread = None


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class DaemonBackend:
    """The daemon as the search page sees it (the backend of :class:`SearchApp`).

    Args:
        daemon: the running :class:`indexerd.daemon.main.Daemon` (its query runner, metrics,
            status, sources and state store).
    """

    def __init__(self, daemon) -> None:
        self.daemon = daemon
        self._media_types: tuple[float, list[str]] = (0.0, [])
        self._lock = threading.Lock()

    def search(self, req):
        return self.daemon.queries.run(req, via="http")

    def preview(self, key: str, query: str):
        """The stored text of ``key`` with ``query``'s matches marked, or None
        (:func:`indexerd.daemon.preview.document_preview`, through the bounded query runner)."""
        from indexerd.daemon.preview import document_preview

        from indexerd.index.analysis import analyzer

        return document_preview(self.search, key, query,
                                analyzer(fold_diacritics=self.daemon.cfg.index.fold_diacritics))

    def open_original(self, key: str):
        """The original file of ``key`` opened for a download, or None
        (:func:`indexerd.sources.files.originals.open_original`: inside a configured tree only)."""
        from indexerd.sources.files.originals import open_original

        return open_original(key, list(self.daemon.sources.values()))

    def coverage(self):
        """Whether answers are partial now (:meth:`indexerd.daemon.coverage.CoverageWatch.current`)."""
        return self.daemon.coverage.current()

    def explain(self, key: str) -> dict | None:
        from indexerd.output import reports

        with self.daemon.indexer.state.open_store(readonly=True) as store:
            return reports.explain(store, key)

    def status(self) -> dict:
        return self.daemon.status()

    def healthy(self) -> bool:
        return self.daemon.healthy()

    def source_names(self) -> list[str]:
        return sorted(self.daemon.sources)

    def media_types(self) -> list[str]:
        """The media types of stored documents (reused for :data:`MEDIA_TYPES_TTL_SECONDS`)."""
        with self._lock:
            at, types = self._media_types
            if time.monotonic() - at < MEDIA_TYPES_TTL_SECONDS:
                return types
            with self.daemon.indexer.state.open_search_store() as store:
                types = store.media_types()
            self._media_types = (time.monotonic(), types)
            return types

    def metrics(self) -> bytes:
        return self.daemon.metrics.render()


def start_listener(daemon, settings: HttpSettings) -> HttpListener:
    """Build and start the listener the ``[http]`` settings ask for.

    Raises:
        ConfigError: the address cannot be bound, or the token cannot be read (the message
            names the key, variable or file).
    """
    from indexerd.daemon.http.app import SearchApp
    from indexerd.daemon.http.auth import HostCheck, TokenCheck, is_loopback, load_token
    from indexerd.daemon.http.peer import PeerCheck

    host, port = settings.address()
    token = load_token(settings.token_env, settings.token_file)
    peers = None
    if token is None and is_loopback(host):  # the control socket's rule for local users
        control = daemon.control
        peers = PeerCheck(control.access_gid if control is not None else os.getegid())
        if not peers.can_tell():
            log.error("http.listen: the kernel's socket table (/proc/net/tcp) cannot be read, so "
                      "every request but /healthz is refused; set [http] token_file, or let the "
                      "service see /proc/net (no ProcSubset=pid)")
    app = SearchApp(DaemonBackend(daemon), TokenCheck(token), page_size=settings.page_size,
                    hosts=HostCheck.for_listener(host, token is not None), peers=peers)
    listener = HttpListener(app, host, port, threads=settings.threads)
    listener.start()
    return listener
