"""The web source end to end: the real crawler against the real loopback server (tests/httpsite.py).

Most passes run in process (a real :class:`~indexerd.runtime.indexer.Indexer` from a parsed config, one
per pass, like one ``indexerd index`` run); a few go through the real CLI in a subprocess
(``indexerd index -c CFG --json``, ``indexerd ctl search ... --json``).  Assertions are on what
the server saw (``site.log``), the pass counts, the named counters, search hits and the state
store's ``documents`` and ``crawl`` rows.
"""

from __future__ import annotations

import calendar
import itertools
import json
import logging
import resource
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import _CRAWL_STORE, CLI, engine_toml, pg_store_address, state_schemas, store_toml
from httpsite import Site
from httpsite import site as site_fixture

from indexerd.config import parse_config
from indexerd.core.errors import ConfigError
from indexerd.index import open_index
from indexerd.runtime.indexer import Indexer
from indexerd.sources.web.mirror import Mirror


site = site_fixture  # the fixture; assigned so pyflakes does not flag each test's ``site``

LM = "Sat, 08 Sep 2001 21:46:40 GMT"  # = 2001-09-08T21:46:40Z = Unix time 999985600
LM_ISO = "2001-09-08T21:46:40Z"
FAST = {"min_delay": "0.01s", "good_guy_factor": 0.1, "max_backoff": "0.1s"}


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


# -- helpers ---------------------------------------------------------------------------------------
def html(title: str, text: str = "", links=(), head: str = "") -> bytes:
    a = " ".join(f'<a href="{href}">link</a>' for href in links)
    return (f"<html><head><title>{title}</title>{head}</head>"
            f"<body><p>{text}</p>{a}</body></html>").encode()


def _toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    raise TypeError(v)


def web_config(seeds, *, state_dir: Path | None = None, name: str = "site", politeness=None,
               top: dict | None = None, **keys) -> str:
    lines = [f"state_dir = {_toml(str(state_dir))}"] if state_dir is not None else []
    lines += [f"{k} = {_toml(v)}" for k, v in (top or {}).items()]
    lines += ["[[sources.web]]", f"name = {_toml(name)}", f"seeds = {_toml(list(seeds))}"]
    keys.setdefault("sitemaps", False)
    keys.setdefault("timeout", "5s")
    # adaptive recrawl off (every known page asked at every pass) unless a test is about it
    keys.setdefault("max_recrawl_interval", keys.get("interval", "1h"))
    lines += [f"{k} = {_toml(v)}" for k, v in keys.items()]
    lines += ["[sources.web.politeness]"]
    lines += [f"{k} = {_toml(v)}" for k, v in (politeness if politeness is not None else FAST).items()]
    return "\n".join(lines) + "\n"


class Crawl:
    """One web source over ``site`` with its own state dir; each :meth:`run` is one pass."""

    def __init__(self, tmp_path: Path, site: Site, seeds=("/",), **keys) -> None:
        self.state = tmp_path / "state"
        self.site = site
        self.seeds = [s if "://" in s else site.url(s) for s in seeds]
        self.keys = keys
        self.counters: dict[str, int] = {}
        self.pg = _CRAWL_STORE["kind"] != "sqlite"
        self.store_schema, index_schema = state_schemas(self.state) if self.pg else (None, None)
        self.tail = engine_toml("postgresql", schema=index_schema) + store_toml(self.store_schema) if self.pg else ""

    def config(self, **more) -> str:
        return web_config(self.seeds, state_dir=self.state, **{**self.keys, **more}) + self.tail

    def run(self, recheck: bool = False, **more) -> dict:
        if self.pg:  # each run is a new process, which asks robots.txt again, as on one node
            self.query("DELETE FROM robots")
        ix = Indexer(parse_config(self.config(**more)))
        ix.open("index")
        try:
            summary = ix.run_pass(progress=False, recheck=recheck).as_dict()
            self.counters = ix.counters.snapshot()
        finally:
            ix.close()
        assert summary["seen"] == (summary["indexed"] + summary["unchanged"] + summary["skipped"]
                                   + summary["errors"]), summary
        return summary

    def search(self, query: str) -> list[str]:
        """Keys of the hits, best first."""
        return [h.key for h in self.hits(query)]

    def hits(self, query: str):
        ix = open_index(self.state, create=False)
        try:
            return ix.search(query, limit=50)
        finally:
            ix.close()

    def query(self, sql: str, args=()) -> list[dict]:
        if self.pg:
            import psycopg
            from psycopg.rows import dict_row

            address = pg_store_address(self.store_schema)
            with psycopg.connect(address.url, row_factory=dict_row, autocommit=True,
                                 **address.connect_kwargs()) as con:
                con.execute(f'SET search_path = "{self.store_schema}"')
                try:
                    cur = con.execute(sql.replace("?", "%s"), args)
                except psycopg.errors.UndefinedTable:  # before the first run made the store
                    return []
                return list(cur) if cur.description else []
        con = sqlite3.connect(self.state / "state.sqlite3")
        con.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in con.execute(sql, args)]
        finally:
            con.close()

    def docs(self) -> dict[str, dict]:
        return {r["key"]: r for r in self.query("SELECT * FROM documents")}

    def doc(self, path: str) -> dict | None:
        return self.docs().get(self.site.url(path))

    def crawl_rows(self) -> dict[str, dict]:
        return {r["url"]: r for r in self.query("SELECT * FROM crawl")}


def counts(summary: dict) -> tuple:
    return tuple(summary[k] for k in ("seen", "indexed", "unchanged", "skipped", "deleted", "errors"))


def paths(site: Site, method: str | None = None) -> list[str]:
    return [h.path for h in site.log if method is None or h.method == method]


def requests_per_path(site: Site) -> dict[str, int]:
    out: dict[str, int] = {}
    for h in site.log:
        out[h.path] = out.get(h.path, 0) + 1
    return out


def iso(db_time: str | None) -> str | None:
    """'2001-09-08T21:46:40.000000Z' -> '2001-09-08T21:46:40Z'."""
    return None if db_time is None else db_time[:19] + "Z"


# -- a small site, first through the real CLI --------------------------------------------------------
def build_small_site(site: Site) -> None:
    site.add("/robots.txt", body=b"User-agent: *\nDisallow: /private/\n", headers={"Content-Type": "text/plain"})
    site.static("/", html("Home page", "welcome homepage", [
        "/lm.html", "/etag.html", "/meta.html", "/r301", "/r302", "/c1", "/hop/0", "/missing.html",
        "/slow.html", "/private/secret.html", "/cal?m=2020-01"]))
    site.static("/lm.html", html("Dated", "zebra lastmodified page"), last_modified=LM)
    site.static("/etag.html", html("Tagged", "yak etagonly page"), etag='"e1"')
    site.static("/meta.html", html("Meta dated", "walrus metadated page",
                                   head='<meta name="last-modified" content="2005-05-05T05:05:05Z">'),
                last_modified=LM)
    site.redirect("/r301", "/moved.html", 301)
    site.static("/moved.html", html("Moved", "moose permanent target"))
    site.redirect("/r302", "/temp.html", 302)
    site.static("/temp.html", html("Temp", "lemur temporary target"))
    site.redirect("/c1", "/c2", 301)
    site.redirect("/c2", "/c3.html", 302)
    site.static("/c3.html", html("Chain end", "gecko chained target"))
    for i in range(15):  # a redirect chain longer than MAX_REDIRECTS (10)
        site.redirect(f"/hop/{i}", f"/hop/{i + 1}", 302)
    site.add("/slow.html", body=html("Slow", "sloth"), headers={"Content-Type": "text/html"}, delay=1.5)
    site.static("/private/secret.html", html("Secret", "classified"))

    def cal(hit):  # a calendar: every month links to the next one, for ever
        month = hit.path.split("m=")[1]
        y, m = int(month[:4]), int(month[5:7])
        nxt = f"{y + m // 12}-{m % 12 + 1:02d}"
        return 200, {"Content-Type": "text/html"}, html(f"Calendar {month}", f"calendar month{month}",
                                                        [f"/cal?m={nxt}"])

    site.add("/cal", handler=cal)


