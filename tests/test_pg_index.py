"""The PostgreSQL index engine (indexerd/index/postgresql) on a real server (tests/pg.py): the
session's rules, commit tokens, a killed writer, concurrent writers, long keys and big
documents, the query compilation, a reader without the config, passwords, and its config.

Missing server binaries fail these tests (``pg_index_server``), never skip them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import engine_toml, index_settings

from indexerd.config import parse_config
from indexerd.core.errors import ConfigError, IndexUnavailable, QueryError
from indexerd.index import IndexDoc, on_disk_token, open_index
from indexerd.index.postgresql.connect import TARGET_FILE
from indexerd.index.postgresql.documents import MAX_POSITION, build_tsvector

UTC = timezone.utc
REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.parametrize("engine", ["postgresql"])


def doc(key: str, text: str, title: str = "t", **kw) -> IndexDoc:
    fields = dict(key=key, source="s", url=key, path=None, title=title, content=text,
                  last_modified=datetime(2024, 1, 1, tzinfo=UTC), date_source="mtime",
                  media_type="text/plain", size=len(text))
    fields.update(kw)
    return IndexDoc(**fields)


@pytest.fixture
def ix(tmp_path, engine):
    index = open_index(tmp_path, index_settings(engine))
    yield index
    index.close()


def keys_of(hits) -> list[str]:
    return sorted(h.key for h in hits)


def test_last_write_of_a_key_wins_and_deletes_reach_committed_documents(ix) -> None:
    s = ix.session()
    s.update(doc("a", "ephemeral"))
    s.delete("a")
    for text in ("first version", "second version", "third version"):
        s.update(doc("b", text))
    s.delete("never-there")
    s.update(doc("c", "committed"))
    s.commit(merge=False)
    assert keys_of(ix.search("version")) == ["b"] and ix.search("third") and not ix.search("first")
    assert ix.search("ephemeral") == []
    s = ix.session()
    s.delete_many(["c", "b"])
    s.update(doc("b", "back again"))
    s.commit(merge=False)
    assert sorted(ix.keys()) == [("b", "s")]
    assert ix.count() == 1 == ix.count("again")


def test_nothing_is_visible_before_commit_and_cancel_drops_the_batch(ix, tmp_path) -> None:
    s = ix.session()
    s.update(doc("a", "committed"))
    token = s.commit(merge=False)
    s = ix.session()
    for i in range(600):  # past one flush: sent to the server inside the open transaction
        s.update(doc(f"p{i}", "pending words"))
    s.delete("a")
    assert ix.search("pending") == [] and keys_of(ix.search("committed")) == ["a"]
    reader = open_index(tmp_path, None, create=False)  # another connection, no config
    assert reader.count() == 1 and reader.commit_token() == token
    s.cancel()
    s.cancel()  # safe twice
    assert ix.count() == 1 and ix.commit_token() == token and ix.search("pending") == []
    reader.close()


def test_commit_token_grows_with_every_commit_that_writes_and_is_read_from_the_record(ix, tmp_path) -> None:
    assert on_disk_token(tmp_path) == ix.commit_token() == "0"
    seen = []
    for i in range(3):
        s = ix.session()
        s.update(doc(f"k{i}", "x words"))
        seen.append(s.commit(merge=False))
    assert seen == ["1", "2", "3"] and on_disk_token(tmp_path) == "3"
    assert ix.session().commit(merge=False) == "3"  # an empty session changes nothing
    ix.maintain()  # the GIN pending list merged; nothing else changes
    assert ix.commit_token() == "3" and ix.count() == 3
    st = ix.status()
    assert st["engine"] == "postgresql" and st["documents"] == 3 and st["commits"] == 3
    assert st["size_bytes"] == ix.size_bytes() > 0 and "password" not in json.dumps(st)
    assert ix.maintenance_delay(1) is None and ix.maintenance_delay(100) > 0


KILLED_WRITER = """
import sys, time
from datetime import datetime, timezone
from indexerd.config import parse_config
from indexerd.index import IndexDoc, open_index
ix = open_index(sys.argv[1], parse_config(sys.argv[2]).index)
s = ix.session()
for i in range(700):
    s.update(IndexDoc(key=f"killed{i}", source="s", url="u", path=None, title="t", content="lost words",
                      last_modified=datetime.now(timezone.utc), date_source="mtime", media_type="text/plain", size=1))
