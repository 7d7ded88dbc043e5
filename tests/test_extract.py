"""Tests for indexerd.extract: real documents in, the right values out.

Real documents come from ``../shared/corpus`` (Python's HTML docs, licence texts) when it is
there, and from what every Python install has otherwise (pydoc's HTML rendering of ``json``, the
source of ``json/__init__.py``), so the suite passes on a bare checkout too.
"""

from __future__ import annotations

import dataclasses
import io
import json
import pydoc
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexerd.core.errors import SkipDocument
from indexerd.extract import (
    INDEXABLE_TYPES,
    MEDIA_HTML,
    MEDIA_JSON,
    MEDIA_JSON_LINES,
    MEDIA_MARKDOWN,
    MEDIA_PDF,
    MEDIA_TEXT,
    Extracted,
    content_hash,
    decode_text,
    extract,
    guess_media_type,
    parse_refresh,
)

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
PNG_HEAD = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\0\0\0"


@dataclasses.dataclass(frozen=True)
class RealDoc:
    data: bytes
    name: str
    title_part: str  # a substring of the right title
    phrase: str  # a phrase of the visible text


def _corpus(relative: str) -> Path:
    path = CORPUS / relative
    if not path.is_file():
        pytest.skip(f"shared corpus not present ({path})")
    return path


@pytest.fixture(params=["corpus", "stdlib"])
def real_html(request: pytest.FixtureRequest) -> RealDoc:
    if request.param == "corpus":
        path = _corpus("python-docs/library/asyncio-eventloop.html")
        return RealDoc(path.read_bytes(), str(path), "Event Loop", "loop.run_until_complete")
    doc = pydoc.HTMLDoc()
    page = doc.page(pydoc.describe(json), doc.document(json, "json"))
    return RealDoc(page.encode("utf-8"), "json.html", "package json", "JSONDecoder")


@pytest.fixture(params=["corpus", "stdlib"])
def real_text(request: pytest.FixtureRequest) -> RealDoc:
    if request.param == "corpus":
        path = _corpus("text/GPL-3.txt")
        return RealDoc(path.read_bytes(), str(path), "GNU GENERAL PUBLIC LICENSE",
                       "GNU General Public License")
    path = Path(json.__file__)  # json/__init__.py: no known extension, sniffed as text
    return RealDoc(path.read_bytes(), str(path), "JSON (JavaScript Object Notation)",
                   "lightweight data interchange format")


def html(body: str, head: str = "", **kwargs: object) -> Extracted:
    page = f"<!doctype html><html><head>{head}</head><body>{body}</body></html>"
    return extract(page.encode("utf-8"), MEDIA_HTML, **kwargs)


# --------------------------------------------------------------------------- real documents


def test_real_html_page(real_html: RealDoc) -> None:
    result = extract(real_html.data, name=real_html.name)
    assert result.media_type == MEDIA_HTML
    assert result.encoding == "utf-8"
    assert real_html.title_part in result.title
    assert real_html.phrase in result.text
    # white space collapsed outside <pre> blocks (the code examples keep their indentation)
    outside_pre = [line for line in result.text.split("\n") if not line.startswith(" ")]
    assert "\n" in result.text and not any("  " in line for line in outside_pre)
    assert "<" not in result.text.partition("\n")[0]  # markup never leaks into the text
    assert result.links and not result.noindex


def test_real_html_links_resolved_against_base_url(real_html: RealDoc) -> None:
    base = "https://docs.example.test/3/library/page.html"
    result = extract(real_html.data, MEDIA_HTML, base_url=base)
    assert all(link.startswith(("https://", "http://", "file:")) for link in result.links)
    assert len(set(result.links)) == len(result.links)


@pytest.mark.parametrize(
    ("relative", "title", "phrase"),
    [
        ("python-docs/library/asyncio-eventloop.html", "Event Loop", "get_running_loop()"),
        ("python-docs/tutorial/controlflow.html", "More Control Flow Tools",
         "The range() Function"),
        ("python-docs/library/sqlite3.html", "sqlite3", "DB-API 2.0 interface"),
    ],
)
def test_corpus_pages(relative: str, title: str, phrase: str) -> None:
    path = _corpus(relative)
    result = extract(path.read_bytes(), name=str(path))
    assert title in result.title
    assert phrase in result.text
    # the page's scripts are not text
    assert "DOCUMENTATION_OPTIONS" not in result.text
    assert result.title not in result.text.partition("\n")[0]  # <title> is not repeated


def test_whole_corpus_extracts() -> None:
    root = CORPUS / "python-docs"
    if not root.is_dir():
        pytest.skip("shared corpus not present")
    pages = sorted(root.rglob("*.html"))
    assert len(pages) > 100
    for page in pages:
        result = extract(page.read_bytes(), name=str(page))
        assert result.title and result.text, page


def test_concurrent_calls_give_identical_results(real_html: RealDoc) -> None:
    from concurrent.futures import ThreadPoolExecutor

    expected = extract(real_html.data, name=real_html.name)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: extract(real_html.data, name=real_html.name),
                                range(12)))
    assert all(result == expected for result in results)


def test_real_text(real_text: RealDoc) -> None:
    result = extract(real_text.data, name=real_text.name)
    assert result.media_type == MEDIA_TEXT
    assert result.encoding == "utf-8"
    assert real_text.title_part in result.title
    assert real_text.phrase in " ".join(result.text.split())
    assert result.links == () and result.meta == {}


# --------------------------------------------------------------------------- decoding


def test_utf8_bom_is_stripped_and_beats_declared_charset() -> None:
    data = b"\xef\xbb\xbf<title>Gr\xc3\xbc\xc3\x9fe</title><p>x</p>"
    assert decode_text(data, "windows-1252") == ("<title>Grüße</title><p>x</p>", "utf-8")
    result = extract(data, MEDIA_HTML, charset="windows-1252")
    assert (result.title, result.encoding) == ("Grüße", "utf-8")


def test_utf16_le_bom_html_is_not_binary() -> None:
    data = "\ufeff<html><head><title>Grüße</title></head><body><p>Hallo Welt</p></body></html>"
    raw = data.encode("utf-16-le")
    assert raw.startswith(b"\xff\xfe") and b"\x00" in raw
    assert guess_media_type("page.html", raw) == MEDIA_HTML
    assert guess_media_type(None, raw) == MEDIA_HTML
    result = extract(raw, name="page.html")
    assert (result.title, result.text, result.encoding) == ("Grüße", "Hallo Welt", "utf-16-le")


