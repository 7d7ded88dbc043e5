"""One HTTP request, bounded in time and size, that never raises for network trouble.

:class:`Fetcher` sends exactly one GET or HEAD (redirects are *not* followed: the crawler schedules
every hop itself, so each hop passes robots.txt and politeness) and returns a :class:`~indexerd.sources.web.httpresponse.Response`.
Network, HTTP and decoding trouble becomes a fixed error word in ``Response.error``
(:mod:`indexerd.sources.web.neterrors`).

Outside contracts relied on (requests 2.34, urllib3 2.8):

- ``requests.Session`` is not thread-safe, so each thread gets its own (thread-local).  With
  ``trust_env`` (the default) proxies, ``NO_PROXY``, CA bundles (``REQUESTS_CA_BUNDLE``) *and*
  ``~/.netrc`` credentials come from the environment, as requests does.
- ``Session.request(..., allow_redirects=False)`` also keeps ``HEAD`` from following redirects.
- urllib3 decodes ``Content-Encoding`` (gzip, deflate; br/zstd only when brotli/zstandard are
  installed) and, since 2.6, bounds each decompression step by the amount asked for, so reading a
  gzip bomb in small pieces never inflates more than one piece beyond ``max_size``.
- ``urllib3.HTTPResponse.read1`` returns after at most one socket read (chunked or not); before
  each one the socket timeout is set to what is left of the request's time.
- requests and urllib3 bound only each socket read, not the status line and headers as a whole
  (a server dripping its headers one byte a second is never cut by them): every request runs
  under :data:`indexerd.sources.web.deadlines.REQUEST_WATCH`, whose watchdog shuts the socket down at the
  request's deadline, or as soon as the caller's ``cancel`` Event is set.
- Cookies: the sessions keep none (:class:`_NoCookies`): a site cannot grow a jar that every
  later request carries, and a crawl's answers do not depend on what earlier pages set.

Body rules: whenever ``error`` is set the body is empty (nothing half-read is ever indexed).  A
``Content-Length`` longer than the body actually sent (the server closed early) is
``error='protocol'`` with the byte counts in ``detail``.
"""

from __future__ import annotations

import http.client
import http.cookiejar
import socket
import threading
import time
from urllib.parse import urljoin, urlsplit

import requests
import urllib3
from requests.structures import CaseInsensitiveDict

from indexerd.sources.web.deadlines import REQUEST_WATCH, WatchedAdapter
from indexerd.sources.web.httpresponse import REDIRECT_STATUSES, Response, parse_retry_after
from indexerd.sources.web.neterrors import NETWORK_ERRORS, Failure, classify, short
from indexerd.sources.web.urls import host_key

__all__ = ["READ_CHUNK_BYTES", "Fetcher"]

#: Decoded bytes asked for per read; also the most a decompressor may inflate in one step.
READ_CHUNK_BYTES = 64 * 1024


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    """The cookie policy of every session: no cookie is ever stored (so none is ever sent)."""

    def set_ok(self, cookie, request) -> bool:
        return False


#: Seconds past its deadline after which a request cut at the deadline is put down to this
#: process not running (``'paused'``), not to the site: a running process cuts it within
#: :data:`~indexerd.sources.web.deadlines.CANCEL_POLL_SECONDS`.
PAUSE_SECONDS = 2.0


