"""The fetcher against a real loopback server (tests/httpsite.py): limits, errors, validators."""

from __future__ import annotations

import gzip
import resource
import socket
import threading
import time
import zlib
from datetime import UTC, datetime

import pytest
from httpsite import Site, unused_port
from httpsite import site as site_fixture

from indexerd.sources.web.fetch import Fetcher
from indexerd.sources.web.httpresponse import Response, parse_retry_after


site = site_fixture  # the fixture; an assignment, so pyflakes does not call each use a redefinition
UA = "Mozilla/5.0 (compatible; indexerd/0.1; +https://example.test/bot)"
LM = "Sat, 08 Sep 2001 21:46:40 GMT"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fetcher():
    f = Fetcher(UA, timeout=5.0)
    yield f
    f.close()


@pytest.mark.alone  # a wall-clock bound (1 s)
def test_plain_get(site, fetcher):
    site.add("/a", body=b"hello", headers={"Content-Type": "text/plain"})
    r = fetcher.fetch(site.url("/a"), max_size=100)
    assert (r.status, r.body, r.error, r.method, r.url) == (200, b"hello", None, "GET", site.url("/a"))
    assert r.headers["content-type"] == "text/plain"  # case-insensitive
    assert 0 < r.elapsed < 1
    assert site.log[0].header("User-Agent") == UA
    assert not r.not_modified and not r.is_redirect and r.location is None and r.retry_after is None


def test_keep_alive_reuses_the_connection(site, fetcher):
    site.add("/a", body=b"x")
    for _ in range(3):
        assert fetcher.fetch(site.url("/a"), max_size=10).status == 200
    assert len({h.client for h in site.log}) == 1


def test_conditional_get_sends_validators_verbatim_and_gets_304(site, fetcher):
    # CASES B15: the exact strings received go back; the server compares them byte for byte.
    site.static("/p", b"hello", last_modified=LM, etag='"v1"')
    r1 = fetcher.fetch(site.url("/p"), max_size=100)
    assert (r1.status, r1.body) == (200, b"hello")
    assert (r1.headers["Last-Modified"], r1.headers["ETag"]) == (LM, '"v1"')
    r2 = fetcher.fetch(site.url("/p"), etag=r1.headers["ETag"], last_modified=r1.headers["Last-Modified"],
                       max_size=100)
    assert (r2.status, r2.body, r2.error, r2.not_modified) == (304, b"", None, True)
    assert site.log[1].header("If-Modified-Since") == "Sat, 08 Sep 2001 21:46:40 GMT"
    assert site.log[1].header("If-None-Match") == '"v1"'
    assert site.log[0].header("If-Modified-Since") is None


def test_if_modified_since_alone_is_exact(site, fetcher):
    site.static("/p", b"hello", last_modified=LM)
    assert fetcher.fetch(site.url("/p"), last_modified=LM, max_size=100).status == 304
    # A re-formatted date is not byte-identical: the strict server answers 200 (why B15 matters).
    assert fetcher.fetch(site.url("/p"), last_modified="2001-09-08T21:46:40Z", max_size=100).status == 200


def test_head_has_headers_and_no_body(site, fetcher):
    site.static("/p", b"hello", last_modified=LM, etag='"v1"')
    r = fetcher.fetch(site.url("/p"), method="HEAD", max_size=100)
    assert (r.status, r.body, r.method, r.headers["Content-Length"]) == (200, b"", "HEAD", "5")
    assert site.log[0].method == "HEAD"


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_redirects_are_not_followed_and_location_is_resolved(site, fetcher, method):
    site.redirect("/dir/old", "../new?x=1", status=301)
    site.add("/new", body=b"new")
    r = fetcher.fetch(site.url("/dir/old"), method=method, max_size=100)
    assert (r.status, r.location, r.is_redirect, r.permanent_redirect) == (301, site.url("/new?x=1"), True, True)
    assert [h.path for h in site.log] == ["/dir/old"]


def test_temporary_redirect_and_redirect_without_location(site, fetcher):
    site.redirect("/t", "http://other.test/x", status=307)
    site.add("/nol", status=302)
    r = fetcher.fetch(site.url("/t"), max_size=100)
    assert (r.location, r.is_redirect, r.permanent_redirect) == ("http://other.test/x", True, False)
    r = fetcher.fetch(site.url("/nol"), max_size=100)
    assert (r.status, r.location, r.is_redirect) == (302, None, False)