def test_http_charset_beats_meta() -> None:
    data = b'<html><head><meta charset="utf-8"><title>Gr\xfc\xdfe</title></head></html>'
    result = extract(data, "text/html; charset=windows-1252")
    assert (result.title, result.encoding) == ("Grüße", "cp1252")
    assert extract(data, MEDIA_HTML, charset="windows-1252").title == "Grüße"


def test_meta_charset_windows_1252() -> None:
    data = b'<html><head><meta charset="windows-1252"></head><body><p>Gr\xfc\xdfe</p></body>'
    result = extract(data, MEDIA_HTML)
    assert (result.text, result.encoding) == ("Grüße", "cp1252")


def test_meta_http_equiv_content_type_charset() -> None:
    data = (b'<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">'
            b"<p>caf\xe9 \x93quoted\x94</p>")
    result = extract(data, MEDIA_HTML)
    # ISO-8859-1 is decoded as windows-1252 (WHATWG), so 0x93/0x94 are curly quotes
    assert (result.text, result.encoding) == ("café “quoted”", "cp1252")


def test_xml_declaration_encoding() -> None:
    data = b'<?xml version="1.0" encoding="iso-8859-15"?><html><body><p>\xa4uro</p></body></html>'
    assert guess_media_type(None, data) == MEDIA_HTML
    assert extract(data).text == "€uro"


def test_undeclared_utf8() -> None:
    assert decode_text("Grüße".encode()) == ("Grüße", "utf-8")
    assert extract("<p>Grüße</p>".encode(), MEDIA_HTML).text == "Grüße"


def test_short_undeclared_latin1_is_cp1252_not_a_guess() -> None:
    assert decode_text(b"caf\xe9") == ("café", "cp1252")
    assert decode_text(b"na\xefve cr\xe8me br\xfbl\xe9e") == ("naïve crème brûlée", "cp1252")
    assert extract(b"caf\xe9", MEDIA_TEXT).text == "café"


def test_long_undeclared_latin1_is_readable() -> None:
    sentence = "Grüße aus Köln: Straße, Bäcker, Übermut und schöne Größe. "
    text, codec = decode_text((sentence * 40).encode("latin-1"))
    assert "Grüße aus Köln" in text and "\ufffd" not in text
    assert codec != "utf-8"


def test_declared_labels() -> None:
    assert decode_text(b"\x93x\x94", "iso-8859-1") == ("“x”", "cp1252")
    assert decode_text(b"\x93x\x94", "US-ASCII") == ("“x”", "cp1252")
    assert decode_text(b"\x93x\x94", "latin1") == ("“x”", "cp1252")
    # unknown and bytes-to-bytes codec names are ignored, not obeyed
    assert decode_text("é".encode(), "x-no-such-charset") == ("é", "utf-8")
    assert decode_text(b"aGVsbG8=", "base64") == ("aGVsbG8=", "utf-8")
    # a wrong declaration is obeyed, with U+FFFD instead of an exception
    assert decode_text(b"caf\xe9", "utf-8") == ("caf\ufffd", "utf-8")


@given(st.binary(max_size=3000), st.sampled_from([None, "utf-8", "utf-16", "bogus", "rot13",
                                                  "shift_jis", "latin1", ""]),
       st.booleans())
@settings(max_examples=300, deadline=None)
def test_decode_text_never_raises(data: bytes, charset: str | None, sniff: bool) -> None:
    text, codec = decode_text(data, charset, sniff_html=sniff)
    assert isinstance(text, str) and codec
    text.encode("utf-8")  # raises on lone surrogates


# --------------------------------------------------------------------------- media types


@pytest.mark.parametrize(
    ("name", "head", "declared", "expected"),
    [
        (None, b"<p>x", "text/html; charset=utf-8", MEDIA_HTML),
        (None, b"<x/>", "application/xhtml+xml", MEDIA_HTML),
        (None, b"# T", "text/x-markdown", MEDIA_MARKDOWN),
        (None, b"{}", "application/json", MEDIA_JSON),
        ("page.html", b"%PDF-1.7\n", "text/html", MEDIA_PDF),  # the bytes overrule the header
        ("page.html", b"<html>\x00\x01", "text/html", None),
        (None, b"x", "image/png", None),
        ("a.html", PNG_HEAD, "application/octet-stream", None),
        ("index.html", b"<p>x</p>", "application/octet-stream", MEDIA_HTML),
        ("docs/a.HTM", b"plain words", None, MEDIA_HTML),
        ("notes.md", b"# Notes", None, MEDIA_MARKDOWN),
        ("a.markdown", b"x", None, MEDIA_MARKDOWN),
        ("data.csv", b"a,b\n1,2\n", None, MEDIA_TEXT),
        ("config.xml", b"<?xml version='1.0'?><c/>", None, MEDIA_TEXT),
        ("report.pdf", b"%PDF-1.4", None, MEDIA_PDF),
        ("image.png", PNG_HEAD, None, None),
        (None, PNG_HEAD, None, None),
        ("archive.tar.gz", b"\x1f\x8b\x08\x00", None, None),
        ("module.pyc", b"text-looking", None, None),
        ("README", b"This project indexes files.\n", None, MEDIA_TEXT),
        ("LICENSE", b"Copyright (c) 2024 caf\xe9\n", None, MEDIA_TEXT),
        ("script.py", b"import os\n", None, MEDIA_TEXT),
        (None, b"\xef\xbb\xbf  \n<!DOCTYPE HTML PUBLIC>", None, MEDIA_HTML),
        (None, b"<HTML lang=en>", None, MEDIA_HTML),
        (None, b"<body>", None, MEDIA_HTML),
        (None, b"<htmlx>", None, MEDIA_TEXT),
        (None, b"  %PDF-1.5", None, MEDIA_PDF),
        ("https://example.test/a/page.html?session=1#top", b"x", None, MEDIA_HTML),
        ("https://example.test/logo.png?v=2", b"\x89PNG\x00", None, None),
        (None, b"\x01\x02\x03\x04\x05 bytes with many control characters \x06\x07\x08", None, None),
    ],
)
def test_guess_media_type(name: str | None, head: bytes, declared: str | None,
                          expected: str | None) -> None:
    assert guess_media_type(name, head, declared) == expected


def test_indexable_types() -> None:
    from indexerd.extract.formats import FORMAT_TYPES

    assert INDEXABLE_TYPES == {MEDIA_HTML, MEDIA_TEXT, MEDIA_MARKDOWN, MEDIA_PDF, MEDIA_JSON,
                               MEDIA_JSON_LINES} | FORMAT_TYPES


