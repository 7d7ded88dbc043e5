"""Web pages of the new formats (issue 15): asked with HEAD first (their URLs do not look like
HTML), fetched with GET when their type is indexed, and extracted as files are, with the
document's own date as the ``document`` date source; a zip bomb and a truncated .gz served over
HTTP are skipped with their exact reasons; a 304 on the next pass costs no body."""

from __future__ import annotations

import gzip

from httpsite import site as site_fixture
from test_formats import RTF, make_docx, make_epub, make_message, make_odf, zip_bomb_docx
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