@pytest.mark.alone  # a wall-clock bound (1 s)
def test_endless_chunked_body_is_cut_at_max_size(site, fetcher):
    site.add("/endless", handler=lambda hit: (200, {}, site.endless(b"y" * 10000)))
    r = fetcher.fetch(site.url("/endless"), max_size=50_000)
    assert (r.status, r.error, r.body) == (200, "too-large", b"")
    assert r.elapsed < 1


def test_endless_body_truncated_on_request(site, fetcher):
    site.add("/endless", handler=lambda hit: (200, {}, site.endless(b"y" * 10000)))
    r = fetcher.fetch(site.url("/endless"), max_size=50_000, truncate=True)
    assert (r.status, r.error, len(r.body), r.truncated) == (200, None, 50_000, True)


def test_declared_content_length_over_max_size_is_refused_unread(site, fetcher):
    site.add("/big", body=b"z" * 20_000)
    r = fetcher.fetch(site.url("/big"), max_size=10_000)
    assert (r.status, r.error, r.body) == (200, "too-large", b"")
    assert "Content-Length 20000" in r.detail


def test_exactly_max_size_is_fine(site, fetcher):
    site.add("/b", handler=lambda hit: (200, {}, iter([b"a" * 600, b"b" * 400])))
    r = fetcher.fetch(site.url("/b"), max_size=1000)
    assert (r.error, len(r.body)) == (None, 1000)


@pytest.mark.alone  # a wall-clock bound (1.0-1.15 s)
@pytest.mark.parametrize("path", ["/drip", "/dripcl"])
def test_dripping_body_is_cut_at_the_timeout(site, path):
    # one byte every 0.2 s: each read is quick, the whole request is not (chunked, then Content-Length)
    site.add("/drip", handler=lambda hit: (200, {}, site.drip(b"x", 0.2)))
    site.add("/dripcl", handler=lambda hit: (200, {"Content-Length": "100"}, site.drip(b"x", 0.2)))
    f = Fetcher(UA, timeout=1.0)
    try:
        r = f.fetch(site.url(path), max_size=1000)
    finally:
        f.close()
    assert (r.status, r.error, r.body) == (200, "too-slow", b"")
    assert 1.0 <= r.elapsed < 1.15


@pytest.mark.alone  # a wall-clock bound (0.3-0.45 s)
def test_server_silent_after_the_headers_is_too_slow(site):
    def handler(hit):
        def body():
            yield b"x"
            site.stopping.wait(2)
        return 200, {}, body()
    site.add("/stall", handler=handler)
    f = Fetcher(UA, timeout=0.3)
    try:
        r = f.fetch(site.url("/stall"), max_size=10)
    finally:
        f.close()
    assert (r.status, r.error, r.body) == (200, "too-slow", b"")
    assert "1 bytes read" in r.detail
    assert 0.3 <= r.elapsed < 0.45


@pytest.mark.alone  # a wall-clock bound (0.29-0.6 s)
def test_server_silent_before_the_headers_is_a_timeout(site):
    site.add("/late", body=b"x", delay=1.0)
    f = Fetcher(UA, timeout=0.3)
    try:
        r = f.fetch(site.url("/late"), max_size=10)
    finally:
        f.close()
    assert (r.status, r.error, r.body) == (None, "timeout", b"")
    assert 0.29 <= r.elapsed < 0.6


def test_connection_refused(fetcher):
    r = fetcher.fetch(f"http://127.0.0.1:{unused_port()}/x", max_size=10)
    assert (r.status, r.error, r.body, dict(r.headers)) == (None, "connection", b"", {})
    assert "refused" in r.detail.lower()


def test_https_to_a_plain_http_server_is_ssl(site, fetcher):
    site.add("/a", body=b"x")
    r = fetcher.fetch(f"https://127.0.0.1:{site.port}/a", max_size=10)
    assert (r.status, r.error, r.body) == (None, "ssl", b"")


def test_garbage_instead_of_a_status_line_is_protocol(fetcher):
    srv = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(b"SPAM SPAM SPAM\r\n\r\n")

    t = threading.Thread(target=serve)
    t.start()
    try:
        r = fetcher.fetch(f"http://127.0.0.1:{srv.getsockname()[1]}/", max_size=10)
    finally:
        t.join(5)
        srv.close()
    assert (r.status, r.error) == (None, "protocol")
    assert "BadStatusLine" in r.detail


def test_closed_fetcher_refuses(site):
    f = Fetcher(UA)
    f.close()
    f.close()  # twice is fine
    with pytest.raises(RuntimeError):
        f.fetch(site.url("/"), max_size=10)


