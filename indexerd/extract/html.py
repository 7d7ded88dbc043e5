"""HTML through lexbor (selectolax): the DOM walk, and the choice of parser for a page.

Outside contract relied on: **selectolax 1.0, lexbor backend only**
(``selectolax.lexbor.LexborHTMLParser``; https://github.com/rushter/selectolax). It parses
5,000-deep trees without truncation and returns an empty tree for empty input. It is fed the
``str`` we decoded ourselves (or the raw bytes when they are UTF-8 without a BOM, which it reads as
UTF-8), because it ignores ``<meta charset>`` unless asked, and we must also honour the HTTP charset
first. Per the HTML parsing rules (https://html.spec.whatwg.org/multipage/parsing.html) a NUL in
text content never reaches a text node, which is what lets ``\\x00`` serve as the block separator.

A lexbor parser object is not thread-safe: each call builds its own and drops it before
returning, so every function here is safe to call from any number of threads. selectolax is
imported inside the functions that use it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache

from indexerd.extract.decode import decode_document
from indexerd.extract.extracted import TITLE_MAX_CHARS, Extracted
from indexerd.extract.htmlpage import (
    BASE, BLOCK, H1, HIDDEN, HREF, IFRAME, META, SRC, TAG_KINDS, TITLE, add_meta,
    html_document,
)
from indexerd.extract.htmlstream import extract_html_streaming
from indexerd.extract.maincontent import main_element
from indexerd.extract.text import one_line
from indexerd.extract.whitespace import collapse_lines, keep_layout, restore_layout

LARGE_HTML_BYTES = 1024 * 1024
"""HTML larger than this (bytes) is read by the streaming parser
(:mod:`indexerd.extract.htmlstream`) instead of lexbor's DOM, whose memory is many times the
page's (figures in bench/RESULTS.md). Both give the same title, text, meta tags and links (the
parity tests in ``tests/test_extract.py``), except where the HTML tree rules drop a misplaced tag
and after ``<plaintext>`` (see :mod:`indexerd.extract.htmlstream`). Markup the streaming parser
cannot read at all falls back to lexbor."""

LONG_SPAN = re.compile(rb"<[^<]{32768}")
"""32 KiB after a ``<`` without another: maybe one tag with thousands of attributes, which
lexbor parses in time quadratic in their number; such a page goes through the streaming parser
(linear). Linear to search: each byte is scanned once."""


def extract_html(data: bytes, *, charset: str | None, base_url: str | None,
                 name: str | None) -> Extracted:
    """An HTML page -> :class:`Extracted`: pages over :data:`LARGE_HTML_BYTES` or with a
    :data:`LONG_SPAN` go through :func:`~indexerd.extract.htmlstream.extract_html_streaming`
    (lexbor when that raises), the others through :func:`extract_html_lexbor`.

    ``charset`` is the protocol's; ``base_url`` resolves relative links (``None`` keeps them as
    written); ``name`` is unused. Never raises.
    """
    if len(data) > LARGE_HTML_BYTES or LONG_SPAN.search(data):
        try:
            return extract_html_streaming(data, charset, base_url)
        except Exception:  # noqa: BLE001 - HTMLParser gave up on some markup: lexbor reads anything
            pass
    return extract_html_lexbor(data, charset, base_url)


@lru_cache(maxsize=1)
def _tag_kinds_by_id() -> dict[int, int]:
    """:data:`~indexerd.extract.htmlpage.TAG_KINDS` keyed by lexbor tag id (``node.tag_id`` is
    cheaper to read than ``node.tag``). Known HTML tags have small static ids; a custom tag gets
    a per-document heap address, so only small ids are kept."""
    from selectolax.lexbor import LexborHTMLParser

    factory = LexborHTMLParser("")
    by_id = {factory.create_node(tag).tag_id: kind for tag, kind in TAG_KINDS.items()}
    return {tag_id: kind for tag_id, kind in by_id.items() if tag_id < 1 << 16}


def extract_html_lexbor(data: bytes, charset: str | None, base_url: str | None) -> Extracted:
    """An HTML page -> :class:`Extracted` through lexbor's DOM, ``main_text`` included.

    ``charset``: the protocol's (:func:`~indexerd.extract.decode.decode_text`); ``base_url``: for
    relative links. Memory: the DOM, several times the page. Never raises."""
    from selectolax.lexbor import LexborHTMLParser

    text, codec, bom = decode_document(data, charset, True)
    # lexbor reads bytes as UTF-8: skip the re-encode of a str when the bytes already are that.
    tree = LexborHTMLParser(data if codec == "utf-8" and not bom else text)
    kinds = _tag_kinds_by_id()
    heading_ids = _heading_tag_ids()
    headings: list[str] = []
    title = h1 = base_href = canonical = None
    meta: dict[str, str] = {}
    robots: list[str] = []
    hrefs: list[str] = []
    blocks = []
    hidden = []
    pres = []
    root = tree.root
    for node in root.traverse() if root is not None else ():
        kind = kinds.get(node.tag_id)
        if kind is None:
            continue
        if node.tag_id in heading_ids:
            if line := one_line(node.text(), TITLE_MAX_CHARS):
                headings.append(line)
        if kind == BLOCK:
            blocks.append(node)
            if node.tag == "pre":
                pres.append(node)
        elif kind == HREF:
            if href := node.attrs.get("href"):
                hrefs.append(href)
        elif kind == HIDDEN:
            hidden.append(node)
        elif kind == SRC or kind == IFRAME:
            if src := node.attrs.get("src"):
                hrefs.append(src)
            if kind == IFRAME:  # its content is raw text that is never shown
                hidden.append(node)
        elif kind == H1:
            blocks.append(node)
            if h1 is None:
                h1 = node.text()
        elif kind == TITLE:
            if title is None:
                title = node.text()
        elif kind == META:
            add_meta(node.attributes, meta, robots)
        elif kind == BASE:
            if base_href is None:
                base_href = node.attrs.get("href")
        elif canonical is None and "canonical" in (node.attrs.get("rel") or "").lower().split():
            canonical = node.attrs.get("href")
    for node in blocks:
        node.insert_before("\x00")
        node.insert_after("\x00")
    for node in reversed(hidden):  # innermost first, so no node is removed twice
        node.decompose()
    for node in pres:  # their lines and indentation survive the collapse below
        for text_node in list(node.traverse(include_text=True)):
            if text_node.tag == "-text" and (content := text_node.text_content) and content != "\x00":
                text_node.replace_with(keep_layout(content))
    body = tree.body
    body_text = restore_layout(collapse_lines(body.text(), "\x00")) if body is not None else ""
    title = one_line(title, TITLE_MAX_CHARS) or one_line(h1, TITLE_MAX_CHARS)
    result = html_document(title, body_text, codec, meta, robots, hrefs, base_href, canonical, base_url)
    main = main_element(tree) if body is not None else None
    main_text = restore_layout(collapse_lines(main.text(), "\x00")) if main is not None else ""
    if main is not None:  # the page's own headings, not its navigation's ("Next topic")
        headings = [line for node in main.css("h1, h2, h3, h4, h5, h6")
                    if (line := one_line(node.text().replace("\x00", " "), TITLE_MAX_CHARS))]
    if headings:
        result = replace(result, headings="\n".join(headings))
    return replace(result, main_text=main_text) if main_text and main_text != body_text else result


@lru_cache(maxsize=1)
def _heading_tag_ids() -> frozenset[int]:
    """lexbor's tag ids of ``h1``-``h6``."""
    from selectolax.lexbor import LexborHTMLParser

    factory = LexborHTMLParser("")
    return frozenset(factory.create_node(f"h{n}").tag_id for n in range(1, 7))
