"""A scriptable loopback web site for tests: a real ``http.server.ThreadingHTTPServer`` in a thread.

Usage::

    from httpsite import Site
    from httpsite import site as site_fixture
    site = site_fixture  # the fixture; assigned, so ruff/pyflakes F811 does not flag each test's ``site``

    def test_x(site):
        site.add("/a", body=b"hello", headers={"Content-Type": "text/plain"})
        site.static("/b", b"<p>b</p>", last_modified="Sat, 08 Sep 2001 21:46:40 GMT", etag='"v1"')
        site.add("/slow", handler=lambda req: (200, {}, site.drip(b"x", 0.2)))
        requests.get(site.url("/a"))
        assert [e.path for e in site.log] == ["/a"]

Contract:

- The server listens on 127.0.0.1 (or the loopback address given), port 0 (the kernel picks one), and speaks HTTP/1.1 with
  keep-alive.  A ``bytes`` body is sent with ``Content-Length`` (unless the route's headers set one
  themselves, which lets a test lie about the length); an iterator body is sent with
  ``Transfer-Encoding: chunked`` (or raw, when the route's headers set ``Content-Length``).
- Routes are looked up by the raw request target (path plus query) first, then by the path alone.
  An unknown path gets ``404``.  A handler that raises gets ``500``.
- Every request is appended to :attr:`Site.log` on arrival (a :class:`Hit`); its ``completed``
  time (``time.monotonic()``) and ``status`` are filled in when the response has been written.
- :meth:`Site.close` (also ``__exit__``) returns promptly even while a client is in the middle of
  an endless or dripping body: it sets :attr:`Site.stopping`, shuts down every open connection's
  socket and joins the handler threads.
"""

from __future__ import annotations

import email.utils
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import urlsplit

import pytest

__all__ = ["Hit", "Route", "Site", "site", "unused_port"]

Body = bytes | Iterable[bytes]
#: A dynamic route: called with the request's :class:`Hit`; returns ``(status, headers, body)``.
Handler = Callable[["Hit"], tuple[int, Mapping[str, str], Body]]


@dataclass
class Hit:
    """One request as the server saw it.

    ``path`` is the raw request target (path plus ``?query``), ``headers`` a plain dict with the
    header names as the client sent them (use :meth:`header` for a case-insensitive look-up),
    ``arrived``/``completed`` are ``time.monotonic()`` seconds (``completed`` is None while the
    response is being written, or when it was cut), ``status`` is the status line sent (None until
    then),
    ``client`` is the client's ``(host, port)``: two hits with one port used one connection.
    """

    method: str
    path: str
    headers: dict[str, str]
    arrived: float
    client: tuple[str, int]
    body: bytes = b""
    completed: float | None = None
    status: int | None = None

    def header(self, name: str, default: str | None = None) -> str | None:
        """The value of header ``name`` (case-insensitive), else ``default``."""
        low = name.lower()
        for key, value in self.headers.items():
            if key.lower() == low:
                return value
        return default


@dataclass
class Route:
    """A registered path: a fixed response, or a handler, after ``delay`` seconds."""

    body: Body = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    handler: Handler | None = None
    header_drip: float = 0.0