print("flushed", flush=True)
time.sleep(60)
"""


def test_a_writer_killed_mid_session_leaves_the_last_commit_and_blocks_no_one(ix, tmp_path, engine) -> None:
    s = ix.session()
    s.update(doc("kept", "kept words"))
    token = s.commit(merge=False)
    p = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(tmp_path / "other"), engine_toml(engine)],
                         stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert p.stdout.readline().strip() == "flushed"
        s = ix.session()  # a second writer while the other holds an open transaction: no lock
        s.update(doc("mine", "mine words"))
        mine = s.commit(merge=False)
    finally:
        p.kill()
        p.wait(10)
    assert int(mine) == int(token) + 1
    assert ix.search("lost") == [] and keys_of(ix.search("words")) == ["kept", "mine"]
    s = ix.session()  # the killed writer's uncommitted rows hold no lock any more
    s.update(doc("killed1", "now committed"))
    s.commit(merge=False)
    assert keys_of(ix.search("committed")) == ["killed1"]


def test_concurrent_writers_of_different_keys_commit_without_waiting(ix) -> None:
    a, b = ix.session(), ix.session()
    a.update(doc("a1", "alpha words"))
    b.update(doc("b1", "beta words"))
    a._flush(), b._flush()  # both hold their rows' locks now
    done = []
    t = threading.Thread(target=lambda: done.append(b.commit(merge=False)))
    t.start()
    t.join(5)
    assert done, "a writer of other keys waited for an open session"
    a.commit(merge=False)
    assert keys_of(ix.search("words")) == ["a1", "b1"] and ix.count() == 2


def test_long_keys_odd_paths_and_titles_and_big_documents(ix) -> None:
    long_key = "https://example.com/" + "segment/" * 1000  # 8 kB: beyond a B-tree entry
    odd_path = "/tmp/caf\udce9/r\u00e9sum\u00e9.txt"  # a non-UTF-8 byte kept as a surrogate escape
    words = " ".join(f"w{i}" for i in range(40_000))  # past the last tsvector position
    many = " ".join(f"distinct{i:06d}x" for i in range(90_000))  # past tsvector's 1 MB
    s = ix.session()
    s.update(doc(long_key, "long key words"))
    s.update(doc("file:///odd", "odd words", title="Caf\udce9 title", path=odd_path))
    s.update(doc("big", words + " final phrase here"))
    s.update(doc("many", many))
    s.commit(merge=False)
    assert [h.key for h in ix.search(f"key:{long_key}")] == [long_key]
    assert [h.key for h in ix.search("key:https://example.com/segment/*")] == [long_key]
    (hit,) = ix.search("odd")
    assert hit.path == odd_path and hit.title == "Caf\udce9 title"
    assert keys_of(ix.search("w39999")) == ["big"]  # a word past position 16383 is found
    assert keys_of(ix.search('"w100 w101"')) == ["big"]  # a phrase before it too
    assert keys_of(ix.search("distinct000001x")) == ["many"]
    assert ix.count() == 4


def test_tsvector_layout_keeps_fields_apart_and_clamps_positions(engine) -> None:
    tsv = build_tsvector(["end"], ["start"] + ["x"] * 20_000, ["a.b"])
    assert "'end':1A" in tsv.literal and "'start':3B" in tsv.literal
    assert f"'a.b':{MAX_POSITION}C" in tsv.literal and tsv.truncated
    assert build_tsvector(["it's"], [], []).literal == "'it''s':1A"


def test_a_phrase_never_matches_across_the_last_tsvector_position(ix) -> None:
    """Words past position 16383 all share the last position; the last word before them must not
    form a phrase with them (a 3,000-word pydoc page of builtins matched "regular expression":
    'regular' at 16382, a far later 'expression' clamped to 16383)."""
    s = ix.session()
    for n in range(MAX_POSITION - 6, MAX_POSITION + 2):  # 'alpha' on every position near the end
        filler = " ".join(f"f{i}" for i in range(n))
        s.update(doc(f"edge{n}", f"{filler} alpha " + " ".join(f"g{i}" for i in range(2_000)) + " beta",
                     title=""))
    s.commit(merge=False)
    assert ix.search('"alpha beta"', limit=100) == [] and ix.count('"alpha beta"') == 0
    assert len(ix.search("alpha beta", limit=100)) == 8  # both words are still found


def test_query_language_fields_ranges_negation_and_sorting(ix) -> None:
    s = ix.session()
    s.update(doc("k1", "python asyncio event loop", title="Event loops", size=100,
                 last_modified=datetime(2023, 5, 1, tzinfo=UTC), media_type="text/html"))
    s.update(doc("k2", "python trio nursery", title="Trio", size=5000,
                 last_modified=datetime(2024, 6, 1, tzinfo=UTC), source="other"))
    s.update(doc("k3", "loop of events in python", title="Misc", size=50,
                 last_modified=datetime(2025, 1, 1, tzinfo=UTC)))
    s.commit(merge=False)
    assert keys_of(ix.search("python asyncio OR trio")) == ["k1", "k2"]
    assert keys_of(ix.search('"event loop"')) == ["k1"]          # k3's "loop of events" is no phrase
    assert keys_of(ix.search("title:event")) == ["k1"]
    assert keys_of(ix.search("python -trio")) == ["k1", "k3"]
    assert keys_of(ix.search("-python")) == []
    assert keys_of(ix.search("size:>=1k")) == ["k2"] and keys_of(ix.search("size:<0")) == []
    assert keys_of(ix.search("last_modified:2024")) == ["k2"]
    assert keys_of(ix.search("media_type:text/html OR source:other")) == ["k1", "k2"]
    assert keys_of(ix.search("python (source:other OR title:misc)")) == ["k2", "k3"]
    assert keys_of(ix.search("nurs*")) == ["k2"]
    assert ix.search("python event")[0].key == "k1"  # its title holds the word: ranked first
    assert [h.key for h in ix.search("python", sort="date")] == ["k3", "k2", "k1"]
    assert keys_of(ix.search("python", since=datetime(2024, 1, 1, tzinfo=UTC),
                             until=datetime(2025, 1, 1, tzinfo=UTC))) == ["k2"]
    assert ix.count("python", since=datetime(2024, 1, 1, tzinfo=UTC)) == 2
    assert ix.search("the") == [] and ix.count("the") == 0
    assert ix.search("python", limit=0) == []
    assert "asyncio" in ix.search("asyncio")[0].snippet
    with pytest.raises(QueryError, match="malformed query"):
        ix.search('"unbalanced')


def test_a_reader_without_the_config_uses_the_record_which_holds_no_password(tmp_path, engine,
                                                                               pg_index_server) -> None:
    """The password comes from password_env, a wrong or missing one is an error that does not
    show it, the state dir's record names the variable only, and `ctl search` (no config) finds
    the index through that record."""
    from conftest import _PG_INDEX

    dbname = "indexerd_index"
    pg_index_server.create_role("ixwriter", "s3cret-pw", dbname)
    pg_index_server.admin(f"GRANT CREATE ON DATABASE {dbname} TO ixwriter")
    role_url = f"postgresql://ixwriter@/{dbname}?host={pg_index_server.sockdir}"
    assert _PG_INDEX["url"].endswith(f"/{dbname}?host={pg_index_server.sockdir}")
    text = (f'[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "{role_url}"\n'
            f'schema = "pw{os.getpid()}"\npassword_env = "IX_TEST_PG_PW"\n')
    os.environ.pop("IX_TEST_PG_PW", None)
    with pytest.raises(ConfigError, match="IX_TEST_PG_PW is not set"):
        open_index(tmp_path, parse_config(text).index)
    os.environ["IX_TEST_PG_PW"] = "wrong-pw"
    try:
        with pytest.raises(IndexUnavailable, match="cannot connect") as e:
            open_index(tmp_path, parse_config(text).index)
        assert "wrong-pw" not in str(e.value)
        os.environ["IX_TEST_PG_PW"] = "s3cret-pw"
        ix = open_index(tmp_path, parse_config(text).index)
        s = ix.session()
        s.update(doc("file:///x.txt", "falcon words"))
        s.commit(merge=False)
        ix.close()
        record = (tmp_path / "index" / TARGET_FILE).read_text(encoding="utf-8")
        assert "s3cret" not in record and "IX_TEST_PG_PW" in record
        env = dict(os.environ, STATE_DIRECTORY=str(tmp_path))
        env.pop("INDEXERD_CONFIG", None)
        p = subprocess.run([sys.executable, "-m", "indexerd.cli.main", "ctl", "search", "falcon", "--json"],
                           capture_output=True, text=True, env=env, timeout=60, cwd=REPO)
        assert p.returncode == 0, p.stderr
        assert [h["key"] for h in json.loads(p.stdout)] == ["file:///x.txt"]
        assert "s3cret" not in p.stderr + p.stdout
    finally:
        os.environ.pop("IX_TEST_PG_PW", None)


def test_an_index_of_another_analysis_is_refused_by_readers_and_emptied_by_a_writer(ix, tmp_path, engine, monkeypatch) -> None:
    s = ix.session()
    s.update(doc("a", "old analysis"))
    s.commit(merge=False)
    from indexerd.index.postgresql import engine as pg_engine

    monkeypatch.setattr(pg_engine, "ANALYSIS_VERSION", 99)
    with pytest.raises(IndexUnavailable, match="run `indexerd index`"):
        open_index(tmp_path, index_settings(engine), create=False)
    again = open_index(tmp_path / "other", index_settings(engine))
    assert again.count() == 0 and again.search("analysis") == []
    again.close()


def test_config_of_the_engine(engine, tmp_path) -> None:
    with pytest.raises(ConfigError, match="index.postgresql.url: required"):
        parse_config('[index]\nengine = "postgresql"\n')
    with pytest.raises(ConfigError, match="password_env or password_file, not both"):
        parse_config('[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "postgresql:///x"\n'
                     'password_env = "A"\npassword_file = "/f"\n')
    cfg = parse_config('[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "postgresql:///x"\ntimeout = "5s"\n')
    assert cfg.index.postgresql.timeout == 5.0 and cfg.index.postgresql.schema == "indexerd"
    with pytest.raises(ConfigError, match="plain SQL name"):
        open_index(tmp_path, parse_config(
            '[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "postgresql:///x"\nschema = "a;b"\n').index)


def test_an_identifier_part_stemmed_to_nothing_is_left_out_not_refused(ix) -> None:
    """``s_jis`` analyses to the parts ``""`` and ``ji`` (Porter stems ``s`` to nothing): the
    python-docs codecs page failed the whole batch with a tsvector syntax error."""
    s = ix.session()
    s.update(doc("codecs", "shift_jis alias s_jis and s_jisx0213"))
    s.commit(merge=False)
    assert keys_of(ix.search("s_jis")) == ["codecs"] and keys_of(ix.search("jisx0213")) == ["codecs"]


def test_dropped_connections_readers_retry_a_writer_gets_oserror_and_the_last_commit_stays(ix, pg_index_server) -> None:
    """What a server restart or an idle-connection reaper does: every connection of indexerd
    is terminated.  The next search reconnects; the open session's commit fails with OSError and
    leaves the previous commit; a new session works."""
    s = ix.session()
    s.update(doc("a", "kept words"))
    token = s.commit(merge=False)
    assert keys_of(ix.search("kept")) == ["a"]  # a pooled connection now exists
    s = ix.session()
    s.update(doc("b", "lost words"))
    s._flush()
    pg_index_server.admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE application_name = 'indexerd' AND pid <> pg_backend_pid()")
    with pytest.raises(OSError, match="commit failed"):
        s.commit(merge=False)
    assert keys_of(ix.search("words")) == ["a"] and ix.commit_token() == token
    s = ix.session()
    s.update(doc("c", "new words"))
    s.commit(merge=False)
    assert keys_of(ix.search("words")) == ["a", "c"]


def test_a_search_on_a_server_that_is_down_says_so_within_seconds(tmp_path, engine) -> None:
    # a trial: with the server stopped, `ctl search` said "the query took longer than 5 s;
    # narrow it" (the pool waited for a connection for the whole connect timeout)
    import time

    from pg import PgServer

    from indexerd.index.postgresql.engine import READ_CONNECT_SECONDS

    server = PgServer.start()
    try:
        server.wait_ready()
        url = server.create_database("downix")
        settings = parse_config(f'[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "{url}"\n'
                                'schema = "down"\ntimeout = "30s"\n', "<test>").index
        index = open_index(tmp_path, settings)
        try:
            s = index.session()
            s.update(doc("a", "reachable words"))
            s.commit(merge=False)
            assert keys_of(index.search("reachable")) == ["a"]
            server.stop()
            t0 = time.monotonic()
            with pytest.raises(IndexUnavailable, match="the server does not answer .*is it running"):
                index.search("reachable")
            assert time.monotonic() - t0 < READ_CONNECT_SECONDS + 2
        finally:
            index.close()
    finally:
        server.stop()