def test_skip_reasons() -> None:
    with pytest.raises(SkipDocument) as caught:
        extract(b"", name="empty.html")
    assert caught.value.reason == "empty" and "empty.html" in caught.value.detail
    for blank in (b"  \n\t ", b"<html><head></head><body>  <p> </p></body></html>",
                  b"<script>var a = 1;</script><!-- only a comment -->",
                  b'<a href="/only-a-link"><img src="x.png"></a>'):
        with pytest.raises(SkipDocument) as caught:
            extract(blank, MEDIA_HTML)
        assert caught.value.reason == "empty"
    with pytest.raises(SkipDocument) as caught:
        extract(b" \n", name="notes.txt")
    assert caught.value.reason == "empty"

    with pytest.raises(SkipDocument) as caught:
        extract(PNG_HEAD + bytes(range(256)) * 4, name="photo.html")
    assert caught.value.reason == "binary" and "photo.html" in caught.value.detail
    with pytest.raises(SkipDocument) as caught:
        extract(b"<html>\x00\x00\x00<body>x", MEDIA_HTML)
    assert caught.value.reason == "binary"
    with pytest.raises(SkipDocument) as caught:
        extract(PNG_HEAD, name="photo.png")
    assert caught.value.reason == "binary"
    with pytest.raises(SkipDocument) as caught:
        extract(b"GIF-looking text", "image/gif")
    assert caught.value.reason == "unsupported-type"


# --------------------------------------------------------------------------- HTML details


def test_title_rules() -> None:
    assert html("<p>x</p>", "<title>\n  Two\t words  </title><title>Second</title>").title == \
        "Two words"
    assert html("<h1> Heading  one </h1><h1>Two</h1><p>x</p>").title == "Heading one"
    assert html("<p>only text</p>").title == ""
    unclosed = extract(b"<html><head><title>Lost " + b"word " * 500, MEDIA_HTML)
    assert len(unclosed.title) == 300 and unclosed.title.startswith("Lost word")


def test_text_blocks_and_hidden_elements() -> None:
    result = html(
        "<div>before<p>para<b>gr</b>aph</p>after</div><ul><li>one</li><li>two</li></ul>"
        "<table><tr><td>c1</td><td>c2</td></tr></table>line<br>break"
        "<script>var secret = 'nonce';</script><style>p{color:red}</style>"
        "<noscript>enable js</noscript><template><p>inert</p></template>"
        "<svg><text>drawing</text><title>tip</title></svg><iframe>fallback</iframe>"
        "<p>Gr&uuml;&szlig;e&nbsp;&amp;  more\n\n words</p>",
        "<title>T</title>",
    )
    assert result.text.split("\n") == [
        "before", "paragraph", "after", "one", "two", "c1", "c2", "line", "break",
        "Grüße & more words",
    ]


def test_meta_tags() -> None:
    result = html(
        "<p>x</p><META NAME='Late' content='in body'>",
        '<meta http-equiv="Last-Modified" content=" Sat, 08 Sep 2001 21:46:40 GMT ">'
        '<meta property="og:title" content="Open Graph title">'
        '<meta name="Description" content="first">'
        '<meta name="description" content="second">'
        '<meta charset="utf-8"><meta name="no-content">',
    )
    assert dict(result.meta) == {
        "last-modified": "Sat, 08 Sep 2001 21:46:40 GMT",
        "og:title": "Open Graph title",
        "description": "first",
        "late": "in body",
    }
    with pytest.raises(TypeError):
        result.meta["x"] = "y"  # type: ignore[index]


@pytest.mark.parametrize(
    ("head", "noindex", "nofollow"),
    [
        ('<meta name="robots" content="NOINDEX, nofollow">', True, True),
        ('<meta name="robots" content="none">', True, True),
        ('<meta name="ROBOTS" content="noindex">', True, False),
        ('<meta name="indexerd" content="nofollow">', False, True),
        ('<meta name="robots" content="index,follow">', False, False),
        ('<meta name="googlebot" content="noindex">', False, False),
        ('<meta name="robots" content="all"><meta name="robots" content="noindex">', True, False),
        ("", False, False),
    ],
)
def test_robots_meta(head: str, noindex: bool, nofollow: bool) -> None:
    result = html("<p>x</p>", head)
    assert (result.noindex, result.nofollow) == (noindex, nofollow)


def test_links_base_canonical_and_order() -> None:
    base_url = "http://example.test/dir/page.html"
    result = html(
        '<a href="b.html">b</a><!-- <a href="/in-comment">c</a> -->'
        "<script>document.write('<a href=\"/in-script\">s</a>')</script>"
        '<a href="javascript:void(0)">j</a><a href="MAILTO:x@example.test">m</a>'
        '<a href="data:text/plain,hi">d</a><a href="">empty</a><a>no href</a>'
        '<a href=" https://other.test/x?sid=1 ">abs</a><a href="b.html">again</a>'
        '<map><area href="../up.html"></map><iframe src="frame.html"></iframe>'
        '<a href="#top">top</a><a href="b.html#s2">section</a>'
        '<img src="img/logo.png"><img src="img/logo.png"><img>',
        '<base href="/base/"><link rel="Alternate Canonical" href="canon.html">'
        '<link rel="canonical" href="second.html">',
        base_url=base_url,
    )
    assert result.links == (
        "http://example.test/base/b.html",
        "https://other.test/x?sid=1",
        "http://example.test/up.html",
        "http://example.test/base/frame.html",
        "http://example.test/base/#top",
        "http://example.test/base/b.html#s2",
    )
    assert result.canonical == "http://example.test/base/canon.html"


def test_links_without_base_url_are_kept_as_written() -> None:
    result = html('<a href="../a.html">a</a><a href="/b">b</a>', '<link rel=canonical href="/c">')
    assert result.links == ("../a.html", "/b")
    assert result.canonical == "/c"
    relative_base = html('<a href="x.html">x</a>', '<base href="/docs/">')
    assert relative_base.links == ("/docs/x.html",)


def test_links_without_base_element_use_base_url() -> None:
    result = html('<a href="x.html#f">x</a><a href="?q=1">q</a><a href="#">self</a>',
                  base_url="https://example.test/a/b.html#old")
    assert result.links == ("https://example.test/a/x.html#f", "https://example.test/a/b.html?q=1",
                            "https://example.test/a/b.html#")


def test_bad_urls_do_not_raise() -> None:
    result = html('<a href="http://[::1/x">bad</a><a href="ok.html">ok</a>',
                  '<base href="http://[bad">', base_url="http://example.test/")
    assert "http://example.test/ok.html" in result.links


