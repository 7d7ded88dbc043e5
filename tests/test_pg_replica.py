"""Searching from a read replica (``[index.postgresql] read_url``, issue 30): a real primary and
a hot standby made by ``pg_basebackup -R`` on loopback sockets (tests/pg.py), started once for
this module.  A document indexed on the primary is found through the replica once replayed;
while replay is paused a new one is not, and the answer says how far behind the replica is
(the engine, ``/api/search``, the search page, ``ctl search``); after resuming it is found.  A
replica that does not answer leaves searches to the primary, said once in the log.

Missing server binaries skip these tests locally and fail them in CI (``pg_or_skip``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
import urllib.parse
from datetime import datetime, timezone
from pathlib import Path

import pytest
from daemonhttp import HttpDaemon, serving, short_base
from pg import pg_or_skip

from indexerd.config import parse_config
from indexerd.core.errors import ConfigError
from indexerd.daemon.queries import REPLICA_LAG_NOTE_SECONDS, SearchRequest, search_any_engine
from indexerd.index import IndexDoc, open_index
from indexerd.index.postgresql.connect import PgTarget
from indexerd.core.replica import REPLICA_RETRY_SECONDS, ReplicaHealth
from indexerd.index.postgresql.replica import lag_seconds

UTC = timezone.utc
AWAIT_SECONDS = 30.0
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def pair():
    """``(primary, standby)``: a server and its hot standby, one database ``ix`` on both."""
    primary = pg_or_skip(pytest)
    standby = None
    try:
        primary.create_database("ix")
        standby = primary.start_standby()
        standby.wait_replayed(primary.wal_lsn())
        yield primary, standby
    finally:
        if standby is not None:
            standby.stop()
        primary.stop()


def settings_toml(primary, standby, schema: str, read_url: str | None = None) -> str:
    read_url = read_url if read_url is not None else standby.url("ix")
    return (f'[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "{primary.url("ix")}"\n'
            f'read_url = "{read_url}"\nschema = "{schema}"\n')


def doc(key: str, text: str) -> IndexDoc:
    return IndexDoc(key=key, source="s", url=key, path=None, title="t", content=text,
                    last_modified=datetime(2024, 1, 1, tzinfo=UTC), date_source="mtime",
                    media_type="text/plain", size=len(text))


def index_one(ix, key: str, text: str) -> None:
    s = ix.session()
    s.update(doc(key, text))
    s.commit(merge=False)


def await_value(fn, what: str, timeout: float = AWAIT_SECONDS):
    """``fn()``'s first truthy value, polled until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.05)


def ctl_search_alone(state_dir, *args: str) -> subprocess.CompletedProcess:
    """``indexerd ctl search ARGS`` reading ``state_dir`` itself (no config, no daemon)."""
    env = dict(os.environ, STATE_DIRECTORY=str(state_dir))
    env.pop("INDEXERD_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "indexerd.cli.main", "ctl", "search", *args],
                          capture_output=True, text=True, env=env, timeout=60, cwd=REPO)


# -- without a server ------------------------------------------------------------------------
def test_lag_is_the_age_of_the_last_replayed_commit_only_while_received_wal_waits() -> None:
    assert lag_seconds(True, True, 12.5) == 12.5
    assert lag_seconds(True, False, 3600.0) == 0.0      # replayed all it received: caught up
    assert lag_seconds(False, True, 99.0) == 0.0        # not a standby (promoted, or a primary)
    assert lag_seconds(True, True, -0.2) == 0.0         # clocks a hair apart
    assert lag_seconds(True, True, None) == 0.0


def test_a_replica_that_fails_is_left_alone_then_tried_again_and_the_log_says_so_once(caplog) -> None:
    now = [100.0]
    health = ReplicaHealth("postgresql://r@/ix schema s", clock=lambda: now[0])
    assert health.usable() and not health.down
    with caplog.at_level(logging.INFO, logger="indexerd.core.replica"):
        health.failed("connection refused")
        health.failed("connection refused")
        assert not health.usable() and health.down
        now[0] += REPLICA_RETRY_SECONDS
        assert health.usable()
        health.answered()
        health.answered()
    texts = [r.getMessage() for r in caplog.records]
    assert len(texts) == 2
    assert "does not answer (connection refused); searches go to the primary" in texts[0]
    assert "answers again" in texts[1]


