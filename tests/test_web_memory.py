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
