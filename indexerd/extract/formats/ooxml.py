"""Office Open XML (ECMA-376): ``.docx``, ``.xlsx``, ``.pptx`` -> text, title and modified date.

Read straight from the package parts with :mod:`zipfile` and a streaming XML parser
(:mod:`.xmlstream`), not with python-docx / openpyxl / python-pptx: those build the whole
document model in memory (python-docx and python-pptx an lxml tree of every part, openpyxl a
cell object per cell unless in read-only mode), which a hostile file turns into gigabytes, and
they cost more to import than the whole extraction of a typical file (README, "Formats").  The
tests write their documents with those libraries, as real files are written.

Parts read (ECMA-376 Part 1 and the Open Packaging Conventions, Part 2):

- docx: ``word/document.xml``, then headers, footers, footnotes, endnotes and comments;
  text in ``w:t``, paragraphs ``w:p``, ``w:tab`` and ``w:br`` as tab and line break; deleted
  text (``w:delText``) and field codes (``w:instrText``) are not text.
- xlsx: ``xl/sharedStrings.xml`` then each ``xl/worksheets/sheet*.xml`` in order: one line
  per row, cells separated by tabs; shared strings (``t="s"``), inline strings, and values as
  written (numbers, formula results).  Empty cells cost parsing time only.
- pptx: ``ppt/slides/slide<N>.xml`` in slide order, then ``ppt/notesSlides``; ``a:t`` in ``a:p``.
- every type: ``docProps/core.xml`` ``dc:title`` (the title) and ``dcterms:modified`` (the
  document date), ``dc:creator``.
"""

from __future__ import annotations

import re
from functools import lru_cache

from indexerd.core.errors import SkipDocument
from indexerd.extract.formats import MEDIA_DOCX, MEDIA_PPTX, MEDIA_XLSX, DocumentText
from indexerd.extract.formats.bounded import Archive, Budget, parse_errors
from indexerd.extract.formats.xmlstream import (NS_DC, NS_DCTERMS, child_text, iter_units,
                                                one_line, parse_small)

NS_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
NS_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
NS_S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"

_W_P, _W_T, _W_TAB, _W_BR, _W_CR = (f"{{{NS_W}}}{n}" for n in ("p", "t", "tab", "br", "cr"))
_A_P, _A_T, _A_BR = (f"{{{NS_A}}}{n}" for n in ("p", "t", "br"))
_S_SI, _S_T, _S_ROW, _S_C, _S_V, _S_IS = (f"{{{NS_S}}}{n}" for n in ("si", "t", "row", "c", "v", "is"))

@lru_cache(maxsize=1)
def _valued_cells():
    """XPath: the cells of a row that hold a value (compiled once, lxml imported when used)."""
    from lxml import etree

    return etree.XPath("s:c[s:v or s:is]", namespaces={"s": NS_S})


_WORD_EXTRA = re.compile(r"word/(header|footer|footnotes|endnotes|comments)\d*\.xml")
_SHEET = re.compile(r"xl/worksheets/sheet(\d+)\.xml")
_SLIDE = re.compile(r"ppt/slides/slide(\d+)\.xml")
_NOTES = re.compile(r"ppt/notesSlides/notesSlide(\d+)\.xml")
#: Shared strings kept in memory at most (their bytes were charged to the budget already).
MAX_SHARED_STRINGS = 1_000_000


def extract_ooxml(data: bytes, media_type: str, label: str, max_bytes: int) -> DocumentText:
    """Extract one OOXML package.

    Args:
        data: the whole file.
        media_type: :data:`MEDIA_DOCX`, :data:`MEDIA_XLSX` or :data:`MEDIA_PPTX` (the
            extension's; a package of another kind gives what its own parts hold).
        label: the file name or URL, for messages.
        max_bytes: the budget of decompressed part bytes (the source's ``max_size``).

    Raises:
        SkipDocument: ``too-large`` (parts inflate past ``max_bytes``: a zip bomb) or
            ``parse-error`` (not a ZIP, malformed XML, no main part).
    """
    archive = Archive(data, Budget(max_bytes, label))
    with parse_errors(label):
        if archive.has("word/document.xml"):
            lines = _word(archive)
        elif archive.has("xl/workbook.xml"):
            lines = _workbook(archive)
        elif archive.has("ppt/presentation.xml"):
            lines = _presentation(archive)
        else:
            raise SkipDocument("parse-error", f"{label}: no word/, xl/ or ppt/ main part")
        title, modified, creator = _core(archive)
    meta = (("author", creator),) if creator else ()
    return DocumentText(title, "\n".join(line for line in lines if line.strip()), media_type,
                        "dcterms:modified" if modified else None, modified, meta)