def test_read_url_is_checked_masked_and_recorded_without_its_password(tmp_path) -> None:
    base = '[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "postgresql://ix@db1/ix"\n'
    with pytest.raises(ConfigError, match="index.postgresql.read_url: the URL holds a password"):
        parse_config(base + 'read_url = "postgresql://ix:pw@db2/ix"\n')
    cfg = parse_config(base + 'read_url = "postgresql+psycopg://ix@db2/ix"\npassword_env = "PGPW"\n')
    target = PgTarget.from_settings(cfg.index.postgresql)
    assert target.read_url == "postgresql://ix@db2/ix"
    reader = target.reader()
    assert reader is not None and reader.url == "postgresql://ix@db2/ix" and reader.read_url is None
    assert reader.password_env == "PGPW" and reader.schema == target.schema
    target.record(tmp_path)
    again = PgTarget.from_index_dir(tmp_path)
    assert again == target                     # ctl search without the config reads the replica too
    assert PgTarget.from_settings(parse_config(base).index.postgresql).reader() is None


# -- a primary and its hot standby ------------------------------------------------------------
def test_a_search_through_the_replica_finds_what_was_replayed_and_says_when_it_lags(pair, tmp_path) -> None:
    primary, standby = pair
    ix = open_index(tmp_path, parse_config(settings_toml(primary, standby, "eng")).index)
    try:
        index_one(ix, "doc:first", "kingfisher by the river")
        standby.wait_replayed(primary.wal_lsn())
        result = search_any_engine(ix, SearchRequest(query="kingfisher"))
        assert [h.key for h in result.hits] == ["doc:first"] and result.total == 1
        assert result.replica_lag_seconds is None and ix.replica_lag_seconds() < REPLICA_LAG_NOTE_SECONDS

        standby.admin("SELECT pg_wal_replay_pause()")
        try:
            index_one(ix, "doc:second", "kingfisher nesting in a bank")
            standby.wait_replayed(primary.wal_lsn(), received_only=True)
            lagging = await_value(
                lambda: (r := search_any_engine(ix, SearchRequest(query="kingfisher"))).replica_lag_seconds and r,
                "the answer says the replica lags")
            assert [h.key for h in lagging.hits] == ["doc:first"] and lagging.total == 1
            assert lagging.replica_lag_seconds > REPLICA_LAG_NOTE_SECONDS
            assert search_any_engine(ix, SearchRequest(query="nesting")).hits == []
            assert ix.count() == 1                        # the replica's count
            assert ix.status()["documents"] == 2          # the primary's bookkeeping
            # ctl search without a daemon or a config: the state dir's record names the replica
            p = ctl_search_alone(tmp_path, "kingfisher", "--json")
            assert p.returncode == 0, p.stderr
            assert [h["key"] for h in json.loads(p.stdout)] == ["doc:first"]
            assert json.loads(p.stderr.strip().splitlines()[-1])["replica_lag_seconds"] > REPLICA_LAG_NOTE_SECONDS
        finally:
            standby.admin("SELECT pg_wal_replay_resume()")
        standby.wait_replayed(primary.wal_lsn())
        result = search_any_engine(ix, SearchRequest(query="kingfisher"))
        assert sorted(h.key for h in result.hits) == ["doc:first", "doc:second"]
        assert result.replica_lag_seconds is None
        assert [h.key for h in search_any_engine(ix, SearchRequest(query="nesting")).hits] == ["doc:second"]
        assert ix.status()["read_server"].startswith("postgresql://postgres@/ix")
    finally:
        ix.close()


def test_a_replica_that_does_not_answer_leaves_searches_to_the_primary_said_once(pair, tmp_path, caplog) -> None:
    primary, standby = pair
    nowhere = f"postgresql://postgres@/ix?host={tmp_path / 'nosock'}"
    ix = open_index(tmp_path, parse_config(settings_toml(primary, standby, "down", read_url=nowhere)).index)
    try:
        index_one(ix, "doc:heron", "grey heron wading")
        with caplog.at_level(logging.INFO, logger="indexerd.core.replica"):
            for _ in range(3):
                result = search_any_engine(ix, SearchRequest(query="heron"))
                assert [h.key for h in result.hits] == ["doc:heron"] and result.total == 1
                assert result.replica_lag_seconds is None      # the primary answered
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, warnings
        assert "searches go to the primary until it does" in warnings[0] and "nosock" in warnings[0]
        assert ix.replica.down
    finally:
        ix.close()