@pytest.mark.alone  # a wall-clock bound (every fast page within the 0.5 s timeout)
def test_small_site(tmp_path, site) -> None:
    build_small_site(site)
    crawl = Crawl(tmp_path, site, timeout="0.5s", max_query_variants=3, sitemaps=True)
    summary = crawl.run()

    # 10 pages indexed (/, lm, etag, meta, moved, temp, c3, 3 calendar months), the 404 skipped,
    # the redirect chain over 10 hops and the slow page are errors
    assert counts(summary) == (13, 10, 0, 1, 0, 2), summary
    assert counts(summary["sources"]["site"]) == (13, 10, 0, 1, 0, 2)
    per_path = requests_per_path(site)
    assert "/private/secret.html" not in per_path  # robots.txt: never requested, not even HEAD
    assert per_path["/robots.txt"] == 1 and per_path["/sitemap.xml"] == 1
    assert [p for p, n in per_path.items() if n != 1] == []  # every URL requested once
    # the chain: /hop/0 .. /hop/10 requested (10 redirects followed), then given up
    assert [p for p in per_path if p.startswith("/hop/")] == [f"/hop/{i}" for i in range(11)]
    assert sorted(p for p in per_path if p.startswith("/cal")) == [
        "/cal?m=2020-01", "/cal?m=2020-02", "/cal?m=2020-03"]
    assert {h.method for h in site.log} == {"GET"}

    c = crawl.counters
    assert c["web.trap.query-variants"] == 1  # the link to /cal?m=2020-04
    assert c["web.drop.robots"] == 1
    assert c["error.redirect-loop"] == 1
    assert c["error.timeout"] == 1
    assert c["skip.http-404"] == 1
    assert c["web.robots.ok"] == 1

    # search through the real CLI (reads the state dir the pass wrote): one query, every page
    hits = CLI(crawl.state).search("zebra OR walrus OR moose OR lemur OR gecko OR sloth OR classified OR calendar",
                                   "--limit", "50")
    got = {h["url"]: (h["last_modified"], h["date_source"]) for h in hits}
    assert len(hits) == len(got) == 8
    assert got[site.url("/lm.html")] == (LM_ISO, "header")
    assert got[site.url("/meta.html")] == ("2005-05-05T05:05:05Z", "meta:last-modified")  # meta beats header
    assert set(got) == {site.url(p) for p in ("/lm.html", "/meta.html", "/moved.html", "/temp.html", "/c3.html",
                                              "/cal?m=2020-01", "/cal?m=2020-02", "/cal?m=2020-03")}

    docs = crawl.docs()
    assert len([r for r in docs.values() if r["status"] == "indexed"]) == 10
    assert docs[site.url("/etag.html")]["etag"] == '"e1"'
    assert docs[site.url("/etag.html")]["date_source"] == "fallback"
    assert docs[site.url("/lm.html")]["last_modified_header"] == LM
    assert site.url("/missing.html") not in docs  # never indexed: nothing to record
    for p in ("/r301", "/r302", "/c1", "/c2", "/hop/0", "/slow.html"):
        assert site.url(p) not in docs, p
    rows = crawl.crawl_rows()
    assert (rows[site.url("/missing.html")]["last_status"], rows[site.url("/missing.html")]["last_outcome"]) == (
        404, "gone")
    assert rows[site.url("/slow.html")]["last_outcome"] == "timeout"
    assert rows[site.url("/r301")]["doc_key"] == site.url("/moved.html")


