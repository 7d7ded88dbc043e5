"""The state store: migrations, refusal of a newer schema, read-only opening, WAL and a writer
and a reader side by side on real SQLite files; round trips of records with aware datetimes,
all-or-nothing batches, run records and a removed source's forgetting on each store (SQLite and
PostgreSQL: the ``store`` fixture)."""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from indexerd.core.errors import SchemaTooNew, StoreError
from indexerd.core.store import DocumentRecord, Store, from_db_time, to_db_time
from indexerd.core.store.migrations import MIGRATIONS, SCHEMA_VERSION

UTC = timezone.utc
T1 = datetime(2001, 9, 9, 1, 46, 40, 123456, tzinfo=UTC)
T2 = datetime(2024, 1, 1, tzinfo=UTC)


def rec(key: str, **kw) -> DocumentRecord:
    base = dict(source="docs", status="indexed", reason="new", title=f"title of {key}", media_type="text/plain",
                size=10, mtime_ns=1_000_000_000_123, last_modified=T1, date_source="mtime",
                content_hash="h-" + key, indexed_at=T2, checked_at=T2, decided_at=T2)
    base.update(kw)
    return DocumentRecord(key=key, **base)


@pytest.fixture
def store(open_any_store):
    """A new store of each kind (conftest ``store_kind``: SQLite, PostgreSQL)."""
    return open_any_store()


@pytest.fixture
def sqlite_store(tmp_path):
    """A new SQLite store in ``tmp_path`` (a test that opens its file itself)."""
    s = Store.in_dir(tmp_path)
    yield s
    s.close()


def tables(path: Path) -> set[str]:
    con = sqlite3.connect(path)
    try:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        con.close()


def test_migrations_from_zero_create_the_schema(tmp_path) -> None:
    path = tmp_path / "state.sqlite3"
    sqlite3.connect(path).close()  # an empty database: user_version 0
    with Store(path) as s:
        assert s.schema_version == SCHEMA_VERSION == len(MIGRATIONS) >= 1
    assert {"documents", "meta", "source_runs"} <= tables(path)
    # opening again does not migrate again (it would fail on CREATE TABLE)
    with Store(path) as s:
        assert s.schema_version == SCHEMA_VERSION
        assert s.keys() == set()


def test_in_dir_creates_missing_parent(tmp_path) -> None:
    with Store.in_dir(tmp_path / "a" / "b") as s:
        assert s.path == tmp_path / "a" / "b" / "state.sqlite3"
    assert (tmp_path / "a" / "b" / "state.sqlite3").is_file()


def test_newer_schema_is_refused_and_left_alone(tmp_path) -> None:
    path = tmp_path / "state.sqlite3"
    Store(path).close()
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 998}")
    con.commit()
    con.close()
    for readonly in (False, True):
        with pytest.raises(SchemaTooNew) as ei:
            Store(path, readonly=readonly)
        assert "newer" in str(ei.value) and str(path) in str(ei.value)
        assert isinstance(ei.value, StoreError) and ei.value.exit_code == 2
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 998
    con.close()


def test_not_a_database_is_a_store_error(tmp_path) -> None:
    path = tmp_path / "state.sqlite3"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="cannot open the state store"):
        Store(path)


def test_write_batch_round_trip(store) -> None:
    other_zone = timezone(timedelta(hours=-4))
    a = rec("file:///a", last_modified=datetime(2001, 9, 8, 21, 46, 40, 123456, tzinfo=other_zone))
    b = rec("file:///b", date_source="meta:last-modified", etag='"v1"', last_modified_header="Sat, 08 Sep 2001 21:46:40 GMT")
    store.write_batch([a, b], meta={"index_generation": "7"})
    got = store.get("file:///a")
    assert got.last_modified == T1  # the same instant, in UTC, microseconds kept
    assert got.last_modified.tzinfo is UTC
    assert got.indexed_at == T2 and got.indexed_at.tzinfo is UTC
    assert got.mtime_ns == 1_000_000_000_123
    assert store.get("file:///b") == b
    assert store.get_meta("index_generation") == "7"
    assert store.keys() == {"file:///a", "file:///b"}
    assert list(store.stat_rows("docs")) == [("file:///a", 1_000_000_000_123, 10, None, None, "new"),
                                             ("file:///b", 1_000_000_000_123, 10, None, None, "new")]

    # upsert replaces every column, including with None
    store.write_batch([rec("file:///a", status="skipped", reason="too-large", last_modified=None,
                           date_source=None, content_hash=None, size=99)])
    got = store.get("file:///a")
    assert (got.status, got.reason, got.last_modified, got.date_source, got.content_hash, got.size) == \
        ("skipped", "too-large", None, None, None, 99)
    assert store.keys(status="indexed") == {"file:///b"}

    # delete
    store.write_batch([], deletes=["file:///a", "file:///never-there"])
    assert store.get("file:///a") is None
    assert store.keys() == {"file:///b"}
    assert store.counts_by_source() == {"docs": {"indexed": 1}}


