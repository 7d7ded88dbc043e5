"""What a search computes follows what its caller asked for (indexerd/daemon/queries.py): facets
are counted for the search page and ``/api/search``, not for ``ctl search``, which prints none.

A stand-in index (the protocol's ``search``, ``count``, ``facets``) counts its calls; the real
:class:`QueryRunner`, the real ``ctl search`` handler of the control socket and the real WSGI
application (werkzeug's test client) drive it.
"""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
from werkzeug.test import Client

from indexerd.core.errors import ConfigError
from indexerd.daemon.coverage import Coverage
from indexerd.daemon.http.app import SearchApp
from indexerd.daemon.http.auth import TokenCheck
from indexerd.daemon.queries import QueryRunner, SearchRequest
from indexerd.daemon.reads import HANDLERS
from indexerd.index.base import Hit
from runnerbackend import Backend

UTC = timezone.utc


class CountingIndex:
    """Three hits for any query; counts the calls of ``search``, ``count`` and ``facets``."""

    def __init__(self) -> None:
        self.calls = {"search": 0, "count": 0, "facets": 0}

    def search(self, query, *, limit=10, **kw):
        self.calls["search"] += 1
        return [Hit(rank=i, key=f"file:///d/{i}.txt", url=f"file:///d/{i}.txt", path=f"/d/{i}.txt",
                    source="notes", title=f"t{i}", last_modified=datetime(2024, 1, i, tzinfo=UTC),
                    date_source="mtime", media_type="text/plain", score=1.0 / i, snippet="a bird")
                for i in range(1, 4)][:limit]

    def count(self, query=None, **kw):
        self.calls["count"] += 1
        return 3

    def facets(self, query=None, **kw):
        self.calls["facets"] += 1
        return {"media_type": [("text/plain", 3)], "source": [("notes", 3)]}


@pytest.fixture
def ix_runner():
    ix = CountingIndex()
    runner = QueryRunner(lambda: ix, timeout_seconds=10.0, workers=1)
    yield ix, runner
    runner.close()


def _ctl_search(runner, **fields) -> dict:
    daemon = SimpleNamespace(queries=runner, coverage=SimpleNamespace(current=Coverage),
                             indexer=SimpleNamespace(state=SimpleNamespace(path="/nonexistent/state")))
    return HANDLERS["search"](daemon, {"cmd": "search", "query": "bird", "limit": 10, **fields})


def test_ctl_search_through_the_daemon_counts_no_facets(ix_runner) -> None:
    ix, runner = ix_runner
    reply = _ctl_search(runner)
    assert [h["key"] for h in reply["hits"]] == [f"file:///d/{i}.txt" for i in (1, 2, 3)]
    assert "facets" not in reply
    assert ix.calls == {"search": 1, "count": 0, "facets": 0}
    # the fast path's request (rendered text) asks for no facets either
    rendered = _ctl_search(runner, render={"tty": False, "json": False})
    assert "rendered" in rendered and ix.calls["facets"] == 0


def test_a_ctl_request_that_asks_for_facets_gets_them_and_no_rendered_text(ix_runner) -> None:
    ix, runner = ix_runner
    reply = _ctl_search(runner, facets=True, render={"tty": False, "json": False})
    assert reply["facets"] == {"media_type": [{"value": "text/plain", "count": 3}],
                               "source": [{"value": "notes", "count": 3}]}
    assert "rendered" not in reply and ix.calls["facets"] == 1
    with pytest.raises(ConfigError, match="facets must be true or false"):
        _ctl_search(runner, facets="yes")


def test_the_page_and_the_api_ask_for_facets(ix_runner) -> None:
    ix, runner = ix_runner
    client = Client(SearchApp(Backend(runner), TokenCheck(None)))
    r = client.get("/api/search?q=bird")
    assert r.status_code == 200
    assert r.json["facets"]["source"] == [{"value": "notes", "count": 3}]
    assert ix.calls["facets"] == 1
    r = client.get("/?q=bird")
    assert r.status_code == 200 and ix.calls["facets"] == 2


def test_a_request_counts_facets_only_when_it_asks(ix_runner) -> None:
    ix, runner = ix_runner
    assert runner.run(SearchRequest("bird")).facets is None
    assert ix.calls["facets"] == 0 and ix.calls["count"] == 1     # the total is still counted
    asked = runner.run(SearchRequest("bird", facets=True)).facets
    assert asked == {"media_type": [("text/plain", 3)], "source": [("notes", 3)]}
    assert ix.calls["facets"] == 1


