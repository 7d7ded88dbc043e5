"""robots.txt: RFC 9309 matching through protego, our decoding and size cut, the HTTP status rules
of RFC 9309 §2.3.1, and the cache -- the fetching parts against a real loopback server."""

from __future__ import annotations

import threading
import time
import tracemalloc

import pytest
from httpsite import site as site_fixture

from indexerd.sources.web.fetch import Fetcher
from indexerd.sources.web.httpresponse import Response
from indexerd.sources.web.frontier import Frontier, Task
from indexerd.sources.web.politeness import HostSlots
from indexerd.sources.web.robots import MAX_ROBOTS_BYTES, RobotsCache, RobotsRules, follow_redirects, parse_robots

site = site_fixture  # the fixture; an assignment, so pyflakes does not call each use a redefinition
BASE = "https://example.test"

RFC_CASES = b"""\
# the cases of LIBRARIES.md section 8
User-agent: indexerd
Allow: /private/public
Disallow: /private
Allow: /shop
Disallow: /shop/cart
Allow: /tie
Disallow: /tie
Disallow: /*.pdf$
Crawl-delay: 2.5

User-agent: otherbot
Disallow: /

User-agent: indexerd
Disallow: /second-group
Disalow: /google-typo
Dissalloww: /typo
Disallow /no-colon
: novalue
this line is garbage

Sitemap: https://example.test/sitemap.xml
sitemap: https://example.test/news.xml
"""


def rules_of(data: bytes) -> RobotsRules:
    return RobotsRules.from_bytes(data, fetched_at=0.0)


@pytest.mark.parametrize(("path", "expected"), [
    ("/private/public/x", True),    # longer Allow beats shorter Disallow
    ("/private/other", False),
    ("/shop/cart/1", False),        # longer Disallow beats an earlier, shorter Allow
    ("/shop/item", True),
    ("/tie", True),                 # equal length: Allow wins
    ("/files/doc.pdf", False),      # Disallow: /*.pdf$
    ("/files/doc.pdf?x=1", True),   # $ anchors the end
    ("/second-group/a", False),     # two groups for one UA are merged
    ("/typo", True),                # an unknown field is not a rule
    # protego 0.7 (like Google's parser) reads the misspellings Disalow/Dissallow/... as Disallow,
    # and a line without the colon too: stricter than LIBRARIES.md section 8 says.
    ("/google-typo", False),
    ("/no-colon", False),
    ("/robots.txt", True),
])
def test_rfc9309_cases(path, expected):
    assert rules_of(RFC_CASES).allowed(BASE + path) is expected


def test_crawl_delay_and_sitemaps():
    rules = rules_of(RFC_CASES)
    assert rules.crawl_delay == 2.5
    assert rules.sitemaps == ("https://example.test/sitemap.xml", "https://example.test/news.xml")
    assert (rules.status, rules.fetched_at, rules.expires_at) == ("ok", 0.0, 86400.0)


def test_the_product_token_is_matched_not_the_user_agent():
    parser, delay, _ = parse_robots(RFC_CASES, "otherbot")
    assert delay is None and not parser.can_fetch(BASE + "/x", "otherbot")
    with pytest.raises(ValueError):
        RobotsCache("Mozilla/5.0 (compatible; indexerd/0.1)")


def test_b20_longest_match_wins():
    data = (b"User-agent: *\nDisallow: /\nAllow: /public\nDisallow: /wp-admin/\n"
            b"Allow: /wp-admin/admin-ajax.php\n")
    rules = rules_of(data)
    assert [rules.allowed(BASE + p) for p in
            ("/public/page.html", "/wp-admin/admin-ajax.php", "/private/x", "/wp-admin/options.php")] == \
        [True, True, False, False]


def test_b21_bom_does_not_eat_the_first_group():
    rules = rules_of(b"\xef\xbb\xbfUser-agent: *\nDisallow: /\n")
    assert rules.allowed(BASE + "/") is False
    assert rules.allowed(BASE + "/index.html") is False
    assert rules.allowed(BASE + "/robots.txt") is True


