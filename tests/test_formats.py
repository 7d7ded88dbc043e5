"""Office, OpenDocument, EPUB, RTF, mail and compressed files: real files written by the
libraries that write them (python-docx, openpyxl, python-pptx, odfpy, ebooklib, the standard
library's email/mailbox/gzip/bz2/lzma, zstandard), plus hostile ones; each is indexed with its
text, title and own date, or skipped with the exact reason, in bounded time."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import mailbox
import time
import zipfile
from datetime import datetime, timezone
from email.message import EmailMessage

import pytest

from indexerd.core.datechain import DateEvidence, resolve_date
from indexerd.core.errors import SkipDocument
from indexerd.extract import extract, guess_media_type
from indexerd.extract import formats as F


UTC = timezone.utc


def skip_reason(data: bytes, name: str, **kw) -> str:
    with pytest.raises(SkipDocument) as caught:
        extract(data, name=name, **kw)
    return caught.value.reason


# --------------------------------------------------------------------------- writers


def make_docx(title="Quarterly plan", body=("The zebra budget grows.",), modified=None) -> bytes:
    import docx

    document = docx.Document()
    document.core_properties.title = title
    document.core_properties.author = "Ada Lovelace"
    document.core_properties.modified = modified or datetime(2024, 3, 4, 5, 6, 7)
    document.add_heading("Budget overview", 1)
    for line in body:
        document.add_paragraph(line)
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text = "cellalpha"
    table.cell(0, 1).text = "cellbeta"
    section = document.sections[0]
    section.header.paragraphs[0].text = "headerword"
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


def make_xlsx() -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet["A1"] = "kiwi"
    sheet["B1"] = 42
    sheet.append(["mango", 3.5])
    second = book.create_sheet("Other")
    second["C3"] = "papaya"
    book.properties.title = "Fruit stock"
    book.properties.modified = datetime(2023, 7, 8, 9, 10, 11)
    buf = io.BytesIO()
    book.save(buf)
    return buf.getvalue()


def make_pptx() -> bytes:
    import pptx

    deck = pptx.Presentation()
    for n, word in enumerate(("walrus", "narwhal"), 1):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Slide {n} {word}"
        slide.placeholders[1].text = f"point about {word}"
    deck.slides[0].notes_slide.notes_text_frame.text = "speaker notes pelican"
    deck.core_properties.title = "Sea mammals"
    deck.core_properties.modified = datetime(2022, 1, 2, 3, 4, 5)
    buf = io.BytesIO()
    deck.save(buf)
    return buf.getvalue()


def make_odf(kind: str) -> bytes:
    from odf.opendocument import (OpenDocumentPresentation, OpenDocumentSpreadsheet,
                                  OpenDocumentText)
    from odf.dc import Date, Title
    from odf.draw import Frame, Page, TextBox
    from odf.style import MasterPage, PageLayout
    from odf.table import Table, TableCell, TableRow
    from odf.text import H, P, S, Span

    if kind == "odt":
        doc = OpenDocumentText()
        doc.text.addElement(H(outlinelevel=1, text="Heading otter"))
        p = P(text="Body of")
        p.addElement(S(c=3))
        p.addElement(Span(text="otter text"))
        doc.text.addElement(p)
    elif kind == "ods":
        doc = OpenDocumentSpreadsheet()
        table = Table(name="Sheet1")
        row = TableRow()
        for value in ("heron", "1234"):
            cell = TableCell()
            cell.addElement(P(text=value))
            row.addElement(cell)
        table.addElement(row)
        doc.spreadsheet.addElement(table)
    else:
        doc = OpenDocumentPresentation()
        layout = PageLayout(name="L")
        doc.automaticstyles.addElement(layout)
        master = MasterPage(name="M", pagelayoutname=layout)
        doc.masterstyles.addElement(master)
        page = Page(masterpagename=master)
        frame = Frame(width="10cm", height="3cm", x="1cm", y="1cm")
        box = TextBox()
        box.addElement(P(text="slide about badgers"))
        frame.addElement(box)
        page.addElement(frame)
        doc.presentation.addElement(page)
    doc.meta.addElement(Title(text=f"Open {kind} title"))
    doc.meta.addElement(Date(text="2021-05-06T07:08:09"))
    buf = io.BytesIO()
    doc.write(buf)
    return buf.getvalue()


def make_epub(extra_members: dict[str, bytes] | None = None, extra_spine_href: str | None = None) -> bytes:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("id-42")
    book.set_title("The lighthouse keeper")
    book.set_language("en")
    book.add_author("Jane Writer")
    book.add_metadata("DC", "date", "2020-02-03")
    chapters = []
    for n, word in enumerate(("seagull", "fogbank"), 1):
        chapter = epub.EpubHtml(title=f"Chapter {n}", file_name=f"chap_{n}.xhtml", lang="en")
        chapter.content = f"<h1>Chapter {n}</h1><p>The {word} came back at dawn.</p>"
        book.add_item(chapter)
        chapters.append(chapter)
    book.toc = chapters
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *chapters]
    buf = io.BytesIO()
    epub.write_epub(buf, book)
    data = buf.getvalue()
    if not extra_members and not extra_spine_href:
        return data
    return rewrite_zip(data, extra_members or {}, spine_href=extra_spine_href)


def rewrite_zip(data: bytes, extra: dict[str, bytes], *, spine_href: str | None = None,
                replace: dict[str, bytes] | None = None) -> bytes:
    """Copy a ZIP, replacing some members and adding others (names as given, even hostile)."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            body = (replace or {}).get(info.filename, src.read(info))
            if spine_href and info.filename.endswith(".opf"):
                body = body.replace(b"</manifest>", f'<item id="evil" href="{spine_href}" '
                                    f'media-type="application/xhtml+xml"/></manifest>'.encode())
                body = body.replace(b"</spine>", b'<itemref idref="evil"/></spine>')
            dst.writestr(info, body)
        for name, body in extra.items():
            dst.writestr(zipfile.ZipInfo(name), body)
    return out.getvalue()


