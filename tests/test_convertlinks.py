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


def test_css_urls_of_a_page_and_of_a_stylesheet_are_rewritten_and_nothing_else():
    """wget -k converts CSS too: a page's <style> block and style attributes, and a mirrored
    stylesheet's url() and @import, relative to the stylesheet's own file."""
    from indexerd.sources.web.convertlinks import convert_stylesheet

    page = ('<html><head><style>body { background: url("/docs/bg.png") } /* url(keep) */\n'
            '@import "/docs/more.css"; .x { background: url(data:image/png;base64,AAAA) }</style></head>'
            '<body><div style="background-image: url(\'../img/a.png\')">x</div>'
            '<p style="color: red">url(/docs/text.png) in text stays</p>'
            '<i style="background: url(https://other.example/i.png)">o</i></body></html>').encode()
    out = convert_page(page, "utf-8", PAGE, kept).decode()
    assert 'url("../bg.png")' in out and '@import "../more.css"' in out
    assert "url(data:image/png;base64,AAAA)" in out
    assert "<div style=\"background-image: url('../img/a.png')\">" in out
    assert '<p style="color: red">url(/docs/text.png) in text stays</p>' in out
    assert "url(https://other.example/i.png)" in out
    assert convert_page(b'<p style="color: red">x</p>', "utf-8", PAGE, kept) == b'<p style="color: red">x</p>'

    def kept_from_sheet(url: str, displays: bool) -> str | None:
        if not url.startswith("http://h/docs/"):
            return None
        return relative_path("/m/h/docs/css/site.css", "/m/h" + url[len("http://h"):])

    sheet = ('@charset "utf-8";\n@import url(print.css);\n.a { background: url( "../img/ü.png" ) }\n'
             '@font-face { src: url(/docs/f.woff2) format("woff2"), url(https://cdn.example/f.woff) }\n').encode()
    out = convert_stylesheet(sheet, None, "http://h/docs/css/site.css", kept_from_sheet).decode()
    assert "@import url(print.css);" in out                      # already the right relative path
    assert 'url( "../img/%C3%BC.png" )' in out
    assert "url(../f.woff2) format(\"woff2\")" in out and "url(https://cdn.example/f.woff)" in out
    assert convert_stylesheet(b"a { color: red }", None, "http://h/docs/s.css", kept_from_sheet) == b"a { color: red }"
