"""HTML through a streaming parser (``html.parser``): memory is the text kept, not a tree.

Used for pages too large for a DOM (:data:`indexerd.extract.html.LARGE_HTML_BYTES`) and for
pages with a tag lexbor would take quadratic time over. It reads the same tag kinds as the lexbor
DOM walk (:data:`indexerd.extract.htmlpage.TAG_KINDS`) and gives the same fields, with two known
differences, both where the HTML tree construction rules repair markup
(https://html.spec.whatwg.org/multipage/parsing.html#tree-construction): a misplaced tag (a
``<td>`` outside a table, a ``<frame>`` outside a frameset) is dropped by lexbor while the stream
keeps its word break or link; and ``<plaintext>`` never ends for lexbor, while the stream ends it at
``</plaintext>``. ``main_text`` is always ``None`` (there is no tree to find the main element in),
so ``headings`` are every visible ``h1``-``h6`` of the page, as the DOM path gives them for a page
without a main element.

Pure and thread-safe: each call builds its own parser.
"""

from __future__ import annotations

import re
from dataclasses import replace

from indexerd.extract.decode import decode_document
from indexerd.extract.extracted import TITLE_MAX_CHARS, Extracted
from indexerd.extract.htmlpage import (
    BASE, BLOCK, H1, HIDDEN, HREF, IFRAME, LINK, META, SRC, TAG_KINDS, TITLE, add_meta,
    html_document,
)
from indexerd.extract.text import one_line
from indexerd.extract.whitespace import collapse_lines, keep_layout, restore_layout

_HEAD_TAGS = frozenset("html head title meta link base script style noscript template".split())
"""``<html>`` and the elements that may stay in ``<head>``; any other start tag opens the body
(HTML tree construction rules)."""

_RAW_TEXT_TAGS = frozenset("script style xmp iframe noembed noframes noscript textarea title plaintext".split())
"""Elements whose content is text up to their end tag, never markup (HTML tokenizer: RAWTEXT,
RCDATA, script data and PLAINTEXT; ``noscript`` as with scripting on, as lexbor does)."""

_UNTERMINATED_MARKUP = re.compile(r"<[!/?A-Za-z]")

_VOID_TAGS = frozenset("area base br col embed hr img input link meta source track wbr".split())

_HEADING_TAGS = frozenset(f"h{n}" for n in range(1, 7))