def test_a_statement_the_replica_refuses_is_an_error_not_a_replica_down(pair, tmp_path, caplog) -> None:
    """Only a replica that cannot be reached sends searches to the primary: a statement it
    refuses (here a write; a statement timeout alike) is the search's error, not run again on
    the primary, and the replica stays in use."""
    from psycopg import sql

    from indexerd.core.errors import IndexUnavailable

    primary, standby = pair
    ix = open_index(tmp_path, parse_config(settings_toml(primary, standby, "refuse")).index)
    try:
        with caplog.at_level(logging.WARNING, logger="indexerd.core.replica"):
            with pytest.raises(IndexUnavailable, match="read replica at .*read-only transaction"):
                ix._search_read(sql.SQL("CREATE TEMP TABLE probe (x int)"))
        assert not ix.replica.down and caplog.records == []
        assert ix.replica_lag_seconds() is not None        # still measured on the replica
    finally:
        ix.close()


# -- the daemon: API, search page, ctl search --------------------------------------------------
@pytest.fixture(scope="module")
def daemon(pair):
    primary, standby = pair
    d = HttpDaemon(short_base())
    text = d.cfg.read_text(encoding="utf-8").replace(
        "[index]\n", '[index]\nengine = "postgresql"\n', 1)
    text += (f'\n[index.postgresql]\nurl = "{primary.url("ix")}"\nread_url = "{standby.url("ix")}"\n'
             'schema = "daemon"\n')
    d.cfg.write_text(text, encoding="utf-8")
    with serving(d):
        yield d


def api(d, q: str) -> dict:
    return d.get_json("/api/search?" + urllib.parse.urlencode({"q": q}))