def test_invalid_utf8_is_replaced_not_fatal():
    rules = rules_of(b"User-agent: *\nDisallow: /caf\xe9\nDisallow: /x\n")
    assert rules.allowed(BASE + "/x/1") is False
    assert rules.allowed(BASE + "/y") is True


def test_ten_megabyte_robots_is_cut_at_500_kib_quickly_and_in_bounded_memory():
    head = b"User-agent: indexerd\nDisallow: /early\n"
    filler = b"".join(b"Disallow: /filler/%08d\n" % i for i in range(10 * 1024 * 1024 // 28))
    data = head + filler + b"Disallow: /late\n"
    assert len(data) > 10_000_000
    tracemalloc.start()
    t0 = time.monotonic()
    rules = rules_of(data)
    took = time.monotonic() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert rules.allowed(BASE + "/early/x") is False
    assert rules.allowed(BASE + "/late") is True  # past the 500 KiB cut: ignored
    assert rules.allowed(BASE + "/filler/00000001") is False
    assert took < 3.0
    assert peak < 40 * 1024 * 1024, f"parsing peaked at {peak} bytes"


def test_cut_happens_at_a_line_boundary():
    # The line that straddles the 500 KiB mark must be dropped whole, not parsed as "Disallow: /" .
    head = b"User-agent: *\n"
    pad = b"#" * (MAX_ROBOTS_BYTES - len(head) - 12) + b"\n"
    data = head + pad + b"Disallow: /abcdef\n"  # the cut falls inside this line, after "Disallow: /"
    assert len(head + pad) < MAX_ROBOTS_BYTES < len(data)
    rules = rules_of(data)
    assert rules.allowed(BASE + "/anything") is True


# -- the status rules of RFC 9309 §2.3.1 ------------------------------------------------------

class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def resp(status: int | None, body: bytes = b"", error: str | None = None, location: str | None = None) -> Response:
    return Response(url=BASE + "/robots.txt", method="GET", status=status, headers={}, body=body, elapsed=0.01,
                    error=error, location=location)


@pytest.mark.parametrize(("status", "error", "expected"), [
    (200, None, "ok"),
    (404, None, "allow-all"), (401, None, "allow-all"), (403, None, "allow-all"), (410, None, "allow-all"),
    (429, None, "unreachable"), (500, None, "unreachable"), (503, None, "unreachable"),
    (None, "timeout", "unreachable"), (None, "connection", "unreachable"), (200, "too-slow", "unreachable"),
])
def test_status_rules(status, error, expected):
    cache = RobotsCache(clock=Clock())
    rules = cache.put_response("https://example.test:443", resp(status, b"User-agent: *\nDisallow: /x\n", error))
    assert rules.status == expected
    allowed = {"ok": (True, False), "allow-all": (True, True), "unreachable": (False, False)}[expected]
    assert (rules.allowed(BASE + "/y"), rules.allowed(BASE + "/x")) == allowed
    assert rules.allowed(BASE + "/robots.txt") is True


def test_expiry_ttls():
    clock = Clock()
    cache = RobotsCache(ttl=10 ** 9, clock=clock)  # capped at 24 h
    cache.put_response("a", resp(200, b""))
    cache.put_response("b", resp(503))
    assert cache.get("a").expires_at == 100.0 + 86400.0
    assert cache.get("b").expires_at == 100.0 + 300.0
    assert cache.get("c") is None
    clock.now += 300.0
    assert cache.get("b") is None and cache.get("a") is not None
    clock.now += 86400.0
    assert cache.get("a") is None


def test_a_redirect_the_caller_stopped_following_is_allow_all():
    cache = RobotsCache(clock=Clock())
    rules = cache.put_response("h", resp(301, location=BASE + "/elsewhere"), hops=5)
    assert (rules.status, rules.detail) == ("allow-all", "301 after 5 redirects")
    assert cache.put_response("h", resp(301, location=BASE + "/elsewhere")).status == "allow-all"
    assert cache.put_response("h", resp(304)).status == "allow-all"  # a 3xx that is no redirect


# -- through the real fetcher and a real server -----------------------------------------------

@pytest.fixture
def fetcher(monkeypatch):
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    f = Fetcher("Mozilla/5.0 (compatible; indexerd/0.1)", timeout=2.0)
    yield f
    f.close()


def _get(fetcher):
    return lambda url: fetcher.fetch(url, max_size=MAX_ROBOTS_BYTES, truncate=True)


def _load(cache: RobotsCache, host: str, get) -> RobotsRules:
    """What a crawl worker does for a host's robots.txt: the cached verdict, else the request,
    its redirects (the one loop, follow_redirects) and the verdict of the final answer."""
    rules = cache.get(host)
    if rules is None:
        resp, hops = follow_redirects(host + "/robots.txt", get)
        rules = cache.put_response(host, resp, hops=hops)
    return rules


def test_load_over_http(site, fetcher):
    site.add("/robots.txt", body=b"\xef\xbb\xbfUser-agent: indexerd\nDisallow: /private\nCrawl-delay: 0.5\n",
             headers={"Content-Type": "text/plain"})
    cache = RobotsCache()
    key = site.base  # 'http://127.0.0.1:<port>' is already a host key
    rules = _load(cache, key, _get(fetcher))
    assert (rules.status, rules.crawl_delay) == ("ok", 0.5)
    assert not rules.allowed(site.url("/private/a")) and rules.allowed(site.url("/public"))
    assert _load(cache, key, _get(fetcher)) is rules  # cached: one request only
    assert [h.path for h in site.log] == ["/robots.txt"]


def test_load_404_allows_all_and_503_allows_nothing(site, fetcher):
    cache = RobotsCache()
    assert _load(cache, site.base, _get(fetcher)).status == "allow-all"  # no route: 404
    site.add("/robots.txt", status=503, body=b"busy")
    cache = RobotsCache()
    rules = _load(cache, site.base, _get(fetcher))
    assert (rules.status, rules.allowed(site.url("/"))) == ("unreachable", False)


def test_load_follows_five_redirects_then_gives_up(site, fetcher):
    for i in range(5):
        site.redirect(f"/r{i}", f"/r{i + 1}")
    site.redirect("/robots.txt", "/r0", status=301)
    site.add("/r4", body=b"User-agent: *\nDisallow: /\n")  # reached after 5 hops
    cache = RobotsCache()
    rules = _load(cache, site.base, _get(fetcher))
    assert (rules.status, rules.allowed(site.url("/a"))) == ("ok", False)
    assert [h.path for h in site.log] == ["/robots.txt", "/r0", "/r1", "/r2", "/r3", "/r4"]
    site.redirect("/r4", "/r5")  # now six hops: treated as unavailable (allow-all)
    site.add("/r5", body=b"User-agent: *\nDisallow: /\n")
    cache = RobotsCache()
    rules = _load(cache, site.base, _get(fetcher))
    assert (rules.status, rules.allowed(site.url("/a"))) == ("allow-all", True)
    assert "/r5" not in [h.path for h in site.log]


def test_load_treats_a_redirect_to_another_scheme_as_allow_all(site, fetcher):
    site.redirect("/robots.txt", "ftp://example.test/robots.txt")
    rules = _load(RobotsCache(), site.base, _get(fetcher))
    assert (rules.status, rules.detail) == ("allow-all", "302 after 0 redirects")


def test_the_frontier_asks_a_hosts_robots_txt_once_and_holds_its_urls_until_it_is_known():
    host = "http://site.test:80"
    frontier = Frontier("breadth", HostSlots(), RobotsCache(), budget=10)
    frontier.put(Task(url=host + "/a", host=host))
    frontier.put(Task(url=host + "/b", host=host))
    first = frontier.take()
    assert (first.kind, first.url) == ("robots", host + "/robots.txt")
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    assert frontier.take(cancel) is None  # no second robots.txt request, no page before the verdict