def test_frameset_page_gives_links() -> None:
    data = (b"<html><head><title>Frames</title></head>"
            b'<frameset><frame src="nav.html"><frame src="main.html"></frameset></html>')
    result = extract(data, MEDIA_HTML, base_url="http://example.test/")
    assert result.links == ("http://example.test/nav.html", "http://example.test/main.html")
    assert (result.title, result.text) == ("Frames", "")


def test_deeply_nested_html() -> None:
    depth = 5000
    page = "<div>" * depth + '<a href="/deep">deep text</a>' + "</div>" * depth
    result = extract(page.encode(), MEDIA_HTML, base_url="http://example.test/")
    assert result.text == "deep text"
    assert result.links == ("http://example.test/deep",)


@pytest.mark.alone  # a wall-clock bound (5 s)
def test_hundred_thousand_links() -> None:
    count = 100_000
    page = "".join(f'<a href="/p/{i}?s=1#f">link {i}</a> ' for i in range(count))
    start = time.perf_counter()
    result = extract(page.encode(), MEDIA_HTML, base_url="http://example.test/index.html")
    elapsed = time.perf_counter() - start
    assert len(result.links) == count
    assert result.links[0] == "http://example.test/p/0?s=1#f"
    assert result.links[-1] == f"http://example.test/p/{count - 1}?s=1#f"
    assert elapsed < 5.0  # measured about 0.9 s on the 2-core build machine


# --------------------------------------------------------------------------- text, markdown


def test_plain_text() -> None:
    result = extract(b"\n\n   First   line \r\nsecond\tline\n\n\nthird\n", name="notes.txt")
    assert result.title == "First line"
    assert result.text == "   First   line\nsecond\tline\n\nthird"  # its lines as written
    assert result.encoding == "utf-8"
    long_line = extract(b"x" * 500, MEDIA_TEXT, name="long.txt")   # a paragraph, not a title
    assert long_line.title == "long.txt"


@pytest.mark.parametrize(
    ("source", "title"),
    [
        ("# Project *Title* #\n\nBody", "Project Title"),
        ("Intro line\n\n## Second level\n", "Second level"),
        ("Setext Title\n============\n\ntext", "Setext Title"),
        ("Sub title\n---\n", "Sub title"),
        ("```sh\n# not a heading\n```\n\n# Real\n", "Real"),
        ("---\ntitle: \"From Front Matter\"\ndate: 2024-01-01\n---\n# Heading\n",
         "From Front Matter"),
        ("---\nlayout: post\n---\n\n# After Front Matter\n", "After Front Matter"),
        ("No heading, a [link](http://example.test) here\n\nmore", "No heading, a link here"),
        ("#hashtag is not a heading\n", "#hashtag is not a heading"),
        ("***\n\n`First` real line\n", "First real line"),
        # a setext underline under a line of markup only is no heading: the title is the next one
        ("**\n===\n# Real title\n", "Real title"),
    ],
)
def test_markdown_title(source: str, title: str) -> None:
    result = extract(source.encode(), name="README.md")
    assert result.media_type == MEDIA_MARKDOWN
    assert result.title == title


def test_a_texts_layout_is_kept_for_its_preview_and_left_out_of_its_hash() -> None:
    """A new user's trial: the document preview lost a text's indentation and blank lines and a
    page's <pre> lines (extraction collapsed every line).  They are kept; the content hash is
    taken of the collapsed text, so a document extracted before (collapsed) and after (with its
    layout) has one hash and is not indexed again for it."""
    from indexerd.extract.extracted import content_hash

    text = b"Settings\n\n[server]\n    port = 8080\n\tbind = \"::1\"   \n\n\n\n# end\n"
    result = extract(text, MEDIA_TEXT, name="app.ini")
    assert result.text == 'Settings\n\n[server]\n    port = 8080\n\tbind = "::1"\n\n# end'
    old = 'Settings\n[server]\nport = 8080\nbind = "::1"\n# end'  # as extraction gave it before
    assert content_hash("t", result.text) == content_hash("t", old)
    page = (b"<html><body><p>Run   it:</p><pre>\n$ indexerd index\n\nfor x in y:\n    print(x)\n</pre>"
            b"<p>done</p></body></html>")
    for parsed in (extract(page, MEDIA_HTML), extract_html_streaming(page, None, None)):
        assert parsed.text == "Run it:\n$ indexerd index\n\nfor x in y:\n    print(x)\ndone", parsed.text


def test_markdown_text_is_lightly_stripped() -> None:
    source = ("# Title\n\nSome **bold** and `code` with a [link text](https://example.test/x).\n"
              "![alt words](img.png)\n\n> quoted\n\n```python\nprint('hi')\n```\n"
              "[ref]: https://example.test/ref\n")
    result = extract(source.encode(), MEDIA_MARKDOWN)
    assert result.text == ("Title\n\nSome bold and code with a link text.\nalt words\n\nquoted\n\n"
                           "print('hi')")


def test_a_markdown_files_code_and_indentation_are_kept_for_its_preview() -> None:
    """A Markdown file's code blocks lost their indentation in the preview (every line
    collapsed: ``def f():\\nif x:\\nreturn 1``), as its nested lists did; the content hash
    stays the collapsed text's, so a file extracted before is not indexed again for it."""
    source = ("# Setup\n\nRun:\n\n```python\ndef f(x):\n    if x:\n        return  1\n\n    return 2\n```\n\n"
              "- item\n  - nested   item\n\n    indented   code\n      more\n")
    result = extract(source.encode(), MEDIA_MARKDOWN)
    assert result.text == ("Setup\n\nRun:\n\ndef f(x):\n    if x:\n        return  1\n\n    return 2\n\n"
                           "- item\n  - nested item\n\n    indented code\n      more"), result.text
    old = "Setup\n\nRun:\n\ndef f(x):\nif x:\nreturn 1\n\nreturn 2\n\n- item\n- nested item\n\nindented code\nmore"
    assert content_hash("t", result.text) == content_hash("t", old)


def test_section_headings_of_markdown_and_of_an_html_pages_main_content() -> None:
    """Issue 34 (ranking): the headings a document's sections have, for the boosted headings
    field: Markdown's ATX and setext headings outside code fences and front matter; an HTML
    page's h1-h6 inside its main content (not its navigation's), on the DOM path."""
    md = ("---\ntitle: Front\n---\n# Install *indexerd*\n\ntext\n```\n# not a heading\n```\n"
          "Usage\n-----\nmore\n## Config ##\n")
    assert extract(md.encode(), MEDIA_MARKDOWN).headings == "Install indexerd\nUsage\nConfig"
    assert extract(b"no heading here\n", MEDIA_MARKDOWN).headings is None
    page = (b"<html><head><title>T</title></head><body><nav><h3>Next topic</h3></nav><main>"
            b"<h1>4. More Control Flow Tools<a href='#x'>\xc2\xb6</a></h1><p>text</p>"
            b"<h2>4.2. <code>for</code>  Statements</h2><p>more</p></main></body></html>")
    assert extract(page, "text/html").headings == "4. More Control Flow Tools\u00b6\n4.2. for Statements"
    no_main = b"<html><body><h2>Alpha</h2><p>x</p><h3>Beta</h3></body></html>"
    assert extract(no_main, "text/html").headings == "Alpha\nBeta"
    assert extract(b"<html><body><p>x</p></body></html>", "text/html").headings is None
    assert extract(b"plain text\n", "text/plain").headings is None


