"""HTML-level redirects (``<meta http-equiv=refresh>``) and leap-second dates, end to end on the
real crawler and the loopback site (tests/httpsite.py)."""

from __future__ import annotations

import pytest
from httpsite import site as site_fixture
from test_web import Crawl, html, requests_per_path

site = site_fixture


def stub(content: str, attr_quote: str = '"') -> bytes:
    q = attr_quote
    return (f"<!DOCTYPE html><html><head><meta http-equiv={q}refresh{q} content={q}{content}{q}>"
            f"</head><body></body></html>").encode()


VARIANTS = [
    ("0; url=/docs/", '"'),
    ("0;URL=/docs/", "'"),
    ("0;url=/docs/", ""),
    ("0; /docs/", '"'),
    ("5; url=/docs/", '"'),
    ("0; url='/docs/'", '"'),
    ('0; url="/docs/"', "'"),
    ("  2 , URL = /docs/", '"'),
]


@pytest.mark.parametrize("content, quote", VARIANTS)
def test_refresh_stub_is_followed_like_a_redirect(tmp_path, site, content, quote) -> None:
    site.static("/", html("Home", "start", ["/old/"]))
    site.add("/old/", body=stub(content, quote), headers={"Content-Type": "text/html"})
    site.static("/docs/", html("Docs", "aardvark documentation"))
    crawl = Crawl(tmp_path, site, max_hops=1)
    s = crawl.run()
    assert requests_per_path(site).get("/docs/") == 1
    docs = crawl.docs()
    assert site.url("/old/") not in docs  # the stub is no document of its own
    assert docs[site.url("/docs/")]["status"] == "indexed"
    assert crawl.search("aardvark") == [site.url("/docs/")]
    assert (s["indexed"], s["skipped"], s["errors"]) == (2, 0, 0), s
    assert crawl.counters.get("web.redirect.meta-refresh") == 1
    row = crawl.crawl_rows()[site.url("/docs/")]
    assert (row["via"], row["origin"], row["hops"]) == ("redirect", site.url("/old/"), 1)


def test_refresh_target_obeys_scope_robots_and_hop_limits(tmp_path, site) -> None:
    site.add("/robots.txt", body=b"User-agent: *\nDisallow: /private/\n", headers={"Content-Type": "text/plain"})
    site.static("/", html("Home", "start", ["/off", "/priv", "/loop1", "/excluded"]))
    site.add("/off", body=stub("0; url=http://elsewhere.test/x"), headers={"Content-Type": "text/html"})
    site.add("/priv", body=stub("0; url=/private/p.html"), headers={"Content-Type": "text/html"})
    site.static("/private/p.html", html("Private", "secret"))
    site.add("/loop1", body=stub("0; url=/loop2"), headers={"Content-Type": "text/html"})
    site.add("/loop2", body=stub("0; url=/loop1"), headers={"Content-Type": "text/html"})
    site.add("/excluded", body=stub("0; url=/skip/me.html"), headers={"Content-Type": "text/html"})
    site.static("/skip/me.html", html("Skip", "excludedword"))
    crawl = Crawl(tmp_path, site, exclude=["/skip/"])
    s = crawl.run()
    per = requests_per_path(site)
    assert "/private/p.html" not in per and "/skip/me.html" not in per
    assert (per["/loop1"], per["/loop2"]) == (1, 1)
    assert set(crawl.docs()) == {site.url("/")}
    assert crawl.counters.get("web.drop.redirect-off-site") == 1
    assert crawl.counters.get("web.drop.redirect-exclude") == 1
    assert crawl.counters.get("web.drop.robots") == 1
    assert crawl.counters.get("error.redirect-loop") == 1 and s["errors"] == 1


