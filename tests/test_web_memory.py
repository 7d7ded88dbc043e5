"""A pass's memory grows with what it queues, not with every URL its source ever knew: the
crawl rows of pages not due in this pass are read a chunk at a time and nothing of them is kept
(a link to one is told from its state, read back).  Judged with tracemalloc over a whole pass, on each state store."""

from __future__ import annotations

import tracemalloc

import pytest
from datetime import datetime, timedelta, timezone

from conftest import pg_store_address
from httpsite import site  # noqa: F401  (fixture)
from indexerd.core.store import PgStore, Store
from indexerd.sources.web.urlstate import UrlState
from test_web import Crawl

UTC = timezone.utc


def the_store(crawl: Crawl):
    return PgStore(pg_store_address(crawl.store_schema)) if crawl.pg else Store(crawl.state / "state.sqlite3")


def known_pages(crawl: Crawl, numbers: range, *, pass_id: int = 1) -> None:
    """Pages ``numbers`` asked in pass ``pass_id`` and not due for ten days (adaptive recrawl)."""
    now = datetime.now(UTC)
    with the_store(crawl) as store:
        for start in range(numbers.start, numbers.stop, 5000):
            store.crawl_write("site", [UrlState(crawl.site.url(f"/old/{i:06d}/page-with-a-longer-name.html"),
                                                pass_id=pass_id, state="done", seq=10 + i, hops=1,
                                                last_status=200, last_outcome="fetched", checked_at=now,
                                                recrawl_seconds=864000.0, due_at=now + timedelta(days=10),
                                                due_reason="learnt").as_row()
                                       for i in range(start, min(numbers.stop, start + 5000))])


def peak_of_a_pass(crawl: Crawl) -> tuple[int, dict]:
    tracemalloc.start()
    try:
        summary = crawl.run()
        return tracemalloc.get_traced_memory()[1], summary
    finally:
        tracemalloc.stop()


@pytest.mark.alone  # a memory bound
def test_a_pass_over_many_known_pages_not_due_holds_none_of_their_states(tmp_path, site) -> None:
    site.add("/", body=b'<html><body><p>memoryword</p><a href="/b.html">b</a></body></html>',
             headers={"Content-Type": "text/html; charset=utf-8"})
    site.add("/b.html", body=b"<html><body><p>second page</p></body></html>",
             headers={"Content-Type": "text/html; charset=utf-8"})
    crawl = Crawl(tmp_path, site, interval="1h", max_recrawl_interval="30d")
    assert crawl.run()["indexed"] == 2
    known_pages(crawl, range(10_000))  # several chunks of the stored states already
    peak_small, _ = peak_of_a_pass(crawl)
    known_pages(crawl, range(10_000, 40_000))
    peak, summary = peak_of_a_pass(crawl)
    assert summary["seen"] == 1  # the seed (always asked); /b.html and the rest are not due
    # 30,000 more URLs: nothing of them is kept (a not-due URL is told from its state, read
    # back if a link points at it); their strings in a seen set were about 0.26 KB each, and
    # their whole states (a UrlState and its row) about 2 KB
    grown = (peak - peak_small) / 30_000
    assert grown < 20, f"{grown:.0f} bytes per known URL (peak {peak / 2**20:.1f} MB)"
    assert len(crawl.crawl_rows()) == 40_000 + 2  # every row kept


def test_a_new_pass_forgets_what_an_interrupted_pass_queued_and_never_asked(tmp_path, site) -> None:
    site.add("/", body=b"<html><body><p>leftoverword</p></body></html>",
             headers={"Content-Type": "text/html; charset=utf-8"})
    crawl = Crawl(tmp_path, site)
    assert crawl.run()["indexed"] == 1
    orphan = site.url("/orphan.html")  # queued by pass 1, which was stopped before asking it
    with the_store(crawl) as store:
        store.crawl_write("site", [UrlState(orphan, pass_id=1, state="queued", seq=5, hops=1).as_row()])
    site.log.clear()
    assert crawl.run()["seen"] == 1
    assert [h.path for h in site.log if h.path != "/robots.txt"] == ["/"]
    assert orphan not in crawl.crawl_rows()  # forgotten, as the end of pass 1 would have


def _farm(site, links: int) -> None:
    """A link farm (attack run): every page under /f/ links to ``links`` pages never seen."""
    def word(i: int) -> str:  # letters only: not one numbered-path pattern (those are a trap)
        return "".join(chr(97 + (i // 26 ** k) % 26) for k in range(4))

    def page(hit):
        n = "".join(c for c in hit.path if c.isalpha()) or "top"
        body = "".join(f'<a href="/f/{n}{word(i)}/">x</a>' for i in range(links))
        return 200, {"Content-Type": "text/html; charset=utf-8"}, f"<html><body><p>farm {n}</p>{body}</body></html>".encode()

    site.add_prefix("/f/", page)
    site.add("/", body=b'<html><body><a href="/f/">farm</a></body></html>',
             headers={"Content-Type": "text/html; charset=utf-8"})


@pytest.mark.alone  # a memory bound
def test_a_link_farm_does_not_grow_a_pass_with_every_link_it_finds(tmp_path, site) -> None:
    """Attack run: pages of 2,000 new links each took RSS from 54 MB to 2.37 GB in 8 minutes.
    A pass keeps at most its frontier's window in memory and ten more on disk (or, in a pass
    the cluster crawls together, offered to the shared store: that was unbounded), then drops
    new URLs (counted), and its memory grows only by its bounded memos.  (A real 2,000-link
    farm: 130 MB peak RSS at 100 pages, 181 MB at 400, 212 MB at 800.)"""
    _farm(site, links=300)
    peaks = {}
    for pages in (10, 30, 90):  # the first pass of the process also pays for its caches
        crawl = Crawl(tmp_path / str(pages), site, max_pages=pages, max_queued=200)
        peak, summary = peak_of_a_pass(crawl)
        assert summary["seen"] == pages, summary
        found = pages * 300
        # 200 URLs wait in memory, 10 windows on disk (or offered to the cluster's store), the
        # window refills as pages are fetched (a few pages' links); the rest are dropped, counted
        assert crawl.counters.get("web.drop.frontier-full", 0) >= found - 11 * 200 - 10 * 300, crawl.counters
        peaks[pages] = peak
    # what grows is bounded: the canonical-link memo (65,536 links) and the dropped set
    # (100,000 URLs), ~0.3 KB a link until full; a URL kept in the seen set and the frontier
    # or offered with its state costs ~2 KB (the attack run's ~3.9 MB a page of 2,000 links)
    grown = (peaks[90] - peaks[30]) / (60 * 300)
    assert grown < 700, f"{grown:.0f} bytes per link found (peaks {peaks})"