def test_body_shorter_than_content_length_is_a_protocol_error(site, fetcher):
    site.add("/short", body=b"abc", headers={"Content-Length": "10"})
    r = fetcher.fetch(site.url("/short"), max_size=100)
    assert (r.status, r.error, r.body) == (200, "protocol", b"")
    assert "3 bytes read, 7 more expected" in r.detail


def test_bad_gzip_is_bad_encoding(site, fetcher):
    site.add("/bad", body=b"this is not gzip", headers={"Content-Encoding": "gzip"})
    r = fetcher.fetch(site.url("/bad"), max_size=100)
    assert (r.status, r.error, r.body) == (200, "bad-encoding", b"")


def test_gzip_body_is_decoded_and_counted_decoded(site, fetcher):
    site.add("/gz", body=gzip.compress(b"hello " * 1000), headers={"Content-Encoding": "gzip"})
    r = fetcher.fetch(site.url("/gz"), max_size=6000)
    assert (r.error, r.body) == (None, b"hello " * 1000)
    r = fetcher.fetch(site.url("/gz"), max_size=5999)  # compressed it is tiny; decoded it is over
    assert (r.error, r.body) == ("too-large", b"")


def _gzip_of_zeros(total: int) -> bytes:
    co = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: gzip container
    block = b"\0" * (1 << 20)
    return b"".join(co.compress(block) for _ in range(total >> 20)) + co.flush()


@pytest.mark.alone  # a memory bound (peak RSS)
def test_gzip_bomb_is_bounded(site, fetcher):
    bomb = _gzip_of_zeros(100 << 20)  # 100 MiB of zeros in ~100 KB
    assert len(bomb) < 200_000
    site.add("/bomb", body=bomb, headers={"Content-Encoding": "gzip"})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    r = fetcher.fetch(site.url("/bomb"), max_size=1 << 20)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert (r.status, r.error, r.body) == (200, "too-large", b"")
    assert grown_kib < 20 * 1024, f"peak RSS grew by {grown_kib} KiB"
    r = fetcher.fetch(site.url("/bomb"), max_size=1 << 20, truncate=True)
    assert (r.error, len(r.body), r.truncated) == (None, 1 << 20, True)


def test_retry_after_seconds_and_http_date(site, fetcher):
    site.add("/busy", status=503, headers={"Retry-After": "120"})
    site.add("/slow", status=429, headers={"Retry-After": "Wed, 21 Oct 2015 07:30:00 GMT",
                                           "Date": "Wed, 21 Oct 2015 07:28:00 GMT"})
    assert fetcher.fetch(site.url("/busy"), max_size=100).retry_after == 120.0
    r = fetcher.fetch(site.url("/slow"), max_size=100)
    assert (r.status, r.retry_after, r.error) == (429, 120.0, None)


def test_parse_retry_after():
    now = datetime(2015, 10, 21, 7, 0, 0, tzinfo=UTC)
    assert parse_retry_after("0") == 0.0
    assert parse_retry_after(" 30 ") == 30.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", now=now) == 1800.0
    assert parse_retry_after("Wed, 21 Oct 2015 06:30:00 GMT", now=now) == 0.0  # past: no wait
    assert parse_retry_after("soon", now=now) is None
    assert parse_retry_after("-5") is None
    assert parse_retry_after(None) is None


def test_auth_only_to_auth_hosts(site):
    site.add("/a", body=b"ok")
    site.redirect("/away", f"http://localhost:{site.port}/a")
    f = Fetcher(UA, auth=("user", "secret"), auth_hosts=frozenset({"127.0.0.1"}))
    try:
        r = f.fetch(site.url("/away"), max_size=100)
        assert f.fetch(r.location, max_size=100).status == 200  # localhost: same server, other host name
        f.fetch(site.url("/a"), max_size=100)
    finally:
        f.close()
    assert [h.header("Authorization") for h in site.log] == ["Basic dXNlcjpzZWNyZXQ=", None,
                                                             "Basic dXNlcjpzZWNyZXQ="]


def test_non_http_urls_raise_value_error(fetcher):
    for bad in ("ftp://example.test/x", "file:///etc/passwd", "/relative", "http:///nohost"):
        with pytest.raises(ValueError):
            fetcher.fetch(bad, max_size=10)
    with pytest.raises(ValueError):
        fetcher.fetch("http://example.test/", method="POST", max_size=10)


