"""A web pass's start costs what the pass does, not what its source knows (issue 31): the due
URLs come from an indexed query on their next-due time, the last pass's lost writes from one
query over that pass's rows, and the scope is checked against every known URL only when its
settings changed.  Judged by the work the store does (SQLite's virtual-machine steps, PostgreSQL's
rows read from the crawl table), not by wall time: ten times the known URLs must cost less than
twice as much."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone

import psycopg

from conftest import pg_store_address
from httpsite import site  # noqa: F401  (fixture)
from test_web import Crawl
from test_web_memory import known_pages, the_store

from indexerd.core.store import DocumentRecord

import indexerd.core.store.sqlite as sqlite_store

HTML = {"Content-Type": "text/html; charset=utf-8"}


@contextmanager
def sqlite_steps():
    """Count the virtual-machine steps (in hundreds) of every store connection opened inside."""
    steps = [0]
    real = sqlite3.connect

    def counting(*args, **kwargs):
        db = real(*args, **kwargs)
        db.set_progress_handler(lambda: steps.__setitem__(0, steps[0] + 1), 100)
        return db

    sqlite_store.sqlite3.connect = counting  # type: ignore[assignment]
    try:
        yield steps
    finally:
        sqlite_store.sqlite3.connect = real  # type: ignore[assignment]


def pg_crawl_rows_read(crawl: Crawl) -> int:
    """Rows the server has read from the store schema's crawl table (sequential and indexed),
    once the statistics of the connections the pass closed have reached the server."""
    address = pg_store_address(crawl.store_schema)
    with psycopg.connect(address.url, autocommit=True, **address.connect_kwargs()) as db:
        db.execute("SELECT pg_stat_force_next_flush()")
        row = db.execute("SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables "
                         "WHERE schemaname = %s AND relname = 'crawl'", (crawl.store_schema,)).fetchone()
    return int(row[0])


def known_documents(crawl: Crawl, numbers: range) -> None:
    """The document rows of :func:`known_pages`'s pages ``numbers`` (indexed in an earlier pass)."""
    now = datetime.now(timezone.utc)
    with the_store(crawl) as store:
        for start in range(numbers.start, numbers.stop, 5000):
            store.write_batch([DocumentRecord(key=crawl.site.url(f"/old/{i:06d}/page-with-a-longer-name.html"),
                                              source="site", status="indexed", reason="new", title=f"page {i}",
                                              media_type="text/html", size=100, content_hash=f"h{i}",
                                              last_modified=now, date_source="header", indexed_at=now,
                                              checked_at=now, decided_at=now)
                               for i in range(start, min(numbers.stop, start + 5000))])


def cost_of_a_pass(crawl: Crawl) -> int:
    if crawl.pg:
        before = pg_crawl_rows_read(crawl)
        summary = crawl.run()
        cost = pg_crawl_rows_read(crawl) - before
    else:
        with sqlite_steps() as steps:
            summary = crawl.run()
        cost = steps[0]
    assert summary["seen"] == 1, summary  # the seed; every known page is not due
    return cost


def test_a_new_pass_reads_what_is_due_not_every_url_its_source_knows(tmp_path, site) -> None:
    site.add("/", body=b'<html><body><p>costword</p><a href="/b.html">b</a></body></html>', headers=HTML)
    site.add("/b.html", body=b"<html><body><p>second</p></body></html>", headers=HTML)
    crawl = Crawl(tmp_path, site, interval="1h", max_recrawl_interval="30d")
    assert crawl.run()["indexed"] == 2
    known_pages(crawl, range(2_000), pass_id=0)  # asked in an older pass, due in ten days
    known_documents(crawl, range(2_000))
    crawl.run()  # the scope settings' fingerprint recorded (a store from before had none)
    small = cost_of_a_pass(crawl)
    known_pages(crawl, range(2_000, 20_000), pass_id=0)
    known_documents(crawl, range(2_000, 20_000))
    big = cost_of_a_pass(crawl)
    assert 0 < small and big < 2 * small, (small, big)


def test_changed_scope_settings_are_checked_against_every_known_url_once(tmp_path, site) -> None:
    site.add("/", body=b'<html><body><p>scopeword</p></body></html>', headers=HTML)
    crawl = Crawl(tmp_path, site, interval="1h", max_recrawl_interval="30d")
    crawl.run()
    known_pages(crawl, range(3), pass_id=0)
    crawl.run()
    assert len(crawl.crawl_rows()) == 4
    # the old pages are not due; an exclude pattern now drops them: forgotten at the next pass
    crawl.keys["exclude"] = ["/old/"]
    crawl.run()
    assert sorted(crawl.crawl_rows()) == [site.url("/")]
    assert crawl.counters.get("web.drop.exclude") == 3


def test_a_due_url_the_new_scope_drops_is_forgotten_once(tmp_path, site) -> None:
    """The scope check of every known URL (settings changed) and the due URLs' own check meet
    the same URL once: its indexed copy is retired and counted once, not twice."""
    site.add("/", body=b'<html><body><p>onceword</p><a href="/old.html">o</a></body></html>', headers=HTML)
    site.add("/old.html", body=b"<html><body><p>oldword</p></body></html>", headers=HTML)
    crawl = Crawl(tmp_path, site, interval="1h", max_recrawl_interval="1h")  # every page due
    assert crawl.run()["indexed"] == 2
    crawl.keys["exclude"] = ["/old"]
    summary = crawl.run()
    assert crawl.counters.get("web.drop.exclude") == 1, crawl.counters
    assert summary["deleted"] == 1, summary
    assert sorted(crawl.crawl_rows()) == [site.url("/")]
