"""Queries are bounded in time and in results, whoever asks (indexerd/daemon/queries.py), and
the search page says so: a real :class:`QueryRunner` (its thread pool) over an index whose
search takes as long as the test says, and the real WSGI application driven by werkzeug's
test client.
"""

from __future__ import annotations

import threading
import time

import pytest
from werkzeug.test import Client

from indexerd.core.errors import ConfigError, QueryError
from indexerd.daemon.http.app import SearchApp
from indexerd.daemon.http.auth import TokenCheck
from indexerd.daemon.queries import MAX_PAGE_SIZE, MAX_RESULTS, QueryRunner, QueryTimeout, SearchRequest
from runnerbackend import Backend


class SlowIndex:
    """An index protocol object (``search``, ``count``) whose search waits ``seconds`` or until
    :attr:`release` is set, and finds nothing."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.release = threading.Event()
        self.searches = 0

    def search(self, query, **kw):
        self.searches += 1
        self.release.wait(self.seconds)
        return []

    def count(self, query, **kw):
        return 0

    def similar_terms(self, token, **kw):  # "did you mean" on 0 hits: nothing near
        return []


@pytest.fixture
def slow():
    ix = SlowIndex(30.0)
    runner = QueryRunner(lambda: ix, timeout_seconds=0.3, workers=2)
    yield ix, runner
    ix.release.set()
    runner.close()


@pytest.mark.alone  # a wall-clock bound (0.25-1.5 s)
def test_a_query_over_its_time_bound_is_cut_and_so_are_callers_that_find_no_free_worker(slow):
    ix, runner = slow
    started = time.monotonic()
    with pytest.raises(QueryTimeout, match="longer than 0.3 s"):
        runner.run(SearchRequest("bird"))
    assert 0.25 < time.monotonic() - started < 1.5
    with pytest.raises(QueryTimeout):
        runner.run(SearchRequest("bird"))
    # both workers are held by the runaway queries: the next caller waits its bound, no longer
    started = time.monotonic()
    with pytest.raises(QueryTimeout, match="no query worker was free"):
        runner.run(SearchRequest("bird"))
    assert time.monotonic() - started < 1.5 and ix.searches == 2
    ix.release.set()                     # they end: the workers serve again
    time.sleep(0.1)
    ix.release.clear()
    ix.seconds = 0.0
    assert runner.run(SearchRequest("bird")).hits == []


def test_a_malformed_query_is_refused_at_once_while_every_worker_is_busy(slow):
    """A new user's trial: with the query worker held by a heavy query, a malformed query (41
    nested parentheses) waited its whole bound and failed "no query worker was free" (exit 1)
    instead of being refused at once as malformed (exit 2), as it is when a worker is free."""
    ix, runner = slow
    for _ in range(2):  # both workers held by runaway queries
        with pytest.raises(QueryTimeout):
            runner.run(SearchRequest("bird"))
    for query in ("(" * 41 + "bird" + ")" * 41, "bird AND", '"bird'):
        with pytest.raises(QueryError):
            runner.run(SearchRequest(query))
    assert ix.searches == 2


def test_results_are_bounded_in_page_size_and_depth(slow):
    ix, runner = slow
    ix.seconds = 0.0
    for req, words in ((SearchRequest("bird", limit=MAX_PAGE_SIZE + 1), "limit must be at most"),
                       (SearchRequest("bird", offset=MAX_RESULTS - 5, limit=10), "offset \\+ limit"),
                       (SearchRequest("bird", limit=0), "limit must be 1 or more")):
        with pytest.raises(ConfigError, match=words):
            runner.run(req)
    assert ix.searches == 0
    assert runner.run(SearchRequest("bird", offset=MAX_RESULTS - 10, limit=10)).hits == []


@pytest.mark.alone  # a wall-clock bound (1.5 s)
def test_the_page_says_a_query_took_too_long_and_refuses_pages_past_the_bound(slow):
    ix, runner = slow
    client = Client(SearchApp(Backend(runner), TokenCheck(None)))
    started = time.monotonic()
    r = client.get("/?q=bird")
    assert r.status_code == 503 and time.monotonic() - started < 1.5
    assert "took longer than 0.3 s" in r.get_data(as_text=True)
    r = client.get("/api/search?q=bird")
    assert r.status_code == 503 and "longer than" in r.get_json()["error"]
    ix.release.set()
    time.sleep(0.1)
    ix.seconds = 0.0
    r = client.get(f"/?q=bird&page={MAX_RESULTS // 10 + 1}")
    assert r.status_code == 400 and f"page {MAX_RESULTS // 10 + 1} is past the last page ({MAX_RESULTS // 10})" \
        in r.get_data(as_text=True)
    r = client.get("/api/search?q=bird&limit=100000")
    assert r.status_code == 400 and "bounded" in r.get_json()["error"]