def unused_port() -> int:
    """A loopback TCP port nothing listens on (bound, then closed): connecting to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = True  # server_close() joins the handler threads
    site: Site


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 30  # seconds of socket inactivity before a handler thread gives up
    disable_nagle_algorithm = True  # else header and body writes meet delayed ACKs: +40 ms a request

    def handle(self) -> None:
        try:
            super().handle()
        except OSError:  # the client reset the connection (a fetcher cutting a body does that)
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.server.site._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.site._track(self.connection, add=False)

    def do_GET(self) -> None:
        self.server.site._serve(self)

    do_HEAD = do_POST = do_PUT = do_DELETE = do_OPTIONS = do_GET


class Site:
    """A loopback HTTP/1.1 server whose routes are registered at run time; see the module docstring.

    A context manager: ``with Site() as s:`` starts it and closes it.  Thread-safe: routes may be
    added while requests are being served.
    """

    def __init__(self, address: str = "127.0.0.1") -> None:
        self.address = address  # any of 127.0.0.0/8: a test may run many hosts, one Site each
        self.log: list[Hit] = []
        self.stopping = threading.Event()
        self._routes: dict[str, Route] = {}
        self._prefixes: dict[str, Route] = {}
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._server = _Server((address, 0), _RequestHandler)
        self._server.site = self
        self.port: int = self._server.server_address[1]
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Start serving in a daemon thread; returns self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                            name=f"httpsite:{self.port}", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, cut open connections, join the threads.  Safe to call twice."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- routes ----------------------------------------------------------------------------

    @property
    def base(self) -> str:
        """``http://<address>:<port>``, no trailing slash."""
        return f"http://{self.address}:{self.port}"

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` (which starts with ``/``)."""
        return self.base + path

    def add(self, path: str, body: Body = b"", status: int = 200, headers: Mapping[str, str] | None = None,
            delay: float = 0.0, handler: Handler | None = None, header_drip: float = 0.0) -> None:
        """Serve ``path`` (raw target; with a query it matches only that query).

        Either a fixed response (``status``, ``headers``, ``body``: bytes, or an iterable of byte
        chunks -- an iterable is consumed by the first request, so use ``handler`` for repeated
        dynamic bodies), or ``handler(hit) -> (status, headers, body)``.  ``delay`` seconds pass
        before the status line is sent.  ``header_drip`` > 0: the status line, then one header byte
        every ``header_drip`` seconds, for ever (until the site stops).  Replaces an earlier
        route on the same path.
        """
        with self._lock:
            self._routes[path] = Route(body=body, status=status, headers=dict(headers or {}), delay=delay,
                                       handler=handler, header_drip=header_drip)

    def static(self, path: str, body: bytes, last_modified: str | None = None, etag: str | None = None,
               content_type: str = "text/html; charset=utf-8", headers: Mapping[str, str] | None = None) -> None:
        """Serve ``body`` with real conditional GET, like nginx's default ``if_modified_since exact``.

        304 (no body, validators repeated) when ``If-None-Match`` lists ``etag`` (or is ``*``), or when
        there is no ``If-None-Match`` and ``If-Modified-Since`` is byte-identical to
        ``last_modified``; else 200.  HEAD gets the headers without the body.
        """
        base = {"Content-Type": content_type, **dict(headers or {})}
        if last_modified is not None:
            base["Last-Modified"] = last_modified
        if etag is not None:
            base["ETag"] = etag

        def handle(hit: Hit) -> tuple[int, Mapping[str, str], Body]:
            inm = hit.header("If-None-Match")
            ims = hit.header("If-Modified-Since")
            if inm is not None:
                tags = [t.strip() for t in inm.split(",")]
                fresh = etag is not None and (etag in tags or "*" in tags)
            else:
                fresh = ims is not None and last_modified is not None and ims == last_modified
            if fresh:
                return 304, {k: v for k, v in base.items() if k in ("Last-Modified", "ETag")}, b""
            return 200, base, body

        self.add(path, handler=handle)

    def add_prefix(self, prefix: str, handler: Handler) -> None:
        """Serve every path starting with ``prefix`` (that has no exact route) by
        ``handler(hit) -> (status, headers, body)``."""
        with self._lock:
            self._prefixes[prefix] = Route(body=b"", status=200, headers={}, delay=0.0, handler=handler)

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        """Answer ``path`` with ``status`` and ``Location: location`` (sent verbatim, may be relative)."""
        self.add(path, status=status, headers={"Location": location})

    def hits(self, path: str | None = None) -> list[Hit]:
        """The logged requests, all or those whose raw target is ``path``."""
        return [h for h in list(self.log) if path is None or h.path == path]

    # -- body helpers ----------------------------------------------------------------------

    def endless(self, chunk: bytes = b"x" * 65536) -> Iterator[bytes]:
        """``chunk`` again and again until the site stops (or the client goes away)."""
        while not self.stopping.is_set():
            yield chunk

    def drip(self, piece: bytes = b"x", interval: float = 0.2, count: int | None = None) -> Iterator[bytes]:
        """``piece`` every ``interval`` seconds, ``count`` times (None: until the site stops)."""
        n = 0
        while count is None or n < count:
            if n and self.stopping.wait(interval):
                return
            yield piece
            n += 1

    # -- internals -------------------------------------------------------------------------

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def _serve(self, rh: _RequestHandler) -> None:
        length = int(rh.headers.get("Content-Length") or 0)
        req_body = rh.rfile.read(length) if length > 0 else b""
        hit = Hit(method=rh.command, path=rh.path, headers=dict(rh.headers.items()), arrived=time.monotonic(),
                  client=rh.client_address[:2], body=req_body)
        self.log.append(hit)
        with self._lock:
            route = self._routes.get(rh.path) or self._routes.get(urlsplit(rh.path).path) \
                or next((r for prefix, r in self._prefixes.items() if rh.path.startswith(prefix)), None)
        if route is None:
            status, headers, body = 404, {"Content-Type": "text/plain"}, b"not found\n"
        elif route.header_drip > 0:
            rh.close_connection = True
            try:
                rh.wfile.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
                rh.wfile.flush()
                while not self.stopping.wait(route.header_drip):
                    rh.wfile.write(b"x")
                    rh.wfile.flush()
            except OSError:
                pass
            return
        else:
            if route.delay > 0 and self.stopping.wait(route.delay):
                rh.close_connection = True
                return
            if route.handler is not None:
                try:
                    status, headers, body = route.handler(hit)
                except Exception as exc:  # noqa: BLE001 - a broken test handler: say so in the response
                    status, headers, body = 500, {"Content-Type": "text/plain"}, f"handler raised {exc!r}\n".encode()
            else:
                status, headers, body = route.status, route.headers, route.body
        try:
            self._write(rh, hit, status, dict(headers), body)
        except OSError:  # the client went away, or close() cut the socket
            rh.close_connection = True

    def _write(self, rh: _RequestHandler, hit: Hit, status: int, headers: dict[str, str], body: Body) -> None:
        names = {k.lower() for k in headers}
        bodyless = rh.command == "HEAD" or status in (204, 304) or 100 <= status < 200
        rh.send_response_only(status)
        hit.status = status
        if "date" not in names:
            rh.send_header("Date", email.utils.formatdate(usegmt=True))
        for key, value in headers.items():
            rh.send_header(key, value)
        if headers.get("Connection", "").lower() == "close":
            rh.close_connection = True
        if isinstance(body, (bytes, bytearray)):
            if "content-length" not in names and status not in (204, 304):
                rh.send_header("Content-Length", str(len(body)))
            rh.end_headers()
            if not bodyless:
                rh.wfile.write(body)
                if "content-length" in names and int(headers.get("Content-Length") or
                                                     headers.get("content-length") or 0) != len(body):
                    rh.close_connection = True  # the framing is a lie: the connection cannot be reused
        else:
            chunked = "content-length" not in names and not bodyless
            if chunked:
                rh.send_header("Transfer-Encoding", "chunked")
            rh.end_headers()
            rh.wfile.flush()
            if not bodyless:
                for piece in body:
                    if self.stopping.is_set():
                        rh.close_connection = True
                        return
                    if not piece:
                        continue
                    rh.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                    rh.wfile.flush()
                if chunked:
                    rh.wfile.write(b"0\r\n\r\n")
        rh.wfile.flush()
        hit.completed = time.monotonic()


@pytest.fixture
def site() -> Iterator[Site]:
    """A started :class:`Site`, closed after the test."""
    with Site() as s:
        yield s
