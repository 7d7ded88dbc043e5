"""Streaming XML for office documents: elements handed over as they end, then dropped, so memory
stays flat whatever the part's size (a sheet of a million cells, a 100,000-paragraph text).

Outside contract relied on: ``lxml.etree.iterparse(..., tag=...)`` filters the elements in C
(a million empty spreadsheet cells parse in about 0.6 s, against 3.5 s through the standard
library's ``iterparse``, which hands every element to Python).  The parser is made with
``resolve_entities=False`` (an entity in the text stays unexpanded: no "billion laughs"),
``no_network=True`` and ``load_dtd=False`` (no external DTD or entity is ever fetched), and
``huge_tree=True``: libxml2's 10 MB limit on one text node would make a long run of text a
parse error before the byte budget (``max_size``, :class:`.bounded.Budget`) makes it
``too-large``; the budget and the worker's memory bound are the limits.  It
raises ``lxml.etree.XMLSyntaxError`` (a ``SyntaxError``) on bad input, a parse error to
:func:`.bounded.parse_errors`.  Comments and processing instructions come back as elements
whose ``tag`` is not a ``str``; every reader here skips them.
"""

from __future__ import annotations

import io
from typing import IO, TYPE_CHECKING, Iterable, Iterator

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

NS_OFFICE_CORE = "http://schemas.openxmlformats.org/package/2006/metadata/core-properties"
NS_DC = "http://purl.org/dc/elements/1.1/"
NS_DCTERMS = "http://purl.org/dc/terms/"


_PARSER_OPTIONS = dict(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True,
                       remove_comments=True, remove_pis=True)


def iter_units(stream: IO[bytes] | io.RawIOBase, units: Iterable[str]) -> Iterator:
    """Yield each element whose tag (``{namespace}local``) is in ``units`` when it ends; once
    the caller moves on, it is cleared and removed from its parent.  A unit nested in another
    is yielded (and removed) first, so the outer one no longer holds it.

    Raises whatever the parser raises (see the module docstring).
    """
    from lxml import etree

    for _, element in etree.iterparse(stream, events=("end",), tag=tuple(units), **_PARSER_OPTIONS):
        yield element
        element.clear(keep_tail=True)
        parent = element.getparent()
        if parent is not None:
            parent.remove(element)


def parse_small(data: bytes):
    """Parse a small part (core properties, a manifest) whole, with the same parser options."""
    from lxml import etree

    return etree.fromstring(data, etree.XMLParser(**_PARSER_OPTIONS))


def local(tag: str) -> str:
    """``{namespace}name`` -> ``name``."""
    return tag.rpartition("}")[2]


def child_text(root: Element, namespace: str, name: str) -> str | None:
    """The stripped text of the first descendant ``{namespace}name``, or ``None`` if absent or
    empty."""
    found = root.find(f".//{{{namespace}}}{name}")
    if found is None:
        return None
    text = "".join(found.itertext()).strip()
    return text or None


def one_line(text: str | None, limit: int = 300) -> str:
    """Whitespace collapsed to single spaces, cut at ``limit`` characters."""
    return " ".join((text or "").split())[:limit]