def make_message(subject="Lunch on Friday", sender="Grace Hopper <grace@example.org>",
                 date="Tue, 01 Dec 2026 09:30:00 +0100", body="Shall we try the noodle bar?",
                 msgid="<m1@example.org>", html: str | None = None) -> EmailMessage:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = "Alan Turing <alan@example.org>"
    message["Subject"] = subject
    message["Date"] = date
    message["Message-ID"] = msgid
    message.set_content(body)
    if html:
        message.add_alternative(html, subtype="html")
    return message


RTF = (rb"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0 Times New Roman;}}"
       rb"{\info{\title Minutes of the meeting}{\revtim\yr2019\mo11\dy12\hr13\min14}}"
       rb"\f0\fs24 The caf\'e9 committee met.\par Second paragraph about {\b bold} budgets.\par}")


# --------------------------------------------------------------------------- each format


def test_docx() -> None:
    ex = extract(make_docx(), name="plan.docx")
    assert ex.media_type == F.MEDIA_DOCX
    assert ex.title == "Quarterly plan"
    for word in ("Budget overview", "zebra budget", "cellalpha", "cellbeta", "headerword"):
        assert word in ex.text
    assert ex.document_date == ("dcterms:modified", "2024-03-04T05:06:07Z")
    assert ex.meta["document:author"] == "Ada Lovelace"


def test_xlsx() -> None:
    ex = extract(make_xlsx(), name="stock.xlsx")
    assert ex.media_type == F.MEDIA_XLSX and ex.title == "Fruit stock"
    assert ex.text.split("\n") == ["kiwi\t42", "mango\t3.5", "papaya"]
    assert ex.document_date[0] == "dcterms:modified"  # openpyxl sets it when it saves
    assert ex.document_date[1].startswith(f"{datetime.now(UTC).year}-")