def test_times_sort_as_text_and_filter(store) -> None:
    store.write_batch([rec("k1", last_modified=datetime(2001, 1, 1, tzinfo=UTC)),
                       rec("k2", last_modified=datetime(2010, 6, 15, 12, tzinfo=UTC)),
                       rec("k3", last_modified=datetime(2024, 1, 1, tzinfo=UTC)),
                       rec("k4", last_modified=None)])
    got = [r.key for r in store.iter_records(lm_from=datetime(2009, 1, 1, tzinfo=UTC),
                                             lm_to=datetime(2011, 1, 1, tzinfo=UTC))]
    assert got == ["k2"]
    newest_first = [r.key for r in store.iter_records(lm_from=datetime(2000, 1, 1, tzinfo=UTC), order="last_modified")]
    assert newest_first == ["k3", "k2", "k1"]
    assert to_db_time(datetime(2001, 9, 9, 1, 46, 40, tzinfo=UTC)) == "2001-09-09T01:46:40.000000Z"
    assert from_db_time("2001-09-09T01:46:40.000000Z") == datetime(2001, 9, 9, 1, 46, 40, tzinfo=UTC)
    assert to_db_time(None) is None and from_db_time(None) is None


def test_naive_datetime_raises_value_error(store) -> None:
    with pytest.raises(ValueError, match="naive"):
        to_db_time(datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="naive"):
        store.write_batch([rec("naive", indexed_at=datetime(2024, 1, 1))])


def test_failed_batch_writes_nothing_and_store_stays_usable(store, open_any_store) -> None:
    with pytest.raises(ValueError):
        store.write_batch([rec("good-first"), rec("naive", indexed_at=datetime(2024, 1, 1))])
    assert store.keys() == set()  # all or nothing
    store.write_batch([rec("after")])  # the connection still works
    assert open_any_store(readonly=True).keys() == {"after"}


def test_readonly_open_of_missing_store(tmp_path) -> None:
    with pytest.raises(StoreError, match="no state store yet"):
        Store.in_dir(tmp_path / "nothing-here", readonly=True)
    assert not (tmp_path / "nothing-here").exists()  # nothing created


def test_readonly_store_cannot_write(tmp_path) -> None:
    Store.in_dir(tmp_path).close()
    with Store.in_dir(tmp_path, readonly=True) as ro:
        with pytest.raises(StoreError, match="write failed"):
            ro.write_batch([rec("x")])
        assert ro.keys() == set()


def test_readonly_open_of_unmigrated_store(tmp_path) -> None:
    sqlite3.connect(tmp_path / "state.sqlite3").close()
    with pytest.raises(StoreError, match="needs migration"):
        Store.in_dir(tmp_path, readonly=True)


def test_wal_mode(tmp_path, sqlite_store) -> None:
    store = sqlite_store
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con = sqlite3.connect(store.path)  # persistent: any other connection sees it too
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()


def test_reset_stats_and_record_run(store) -> None:
    store.write_batch([rec("a"), rec("b")])
    store.reset_stats({"a"})
    a = store.get("a")
    assert (a.status, a.mtime_ns, a.content_hash) == ("stale", None, None)
    assert store.get("b").status == "indexed"
    store.record_run("docs", "filesystem", T1, T2, {"seen": 2})
    store.record_run("docs", "filesystem", T2, T2, {"seen": 3})
    assert store.source_runs() == {"docs": {"kind": "filesystem", "started_at": T2, "finished_at": T2,
                                            "counts": {"seen": 3}, "completed_at": T2, "running_since": None,
                                            "node": None}}


def test_a_pass_mark_and_its_completion(store) -> None:
    """The start-up rule's facts: a pass that never ended keeps ``running_since``; a failed pass
    does not move ``completed_at``."""
    t3 = T2 + timedelta(hours=1)
    store.pass_started("site", "web", T1)
    assert store.source_runs()["site"]["running_since"] == T1
    store.record_run("site", "web", T1, T2, {"seen": 1})
    run = store.source_runs()["site"]
    assert (run["running_since"], run["completed_at"]) == (None, T2)
    store.pass_started("site", "web", t3)
    store.record_run("site", "web", t3, t3, {"errors": 1}, completed=False)
    run = store.source_runs()["site"]
    assert (run["running_since"], run["completed_at"], run["finished_at"]) == (None, T2, t3)


