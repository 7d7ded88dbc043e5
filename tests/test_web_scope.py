"""The web crawl's hardening (issue 18): one scope gate for every way a URL enters the frontier,
bounded frontiers, and URLs that are not URLs.  Real loopback sites, real passes."""

from __future__ import annotations

import time

from httpsite import Site
from httpsite import site as site_fixture
from test_web import Crawl, _no_proxy, html  # noqa: F401 - _no_proxy is an autouse fixture

site = site_fixture  # the fixture (see tests/httpsite.py)
HTML = {"Content-Type": "text/html"}


def test_bad_host_links_are_dropped_and_counted_and_a_trailing_dot_host_is_the_same_site(tmp_path, site, caplog):
    # issue 18: http://..x/ logged a traceback and counted as a pass error; seed.test. made duplicates
    port = site.port
    site.add("/", body=html("Home", "home", ["/a.html", f"http://localhost.:{port}/a.html", "http://..x/",
                                             f"http://a..b:{port}/", "http://.x/y"]), headers=HTML)
    site.add("/a.html", body=html("A", "aword"), headers=HTML)
    crawl = Crawl(tmp_path, site, seeds=(f"http://localhost:{port}/",))
    s = crawl.run()
    assert (s["indexed"], s["errors"]) == (2, 0), s
    assert crawl.counters.get("web.drop.invalid") == 3, crawl.counters
    assert "Traceback" not in caplog.text
    assert crawl.search("aword") == [f"http://localhost:{port}/a.html"]
    assert [h.path for h in site.log].count("/a.html") == 1


def test_check_config_masks_a_seed_password(tmp_path):
    from conftest import CLI

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\n[[sources.web]]\nname = "w"\n'
                   'seeds = ["https://bot:S3cr%40t-pw@intranet.example/docs/?a=1", "https://plain.example/"]\n',
                   encoding="utf-8")
    p = CLI(tmp_path / "state", cfg).run("check-config")
    out = p.stdout + p.stderr
    assert "S3cr" not in out
    assert '"https://bot:***@intranet.example/docs/?a=1"' in p.stdout
    assert '"https://plain.example/"' in p.stdout


def _cancelled_pass(crawl: Crawl, site, path: str, gate) -> None:
    """Run one pass in a thread and stop it (its cancel Event) once ``path`` was requested; then
    open ``gate`` (the hanging handler's)."""
    import threading

    from indexerd.config import parse_config
    from indexerd.runtime.indexer import Indexer

    ix = Indexer(parse_config(crawl.config()))
    ix.open("index")
    cancel = threading.Event()
    try:
        t = threading.Thread(target=ix.run_pass, kwargs={"progress": False, "cancel": cancel})
        t.start()
        deadline = time.monotonic() + 20
        while not site.hits(path) and time.monotonic() < deadline:
            time.sleep(0.02)
        cancel.set()
        t.join(10)
        assert not t.is_alive()
        gate.set()
        ix.flush()
    finally:
        ix.close()


def _sitemap(*locs: str) -> bytes:
    urls = "".join(f"<url><loc>{u}</loc><lastmod>2020-01-01</lastmod></url>" for u in locs)
    return (f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
            ).encode()


