"""The tantivy engine alone: sessions (last write of a key wins, delete, commit visibility,
cancel), the writer lock across processes, a kill -9 in the middle of a batch, the commit token,
and search with its filters, sort and snippets.  Real tantivy indexes in temp dirs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import pytest

from indexerd.core.errors import IndexUnavailable, QueryError, RetryLater
from indexerd.index import IndexDoc
from indexerd.index.tantivy import ENGINE

UTC = timezone.utc
REPO = Path(__file__).resolve().parent.parent


def doc(key: str, content: str, *, title: str = "", when: datetime = datetime(2024, 1, 5, tzinfo=UTC),
        size: int = 100, source: str = "docs", path: str | None = None, media_type: str = "text/plain",
        snippet_text: str | None = None) -> IndexDoc:
    return IndexDoc(key=key, source=source, url=key, path=path, title=title, content=content,
                    last_modified=when, date_source="mtime", media_type=media_type, size=size,
                    snippet_text=snippet_text)


def keys(hits) -> list[str]:
    return [h.key for h in hits]


@pytest.fixture
def ix(tmp_path: Path):
    index = ENGINE.open(tmp_path / "index", None, create=True)
    yield index
    index.close()


def test_the_last_update_of_a_key_in_one_batch_wins(ix) -> None:
    s = ix.session()
    s.update(doc("k", "first falcon"))
    s.update(doc("k", "second heron"))
    s.update(doc("other", "falcon"))
    s.commit(merge=False)
    assert ix.count() == 2
    assert keys(ix.search("heron")) == ["k"]
    assert keys(ix.search("falcon")) == ["other"]
    s = ix.session()  # and over a committed copy, twice again
    s.update(doc("k", "third ibis"))
    s.update(doc("k", "fourth jay"))
    s.commit(merge=True)
    assert ix.count() == 2
    assert keys(ix.search("jay")) == ["k"]
    assert ix.search("heron") == [] and ix.search("ibis") == []


def test_delete_reaches_committed_and_uncommitted_documents(ix) -> None:
    s = ix.session()
    s.update(doc("a", "alpha"))
    s.update(doc("b", "beta"))
    s.commit(merge=False)
    s = ix.session()
    s.update(doc("c", "gamma"))
    s.delete("c")  # added in this batch
    s.delete_many(["a", "nothing-here"])
    s.update(doc("b", "beta again"))
    s.delete("b")  # the last write of b is a delete
    s.commit(merge=False)
    assert ix.count() == 0
    s = ix.session()
    s.delete("z")
    s.update(doc("z", "zeta"))  # a delete before the add leaves the add
    s.commit(merge=False)
    assert keys(ix.search("zeta")) == ["z"]
    assert sorted(ix.keys()) == [("z", "docs")]


def test_nothing_is_visible_before_commit_and_cancel_drops_the_batch(ix, tmp_path: Path) -> None:
    s = ix.session()
    s.update(doc("a", "alpha"))
    assert ix.search("alpha") == [] and ix.count() == 0
    other = ENGINE.open(tmp_path / "index", None, create=False)  # another reader, same process
    s.commit(merge=False)
    assert keys(ix.search("alpha")) == ["a"]
    assert keys(other.search("alpha")) == ["a"]  # a reader opened before sees the commit
    s = ix.session()
    s.update(doc("b", "beta"))
    s.delete("a")
    s.cancel()
    assert ix.search("beta") == [] and keys(ix.search("alpha")) == ["a"]
    s = ix.session()  # the writer was released
    s.commit(merge=False)
    other.close()


def test_commit_token_is_the_opstamp_and_changes_with_every_commit(ix, tmp_path: Path) -> None:
    before = ix.commit_token()
    assert ENGINE.on_disk_token(tmp_path / "index") == before
    s = ix.session()
    s.update(doc("a", "alpha"))
    token = s.commit(merge=False)
    meta = json.loads((tmp_path / "index" / "meta.json").read_text())
    assert token == str(meta["opstamp"]) == ix.commit_token() == ENGINE.on_disk_token(tmp_path / "index")
    assert int(token) > int(before)
    assert ix.session().commit(merge=True) == token  # nothing changed: the same token
    s = ix.session()
    s.delete("a")
    assert int(s.commit(merge=False)) > int(token)
    assert ENGINE.on_disk_token(tmp_path / "nothing") is None
    assert ENGINE.holds_index(tmp_path / "index") and not ENGINE.holds_index(tmp_path)


def _child(script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *args], cwd=REPO,
                            stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))


_WRITE_AND_WAIT = """
    import sys
    from datetime import datetime, timezone
    from indexerd.index import IndexDoc
    from indexerd.index.tantivy import ENGINE
    ix = ENGINE.open(sys.argv[1], None, create=False)
    s = ix.session()
    for n in range(200):
        s.update(IndexDoc(key=f"u{n}", source="docs", url=f"u{n}", path=None, title="", content="uncommitted",
                          last_modified=datetime(2024, 1, 1, tzinfo=timezone.utc), date_source="mtime",
                          media_type="text/plain", size=1))
    s.delete("a")
    print("ready", flush=True)
    __import__("time").sleep(60)