def test_the_daemon_answers_from_the_replica_and_says_while_it_lags(pair, daemon) -> None:
    primary, standby = pair
    standby.wait_replayed(primary.wal_lsn())
    body = api(daemon, "falcon")
    assert body["hits"][0]["title"] == "Peregrine falcon" and body["replica_lag_seconds"] is None

    standby.admin("SELECT pg_wal_replay_pause()")
    try:
        (daemon.notes / "osprey.txt").write_text("ospreywatch at the lake\n", encoding="utf-8")
        await_value(lambda: primary.admin("SELECT count(*) FROM daemon.documents WHERE key LIKE %s",
                                          ("%osprey.txt",), dbname="ix")[0][0],
                    "the daemon indexed the new file on the primary")
        standby.wait_replayed(primary.wal_lsn(), received_only=True)
        # awaited past the note's threshold: the first answer after the pause can say exactly 1.0 s
        lagging = await_value(lambda: ((b := api(daemon, "ospreywatch"))["replica_lag_seconds"] or 0)
                              > REPLICA_LAG_NOTE_SECONDS and b, "the API says the replica lags")
        assert lagging["total"] == 0 and lagging["hits"] == []
        assert lagging["replica_lag_seconds"] > REPLICA_LAG_NOTE_SECONDS

        status, _, page = daemon.get("/?" + urllib.parse.urlencode({"q": "ospreywatch"}))
        assert status == 200
        assert b'id="replica-lag"' in page and b"behind the primary" in page

        p = daemon.ctl("search", "ospreywatch", "--json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout) == []
        note = json.loads(p.stderr.strip().splitlines()[-1])
        assert note["replica_lag_seconds"] > REPLICA_LAG_NOTE_SECONDS
        p = daemon.ctl("search", "ospreywatch")
        assert p.returncode == 0 and "read replica" in p.stderr and "behind the primary" in p.stderr
    finally:
        standby.admin("SELECT pg_wal_replay_resume()")
    standby.wait_replayed(primary.wal_lsn())
    body = api(daemon, "ospreywatch")
    assert [h["key"].rsplit("/", 1)[-1] for h in body["hits"]] == ["osprey.txt"]
    assert body["replica_lag_seconds"] is None
    p = daemon.ctl("search", "ospreywatch")
    assert p.returncode == 0 and "osprey.txt" in p.stdout and "replica" not in p.stderr


# -- the state store's search reads -------------------------------------------------------------
def store_record(key: str):
    from indexerd.core.store import DocumentRecord

    t = datetime(2024, 1, 1, tzinfo=UTC)
    return DocumentRecord(key=key, source="docs", status="indexed", reason="new", title="t",
                          media_type="text/plain", size=10, mtime_ns=1, last_modified=t, date_source="mtime",
                          content_hash="h-" + key, indexed_at=t, checked_at=t, decided_at=t)


def test_the_stores_search_reads_go_to_its_replica_and_to_the_primary_when_it_is_down(pair, tmp_path, caplog) -> None:
    """``[store] read_url``: the content hashes that collapse identical hits are read on the
    standby (what it has replayed); a standby that does not answer leaves them to the primary,
    said once in the log."""
    from indexerd.core.statedir import StateDir
    from indexerd.core.store import open_store, store_address

    primary, standby = pair
    base = (f'[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "{primary.url("ix")}"\n'
            f'[store]\nurl = "{primary.url("ix")}"\nschema = "st"\n')
    cfg = parse_config(base + f'read_url = "{standby.url("ix")}"\n')
    state = StateDir(tmp_path, store_address(cfg))
    writer = open_store(state.store_location)
    try:
        writer.write_batch([store_record("file:///a")])
        standby.wait_replayed(primary.wal_lsn())
        with state.open_search_store() as store:
            assert store._db.execute("SELECT pg_is_in_recovery()").fetchone()[0] is True
            assert store.content_hashes(["file:///a"]) == {"file:///a": "h-file:///a"}
            assert store.media_types() == ["text/plain"]
        standby.admin("SELECT pg_wal_replay_pause()")
        try:
            writer.write_batch([store_record("file:///b")])
            standby.wait_replayed(primary.wal_lsn(), received_only=True)
            with state.open_search_store() as store:        # the replica: b not replayed yet
                assert store.content_hashes(["file:///a", "file:///b"]) == {"file:///a": "h-file:///a"}
        finally:
            standby.admin("SELECT pg_wal_replay_resume()")
        standby.wait_replayed(primary.wal_lsn())
        with state.open_search_store() as store:
            assert set(store.content_hashes(["file:///a", "file:///b"])) == {"file:///a", "file:///b"}
    finally:
        writer.close()

    nowhere = f"postgresql://postgres@/ix?host={tmp_path / 'nosock'}"
    down = StateDir(tmp_path, store_address(parse_config(base + f'read_url = "{nowhere}"\n')))
    with caplog.at_level(logging.INFO, logger="indexerd.core.replica"):
        for _ in range(3):
            with down.open_search_store() as store:
                assert store._db.execute("SELECT pg_is_in_recovery()").fetchone()[0] is False
                assert len(store.content_hashes(["file:///a", "file:///b"])) == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "the state store's search reads go to the primary" in warnings[0], warnings
    with pytest.raises(ConfigError, match="store.read_url: the URL holds a password"):
        parse_config(base + 'read_url = "postgresql://u:pw@db2/ix"\n')


def test_status_and_metrics_say_how_far_behind_the_replica_is(pair, daemon) -> None:
    """Issue 30: the replica's lag is shown where an operator looks -- ``ctl status`` (text and
    JSON), the status page and ``/metrics`` (a gauge) -- and says it lags while it does."""
    primary, standby = pair
    standby.wait_replayed(primary.wal_lsn())
    st = json.loads(daemon.ctl("status", "--json").stdout)
    assert st["index"]["read_server"] and st["index"]["replica_lag_seconds"] < REPLICA_LAG_NOTE_SECONDS
    standby.admin("SELECT pg_wal_replay_pause()")
    try:
        (daemon.notes / "heron.txt").write_text("heronwatch by the reeds\n", encoding="utf-8")
        await_value(lambda: primary.admin("SELECT count(*) FROM daemon.documents WHERE key LIKE %s",
                                          ("%heron.txt",), dbname="ix")[0][0],
                    "the daemon indexed the new file on the primary")
        standby.wait_replayed(primary.wal_lsn(), received_only=True)
        lag = await_value(lambda: (v := json.loads(daemon.ctl("status", "--json").stdout)["index"]
                                   ["replica_lag_seconds"]) is not None and v > REPLICA_LAG_NOTE_SECONDS and v,
                          "ctl status says the replica lags")
        text = daemon.ctl("status").stdout
        assert re.search(r"^read replica .*: LAGGING [\d.]+ s behind the primary", text, re.M), text
        _, _, page = daemon.get("/status")
        assert re.search(rb'id="replica-status">read replica .*LAGGING [\d.]+ s behind the primary', page), page
        _, _, metrics = daemon.get("/metrics")
        gauge = re.search(rb"^indexerd_replica_lag_seconds ([\d.e+]+)$", metrics, re.M)
        assert gauge is not None and float(gauge.group(1)) >= lag
        assert re.search(rb"^indexerd_replica_up 1\.0$", metrics, re.M)
    finally:
        standby.admin("SELECT pg_wal_replay_resume()")
    standby.wait_replayed(primary.wal_lsn())
    text = daemon.ctl("status").stdout
    assert re.search(r"^read replica .*: [\d.]+ s behind the primary$", text, re.M), text