def test_sitemap_entries_out_of_scope_are_never_stored_nor_fetched_by_a_resumed_pass(tmp_path, site):
    # issue 18: sitemap rows were stored before the scope check; the resumed pass fetched them
    import threading

    with Site() as other:
        other.static("/o.html", html("Other", "otherword"))
        gate = threading.Event()

        def hang(hit):
            gate.wait(20)
            return 200, HTML, html("Hang", "hangword")

        site.add("/", body=html("Home", "home", ["/hang.html"]), headers=HTML)
        site.add("/hang.html", handler=hang)
        site.add("/orphan.html", body=html("Orphan", "orphanword"), headers=HTML)
        site.add("/sitemap.xml", headers={"Content-Type": "application/xml"}, body=_sitemap(
            site.url("/orphan.html"), site.url("/private/x.html"), other.url("/o.html"),
            f"http://localhost:{site.port}/h.html", site.url("/t/a/b/a/b/"), site.url("/x/x/x/x/x.html")))
        site.add("/private/x.html", body=html("Private", "privateword"), headers=HTML)
        crawl = Crawl(tmp_path, site, sitemaps=True, workers=1, exclude=["/private/"])
        _cancelled_pass(crawl, site, "/hang.html", gate)
        assert site.hits("/sitemap.xml") and site.hits("/hang.html")
        stored = set(crawl.crawl_rows())
        for url in (site.url("/private/x.html"), other.url("/o.html"), f"http://localhost:{site.port}/h.html",
                    site.url("/t/a/b/a/b/"), site.url("/x/x/x/x/x.html")):
            assert url not in stored, url
        crawl.run()  # resumes the interrupted pass
        asked = [h.path for h in site.log]
        assert other.log == []
        assert not any(p.startswith(("/private/", "/h.html", "/t/", "/x/")) for p in asked), asked
        assert crawl.search("orphanword") == [site.url("/orphan.html")]
        assert crawl.search("hangword") == [site.url("/hang.html")]


def test_redirects_and_robots_redirects_to_another_port_are_not_followed(tmp_path, site):
    # issue 18: a redirect to another port of the seed host reached another local service, and a
    # robots.txt redirect was followed to any host
    with Site() as other:
        other.static("/x.html", html("Other", "otherword"))
        other.add("/robots.txt", body=b"User-agent: *\nDisallow:\n", headers={"Content-Type": "text/plain"})
        site.redirect("/robots.txt", other.url("/robots.txt"), 301)
        site.add("/", body=html("Home", "home", ["/r"]), headers=HTML)
        site.redirect("/r", other.url("/x.html"))
        crawl = Crawl(tmp_path, site)
        crawl.run()
        assert other.log == []
        assert crawl.counters.get("web.drop.redirect-off-port") == 1, crawl.counters
        assert crawl.counters.get("web.drop.robots-redirect-off-port") == 1, crawl.counters
        assert crawl.counters.get("web.robots.allow-all") == 1, crawl.counters
        assert crawl.search("otherword") == []


def test_the_frontier_asks_the_gate_just_before_handing_a_url_out():
    from indexerd.sources.web.frontier import Frontier, Task
    from indexerd.sources.web.politeness import HostSlots
    from indexerd.sources.web.httpresponse import Response
    from indexerd.sources.web.robots import RobotsCache

    robots = RobotsCache()
    host = "http://seed.test:80"
    robots.put_response(host, Response(url=host + "/robots.txt", method="GET", status=200, headers={}, body=b"",
                                       elapsed=0.0))  # an empty robots.txt: everything allowed
    asked = []

    def gate(task):
        asked.append(task.url)
        return "exclude" if "/private/" in task.url else None

    f = Frontier("breadth", HostSlots(), robots, 10, gate=gate)
    f.put(Task(url="http://seed.test/private/a", host=host, seq=1))
    f.put(Task(url="http://seed.test/b", host=host, seq=2))
    first = f.take()
    assert (first.url, first.skip) == ("http://seed.test/private/a", "exclude")
    f.finish(first)
    second = f.take()
    assert (second.url, second.skip) == ("http://seed.test/b", None)
    assert asked == ["http://seed.test/private/a", "http://seed.test/b"]
    assert f.requests == 1  # the dropped URL spent no budget


