"""Adaptive recrawl: the pure schedule (indexerd/sources/web/recrawl.py), then the crawler on the loopback site
(tests/httpsite.py) with simulated passes an ``interval`` apart."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from conftest import CLI
from httpsite import site as site_fixture
from test_web import Crawl, html, web_config

from indexerd.config import parse_config
from indexerd.runtime.indexer import Indexer
from indexerd.sources.web.recrawl import CHANGED, FAILED, UNCHANGED, PassRecrawl, is_due, next_schedule

site = site_fixture
UTC = timezone.utc
T0 = datetime(2026, 1, 1, tzinfo=UTC)
H = 3600.0
DAY = 86400.0


# -- the schedule (pure) -------------------------------------------------------------------------
def sched(interval, change, **kw):
    return next_schedule(interval, change, T0, min_interval=H, max_interval=DAY, **kw)


def test_a_pass_asks_a_known_url_when_due_or_when_every_url_is() -> None:
    """PassRecrawl: adaptive recrawl asks what is due (up to half an interval after the pass
    starts); a forced or recheck pass, or adaptive recrawl off (max interval no more than the
    interval), asks every known URL."""
    later = T0 + timedelta(seconds=H)
    adaptive = PassRecrawl(T0, H, DAY)
    assert not adaptive.all_due()
    assert adaptive.due(None) and adaptive.due(T0 + timedelta(seconds=H / 2))
    assert not adaptive.due(later)
    assert PassRecrawl(T0, H, DAY, forced=True).due(later)
    assert PassRecrawl(T0, H, DAY, recheck=True).due(later)
    off = PassRecrawl(T0, H, H)
    assert off.all_due() and off.due(later)
    adaptive.pass_start = later  # a resumed pass counts from its own start
    assert adaptive.due(later)


def test_a_pass_schedules_a_fetch_from_its_own_start_within_the_sources_bounds() -> None:
    recrawl = PassRecrawl(T0, H, DAY)
    assert recrawl.next(None, UNCHANGED, None, seed=False) == sched(None, UNCHANGED)
    assert recrawl.next(DAY, UNCHANGED, None, seed=False).interval_seconds == DAY  # the most
    assert recrawl.next(H, CHANGED, None, seed=False).interval_seconds == H  # the least
    assert recrawl.next(None, UNCHANGED, "daily", seed=False) == sched(None, UNCHANGED, changefreq="daily")


def test_unchanged_lengthens_and_changed_shortens_by_nutch_rates() -> None:
    s = sched(10 * H, UNCHANGED)
    assert s.interval_seconds == pytest.approx(12 * H) and s.due_at == T0 + timedelta(hours=12)
    assert s.reason == "unchanged: interval x1.2"
    s = sched(10 * H, CHANGED)
    assert s.interval_seconds == pytest.approx(8 * H) and s.reason == "changed: interval x0.8"


def test_interval_stays_between_the_site_interval_and_the_maximum() -> None:
    low = sched(1.1 * H, CHANGED)
    assert low.interval_seconds == H and "least" in low.reason
    high = sched(23 * H, UNCHANGED)
    assert high.interval_seconds == DAY and "most" in high.reason
    assert sched(100 * DAY, UNCHANGED).interval_seconds == DAY  # a stored value above a lowered max


def test_failure_keeps_the_interval_and_asks_at_the_next_pass() -> None:
    s = sched(10 * H, FAILED)
    assert (s.interval_seconds, s.due_at) == (10 * H, T0 + timedelta(hours=1))


def test_first_fetch_uses_changefreq_within_bounds() -> None:
    assert sched(None, CHANGED).interval_seconds == H
    assert sched(None, CHANGED, changefreq="Daily ").interval_seconds == DAY
    assert sched(None, CHANGED, changefreq="weekly").interval_seconds == DAY  # the maximum
    assert sched(None, CHANGED, changefreq="always").interval_seconds == H
    never = sched(None, UNCHANGED, changefreq="never")
    assert never.interval_seconds == DAY and "changefreq never" in never.reason
    assert sched(None, CHANGED, changefreq="fortnightly").interval_seconds == H


def test_a_seed_is_asked_every_pass() -> None:
    s = sched(20 * H, UNCHANGED, seed=True)
    assert (s.interval_seconds, s.due_at, s.reason) == (H, T0 + timedelta(hours=1), "seed: asked every pass")


def test_is_due_rounds_to_the_nearest_pass() -> None:
    assert is_due(None, T0, H)
    assert is_due(T0 + timedelta(minutes=30), T0, H)
    assert not is_due(T0 + timedelta(minutes=31), T0, H)


def test_unknown_change_word_is_refused() -> None:
    with pytest.raises(ValueError, match="change must be"):
        sched(H, "maybe")


# -- the crawler, passes one simulated hour apart ----------------------------------------------------
class Clocked(Crawl):
    """A :class:`Crawl` whose passes run at ``self.now`` (advanced by the test)."""

    def __init__(self, *a, **kw) -> None:
        kw.setdefault("interval", "1h")
        kw.setdefault("max_recrawl_interval", "1d")
        super().__init__(*a, **kw)
        self.now = T0

    def run(self, **more) -> dict:
        ix = Indexer(parse_config(self.config(**more)))
        ix.open("index")
        for src in ix.sources.values():
            src.clock = lambda: self.now
        try:
            summary = ix.run_pass(progress=False).as_dict()
            self.counters = ix.counters.snapshot()
        finally:
            ix.close()
        return summary


def run_until_due_later(crawl: Clocked, url: str, hours: float = 2) -> None:
    """Passes an hour apart (from T0) until ``url`` is due more than ``hours`` ahead."""
    for n in range(1, 40):
        crawl.now = T0 + timedelta(hours=n)
        crawl.run()
        due = datetime.fromisoformat(crawl.crawl_rows()[url]["due_at"].replace("Z", "+00:00"))
        if due > crawl.now + timedelta(hours=hours):
            return
    raise AssertionError(f"{url} never became due later than {hours} h ahead")


def test_stable_pages_are_asked_less_and_changing_ones_every_pass(tmp_path, site) -> None:
    pages = [f"/p{i}.html" for i in range(5)]
    site.static("/", html("Home", "start", pages + ["/news.html"]), etag='"home"')
    for p in pages:
        site.static(p, html(p, "stable text"), etag=f'"{p}"')
    version = [0]
    site.add("/news.html", handler=lambda hit: (200, {"Content-Type": "text/html"},
                                                html("News", f"edition{version[0]}")))
    crawl = Clocked(tmp_path, site)
    for n in range(40):
        crawl.now = T0 + timedelta(hours=n)
        version[0] = n
        crawl.run()
    asked = {p: len(site.hits(p)) for p in ["/", "/news.html", *pages]}
    assert asked["/"] == 40 and asked["/news.html"] == 40, asked  # the seed; a page changing every pass
    assert all(6 <= asked[p] <= 14 for p in pages), asked  # 1h x 1.2^k: ~11 asks in 40 h, not 40


def test_a_new_page_linked_from_a_seed_is_found_at_the_next_pass(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/a.html"]))
    site.static("/a.html", html("A", "alpha"))
    crawl = Clocked(tmp_path, site)
    for n in range(20):
        crawl.now = T0 + timedelta(hours=n)
        crawl.run()
    site.static("/", html("Home", "start", ["/a.html", "/new.html"]))
    site.static("/new.html", html("New", "koala fresh page"))
    crawl.now += timedelta(hours=1)
    crawl.run()
    assert crawl.search("koala") == [site.url("/new.html")]


def test_a_hub_page_yielding_new_urls_is_asked_often(tmp_path, site) -> None:
    # / -> /list.html, which links one more article every pass (a "what's new" page)
    site.static("/", html("Home", "start", ["/list.html"]), etag='"h"')
    count = [1]
    site.add("/list.html", handler=lambda hit: (200, {"Content-Type": "text/html"}, html(
        "List", "articles", [f"/art/{i}.html" for i in range(count[0])])))
    for i in range(40):
        site.static(f"/art/{i}.html", html(f"Article {i}", f"article{i} body"))
    crawl = Clocked(tmp_path, site)
    for n in range(30):
        crawl.now = T0 + timedelta(hours=n)
        count[0] = n // 3 + 1  # a new article every 3 passes; same text otherwise
        crawl.run()
    # every article published was found, within one pass of appearing on the hub page
    found = {r for r in crawl.docs() if "/art/" in r}
    assert found == {site.url(f"/art/{i}.html") for i in range(count[0])}, sorted(found)


def test_sitemap_lastmod_makes_a_page_due_and_changefreq_sets_the_first_interval(tmp_path, site) -> None:
    lastmod = ["2025-12-01T00:00:00Z"]

    def sitemap(hit):
        body = ('<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f'<url><loc>{site.url("/doc.html")}</loc><lastmod>{lastmod[0]}</lastmod></url>'
                f'<url><loc>{site.url("/archive.html")}</loc><changefreq>never</changefreq></url>'
                '</urlset>')
        return 200, {"Content-Type": "application/xml"}, body.encode()

    site.add("/sitemap.xml", handler=sitemap)
    site.static("/", html("Home", "start", ["/doc.html"]), etag='"h"')
    site.static("/doc.html", html("Doc", "old text"), etag='"d1"')
    site.static("/archive.html", html("Archive", "archived"), etag='"a"')
    crawl = Clocked(tmp_path, site, sitemaps=True)
    crawl.run()
    archive = crawl.crawl_rows()[site.url("/archive.html")]
    assert archive["recrawl_seconds"] == DAY  # changefreq never: the maximum
    assert archive["due_reason"] == "first fetch: sitemap changefreq never"
    run_until_due_later(crawl, site.url("/doc.html"))
    assert len(site.hits("/archive.html")) == 1  # due after a day
    before = len(site.hits("/doc.html"))
    crawl.now += timedelta(hours=1)
    crawl.run()
    assert len(site.hits("/doc.html")) == before  # not due
    site.static("/doc.html", html("Doc", "gnu new text"), etag='"d2"')
    lastmod[0] = (datetime.now(UTC) + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    crawl.run()  # the same time: only the sitemap makes it due
    assert len(site.hits("/doc.html")) == before + 1
    assert crawl.search("gnu") == [site.url("/doc.html")]
    assert crawl.counters.get("web.recrawl.sitemap-lastmod") == 1


def test_forced_pass_asks_every_page_and_explain_shows_the_next_due_time(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/a.html"]), etag='"h"')
    site.static("/a.html", html("A", "alpha"), etag='"a"')
    crawl = Clocked(tmp_path, site)
    for n in range(6):
        crawl.now = T0 + timedelta(hours=n)
        crawl.run()
    asked = len(site.hits("/a.html"))
    crawl.now += timedelta(hours=1)
    crawl.run()
    assert len(site.hits("/a.html")) == asked
    cfg = tmp_path / "indexerd.toml"
    cfg.write_text(crawl.config())
    cli = CLI(crawl.state, cfg)
    out = json.loads(cli.run("ctl", "explain", site.url("/a.html"), "--json").stdout)
    assert out["recrawl"]["reason"].startswith("unchanged: interval x1.2")
    due = datetime.fromisoformat(out["recrawl"]["due_at"].replace("Z", "+00:00"))
    assert due > crawl.now
    assert any(line.startswith("next recrawl due ") for line in out["explanation"])
    text = cli.run("ctl", "explain", site.url("/a.html")).stdout
    assert "next recrawl due" in text
    ix = Indexer(parse_config(crawl.config()))
    ix.open("index")
    for src in ix.sources.values():
        src.clock = lambda: crawl.now
    try:
        ix.run_pass(progress=False, forced=True)
    finally:
        ix.close()
    assert len(site.hits("/a.html")) == asked + 1


def test_max_recrawl_interval_below_interval_is_refused() -> None:
    from indexerd.core.errors import ConfigError
    with pytest.raises(ConfigError, match="max_recrawl_interval"):
        parse_config(web_config(["http://h.test/"], interval="2h", max_recrawl_interval="1h"))


def test_a_state_dir_from_before_adaptive_recrawl_reindexes_nothing(tmp_path, site) -> None:
    import sqlite3

    site.static("/", html("Home", "start", ["/a.html", "/b.html"]), etag='"h"')
    site.static("/a.html", html("A", "alpha"), etag='"a"')
    site.static("/b.html", html("B", "beta"), last_modified="Sat, 08 Sep 2001 21:46:40 GMT")
    crawl = Clocked(tmp_path, site)
    assert crawl.run()["indexed"] == 3
    con = sqlite3.connect(crawl.state / "state.sqlite3")  # what migration 6 leaves in old rows
    con.execute("UPDATE crawl SET recrawl_seconds = NULL, due_at = NULL, due_reason = NULL")
    con.commit()
    con.close()
    site.log.clear()
    crawl.now += timedelta(minutes=5)  # not due by any schedule: but never scheduled means due
    s = crawl.run()
    assert (s["indexed"], s["unchanged"], s["errors"]) == (0, 3, 0), s
    assert sorted(h.status for h in site.log if h.path != "/robots.txt") == [304, 304, 304]
    assert all(r["due_at"] for r in crawl.crawl_rows().values() if r["last_status"] == 200 or r["last_status"] == 304)


def test_a_page_whose_document_write_was_lost_is_asked_at_the_next_pass_whatever_its_schedule(tmp_path, site) -> None:
    """A retrial of the cluster: a database restart made a commit fail after the crawl rows
    were written (``done``, ``indexed:new``), so the page stayed out of the store and the index
    until its schedule made it due again -- days, with adaptive recrawl.  A new pass asks every
    page whose row says indexed and whose document the store lacks, without validators."""
    import sqlite3

    from indexerd.core.store import Store

    site.static("/", html("Home", "start", ["/doc.html"]), etag='"h"')
    site.static("/doc.html", html("Doc", "old text"), etag='"d1"')
    crawl = Clocked(tmp_path, site)
    crawl.run()
    run_until_due_later(crawl, site.url("/doc.html"))
    site.static("/doc.html", html("Doc", "ravenword new text"), etag='"d2"')
    # its last fetch indexed a change, and that write was lost: the row says so, no document
    with Store(crawl.state / "state.sqlite3") as store:
        store.write_batch([], deletes=[site.url("/doc.html")])
    con = sqlite3.connect(crawl.state / "state.sqlite3")
    with con:
        con.execute("UPDATE crawl SET last_outcome = 'indexed:changed' WHERE url = ?", (site.url("/doc.html"),))
    con.close()
    before = len(site.hits("/doc.html"))
    crawl.now += timedelta(minutes=1)
    crawl.run()
    hits = site.hits("/doc.html")
    assert len(hits) == before + 1, "not asked again"
    assert "If-None-Match" not in hits[-1].headers  # nothing stored to compare with: a whole GET
    assert crawl.search("ravenword") == [site.url("/doc.html")]
    assert crawl.counters.get("web.recheck.unstored") == 1
    crawl.now += timedelta(minutes=1)
    crawl.run()
    assert len(site.hits("/doc.html")) == before + 1  # stored now: back to its schedule