# --------------------------------------------------------------------------- PDF


def make_pdf(lines: list[str], info: dict[str, str] | None = None) -> bytes:
    """A minimal valid PDF: one page showing ``lines`` in Helvetica, an optional Info dict."""
    ops = [b"BT /F1 18 Tf 72 720 Td 22 TL"]
    for i, line in enumerate(lines):
        escaped = line.encode("latin-1").replace(b"\\", b"\\\\").replace(b"(", b"\\(")
        ops.append(b"(" + escaped.replace(b")", b"\\)") + b") " + (b"'" if i else b"Tj"))
    stream = b"\n".join([*ops, b"ET"])
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    if info:
        objects.append(b"<< " + b" ".join(b"/%s (%s)" % (key.encode(), value.encode("latin-1"))
                                          for key, value in info.items()) + b" >>")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    trailer = b"/Size %d /Root 1 0 R" % (len(objects) + 1)
    if info:
        trailer += b" /Info %d 0 R" % len(objects)
    out += b"trailer\n<< %s >>\nstartxref\n%d\n%%%%EOF\n" % (trailer, xref)
    return bytes(out)


def test_pdf_text_title_and_moddate() -> None:
    data = make_pdf(["Quarterly   figures", "Revenue grew in caf\xe9s"],
                    {"Title": "Quarterly Report", "ModDate": "D:20230501120000+02'00'"})
    result = extract(data, name="report.pdf")
    assert result.media_type == MEDIA_PDF and result.encoding is None
    assert result.title == "Quarterly Report"
    assert result.text == "Quarterly figures\nRevenue grew in cafés"
    assert dict(result.meta) == {"pdf:title": "Quarterly Report",
                                 "pdf:moddate": "2023-05-01T10:00:00Z"}
    assert result.links == () and result.canonical is None


def test_pdf_without_info_takes_first_line() -> None:
    result = extract(make_pdf(["First line here", "second"]), MEDIA_PDF)
    assert result.title == "First line here"
    assert result.meta == {}


def test_pdf_date_without_zone_is_taken_as_utc() -> None:
    result = extract(make_pdf(["x"], {"ModDate": "D:20230501120000"}), MEDIA_PDF)
    assert result.meta["pdf:moddate"] == "2023-05-01T12:00:00Z"


def test_pdf_with_garbage_date_keeps_the_rest() -> None:
    result = extract(make_pdf(["x"], {"Title": "T", "ModDate": "garbage"}), MEDIA_PDF)
    assert result.title == "T" and "pdf:moddate" not in result.meta


def test_pdf_declared_as_html_is_read_as_pdf() -> None:
    result = extract(make_pdf(["Hidden PDF"]), "text/html", name="page.html")
    assert (result.media_type, result.text) == (MEDIA_PDF, "Hidden PDF")


@pytest.mark.parametrize(
    "data",
    [b"%PDF-1.4\nnot really a pdf", b"%PDF-", make_pdf(["cut"])[:180],
     make_pdf(["x"]).replace(b"/Pages 2 0 R", b"/Pages 9 0 R"),
     make_pdf(["x"]).replace(b"/Type /Catalog /Pages 2 0 R", b"/Nothing 1")],
)
def test_corrupt_pdf_is_parse_error(data: bytes) -> None:
    with pytest.raises(SkipDocument) as caught:
        extract(data, name="broken.pdf")
    assert caught.value.reason == "parse-error"
    assert "broken.pdf" in caught.value.detail


