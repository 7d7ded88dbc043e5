"""The crawl's pure response handlers (indexerd/sources/web/responses.py): a request, an answer
and a URL's state in, a verdict out -- no server, no store, no threads."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from requests.structures import CaseInsensitiveDict

from indexerd.core.store import DocumentRecord
from indexerd.sources.web.httpresponse import Response
from indexerd.sources.web.frontier import Task
from indexerd.sources.web.responses import (MAX_REDIRECTS, MAX_RETRY_AFTER_ATTEMPTS, conditional_validators,
                                            gone_verdict, head_verdict, instant_refresh, redirect_verdict,
                                            request_method, robots_directives, status_verdict)
from indexerd.sources.web.urlstate import PassState, UrlState

UTC = timezone.utc
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
URL = "http://site.test/a.html"


def task(url: str = URL, **kw) -> Task:
    return Task(url=url, host="http://site.test:80", **kw)


def resp(status: int | None, *, error: str | None = None, location: str | None = None, method: str = "GET",
         **headers: str) -> Response:
    h = CaseInsensitiveDict({k.replace("_", "-"): v for k, v in headers.items()})
    return Response(url=URL, method=method, status=status, headers=h, body=b"", elapsed=0.01, error=error,
                    location=location)


# -- the status policy ----------------------------------------------------------------------

@pytest.mark.parametrize("status, method, action, reason", [
    (200, "GET", "page", ""),
    (204, "GET", "page", ""),
    (200, "HEAD", "head", ""),
    (304, "GET", "not-modified", ""),
    (404, "GET", "gone", "http-404"),
    (410, "HEAD", "gone", "http-410"),
    (500, "GET", "failed", "http-500"),
    (502, "GET", "failed", "http-502"),
    (401, "GET", "refused", "http-401"),
    (403, "GET", "refused", "http-403"),
    (405, "GET", "refused", "http-405"),  # 405 to a GET is no hint to retry
    (451, "GET", "refused", "http-451"),
    (101, "GET", "refused", "http-101"),
    (300, "GET", "refused", "http-300"),  # a 3xx without a usable Location
    (302, "GET", "refused", "http-302"),
])
def test_status_policy(status, method, action, reason):
    v = status_verdict(task(method=method), resp(status, method=method))
    assert (v.action, v.reason, v.retry) == (action, reason, None)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_with_a_location_is_followed(status):
    v = status_verdict(task(), resp(status, location="http://site.test/b.html"))
    assert (v.action, v.reason) == ("redirect", f"redirect-{status}")


@pytest.mark.parametrize("error", ["timeout", "connection", "too-slow", "internal"])
def test_a_transport_error_fails_and_keeps_the_copy(error):
    assert status_verdict(task(), resp(None, error=error)) == status_verdict(task(), resp(None, error=error))
    v = status_verdict(task(), resp(None, error=error))
    assert (v.action, v.reason) == ("failed", error)


def test_a_body_over_max_size_is_a_page_its_handler_skips():
    assert status_verdict(task(), resp(200, error="too-large")).action == "page"


def test_cancelled_and_invalid_urls():
    assert status_verdict(task(), resp(None, error="cancelled")).action == "cancelled"
    assert status_verdict(task(), resp(None, error="invalid-url")).action == "invalid"


@pytest.mark.parametrize("status", [405, 501])
def test_a_head_the_server_does_not_do_is_asked_again_with_get_at_the_front(status):
    t = task(method="HEAD", seq=7)
    v = status_verdict(t, resp(status, method="HEAD"))
    assert v.action == "get"
    assert (v.retry.method, v.retry.front, v.retry.seq, v.retry.attempts) == ("GET", True, 7, 0)


@pytest.mark.parametrize("status", [429, 503])
def test_429_and_503_are_retried_then_fail(status):
    t = task()
    for attempt in range(MAX_RETRY_AFTER_ATTEMPTS - 1):
        v = status_verdict(t, resp(status))
        assert (v.action, v.reason) == ("retry", f"http-{status}")
        assert v.retry.attempts == attempt + 1 and not v.retry.front
        t = v.retry
    v = status_verdict(t, resp(status))
    assert (v.action, v.reason, v.retry) == ("failed", f"http-{status}", None)


# -- 404 counting ---------------------------------------------------------------------------

def test_only_gone_after_404s_in_a_row_confirm_a_deletion():
    st = UrlState(URL)
    first = gone_verdict(st, 2)
    assert (first.gone_count, first.confirmed) == (1, False)
    st.gone_count = first.gone_count
    second = gone_verdict(st, 2)
    assert (second.gone_count, second.confirmed) == (2, True)
    assert gone_verdict(UrlState(URL), 1).confirmed


# -- redirects ------------------------------------------------------------------------------

def test_a_redirect_target_is_canonical():
    v = redirect_verdict(task(), "HTTP://Site.TEST:80/b.html#top", permanent=False)
    assert (v.target, v.failure, v.retire) == ("http://site.test/b.html", None, ())


def test_a_permanent_redirect_retires_the_url_and_the_first_urls_key_but_not_the_target():
    t = task("http://site.test/mid", origin="http://site.test/first", redirects=1)
    v = redirect_verdict(t, "http://site.test/final", permanent=True, origin_key="http://site.test/first")
    assert v.target == "http://site.test/final"
    assert v.retire == ("http://site.test/first", "http://site.test/mid")
    # the first URL already resolved to the target: it is not retired
    v = redirect_verdict(t, "http://site.test/final", permanent=True, origin_key="http://site.test/final")
    assert v.retire == ("http://site.test/mid",)
    # a temporary redirect retires nothing
    assert redirect_verdict(t, "http://site.test/final", permanent=False).retire == ()


def test_redirect_loops_and_hop_limit():
    assert redirect_verdict(task(), URL, permanent=False).failure == "redirect-loop"  # to itself
    t = task("http://site.test/b", origin=URL, redirects=1)
    assert redirect_verdict(t, URL, permanent=True).failure == "redirect-loop"  # back to the first
    ok = task("http://site.test/b", origin=URL, redirects=MAX_REDIRECTS - 1)
    assert redirect_verdict(ok, "http://site.test/c", permanent=False).failure is None
    over = task("http://site.test/b", origin=URL, redirects=MAX_REDIRECTS)
    assert redirect_verdict(over, "http://site.test/c", permanent=False) == \
        redirect_verdict(over, "http://site.test/d", permanent=False)
    assert redirect_verdict(over, "http://site.test/c", permanent=False).failure == "redirect-loop"


@pytest.mark.parametrize("location", ["ftp://site.test/x", "mailto:a@site.test", "http://exa mple..test/"])
def test_a_redirect_to_no_crawlable_url_is_a_bad_redirect(location):
    v = redirect_verdict(task(), location, permanent=True)
    assert (v.target, v.failure) == (None, "bad-redirect")


def test_a_meta_refresh_target_keeps_its_query_in_the_page_encoding():
    v = redirect_verdict(task(), "http://site.test/s?q=é", permanent=True, encoding="iso-8859-1")
    assert v.target == "http://site.test/s?q=%E9"


def test_instant_refresh_header():
    assert instant_refresh(URL, CaseInsensitiveDict({"Refresh": "0; url=/next/"})) == "http://site.test/next/"
    assert instant_refresh(URL, CaseInsensitiveDict({"refresh": "0;URL='b.html'"})) == "http://site.test/b.html"
    assert instant_refresh(URL, CaseInsensitiveDict({"Refresh": "5; url=/later/"})) is None
    assert instant_refresh(URL, CaseInsensitiveDict({"Refresh": "0"})) is None  # a reload, no target
    assert instant_refresh(URL, CaseInsensitiveDict()) is None


# -- HEAD first -----------------------------------------------------------------------------

def test_head_result():
    pdf = head_verdict("http://site.test/a.pdf", CaseInsensitiveDict({"Content-Type": "application/pdf",
                                                                      "Content-Length": "1000"}), 5000)
    assert pdf.skip is None
    zip_ = head_verdict("http://site.test/a.zip", CaseInsensitiveDict({"Content-Type": "application/zip"}), 5000)
    assert (zip_.skip, zip_.detail) == ("unsupported-type", "http://site.test/a.zip: application/zip is not indexed")
    none = head_verdict("http://site.test/a.bin", CaseInsensitiveDict(), 5000)
    assert (none.skip, none.detail) == ("unsupported-type", "http://site.test/a.bin: no Content-Type is not indexed")
    big = head_verdict("http://site.test/a.pdf", CaseInsensitiveDict({"Content-Type": "application/pdf",
                                                                      "Content-Length": "5001"}), 5000)
    assert (big.skip, big.size, big.detail) == ("too-large", 5001, "http://site.test/a.pdf: 5001 bytes > max_size 5000")
    odd = head_verdict("http://site.test/a.pdf", CaseInsensitiveDict({"Content-Type": "application/pdf",
                                                                      "Content-Length": "-1"}), 5000)
    assert odd.skip is None  # a length that is no number is not trusted


@pytest.mark.parametrize("url, etag, lm, method", [
    ("http://site.test/", None, None, "GET"),
    ("http://site.test/a.html", None, None, "GET"),
    ("http://site.test/a.PHP?x=1", None, None, "GET"),
    ("http://site.test/a.pdf", None, None, "HEAD"),
    ("http://site.test/a.pdf", '"e"', None, "GET"),  # a conditional request needs no HEAD first
    ("http://site.test/a.zip", None, "Tue, 01 Dec 2026 10:00:00 GMT", "GET"),
])
def test_request_method(url, etag, lm, method):
    assert request_method(url, etag, lm) == method


# -- noindex / nofollow ---------------------------------------------------------------------

@pytest.mark.parametrize("header, want", [
    (None, set()),
    ("noindex", {"noindex"}),
    ("NoIndex, NoFollow", {"noindex", "nofollow"}),
    ("none", {"none", "noindex", "nofollow"}),
    ("otherbot: noindex, nofollow", set()),
    ("otherbot: noindex, indexerd: nofollow", {"nofollow"}),
    ("indexerd: noindex", {"noindex"}),
    ("unavailable_after: 25 Jun 2010 15:00:00 PST", {"unavailable_after: 25 jun 2010 15:00:00 pst"}),
])
def test_robots_directives(header, want):
    assert robots_directives(header, "indexerd") == want


# -- conditional GET ------------------------------------------------------------------------

def rec(status="indexed", reason=None, etag='"v1"', lm="Tue, 01 Dec 2026 10:00:00 GMT") -> DocumentRecord:
    return DocumentRecord(key=URL, source="w", status=status, reason=reason, etag=etag, last_modified_header=lm)


def validators(st, record, **kw):
    kw.setdefault("forced", False)
    return conditional_validators(st, {URL: record}.get, now=NOW, **kw)


def test_validators_of_an_indexed_page():
    assert validators(UrlState(URL), rec()) == ('"v1"', "Tue, 01 Dec 2026 10:00:00 GMT")


def test_no_validators_forced_unknown_or_after_a_redirect():
    assert validators(UrlState(URL), rec(), forced=True) == (None, None)
    assert validators(UrlState(URL), None) == (None, None)
    assert validators(UrlState(URL, last_outcome="redirect-301"), rec()) == (None, None)
    assert validators(UrlState(URL), rec(etag=None, lm=None)) == (None, None)


def test_validators_of_a_skipped_page_only_for_skips_by_content():
    assert validators(UrlState(URL), rec("skipped", "noindex")) == ('"v1"', "Tue, 01 Dec 2026 10:00:00 GMT")
    assert validators(UrlState(URL), rec("skipped", "too-large")) == (None, None)
    assert validators(UrlState(URL), rec("error", "http-500")) == (None, None)


def test_no_validators_when_the_mirror_lost_the_file():
    assert validators(UrlState(URL), rec(), mirror_has=lambda url: False) == (None, None)
    assert validators(UrlState(URL), rec(), mirror_has=lambda url: True)[0] == '"v1"'


@pytest.mark.parametrize("lm", ["Thu, 01 Jan 1970 00:00:00 GMT", "Fri, 01 Dec 2036 10:00:00 GMT"])
def test_an_implausible_last_modified_is_not_sent(lm):
    assert validators(UrlState(URL), rec(lm=lm)) == ('"v1"', None)


# -- the typed URL state --------------------------------------------------------------------

def test_url_state_round_trips_through_a_store_row():
    st = UrlState(URL, pass_id=3, state="done", hops=2, via="sitemap", doc_key="http://site.test/b",
                  last_status=200, checked_at=NOW, due_at=NOW, recrawl_seconds=3600.0)
    row = st.as_row()
    assert row["checked_at"] == "2026-12-01T12:00:00.000000Z"
    assert UrlState.from_row(row) == st
    assert st.key == "http://site.test/b" and UrlState(URL).key == URL


def test_pass_state_json():
    assert PassState.from_json(None) == PassState()
    p = PassState(id=4, running=True, started=NOW, forced=True)
    assert PassState.from_json(p.to_json()) == p
    assert PassState.from_json('{"id": 2, "state": "finished"}') == PassState(id=2)
