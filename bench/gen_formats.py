"""Generate the office/e-book/mail part of the formats benchmark corpus (bench/bench_formats.py).

Every file is written by the library that writes that format in real life (python-docx,
openpyxl, python-pptx, odfpy, ebooklib: the test extra; the standard library's email, mailbox,
bz2 and lzma; zstandard), from a seeded random text, so two runs give the same documents (the
ZIP members' timestamps aside).  Every file's mtime is 2024-01-01 00:00 UTC.

    python bench/gen_formats.py OUT_DIR [--per-type 30]
"""
from __future__ import annotations

import argparse
import bz2
import gzip
import io
import lzma
import mailbox
import os
import random
import sys
from datetime import datetime
from email.message import EmailMessage

EPOCH_2024 = 1704067200
WORDS = ("harbour lantern meadow copper violet granite orchard falcon ember willow quartz "
         "saffron tundra beacon cobalt juniper marble nectar obsidian prairie ripple summit "
         "thistle umber vapour walnut zephyr alder basalt cedar dune fjord glacier heather "
         "iris jasper kelp lagoon mist nimbus onyx pebble quill reef sorrel tide").split()


def sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def paragraphs(rng: random.Random, k: int) -> list[str]:
    return [" ".join(sentence(rng) for _ in range(rng.randint(2, 5))) for _ in range(k)]


def docx_file(rng, i) -> bytes:
    import docx

    d = docx.Document()
    d.core_properties.title = f"Report {i} {rng.choice(WORDS)}"
    d.core_properties.modified = datetime(2023, 1 + i % 12, 1 + i % 28, 10, 0)
    d.add_heading(sentence(rng, 5), 1)
    for p in paragraphs(rng, 8):
        d.add_paragraph(p)
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def xlsx_file(rng, i) -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    for r in range(40):
        sheet.append([rng.choice(WORDS), rng.randint(0, 10_000), sentence(rng, 4)])
    book.properties.title = f"Sheet {i}"
    buf = io.BytesIO()
    book.save(buf)
    return buf.getvalue()


def pptx_file(rng, i) -> bytes:
    import pptx

    deck = pptx.Presentation()
    for _ in range(6):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = sentence(rng, 4)
        slide.placeholders[1].text = sentence(rng, 15)
    deck.core_properties.title = f"Deck {i}"
    deck.core_properties.modified = datetime(2022, 1 + i % 12, 2, 3, 4, 5)
    buf = io.BytesIO()
    deck.save(buf)
    return buf.getvalue()


def odf_file(rng, i, kind) -> bytes:
    from odf.dc import Date, Title
    from odf.draw import Frame, Page, TextBox
    from odf.opendocument import (OpenDocumentPresentation, OpenDocumentSpreadsheet,
                                  OpenDocumentText)
    from odf.style import MasterPage, PageLayout
    from odf.table import Table, TableCell, TableRow
    from odf.text import H, P

    if kind == "odt":
        doc = OpenDocumentText()
        doc.text.addElement(H(outlinelevel=1, text=sentence(rng, 5)))
        for p in paragraphs(rng, 8):
            doc.text.addElement(P(text=p))
    elif kind == "ods":
        doc = OpenDocumentSpreadsheet()
        table = Table(name="Sheet1")
        for _ in range(40):
            row = TableRow()
            for value in (rng.choice(WORDS), str(rng.randint(0, 9999)), sentence(rng, 4)):
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
        for _ in range(6):
            page = Page(masterpagename=master)
            frame = Frame(width="20cm", height="10cm", x="1cm", y="1cm")
            box = TextBox()
            box.addElement(P(text=sentence(rng, 15)))
            frame.addElement(box)
            page.addElement(frame)
            doc.presentation.addElement(page)
    doc.meta.addElement(Title(text=f"Open {kind} {i}"))
    doc.meta.addElement(Date(text=f"2021-{1 + i % 12:02d}-06T07:08:09"))
    buf = io.BytesIO()
    doc.write(buf)
    return buf.getvalue()


