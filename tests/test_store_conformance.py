"""Both state stores (SQLite and PostgreSQL) behind one interface: the same calls give the same
answers, on a real SQLite file and a real PostgreSQL server (tests/pg.py)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest

from indexerd.core.errors import StoreError
from indexerd.core.store import DocumentRecord

UTC = timezone.utc
T1 = datetime(2001, 9, 9, 1, 46, 40, 123456, tzinfo=UTC)
T2 = datetime(2024, 1, 1, tzinfo=UTC)


def rec(key: str, **kw) -> DocumentRecord:
    base = dict(source="docs", status="indexed", reason="new", title=f"title of {key}", media_type="text/plain",
                size=10, mtime_ns=1_700_000_000_123_456_789, last_modified=T1, date_source="mtime",
                content_hash="h-" + key, indexed_at=T2, checked_at=T2, decided_at=T2, ctime_ns=5, ino=7)
    base.update(kw)
    return DocumentRecord(key=key, **base)


def test_a_record_round_trips_with_every_field(open_any_store) -> None:
    s = open_any_store()
    r = rec("file:///a.txt", etag='"x"', last_modified_header="Sun, 09 Sep 2001 01:46:40 GMT",
            date_notes="meta: none", detail="d")
    s.write_batch([r], meta={"index_generation": "7"})
    assert s.get("file:///a.txt") == r
    assert s.get_meta("index_generation") == "7"
    assert s.get("nope") is None
    s.write_batch([rec("file:///a.txt", title="new")], deletes=[], meta={"index_generation": "8"})
    assert s.get("file:///a.txt").title == "new" and s.get_meta("index_generation") == "8"


def test_text_a_database_cannot_hold_is_escaped_not_fatal(open_any_store) -> None:
    """A NUL (PostgreSQL's text holds none) or a lone surrogate in a title does not fail the batch."""
    s = open_any_store()
    s.write_batch([rec("k1", title="a\x00b"), rec("k2", title="caf\udce9")])
    assert s.get("k1").title == "a\\x00b"
    assert s.get("k2").title == "caf\\udce9"


def test_reads_by_source_status_prefix_hash_and_date(open_any_store) -> None:
    s = open_any_store()
    s.write_batch([rec("file:///d/a"), rec("file:///d/b", status="error"), rec("file:///d0/c"),
                   rec("file:///dé/x"), rec("w", source="web", content_hash="h-file:///d/a",
                                             last_modified=T2)])
    assert s.keys(source="docs") == {"file:///d/a", "file:///d/b", "file:///d0/c", "file:///dé/x"}
    assert s.keys(status="error") == {"file:///d/b"}
    assert s.keys_with_prefix("docs", "file:///d/") == {"file:///d/a", "file:///d/b"}
    assert s.keys_with_prefix("docs", "file:///dé/") == {"file:///dé/x"}
    assert s.indexed_with_hash("web", "h-file:///d/a") == ["w"]
    assert [r.key for r in s.iter_records(lm_from=T2)] == ["w"]
    assert [r.key for r in s.iter_records(source="docs")] == ["file:///d/a", "file:///d/b", "file:///d0/c",
                                                              "file:///dé/x"]  # code-point order on both
    assert [r.key for r in s.iter_records(order="last_modified")][0] == "w"
    assert s.counts_by_source() == {"docs": {"indexed": 3, "error": 1}, "web": {"indexed": 1}}
    assert s.media_types() == ["text/plain"]
    assert next(s.stat_rows("docs")) == ("file:///d/a", 1_700_000_000_123_456_789, 10, 5, 7, "new")
    # chunked reads in code-point order on both, across chunk boundaries, by prefix
    assert [r[0] for r in s.stat_rows("docs", chunk=1)] == ["file:///d/a", "file:///d/b", "file:///d0/c",
                                                            "file:///dé/x"]
    assert [r[0] for r in s.stat_rows("docs", "file:///d/", chunk=1)] == ["file:///d/a", "file:///d/b"]
    assert list(s.iter_keys(chunk=2)) == sorted(s.keys())
    assert list(s.iter_keys("docs", "error", chunk=1)) == sorted(s.keys("docs", "error"))


def test_naive_time_is_refused_before_anything_is_written(open_any_store) -> None:
    s = open_any_store()
    with pytest.raises(ValueError):
        s.write_batch([rec("a"), rec("b", indexed_at=datetime(2024, 1, 1))])
    assert s.keys() == set()


def test_a_failed_batch_writes_nothing_and_the_store_stays_usable(open_any_store) -> None:
    s = open_any_store()
    with pytest.raises(StoreError):
        s.write_batch([rec("a"), rec("b", source=None)])  # NOT NULL source: the second row fails
    assert s.keys() == set()
    s.write_batch([rec("c")])
    assert s.keys() == {"c"}


def test_reset_stats_runs_and_forgetting_a_source(open_any_store) -> None:
    s = open_any_store()
    s.write_batch([rec("a"), rec("b")], meta={"sql:docs:full": "x", "sql:docs2:full": "y"})
    s.reset_stats({"a"})
    a = s.get("a")
    assert (a.status, a.mtime_ns, a.content_hash) == ("stale", None, None)
    s.pass_started("docs", "filesystem", T1, node="n1")
    assert s.source_runs()["docs"]["running_since"] == T1
    assert s.source_runs()["docs"]["node"] == "n1"
    s.record_run("docs", "filesystem", T1, T2, {"seen": 2})
    run = s.source_runs()["docs"]
    assert (run["running_since"], run["completed_at"], run["counts"]) == (None, T2, {"seen": 2})
    s.record_run("docs", "filesystem", T2, T2 + timedelta(1), {"seen": 3}, completed=False)
    assert s.source_runs()["docs"]["completed_at"] == T2  # a failed pass keeps the last completion
    s.crawl_write("docs", [dict(url="http://h/", pass_id=1, state="queued", hops=0, seed_depth=1, seq=1,
                                via="seed", origin=None, redirects=0, doc_key=None, sitemap_lastmod=None,
                                gone_count=0, fail_count=0, last_status=None, last_outcome=None,
                                checked_at=None, recrawl_seconds=None, due_at=None, due_reason=None,
                                changefreq=None)])
    assert s.known_sources() == {"docs"}
    s.forget_source("docs", ["sql:docs:", "web:docs:"])
    assert s.crawl_rows("docs") == {} and "docs" not in s.source_runs()
    assert s.get_meta("sql:docs:full") is None and s.get_meta("sql:docs2:full") == "y"
    assert s.keys() == {"a", "b"}  # document rows go through the writer


def crawl_row(url: str, **kw) -> dict:
    row = dict(url=url, pass_id=3, state="queued", hops=1, seed_depth=1, seq=1, via="link", origin=None,
               redirects=0, doc_key=None, sitemap_lastmod=None, gone_count=0, fail_count=0, last_status=None,
               last_outcome=None, checked_at=None, recrawl_seconds=None, due_at=None, due_reason=None,
               changefreq=None)
    row.update(kw)
    return row


def test_crawl_rows_spill_links_and_schedule(open_any_store) -> None:
    s = open_any_store()
    s.crawl_write("web", [crawl_row("http://h/a", state="done", last_status=200, recrawl_seconds=3600.5,
                                    due_at="2030-01-01T00:00:00.000000Z", doc_key="http://h/a")],
                  links={"http://h/a": '["http://h/b"]'}, meta={"web:web:pass": "{}"})
    s.crawl_write("web", [crawl_row(f"http://h/s{i}", state="spilled", hops=i % 3, seq=i) for i in range(10)])
    assert set(s.crawl_rows("web")) == {"http://h/a"}
    assert s.crawl_rows("web")["http://h/a"]["recrawl_seconds"] == 3600.5
    assert [r["url"] for r in s.crawl_spilled("web", 3, 4)] == ["http://h/s0", "http://h/s3", "http://h/s6",
                                                              "http://h/s9"]
    assert s.crawl_links("web", "http://h/a") == '["http://h/b"]'
    s.crawl_write("web", [crawl_row("http://h/a", state="done", last_status=304)])
    assert s.crawl_links("web", "http://h/a") == '["http://h/b"]'  # kept unless named
    s.crawl_due_now("web", "http://h/a", "forget")
    assert s.crawl_row("web", "http://h/a")["due_at"] is None and s.crawl_row("web", "http://h/a")["due_reason"] == "forget"
    s.crawl_drop_spilled("web", 4)
    assert len(s.crawl_spilled("web", 3, 100)) == 10  # pass 3's, not asked to drop
    s.crawl_drop_spilled("web", 3)
    assert s.crawl_spilled("web", 3, 100) == []
    assert s.get_meta("web:web:pass") == "{}"


def test_orphan_pages_are_the_indexed_ones_no_crawl_row_asks_again(open_any_store) -> None:
    """After a kill -9 (issue 29's rounds): a page whose document committed while its row was
    never written, or whose row says gone while its deletion was lost, is an orphan; a page
    with its row, a skipped document and another source's are not."""
    s = open_any_store()
    s.write_batch([rec("http://h/kept", source="web"), rec("http://h/norow", source="web"),
                   rec("http://h/gone", source="web"), rec("http://h/skip", source="web", status="skipped"),
                   rec("http://h/other", source="web2")])
    s.crawl_write("web", [crawl_row("http://h/kept", state="done", last_status=200),
                          crawl_row("http://h/gone", state="done", last_status=404, last_outcome="gone")])
    assert s.crawl_orphan_keys("web") == ["http://h/gone", "http://h/norow"]
    assert s.crawl_orphan_keys("web2") == ["http://h/other"]


def test_a_reader_cannot_write(open_any_store) -> None:
    open_any_store().write_batch([rec("a")])
    ro = open_any_store(readonly=True)
    assert ro.keys() == {"a"}
    with pytest.raises(StoreError):
        ro.write_batch([rec("b")])


def test_two_writers_at_once_lose_nothing(open_any_store) -> None:
    """Two connections (two threads, as two nodes would) upsert disjoint and shared keys at once."""
    stores = [open_any_store(), open_any_store()]
    errors = []

    def write(i: int) -> None:
        try:
            for n in range(40):
                stores[i].write_batch([rec(f"w{i}-{n}"), rec("shared", title=f"{i}-{n}")])
        except Exception as e:  # pragma: no cover - the assertion below names it
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    keys = stores[0].keys()
    assert len(keys) == 81 and "shared" in keys
    assert stores[0].get("shared").title in {"0-39", "1-39"}


def test_the_document_counts_follow_every_write_without_reading_the_documents(open_any_store) -> None:
    """``counts_by_source`` reads the counts the store keeps as rows change (status and metrics
    cost the same at 10 M documents as at 10): inserts, status changes, a source moved, deletes,
    a source forgotten, many statements (PostgreSQL's appended counts folded), all exact."""
    s = open_any_store()

    def truth() -> dict:
        out: dict = {}
        for r in s.iter_records():
            out.setdefault(r.source, {}).setdefault(r.status, 0)
            out[r.source][r.status] += 1
        return out

    s.write_batch([rec(f"k{i}") for i in range(10)] + [rec("w1", source="web", status="skipped")])
    assert s.counts_by_source() == truth() == {"docs": {"indexed": 10}, "web": {"skipped": 1}}
    s.write_batch([rec("k1", status="error"), rec("k2", status="error"), rec("k3", source="web")],
                  deletes=["k4", "nope"])
    assert s.counts_by_source() == truth() == {"docs": {"indexed": 6, "error": 2}, "web": {"skipped": 1, "indexed": 1}}
    s.write_batch([rec("k1", status="error", title="same status, other title")])
    assert s.counts_by_source() == truth()
    for i in range(s.COUNT_ROWS_FOLD + 5):  # a statement each: more count rows than the fold's limit
        s.write_batch([rec(f"m{i}", source="many")])
    assert s.counts_by_source() == truth()
    assert s.counts_by_source()["many"] == {"indexed": s.COUNT_ROWS_FOLD + 5}
    s.write_batch([], deletes=[f"k{i}" for i in range(10)] + ["w1"])
    assert s.counts_by_source() == truth() and "docs" not in s.counts_by_source()


def test_known_sources_are_found_by_index_whatever_holds_them(open_any_store) -> None:
    """Crawl rows only, documents only, a run record only, a source whose documents were all
    deleted (gone), on both stores."""
    s = open_any_store()
    for src in ("web-b", "web-a", "web-c"):
        s.crawl_write(src, [crawl_row(f"http://h/{i}") for i in range(3)])
    s.write_batch([rec("d1", source="docs"), rec("x1", source="gone")])
    s.record_run("sql", "sql", T1, T2, {})
    assert s.known_sources() == {"web-a", "web-b", "web-c", "docs", "gone", "sql"}
    s.write_batch([], deletes=["x1"])
    s.forget_source("web-b", [])
    assert s.known_sources() == {"web-a", "web-c", "docs", "sql"}