class Fetcher:
    """Sends single HTTP requests with a User-Agent, a time limit and a size limit.

    Thread-safe: one ``requests.Session`` per thread (thread-local), each with a connection pool
    (keep-alive).  Proxies and CA bundles come from the environment as requests does
    (``trust_env``).  ``auth`` (HTTP basic, ``(user, password)``) is sent only to URLs whose
    origin (``scheme://host:port``, as :func:`indexerd.sources.web.urls.host_key` writes it) or bare host name
    is in ``auth_hosts`` (compared lower-case), never to other sites a link leads to -- not even
    another port of the same host (RFC 9110 §11.6: a protection space belongs to an origin).

    Args:
        user_agent: the full User-Agent header value.
        timeout: seconds; the limit on the whole request, headers included (and the connect
            and per-read timeouts).
    """

    def __init__(self, user_agent: str, *, timeout: float = 30.0, auth: tuple[str, str] | None = None,
                 auth_hosts: frozenset[str] = frozenset()) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        self.user_agent = user_agent
        self.timeout = float(timeout)
        self._auth = auth
        self._auth_hosts = frozenset(h.lower().rstrip(".") for h in auth_hosts)
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._lock = threading.Lock()
        self._closed = False

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            with self._lock:
                if self._closed:
                    raise RuntimeError("Fetcher is closed")
                session = requests.Session()
                session.headers["User-Agent"] = self.user_agent
                session.cookies.set_policy(_NoCookies())
                for prefix in ("http://", "https://"):
                    session.mount(prefix, WatchedAdapter())
                self._sessions.append(session)
            self._local.session = session
        return session

    def open_sessions(self) -> int:
        """How many HTTP sessions are open: one per thread that has fetched (a session and its
        connections are never shared between threads), 0 after :meth:`close`."""
        with self._lock:
            return len(self._sessions)

    def close(self) -> None:
        """Close every thread's session and its pooled connections.  Safe to call twice; the
        fetcher must not be used afterwards."""
        with self._lock:
            self._closed = True
            sessions, self._sessions = self._sessions, []
        for s in sessions:
            s.close()

    def fetch(self, url: str, *, method: str = "GET", etag: str | None = None, last_modified: str | None = None,
              max_size: int, truncate: bool = False, cancel: threading.Event | None = None) -> Response:
        """Send one request and read the body within the limits; never raises for network trouble.

        Redirects are not followed (for HEAD either); a 3xx comes back with ``location`` set.
        ``etag`` goes out as ``If-None-Match`` and ``last_modified`` as ``If-Modified-Since``,
        both verbatim as stored (never re-formatted: a server may compare the text exactly).

        Size: decoded bytes are counted while reading; more than ``max_size`` stops the reading,
        closes the connection and gives ``error='too-large'`` (status and headers kept, body
        empty).  A ``Content-Length`` above ``max_size`` on a body without Content-Encoding gives
        ``'too-large'`` without reading.  With ``truncate=True`` (robots.txt, RFC 9309 §2.5) the
        first ``max_size`` bytes are kept instead, with no error and ``truncated=True``.

        Time: ``timeout`` bounds the whole request, connection, status line, headers and body
        (cut about 0.05 s late at most).  No status line and headers within ``timeout`` seconds
        (or no connection) gives ``'timeout'`` with ``status`` None, whether the server is silent
        or drips its headers; a body not complete ``timeout`` seconds after the request was sent
        gives ``'too-slow'`` (status kept), whether the server drips bytes or has gone silent.
        ``cancel`` set while the request runs ends it within about 0.05 s with
        ``'cancelled'`` (the daemon's stop): nothing was learnt about the URL.  A request that
        would be a ``timeout`` or ``too-slow`` but ends more than :data:`PAUSE_SECONDS` after
        its deadline gives ``'paused'``: the process was not running when the deadline came
        (SIGSTOP, a stall of the machine), so the site's time is not known.

        Errors (``Response.error``): ``timeout``, ``connection`` (refused, reset, DNS, proxy),
        ``ssl``, ``too-large``, ``bad-encoding`` (Content-Encoding that does not decode),
        ``too-slow``, ``protocol`` (malformed response, body shorter than its Content-Length),
        ``cancelled``, ``paused``.

        Raises:
            ValueError: ``url`` is not an absolute http(s) URL (or does not parse), ``method`` is
                not GET/HEAD, ``max_size`` < 0, or a validator holds a line break.
            RuntimeError: the fetcher was closed.
        """
        method = method.upper()
        if method not in ("GET", "HEAD"):
            raise ValueError(f"method must be GET or HEAD, got {method!r}")
        if max_size < 0:
            raise ValueError(f"max_size must be >= 0 bytes, got {max_size!r}")
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an absolute http(s) URL: {url!r}")
        headers: dict[str, str] = {}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        host = parts.hostname.lower().rstrip(".")
        auth = None
        if self._auth is not None and (host in self._auth_hosts or host_key(url) in self._auth_hosts):
            auth = self._auth

        session = self._session()
        start = time.monotonic()
        deadline = start + self.timeout

        def fail(word: str, detail: str, r: requests.Response | None = None) -> Response:
            late = time.monotonic() - deadline
            if word in ("timeout", "too-slow") and late > PAUSE_SECONDS:
                # cut at the deadline, the request ends within CANCEL_POLL_SECONDS of it: this
                # late, the process itself was not running (SIGSTOP, a stall), not the site slow
                word, detail = "paused", (f"this process was not running at the request's deadline "
                                          f"({late:.1f} s late: paused or stalled); {detail}")
            return Response(url=url, method=method, status=r.status_code if r is not None else None,
                            headers=r.headers if r is not None else CaseInsensitiveDict(), body=b"",
                            elapsed=time.monotonic() - start, error=word, detail=detail,
                            location=self._location(session, r, url) if r is not None else None,
                            retry_after=self._retry_after(r) if r is not None else None)

        if cancel is not None and cancel.is_set():
            return fail("cancelled", "stopped before the request was sent")
        with REQUEST_WATCH.watch(deadline, cancel) as watch:
            try:
                r = session.request(method, url, headers=headers, auth=auth, allow_redirects=False, stream=True,
                                    # requests hands a urllib3 Timeout to urllib3 as it is (its stubs
                                    # say float or a pair)
                                    timeout=urllib3.Timeout(connect=self.timeout, read=self.timeout,  # type: ignore[arg-type]
                                                            total=self.timeout))
            except (requests.exceptions.InvalidURL, requests.exceptions.InvalidHeader):
                raise  # both are ValueErrors: the caller's URL or stored validator is malformed
            except NETWORK_ERRORS as exc:  # every network failure becomes an error word
                word, detail = classify(exc)
                if watch.fired == "cancel":
                    word, detail = "cancelled", "stopped while waiting for the response"
                elif watch.fired == "deadline" or (word == "timeout" and time.monotonic() >= deadline - 0.001):
                    word, detail = "timeout", f"no response within {self.timeout:g} s: {detail}"
                return fail(word, detail)
            if watch.fired is not None:  # cut while reading the headers: http.client saw EOF as their end
                r.close()
                if watch.fired == "cancel":
                    return fail("cancelled", "stopped while waiting for the response")
                return fail("timeout", f"no complete headers within {self.timeout:g} s")

            try:
                out = bytearray()
                body, truncated = self._read_body(r, method, max_size, truncate, deadline, out)
            except (Failure, *NETWORK_ERRORS) as exc:
                r.close()  # closes the connection: never reuse one with unread bytes
                word, detail = (exc.word, exc.detail) if isinstance(exc, Failure) else classify(exc)
                if watch.fired == "cancel":
                    word, detail = "cancelled", "stopped while reading the body"
                elif watch.fired == "deadline" and word != "too-slow":
                    word, detail = "too-slow", f"body not complete within {self.timeout:g} s ({len(out)} bytes read)"
                return fail(word, detail, r)
            if watch.fired is not None:  # cut right at the end: the body may be short
                r.close()
                return fail("cancelled" if watch.fired == "cancel" else "too-slow",
                            "cut at the deadline or stop", r)
            if truncated:
                r.close()
            else:
                r.raw.release_conn()  # fully read: back to the pool for keep-alive
        return Response(url=url, method=method, status=r.status_code, headers=r.headers, body=body,
                        elapsed=time.monotonic() - start, location=self._location(session, r, url),
                        retry_after=self._retry_after(r), truncated=truncated)

    def _read_body(self, r: requests.Response, method: str, max_size: int, truncate: bool,
                   deadline: float, out: bytearray) -> tuple[bytes, bool]:
        """The decoded body, at most ``max_size`` bytes (or raises
        :class:`~indexerd.sources.web.neterrors.Failure`); read into ``out`` (so a caller whose read
        was cut knows how much came)."""
        if method == "HEAD" or r.status_code in (204, 304) or 100 <= r.status_code < 200:
            return b"", False
        encoded = r.headers.get("Content-Encoding", "identity").strip().lower() not in ("", "identity")
        declared = r.headers.get("Content-Length", "")
        if not encoded and declared.strip().isdigit() and int(declared) > max_size and not truncate:
            raise Failure("too-large", f"Content-Length {int(declared)} > max_size {max_size} bytes")
        raw = r.raw
        sock = _socket_of(raw)
        last_data = time.monotonic()
        while True:
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                raise Failure("too-slow", f"body not complete within {self.timeout:g} s ({len(out)} bytes read)")
            if sock is not None:
                try:
                    sock.settimeout(left)
                except OSError:
                    pass
            try:
                piece = raw.read1(min(READ_CHUNK_BYTES, max_size - len(out) + 1), decode_content=True)
            except (urllib3.exceptions.ReadTimeoutError, TimeoutError) as exc:
                # The socket timeout was what is left of the request's time: the deadline passed.
                now = time.monotonic()
                raise Failure("too-slow", f"body not complete within {self.timeout:g} s ({len(out)} bytes read, "
                                           f"last data {now - last_data:.2f} s ago)") from exc
            except urllib3.exceptions.DecodeError as exc:
                raise Failure("bad-encoding", str(exc)) from exc
            except (urllib3.exceptions.ProtocolError, http.client.HTTPException) as exc:
                raise Failure("protocol", short(exc)) from exc
            if not piece:
                return bytes(out), False
            last_data = time.monotonic()
            out += piece
            if len(out) > max_size:
                if truncate:
                    return bytes(out[:max_size]), True
                raise Failure("too-large", f"body over max_size {max_size} bytes (decoded)")

    @staticmethod
    def _location(session: requests.Session, r: requests.Response, url: str) -> str | None:
        if r.status_code not in REDIRECT_STATUSES:
            return None
        target = session.get_redirect_target(r)  # re-decodes a UTF-8 Location sent as latin-1
        return urljoin(url, target) if target else None

    @staticmethod
    def _retry_after(r: requests.Response) -> float | None:
        return parse_retry_after(r.headers.get("Retry-After"), date=r.headers.get("Date"))


def _socket_of(raw: urllib3.HTTPResponse) -> socket.socket | None:
    conn = getattr(raw, "connection", None)
    sock = getattr(conn, "sock", None)
    return sock if isinstance(sock, socket.socket) else None
