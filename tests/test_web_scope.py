"""The web crawl's hardening (issue 18): one scope gate for every way a URL enters the frontier,
bounded frontiers, and URLs that are not URLs.  Real loopback sites, real passes."""

from __future__ import annotations

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
