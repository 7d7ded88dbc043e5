"""Links made for offline browsing in a mirror's copy (indexerd.sources.web.convertlinks)."""

from __future__ import annotations

from indexerd.sources.web.convertlinks import convert_page, relative_path

PAGE = "http://h/docs/a/page.html"


def kept(url: str, displays: bool) -> str | None:
    """Everything under http://h/docs/ is kept, at a path named after the URL."""
    if not url.startswith("http://h/docs/"):
        return None
    return relative_path("/m/h/docs/a/page.html", "/m/h" + url[len("http://h"):].split("?")[0])


def test_every_url_attribute_is_rewritten_and_nothing_else_changes():
    page = ('<html><head><link rel=stylesheet href=/docs/s.css><base href="/docs/a/"></head>'
            '<body class="x"  data-keep="/docs/no.html"><a href="b.html#sec">b</a>'
            "<a href='/docs/c/d.html?x=1&amp;y=2'>d</a><a href=\"https://other.example/p\">o</a>"
            '<img src="../i.png" srcset="../i.png 1x, ../i2.png 2x"><a href="#top">t</a>'
            '<a href="mailto:x@y">m</a><p>href="/docs/text.html" stays</p></body></html>').encode()
    out = convert_page(page, "utf-8", PAGE, kept).decode()
    assert '<link rel=stylesheet href="../s.css">' in out
    assert "<base" not in out
    assert 'data-keep="/docs/no.html"' in out and '<body class="x"  data-keep' in out
    assert '<a href="b.html#sec">' in out
    assert "<a href='../c/d.html'>" in out
    assert '<a href="https://other.example/p">' in out
    assert '<img src="../i.png" srcset="../i.png 1x, ../i2.png 2x">' in out
    assert '<a href="#top">' in out and '<a href="mailto:x@y">' in out
    assert '<p>href="/docs/text.html" stays</p>' in out


def test_a_legacy_charset_page_keeps_its_bytes_around_the_links():
    page = '<html><head><meta charset="windows-1252"></head><body>café “quoted” <a href="/docs/x.html">x</a></body></html>'
    data = page.encode("cp1252") + b"\x81"   # a byte cp1252 leaves undefined
    out = convert_page(data, None, PAGE, kept)
    assert out == data.replace(b'href="/docs/x.html"', b'href="../x.html"')


def test_a_page_without_links_to_convert_is_returned_as_it_came():
    data = b"<html><body><p>no links</p><a href='https://elsewhere.example/'>x</a></body></html>"
    assert convert_page(data, None, PAGE, kept) == data


def test_relative_paths_are_percent_encoded_file_names():
    assert relative_path("/m/h/a/b.html", "/m/h/c/d e%3F.html") == "../c/d%20e%253F.html"
    assert relative_path("/m/h/a/b.html", "/m/h/a/index.html") == "index.html"