@pytest.mark.alone  # a wall-clock bound (0.3 s)
def test_one_session_per_thread(site, fetcher):
    site.add("/a", body=b"x", delay=0.1)
    results: list[Response] = []
    threads = [threading.Thread(target=lambda: results.append(fetcher.fetch(site.url("/a"), max_size=10)))
               for _ in range(3)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert [r.status for r in results] == [200, 200, 200]
    assert time.monotonic() - t0 < 0.3  # in parallel, one connection each
    assert len({h.client for h in site.log}) == 3
    assert fetcher.open_sessions() == 3
    fetcher.close()
    assert fetcher.open_sessions() == 0


@pytest.mark.alone  # a wall-clock bound (2 s)
def test_site_closes_while_a_client_reads_an_endless_body():
    s = Site().start()
    s.add("/endless", handler=lambda hit: (200, {}, s.endless()))
    c = socket.create_connection(("127.0.0.1", s.port))
    c.sendall(b"GET /endless HTTP/1.1\r\nHost: x\r\n\r\n")
    assert c.recv(100).startswith(b"HTTP/1.1 200")
    t0 = time.monotonic()
    s.close()
    assert time.monotonic() - t0 < 2
    c.close()
    s.close()  # twice is fine


@pytest.mark.alone  # a wall-clock bound (timeout + 0.5 s)
@pytest.mark.parametrize("timeout", [0.5, 1.5])
def test_dripped_headers_are_cut_at_the_timeout(site, timeout):
    # issue 18: one header byte at a time kept a request alive 90 s with timeout = "5s"
    site.add("/h", header_drip=0.2)
    f = Fetcher(UA, timeout=timeout)
    try:
        started = time.monotonic()
        r = f.fetch(site.url("/h"), max_size=100)
        took = time.monotonic() - started
    finally:
        f.close()
    assert (r.status, r.error, r.body) == (None, "timeout", b""), r
    assert timeout <= took < timeout + 0.5, took


@pytest.mark.alone  # a wall-clock bound (0.5-1 s)
def test_cancel_ends_a_request_waiting_for_dripped_headers_or_a_slow_body(site):
    site.add("/h", header_drip=0.2)
    site.add("/drip", handler=lambda hit: (200, {}, site.drip(b"x", 0.2)))
    f = Fetcher(UA, timeout=60.0)
    try:
        for path in ("/h", "/drip"):
            cancel = threading.Event()
            threading.Timer(0.5, cancel.set).start()
            started = time.monotonic()
            r = f.fetch(site.url(path), max_size=100, cancel=cancel)
            took = time.monotonic() - started
            assert (r.error, r.body) == ("cancelled", b""), (path, r)
            assert 0.5 <= took < 1.0, (path, took)
        cancel = threading.Event()
        cancel.set()
        before = len(site.log)
        assert f.fetch(site.url("/drip"), max_size=100, cancel=cancel).error == "cancelled"
        assert len(site.log) == before  # a stop that came first sends nothing
    finally:
        f.close()


def test_cookies_are_never_kept_nor_sent(site, fetcher):
    # issue 18: a site grew the jar to a 20 MB Cookie header after 58 pages
    def grow(hit):
        n = len(site.log)
        return 200, {"Set-Cookie": f"c{n}={'v' * 3000}; Path=/"}, b"x"
    site.add("/c", handler=grow)
    for _ in range(5):
        assert fetcher.fetch(site.url("/c"), max_size=10).status == 200
    assert [h.header("Cookie") for h in site.log] == [None] * 5


def test_a_request_cut_while_the_process_was_stopped_is_a_pause_not_a_timeout(site):
    """Issue 30: a node stopped (SIGSTOP) past a request's deadline logged it as the site's
    ``timeout``; a request that ends long after its deadline because the process was not
    running is ``paused``.  A real process, really stopped, against a server that answers
    late."""
    import os
    import signal
    import subprocess
    import sys

    site.add("/late", body=b"x", delay=8.0)
    child = ("import sys\n"
             "from indexerd.sources.web.fetch import Fetcher\n"
             "f = Fetcher('indexerd-test/1.0', timeout=1.0)\n"
             "print('asking', flush=True)\n"
             "r = f.fetch(sys.argv[1], max_size=10)\n"
             "print(r.error, flush=True)\n"
             "print(r.detail, flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", child, site.url("/late")], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "asking"
        deadline = time.monotonic() + 10
        while not site.hits("/late"):  # the request reached the server: the process waits for it
            assert time.monotonic() < deadline, "the request never came"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(4.0)  # the pause itself: past the 1 s deadline by more than PAUSE_SECONDS
        os.kill(proc.pid, signal.SIGCONT)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    error, detail = out.splitlines()[:2]
    assert error == "paused", out
    assert "not running" in detail