def test_pptx() -> None:
    ex = extract(make_pptx(), name="deck.pptx")
    assert ex.media_type == F.MEDIA_PPTX and ex.title == "Sea mammals"
    lines = ex.text.split("\n")
    assert lines[:4] == ["Slide 1 walrus", "point about walrus", "Slide 2 narwhal", "point about narwhal"]
    assert "speaker notes pelican" in lines[4:]
    assert ex.document_date == ("dcterms:modified", "2022-01-02T03:04:05Z")


@pytest.mark.parametrize(("kind", "media", "words"), [
    ("odt", F.MEDIA_ODT, ["Heading otter", "Body of   otter text"]),
    ("ods", F.MEDIA_ODS, ["heron", "1234"]),
    ("odp", F.MEDIA_ODP, ["slide about badgers"]),
])
def test_opendocument(kind: str, media: str, words: list[str]) -> None:
    ex = extract(make_odf(kind), name=f"file.{kind}")
    assert ex.media_type == media and ex.title == f"Open {kind} title"
    assert ex.text.split("\n") == words
    assert ex.document_date == ("dc:date", "2021-05-06T07:08:09")


def test_epub() -> None:
    ex = extract(make_epub(), name="book.epub")
    assert ex.media_type == F.MEDIA_EPUB and ex.title == "The lighthouse keeper"
    assert ex.text.index("seagull came back") < ex.text.index("fogbank came back")
    assert ex.document_date[0] == "dcterms:modified"  # ebooklib writes it (EPUB 3), preferred
    opf = [n for n in zipfile.ZipFile(io.BytesIO(make_epub())).namelist() if n.endswith(".opf")][0]
    book = make_epub()
    package = zipfile.ZipFile(io.BytesIO(book)).read(opf)
    package = package.replace(b'property="dcterms:modified"', b'property="other"')
    ex = extract(rewrite_zip(book, {}, replace={opf: package}), name="book.epub")
    assert ex.document_date == ("dc:date", "2020-02-03")
    assert ex.meta["document:author"] == "Jane Writer"


def test_rtf() -> None:
    ex = extract(RTF, name="minutes.rtf")
    assert ex.media_type == F.MEDIA_RTF and ex.title == "Minutes of the meeting"
    assert ex.text.split("\n") == ["The café committee met.", "Second paragraph about bold budgets."]
    assert ex.document_date == ("revtim", "2019-11-12T13:14:00Z")


def test_eml_sender_and_subject_searchable() -> None:
    message = make_message(html="<p>Shall we try the <b>noodle</b> bar?</p>")
    ex = extract(message.as_bytes(), name="lunch.eml")
    assert ex.media_type == F.MEDIA_EML and ex.title == "Lunch on Friday"
    assert "From: Grace Hopper <grace@example.org>" in ex.text
    assert "Subject: Lunch on Friday" in ex.text
    assert ex.text.count("noodle bar") == 1  # the HTML alternative is not read twice
    assert ex.document_date == ("Date", "Tue, 01 Dec 2026 09:30:00 +0100")


def test_eml_html_only_and_encoded_subject() -> None:
    message = EmailMessage()
    message["From"] = "=?utf-8?q?Ren=C3=A9?= <rene@example.org>"
    message["Subject"] = "=?utf-8?b?Q2Fmw6kgw6AgbGEgY3LDqG1l?="
    message.set_content("<html><body><p>Crème brûlée tonight</p></body></html>", subtype="html")
    ex = extract(message.as_bytes(), name="x.eml")
    assert ex.title == "Café à la crème"
    assert "René" in ex.text and "Crème brûlée tonight" in ex.text
    assert ex.document_date is None


