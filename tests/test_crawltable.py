"""The crawl table on a real SQLite store: a pass holds only its working set (queued and
changed states) and a bounded cache in memory; every other state is read from the store when
asked for, and a new pass reads the source's states a chunk at a time."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from indexerd.core.store import Store
from indexerd.sources.web import crawltable
from indexerd.sources.web.crawltable import CrawlTable
from indexerd.sources.web.urlstate import PassState, UrlState

UTC = timezone.utc
BASE = "http://127.0.0.1:9"


def done(n: int, pass_id: int = 1) -> UrlState:
    return UrlState(f"{BASE}/p{n:05d}.html", pass_id=pass_id, state="done", seq=n, last_status=200,
                    last_outcome="fetched", checked_at=datetime(2026, 11, 1, tzinfo=UTC))


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "state.sqlite3") as s:
        yield s


def stored(store, states) -> None:
    store.crawl_write("site", [st.as_row() for st in states], meta={"web:site:pass": PassState(1).to_json()})


class CountingStore:
    """``store`` whose single-row reads are counted (what the table asked the store for)."""

    def __init__(self, store) -> None:
        self._store = store
        self.reads: list[str] = []

    def crawl_state_row(self, source, url, *, spilled=False):
        self.reads.append(url)
        return self._store.crawl_state_row(source, url, spilled=spilled)

    def crawl_state_rows(self, source, urls, *, spilled=False):
        urls = list(urls)
        self.reads.append(tuple(urls))
        return self._store.crawl_state_rows(source, urls, spilled=spilled)

    def __getattr__(self, name):
        return getattr(self._store, name)


def test_a_loaded_table_holds_no_state_and_reads_each_from_the_store(store) -> None:
    stored(store, [done(i) for i in range(5)])
    table = CrawlTable(store, "site")
    assert table.load().id == 1
    assert table.rows == {}
    st = table.get(f"{BASE}/p00003.html")
    assert (st.url, st.seq, st.last_status, st.checked_at) == (f"{BASE}/p00003.html", 3, 200,
                                                               datetime(2026, 11, 1, tzinfo=UTC))
    assert f"{BASE}/p00004.html" in table
    assert table.get(f"{BASE}/nowhere.html") is None and f"{BASE}/nowhere.html" not in table
    assert table.rows == {}  # read back into the cache, not the working set


def test_a_written_state_leaves_the_working_set_unless_queued(store) -> None:
    table = CrawlTable(store, "site")
    table.load()
    a, q = done(1, pass_id=2), UrlState(f"{BASE}/q.html", pass_id=2, state="queued", seq=2)
    table.put(a)
    table.put(q)
    table.write(PassState(2))
    assert list(table.rows) == [q.url]
    assert table.get(a.url) is a  # from the cache: no read
    assert store.crawl_state_row("site", a.url)["last_status"] == 200


def test_the_cache_is_bounded_and_drops_the_least_recently_asked(store, monkeypatch) -> None:
    monkeypatch.setattr(crawltable, "CACHE_STATES", 3)
    stored(store, [done(i) for i in range(5)])
    counting = CountingStore(store)
    table = CrawlTable(counting, "site")
    table.load()
    urls = [done(i).url for i in range(5)]
    for u in urls:
        assert table.get(u).url == u
    assert counting.reads == urls
    counting.reads.clear()
    table.get(urls[4])
    table.get(urls[2])
    assert counting.reads == []  # still cached
    table.get(urls[0])  # dropped: read again
    assert counting.reads == [urls[0]]


def test_a_removed_state_is_not_read_back_before_or_after_the_write(store) -> None:
    stored(store, [done(1)])
    table = CrawlTable(store, "site")
    table.load()
    url = done(1).url
    assert table.get(url) is not None
    table.remove(url)
    assert table.get(url) is None and url not in table  # deleted at the next write, not read back
    table.write(PassState(1))
    assert table.get(url) is None
    assert store.crawl_state_row("site", url) is None


def test_the_stored_states_come_a_chunk_at_a_time_in_url_order_without_the_overflow(store, monkeypatch) -> None:
    monkeypatch.setattr(crawltable, "STATE_CHUNK", 7)
    states = [done(i) for i in range(50)]
    stored(store, states)
    store.crawl_write("site", [UrlState(f"{BASE}/spilled{i}.html", pass_id=1, state="spilled").as_row()
                               for i in range(3)])
    store.crawl_write("other", [done(99).as_row()])  # another source's row
    got = [st.url for st in CrawlTable(store, "site").stored_states()]
    assert got == sorted(st.url for st in states)


def test_a_table_that_is_not_lazy_never_reads_a_state(store) -> None:
    stored(store, [done(1)])
    counting = CountingStore(store)
    table = CrawlTable(counting, "site", lazy=False)
    assert table.get(done(1).url) is None
    assert counting.reads == []


def test_a_pages_links_are_read_in_one_query_and_what_has_no_row_is_not_asked_again(store, monkeypatch) -> None:
    monkeypatch.setattr(type(store), "STATE_ROWS_CHUNK", 4)
    stored(store, [done(i) for i in range(6)])
    counting = CountingStore(store)
    table = CrawlTable(counting, "site")
    table.load()
    table.put(UrlState(f"{BASE}/queued.html", pass_id=2))  # in memory: not asked
    links = [done(i).url for i in range(6)] + [f"{BASE}/new{i}.html" for i in range(3)] + [f"{BASE}/queued.html"]
    table.prefetch(links + links[:2])  # the same link twice on a page: asked once
    assert counting.reads == [tuple(links[:9])]  # one call (4 URLs a query inside the store)
    assert sorted(store.crawl_state_rows("site", links)) == sorted(links[:6])  # across the chunks
    counting.reads.clear()
    assert [table.get(u) is not None for u in links] == [True] * 6 + [False] * 3 + [True]
    assert table.get(links[3]).seq == 3
    assert counting.reads == []  # every answer, "no row" too, came from the prefetch
    table.prefetch(links)
    assert counting.reads == []  # all cached


def test_a_shared_pass_reads_the_rows_waiting_in_the_store_only_for_its_own_hosts(store) -> None:
    mine, theirs = f"{BASE}/offered.html", "http://127.0.0.2:9/offered.html"
    store.crawl_write("site", [UrlState(u, pass_id=2, state="spilled", seq=7).as_row() for u in (mine, theirs)])
    single = CrawlTable(store, "site")
    assert single.get(mine) is None  # one node: the overflow is taken back by the scheduler's refill
    shared = CrawlTable(store, "site")
    shared.share(lambda url: url.startswith(BASE))
    shared.prefetch([mine, theirs])
    assert (shared.get(mine).state, shared.get(mine).seq) == ("spilled", 7)  # offered, not taken yet
    assert shared.get(theirs) is None  # another node's host: never read here