def test_forget_source_drops_everything_but_its_document_rows(store) -> None:
    store.write_batch([rec("a")], meta={"sql:gone:full_loaded_at": "x", "web:gone:pass": "{}",
                                        "sql:gone2:full_loaded_at": "kept", "index_generation": "3"})
    row = dict.fromkeys(Store.CRAWL_COLUMNS)
    row.update(url="http://h/", pass_id=1, state="done", hops=0, seed_depth=0, seq=0, via="seed", redirects=0,
               gone_count=0, fail_count=0)
    store.crawl_write("gone", [row])
    store.record_run("gone", "web", T1, T2, {})
    assert "gone" in store.known_sources()
    store.forget_source("gone", ["sql:gone:", "web:gone:"])
    assert "gone" not in store.known_sources()
    assert store.get_meta("sql:gone:full_loaded_at") is None and store.get_meta("web:gone:pass") is None
    assert store.get_meta("sql:gone2:full_loaded_at") == "kept" and store.get_meta("index_generation") == "3"


def test_migration_of_source_runs_counts_an_old_run_as_completed(tmp_path) -> None:
    """A state dir of the previous release: its last passes count as completed, so the first
    start of the new release does not crawl or poll again (nothing is re-indexed)."""
    path = tmp_path / "state.sqlite3"
    con = sqlite3.connect(path)
    version = next(i for i, m in enumerate(MIGRATIONS) if "completed_at" in m)
    for step in MIGRATIONS[:version]:
        con.executescript(step)
    con.execute("INSERT INTO source_runs VALUES ('site', 'web', ?, ?, '{}')", (to_db_time(T1), to_db_time(T2)))
    con.execute(f"PRAGMA user_version = {version}")
    con.commit()
    con.close()
    with Store(path) as s:
        assert s.source_runs()["site"]["completed_at"] == T2
        assert s.source_runs()["site"]["running_since"] is None


def test_a_writer_and_a_reader_coexist(tmp_path) -> None:
    """WAL: one connection writes batches in a thread while another reads; neither fails, and
    the reader sees every committed batch whole (never half of one)."""
    writer = Store.in_dir(tmp_path)
    reader = Store.in_dir(tmp_path, readonly=True)
    batches, per_batch = 60, 20
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for i in range(batches):
                writer.write_batch([rec(f"k{i:03d}-{j:02d}") for j in range(per_batch)],
                                   meta={"batch": str(i)})
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=write)
    t.start()
    seen = []
    deadline = time.monotonic() + 60
    try:
        while t.is_alive() and time.monotonic() < deadline:
            n = len(reader.keys())
            assert n % per_batch == 0, n  # atomic batches
            seen.append(n)
        t.join(timeout=60)
        assert not t.is_alive()
        assert not errors, errors
        assert seen == sorted(seen)  # never goes backwards
        assert len(reader.keys()) == batches * per_batch
        assert reader.get_meta("batch") == str(batches - 1)

        # an open write transaction does not block a reader in another connection
        writer._db.execute("BEGIN IMMEDIATE")
        writer._db.execute("DELETE FROM documents")
        try:
            other = Store.in_dir(tmp_path, readonly=True)
            assert len(other.keys()) == batches * per_batch  # the last committed snapshot
            other.close()
        finally:
            writer._db.execute("ROLLBACK")
    finally:
        reader.close()
        writer.close()


def test_close_twice(tmp_path) -> None:
    s = Store.in_dir(tmp_path)
    s.close()
    s.close()


def test_version_3_store_migrates_keeping_its_documents_and_crawl_rows(tmp_path) -> None:
    path = tmp_path / Store.FILENAME
    con = sqlite3.connect(path)
    con.executescript("".join(MIGRATIONS[:3]) + "PRAGMA user_version = 3;")
    con.executemany("INSERT INTO documents(key, source, status, content_hash) VALUES (?, ?, ?, ?)",
                    [("http://h/", "w", "indexed", "abc"), ("http://h/x", "w", "skipped", "abc")])
    con.execute("INSERT INTO crawl(source, url, pass_id, state, hops, seed_depth, seq, via, last_status) "
                "VALUES ('w', 'http://h/', 7, 'done', 0, 1, 1, 'seed', 200)")
    con.commit()
    con.close()
    with Store.in_dir(tmp_path) as s:
        assert s.schema_version == SCHEMA_VERSION
        assert s.indexed_with_hash("w", "abc") == ["http://h/"]
        assert s.indexed_with_hash("other", "abc") == []
        row = s.crawl_rows("w")["http://h/"]
        assert (row["pass_id"], row["recrawl_seconds"], row["due_at"]) == (7, None, None)