def test_encrypted_pdf_is_parse_error() -> None:
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(200, 200)
    writer.encrypt("secret", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    with pytest.raises(SkipDocument) as caught:
        extract(buffer.getvalue(), MEDIA_PDF)
    assert caught.value.reason == "parse-error"


# --------------------------------------------------------------------------- content hash


PAGE = """<html><head><title>Daily news</title>
<script>window.nonce = "{nonce}";</script></head>
<body><div data-ad-id="{ad}"><a href="/story?sessionid={sid}">Read the {word} story</a></div>
<p>Static paragraph.</p></body></html>"""


def _page_hash(nonce: str = "a1", ad: str = "77", sid: str = "s1", word: str = "full") -> str:
    page = PAGE.format(nonce=nonce, ad=ad, sid=sid, word=word)
    result = extract(page.encode(), MEDIA_HTML, base_url="http://example.test/")
    return content_hash(result.title, result.text)


def test_content_hash_ignores_scripts_link_targets_and_attributes() -> None:
    reference = _page_hash()
    assert len(reference) == 64 and int(reference, 16) >= 0
    assert _page_hash(nonce="b2-rotated") == reference
    assert _page_hash(sid="another-session") == reference
    assert _page_hash(ad="1234") == reference


def test_content_hash_sees_visible_changes() -> None:
    assert _page_hash(word="short") != _page_hash()
    assert content_hash("a", "b") != content_hash("ab", "")  # the separator counts
    assert content_hash("T", "x\ud800") == content_hash("T", "x\ud800")  # never raises


# --------------------------------------------------------------------------- robustness

HTML_PIECES = st.sampled_from([
    "<a href='", "'>", "javascript:x", "http://[::1", "//host/p", "#frag", "<base href=",
    "<div>", "</div>", "<p>", "<title>", "</title>", "<h1>", "<meta name=robots content=",
    "noindex", "<meta charset=", "utf-16", "\x00", "é", "\ufeff", "<svg>", "<script>",
    "</script>", "<template>", "<iframe src=x>", "<img src=", "<link rel=canonical href=",
    "&amp;", "&#0;", "<!--", "-->", "<frameset>", "<frame src=f>", " ", "\n", "word",
])


@given(
    data=st.one_of(
        st.binary(max_size=2048),
        st.binary(max_size=512).map(lambda tail: b"%PDF-1.4\n" + tail),
        st.lists(HTML_PIECES, max_size=60).map(lambda parts: "".join(parts).encode()),
        st.text(max_size=300).map(lambda text: text.encode("utf-8", "surrogatepass")),
    ),
    media_type=st.sampled_from([None, MEDIA_HTML, MEDIA_TEXT, MEDIA_MARKDOWN, MEDIA_PDF,
                                "image/png", "text/html; charset=utf-16", "application/json"]),
    charset=st.sampled_from([None, "utf-8", "bogus", "cp1252"]),
    name=st.sampled_from([None, "x.html", "x.pdf", "x.md", "x.png", "README", "x.json", "x.jsonl"]),
    base_url=st.sampled_from([None, "http://example.test/a/b.html", "not a url"]),
)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_extract_returns_or_skips_for_any_bytes(data: bytes, media_type: str | None,
                                                charset: str | None, name: str | None,
                                                base_url: str | None) -> None:
    try:
        result = extract(data, media_type, charset=charset, base_url=base_url, name=name)
    except SkipDocument as skip:
        assert skip.reason in {"empty", "binary", "unsupported-type", "parse-error"}
        return
    assert isinstance(result, Extracted)
    assert result.media_type in INDEXABLE_TYPES
    assert result.title or result.text
    assert "\x00" not in result.text
    lines = result.text.split("\n")  # a text's layout is kept: no trailing white space, no blank runs
    assert all(line == line.rstrip() for line in lines) and "\n\n\n" not in result.text
    assert not result.text or (lines[0].strip() and lines[-1].strip())
    content_hash(result.title, result.text)


def test_import_is_light_and_warning_free() -> None:
    code = ("import sys, indexerd.extract; "
            "heavy = {'selectolax', 'pypdf', 'charset_normalizer'} & set(sys.modules); "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-W", "error", "-c", code], check=True,
                   cwd=Path(__file__).resolve().parents[1])


# -- large HTML: the streaming parser gives what lexbor's DOM gives -----------------------------

from indexerd.extract import html as html_module  # noqa: E402
from indexerd.extract.html import extract_html_lexbor  # noqa: E402
from indexerd.extract.htmlstream import extract_html_streaming  # noqa: E402

FIELDS = ("title", "text", "media_type", "encoding", "meta", "links", "canonical",
          "noindex", "nofollow")

TRICKY_PAGES = [
    "<title>T</title><p>one<b>two</b>three</p><div>four</div>five<br>six",
    "<html><head><title> The  title </title><meta name=robots content='noindex, NOFOLLOW'>"
    "<meta name=description content=' d '><meta http-equiv=Last-Modified content='2024-01-01'>"
    "<meta property='og:title' content=og></head><body>x</body></html>",
    "<head><script>var a = '<p>no</p>';</script><style>p{}</style>visible</head><body>after</body>",
    "<body><svg><text>drawn</text><svg><desc>inner</desc></svg></svg>shown"
    "<noscript>hidden</noscript><template><p>inert</p></template><iframe src=f.html>raw</iframe>end</body>",
    "<base href='/sub/'><a href='x.html'>x</a><a href='#frag'>f</a><area href='../up.html'>"
    "<img src='i.png' alt=''><a href='javascript:void(0)'>j</a>"
    "<a href='mailto:a@b'>m</a><link rel='Canonical Alternate' href='/canon.html'>",
    "<h1>Heading <i>one</i></h1><p>no title element</p><h1>second</h1>",
    "<p>unclosed<p>paragraphs<li>items<p>cells &amp; entities &eacute; &#x41; &nbsp;x",
    "<frameset><frame src='left.html'><frame src='right.html'></frameset>",
    "<table><tr><td>a</td><td>b</td></tr></table><ul><li>c<li>d</ul><pre>  keep\n\n  lines </pre>",
    "<!-- <p>comment</p> --><p>after comment</p><![CDATA[x]]><?php echo ?>",
    "text before any tag<p>then a block",
]


def both(page: str | bytes, base: str | None = "http://example.org/dir/page.html"):
    data = page.encode() if isinstance(page, str) else page
    a = extract_html_lexbor(data, None, base)
    b = extract_html_streaming(data, None, base)  # its own output: no fallback to lexbor
    return ({f: getattr(a, f) for f in FIELDS}, {f: getattr(b, f) for f in FIELDS})


_H = "<!DOCTYPE html><html><head><title>T</title></head><body>"
# Found by a fresh-user run against the first streaming parser (each differed or raised).
TRICKY_PAGES += [
    _H + "<p>before</p> a <![ b ]> c <p>afterword</p>",                 # AssertionError in HTMLParser
    _H + "<p>x <![-- y --]> z <![1]> w <![> v</p>",
    _H + "<![if !IE]><p>shown</p><![endif]><p>afterword</p>",
    _H + "<p>before</p><!-- never closed <p>hiddenq</p>",                # unterminated comment
    _H + "<p>x</p><a href=\"y",                                         # unterminated tag
    "<html><head><title>A &amp; B &lt;c&gt; <b>x</b></title></head><body>t</body></html>",
    _H + "<p>a</p><iframe src='f.html'/><p>afteriframe</p></body></html>",
    _H + "<noscript/><p>afternoscript</p>",
    _H + "<textarea><p>inside</p> &amp; x</textarea><p>after</p>",
    _H + "<xmp><b>raw</b></xmp><p>x</p>",
    _H + "<script>x=1</script ><p>vis</p><SCRIPT>y</SCRIPT><p>vis2</p>",
    "<html><head><noscript><link rel=stylesheet href=x.css></noscript><title>T</title></head><body>x</body>",
    "<html><head><title>T</title><p>text in head?</p></html>",
    "<html><head><title>T</title>hello world<meta name=description content=d><p>more</p>",
    "<html><body><p>x</p><title>Late</title><p>y</p></body></html>",
    "<html><head><title>T</title></head><head><title>T2</title></head><body>b</body>",
    _H + "<p>a\x00b</p>",
    _H + "<p>a&nbsp;b &#0; &#x110000; &unknown; &amp &ampx &#65;&#x42;</p>",
    _H + "<template><template>in</template>still</template><p>out</p>",
    _H + "<script><!-- </script> --></script><p>v</p>",
    _H + "<p>a<?php echo 1 ?>b</p><p>c<!x>d</p>",
    _H + "<p>a < b and c<d e>f and 1<2</p>",
    _H + "<p>x</p><style>p{} secretstyle",
    _H + "<p>" + "x" * (65536 - len(_H) - 6) + "&amp;tail</p>",       # a reference across a chunk
    _H + "<script>" + "y" * (65536 - len(_H) - 12) + "</script><p>after</p>",
    # second fresh-user run: raw-text elements cut by the end of the page, a lone "<" at the end
    "<html><body><p>a</p><title>inside words",
    "<html><head><title>tutitleword more words",
    "<html><body><p>a</p><textarea>inside &amp; words <p>x",
    "<html><body><xmp>raw <b>x",
    "<html><body><plaintext>raw <b>x",
    "<html><body><p>v</p><script>hidden",
    "<html><body><p>a</p>" + "<" * 1000,
    "<html><body><p>a</p></di",
    "<html><body><p>a</p><div " + " ".join(f"a{i}=v" for i in range(2000)) + ">x</div>",
]


@pytest.mark.parametrize("page", TRICKY_PAGES)
def test_streaming_html_equals_lexbor_on_tricky_pages(page) -> None:
    dom, stream = both(page)
    assert stream == dom


HEADING_PAGES = [
    _H + "<h1>Top <i>one</i></h1><p>x</p><h2>Second\n  level</h2><h3></h3><h4>four</h4><p>y</p>",
    _H + "<h2>a<h3>nested</h3>b</h2><script><h2>no</h2></script><h6>six</h6>",
    _H + "<p>text</p><h5>cut by the end",
]


@pytest.mark.parametrize("page", TRICKY_PAGES + HEADING_PAGES)
def test_streaming_html_gives_the_headings_lexbor_gives(page) -> None:
    """The streaming parser gives ``headings`` (the ranking's field) as the DOM path does for a
    page without a main element: it gave none at all, so a large page lost its headings' weight."""
    data = page.encode()
    assert extract_html_streaming(data, None, None).headings == extract_html_lexbor(data, None, None).headings


def test_a_large_page_keeps_its_headings() -> None:
    filler = "<p>" + "filler words here " * 50 + "</p>\n"
    page = (_H + "<h1>Install guide</h1>" + filler * 800 + "<h2>Configure <code>pg_hba</code></h2>"
            + filler * 800 + "</body></html>").encode()
    assert len(page) > html_module.LARGE_HTML_BYTES
    assert extract(page, "text/html", name="big.html").headings == "Install guide\nConfigure pg_hba"


def test_large_page_with_a_malformed_marked_section_is_indexed() -> None:
    """A 1.2 MB page with ``<![ this ]>`` in it failed with AssertionError (parse-error) in the
    streaming parser, and an indexed copy from the previous release was then deleted."""
    filler = "<p>" + "filler words here " * 50 + "</p>\n"
    page = (_H + "<p>msstartword</p>" + filler * 700 + "<p>see <![ this ]> marker</p>" + filler * 700
            + "<p>msendword</p></body></html>").encode()
    assert len(page) > html_module.LARGE_HTML_BYTES
    r = extract(page, "text/html", name="ms.html")
    assert r.title == "T"
    assert "msstartword" in r.text and "see\nmarker" not in r.text and "see  marker" not in r.text
    assert "see marker" in r.text and r.text.endswith("msendword")


def test_streaming_html_differs_only_where_the_parsing_rules_repair_markup() -> None:
    """A ``<td>`` outside a table and a ``<frame>`` outside a frameset: lexbor drops the tag (HTML
    tree construction), the stream keeps its word break and its link; and ``</plaintext>``."""
    dom, stream = both("<p>items<td>cells</p><frame src='fr.html'>")
    assert (dom["text"], dom["links"]) == ("itemscells", ())
    assert (stream["text"], stream["links"]) == ("items\ncells", ("http://example.org/dir/fr.html",))
    # <plaintext> never ends in HTML: lexbor keeps "</plaintext>" as text, the stream ends it
    dom, stream = both("<p>a</p><plaintext><b>bold</b></plaintext>")
    assert (dom["text"], stream["text"]) == ("a\n<b>bold</b></plaintext>", "a\n<b>bold</b>")


def test_streaming_html_equals_lexbor_on_every_real_page(corpus_src) -> None:
    pages = sorted(p for p in corpus_src.rglob("*.htm*") if p.is_file())
    assert len(pages) >= 3
    for p in pages:
        dom, stream = both(p.read_bytes(), f"http://docs.example/{p.name}")
        assert stream == dom, p


def test_one_tag_with_200k_attributes_is_linear(tmp_path) -> None:
    """A 2.9 MB page that is one ``<div>`` with 200,000 attributes: fed in 64 KiB chunks the tag
    was re-parsed from its start at every chunk (the process grew ~210 MB, 2.8 s); in one piece
    ~0.3 s and ~125 MB (HTMLParser's list of 200,000 attribute pairs, then dropped)."""
    page = "<html><body><p>before</p><div " + " ".join(f"a{i}=v{i}" for i in range(200_000)) + \
        ">manyattrsword</div></body></html>"
    path = tmp_path / "attrs.html"
    path.write_text(page)
    script = (
        "import resource, sys\n"
        "from indexerd.extract import extract\n"
        "data = open(sys.argv[1], 'rb').read()\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "r = extract(data, name=sys.argv[1])\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024, repr(r.text))\n")
    out = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True,
                         check=True).stdout
    grown, text = out.split(" ", 1)
    assert text.strip() == repr("before\nmanyattrsword")
    assert int(grown) < 170_000_000, f"grew {int(grown) / 1e6:.0f} MB"


