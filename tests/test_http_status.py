"""The status and document pages, and the web metrics, of a daemon with a web source (a real
loopback site, tests/httpsite.py) and a tree whose root is missing, in Debian's chromium
(tests/test_http_page.py's browser): what ``ctl status`` and ``ctl explain`` say is on the
pages, readable at a phone's width, and ``/metrics`` counts the fetches by status and the
bytes downloaded.
"""

from __future__ import annotations

import re

import pytest

from daemonhttp import HttpDaemon, serving, short_base
from httpsite import Site
from test_http_api import metrics
from test_http_page import browser_context  # noqa: F401  (the module's browser)
from test_web import LM, html, web_config


PHONE = {"width": 390, "height": 844}
PAGES = {"/": html("Home", "homeword", links=["/a.html", "/missing.html"]),
         "/a.html": html("Alpha page", "alphaword")}
ROBOTS = b"User-agent: *\nDisallow: /private/\n"


@pytest.fixture(scope="module")
def web_daemon():
    base = short_base()
    with Site() as site:
        site.add("/robots.txt", body=ROBOTS, headers={"Content-Type": "text/plain"})
        for path, body in PAGES.items():
            site.static(path, body, last_modified=LM, etag=f'"{len(body)}"')
        d = HttpDaemon(base)
        for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
            d.env.pop(name, None)
        d.env["NO_PROXY"] = "127.0.0.1,localhost"
        d.lost = base / "lost"
        with open(d.cfg, "a", encoding="utf-8") as f:
            f.write(f'\n[[sources.filesystem]]\nname = "lost"\npath = "{d.lost}"\n\n')
            f.write(web_config([site.url("/")], name="intranet", interval="1h"))
        d.site = site
        with serving(d):
            yield d


@pytest.fixture
def phone(browser_context):  # noqa: F811
    pg = browser_context.new_page()
    pg.set_viewport_size(PHONE)
    yield pg
    pg.close()


def _lines_of(el) -> int:
    """How many lines the text of an element takes (its text's client rectangles)."""
    return el.evaluate("e => { const r = document.createRange(); r.selectNodeContents(e);"
                       " return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size; }")


def test_status_page_shows_sources_runs_errors_and_hosts_on_a_phone(web_daemon, phone):
    d = web_daemon
    st = d.get_json("/api/status")
    phone.goto(d.url + "/status")
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    for name, src in st["sources"].items():
        row = phone.locator("#sources tbody tr", has=phone.locator(f'th:text-is("{name}")'))
        assert row.count() == 1, name
        assert _lines_of(row.locator("th")) == 1, f"the source name {name} is broken over lines"
        text = row.inner_text()
        assert src["last_run"]["started"] in text and src["last_run"]["finished"] in text
        assert src["next_run"] in text
    lost = phone.locator("#sources tbody tr", has=phone.locator('th:text-is("lost")'))
    message = st["sources"]["lost"]["last_error"]["message"]
    assert "missing" in message and message in lost.locator(".last-error").inner_text()
    assert phone.locator("#sources tbody tr", has=phone.locator('th:text-is("notes")')) \
        .locator(".last-error").inner_text() == "-"
    host = f"http://127.0.0.1:{d.site.port}"
    assert host in st["hosts"]
    hosts = phone.locator("#hosts tbody tr", has=phone.locator(f'th:text-is("{host}")'))
    assert hosts.count() == 1
    facts = hosts.inner_text()
    for key in ("in_flight", "next_in", "failures", "last_delay"):
        assert key in facts, (key, facts)


def test_document_page_says_what_ctl_explain_says(web_daemon, phone):
    d = web_daemon
    url = d.site.url("/a.html")
    p = d.ctl("explain", url)
    assert p.returncode == 0, p.stderr
    fields, why = {}, []
    for line in p.stdout.splitlines():
        if line.startswith("- "):
            why.append(line[2:])
        else:
            k, v = re.match(r"(\S+)\s+(.*)$", line).groups()
            fields[k] = v
    assert "recrawl" in fields and any(w.startswith("next recrawl due") for w in why)
    phone.goto(d.url + "/doc?key=" + url)
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page_fields = {}
    for row in phone.locator("#facts tr").all():
        page_fields[row.locator("th").inner_text()] = row.locator("td").inner_text()
    assert page_fields == fields
    assert phone.locator("#explanation li").all_inner_texts() == why
    assert phone.locator("p.where a").get_attribute("href") == url   # a web page links to its URL
    for th in phone.locator("#facts th").all():
        assert _lines_of(th) == 1, th.inner_text()


def test_metrics_count_fetches_by_status_and_bytes_downloaded(web_daemon):
    d = web_daemon
    m = metrics(d)
    got = {dict(labels)["status"]: v for (name, labels), v in m.items() if name == "indexerd_fetches_total"}
    served = [h for h in d.site.log if h.status is not None]
    by_status: dict[str, int] = {}
    for h in served:
        by_status[str(h.status)] = by_status.get(str(h.status), 0) + 1
    assert got == by_status and got["200"] >= 3 and got["404"] == 1, (got, by_status)
    assert m[("indexerd_downloaded_bytes_total", ())] >= len(ROBOTS) + sum(map(len, PAGES.values()))
    assert m[("indexerd_documents_failed_total", (("reason", "root-missing"),))] >= 1


def test_the_status_page_shows_the_cluster_passs_totals_and_each_nodes_share() -> None:
    """Issue 30: the status page of any node of a cluster shows each web source's cluster pass
    (ctl status's ``cluster.passes``): its totals and each node's share (the real application
    and template, werkzeug's test client, a status document as a node of three gives it)."""
    from werkzeug.test import Client

    from indexerd.daemon.http.app import SearchApp
    from indexerd.daemon.http.auth import TokenCheck

    doc = {"pid": 1, "uptime_seconds": 3.0, "state_dir": "/s", "config": None, "reload": None,
           "index": {"documents": 30, "size_bytes": 1, "segments": 1}, "writer": {"commits": 1, "queue": 0},
           "change_queue": 0, "sources": {}, "hosts": {}, "counters": {"web.fenced_writes": 2},
           "cluster": {"node": "n2", "frontier": [], "passes": {"site": {
               "pass_id": 4, "fetched": 30, "errors": 1, "done": 30, "queued": 0,
               "nodes": {"n1": {"fetched": 10, "errors": 0}, "n2": {"fetched": 12, "errors": 1},
                         "n3": {"fetched": 8, "errors": 0}}}}}}

    class Backend:
        def status(self):
            return doc

    page = Client(SearchApp(Backend(), TokenCheck(None))).get("/status").get_data(as_text=True)
    row = re.search(r'<table class="passes" id="cluster-passes">.*?</table>', page, re.S)
    assert row is not None, page
    cells = re.sub(r"<[^>]+>", " ", row.group(0))
    assert " ".join(cells.split()).endswith("site 4 30 1 30 0 n1 10, n2 12 (1 unanswered), n3 8"), cells
    assert "this node: n2" in page
