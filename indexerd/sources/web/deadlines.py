"""A whole-request deadline and a stop for HTTP requests: a watchdog thread that cuts sockets.

requests and urllib3 bound each socket *read* (``Timeout(total=...)`` is applied per read too):
a server that sends its status line and headers one byte a second keeps a request alive as long
as it likes, and a thread blocked in ``recv`` cannot be interrupted by an Event.  The one way to
end such a read from outside is to shut the socket down: ``recv`` then returns at once (EOF) and
the caller sees a connection error.  This is what urllib3 users do for a total deadline (a timer
that closes the socket); here one watchdog thread serves every request of the process.

Use::

    with REQUEST_WATCH.watch(deadline, cancel) as w:   # w.fired: None, 'deadline' or 'cancel'
        session.request(...)                          # through a WatchedAdapter

Outside contracts relied on (urllib3 2.x): every new connection's socket is made by
``HTTPConnection._new_conn()`` (plain and TLS: the TLS socket wraps that one, so shutting the
plain socket down also ends a TLS handshake or read), and every request on a pooled connection
goes through ``HTTPConnection.request()`` with ``sock`` already set.  ``socket.shutdown`` is
called as the plain socket method, never ``SSLSocket.shutdown`` (which would unwrap TLS under a
reading thread).  SOCKS proxies use their own connection classes and get only the per-read
limits.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

__all__ = ["REQUEST_WATCH", "RequestWatch", "Watch", "WatchedAdapter"]

#: How often (seconds) the watchdog looks at the cancel Events of the requests it watches.
CANCEL_POLL_SECONDS = 0.05


class Watch:
    """One watched request.

    Attributes:
        deadline: ``time.monotonic()`` seconds after which the request's sockets are shut down.
        cancel: an Event that, once set, shuts them down too (None: no cancel).
        fired: None while the request may go on; ``'deadline'`` or ``'cancel'`` once its sockets
            were (or, for sockets attached later, will be) shut down.
    """

    __slots__ = ("cancel", "deadline", "fired", "_socks")

    def __init__(self, deadline: float, cancel: threading.Event | None) -> None:
        self.deadline = deadline
        self.cancel = cancel
        self.fired: str | None = None
        self._socks: list[socket.socket] = []


def _cut(sock: socket.socket) -> None:
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain method, also for an SSLSocket
    except (OSError, ValueError):
        pass  # already closed


class RequestWatch:
    """The watchdog: shuts down the sockets of requests past their deadline or cancelled.

    Thread-safe.  The thread (a daemon) starts on the first :meth:`watch` and sleeps until the
    nearest deadline, or :data:`CANCEL_POLL_SECONDS` while a watched request has a cancel Event.
    A request is cut at most about that long after its deadline or its cancel.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._watches: set[Watch] = set()
        self._local = threading.local()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def watch(self, deadline: float, cancel: threading.Event | None = None) -> Iterator[Watch]:
        """Watch the requests this thread makes inside the ``with`` block (see the module doc)."""
        w = Watch(deadline, cancel)
        with self._cond:
            self._watches.add(w)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="request-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        self._local.current = w
        try:
            yield w
        finally:
            self._local.current = None
            with self._cond:
                self._watches.discard(w)

    def attach(self, sock: socket.socket | None) -> None:
        """Called by the watched connections: ``sock`` now carries the current thread's request."""
        w = getattr(self._local, "current", None)
        if w is None or sock is None:
            return
        with self._cond:
            w._socks.append(sock)
            fired = w.fired
        if fired is not None:
            _cut(sock)

    def _run(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                wait = 3600.0
                for w in self._watches:
                    if w.fired is None:
                        if w.cancel is not None and w.cancel.is_set():
                            w.fired = "cancel"
                        elif now >= w.deadline:
                            w.fired = "deadline"
                    if w.fired is not None:
                        socks, w._socks = w._socks, []
                        for s in socks:
                            _cut(s)
                        continue
                    wait = min(wait, w.deadline - now)
                    if w.cancel is not None:
                        wait = min(wait, CANCEL_POLL_SECONDS)
                self._cond.wait(max(wait, 0.001))


#: The process-wide watchdog.
REQUEST_WATCH = RequestWatch()


class _WatchedHTTPConnection(HTTPConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        REQUEST_WATCH.attach(sock)
        return sock

    def request(self, *args, **kwargs) -> None:  # a pooled connection: its socket carries this one
        if self.sock is not None:
            REQUEST_WATCH.attach(self.sock)
        super().request(*args, **kwargs)


class _WatchedHTTPSConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        REQUEST_WATCH.attach(sock)
        return sock

    def request(self, *args, **kwargs) -> None:
        if self.sock is not None:
            REQUEST_WATCH.attach(self.sock)
        super().request(*args, **kwargs)


class _WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


_POOLS = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}


class WatchedAdapter(HTTPAdapter):
    """A requests adapter whose connections report their sockets to :data:`REQUEST_WATCH`
    (directly and through HTTP(S) proxies; not through SOCKS proxies)."""

    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(_POOLS)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs):
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):
            manager.pool_classes_by_scheme = dict(_POOLS)
        return manager
