"""Web pages of the new formats (issue 15): asked with HEAD first (their URLs do not look like
HTML), fetched with GET when their type is indexed, and extracted as files are, with the
document's own date as the ``document`` date source; a zip bomb and a truncated .gz served over
HTTP are skipped with their exact reasons; a 304 on the next pass costs no body."""

from __future__ import annotations

import gzip
import time

import pytest

from httpsite import site as site_fixture
from test_formats import RTF, make_docx, make_epub, make_message, make_odf, zip_bomb_docx
from test_postscript import make_ps
from test_web import Crawl, counts, html

from indexerd.extract import formats as F

site = site_fixture

DOCX_TYPE = F.MEDIA_DOCX


def test_office_epub_mail_rtf_and_gz_pages_head_first_then_indexed(tmp_path, site) -> None:
    changelog = gzip.compress(b"pkg (1.0-1) unstable; urgency=low\n\n  * webgzword\n" * 50)
    pages = {
        "/files/plan.docx": (make_docx(body=("webdocxword",)), DOCX_TYPE),
        "/files/text.odt": (make_odf("odt"), "application/vnd.oasis.opendocument.text"),
        "/files/book.epub": (make_epub(), "application/epub+zip"),
        "/files/minutes.rtf": (RTF, "application/octet-stream"),  # generic: the bytes decide
        "/files/lunch.eml": (make_message(body="webemlword").as_bytes(), "message/rfc822"),
        "/files/changelog.gz": (changelog, "application/gzip"),
        "/files/bomb.docx": (zip_bomb_docx(), DOCX_TYPE),
        "/files/cut.txt.gz": (changelog[: len(changelog) // 2], "application/gzip"),
    }
    site.static("/", html("Home", "start", list(pages)))
    for path, (body, ctype) in pages.items():
        site.static(path, body, content_type=ctype, last_modified="Mon, 01 Jan 2024 00:00:00 GMT")
    crawl = Crawl(tmp_path, site)
    s = crawl.run()
    log = [(h.method, h.path) for h in site.log]
    for path in pages:
        assert [m for m, p in log if p == path] == ["HEAD", "GET"], (path, log)
    for word, path in (("webdocxword", "/files/plan.docx"), ("otter", "/files/text.odt"),
                       ("seagull", "/files/book.epub"), ("committee", "/files/minutes.rtf"),
                       ("webemlword", "/files/lunch.eml"), ("webgzword", "/files/changelog.gz")):
        assert crawl.search(word) == [site.url(path)], (word, path)
    assert crawl.doc("/files/bomb.docx")["reason"] == "too-large"
    assert crawl.doc("/files/cut.txt.gz")["reason"] == "parse-error"
    # the document's own date wins over Last-Modified (default order), with its provenance
    plan = crawl.doc("/files/plan.docx")
    assert (plan["date_source"], plan["media_type"]) == ("document:dcterms:modified", DOCX_TYPE)
    assert "document:dcterms:modified: accepted" in plan["date_notes"]
    assert crawl.doc("/files/lunch.eml")["date_source"] == "document:Date"
    assert crawl.doc("/files/changelog.gz")["date_source"] == "header"  # text has no date
    assert counts(s)[1] == 7 and s["errors"] == 0, s  # the home page + 6 documents
    # the next pass: conditional requests, no body for the unchanged ones
    site.log.clear()
    s = crawl.run()
    assert s["indexed"] == 0 and s["errors"] == 0, s
    gets = [h for h in site.log if h.method == "GET" and h.path == "/files/plan.docx"]
    assert gets and all(h.status == 304 for h in gets), [(h.method, h.status) for h in site.log]


def test_json_pages_are_read_as_json_files_are(tmp_path, site) -> None:
    """A page served as ``application/json`` (or a ``+json`` type, or NDJSON) goes through the
    JSON extractor as a ``.json`` file does: its escaped words are found, its snippet shows no
    escape, its title is its ``title`` member; a malformed one is indexed as its raw text."""
    pages = {
        "/api/items": (b'{"title": "Item list", "items": [{"label": "caf\\u00e9 na\\u00efve\\nnext"}]}',
                       "application/json; charset=utf-8"),
        "/api/person": (b'{"@context": "https://schema.org", "name": "Ren\\u00e9e Quokka"}',
                        "application/ld+json"),
        "/api/events": (b'{"event": "deploy"}\n{"event": "rollback"}\n', "application/x-ndjson"),
        "/api/broken": (b'{"note": "wombatword",}', "application/json"),
    }
    site.static("/", html("Home", "start", list(pages)))
    for path, (body, ctype) in pages.items():
        site.static(path, body, content_type=ctype)
    crawl = Crawl(tmp_path, site)
    s = crawl.run()
    assert s["errors"] == 0 and s["indexed"] == 5, s
    for word, path in (("café", "/api/items"), ("naïve", "/api/items"), ("next", "/api/items"),
                       ("renée", "/api/person"), ("rollback", "/api/events"),
                       ("wombatword", "/api/broken")):
        assert crawl.search(word) == [site.url(path)], (word, path)
    (hit,) = crawl.hits("naïve")
    assert hit.title == "Item list" and "\\u" not in hit.snippet and "café naïve" in hit.snippet, hit
    assert crawl.doc("/api/person")["media_type"] == "application/json"
    assert crawl.doc("/api/events")["media_type"] == "application/x-ndjson"
    assert crawl.counters.get("extract.fallback") == 1, crawl.counters


@pytest.mark.alone  # a wall-clock bound: the next pass must not pay Ghostscript's bound again
def test_a_page_that_hit_the_time_bound_is_not_extracted_again_when_its_bytes_are_the_same(tmp_path, site) -> None:
    """A PostScript page whose program loops costs the workers' time bound once (``timeout``).
    Served again with no validator (no ETag, no Last-Modified: no 304 possible), its bytes are
    the same: the verdict stands without a second extraction; changed bytes are read again."""
    loop = b"%!PS-Adobe-3.0\n{} loop\n"
    body = {"ps": loop}
    site.static("/", html("Home", "start", ["/files/loop.ps"]))
    site.add("/files/loop.ps", handler=lambda hit: (200, {"Content-Type": "application/postscript"}, body["ps"]))
    crawl = Crawl(tmp_path, site)
    crawl.tail += '[extract]\ntimeout = "2s"\n'
    started = time.monotonic()
    s = crawl.run()
    assert time.monotonic() - started > 1.5  # Ghostscript ran into its 1.6 s
    assert crawl.doc("/files/loop.ps")["reason"] == "timeout" and s["skipped"] == 1, s
    for _ in range(2):
        started = time.monotonic()
        s = crawl.run()
        took = time.monotonic() - started
        assert (s["skipped"], s["errors"]) == (0, 0) and s["unchanged"] == 2, s
        assert took < 1.5, f"the unchanged page cost {took:.1f} s again"
        assert crawl.doc("/files/loop.ps")["reason"] == "timeout"
    body["ps"] = make_ps(words="repaired kestrel")
    s = crawl.run()
    assert crawl.search("kestrel") == [site.url("/files/loop.ps")], s