def test_large_html_goes_through_the_stream_with_bounded_memory(tmp_path) -> None:
    """A 6 MB page in a fresh process: lexbor's DOM would hold ~12x the page (about 70 MB),
    the streaming path stays under 3x; the text is complete."""
    section = ("<div class=section><h2>Section {n}</h2><p>Paragraph <b>bold</b> uniqueword{n} with "
               "<a href='s{n}.html'>a link</a> and some <code>code()</code> text.</p>"
               "<ul><li>one</li><li>two</li></ul></div>\n")
    page = "<html><head><title>Big</title></head><body>" + "".join(
        section.format(n=n) for n in range(30_000)) + "</body></html>"
    path = tmp_path / "big.html"
    path.write_text(page)
    assert path.stat().st_size > html_module.LARGE_HTML_BYTES * 5
    script = (
        "import resource, sys\n"
        "from indexerd.extract import extract\n"
        "data = open(sys.argv[1], 'rb').read()\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "r = extract(data, name=sys.argv[1], base_url='http://x/big.html')\n"
        "grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before\n"
        "print(grown * 1024, len(r.links), r.title, 'uniqueword29999' in r.text, r.text.count('Section '))\n")
    out = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True,
                         check=True).stdout.split()
    grown, links, title, last, sections = int(out[0]), int(out[1]), out[2], out[3], int(out[4])
    assert (links, title, last, sections) == (30_000, "Big", "True", 30_000)
    assert grown < 3 * path.stat().st_size, f"extraction grew the process by {grown / 1e6:.0f} MB"