def test_stat_rows_read_one_covering_index(sqlite_store, tmp_path) -> None:
    """The scan's change test reads every row of a tree, a chunk at a time in key order: from
    the covering index, not by a row lookup per document (SQLite chose the content-hash index
    and looked each row up), and with no sort."""
    store = sqlite_store
    now = datetime.now(timezone.utc)
    store.write_batch([DocumentRecord(key=f"file:///t/{i}", source="docs", status="indexed", mtime_ns=i,
                                      size=i, ctime_ns=i, ino=i, reason="new", indexed_at=now)
                       for i in range(3)])
    db = sqlite3.connect(tmp_path / "state.sqlite3")
    plan = db.execute("EXPLAIN QUERY PLAN SELECT key, mtime_ns, size, ctime_ns, ino, reason FROM documents "
                      "WHERE source = ? AND key > ? ORDER BY key LIMIT ?", ("docs", "", 2)).fetchall()
    db.close()
    assert "USING COVERING INDEX documents_source" in plan[0][3], plan
    assert not any("TEMP B-TREE" in p[3] for p in plan), plan
    # chunks of 2 rows: every row once, in key order, across the chunk boundary
    assert list(store.stat_rows("docs", chunk=2)) == [(f"file:///t/{i}", i, i, i, i, "new") for i in range(3)]
    assert list(store.stat_rows("docs", "file:///t/1", chunk=2)) == [("file:///t/1", 1, 1, 1, 1, "new")]
    assert list(store.iter_keys("docs", chunk=1)) == [f"file:///t/{i}" for i in range(3)]
    assert list(store.iter_keys(status="gone", chunk=1)) == []



def test_keys_and_their_streamed_form_filter_by_source_and_status_alike(store) -> None:
    store.write_batch([rec("file:///a"), rec("file:///b", status="skipped"), rec("file:///c", source="home"),
                       rec("file:///d", source="home", status="skipped")])
    for source, status, want in [(None, None, {"file:///a", "file:///b", "file:///c", "file:///d"}),
                                 ("home", None, {"file:///c", "file:///d"}),
                                 (None, "skipped", {"file:///b", "file:///d"}),
                                 ("home", "skipped", {"file:///d"}), ("home", "gone", set())]:
        assert store.keys(source, status) == want
        assert list(store.iter_keys(source, status, chunk=1)) == sorted(want)


@pytest.mark.parametrize("text, says", [
    ("", "not JSON"), ("[1, 2]", "not a JSON object"), ('{"schema": "s"}', "no 'url'"),
    ('{"url": 5, "schema": "s"}', "'url' is 5, not a string"),
    ('{"url": "postgresql://h/db", "schema": "s", "timeout_seconds": "soon"}', "'timeout_seconds' is \"soon\", not a number"),
    (b"\xff\xfe{", "not JSON"),
])
def test_a_garbage_store_address_file_is_named_in_plain_words(tmp_path, text, says) -> None:
    # a trial: a damaged store-postgresql.json gave Python's own words ("list indices must be integers")
    from indexerd.core.store import PgStoreAddress

    f = tmp_path / PgStoreAddress.FILENAME
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(StoreError) as e:
        PgStoreAddress.from_file(tmp_path)
    assert str(e.value).startswith(f"{f}: cannot read the ") and says in str(e.value), str(e.value)


def test_a_store_from_before_the_document_counts_counts_its_documents_when_migrated(tmp_path: Path) -> None:
    """Schema 9 -> 10: the counts start from the documents already there, then follow writes."""
    path = tmp_path / "state.sqlite3"
    with Store(path) as s:
        s.write_batch([rec(f"k{i}") for i in range(5)] + [rec("e", status="error")])
    db = sqlite3.connect(path)
    db.executescript("DROP TRIGGER document_counts_insert; DROP TRIGGER document_counts_delete; "
                     "DROP TRIGGER document_counts_update; DROP TABLE document_counts; DROP INDEX crawl_due; "
                     "DROP TABLE crawl_requisites; PRAGMA user_version = 9;")
    db.execute("INSERT INTO documents(key, source, status) VALUES ('old', 'docs', 'indexed')")
    db.commit()
    db.close()
    with Store(path) as s:
        assert s.counts_by_source()["docs"] == {"indexed": 6, "error": 1}
        s.write_batch([rec("k9")], deletes=["k0", "old"])
        assert s.counts_by_source()["docs"] == {"indexed": 5, "error": 1}
