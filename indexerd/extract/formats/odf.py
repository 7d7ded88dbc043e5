"""OpenDocument (ODF 1.2/1.3, OASIS): ``.odt``, ``.ods``, ``.odp`` -> text, title and date.

Read from the package with :mod:`zipfile` and the streaming parser of :mod:`.xmlstream`
rather than odfpy, which loads the whole ``content.xml`` into its own DOM (a spreadsheet of a
million repeated empty cells becomes a million Python objects); the tests write their files
with odfpy.

- ``content.xml``: every ``text:p`` and ``text:h`` is one line (table cells, slides' frames
  and notes are made of them); ``text:s`` (``text:c`` spaces), ``text:tab`` and
  ``text:line-break`` become spaces, a tab and a line break.
- ``meta.xml``: ``dc:title`` and ``dc:date`` (ODF 1.2 §4.3.2.10: the date and time the
  document was last modified; ``meta:creation-date`` is when it was created and is not used),
  ``dc:creator``.
"""

from __future__ import annotations

from indexerd.core.errors import SkipDocument
from indexerd.extract.formats import DocumentText
from indexerd.extract.formats.bounded import Archive, Budget, parse_errors
from indexerd.extract.formats.xmlstream import NS_DC, child_text, iter_units, one_line, parse_small

NS_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_P, _H, _S, _TAB, _BR = (f"{{{NS_TEXT}}}{n}" for n in ("p", "h", "s", "tab", "line-break"))
_MAX_SPACES = 1000


def extract_odf(data: bytes, media_type: str, label: str, max_bytes: int) -> DocumentText:
    """Extract one OpenDocument package (see the module docstring for what is read).

    Raises:
        SkipDocument: ``too-large`` (parts inflate past ``max_bytes``) or ``parse-error``
            (not a ZIP, no ``content.xml``, malformed XML).
    """
    archive = Archive(data, Budget(max_bytes, label))
    with parse_errors(label):
        if not archive.has("content.xml"):
            raise SkipDocument("parse-error", f"{label}: no content.xml")
        lines = []
        with archive.open("content.xml") as stream:
            for paragraph in iter_units(stream, {_P, _H}):
                lines.append(_text_of(paragraph))
        title = date = creator = None
        if archive.has("meta.xml"):
            root = parse_small(archive.read("meta.xml"))
            title = child_text(root, NS_DC, "title")
            date = child_text(root, NS_DC, "date")
            creator = child_text(root, NS_DC, "creator")
    text = "\n".join(line for line in lines if line.strip())
    meta = (("author", one_line(creator)),) if creator else ()
    return DocumentText(one_line(title), text, media_type, "dc:date" if date else None, date, meta)


def _text_of(element) -> str:
    """The text of a paragraph with ODF's space, tab and line-break elements spelled out."""
    out: list[str] = [element.text or ""]
    for child in element:
        tag = child.tag
        if not isinstance(tag, str):  # a comment or processing instruction
            pass
        elif tag == _S:
            count = child.get(f"{{{NS_TEXT}}}c", "1")
            out.append(" " * min(int(count) if count.isdigit() else 1, _MAX_SPACES))
        elif tag == _TAB:
            out.append("\t")
        elif tag == _BR:
            out.append("\n")
        else:
            out.append(_text_of(child))
        out.append(child.tail or "")
    return "".join(out)