def test_mbox_read_whole_as_one_document(tmp_path) -> None:
    box = mailbox.mbox(str(tmp_path / "list.mbox"))
    box.add(make_message())
    box.add(make_message(subject="Second", body="about gardening", msgid="<m2@example.org>",
                         date="Wed, 02 Dec 2026 10:00:00 +0000"))
    box.flush()
    ex = extract((tmp_path / "list.mbox").read_bytes(), name="list.mbox")
    assert ex.media_type == F.MEDIA_MBOX and ex.title == "Lunch on Friday"
    assert "noodle bar" in ex.text and "about gardening" in ex.text


def test_an_mbox_body_line_starting_with_from_splits_nothing() -> None:
    """Issue 34: an unescaped body line "From ..." after a blank line (writers that do not quote
    it as ">From") split the message, and its rest became a fragment without headers.  RFC 4155
    separators carry an address and an asctime timestamp; a line without them is body text."""
    from indexerd.extract.formats.mail import iter_mbox

    box = (b"From alice@example.org Mon Jan  1 00:00:00 2024\nFrom: alice@example.org\nSubject: One\n"
           b"Message-ID: <one@x>\n\nfirst paragraph\n\nFrom the start we knew the plan\n\nlast words\n"
           b"\nFrom MAILER-DAEMON Fri Jul  8 12:08:34 2011\nFrom: b@x\nSubject: Two\nMessage-ID: <two@x>\n\n"
           b"second message\n")
    messages = list(iter_mbox(io.BytesIO(box), 1 << 20))
    assert [m.message_id for m in messages] == ["one@x", "two@x"]
    assert b"From the start we knew the plan" in messages[0].data and b"last words" in messages[0].data


def test_a_mail_part_labelled_iso_8859_1_is_read_as_windows_1252() -> None:
    """Issue 34: 0x80-0x9F in a part labelled iso-8859-1 are windows-1252's quotes and dashes
    (mail clients and the WHATWG Encoding Standard read the label so, as indexerd does for web
    pages); they were C1 control characters and vanished from the text."""
    raw = (b"From: a@example.org\nSubject: quotes\nMIME-Version: 1.0\n"
           b"Content-Type: text/plain; charset=iso-8859-1\n\n"
           b"He said \x93caf\xe9\x94 \x96 twice\n")
    ex = extract(raw, name="q.eml")
    assert "He said \u201ccaf\u00e9\u201d \u2013 twice" in ex.text, ex.text


# --------------------------------------------------------------------------- compressed