"""


def test_writer_lock_is_across_processes_and_a_kill_keeps_the_last_commit(ix, tmp_path: Path) -> None:
    s = ix.session()
    s.update(doc("a", "alpha"))
    token = s.commit(merge=False)
    child = _child(_WRITE_AND_WAIT, str(tmp_path / "index"))
    try:
        assert child.stdout.readline().strip() == "ready"
        with pytest.raises(RetryLater, match="lock"):
            ix.session(timeout_seconds=0.3)
        os.kill(child.pid, signal.SIGKILL)  # mid-batch: 200 documents and a delete uncommitted
    finally:
        child.kill()
        child.wait(10)
    reopened = ENGINE.open(tmp_path / "index", None, create=False)
    assert reopened.commit_token() == token
    assert sorted(reopened.keys()) == [("a", "docs")]
    assert reopened.search("uncommitted") == []
    s = reopened.session(timeout_seconds=2.0)  # the kernel dropped the dead writer's lock
    s.update(doc("b", "beta"))
    s.commit(merge=True)
    assert reopened.count() == 2
    reopened.close()


def test_open_without_an_index_and_on_damage(tmp_path: Path) -> None:
    with pytest.raises(IndexUnavailable, match="no index yet"):
        ENGINE.open(tmp_path / "index", None, create=False)
    ix = ENGINE.open(tmp_path / "index", None, create=True)
    s = ix.session()
    s.update(doc("a", "alpha"))
    s.commit(merge=False)
    ix.close()
    (tmp_path / "index" / "meta.json").write_text("{ not json")
    with pytest.raises(IndexUnavailable, match="rebuild"):
        ENGINE.open(tmp_path / "index", None, create=True)


@pytest.fixture
def corpus(ix):
    s = ix.session()
    s.update(doc("file:///notes/falcon.txt", "The peregrine falcon hunts over the river. Falcons dive fast.",
                 title="Falcon notes", when=datetime(2024, 3, 5, 10, 0, tzinfo=UTC), size=150_000,
                 path="/notes/falcon.txt"))
    s.update(doc("file:///notes/pg.txt", "Edit pg_hba.conf, then reload; see www.example.com for v1.2.3.",
                 title="Postgres access", when=datetime(2023, 12, 31, 23, 0, tzinfo=UTC), size=2_000,
                 path="/notes/\udcffpg.txt"))
    s.update(doc("https://example.com/tokyo", "東京都に住んでいます。 The café is in Shibuya, near falcon street.",
                 title="Tokyo", when=datetime(2022, 6, 1, tzinfo=UTC), size=50, source="web",
                 media_type="text/html", snippet_text="東京都に住んでいます。 The café is in Shibuya."))
    s.commit(merge=False)
    return ix


def test_search_words_phrases_identifiers_cjk_and_folding(corpus) -> None:
    assert keys(corpus.search("falcon"))[0] == "file:///notes/falcon.txt"  # the title counts more
    assert set(keys(corpus.search("falcon"))) == {"file:///notes/falcon.txt", "https://example.com/tokyo"}
    assert keys(corpus.search('"peregrine falcon"')) == ["file:///notes/falcon.txt"]
    assert keys(corpus.search('"falcon peregrine"')) == []
    for q in ("pg_hba", "pg_hba.conf", "hba", "www.example.com", "example", "v1.2.3"):
        assert keys(corpus.search(q)) == ["file:///notes/pg.txt"], q
    assert keys(corpus.search("京都")) == ["https://example.com/tokyo"]
    assert keys(corpus.search('"東京都"')) == ["https://example.com/tokyo"]
    assert keys(corpus.search("cafe")) == ["https://example.com/tokyo"]
    assert keys(corpus.search("cafe\u0301")) == ["https://example.com/tokyo"]  # typed decomposed
    assert keys(corpus.search("dive")) == ["file:///notes/falcon.txt"]  # stemmed: "dive" and "dives"
    assert keys(corpus.search("pereg*")) == ["file:///notes/falcon.txt"]
    assert keys(corpus.search("pg_hb*")) == ["file:///notes/pg.txt"]
    assert corpus.search("the") == []  # only a stop word: finds nothing


def test_search_operators_fields_and_ranges(corpus) -> None:
    all_keys = {"file:///notes/falcon.txt", "file:///notes/pg.txt", "https://example.com/tokyo"}
    assert keys(corpus.search("falcon -cafe")) == ["file:///notes/falcon.txt"]
    assert keys(corpus.search("falcon AND NOT river")) == ["https://example.com/tokyo"]
    assert set(keys(corpus.search("-falcon"))) == {"file:///notes/pg.txt"}
    assert set(keys(corpus.search("reload OR shibuya"))) == {"file:///notes/pg.txt", "https://example.com/tokyo"}
    assert keys(corpus.search("title:falcon")) == ["file:///notes/falcon.txt"]
    assert keys(corpus.search("content:postgres")) == []
    assert keys(corpus.search("source:web")) == ["https://example.com/tokyo"]
    assert keys(corpus.search("media_type:text/html")) == ["https://example.com/tokyo"]
    assert keys(corpus.search("url:https://example.com/*")) == ["https://example.com/tokyo"]
    assert keys(corpus.search("size:>100k")) == ["file:///notes/falcon.txt"]
    assert set(keys(corpus.search("size:[50 TO 2000]"))) == {"file:///notes/pg.txt", "https://example.com/tokyo"}
    assert keys(corpus.search("last_modified:2024")) == ["file:///notes/falcon.txt"]
    assert keys(corpus.search("last_modified:2023-12")) == ["file:///notes/pg.txt"]
    assert set(keys(corpus.search("last_modified:2022..2023"))) == {"file:///notes/pg.txt", "https://example.com/tokyo"}
    assert set(keys(corpus.search("last_modified:>=2023-12-31T23:00 OR size:<100"))) == all_keys
    assert corpus.count() == 3 and corpus.count("falcon") == 2 and corpus.count("size:<100") == 1
    with pytest.raises(QueryError, match="unbalanced"):
        corpus.search('"falcon')
    with pytest.raises(QueryError, match="stored but not searchable"):
        corpus.search("path:x")


def test_since_until_sort_and_hit_fields(corpus) -> None:
    since = datetime(2023, 12, 31, 23, 0, tzinfo=UTC)
    assert set(keys(corpus.search("falcon OR reload", since=since))) == {"file:///notes/falcon.txt",
                                                                         "file:///notes/pg.txt"}
    assert keys(corpus.search("falcon OR reload", until=since)) == ["https://example.com/tokyo"]
    assert keys(corpus.search("falcon OR reload", since=since, until=datetime(2024, 1, 1, tzinfo=UTC))) == [
        "file:///notes/pg.txt"]
    assert keys(corpus.search("falcon OR reload OR shibuya", sort="date")) == [
        "file:///notes/falcon.txt", "file:///notes/pg.txt", "https://example.com/tokyo"]
    assert len(corpus.search("falcon OR reload OR shibuya", limit=1)) == 1
    assert corpus.search("falcon", limit=0) == []
    (pg,) = corpus.search("pg_hba")
    assert pg.rank == 1 and pg.url == pg.key == "file:///notes/pg.txt"
    assert pg.path == "/notes/\udcffpg.txt"  # a file name that is not UTF-8 comes back as it went in
    assert pg.title == "Postgres access" and pg.source == "docs" and pg.media_type == "text/plain"
    assert pg.last_modified == datetime(2023, 12, 31, 23, 0, tzinfo=UTC) and pg.date_source == "mtime"
    assert pg.score > 0
    (tokyo,) = corpus.search("shibuya")
    assert tokyo.path is None
    assert "Shibuya" in tokyo.snippet and "falcon street" not in tokyo.snippet  # cut from snippet_text


def test_snippets_window_the_matched_words(ix) -> None:
    filler = " ".join(f"filler{n}" for n in range(300))
    s = ix.session()
    s.update(doc("long", f"{filler} the zeppelin landed {filler}"))
    s.commit(merge=False)
    (hit,) = ix.search("zeppelin", snippet_chars=120)
    assert "zeppelin landed" in hit.snippet
    assert len(hit.snippet) < 200
    assert not hit.snippet.startswith("filler0 ")


def test_status_size_and_maintenance(corpus, tmp_path: Path) -> None:
    st = corpus.status()
    assert st["engine"] == "tantivy" and st["documents"] == 3 and st["segments"] >= 1
    assert st["size_bytes"] == corpus.size_bytes() > 0
    assert corpus.maintenance_delay(100) is None
    corpus.maintain()
    assert corpus.count() == 3


def _worker() -> subprocess.Popen:
    # SIGINT as a shell gives it: an xdist worker runs with SIGINT ignored, which its children
    # would inherit (Python keeps an inherited SIG_IGN), and Ctrl-C would never reach the worker
    return subprocess.Popen([sys.executable, "-m", "indexerd.index.tantivy.offload", "fold"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def test_the_analysis_worker_of_a_killed_indexerd_exits_without_a_traceback() -> None:
    """Its stderr is indexerd's log: a daemon killed with a batch in the worker left a
    BrokenPipeError traceback there (tests/test_faults.py's kill -9 burst on tantivy)."""
    import pickle
    import struct

    p = _worker()
    body = pickle.dumps([("title", "some words " * 2000, "")])
    p.stdout.close()                                     # the reader is gone before the answer
    p.stdin.write(struct.pack("!I", len(body)) + body)
    p.stdin.close()
    err = p.stderr.read().decode()
    assert p.wait(60) == 1 and "Traceback" not in err, err


def test_the_analysis_worker_goes_on_through_ctrl_c_until_its_stdin_ends() -> None:
    """Ctrl-C reaches the process group; indexerd, interrupted, commits what it read and needs
    the worker's answers for that (a worker that ended made indexerd analyse a big document a
    second time and log a worker failure: found by a new-user trial)."""
    import pickle
    import struct

    p = _worker()
    body = pickle.dumps([("title", "some words", "")])

    def ask() -> bytes:
        p.stdin.write(struct.pack("!I", len(body)) + body)
        p.stdin.flush()
        (n,) = struct.unpack("!I", p.stdout.read(4))
        return p.stdout.read(n)

    first = ask()  # answered: it is imported and waiting on its stdin
    p.send_signal(signal.SIGINT)                         # Ctrl-C reaches the process group
    assert ask() == first                                # still answering
    p.stdin.close()
    assert p.wait(60) == 0
    err = p.stderr.read()
    p.stdout.close()
    assert "Traceback" not in err.decode(), err



_FREED_INSIDE_THE_HEAP = textwrap.dedent("""
    from indexerd.index.heap import release_free_heap

    def anon_kb():
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                return int(line.split()[1])

    blocks = [bytes([i % 251]) * 100_000 for i in range(800)]  # under malloc's mmap threshold
    pin = bytes(100_000)  # above them: the heap's top stays in use, so free() alone trims nothing
    del blocks
    before = anon_kb()
    released = release_free_heap()
    print(before, anon_kb(), released)
""")


@pytest.mark.skipif(not Path("/proc/self/status").exists() or os.uname().sysname != "Linux",
                    reason="glibc's heap, RssAnon from /proc")
def test_free_memory_inside_the_heap_goes_back_to_the_kernel(tmp_path: Path) -> None:
    # what a tantivy session's end does (index/heap.py): 80 MB freed below a block still in use
    p = subprocess.run([sys.executable, "-c", _FREED_INSIDE_THE_HEAP], cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    before, after, released = p.stdout.split()
    assert released == "True"
    assert int(before) - int(after) > 60 * 1024, p.stdout


def test_a_session_is_full_once_its_documents_fill_half_the_writer_memory(ix, tmp_path: Path) -> None:
    """Issue 31: tantivy queues up to 10,000 documents for its indexing thread outside
    ``writer_memory`` (150-250 MB of a first index of 50,000 files); a session says it is full
    once the documents it handed tantivy hold half the budget, and the bulk writer commits there
    instead of at ``bulk_commit_batch`` documents, every document indexed once."""
    from indexerd.core.store import DocumentRecord
    from indexerd.pipeline.writer import IndexWriter

    assert ix.queue_budget_bytes == ix.writer_memory_bytes // 2 == 32 * 1024 * 1024
    ix.queue_budget_bytes = 40_000
    s = ix.session()
    n = 0
    while not s.full() and n < 300:   # ~10 KB each once analysed, handed over a batch at a time
        s.update(doc(f"k{n}", "word " * 2000))
        n += 1
    assert s.full() and n < 150, n
    s.commit(merge=False)
    w = IndexWriter(ix, tmp_path / "state.sqlite3", live=False, commit_batch=1000)
    try:
        for i in range(300):
            d = doc(f"w{i}", f"unique{i} " + "word " * 2000)
            w.submit_index(d, DocumentRecord(key=d.key, source="docs"))
        assert w.flush(timeout=60)
        assert w.stats.commits >= 3, w.stats.commits      # not one: bulk_commit_batch is 1,000
    finally:
        w.close()
    assert ix.count("word") == n + 300 and ix.count("unique7") == 1