def test_numbered_paths_and_path_parameters_are_bounded_per_pattern(tmp_path, site):
    # issue 18: /page/1 .. /page/99999 and /a;jsessionid=.. were bounded by max_pages alone
    def numbered(hit):
        n = int(hit.path.rsplit("/", 1)[1])
        return 200, HTML, html(f"Page {n}", f"page {n}", [f"/page/{n + 1}"])

    def session(hit):
        n = int(hit.path.rsplit("=", 1)[1])
        return 200, HTML, html(f"S {n}", "session", [f"/a;jsessionid={n + 1}"])

    site.add("/", body=html("Home", "home", ["/page/1", "/a;jsessionid=1", "/2020/01/post.html"]), headers=HTML)
    site.add("/page", handler=numbered)
    for n in range(1, 60):
        site.add(f"/page/{n}", handler=numbered)
        site.add(f"/a;jsessionid={n}", handler=session)
    site.add("/2020/01/post.html", body=html("Post", "postword"), headers=HTML)
    crawl = Crawl(tmp_path, site, max_numbered_variants=20, max_query_variants=5)
    crawl.run()
    asked = [h.path for h in site.log]
    assert sum(p.startswith("/page/") for p in asked) == 20, asked
    assert sum(p.startswith("/a;") for p in asked) == 5, asked
    assert crawl.counters.get("web.trap.numbered-path") == 1, crawl.counters
    assert crawl.counters.get("web.trap.path-parameters") == 1, crawl.counters
    assert crawl.search("postword") == [site.url("/2020/01/post.html")]


def test_the_frontier_beyond_its_window_waits_on_disk_and_every_url_is_still_fetched(tmp_path, site):
    # issue 18: keep the frontier on disk beyond a bounded in-memory window
    site.add("/", body=html("Home", "home", [f"/d{i}.html" for i in range(30)]), headers=HTML)
    for i in range(30):
        site.add(f"/d{i}.html", body=html(f"D{i}", f"spillword d{i}", [f"/e{i}.html"]), headers=HTML)
        site.add(f"/e{i}.html", body=html(f"E{i}", f"spillword e{i}"), headers=HTML)
    crawl = Crawl(tmp_path, site, max_queued=4)
    s = crawl.run()
    assert s["indexed"] == 61, s
    assert crawl.counters.get("web.frontier.spilled", 0) >= 30 - 4, crawl.counters
    assert crawl.counters.get("web.frontier.refilled") == crawl.counters["web.frontier.spilled"], crawl.counters
    assert "web.drop.frontier-full" not in crawl.counters
    asked = [h.path for h in site.log if h.path.endswith(".html")]
    assert sorted(asked) == sorted({*asked}) and len(asked) == 60  # each once
    assert crawl.search("e29") == [site.url("/e29.html")]  # one that waited on disk
    assert all(r["state"] != "spilled" for r in crawl.crawl_rows().values())


def test_a_resumed_pass_takes_back_the_urls_that_waited_on_disk(tmp_path, site):
    import threading

    gate = threading.Event()

    def hang(hit):
        gate.wait(20)
        return 200, HTML, html("D5", "resumeword d5")

    site.add("/", body=html("Home", "home", [f"/d{i}.html" for i in range(30)]), headers=HTML)
    for i in range(30):
        if i == 5:
            site.add("/d5.html", handler=hang)
        else:
            site.add(f"/d{i}.html", body=html(f"D{i}", f"resumeword d{i}"), headers=HTML)
    crawl = Crawl(tmp_path, site, max_queued=4, workers=1)
    _cancelled_pass(crawl, site, "/d5.html", gate)
    waiting = [r for r in crawl.query("SELECT url, state FROM crawl") if r["state"] == "spilled"]
    assert len(waiting) >= 20, waiting  # on disk, not lost with the process
    s = crawl.run()
    asked = [h.path for h in site.log if h.path.startswith("/d")]
    assert sorted(set(asked)) == sorted(f"/d{i}.html" for i in range(30))
    assert len(asked) == 31  # each once, the cut one twice
    assert s["indexed"] == 30 - 5 + 0, s  # what the first pass did stays done
    assert crawl.search("d29") == [site.url("/d29.html")]


def test_a_bad_seed_is_named_without_its_password(tmp_path):
    from conftest import CLI

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\n[[sources.web]]\nname = "w"\n'
                   'seeds = ["https://bot:S3cretpw@intranet.example:99999/"]\n', encoding="utf-8")
    p = CLI(tmp_path / "state", cfg).run("check-config", check=False)
    assert p.returncode == 2, p
    assert "S3cretpw" not in p.stdout + p.stderr
    assert "https://bot:***@intranet.example:99999/" in p.stderr
