"""Document keys of the web crawler, end to end on the loopback site (tests/httpsite.py): link
URLs encoded as the WHATWG URL Standard says, and one document for identical content under two
URLs of one host (duplicate detection)."""

from __future__ import annotations

from httpsite import site as site_fixture
from test_web import Crawl, html, requests_per_path

site = site_fixture


def test_link_query_is_encoded_in_the_page_encoding(tmp_path, site) -> None:
    page = ('<html><head><meta charset="windows-1252"><title>Accueil</title></head><body>'
            '<a href="s?q=été">raw</a> <a href="s?q=%E9t%E9">pre-encoded</a> <a href="s?q=%e9t%e9">lower</a>'
            '<a href="pé.html?x=é">path</a> <a href="k?q=日">unencodable</a></body></html>').encode("cp1252", "xmlcharrefreplace")
    # the unencodable character is written as a character reference in the page: decoded it is 日
    site.add("/", body=page, headers={"Content-Type": "text/html"})
    site.add("/s?q=%E9t%E9", body=html("Search", "ete results"), headers={"Content-Type": "text/html"})
    site.add("/p%C3%A9.html?x=%E9", body=html("Path", "utf8 path"), headers={"Content-Type": "text/html"})
    site.add("/k?q=%26%2326085%3B", body=html("Kanji", "kanji query"), headers={"Content-Type": "text/html"})
    crawl = Crawl(tmp_path, site)
    s = crawl.run()
    per = requests_per_path(site)
    assert per == {"/robots.txt": 1, "/": 1, "/s?q=%E9t%E9": 1, "/p%C3%A9.html?x=%E9": 1,
                   "/k?q=%26%2326085%3B": 1}, per
    assert set(crawl.docs()) == {site.url(p) for p in ("/", "/s?q=%E9t%E9", "/p%C3%A9.html?x=%E9",
                                                       "/k?q=%26%2326085%3B")}
    assert s["indexed"] == 4


def test_utf8_page_keeps_utf8_queries(tmp_path, site) -> None:
    page = ('<html><head><meta charset="utf-8"><title>Home</title></head><body>'
            '<a href="s?q=été">raw</a> <a href="s?q=%C3%A9t%C3%A9">pre-encoded</a></body></html>').encode()
    site.add("/", body=page, headers={"Content-Type": "text/html; charset=utf-8"})
    site.add("/s?q=%C3%A9t%C3%A9", body=html("Search", "results"), headers={"Content-Type": "text/html"})
    crawl = Crawl(tmp_path, site)
    crawl.run()
    assert requests_per_path(site) == {"/robots.txt": 1, "/": 1, "/s?q=%C3%A9t%C3%A9": 1}
