"""SVG (W3C SVG 1.1 / 2) -> the text a reader sees: title, description, metadata and labels.

What is read is what Recoll's ``svg.xsl`` reads: the ``<title>`` and ``<desc>`` that are
children of the root ``<svg>`` (the document's own; a ``<title>`` inside a group is a tooltip,
as graphviz writes one per node), the Dublin Core ``dc:creator``, ``dc:subject`` and
``dc:description`` of its ``<metadata>``, and every ``<text>`` element (its ``<tspan>`` pieces
joined).  Paths, styles and scripts are not text.  SVG files without a namespace (hand-written,
old tools) are read the same way.

Parsed with the streaming parser of :mod:`.xmlstream` (entities unresolved, no network, no
DTD), in a worker process like the other formats.
"""

from __future__ import annotations

import io

from indexerd.core.errors import SkipDocument
from indexerd.extract.formats import MEDIA_SVG, DocumentText
from indexerd.extract.formats.bounded import parse_errors
from indexerd.extract.formats.xmlstream import NS_DC, iter_units, one_line

NS_SVG = "http://www.w3.org/2000/svg"
_TEXT = {f"{{{NS_SVG}}}text", "text"}
_HEAD = {f"{{{NS_SVG}}}title", "title", f"{{{NS_SVG}}}desc", "desc"}
_DC = {f"{{{NS_DC}}}{name}" for name in ("creator", "subject", "description")}


def extract_svg(data: bytes, media_type: str, label: str, max_bytes: int) -> DocumentText:
    """Extract one SVG image's text (see the module docstring).

    Raises:
        SkipDocument: ``too-large`` (over ``max_bytes``) or ``parse-error`` (not well-formed XML).
    """
    if len(data) > max_bytes:
        raise SkipDocument("too-large", f"{label}: {len(data)} bytes > max_size {max_bytes}")
    title = ""
    lines: list[str] = []
    with parse_errors(label):
        for element in iter_units(io.BytesIO(data), _TEXT | _HEAD | _DC):
            tag = element.tag
            text = one_line("".join(element.itertext()), 10_000)
            if not text:
                continue
            if tag in _HEAD:
                parent = element.getparent()
                if parent is None or parent.getparent() is not None:
                    continue  # a tooltip of a group, not the document's own
                if tag.endswith("title") and not title:
                    title = text
                    continue
            lines.append(text)
    return DocumentText(title, "\n".join(lines), MEDIA_SVG)
