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


# -- identical content under two URLs of one host: one document (duplicate detection) ------------
def test_index_html_and_slash_are_one_document(tmp_path, site) -> None:
    home = html("Home", "wombat welcome", ["/index.html", "/a.html"])
    site.static("/", home, etag='"h1"')
    site.static("/index.html", home, etag='"h1"')
    site.static("/a.html", html("A", "page a", ["/index.html"]))
    crawl = Crawl(tmp_path, site)
    s = crawl.run()
    assert crawl.search("wombat") == [site.url("/")]
    alias = crawl.doc("/index.html")
    assert (alias["status"], alias["reason"]) == ("skipped", "duplicate")
    assert site.url("/") in alias["detail"]
    assert (s["indexed"], s["skipped"]) == (2, 1), s
    assert crawl.counters.get("skip.duplicate") == 1
    # a second pass keeps it that way, and counts the alias again
    s = crawl.run()
    assert crawl.search("wombat") == [site.url("/")]
    assert (s["unchanged"], s["skipped"], s["indexed"]) == (2, 1, 0), s
    # the kept page changes: the alias is its own document again at its next fetch
    site.static("/", html("Home", "wombat welcome, now with news", ["/index.html", "/a.html"]), etag='"h2"')
    s = crawl.run()
    assert sorted(crawl.search("wombat")) == sorted([site.url("/"), site.url("/index.html")])
    assert crawl.doc("/index.html")["status"] == "indexed"


def test_the_shorter_url_is_kept_whichever_is_found_first(tmp_path, site) -> None:
    page = html("Report", "quokka annual report")
    site.static("/", html("Home", "start", ["/reports/2024/index.html"]))
    site.static("/reports/2024/index.html", page)
    crawl = Crawl(tmp_path, site)
    crawl.run()
    assert crawl.search("quokka") == [site.url("/reports/2024/index.html")]
    # later a shorter URL for the same bytes appears: it becomes the key, the long one its alias
    site.static("/", html("Home", "start", ["/reports/2024/index.html", "/r/2024"]))
    site.static("/r/2024", page)
    crawl.run()
    assert crawl.search("quokka") == [site.url("/r/2024")]
    alias = crawl.doc("/reports/2024/index.html")
    assert (alias["status"], alias["reason"]) == ("skipped", "duplicate")
    crawl.run()
    assert crawl.search("quokka") == [site.url("/r/2024")]
    assert crawl.doc("/reports/2024/index.html")["reason"] == "duplicate"


def test_same_content_on_two_hosts_is_two_documents(tmp_path, site) -> None:
    page = html("Mirror", "platypus mirrored text")
    site.static("/", html("Home", "start", ["/p.html", f"http://localhost:{site.url('/').split(':')[2]}"]))
    site.static("/p.html", page)
    crawl = Crawl(tmp_path, site, allowed_domains=["127.0.0.1", "localhost"])
    crawl.run()
    docs = crawl.docs()
    assert docs[site.url("/")]["status"] == "indexed"
    lh = "http://localhost:" + site.url("/").split(":")[2]
    assert docs[lh]["status"] == "indexed"  # same bytes as / but another host
