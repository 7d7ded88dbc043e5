"""A hostile web site, crawled in one pass (issue 7's "garbage in" for the web source).

One loopback site serves every kind of bad answer at once: a redirect cycle and an over-long
redirect chain, an endless chunked body, a body dripping one byte at a time, a gzip bomb, a
Content-Length that lies, a Content-Type that lies, a 10 MB robots.txt, an infinite calendar and
a page of 100,000 links.  Each gets its expected outcome (counted by reason, skipped or refused),
the pass ends in bounded time and memory, and the one good page is indexed and searchable.
"""

from __future__ import annotations

import resource
import time
import zlib


from httpsite import site as site_fixture

from indexerd.config import parse_config
from indexerd.index import open_index
from indexerd.runtime.indexer import Indexer


site = site_fixture  # the fixture (see tests/httpsite.py)


def _gzip_of_spaces(total: int) -> bytes:
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b" " * (1 << 20)
    return b"".join(co.compress(chunk) for _ in range(total // len(chunk))) + co.flush()


def _page(title: str, body: str = "", links=()) -> bytes:
    a = "".join(f'<a href="{h}">x</a>' for h in links)
    return f"<html><head><title>{title}</title></head><body><p>{body}</p>{a}</body></html>".encode()


def test_every_hostile_answer_has_its_outcome_and_the_crawl_stays_bounded(tmp_path, site, monkeypatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    html = {"Content-Type": "text/html"}
    # robots.txt of 10 MB: the rule up front is obeyed, the rest (comments) read no further than 512 KiB
    site.add("/robots.txt", body=b"User-agent: *\nDisallow: /private/\n" + b"# padding\n" * 1_000_000,
             headers={"Content-Type": "text/plain"})
    links = ["/good.html", "/private/secret.html", "/cycle-a", "/chain/0", "/endless.html", "/drip.html",
             "/bomb.html", "/shortlen.html", "/liar.html", "/cal?m=0", "/links.html"]
    site.add("/", body=_page("Home", "start", links), headers=html)
    site.add("/good.html", body=_page("Good", "goodword survives"), headers=html)
    site.add("/private/secret.html", body=_page("Secret", "secretword"), headers=html)
    site.redirect("/cycle-a", "/cycle-b")
    site.redirect("/cycle-b", "/cycle-a")
    for i in range(15):
        site.redirect(f"/chain/{i}", f"/chain/{i + 1}")
    site.add("/endless.html", handler=lambda hit: (200, html, site.endless()))
    site.add("/drip.html", handler=lambda hit: (200, html, site.drip(b"x", 0.5)))
    bomb = _gzip_of_spaces(64 << 20)
    site.add("/bomb.html", body=bomb, headers={**html, "Content-Encoding": "gzip"})
    site.add("/shortlen.html", body=b"<p>short</p>", headers={**html, "Content-Length": "5000"})
    site.add("/liar.html", body=b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40, headers=html)

    def cal(hit):
        n = int(hit.path.split("m=")[1])
        return 200, html, _page(f"Month {n}", f"month {n}", [f"/cal?m={n + 1}"])

    site.add("/cal", handler=cal)
    site.add("/links.html", body=_page("Links", "many links",
                                        [f"http://elsewhere.invalid/{i}" for i in range(100_000)]), headers=html)

    cfg = parse_config(f"""
state_dir = "{tmp_path / 'state'}"
[[sources.web]]
name = "hostile"
seeds = ["{site.url('/')}"]
max_size = "8MB"
timeout = "1.5s"
sitemaps = false
max_query_variants = 5
[sources.web.politeness]
min_delay = "0s"
good_guy_factor = 0.0
max_backoff = "0.05s"
""")
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    ix = Indexer(cfg)
    ix.open("index")
    try:
        s = ix.run_pass(progress=False).as_dict()
        c = ix.counters.snapshot()
    finally:
        ix.close()
    elapsed = time.monotonic() - started
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024

    requested = [h.path for h in site.log]
    assert not any(p.startswith("/private/") for p in requested), "robots.txt Disallow ignored"
    assert c.get("web.drop.robots") == 1
    assert c.get("error.redirect-loop") == 2, c       # the cycle and the 16-hop chain
    assert sum(p.startswith("/chain/") for p in requested) == 11  # /chain/0 .. /chain/10, no more
    assert c.get("skip.too-large") == 2, c            # the endless body and the gzip bomb
    assert c.get("error.too-slow") == 1, c
    assert c.get("error.protocol") == 1, c            # Content-Length promised more than came
    assert c.get("skip.binary") == 1, c               # text/html that is a PNG
    assert sum(p.startswith("/cal") for p in requested) == 5  # max_query_variants
    assert c.get("web.trap.too-many-links") == 1
    assert c.get("web.drop.off-site") == 10_000       # the first 10,000 links, each counted once
    assert s["indexed"] == 3 + 5, s                   # home, good, links page, 5 months
    assert s["errors"] == 2 + 1 + 1, s                # redirect loops, too-slow, protocol
    assert elapsed < 30, elapsed
    assert grown_mb < 300, grown_mb
    found = open_index(tmp_path / "state", create=False)
    try:
        assert [h.key for h in found.search("goodword")] == [site.url("/good.html")]
        assert found.search("secretword") == []
    finally:
        found.close()


def _urlset(urls) -> bytes:
    body = "".join(f"<url><loc>{u}</loc></url>" for u in urls)
    return f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{body}</urlset>'.encode()


def _crawl_twice(tmp_path, site, monkeypatch, config: str) -> tuple[dict, float, float, int, int]:
    """Two passes of one web source: (counters of each pass, seconds, MB of peak RSS growth,
    crawl rows left in the store, store bytes)."""
    import sqlite3

    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    cfg = parse_config(f'state_dir = "{tmp_path / "state"}"\n' + config + """
timeout = "5s"
[sources.web.politeness]
min_delay = "0s"
good_guy_factor = 0.0
""")
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    passes = []
    for _ in range(2):  # the second pass must not reload what the first could not fetch
        ix = Indexer(cfg)
        ix.open("index")
        try:
            ix.run_pass(progress=False)
            passes.append(ix.counters.snapshot())
        finally:
            ix.close()
    elapsed = time.monotonic() - started
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    store = tmp_path / "state" / "state.sqlite3"
    con = sqlite3.connect(store)
    try:
        rows = con.execute("SELECT count(*) FROM crawl").fetchone()[0]
    finally:
        con.close()
    return passes, elapsed, grown_mb, rows, store.stat().st_size


def _letters(i: int) -> str:
    out = ""
    while True:
        i, r = divmod(i, 26)
        out += "abcdefghijklmnopqrstuvwxyz"[r]
        if not i:
            return out


def test_the_frontier_stays_bounded_on_pages_of_10000_new_links(tmp_path, site, monkeypatch) -> None:
    # issue 18: 60 pages of 10,000 new links each queued 590,000 URLs (741 MB RSS)
    pages = 10
    for p in range(pages):
        site.add(f"/p{p}", body=_page(f"P{p}", f"page {p}", [f"/w/{_letters(p * 10_000 + i)}" for i in range(10_000)]),
                 headers={"Content-Type": "text/html"})
    seeds = ", ".join(f'"{site.url(f"/p{p}")}"' for p in range(pages))
    passes, elapsed, grown_mb, rows, size = _crawl_twice(tmp_path, site, monkeypatch, f"""
[[sources.web]]
name = "links"
seeds = [{seeds}]
sitemaps = false
max_pages = 100
max_queued = 2000
""")
    for c in passes:  # 2,000 wait in memory, 10 x 2,000 on disk; the rest are counted, not queued
        assert c.get("web.frontier.spilled") == 20_000, c
        assert pages * 10_000 - 22_000 - 100 <= c.get("web.drop.frontier-full") <= pages * 10_000 - 22_000, c
    assert rows <= 100, rows          # URLs queued but never asked are not kept for the next pass
    assert size < 20 * 1024 * 1024, size
    assert grown_mb < 150, grown_mb
    assert elapsed < 120, elapsed


def test_a_sitemap_index_of_1000_sitemaps_queues_a_bounded_number_of_urls(tmp_path, site, monkeypatch) -> None:
    # issue 18: a sitemap index of 1,000 sitemaps queued 2.45 M rows (3.0 GB RSS, a 421 MB store, 432 s)
    xml = {"Content-Type": "application/xml"}
    site.add("/robots.txt", body=f"User-agent: *\nSitemap: {site.url('/index.xml')}\n".encode())
    site.add("/", body=_page("Home", "home"), headers={"Content-Type": "text/html"})
    site.add("/index.xml", headers=xml, body=(
        '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        + "".join(f"<sitemap><loc>{site.url(f'/sm/{i}.xml')}</loc></sitemap>" for i in range(1000))
        + "</sitemapindex>").encode())
    urls = "".join(f"<url><loc>{site.url(f'/sNN/u{i}')}</loc></url>" for i in range(20_000))
    template = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'.encode()

    def sitemap(hit):  # 20,000 URLs of its own (made per request: the test keeps no 49 MB of them)
        n = hit.path.split("/")[-1].split(".")[0]
        return 200, xml, template.replace(b"/sNN/", f"/s{n}/".encode())

    for i in range(1000):
        site.add(f"/sm/{i}.xml", handler=sitemap)
    passes, elapsed, grown_mb, rows, size = _crawl_twice(tmp_path, site, monkeypatch, f"""
[[sources.web]]
name = "maps"
seeds = ["{site.url('/')}"]
max_pages = 60
max_queued = 5000
""")
    for c in passes:
        assert c.get("web.sitemap.truncated") == 49, c             # 50 files a pass (the index is one)
        assert 55_000 <= c.get("web.sitemap.urls") <= 55_060, c    # 5,000 in memory, 50,000 on disk
        assert c.get("web.frontier.spilled") == 50_000, c
        assert c.get("web.drop.frontier-full") == 49 * 10_000 - c["web.sitemap.urls"], c
    assert sum(h.path.startswith("/sm/") for h in site.log) == 2 * 49
    assert rows <= 60 + 60, rows                                # the overflow is gone after the pass
    assert size < 40 * 1024 * 1024, size
    assert grown_mb < 150, grown_mb
    assert elapsed < 120, elapsed