class _HTMLStream:
    """The streaming twin of :func:`indexerd.extract.html.extract_html_lexbor`, on the standard
    library's ``HTMLParser``: the same tag kinds (:data:`TAG_KINDS`) decide word breaks, hidden
    content, title, first ``h1``, meta tags, links, ``<base>`` and ``rel=canonical``; only body
    text is kept.  Where ``HTMLParser`` is laxer than the HTML parsing rules, it is told what
    lexbor does: raw-text elements (``<textarea>``, ``<title>``, ``<iframe>``, ...), a
    self-closing slash on a non-void element ignored, ``<head>`` closed by the first body content,
    a NUL dropped, an unterminated comment or tag at the end dropped, a malformed ``<![ ... ]>``
    read as a bogus comment.  Memory is the text it keeps, not a tree."""

    def __init__(self) -> None:
        from html import unescape
        from html.parser import HTMLParser

        stream = self

        class _Parser(HTMLParser):
            def handle_starttag(self, tag, attrs):
                stream.start(tag, attrs)
                if tag in _RAW_TEXT_TAGS:
                    self.set_cdata_mode(tag)
                    stream.raw = tag

            def handle_startendtag(self, tag, attrs):
                if tag in _VOID_TAGS:
                    stream.start(tag, attrs)
                    stream.end(tag)
                else:  # HTML ignores the slash of <div/>, <iframe/>: the element stays open
                    self.handle_starttag(tag, attrs)

            def handle_endtag(self, tag):
                stream.raw = None
                stream.end(tag)

            def handle_data(self, data):
                if stream.raw in ("title", "textarea"):  # RCDATA: references are decoded
                    data = unescape(data)
                stream.data(data)

            def parse_html_declaration(self, i):
                try:
                    return super().parse_html_declaration(i)
                except AssertionError:  # "<![ x ]>": HTML reads a bogus comment up to ">"
                    j = self.rawdata.find(">", i + 2)
                    return -1 if j < 0 else j + 1

        self.parser = _Parser(convert_charrefs=True)
        self.raw: str | None = None   # the raw-text element open now
        self.out: list[str] = []
        self.hidden = 0               # open hidden elements (script, style, svg, iframe, ...)
        self.pre = 0                  # open <pre> elements: their text keeps its lines
        self.in_body = False
        self.title: list[str] | None = None   # collecting the first <title>
        self.in_title = False
        self.title_in_body = False
        self.h1: list[str] | None = None      # collecting the first <h1>
        self.title_done = self.h1_done = False
        self.heading: list[str] | None = None  # collecting the h1-h6 open now
        self.headings: list[str] = []
        self.meta: dict[str, str] = {}
        self.robots: list[str] = []
        self.hrefs: list[str] = []
        self.base_href: str | None = None
        self.canonical: str | None = None

    def feed(self, text: str) -> None:
        """Parse the whole document, given in one piece: fed in chunks, a tag longer than a
        chunk would be re-parsed from its start at every chunk (quadratic)."""
        self.parser.feed(text)
        rest = self.parser.rawdata
        if self.raw is not None:  # an unterminated <title>, <textarea>, ... runs to the end
            self.parser.rawdata = ""
            if rest:
                self.parser.handle_data(rest)
        elif _UNTERMINATED_MARKUP.match(rest):  # a comment or tag cut by the end is no text
            self.parser.rawdata = ""
        self.parser.close()

    def start(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body" or (not self.in_body and tag not in _HEAD_TAGS):
            self.in_body = True
            if tag == "body":
                return
        kind = TAG_KINDS.get(tag)
        if kind is None:
            return
        if tag in _HEADING_TAGS and not self.hidden:
            self.heading_end()   # a heading's start tag closes an open one (HTML parsing rules)
            self.heading = []
        attributes = dict(attrs)
        if kind == HIDDEN or kind == IFRAME:
            if kind == IFRAME and (src := attributes.get("src")):
                self.hrefs.append(src)
            self.hidden += 1
            return
        if (kind == BLOCK or kind == H1) and not self.hidden:
            self.out.append("\x00")
            if tag == "pre":
                self.pre += 1
        if kind == HREF:
            if href := attributes.get("href"):
                self.hrefs.append(href)
        elif kind == SRC:
            if src := attributes.get("src"):
                self.hrefs.append(src)
        elif kind == H1:
            if not self.h1_done:
                self.h1 = []
        elif kind == TITLE:
            self.in_title = True
            self.title_in_body = self.in_body
            if not self.title_done and not self.hidden:
                self.title = []
        elif kind == META:
            add_meta(attributes, self.meta, self.robots)
        elif kind == BASE:
            if self.base_href is None:
                self.base_href = attributes.get("href")
        elif kind == LINK:
            if self.canonical is None and "canonical" in (attributes.get("rel") or "").lower().split():
                self.canonical = attributes.get("href")

    def end(self, tag: str) -> None:
        kind = TAG_KINDS.get(tag)
        if tag in _HEADING_TAGS and not self.hidden:
            self.heading_end()
        if kind == HIDDEN or kind == IFRAME:
            self.hidden = max(0, self.hidden - 1)
        elif kind == BLOCK or kind == H1:
            if not self.hidden:
                self.out.append("\x00")
                if tag == "pre":
                    self.pre = max(0, self.pre - 1)
            if kind == H1 and self.h1 is not None:
                self.h1_done = True
        elif kind == TITLE:
            self.in_title = False
            if self.title is not None:
                self.title_done = True

    def heading_end(self) -> None:
        """End the heading being collected, if any: its text, on one line, joins ``headings``."""
        if self.heading is not None:
            if line := one_line("".join(self.heading), TITLE_MAX_CHARS):
                self.headings.append(line)
            self.heading = None

    def data(self, text: str) -> None:
        if self.hidden:
            return
        if "\x00" in text:
            text = text.replace("\x00", "")  # HTML drops a NUL in text
        if self.in_title:
            if self.title is not None and not self.title_done:
                self.title.append(text)
            if self.title_in_body:
                self.out.append(text)
            return
        if self.h1 is not None and not self.h1_done:
            self.h1.append(text)
        if self.heading is not None:
            self.heading.append(text)
        if not self.in_body and not text.isspace():
            self.in_body = True  # text before <body> opens it
        if self.in_body:
            self.out.append(keep_layout(text) if self.pre else text)


def extract_html_streaming(data: bytes, charset: str | None, base_url: str | None) -> Extracted:
    """An HTML page -> :class:`Extracted` in one pass of ``HTMLParser``, without a tree.

    ``charset``: the protocol's (:func:`~indexerd.extract.decode.decode_text`); ``base_url``: for
    relative links. Memory: the decoded page and the text kept.

    Raises:
        Exception: whatever ``HTMLParser`` raises on markup it cannot read (none is known: the
            parity tests feed it every page they have); the caller falls back to lexbor.
    """
    text, codec, _ = decode_document(data, charset, True)
    stream = _HTMLStream()
    stream.feed(text)
    del text
    body_text = restore_layout(collapse_lines("".join(stream.out), "\x00"))
    title = one_line("".join(stream.title or ()), TITLE_MAX_CHARS) \
        or one_line("".join(stream.h1 or ()), TITLE_MAX_CHARS)
    stream.heading_end()   # a heading left open runs to the end of the page
    result = html_document(title, body_text, codec, stream.meta, stream.robots, stream.hrefs,
                           stream.base_href, stream.canonical, base_url)
    return replace(result, headings="\n".join(stream.headings)) if stream.headings else result