@pytest.mark.parametrize(("suffix", "compress"), [
    (".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress),
    (".zst", lambda data: __import__("zstandard").ZstdCompressor().compress(data)),
])
def test_compressed_inner_type_from_inner_name(suffix, compress) -> None:
    changelog = b"bash (5.2-1) unstable; urgency=low\n\n  * New upstream release.\n"
    ex = extract(compress(changelog), name=f"/usr/share/doc/bash/changelog.Debian{suffix}")
    assert ex.media_type == "text/plain" and "New upstream release." in ex.text
    page = b"<html><head><title>Guide page</title></head><body><p>compressed words</p></body></html>"
    ex = extract(compress(page), name=f"index.html{suffix}")
    assert (ex.media_type, ex.title, ex.text) == ("text/html", "Guide page", "compressed words")


def test_compressed_office_document_and_concatenated_members() -> None:
    ex = extract(gzip.compress(make_docx()), name="plan.docx.gz")
    assert ex.media_type == F.MEDIA_DOCX and "zebra budget" in ex.text
    ex = extract(gzip.compress(b"first part\n") + gzip.compress(b"second part\n"), name="two.txt.gz")
    assert ex.text == "first part\nsecond part"


def test_truncated_gz_is_a_parse_error() -> None:
    data = gzip.compress(b"some text that will be cut\n" * 5000)
    assert skip_reason(data[: len(data) // 2], "notes.txt.gz") == "parse-error"
    assert skip_reason(b"\x1f\x8b\x08\x00garbage", "x.gz") == "parse-error"


@pytest.mark.alone  # a wall-clock bound (2 s)
def test_gzip_bomb_stops_at_the_cap() -> None:
    bomb = gzip.compress(b"\0" * 200_000_000, 9)  # 200 MB in ~200 KB
    started = time.monotonic()
    assert skip_reason(bomb, "bomb.txt.gz", max_bytes=20_000_000) == "too-large"
    assert time.monotonic() - started < 2.0
    assert skip_reason(gzip.compress(b"x" * 2000), "small.txt.gz", max_bytes=1000) == "too-large"


def test_compressed_twice_and_tar_archives_are_not_documents() -> None:
    assert skip_reason(gzip.compress(gzip.compress(b"text")), "a.txt.gz.gz") == "unsupported-type"
    assert guess_media_type("backup.tar.gz", b"\x1f\x8b\x08\x00") is None
    assert guess_media_type("changelog.gz", b"\x1f\x8b\x08\x00") == F.MEDIA_GZIP


# --------------------------------------------------------------------------- hostile containers


def zip_bomb_docx() -> bytes:
    """A .docx whose word/document.xml inflates to 300 MB from about 300 KB."""
    head = (b'<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
            b'wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>')
    src = zipfile.ZipFile(io.BytesIO(make_docx()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename == "word/document.xml":
                with dst.open("word/document.xml", "w", force_zip64=True) as member:
                    member.write(head)
                    for _ in range(300):
                        member.write(b"a" * 1_000_000)
                    member.write(b"</w:t></w:r></w:p></w:body></w:document>")
            else:
                dst.writestr(info, src.read(info))
    return out.getvalue()


@pytest.mark.alone  # a wall-clock bound (10 s)
def test_zip_bomb_inside_a_docx_is_too_large() -> None:
    """Skipped once 20 MB came out of the 300 MB member."""
    bomb = zip_bomb_docx()
    assert len(bomb) < 2_000_000
    started = time.monotonic()
    assert skip_reason(bomb, "bomb.docx", max_bytes=20_000_000) == "too-large"
    assert time.monotonic() - started < 10.0


def million_empty_cells_xlsx() -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    book.active["A1"] = "placeholder"
    buf = io.BytesIO()
    book.save(buf)
    rows = ['<row r="1"><c r="A1" t="inlineStr"><is><t>needle</t></is></c></row>']
    rows += [f'<row r="{r}">' + "<c/>" * 1000 + "</row>" for r in range(2, 1002)]
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    sheet = src.read("xl/worksheets/sheet1.xml").decode()
    start, end = sheet.index("<sheetData>"), sheet.index("</sheetData>") + len("</sheetData>")
    sheet = sheet[:start] + "<sheetData>" + "".join(rows) + "</sheetData>" + sheet[end:]
    return rewrite_zip(buf.getvalue(), {}, replace={"xl/worksheets/sheet1.xml": sheet.encode()})


@pytest.mark.alone  # a wall-clock bound (15 s)
def test_xlsx_with_a_million_empty_cells_is_indexed_in_bounded_time() -> None:
    data = million_empty_cells_xlsx()
    started = time.monotonic()
    ex = extract(data, name="cells.xlsx")
    assert ex.text == "needle"
    assert time.monotonic() - started < 15.0


def test_epub_with_a_path_traversal_member_name(tmp_path) -> None:
    """A member named ``../../evil.xhtml`` (and a spine item pointing at it) is never read, and
    nothing is written anywhere; the book is indexed without it."""
    evil = b"<html><body><p>escaped text</p></body></html>"
    data = make_epub({"../../evil.xhtml": evil, "/abs/evil.xhtml": evil},
                     extra_spine_href="../../../evil.xhtml")
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert "../../evil.xhtml" in names
    before = set(tmp_path.parent.iterdir())
    ex = extract(data, name=str(tmp_path / "book.epub"))
    assert "seagull came back" in ex.text and "escaped text" not in ex.text
    assert set(tmp_path.parent.iterdir()) == before


@pytest.mark.parametrize(("name", "data", "reason"), [
    ("broken.docx", b"PK\x03\x04 not really a zip", "parse-error"),
    ("empty.xlsx", b"PK\x05\x06" + b"\0" * 18, "parse-error"),  # an empty ZIP: no workbook
    ("broken.odt", b"PK\x03\x04\x14\x00garbage", "parse-error"),
    ("broken.epub", b"not a zip at all", "parse-error"),
    ("broken.rtf", b"{\\rtf1 unterminated {\\b", None),
])
def test_damaged_files(name: str, data: bytes, reason: str | None) -> None:
    if reason is None:  # striprtf reads what it can of an unterminated group
        assert "unterminated" in extract(data, name=name).text
    else:
        assert skip_reason(data, name) == reason


def test_truncated_docx_is_a_parse_error() -> None:
    data = make_docx()
    assert skip_reason(data[: len(data) // 2], "cut.docx") == "parse-error"


@pytest.mark.alone  # a wall-clock bound (5 s)
def test_docx_with_a_dtd_entity_bomb_is_not_expanded() -> None:
    lol = (b'<?xml version="1.0"?><!DOCTYPE w [<!ENTITY a "aaaaaaaaaa">'
           + b"".join(b'<!ENTITY %s "%s">' % (chr(98 + i).encode(), (b"&" + chr(97 + i).encode() + b";") * 10)
                      for i in range(8))
           + b']><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
             b"<w:body><w:p><w:r><w:t>&i; plain</w:t></w:r></w:p></w:body></w:document>")
    data = rewrite_zip(make_docx(), {}, replace={"word/document.xml": lol})
    started = time.monotonic()
    try:
        ex = extract(data, name="lol.docx")
        assert len(ex.text) < 10_000
    except SkipDocument as exc:
        assert exc.reason == "parse-error"
    assert time.monotonic() - started < 5.0


# --------------------------------------------------------------------------- types and dates


@pytest.mark.parametrize(("name", "head_of", "declared", "expected"), [
    (None, "docx", None, F.MEDIA_DOCX),
    (None, "xlsx", None, F.MEDIA_XLSX),
    (None, "pptx", None, F.MEDIA_PPTX),
    (None, "odt", None, F.MEDIA_ODT),
    (None, "epub", None, F.MEDIA_EPUB),
    ("download", "docx", "application/octet-stream", F.MEDIA_DOCX),
    ("https://example.test/files/report.docx?x=1", None, None, F.MEDIA_DOCX),
    ("https://example.test/get?id=3", None, F.MEDIA_ODT, F.MEDIA_ODT),
    ("https://example.test/a", None, "text/rtf", F.MEDIA_RTF),
    ("https://example.test/a", None, "message/rfc822", F.MEDIA_EML),
    ("mbox", "mbox", None, F.MEDIA_MBOX),
    ("notes", "rtf", None, F.MEDIA_RTF),
    ("picture.png", "gz", None, None),  # the extension says what it is: not sniffed
    ("notes.txt", "mbox", None, "text/plain"),
])
def test_format_detection(name, head_of, declared, expected) -> None:
    heads = {"docx": make_docx, "xlsx": make_xlsx, "pptx": make_pptx,
             "odt": lambda: make_odf("odt"), "epub": make_epub, "rtf": lambda: RTF,
             "gz": lambda: gzip.compress(b"x"),
             "mbox": lambda: b"From grace@example.org Tue Dec  1 09:30:00 2026\nFrom: g\n\nhi\n"}
    head = heads[head_of]()[:8192] if head_of else b""
    assert guess_media_type(name, head, declared) == expected


def test_document_date_joins_the_chain_with_its_provenance() -> None:
    fetched = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    mtime = datetime(2025, 1, 1, tzinfo=UTC)
    evidence = DateEvidence(fetched_at=fetched, protocol=mtime, protocol_kind="mtime",
                            document=("dcterms:modified", "2024-03-04T05:06:07Z"))
    resolved = resolve_date(evidence)
    assert (resolved.source, resolved.value) == ("document:dcterms:modified",
                                                  datetime(2024, 3, 4, 5, 6, 7, tzinfo=UTC))
    assert resolved.notes == ("meta:last-modified: missing",
                              "document:dcterms:modified: accepted (2024-03-04T05:06:07Z)")
    # the configured order rules: mtime first
    assert resolve_date(evidence, order=["mtime", "document"]).source == "mtime"
    # a mail Date: in RFC 5322 form, converted to UTC
    mail = DateEvidence(fetched_at=fetched, protocol=mtime, protocol_kind="mtime",
                        document=("Date", "Tue, 01 Dec 2026 09:30:00 +0100"))
    assert resolve_date(mail).value == datetime(2026, 12, 1, 8, 30, tzinfo=UTC)
    # a future or garbage document date falls through to the next source, with a note
    future = DateEvidence(fetched_at=fetched, protocol=mtime, protocol_kind="mtime",
                          document=("dc:date", "2099-01-01T00:00:00"))
    resolved = resolve_date(future)
    assert resolved.source == "mtime" and resolved.notes[1].startswith("document:dc:date: future")
    assert resolve_date(DateEvidence(fetched_at=fetched, protocol=mtime, protocol_kind="mtime"),
                        order=["document", "mtime"]).notes[0] == "document: missing"


# --------------------------------------------------------------------------- SVG

SVG = b"""<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" xmlns:dc="http://purl.org/dc/elements/1.1/"
     xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" width="200" height="100">
  <title>Package dependencies</title>
  <desc>How the cluster tools depend on each other</desc>
  <metadata><rdf:RDF><rdf:Description><dc:creator>graphviz</dc:creator></rdf:Description></rdf:RDF></metadata>
  <g id="node1" class="node"><title>tooltipword</title>
    <ellipse cx="50" cy="50" rx="40" ry="20"/>
    <text x="50" y="55">pg_<tspan>ctlcluster</tspan></text>
  </g>
  <text x="10" y="90">second label</text>
</svg>"""


def test_svg_text_title_and_description() -> None:
    """What Recoll's svg.xsl takes: the top-level title, desc and Dublin Core metadata, and
    every ``<text>`` (with its ``<tspan>`` pieces); a node's tooltip ``<title>`` is not text."""
    ex = extract(SVG, name="dependencies.svg")
    assert ex.media_type == F.MEDIA_SVG and ex.title == "Package dependencies"
    assert ex.text.split("\n") == ["How the cluster tools depend on each other", "graphviz",
                                   "pg_ctlcluster", "second label"]
    plain = b'<svg width="4" height="4"><text>no namespace</text></svg>'
    assert extract(plain, name="plain.svg").text == "no namespace"
    assert guess_media_type("https://example.test/a.svg", b"", "image/svg+xml") == F.MEDIA_SVG


@pytest.mark.alone  # a wall-clock bound (5 s)
def test_svg_without_text_is_empty_and_a_bad_one_a_parse_error() -> None:
    assert skip_reason(b'<svg xmlns="http://www.w3.org/2000/svg"><path d="M0 0L1 1"/></svg>',
                       "icon.svg") == "empty"
    assert skip_reason(b"<svg><text>cut", "cut.svg") == "parse-error"
    lol = (b'<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa">'
           + b"".join(b'<!ENTITY %s "%s">' % (chr(98 + i).encode(), (b"&" + chr(97 + i).encode() + b";") * 10)
                      for i in range(8))
           + b']><svg><text>&i; plain</text></svg>')
    started = time.monotonic()
    try:
        assert len(extract(lol, name="lol.svg").text) < 10_000
    except SkipDocument as exc:
        assert exc.reason in ("parse-error", "empty")
    assert time.monotonic() - started < 5.0