def test_redirect_cycle_ends(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/loopA"]))
    site.redirect("/loopA", "/loopB", 302)
    site.redirect("/loopB", "/loopA", 302)
    crawl = Crawl(tmp_path, site)
    crawl.run()
    assert requests_per_path(site) == {"/robots.txt": 1, "/": 1, "/loopA": 1, "/loopB": 1}
    assert set(crawl.docs()) == {site.url("/")}


# -- B18: traps --------------------------------------------------------------------------------------
def _b18_site(site: Site) -> None:
    def de(hit):
        return 200, {"Content-Type": "text/html"}, html("Privacy", "datenschutz",
                                                        ["www.example.test/privacy/"])

    site.add("/de/", handler=de)
    site.add("/de/www.example.test/privacy/", handler=de)
    # "every URL under /de/": routes match exact paths, so register the chain deep enough
    for n in range(2, 8):
        site.add("/de/" + "www.example.test/privacy/" * n, handler=de)

    def cal(hit):
        month = hit.path.split("m=")[1]
        y, m = int(month[:4]), int(month[5:7])
        return 200, {"Content-Type": "text/html"}, html("Cal", f"month {month}",
                                                        [f"/cal?m={y + m // 12}-{m % 12 + 1:02d}"])

    site.add("/cal", handler=cal)


def test_b18_traps_end_within_max_hops(tmp_path, site) -> None:
    _b18_site(site)
    crawl = Crawl(tmp_path, site, seeds=["/de/", "/cal?m=2020-01"], max_hops=3)
    crawl.run()
    de = [p for p in paths(site) if p.startswith("/de/")]
    cal = [p for p in paths(site) if p.startswith("/cal")]
    assert len(de) <= 4 and len(set(de)) == len(de)
    assert cal == ["/cal?m=2020-01", "/cal?m=2020-02", "/cal?m=2020-03", "/cal?m=2020-04"]
    c = crawl.counters  # the link to /cal?m=2020-05 and the 2nd repeat of www.example.test/privacy/
    assert c.get("web.drop.max-hops", 0) + c.get("web.trap.repeated-path", 0) == 2, c
    # the next pass is not blocked: it re-checks the same URLs and ends
    site.log.clear()
    crawl.run()
    assert len([p for p in paths(site) if p.startswith("/cal")]) == 4


def test_b18_schemeless_link_is_not_followed_into_itself(tmp_path, site) -> None:
    _b18_site(site)
    Crawl(tmp_path, site, seeds=["/de/"], max_hops=3).run()
    de = [p for p in paths(site) if p.startswith("/de/")]
    assert de and all(p.count("www.example.test/") <= 1 for p in de), de


# -- B15 / B16: conditional GET, 304 ------------------------------------------------------------------
def test_second_pass_is_conditional_and_304_changes_nothing(tmp_path, site) -> None:
    site.static("/", html("Home", "start page", ["/hub.html", "/plain.html", "/tagonly.html"]),
                last_modified=LM, etag='"home1"')
    site.static("/hub.html", html("Hub", "hub page", ["/leaf.html"]), last_modified=LM, etag='"hub1"')
    site.static("/leaf.html", html("Leaf", "hello leafword"), last_modified=LM, etag='"v1"')
    site.add("/plain.html", body=html("Plain", "plainword"), headers={"Content-Type": "text/html"})
    site.static("/tagonly.html", html("Tag only", "tagword"), etag='"t1"')
    crawl = Crawl(tmp_path, site)
    first = crawl.run()
    assert counts(first) == (5, 5, 0, 0, 0, 0)
    assert requests_per_path(site) == {"/robots.txt": 1, "/": 1, "/hub.html": 1, "/leaf.html": 1,
                                       "/plain.html": 1, "/tagonly.html": 1}
    assert all(h.header("If-None-Match") is None and h.header("If-Modified-Since") is None for h in site.log)
    before = crawl.docs()

    site.log.clear()
    second = crawl.run()
    # 4 answered 304 (unchanged); /plain.html has no validators: fetched whole, content unchanged
    assert counts(second) == (5, 0, 5, 0, 0, 0)
    hits = {h.path: h for h in site.log if h.path != "/robots.txt"}
    assert set(hits) == {"/", "/hub.html", "/leaf.html", "/plain.html", "/tagonly.html"}
    # B15: validators verbatim; no fallback date is ever sent as If-Modified-Since
    assert hits["/leaf.html"].header("If-Modified-Since") == LM
    assert hits["/leaf.html"].header("If-None-Match") == '"v1"'
    assert hits["/tagonly.html"].header("If-None-Match") == '"t1"'
    assert hits["/tagonly.html"].header("If-Modified-Since") is None
    assert hits["/plain.html"].header("If-Modified-Since") is None
    assert hits["/plain.html"].header("If-None-Match") is None
    assert {p: h.status for p, h in hits.items()} == {"/": 304, "/hub.html": 304, "/leaf.html": 304,
                                                     "/plain.html": 200, "/tagonly.html": 304}
    # B16: nothing re-indexed, emptied or deleted; the date is kept
    assert crawl.search("leafword") == [site.url("/leaf.html")]
    after = crawl.docs()
    for key, row in before.items():
        for col in ("status", "last_modified", "date_source", "content_hash", "indexed_at", "etag",
                    "last_modified_header"):
            assert after[key][col] == row[col], (key, col)
    assert iso(after[site.url("/leaf.html")]["last_modified"]) == LM_ISO
    assert crawl.counters["decide.not-modified"] == 4


def test_page_only_reachable_through_a_304_page_is_rechecked(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/hub.html"]), etag='"h"')
    site.static("/hub.html", html("Hub", "hub", ["/deep.html"]), etag='"hub"')
    site.static("/deep.html", html("Deep", "deepword abyssword"), etag='"d1"')
    crawl = Crawl(tmp_path, site)
    crawl.run(max_pages=2)  # the budget ends the pass before /deep.html is ever requested
    assert "/deep.html" not in paths(site)
    site.log.clear()
    s = crawl.run()
    # pass 2 re-checks only what was requested before (/ and /hub.html, both 304): /deep.html is
    # known only from the links stored with /hub.html
    assert {h.path: h.status for h in site.log} == {"/robots.txt": 404, "/": 304, "/hub.html": 304,
                                                   "/deep.html": 200}
    assert counts(s) == (3, 1, 2, 0, 0, 0)
    assert crawl.search("abyssword") == [site.url("/deep.html")]
    assert crawl.crawl_rows()[site.url("/deep.html")]["via"] == "link"


def test_edit_reindexes_exactly_that_page_and_same_bytes_new_date_does_not(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/a.html", "/b.html", "/c.html"]), etag='"h"')
    site.static("/a.html", html("A", "applewords"), last_modified=LM, etag='"a1"')
    site.static("/b.html", html("B", "bananawords"), last_modified=LM, etag='"b1"')
    site.static("/c.html", html("C", "cherrywords"), last_modified=LM, etag='"c1"')
    crawl = Crawl(tmp_path, site)
    assert counts(crawl.run()) == (4, 4, 0, 0, 0, 0)
    before = crawl.docs()

    later = "Sun, 09 Sep 2001 10:00:00 GMT"
    site.static("/b.html", html("B", "bananawords kiwiwords"), last_modified=later, etag='"b2"')
    site.static("/c.html", html("C", "cherrywords"), last_modified=later, etag='"c2"')  # same bytes
    s = crawl.run()
    assert counts(s) == (4, 1, 3, 0, 0, 0)
    assert crawl.search("kiwiwords") == [site.url("/b.html")]
    after = crawl.docs()
    assert after[site.url("/b.html")]["indexed_at"] != before[site.url("/b.html")]["indexed_at"]
    assert iso(after[site.url("/b.html")]["last_modified"]) == "2001-09-09T10:00:00Z"
    for p in ("/a.html", "/c.html", "/"):
        assert after[site.url(p)]["indexed_at"] == before[site.url(p)]["indexed_at"], p
    assert after[site.url("/c.html")]["reason"] == "content-unchanged"
    assert after[site.url("/c.html")]["etag"] == '"c2"'  # new validators kept for the next pass
    # third pass: /c.html answers 304 to its new validators
    site.log.clear()
    assert counts(crawl.run()) == (4, 0, 4, 0, 0, 0)
    assert {h.path: h.status for h in site.log}["/c.html"] == 304


# -- dates (B01, B02, B03, B04, B06) through the crawler -----------------------------------------------
def test_b01_rfc850_two_digit_year(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/r1.html", "/r2.html"]))
    site.static("/r1.html", b"<html><body>rfc850 sample</body></html>",
                last_modified="Saturday, 08-Sep-01 21:46:40 GMT")
    site.static("/r2.html", b"<html><body>rfcold sample</body></html>",
                last_modified="Sunday, 06-Nov-94 08:49:37 GMT")
    crawl = Crawl(tmp_path, site)
    crawl.run()
    assert iso(crawl.doc("/r1.html")["last_modified"]) == "2001-09-08T21:46:40Z"
    assert iso(crawl.doc("/r2.html")["last_modified"]) == "1994-11-06T08:49:37Z"
    assert crawl.doc("/r1.html")["date_source"] == "header"
    [hit] = crawl.hits("rfc850")
    assert (hit.key, hit.last_modified.isoformat()) == (site.url("/r1.html"), "2001-09-08T21:46:40+00:00")


def test_b02_zone_abbreviations(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/ssi.html", "/msk.html"]))
    site.static("/ssi.html", b'<html><head><meta name="last-modified" content="Saturday, 08-Sep-2001 '
                             b'21:46:40 EDT"></head><body>ssi sample</body></html>')
    site.static("/msk.html", b"<html><body>msk sample</body></html>",
                last_modified="Thu, 19 Jul 2018 01:06:14 MSK")
    crawl = Crawl(tmp_path, site)
    crawl.run()
    ssi = crawl.doc("/ssi.html")
    assert (iso(ssi["last_modified"]), ssi["date_source"]) == ("2001-09-09T01:46:40Z", "meta:last-modified")
    msk = crawl.doc("/msk.html")
    assert iso(msk["last_modified"]) != "2018-07-19T01:06:14Z"
    assert iso(msk["last_modified"]) == "2018-07-18T22:06:14Z" or msk["date_source"] == "fallback"
    assert crawl.search("ssi") == [site.url("/ssi.html")]


def test_b03_epoch_last_modified_is_no_date(tmp_path, site) -> None:
    epoch = "Thu, 01 Jan 1970 00:00:00 GMT"
    site.static("/", html("Home", "start", ["/feed"]))
    plain = {"Content-Type": "text/plain", "Last-Modified": epoch}  # 200 every time, as in the case
    site.add("/feed", body=b"version one", headers=plain)
    crawl = Crawl(tmp_path, site)
    crawl.run()
    feed = crawl.doc("/feed")
    assert feed["date_source"] == "fallback" and not feed["last_modified"].startswith("1970")
    site.add("/feed", body=b"version two", headers=plain)
    s = crawl.run()
    assert s["indexed"] == 1
    assert crawl.search("two") == [site.url("/feed")]
    assert crawl.search("one") == []
    assert not crawl.doc("/feed")["last_modified"].startswith("1970")


def test_b03_epoch_last_modified_is_never_sent_back_to_an_exact_match_server(tmp_path, site) -> None:
    """A server comparing If-Modified-Since exactly (nginx's default) would answer 304 for ever to
    an epoch "date" it keeps sending; an implausible Last-Modified is therefore not a validator."""
    epoch = "Thu, 01 Jan 1970 00:00:00 GMT"
    site.static("/", html("Home", "start", ["/feed"]))
    site.static("/feed", b"version one", last_modified=epoch, content_type="text/plain")
    crawl = Crawl(tmp_path, site)
    crawl.run()
    site.static("/feed", b"version two", last_modified=epoch, content_type="text/plain")
    site.log.clear()
    s = crawl.run()
    (feed,) = [h for h in site.log if h.path == "/feed"]
    assert feed.header("If-Modified-Since") is None and feed.status == 200
    assert s["indexed"] == 1
    assert crawl.search("two") == [site.url("/feed")]


def test_b04_future_last_modified_rejected(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/f.html"]))
    site.add("/f.html", body=html("F", "old text oldword"),
             headers={"Content-Type": "text/html", "Date": "Mon, 01 Jun 2020 12:00:00 GMT",
                      "Last-Modified": "Thu, 01 Jan 2099 00:00:00 GMT"})
    crawl = Crawl(tmp_path, site)
    crawl.run()
    f = crawl.doc("/f.html")
    assert (iso(f["last_modified"]), f["date_source"]) == ("2020-06-01T12:00:00Z", "fallback")
    site.add("/f.html", body=html("F", "new text newword"),
             headers={"Content-Type": "text/html", "Date": "Tue, 02 Jun 2020 12:00:00 GMT",
                      "Last-Modified": "Tue, 02 Jun 2020 08:00:00 GMT"})
    s = crawl.run()
    assert s["indexed"] == 1
    f = crawl.doc("/f.html")
    assert (iso(f["last_modified"]), f["date_source"]) == ("2020-06-02T08:00:00Z", "header")
    assert crawl.search("newword") == [site.url("/f.html")]
    assert crawl.search("oldword") == []


def test_b06_minus_zero_and_asctime_dates(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/d.html"]))
    crawl = Crawl(tmp_path, site, strict_dates=True)
    polls = [("Sat, 08 Sep 2001 21:46:40 -0000", "2001-09-08T21:46:40Z", "new"),
             ("Sun Sep  9 01:46:40 2001", "2001-09-09T01:46:40Z", "newer-date"),
             ("Wed, 21 Jun 2017 11:35:20 +0000", "2017-06-21T11:35:20Z", "newer-date"),
             ("Wed, 21 Jun 2017 11:35:20 +0000", "2017-06-21T11:35:20Z", "not-newer")]
    for header, want, reason in polls:
        site.add("/d.html", body=html("D", "dateword"),
                 headers={"Content-Type": "text/html", "Last-Modified": header})
        crawl.run()
        d = crawl.doc("/d.html")
        assert (iso(d["last_modified"]), d["date_source"], d["reason"]) == (want, "header", reason)
        assert crawl.counters.get("error.internal") is None


# -- robots.txt -------------------------------------------------------------------------------------
def test_b20_longest_match_wins(tmp_path, site) -> None:
    site.add("/robots.txt", body=b"User-agent: *\nDisallow: /\nAllow: /public\nDisallow: /wp-admin/\n"
                                 b"Allow: /wp-admin/admin-ajax.php\n", headers={"Content-Type": "text/plain"})
    site.static("/public/", html("Public", "start", ["/public/page.html", "/wp-admin/admin-ajax.php",
                                                     "/private/x", "/wp-admin/options.php"]))
    for p in ("/public/page.html", "/wp-admin/admin-ajax.php", "/private/x", "/wp-admin/options.php"):
        site.static(p, html("P", "page " + p))
    crawl = Crawl(tmp_path, site, seeds=["/public/"])
    crawl.run()
    assert sorted(paths(site)) == ["/public/", "/public/page.html", "/robots.txt", "/wp-admin/admin-ajax.php"]
    assert crawl.counters["web.drop.robots"] == 2


def test_b21_robots_with_bom(tmp_path, site) -> None:
    site.add("/robots.txt", body=b"\xef\xbb\xbfUser-agent: *\nDisallow: /\n", headers={"Content-Type": "text/plain"})
    site.static("/", html("Home", "start", ["/a.html"]))
    site.static("/a.html", html("A", "a"))
    crawl = Crawl(tmp_path, site, sitemaps=True)
    s = crawl.run()
    assert paths(site) == ["/robots.txt"]
    assert s["indexed"] == 0
    assert [k for k, r in crawl.docs().items() if r["status"] == "indexed"] == []


def test_robots_404_allows_everything(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/a.html", "/admin/b.html"]))
    site.static("/a.html", html("A", "a"))
    site.static("/admin/b.html", html("B", "b"))
    crawl = Crawl(tmp_path, site)
    s = crawl.run()
    assert s["indexed"] == 3
    assert sorted(paths(site)) == ["/", "/a.html", "/admin/b.html", "/robots.txt"]
    assert crawl.counters["web.robots.allow-all"] == 1


def test_robots_503_fetches_nothing_and_deletes_nothing(tmp_path, site) -> None:
    site.static("/", html("Home", "start homeword", ["/a.html"]), etag='"h"')
    site.static("/a.html", html("A", "alphaword"), etag='"a"')
    crawl = Crawl(tmp_path, site)
    assert crawl.run()["indexed"] == 2
    site.log.clear()
    site.add("/robots.txt", status=503, body=b"busy", headers={"Content-Type": "text/plain"})
    s = crawl.run()
    assert paths(site) == ["/robots.txt"]
    assert s["deleted"] == 0 and s["indexed"] == 0
    assert crawl.counters["web.robots.unreachable"] == 1
    # a dead site must not look like a healthy empty one: the pass counts it as an error
    assert (s["seen"], s["errors"], crawl.counters["error.robots-unreachable"]) == (1, 1, 1)
    assert crawl.search("alphaword") == [site.url("/a.html")]
    assert crawl.search("homeword") == [site.url("/")]
    # robots.txt back: the pages are re-checked (they were not forgotten)
    site.log.clear()
    site.add("/robots.txt", status=404, body=b"", headers={"Content-Type": "text/plain"})
    s = crawl.run()
    assert sorted(paths(site)) == ["/", "/a.html", "/robots.txt"]
    assert counts(s) == (2, 0, 2, 0, 0, 0)


def test_page_newly_disallowed_is_removed(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/a.html", "/b.html"]), etag='"h"')
    site.static("/a.html", html("A", "alphaword"), etag='"a"')
    site.static("/b.html", html("B", "betaword"), etag='"b"')
    crawl = Crawl(tmp_path, site)
    crawl.run()
    site.log.clear()
    site.add("/robots.txt", body=b"User-agent: indexerd\nDisallow: /a.html\n", headers={"Content-Type": "text/plain"})
    s = crawl.run()
    assert "/a.html" not in paths(site)
    assert s["deleted"] == 1
    assert crawl.search("alphaword") == []
    assert crawl.search("betaword") == [site.url("/b.html")]
    assert site.url("/a.html") not in crawl.docs()


def test_crawl_delay_is_honoured(tmp_path, site) -> None:
    site.add("/robots.txt", body=b"User-agent: *\nCrawl-delay: 0.4\n", headers={"Content-Type": "text/plain"})
    site.static("/", html("Home", "start", ["/a.html", "/b.html"]))
    site.static("/a.html", html("A", "a"))
    site.static("/b.html", html("B", "b"))
    crawl = Crawl(tmp_path, site)
    crawl.run()
    log = site.log
    assert [h.path for h in log] == ["/robots.txt", "/", "/a.html", "/b.html"]
    # start to start (the server's "completed" stamp can lag the client's end under load)
    gaps = [log[i + 1].arrived - log[i].arrived for i in range(1, len(log) - 1)]
    assert min(gaps) >= 0.4, gaps


def test_crawl_delay_applies_right_after_robots_txt(tmp_path, site) -> None:
    site.add("/robots.txt", body=b"User-agent: *\nCrawl-delay: 0.4\n", headers={"Content-Type": "text/plain"})
    site.static("/", html("Home", "start"))
    Crawl(tmp_path, site).run()
    log = site.log
    assert [h.path for h in log] == ["/robots.txt", "/"]
    assert log[1].arrived - log[0].completed >= 0.4


# -- meta robots, X-Robots-Tag --------------------------------------------------------------------------
def test_meta_robots_and_x_robots_tag(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/noindex.html", "/nofollow.html", "/xrt.html", "/xrt-nf.html"]))
    site.static("/noindex.html", html("Noindex", "hiddenword", ["/from-noindex.html"],
                                      head='<meta name="robots" content="noindex">'))
    site.static("/nofollow.html", html("Nofollow", "shownword", ["/from-nofollow.html"],
                                       head='<meta name="robots" content="nofollow">'))
    site.static("/xrt.html", html("Xrt", "headerhiddenword", ["/from-xrt.html"]),
                headers={"X-Robots-Tag": "noindex"})
    site.static("/xrt-nf.html", html("Xrt nf", "headershownword", ["/from-xrt-nf.html"]),
                headers={"X-Robots-Tag": "nofollow"})
    for p in ("/from-noindex.html", "/from-nofollow.html", "/from-xrt.html", "/from-xrt-nf.html"):
        site.static(p, html("Child", "childword " + p.strip("/").replace(".html", "").replace("-", "")))
    crawl = Crawl(tmp_path, site)
    s = crawl.run()
    got = set(paths(site))
    assert "/from-noindex.html" in got and "/from-xrt.html" in got
    assert "/from-nofollow.html" not in got and "/from-xrt-nf.html" not in got
    assert crawl.search("hiddenword") == [] and crawl.search("headerhiddenword") == []
    assert crawl.search("shownword") == [site.url("/nofollow.html")]
    assert crawl.search("headershownword") == [site.url("/xrt-nf.html")]
    assert sorted(crawl.search("childword")) == sorted([site.url("/from-noindex.html"), site.url("/from-xrt.html")])
    assert counts(s) == (7, 5, 0, 2, 0, 0)
    assert crawl.counters["skip.noindex"] == 2


def test_x_robots_tag_for_another_bot_is_ignored(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/o.html"]))
    site.static("/o.html", html("O", "otherbotword", ["/child.html"]),
                headers={"X-Robots-Tag": "otherbot: noindex, nofollow"})
    site.static("/child.html", html("Child", "childword"))
    crawl = Crawl(tmp_path, site)
    crawl.run()
    assert crawl.search("otherbotword") == [site.url("/o.html")]
    assert "/child.html" in paths(site)


def test_page_turning_noindex_leaves_the_index(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/p.html"]))
    site.static("/p.html", html("P", "turncoatword"))
    crawl = Crawl(tmp_path, site)
    crawl.run()
    assert crawl.search("turncoatword") == [site.url("/p.html")]
    site.static("/p.html", html("P", "turncoatword", head='<meta name="robots" content="noindex">'))
    crawl.run()
    assert crawl.search("turncoatword") == []


# -- HEAD first ------------------------------------------------------------------------------------------
def test_head_first_for_non_html_urls(tmp_path, site) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
    site.static("/", html("Home", "start", ["/pic.png", "/notes.txt", "/data.csv", "/nohead.csv"]))

    def nohead(hit):  # a server that refuses HEAD: asked again with GET
        if hit.method == "HEAD":
            return 405, {"Allow": "GET"}, b""
        return 200, {"Content-Type": "text/csv"}, b"gamma,noheadword\n"

    site.add("/nohead.csv", handler=nohead)
    site.static("/pic.png", png, content_type="image/png")
    site.static("/notes.txt", b"plain notes textword", content_type="text/plain")
    site.static("/data.csv", b"alpha,csvword\n", content_type="text/csv")
    crawl = Crawl(tmp_path, site)
    crawl.run()
    log = [(h.method, h.path) for h in site.log]
    assert ("HEAD", "/pic.png") in log and ("GET", "/pic.png") not in log
    assert ("GET", "/notes.txt") in log and ("HEAD", "/notes.txt") not in log
    assert [m for m, p in log if p == "/data.csv"] == ["HEAD", "GET"]
    assert [m for m, p in log if p == "/nohead.csv"] == ["HEAD", "GET"]
    assert crawl.search("noheadword") == [site.url("/nohead.csv")]
    assert crawl.doc("/pic.png")["reason"] == "unsupported-type"
    assert crawl.search("textword") == [site.url("/notes.txt")]
    assert crawl.search("csvword") == [site.url("/data.csv")]


# -- B32: max_size ----------------------------------------------------------------------------------------
@pytest.mark.alone  # a memory bound (peak RSS)
def test_b32_endless_body_is_cut_and_skipped(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/big", "/small.html", "/liar"]))
    site.add("/big", handler=lambda hit: (200, {"Content-Type": "text/plain"}, site.endless()))
    site.add("/liar", body=b"", headers={"Content-Type": "text/plain", "Content-Length": str(50 * 10**6)})
    site.static("/small.html", html("Small", "tinyword"))
    crawl = Crawl(tmp_path, site, max_size="1MB")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    s = crawl.run()
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 64, grown_mib
    assert crawl.doc("/big")["reason"] == "too-large"
    assert crawl.doc("/liar")["reason"] == "too-large"
    assert crawl.counters["skip.too-large"] == 2
    assert crawl.search("tinyword") == [site.url("/small.html")]
    assert counts(s) == (4, 2, 0, 2, 0, 0)
    [big] = site.hits("/big")
    assert big.completed is None  # the download was cut


# -- deletion rules ------------------------------------------------------------------------------------------
def test_404_deletes_after_gone_after_answers(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/a.html"]), etag='"h"')
    site.static("/a.html", html("A", "alphaword"))
    crawl = Crawl(tmp_path, site, gone_after=2)
    crawl.run()
    site.add("/a.html", status=404, body=b"gone", headers={"Content-Type": "text/plain"})
    s = crawl.run()
    assert (s["deleted"], crawl.search("alphaword")) == (0, [site.url("/a.html")])
    s = crawl.run()
    assert s["deleted"] == 1
    assert crawl.search("alphaword") == []
    assert site.url("/a.html") not in crawl.docs()


@pytest.mark.alone  # a wall-clock bound (every fast page within the 0.5 s timeout)
def test_500_and_timeout_keep_the_indexed_copy(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/a.html", "/b.html"]), etag='"h"')
    site.static("/a.html", html("A", "alphaword"))
    site.static("/b.html", html("B", "betaword"))
    crawl = Crawl(tmp_path, site, timeout="0.5s")
    crawl.run()
    site.add("/a.html", status=500, body=b"oops", headers={"Content-Type": "text/plain"})
    site.add("/b.html", body=html("B", "betaword"), headers={"Content-Type": "text/html"}, delay=1.5)
    s = crawl.run()
    assert counts(s) == (3, 0, 1, 0, 0, 2)
    assert crawl.search("alphaword") == [site.url("/a.html")]
    assert crawl.search("betaword") == [site.url("/b.html")]
    assert crawl.counters["error.http-500"] == 1 and crawl.counters["error.timeout"] == 1


def test_a_run_of_5xx_answers_does_not_abandon_the_host(tmp_path, site) -> None:
    """The attack run: five 5xx answers in a row gave up the host for the rest of the pass.  A
    server that answers is up: each failing page keeps its copy and is asked again next pass,
    the politeness backoff spaces the requests, the host's other pages are fetched in this pass
    (only a host that does not answer at all -- timeouts, refused connections -- waits for the
    next pass, as Heritrix and Nutch treat unreachable servers)."""
    bad = [f"/e{i}.html" for i in range(7)]
    good = [f"/g{i}.html" for i in range(4)]
    site.static("/", html("Home", "start", bad + good))
    for path in bad:
        site.add(path, status=500, body=b"oops", headers={"Content-Type": "text/plain"})
    for i, path in enumerate(good):
        site.static(path, html(f"G{i}", f"goodword{i}"))
    crawl = Crawl(tmp_path, site)
    s = crawl.run()
    assert (s["indexed"], s["errors"]) == (1 + len(good), len(bad)), s
    assert sorted(crawl.search("goodword0 OR goodword1 OR goodword2 OR goodword3")) == sorted(site.url(p) for p in good)
    assert crawl.counters.get("web.host-down", 0) == 0


def test_unlinked_page_is_rechecked_and_deleted_only_on_404(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/a.html"]))
    site.static("/a.html", html("A", "alphaword"), etag='"a"')
    crawl = Crawl(tmp_path, site)
    crawl.run()
    site.static("/", html("Home", "start, no more links"))
    site.log.clear()
    s = crawl.run()
    assert "/a.html" in paths(site)
    assert s["deleted"] == 0 and crawl.search("alphaword") == [site.url("/a.html")]
    site.add("/a.html", status=404, body=b"", headers={"Content-Type": "text/plain"})
    s = crawl.run()
    assert s["deleted"] == 1 and crawl.search("alphaword") == []
    site.log.clear()
    crawl.run()  # once confirmed gone it is not asked again
    assert "/a.html" not in paths(site)


def test_permanent_redirect_moves_the_key_and_410_deletes(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/old.html", "/doomed.html"]), etag='"h"')
    site.static("/old.html", html("Old", "movingword"))
    site.static("/doomed.html", html("Doomed", "doomword"))
    crawl = Crawl(tmp_path, site)
    crawl.run()
    assert crawl.search("movingword") == [site.url("/old.html")]
    site.redirect("/old.html", "/new.html", 301)
    site.static("/new.html", html("New", "movingword"))
    site.add("/doomed.html", status=410, body=b"", headers={"Content-Type": "text/plain"})
    s = crawl.run()
    assert crawl.search("movingword") == [site.url("/new.html")]
    assert crawl.search("doomword") == []
    docs = crawl.docs()
    assert site.url("/old.html") not in docs and site.url("/doomed.html") not in docs
    assert (s["deleted"], s["indexed"]) == (2, 1)


# -- keys: rel=canonical, canonical links --------------------------------------------------------------------
def test_rel_canonical_and_link_canonicalisation(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/dup.html", "/a/../b.html#x", "/b.html", "/B.html?z=1&a=2",
                                           "/B.html?a=2&z=1", "/other.html"]))
    site.static("/dup.html", html("Dup", "dupword", head='<link rel="canonical" href="/main.html">'))
    site.static("/b.html", html("B", "betaword"))
    site.add("/B.html", body=html("Bq", "queryword"), headers={"Content-Type": "text/html"})
    site.static("/other.html", html("Other", "otherword", head='<link rel="canonical" href="http://elsewhere.test/x">'))
    crawl = Crawl(tmp_path, site)
    crawl.run()
    per = requests_per_path(site)
    assert per["/b.html"] == 1 and "/a/../b.html" not in per
    assert per["/B.html?a=2&z=1"] == 1 and "/B.html?z=1&a=2" not in per
    assert crawl.search("dupword") == [site.url("/main.html")]
    assert "/main.html" not in per
    docs = crawl.docs()
    assert site.url("/dup.html") not in docs
    assert crawl.search("otherword") == [site.url("/other.html")]  # another host's canonical is ignored


# -- politeness ----------------------------------------------------------------------------------------------
def test_politeness_min_delay_and_one_request_in_flight(tmp_path, site) -> None:
    site.static("/", html("Home", "start", [f"/p{i}.html" for i in range(3)]))
    for i in range(3):
        site.add(f"/p{i}.html", body=html("P", f"page{i}"), headers={"Content-Type": "text/html"}, delay=0.05)
    crawl = Crawl(tmp_path, site, workers=4)
    crawl.run(politeness={"min_delay": "0.3s", "good_guy_factor": 0.1})
    log = site.log
    assert len(log) == 5
    gaps = [b.arrived - a.arrived for a, b in itertools.pairwise(log)]
    assert min(gaps) >= 0.3, gaps
    assert all(log[i + 1].arrived >= log[i].completed for i in range(len(log) - 1))


def test_429_retry_after_slows_the_host_and_retries(tmp_path, site) -> None:
    state = {"n": 0}

    def busy(hit):
        state["n"] += 1
        if state["n"] == 1:
            return 429, {"Retry-After": "1", "Content-Type": "text/plain"}, b"slow down"
        return 200, {"Content-Type": "text/html"}, html("Busy", "busyword")

    site.static("/", html("Home", "start", ["/busy.html", "/next.html"]))
    site.add("/busy.html", handler=busy)
    site.static("/next.html", html("Next", "nextword"))
    crawl = Crawl(tmp_path, site)
    s = crawl.run()
    log = site.log
    i = next(i for i, h in enumerate(log) if h.status == 429)
    assert log[i + 1].arrived - log[i].completed >= 1.0
    assert [h.path for h in log].count("/busy.html") == 2
    assert crawl.search("busyword") == [site.url("/busy.html")]
    assert counts(s) == (3, 3, 0, 0, 0, 0)


# -- scope ---------------------------------------------------------------------------------------------------
def test_max_hops_and_path_depth(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/h1.html", "/a/x.html", "/a/b/y.html"]))
    site.static("/h1.html", html("H1", "h1", ["/h2.html"]))
    site.static("/h2.html", html("H2", "h2", ["/h3.html"]))
    site.static("/h3.html", html("H3", "h3"))
    site.static("/a/x.html", html("X", "x"))
    site.static("/a/b/y.html", html("Y", "y"))
    crawl = Crawl(tmp_path, site, max_hops=2, path_depth="<3")
    crawl.run()
    assert sorted(paths(site)) == ["/", "/a/x.html", "/h1.html", "/h2.html", "/robots.txt"]
    assert crawl.counters["web.drop.max-hops"] == 1 and crawl.counters["web.drop.path-depth"] == 1


def test_relative_path_depth_spec(tmp_path, site) -> None:
    site.static("/docs/", html("Docs", "start", ["/docs/a.html", "/docs/sub/b.html", "/docs/sub/deep/c.html"]))
    for p in ("/docs/a.html", "/docs/sub/b.html", "/docs/sub/deep/c.html"):
        site.static(p, html("P", p))
    crawl = Crawl(tmp_path, site, seeds=["/docs/"], path_depth="+1")  # seed depth 2: depths 2..3
    crawl.run()
    assert sorted(paths(site)) == ["/docs/", "/docs/a.html", "/docs/sub/b.html", "/robots.txt"]


def test_include_exclude_restrict(tmp_path, site) -> None:
    links = ["/blog/a.html", "/blog/b.html?sort=asc", "/news/c.html", "/blog/drafts/d.html", "/shop/e.html"]
    site.static("/", html("Home", "start", links))
    for p in links:
        site.add(p.split("?")[0], body=html("P", "p"), headers={"Content-Type": "text/html"})
    crawl = Crawl(tmp_path, site, include=["/blog/", "/news/", r"/$"], exclude=[r"\?sort=", "/drafts/"],
                  restrict=[r"^http://127\.0\.0\.1:"])
    crawl.run()
    assert sorted(paths(site)) == ["/", "/blog/a.html", "/news/c.html", "/robots.txt"]
    c = crawl.counters
    assert (c["web.drop.include"], c["web.drop.exclude"]) == (1, 2)
    # a page indexed before and now excluded leaves the index, and is not requested
    assert site.url("/blog/a.html") in crawl.docs()
    site.log.clear()
    s = crawl.run(exclude=[r"\?sort=", "/drafts/", "/blog/a"])
    assert "/blog/a.html" not in paths(site)
    assert s["deleted"] == 1 and site.url("/blog/a.html") not in crawl.docs()


def test_allowed_domains(tmp_path, site) -> None:
    with Site() as other:
        other.static("/", html("Other", "foreignword"))
        far = f"http://localhost:{other.port}/"
        site.static("/", html("Home", "start", [far]))
        crawl = Crawl(tmp_path / "one", site)
        crawl.run()
        assert other.log == []
        assert crawl.counters["web.drop.off-site"] == 1
        # the other site is on another port too: both ports must be allowed (issue 18)
        crawl2 = Crawl(tmp_path / "two", site, allowed_domains=["127.0.0.1", "localhost"])
        crawl2.run()
        assert other.log == []
        assert crawl2.counters["web.drop.off-port"] == 1
        crawl2 = Crawl(tmp_path / "three", site, allowed_domains=["127.0.0.1", "localhost"],
                       allowed_ports=[site.port, other.port])
        crawl2.run()
        assert [h.path for h in other.log] == ["/robots.txt", "/"]
        assert crawl2.search("foreignword") == [far]


# -- sitemaps ---------------------------------------------------------------------------------------------------
def test_sitemap_finds_unlinked_page_and_gives_its_date(tmp_path, site) -> None:
    site.static("/", html("Home", "start"))
    site.static("/orphan.html", html("Orphan", "orphanword"), last_modified=LM)
    site.add("/sitemap.xml", headers={"Content-Type": "application/xml"}, body=(
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f'<url><loc>{site.url("/orphan.html")}</loc><lastmod>2010-10-10T10:10:10Z</lastmod></url>'
        '</urlset>').encode())
    crawl = Crawl(tmp_path, site, sitemaps=True, date_sources=["sitemap", "header", "meta"])
    crawl.run()
    assert "/orphan.html" in paths(site)
    o = crawl.doc("/orphan.html")
    assert (iso(o["last_modified"]), o["date_source"]) == ("2010-10-10T10:10:10Z", "sitemap")
    assert crawl.search("orphanword") == [site.url("/orphan.html")]
    # with the default order the header wins over the sitemap
    crawl2 = Crawl(tmp_path / "b", site, sitemaps=True)
    crawl2.run()
    o = crawl2.doc("/orphan.html")
    assert (iso(o["last_modified"]), o["date_source"]) == (LM_ISO, "header")


def test_sitemap_named_in_robots_txt(tmp_path, site) -> None:
    site.add("/robots.txt", body=f"User-agent: *\nSitemap: {site.url('/maps/pages.xml')}\n".encode(),
             headers={"Content-Type": "text/plain"})
    site.static("/", html("Home", "start"))
    site.static("/hidden.html", html("Hidden", "hiddenpageword"))
    site.add("/maps/pages.xml", headers={"Content-Type": "application/xml"}, body=(
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f'<url><loc>{site.url("/hidden.html")}</loc></url></urlset>').encode())
    crawl = Crawl(tmp_path, site, sitemaps=True)
    crawl.run()
    assert "/sitemap.xml" not in paths(site)
    assert crawl.search("hiddenpageword") == [site.url("/hidden.html")]


# -- mirror ------------------------------------------------------------------------------------------------------
def test_mirror_files_and_mtimes(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/a.html", "/d/b.html"]), etag='"h"')
    site.static("/a.html", html("A", "alphaword"), last_modified=LM)
    site.static("/d/b.html", html("B", "betaword", head='<meta name="last-modified" content="2003-03-03T03:03:03Z">'))
    mirror_dir = tmp_path / "mirror"
    crawl = Crawl(tmp_path, site, mirror_dir=str(mirror_dir))
    crawl.run()
    m = Mirror(mirror_dir)
    a, b = m.path_for(site.url("/a.html")), m.path_for(site.url("/d/b.html"))
    assert a.read_bytes() == html("A", "alphaword")
    assert a.stat().st_mtime == 999985600
    assert b.stat().st_mtime == calendar.timegm((2003, 3, 3, 3, 3, 3))
    assert m.path_for(site.url("/")).is_file()
    site.add("/a.html", status=404, body=b"", headers={"Content-Type": "text/plain"})
    crawl.run()
    assert not a.exists() and b.exists()


def _requisite_site(site) -> dict[str, bytes]:
    """A page that needs a stylesheet (which @imports another and uses a font and an image), a
    script, an image with a srcset, an <object> SVG, and an image from /static/ outside the
    crawl's path scope; a page link and an image also linked with <a>.  The requisites' bodies
    by path."""
    page = ('<html><head><title>Styled</title><link rel="stylesheet" href="css/site.css">'
            '<script src="js/app.js"></script></head><body><p>styledword</p>'
            '<img src="img/a.png" srcset="img/a2.png 2x"><object data="img/fig.svg"></object>'
            '<img src="/static/logo.png"><a href="b.html">b</a><a href="img/a.png">big</a></body></html>')
    site.static("/docs/", page.encode(), etag='"p1"')
    site.static("/docs/b.html", html("B", "betaword"), etag='"b1"')
    bodies = {
        "/docs/css/site.css": (b'@import "more.css"; @font-face{src:url(../fonts/f.woff2)} '
                               b'body{background:url("../img/bg.png")}', "text/css"),
        "/docs/css/more.css": (b"p{color:red}", "text/css"),
        "/docs/fonts/f.woff2": (b"wOF2font", "font/woff2"),
        "/docs/js/app.js": (b"var styledscriptword=1;", "text/javascript"),
        "/docs/img/a.png": (b"\x89PNG\r\n\x1a\na", "image/png"),
        "/docs/img/a2.png": (b"\x89PNG\r\n\x1a\na2", "image/png"),
        "/docs/img/bg.png": (b"\x89PNG\r\n\x1a\nbg", "image/png"),
        "/docs/img/fig.svg": (b'<svg xmlns="http://www.w3.org/2000/svg"><text>svgfigword</text></svg>',
                              "image/svg+xml"),
        "/static/logo.png": (b"\x89PNG\r\n\x1a\nlogo", "image/png"),
    }
    for i, (path, (body, ctype)) in enumerate(bodies.items()):
        site.static(path, body, etag=f'"r{i}"', content_type=ctype)
    return {path: body for path, (body, _) in bodies.items()}


def test_page_requisites_are_kept_beside_the_mirrored_pages_and_never_indexed(tmp_path, site) -> None:
    """Issue 33: a mirror kept pages only (no stylesheets, no figures).  With ``mirror_dir``
    every requisite is fetched (GET, outside the path scope too), kept at its mirror path with
    its bytes, recorded as a requisite, never indexed; the next pass asks each conditionally
    (304) and keeps them; a stylesheet's own @import and url()s are requisites too."""
    bodies = _requisite_site(site)
    mirror_dir = tmp_path / "mirror"
    crawl = Crawl(tmp_path, site, seeds=("/docs/",), mirror_dir=str(mirror_dir), include=["/docs/"])
    crawl.run(max_recrawl_interval="1s", interval="1s")
    m = Mirror(mirror_dir)
    for path in bodies:
        assert [h.method for h in site.hits(path)] == ["GET"], path
        assert m.path_for(site.url(path)).read_bytes() == bodies[path], path
    assert m.path_for(site.url("/docs/b.html")).is_file()
    assert crawl.search("styledword") == [site.url("/docs/")]
    for word in ("styledscriptword", "svgfigword"):
        assert crawl.search(word) == [], word
    assert crawl.counters["web.requisite.kept"] == len(bodies), crawl.counters
    # every URL due again: each requisite asked once more, conditionally, and kept on its 304
    time.sleep(1.1)
    crawl.run(max_recrawl_interval="1s", interval="1s")
    for path in bodies:
        second = site.hits(path)[1:]
        assert [(h.method, h.status) for h in second] == [("GET", 304)], (path, second, crawl.counters)
        assert second[0].header("If-None-Match"), path
        assert m.path_for(site.url(path)).read_bytes() == bodies[path], path
    assert crawl.search("styledword") == [site.url("/docs/")]


def test_index_recheck_asks_every_known_page_and_requisite_with_its_validators(tmp_path, site) -> None:
    """``indexerd index --recheck`` (issue 33's "check everything now", the one-shot command's
    spelling of ``ctl crawl NAME --all``): right after a pass, when adaptive recrawl has nothing
    due, every known page and requisite is asked again with If-None-Match and answers 304; an
    edited page is found."""
    bodies = _requisite_site(site)
    crawl = Crawl(tmp_path, site, seeds=("/docs/",), mirror_dir=str(tmp_path / "mirror"), include=["/docs/"],
                  max_recrawl_interval="30d")   # adaptive recrawl on: the next pass has nothing due
    crawl.run()
    quiet = crawl.run()
    assert site.hits("/docs/b.html")[1:] == [] and quiet["seen"] <= 1, quiet
    site.static("/docs/b.html", html("B", "betaword editedword"), etag='"b2"')
    summary = crawl.run(recheck=True)
    for path in [*bodies, "/docs/"]:
        last = site.hits(path)[-1]
        assert (last.status, bool(last.header("If-None-Match"))) == (304, True), (path, last)
    assert site.hits("/docs/b.html")[-1].status == 200 and crawl.search("editedword") == [site.url("/docs/b.html")]
    assert summary["indexed"] == 1, summary


def test_convert_links_points_a_duplicate_s_alias_at_the_kept_page(tmp_path, site) -> None:
    """A new user's trial: /index.html, the alias of / (same content), is never written to the
    mirror, yet convert_links pointed links to it at a file named after it (%2569ndex.html),
    and a link to a page the pass did not keep at a relative path.  The pass's pages are
    converted once it knows what it kept: links to the alias go to /'s file, others absolute."""
    home = html("Home", "homeword", ["/b.html"])
    site.static("/", home, etag='"h"')
    site.static("/index.html", home, etag='"h"')
    site.static("/b.html", html("B", "betaword", ["/index.html", "/", "/missing.html", "/b.html#x"]), etag='"b"')
    site.add("/missing.html", status=404, body=b"gone", headers={"Content-Type": "text/plain"})
    mirror_dir = tmp_path / "mirror"
    crawl = Crawl(tmp_path, site, seeds=("/b.html",), mirror_dir=str(mirror_dir), convert_links=True)
    crawl.run()
    m = Mirror(mirror_dir)
    copy = m.path_for(site.url("/b.html")).read_text(encoding="utf-8")
    assert not m.path_for(site.url("/index.html")).exists() and m.path_for(site.url("/")).name == "index.html"
    assert copy.count('href="index.html"') == 2, copy
    assert f'href="{site.url("/missing.html")}"' in copy and 'href="b.html#x"' in copy, copy
    assert crawl.counters["web.mirror.converted"] >= 1


def test_convert_links_keeps_extensionless_pages_as_html_files_linked_by_that_name(tmp_path, site) -> None:
    """A page served as text/html at /docs/intro (no extension) was kept as the file intro%,
    which a browser opening the mirror from disk shows as text; with convert_links it is kept
    as intro%.html (wget's --adjust-extension) and the other pages link to that name."""
    site.static("/docs/", html("Docs", "docsword", ["/docs/intro", "/docs/intro#part"]), etag='"d"')
    site.static("/docs/intro", html("Intro", "introword", ["/docs/", "/docs/guide?v=2"]), etag='"i"')
    site.static("/docs/guide?v=2", html("Guide", "guideword", ["/docs/intro"]), etag='"g"')
    mirror_dir = tmp_path / "mirror"
    crawl = Crawl(tmp_path, site, seeds=("/docs/",), mirror_dir=str(mirror_dir), convert_links=True)
    crawl.run()
    m = Mirror(mirror_dir, adjust_extension=True)
    docs = m.path_for(site.url("/docs/")).parent
    assert m.file_for(site.url("/docs/intro")) == docs / "intro%.html"
    assert m.file_for(site.url("/docs/guide?v=2")) == docs / "guide@v=2%.html"
    assert not (docs / "intro%").exists()
    index = (docs / "index.html").read_text(encoding="utf-8")
    assert 'href="intro%25.html"' in index and 'href="intro%25.html#part"' in index, index
    intro = (docs / "intro%.html").read_text(encoding="utf-8")
    assert 'href="index.html"' in intro and 'href="guide%40v%3D2%25.html"' in intro, intro


def test_a_page_sniffed_as_html_is_mirrored_and_converted_as_the_html_it_was_indexed_as(tmp_path, site) -> None:
    """A new user's trial: a page served as application/octet-stream (or with no type), which
    extraction sniffed and indexed as HTML, was mirrored under its bare name (no ``%.html``),
    its links not converted and its stylesheet not asked: the mirror decided HTML from the
    Content-Type header alone."""
    site.static("/docs/", html("Docs", "docsword", ["/docs/intro", "/docs/notes"]), etag='"d"')
    site.add("/docs/intro", body=html("Intro", "introword", ["/docs/"], '<link rel="stylesheet" href="site.css">'),
             headers={"Content-Type": "application/octet-stream", "ETag": '"i"'})
    site.add("/docs/notes", body=html("Notes", "notesword", ["/docs/intro"]), headers={"ETag": '"n"'})
    site.add("/docs/site.css", body=b"body { color: black }", headers={"Content-Type": "text/css"})
    mirror_dir = tmp_path / "mirror"
    crawl = Crawl(tmp_path, site, seeds=("/docs/",), mirror_dir=str(mirror_dir), convert_links=True)
    crawl.run()
    assert crawl.search("introword") == [site.url("/docs/intro")]
    docs = Mirror(mirror_dir, adjust_extension=True).path_for(site.url("/docs/")).parent
    assert {p.name for p in docs.iterdir()} == {"index.html", "intro%.html", "notes%.html", "site.css"}
    intro = (docs / "intro%.html").read_text(encoding="utf-8")
    assert 'href="index.html"' in intro and 'href="site.css"' in intro, intro
    assert 'href="notes%25.html"' in (docs / "index.html").read_text(encoding="utf-8")


def test_no_requisites_without_a_mirror_or_when_turned_off(tmp_path, site) -> None:
    """Without ``mirror_dir``, or with ``page_requisites = false``, nothing but pages is asked:
    a stylesheet or script is never requested."""
    _requisite_site(site)
    crawl = Crawl(tmp_path, site, seeds=("/docs/",), include=["/docs/"])
    crawl.run()
    assert site.hits("/docs/css/site.css") == [] and site.hits("/docs/js/app.js") == []
    crawl = Crawl(tmp_path / "off", site, seeds=("/docs/",), include=["/docs/"],
                  mirror_dir=str(tmp_path / "m"), page_requisites=False)
    crawl.run()
    assert site.hits("/docs/css/site.css") == [] and site.hits("/static/logo.png") == []


def test_unwritable_mirror_dir_is_logged_once_per_pass_naming_it(tmp_path, site, caplog) -> None:
    """Fix round: an unwritable ``mirror_dir`` logged one warning per page (414 in a pass),
    none naming the directory.  The first failure of a pass is logged naming it and the error,
    the rest are counted (``error.mirror``, shown by ``ctl status``) and summed in one line at
    the pass's end; the pages are indexed all the same."""
    pages = [f"/p{i}.html" for i in range(12)]
    site.static("/", html("Home", "start", pages), etag='"h"')
    for i, path in enumerate(pages):
        site.static(path, html(f"P{i}", f"mirrorword{i}"))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    mirror_dir = blocker / "mirror"   # under a regular file: no user, root included, can create it
    crawl = Crawl(tmp_path, site, mirror_dir=str(mirror_dir))
    with caplog.at_level(logging.WARNING, logger="indexerd"):
        summary = crawl.run()
    assert summary["indexed"] == 13, summary
    warned = [r.getMessage() for r in caplog.records if "mirror" in r.getMessage()]
    assert len(warned) == 2, warned   # the first failure, and how many failed at the pass's end
    assert str(mirror_dir) in warned[0] and "Not a directory" in warned[0], warned
    assert "13 mirror writes" in warned[1] and str(mirror_dir) in warned[1], warned
    assert crawl.counters["error.mirror"] == 13, crawl.counters
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="indexerd"):
        crawl.run()   # the next pass logs it again, once
    assert len([r for r in caplog.records if "mirror" in r.getMessage()]) == 2


# -- resume ------------------------------------------------------------------------------------------------------
def _resume_site(site: Site, gate: threading.Event) -> None:
    site.static("/", html("Home", "start", [f"/p{i}.html" for i in range(1, 6)]))
    for i in range(1, 6):
        if i == 3:
            def blocked(hit, i=i):
                gate.wait(20)
                return 200, {"Content-Type": "text/html"}, html("P", f"resumeword page{i}")

            site.add(f"/p{i}.html", handler=blocked)
        else:
            site.static(f"/p{i}.html", html("P", f"resumeword page{i}"))


def _wait_for(pred, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError("timed out")
        time.sleep(0.02)


def test_resume_after_cancel_in_process(tmp_path, site) -> None:
    gate = threading.Event()
    _resume_site(site, gate)
    crawl = Crawl(tmp_path, site, workers=4)
    ix = Indexer(parse_config(crawl.config()))
    ix.open("index")
    cancel = threading.Event()
    try:
        t = threading.Thread(target=ix.run_pass, kwargs={"progress": False, "cancel": cancel})
        t.start()
        _wait_for(lambda: site.hits("/p3.html"))
        cancel.set()  # cuts the request in flight at once (issue 17): the pass ends before p3 answers
        t.join(5)
        assert not t.is_alive()
        gate.set()
        ix.flush()
    finally:
        ix.close()
    assert "/p4.html" not in paths(site)
    crawl.run()
    per = requests_per_path(site)
    assert {p: per.get(p) for p in ["/"] + [f"/p{i}.html" for i in range(1, 6)]} == {
        "/": 1, "/p1.html": 1, "/p2.html": 1, "/p3.html": 2, "/p4.html": 1, "/p5.html": 1}
    assert len(crawl.search("resumeword")) == 5
    # the next pass is a new one: every page is re-checked
    site.log.clear()
    crawl.run()
    assert sorted(p for p in paths(site) if p.startswith("/p")) == [f"/p{i}.html" for i in range(1, 6)]


def test_resume_after_sigkill_of_the_cli(tmp_path, site) -> None:
    gate = threading.Event()
    _resume_site(site, gate)
    cfg = tmp_path / "indexerd.toml"
    cfg.write_text(web_config([site.url("/")]))
    cli = CLI(tmp_path / "state", config=cfg)
    proc = subprocess.Popen(cli.command("index", "--json"), env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: site.hits("/p3.html"), timeout=20)
        time.sleep(2.6)  # the crawl state is saved every 2 s, the index committed every 1 s
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    gate.set()
    summary = json.loads(cli.run("index", "--json", timeout=60).stdout)
    per = requests_per_path(site)
    assert {p: per.get(p) for p in ["/"] + [f"/p{i}.html" for i in range(1, 6)]} == {
        "/": 1, "/p1.html": 1, "/p2.html": 1, "/p3.html": 2, "/p4.html": 1, "/p5.html": 1}
    assert summary["errors"] == 0
    assert sorted(h["url"] for h in cli.search("resumeword", "--limit", "20")) == sorted(
        site.url(f"/p{i}.html") for i in range(1, 6))


# -- bad config ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("keys, named", [
    ({"seeds": []}, "sources.web[0].seeds"),
    ({"exclude": ["(unclosed"]}, "sources.web[0].exclude"),
    ({"path_depth": "deep"}, "sources.web[0].path_depth"),
    ({"order": "random"}, "sources.web[0].order"),
    ({"seeds": ["ftp://example.test/"]}, "sources.web[0].seeds"),
    ({"include": ["[a-"]}, "sources.web[0].include"),
])
def test_bad_config_is_refused_with_the_key_named(tmp_path, keys, named) -> None:
    keys = dict(keys)
    seeds = keys.pop("seeds", ["http://example.test/"])
    with pytest.raises(ConfigError) as e:
        parse_config(web_config(seeds, state_dir=tmp_path, **keys), "cfg.toml")
    assert named in str(e.value)
    if "order" in keys:  # and the real CLI says so too
        p = tmp_path / "bad.toml"
        p.write_text(web_config(seeds, state_dir=tmp_path, **keys))
        r = CLI(tmp_path / "state", config=p).run("check-config", check=False)
        assert r.returncode != 0 and named in r.stderr


# -- HTTP basic credentials --------------------------------------------------------------------------
def test_basic_auth_goes_to_the_seed_host_only_and_a_missing_password_is_named(tmp_path, site, monkeypatch) -> None:
    import base64

    with Site() as other:
        other.static("/x.html", html("Other", "otherword"))
        want = "Basic " + base64.b64encode(b"crawler:s3cret").decode()

        def guarded(hit):
            if hit.header("Authorization") != want:
                return 401, {"WWW-Authenticate": 'Basic realm="x"', "Content-Type": "text/plain"}, b"no"
            return 200, {"Content-Type": "text/html"}, html("Home", "secretword", [other.url("/x.html")])

        site.add("/", handler=guarded)
        state = tmp_path / "state"
        cfg = web_config([site.url("/")], state_dir=state, allowed_domains=["127.0.0.1", "localhost"],
                         allowed_ports=[site.port, other.port]) + (
            '[sources.web.auth]\nusername = "crawler"\npassword_env = "INDEXERD_TEST_PW"\n')
        monkeypatch.delenv("INDEXERD_TEST_PW", raising=False)
        ix = Indexer(parse_config(cfg))
        ix.open("index")
        try:
            with pytest.raises(ConfigError, match="auth.password_env: environment variable INDEXERD_TEST_PW"):
                ix.run_pass(progress=False)
        finally:
            ix.close()
        monkeypatch.setenv("INDEXERD_TEST_PW", "s3cret")
        ix = Indexer(parse_config(cfg))
        ix.open("index")
        try:
            s = ix.run_pass(progress=False).as_dict()
        finally:
            ix.close()
        assert s["indexed"] == 2, s
        assert [h.header("Authorization") for h in site.log if h.path == "/"] == [want]
        # the link to another host is followed without the credentials
        assert [h.header("Authorization") for h in other.log if h.path == "/x.html"] == [None]


# -- found by a new user: nothing re-downloaded for no reason, no hostile Crawl-delay --------------
def test_page_skipped_for_its_bytes_is_asked_conditionally_next_time(tmp_path, site) -> None:
    site.static("/", html("Home", "start", ["/blob.html", "/quiet.html"]), etag='"h"')
    site.static("/blob.html", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8, etag='"b1"',
                content_type="text/html")
    site.static("/quiet.html", html("Quiet", "hushword", head='<meta name="robots" content="noindex">'),
                etag='"q1"')
    crawl = Crawl(tmp_path, site)
    first = crawl.run()
    assert (first["indexed"], first["skipped"]) == (1, 2)
    site.log.clear()
    second = crawl.run()
    sent = {h.path: (h.header("If-None-Match"), h.status) for h in site.log if h.path != "/robots.txt"}
    assert sent == {"/": ('"h"', 304), "/blob.html": ('"b1"', 304), "/quiet.html": ('"q1"', 304)}
    assert counts(second) == (3, 0, 3, 0, 0, 0)
    assert {k: v["status"] for k, v in crawl.docs().items()} == {
        site.url("/"): "indexed", site.url("/blob.html"): "skipped", site.url("/quiet.html"): "skipped"}
    # and so on for ever: the 304 kept the skip reason, so the third pass is conditional too
    site.log.clear()
    crawl.run()
    assert all(h.status == 304 for h in site.log if h.path != "/robots.txt"), [(h.path, h.status) for h in site.log]
    assert crawl.doc("/blob.html")["reason"] == "binary" and crawl.doc("/quiet.html")["reason"] == "noindex"


@pytest.mark.alone  # a wall-clock bound (10 s)
def test_hostile_crawl_delay_is_capped_by_max_crawl_delay(tmp_path, site) -> None:
    site.add("/robots.txt", body=b"User-agent: *\nCrawl-delay: 3600\n", headers={"Content-Type": "text/plain"})
    site.static("/", html("Home", "start", ["/a.html"]))
    site.static("/a.html", html("A", "a"))
    crawl = Crawl(tmp_path, site, politeness={**FAST, "max_crawl_delay": "0.3s"})
    started = time.monotonic()
    assert crawl.run()["indexed"] == 2
    assert time.monotonic() - started < 10
    log = site.log
    assert log[2].arrived - log[1].arrived >= 0.3


def test_index_exits_1_when_the_only_site_is_unreachable(tmp_path, site) -> None:
    """Issue 13: ``indexerd index`` exited 0 when the only site could not be reached, so cron and
    monitoring could not tell a dead site from an empty one."""
    site.static("/", html("Home", "homeword"), etag='"h"')
    cfg = tmp_path / "indexerd.toml"
    cfg.write_text(web_config([site.url("/")]))
    cli = CLI(tmp_path / "state", config=cfg)
    assert cli.run("index", "--json", timeout=60).returncode == 0
    site.add("/robots.txt", status=503, body=b"busy", headers={"Content-Type": "text/plain"})
    p = cli.run("index", "--json", check=False, timeout=60)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr[-1000:])
    assert "source site: the pass failed: no seed host answered" in p.stderr, p.stderr[-1000:]
    assert json.loads(p.stdout)["sources"]["site"]["failed"].startswith("no seed host answered")
    assert [h["url"] for h in cli.search("homeword")] == [site.url("/")]     # nothing deleted


def test_a_restart_does_not_crawl_before_the_interval_is_due(tmp_path, site) -> None:
    """Issue 13: ``indexerd index`` then ``indexerd run`` crawled the site twice (1,172 requests
    within 8 s of a restart, with ``interval = "1h"`` and a pass 25 s earlier)."""
    import tempfile

    from conftest import stop_daemon

    site.static("/", html("Home", "homeword", ["/a.html"]), etag='"h"')
    site.static("/a.html", html("A", "alphaword"), etag='"a"')
    base = Path(tempfile.mkdtemp(prefix="ixw"))
    cfg = base / "indexerd.toml"
    cfg.write_text(web_config([site.url("/")], interval="1h", top={"control_socket": str(base / "s.sock")}))
    cli = CLI(base / "state", config=cfg)
    log = open(base / "daemon.log", "wb")
    proc = None
    try:
        assert cli.index()["indexed"] == 2
        site.log.clear()
        proc = subprocess.Popen(cli.command("run", "-c", str(cfg)), env=cli.env,
                                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, (base / "daemon.log").read_text()
            p = cli.run("ctl", "status", "--json", check=False)
            if p.returncode == 0:
                break
            time.sleep(0.2)
        time.sleep(3.0)
        assert paths(site) == [], "the restart crawled the site again"
        st = json.loads(cli.run("ctl", "status", "--json").stdout)["sources"]["site"]
        assert st["last_run"]["finished"] and st["next_run"] > st["last_run"]["finished"], st
        assert len(cli.search("alphaword")) == 1
    finally:
        if proc is not None:
            assert stop_daemon(proc, 20.0) is None, (base / "daemon.log").read_text()[-3000:]
        log.close()
        shutil.rmtree(base, ignore_errors=True)