def epub_file(rng, i) -> bytes:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier(f"bench-{i}")
    book.set_title(f"Book {i} {rng.choice(WORDS)}")
    book.set_language("en")
    book.add_author("Bench Writer")
    chapters = []
    for n in range(1, 5):
        ch = epub.EpubHtml(title=f"Chapter {n}", file_name=f"chap_{n}.xhtml", lang="en")
        ch.content = f"<h1>Chapter {n}</h1>" + "".join(f"<p>{p}</p>" for p in paragraphs(rng, 5))
        book.add_item(ch)
        chapters.append(ch)
    book.toc = chapters
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *chapters]
    buf = io.BytesIO()
    epub.write_epub(buf, book)
    return buf.getvalue()


def rtf_file(rng, i) -> bytes:
    body = r"\par ".join(paragraphs(rng, 6))
    return (r"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0 Times New Roman;}}"
            r"{\info{\title Minutes " + str(i) + r"}{\revtim\yr2019\mo11\dy12\hr13\min14}}"
            r"\f0\fs24 " + body + r"\par}").encode("latin-1")


def message(rng, i, j=0) -> EmailMessage:
    m = EmailMessage()
    m["From"] = f"Sender {i} <sender{i}@example.org>"
    m["To"] = "List <list@example.org>"
    m["Subject"] = f"{sentence(rng, 4)} ({i}.{j})"
    m["Date"] = f"Tue, {1 + (i + j) % 28:02d} Dec 2025 09:30:00 +0100"
    m["Message-ID"] = f"<bench-{i}-{j}@example.org>"
    m.set_content("\n\n".join(paragraphs(rng, 3)))
    return m


def write(path: str, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)


def generate(out: str, per_type: int = 30, seed: int = 15) -> dict[str, int]:
    """Write the corpus under ``out`` (replaced); returns files written per kind."""
    import shutil

    import zstandard

    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    rng = random.Random(seed)
    counts: dict[str, int] = {}
    makers = {"docx": docx_file, "xlsx": xlsx_file, "pptx": pptx_file,
              "odt": lambda r, i: odf_file(r, i, "odt"), "ods": lambda r, i: odf_file(r, i, "ods"),
              "odp": lambda r, i: odf_file(r, i, "odp"), "epub": epub_file, "rtf": rtf_file,
              "eml": lambda r, i: message(r, i).as_bytes()}
    for kind, make in makers.items():
        os.makedirs(os.path.join(out, kind))
        for i in range(per_type):
            write(os.path.join(out, kind, f"{kind}-{i:03d}.{kind}"), make(rng, i))
        counts[kind] = per_type
    os.makedirs(os.path.join(out, "mail"))
    for i in range(max(1, per_type // 6)):
        box = mailbox.mbox(os.path.join(out, "mail", f"list-{i:02d}.mbox"))
        for j in range(20):
            box.add(message(rng, i, j))
        box.flush()
        box.close()
    counts["mbox"] = max(1, per_type // 6)
    os.makedirs(os.path.join(out, "compressed"))
    compressors = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress,
                   "zst": zstandard.ZstdCompressor().compress}
    for ext, compress in compressors.items():
        for i in range(per_type // 3):
            text = "\n\n".join(paragraphs(rng, 10)).encode()
            name = f"notes-{i:03d}.txt.{ext}" if i % 2 else f"page-{i:03d}.html.{ext}"
            if i % 2 == 0:
                text = (f"<html><head><title>Page {i} {ext}</title></head><body><p>".encode()
                        + text + b"</p></body></html>")
            write(os.path.join(out, "compressed", name), compress(text))
        counts[ext] = per_type // 3
    for root, dirs, files in os.walk(out):
        for name in dirs + files:
            os.utime(os.path.join(root, name), (EPOCH_2024, EPOCH_2024))
    os.utime(out, (EPOCH_2024, EPOCH_2024))
    return counts


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--per-type", type=int, default=30)
    args = ap.parse_args(argv)
    print(generate(args.out, args.per_type))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