@pytest.mark.parametrize("separator", ["\n", "\x00"])
def test_collapse_lines_in_chunks_equals_the_one_piece_rule(separator) -> None:
    """Texts longer than a chunk are collapsed chunk by chunk, cut at a separator: the result is
    what one split of the whole text gives (runs of separators, a separator at a chunk edge, a
    piece longer than a chunk, trailing blanks)."""
    import random

    from indexerd.extract.whitespace import COLLAPSE_CHUNK_CHARS, collapse_lines

    rng = random.Random(7)
    alphabet = ["word", " ", "  ", "\t", separator, separator * 3, "é", "x" * 50]
    pieces = [rng.choice(alphabet) for _ in range(COLLAPSE_CHUNK_CHARS // 2)]
    pieces.insert(1000, "y" * (COLLAPSE_CHUNK_CHARS + 10))  # one piece longer than a chunk
    text = "".join(pieces) + separator + "  "
    assert len(text) > 3 * COLLAPSE_CHUNK_CHARS
    whole = "\n".join(filter(None, [" ".join(p.split()) for p in text.split(separator)]))
    assert collapse_lines(text, separator) == whole
    edge = "a" * COLLAPSE_CHUNK_CHARS + separator + "b"
    assert collapse_lines(edge, separator) == "a" * COLLAPSE_CHUNK_CHARS + "\nb"


@pytest.mark.alone  # a wall-clock bound (2 s)
def test_page_with_a_tag_of_60k_attributes_is_not_quadratic() -> None:
    """Under 1 MiB but one ``<div>`` with 60,000 attributes: lexbor took 5.5 s (quadratic in the
    attributes of an element); a span of 32 KiB without ``<`` sends the page to the streaming
    parser, which gives the same text."""
    page = ("<html><body><p>before</p><div " + " ".join(f"a{i}=v{i}" for i in range(60_000))
            + ">manyattrsword</div></body></html>").encode()
    assert len(page) < html_module.LARGE_HTML_BYTES
    assert html_module.LONG_SPAN.search(page)
    started = time.perf_counter()
    r = extract(page, "text/html")
    assert r.text == "before\nmanyattrsword"
    assert time.perf_counter() - started < 2.0  # 5.5 s through lexbor; ~0.1 s streamed


@pytest.mark.alone  # a wall-clock bound (1 s)
def test_long_span_check_is_linear_on_a_page_of_lt_signs() -> None:
    page = b"<html><body>" + b"<" * 900_000
    started = time.perf_counter()
    assert html_module.LONG_SPAN.search(page) is None
    assert time.perf_counter() - started < 1.0


# -- <meta http-equiv=refresh> (HTML Living Standard, "shared declarative refresh steps") ---------
@pytest.mark.parametrize("content, expected", [
    ("0; url=/docs/", (0, "/docs/")),
    ("0;URL=/docs/", (0, "/docs/")),
    ("0;url=/docs/", (0, "/docs/")),
    ("0; /docs/", (0, "/docs/")),                     # no url= label
    ("0 /docs/", (0, "/docs/")),
    ("0,url=/docs/", (0, "/docs/")),
    ("  5  ;  URL  =  /docs/  ", (5, "/docs/")),       # a delay, spaces everywhere
    ("0.5; url=/docs/", (0, "/docs/")),               # a fraction is ignored
    (".5; url=/docs/", (0, "/docs/")),
    ("0; url='/docs/'", (0, "/docs/")),               # quotes inside the attribute
    ('0; url="/docs/"', (0, "/docs/")),
    ("0; url='/docs/'junk", (0, "/docs/")),
    ("0; url='/d o\"cs/", (0, "/d o\"cs/")),          # an unclosed quote runs to the end
    ("0; Uri=/docs/", (0, "Uri=/docs/")),             # not the label: the whole rest is the URL
    ("10", None),                                     # a reload of the page itself
    ("0;", None),
    ("", None),
    ("soon; url=/docs/", None),                       # no delay
    ("0x; url=/docs/", None),
])
def test_parse_refresh_follows_the_html_standard(content: str, expected) -> None:
    assert parse_refresh(content) == expected


@pytest.mark.parametrize("tag", [
    '<meta http-equiv="refresh" content="0; url=/docs/">',
    "<META HTTP-EQUIV=REFRESH CONTENT='0;URL=/docs/'>",
    "<meta http-equiv=refresh content=0;url=/docs/>",
    '<meta content="0; /docs/" http-equiv="Refresh">',
    '<meta http-equiv="refresh" content="3; url=\'/docs/\'">',
    '<meta http-equiv="refresh" content=\'0; url="../docs/"\'>',
])
@pytest.mark.parametrize("streaming", [False, True])
def test_refresh_stub_is_a_redirect_not_an_empty_page(tag: str, streaming: bool, monkeypatch) -> None:
    if streaming:
        monkeypatch.setattr("indexerd.extract.html.LARGE_HTML_BYTES", 0)
    page = f"<!doctype html><html><head>{tag}</head><body></body></html>".encode()
    ex = extract(page, "text/html", base_url="http://h.test/old/index.html")
    assert ex.refresh[1] == "http://h.test/docs/" and ex.redirect == "http://h.test/docs/"
    assert ex.text == ""


def test_page_with_text_and_a_slow_refresh_is_a_document_and_links_its_target() -> None:
    page = (b'<html><head><title>News</title><meta http-equiv="refresh" content="300; url=/next/"></head>'
            b"<body><p>Today's news in full.</p></body></html>")
    ex = extract(page, "text/html", base_url="http://h.test/news/")
    assert ex.refresh == (300, "http://h.test/next/") and ex.redirect is None
    assert ex.text == "Today's news in full."


def test_instant_refresh_redirects_even_with_a_please_wait_text() -> None:
    page = (b'<html><head><title>Redirecting</title><meta http-equiv="refresh" content="0; url=/new/">'
            b'</head><body><a href="/new/">Click here if you are not redirected.</a></body></html>')
    ex = extract(page, "text/html", base_url="http://h.test/")
    assert ex.redirect == "http://h.test/new/"


@pytest.mark.parametrize("page", [
    b'<html><head><meta http-equiv="refresh" content="30"></head><body></body></html>',
    b'<html><head><!-- <meta http-equiv="refresh" content="0; url=/x/"> --></head><body></body></html>',
    b'<html><head><meta name="description" content="0; url=/x/"></head><body></body></html>',
])
def test_no_refresh_target_means_an_empty_page(page: bytes) -> None:
    with pytest.raises(SkipDocument) as caught:
        extract(page, "text/html", base_url="http://h.test/")
    assert caught.value.reason == "empty"