def test_refresh_chain_longer_than_the_redirect_limit_ends(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/hop/0"]))
    for i in range(15):  # MAX_REDIRECTS is 10, HTTP and HTML redirects together
        target = f"/hop/{i + 1}"
        if i % 2:
            site.redirect(f"/hop/{i}", target, 302)
        else:
            site.add(f"/hop/{i}", body=stub(f"0; url={target}"), headers={"Content-Type": "text/html"})
    site.static("/hop/15", html("End", "endword"))
    crawl = Crawl(tmp_path, site)
    s = crawl.run()
    per = requests_per_path(site)
    assert "/hop/15" not in per and "/hop/12" not in per
    assert crawl.counters.get("error.redirect-loop") == 1 and s["errors"] == 1


def test_page_with_text_and_slow_refresh_stays_a_document(tmp_path, site) -> None:
    page = html("News", "zebra news of the day", head='<meta http-equiv="refresh" content="300; url=/next/">')
    site.static("/", page)
    site.static("/next/", html("Next", "okapi next page"))
    crawl = Crawl(tmp_path, site)
    s = crawl.run()
    assert crawl.search("zebra") == [site.url("/")]
    assert crawl.search("okapi") == [site.url("/next/")]
    row = crawl.crawl_rows()[site.url("/next/")]
    assert (row["via"], row["hops"]) == ("link", 1)
    assert s["indexed"] == 2


def test_page_turned_into_a_stub_leaves_the_index_and_stub_is_fetched_whole(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/moving.html"]))
    site.static("/moving.html", html("Moving", "narwhal content"), last_modified="Sat, 08 Sep 2001 21:46:40 GMT")
    crawl = Crawl(tmp_path, site)
    crawl.run()
    assert crawl.search("narwhal") == [site.url("/moving.html")]
    site.static("/moving.html", stub("0; url=/moved.html"), last_modified="Sun, 09 Sep 2001 21:46:40 GMT")
    site.static("/moved.html", html("Moved", "narwhal content"), last_modified="Sat, 08 Sep 2001 21:46:40 GMT")
    site.log.clear()
    s = crawl.run()
    assert crawl.search("narwhal") == [site.url("/moved.html")]
    assert s["deleted"] == 1
    site.log.clear()
    s = crawl.run()
    stub_hits = site.hits("/moving.html")
    # the target's validators are never sent to the stub: a 304 there would hide the redirect
    assert len(stub_hits) == 1 and stub_hits[0].header("If-Modified-Since") is None
    assert (s["unchanged"], s["indexed"], s["deleted"]) == (2, 0, 0), s


def test_leap_second_last_modified_header_is_the_date(tmp_path, site) -> None:
    site.static("/meta.html", html("Meta", "metaword", head='<meta name="last-modified" content="2016-12-31T23:59:60Z">'))
    site.static("/", html("Leap", "leapword", ["/meta.html"]), last_modified="Sat, 31 Dec 2016 23:59:60 GMT")
    crawl = Crawl(tmp_path, site)
    crawl.run()
    home, meta = crawl.doc("/"), crawl.doc("/meta.html")
    assert (home["date_source"], home["last_modified"][:19]) == ("header", "2016-12-31T23:59:59")
    assert (meta["date_source"], meta["last_modified"][:19]) == ("meta:last-modified", "2016-12-31T23:59:59")


@pytest.mark.parametrize("value", ["0; url=/docs/", "0;URL='/docs/'", "0, /docs/"])
def test_instant_refresh_header_is_followed_like_a_redirect(tmp_path, site, value) -> None:
    site.static("/", html("Home", "start", ["/old/"]))
    site.add("/old/", body=b"", headers={"Content-Type": "text/html", "Refresh": value})
    site.static("/docs/", html("Docs", "aardvark documentation"))
    crawl = Crawl(tmp_path, site)
    s = crawl.run()
    assert requests_per_path(site).get("/docs/") == 1
    assert site.url("/old/") not in crawl.docs()
    assert crawl.search("aardvark") == [site.url("/docs/")]
    assert crawl.counters.get("web.redirect.refresh-header") == 1 and s["errors"] == 0