class TogetherIndex(CountingIndex):
    """An engine that counts and facets a query in one evaluation (Whoosh's ``count_and_facets``)."""

    def count_and_facets(self, query, **kw):
        self.calls["together"] = self.calls.get("together", 0) + 1
        return 5, {"media_type": [("text/plain", 5)], "source": [("notes", 5)]}


def test_an_engine_that_counts_and_facets_together_is_asked_once() -> None:
    ix = TogetherIndex()
    runner = QueryRunner(lambda: ix, timeout_seconds=10.0, workers=1)
    try:
        result = runner.run(SearchRequest("bird", facets=True))
        assert (result.total, result.facets["source"]) == (5, [("notes", 5)])
        assert ix.calls == {"search": 1, "count": 0, "facets": 0, "together": 1}
        assert runner.run(SearchRequest("bird")).total == 3     # no facets asked: the count alone
        assert ix.calls["together"] == 1 and ix.calls["count"] == 1
    finally:
        runner.close()


def test_shown_keys_are_the_firsts_of_identical_documents_on_the_page() -> None:
    from indexerd.daemon.collapse import shown_keys

    keys = ["a", "b", "c", "d", "e", "f"]
    hashes = {"a": "1", "b": "1", "c": "2", "d": "1", "f": "3"}     # e: no known hash
    assert shown_keys(keys, hashes, 0, 10) == {"a", "c", "e", "f"}
    assert shown_keys(keys, hashes, 1, 3) == {"c", "e"}
    assert shown_keys([], hashes, 0, 10) == set()


def test_a_collapsed_page_makes_snippets_only_for_the_hits_it_shows(tmp_path, monkeypatch) -> None:
    """With collapsing on, a page of 10 read 20 hits and made 20 snippets: it makes 10, on a
    real Whoosh index of 20 documents in pairs of identical copies."""
    from indexerd.daemon.queries import search_any_engine
    from indexerd.index import IndexDoc
    from indexerd.index.whoosh import searching
    from indexerd.index.whoosh.engine import WhooshIndex

    ix = WhooshIndex.open(tmp_path / "ix", create=True)
    s = ix.session()
    for i in range(20):
        s.update(IndexDoc(key=f"k{i}", source="notes", url=f"k{i}", path=None, title=f"pair {i // 2}",
                          content=f"bird number {i // 2} " + "bird " * (i // 2), media_type="text/plain",
                          last_modified=datetime(2024, 1, 1, tzinfo=UTC), date_source="mtime", size=10))
    s.commit(merge=False)
    made: list[str] = []
    real = searching.make_snippet

    def counting(text, query, chars, **kw):
        made.append(kw.get("title", ""))
        return real(text, query, chars, **kw)

    monkeypatch.setattr(searching, "make_snippet", counting)
    try:
        def pairs(keys):
            return {k: str(int(k[1:]) // 2) for k in keys}

        result = search_any_engine(ix, SearchRequest("bird", limit=5, facets=True), hashes=pairs)
        assert len(result.hits) == 5 and all(len(h.also_at) == 1 and h.snippet for h in result.hits)
        assert len(made) == 5 and sorted(made) == sorted(h.title for h in result.hits)
        # the facets count each pair once among the hits read, as the total does
        assert result.facets == {"media_type": [("text/plain", result.total)], "source": [("notes", result.total)]}
        made.clear()
        page2 = search_any_engine(ix, SearchRequest("bird", offset=5, limit=5), hashes=pairs)
        assert len(page2.hits) == 5 and len(made) == 5
        assert not {h.key for h in page2.hits} & {h.key for h in result.hits}
    finally:
        ix.close()


def test_folded_hits_are_taken_off_the_facets() -> None:
    from indexerd.daemon.collapse import folded_facets

    facets = {"media_type": [("text/plain", 3), ("text/html", 2)], "source": [("a", 3), ("b", 2)]}
    folded = [SimpleNamespace(media_type="text/plain", source="a"), SimpleNamespace(media_type="text/plain", source="b"),
              SimpleNamespace(media_type="text/plain", source="b")]
    assert folded_facets(facets, folded) == {"media_type": [("text/html", 2)], "source": [("a", 2)]}
    assert folded_facets(facets, []) is facets