def _word(archive: Archive) -> list[str]:
    parts = ["word/document.xml"] + sorted(n for n in archive.names() if _WORD_EXTRA.fullmatch(n))
    lines: list[str] = []
    for part in parts:
        with archive.open(part) as stream:
            for paragraph in iter_units(stream, {_W_P}):
                pieces = []
                for element in paragraph.iter():
                    tag = element.tag
                    if tag == _W_T:
                        pieces.append(element.text or "")
                    elif tag == _W_TAB:
                        pieces.append("\t")
                    elif tag in (_W_BR, _W_CR):
                        pieces.append("\n")
                lines.append("".join(pieces))
    return lines


def _numbered(archive: Archive, pattern: re.Pattern) -> list[str]:
    found = [(int(m.group(1)), n) for n in archive.names() if (m := pattern.fullmatch(n))]
    return [name for _, name in sorted(found)]


def _workbook(archive: Archive) -> list[str]:
    shared: list[str] = []
    if archive.has("xl/sharedStrings.xml"):
        with archive.open("xl/sharedStrings.xml") as stream:
            for item in iter_units(stream, {_S_SI}):
                if len(shared) >= MAX_SHARED_STRINGS:
                    raise SkipDocument("too-large", f"{archive.budget.label}: more than "
                                                    f"{MAX_SHARED_STRINGS} shared strings")
                # rich text runs (r/t) and plain t; phonetic runs (rPh) are not the text
                shared.append("".join(t.text or "" for t in item.iter(_S_T)))
    lines: list[str] = []
    for part in _numbered(archive, _SHEET):
        with archive.open(part) as stream:
            for row in iter_units(stream, {_S_ROW}):
                # only the cells holding a value reach Python (the XPath runs in C): a sheet
                # of a million empty cells costs parsing time only
                cells = [value for cell in _valued_cells()(row) if (value := _cell_value(cell, shared))]
                if cells:
                    lines.append("\t".join(cells))
    return lines


def _cell_value(cell, shared: list[str]) -> str:
    kind = cell.get("t")
    if kind == "inlineStr":
        inline = cell.find(_S_IS)
        return "".join(inline.itertext()) if inline is not None else ""
    v = cell.find(_S_V)
    value = (v.text or "") if v is not None else ""
    if kind == "s":
        index = int(value) if value.strip().isdigit() else -1
        return shared[index] if 0 <= index < len(shared) else ""
    return value


def _presentation(archive: Archive) -> list[str]:
    lines: list[str] = []
    for part in _numbered(archive, _SLIDE) + _numbered(archive, _NOTES):
        with archive.open(part) as stream:
            for paragraph in iter_units(stream, {_A_P}):
                pieces = []
                for element in paragraph.iter():
                    if element.tag == _A_T:
                        pieces.append(element.text or "")
                    elif element.tag == _A_BR:
                        pieces.append("\n")
                lines.append("".join(pieces))
    return lines


def _core(archive: Archive) -> tuple[str, str | None, str | None]:
    """(title or "", dcterms:modified text or None, dc:creator or None) from docProps/core.xml."""
    if not archive.has("docProps/core.xml"):
        return "", None, None
    root = parse_small(archive.read("docProps/core.xml"))
    return (one_line(child_text(root, NS_DC, "title")), child_text(root, NS_DCTERMS, "modified"),
            one_line(child_text(root, NS_DC, "creator")) or None)


__all__ = ["extract_ooxml", "MEDIA_DOCX", "MEDIA_XLSX", "MEDIA_PPTX"]
