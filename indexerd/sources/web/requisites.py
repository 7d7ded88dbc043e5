"""Page requisites: what a mirrored page needs to display offline (stylesheets, scripts,
images, fonts, media, embedded objects), found in its HTML and in its stylesheets.

wget's ``--page-requisites`` is the reference (https://www.gnu.org/software/wget/manual/wget.html,
"Recursive Retrieval Options"): the same elements and attributes, CSS ``url()`` and ``@import``
included.  Links a reader follows (``a``, ``area``, frames) are not requisites: they are the
crawl's links (:mod:`indexerd.extract.htmlpage`).

Outside contracts relied on: **selectolax 1.0** (lexbor; ``css()`` selectors and ``attrs``) for
HTML, **tinycss2 1.5** (https://doc.courtbouillon.org/tinycss2/) for CSS:
``parse_stylesheet_bytes`` decodes a stylesheet as CSS Syntax Level 3 says (BOM, ``@charset``,
the protocol's charset), and a URL appears as a ``URLToken`` (``url(x)``), a ``url()`` or
``src()`` function with a string argument, or an ``@import`` rule whose prelude starts with a
string.  Pure (no I/O); never raises on bad input.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final
from urllib.parse import urljoin

from indexerd.extract.decode import decode_document

#: How a URL found as a page requisite is queued (:data:`~indexerd.sources.web.urlstate.Via`).
VIA: Final = "requisite"
#: The last outcome of a URL kept as a requisite: it stays one at later passes.
OUTCOME = "requisite"
#: (CSS selector, attribute) pairs whose URL a page needs to display.
_HTML_URLS = (
    ("link[href]", "href"),          # stylesheets, icons, preloads (rel filtered below)
    ("script[src]", "src"),
    ("img[src]", "src"), ("img[srcset]", "srcset"), ("img[data-src]", "data-src"),
    ("picture source[srcset]", "srcset"), ("source[src]", "src"), ("source[srcset]", "srcset"),
    ("video[src]", "src"), ("video[poster]", "poster"), ("audio[src]", "src"),
    ("track[src]", "src"), ("embed[src]", "src"), ("object[data]", "data"),
    ("input[src]", "src"), ("body[background]", "background"), ("table[background]", "background"),
    ("td[background]", "background"), ("image[href]", "href"), ("use[href]", "href"),
)
#: ``<link rel=...>`` values that name something the page itself uses.
_LINK_RELS = frozenset({"stylesheet", "icon", "shortcut", "apple-touch-icon", "preload",
                        "modulepreload", "prefetch", "manifest", "mask-icon"})
_DROPPED = ("javascript:", "data:", "mailto:", "about:", "blob:", "#")
#: A stylesheet larger than this (bytes) is not searched for URLs.
MAX_CSS_BYTES = 4 * 1024 * 1024


def is_requisite(state) -> bool:
    """A URL's :class:`~indexerd.sources.web.urlstate.UrlState` is that of a page requisite:
    queued as one in this pass, or kept as one at its last answer."""
    return state.via == VIA or state.last_outcome == OUTCOME


def content_charset(content_type: str) -> str | None:
    """The ``charset`` parameter of a ``Content-Type`` value, or None."""
    from email.message import Message

    message = Message()
    message["Content-Type"] = content_type or "application/octet-stream"
    return message.get_content_charset()


def is_stylesheet(url: str, content_type: str) -> bool:
    """A response is CSS: by its ``Content-Type``, else by its URL's ``.css`` path."""
    media = content_type.partition(";")[0].strip().lower()
    if media:
        return media == "text/css"
    return url.lower().partition("?")[0].endswith(".css")


def html_requisites(data: bytes, charset: str | None, base_url: str) -> list[str]:
    """The absolute URLs (http/https, fragment dropped, in document order, each once) that the
    HTML page ``data`` fetched from ``base_url`` needs to display: see :data:`_HTML_URLS`,
    ``srcset`` candidates, and CSS ``url()``/``@import`` in ``<style>`` elements and ``style``
    attributes.  ``charset``: the protocol's.  Relative URLs resolve against ``<base href>``."""
    from selectolax.lexbor import LexborHTMLParser

    text, _codec, _bom = decode_document(data, charset, True)
    tree = LexborHTMLParser(text)
    base = base_url
    node = tree.css_first("base[href]")
    if node is not None and (href := (node.attrs.get("href") or "").strip()):
        base = urljoin(base_url, href)
    raw: list[str] = []
    for selector, attribute in _HTML_URLS:
        for element in tree.css(selector):
            value = element.attrs.get(attribute)
            if not value:
                continue
            if selector.startswith("link"):
                rels = set((element.attrs.get("rel") or "").lower().split())
                if not rels & _LINK_RELS:
                    continue
            raw.extend(_srcset(value) if attribute == "srcset" else (value,))
    for element in tree.css("style"):
        raw.extend(css_urls(element.text(deep=True)))
    for element in tree.css("[style]"):
        raw.extend(css_urls(element.attrs.get("style") or "", declarations=True))
    return absolute(raw, base)


def css_requisites(data: bytes, charset: str | None, base_url: str) -> list[str]:
    """The absolute URLs a stylesheet fetched from ``base_url`` uses (``@import`` and every
    ``url()``: fonts, images, other stylesheets), each once; none for one over
    :data:`MAX_CSS_BYTES`."""
    if len(data) > MAX_CSS_BYTES:
        return []
    import tinycss2

    rules, _encoding = tinycss2.parse_stylesheet_bytes(data, protocol_encoding=charset)
    return absolute(_urls_in(rules), base_url)


def css_urls(css: str, *, declarations: bool = False) -> list[str]:
    """The URLs written in CSS text (a stylesheet, or a ``style`` attribute's declarations), as
    written (not resolved)."""
    import tinycss2

    nodes = (tinycss2.parse_blocks_contents(css) if declarations
             else tinycss2.parse_stylesheet(css))
    return list(_urls_in(nodes))


def _urls_in(nodes: Iterable) -> Iterator[str]:
    for node in nodes:
        kind = getattr(node, "type", None)
        if kind == "url":
            yield node.value
        elif kind == "function" and node.lower_name in ("url", "src", "image-set"):
            for arg in node.arguments:
                if getattr(arg, "type", None) == "string":
                    yield arg.value
            yield from _urls_in(node.arguments)
        elif kind == "at-rule" and node.lower_at_keyword == "import":
            first = next((t for t in node.prelude if getattr(t, "type", None) not in ("whitespace", "comment")), None)
            if first is not None and first.type == "string":
                yield first.value
            yield from _urls_in(node.prelude)
        for part in ("prelude", "content", "arguments", "value"):
            children = getattr(node, part, None)
            if isinstance(children, list) and not (kind == "function" and part == "arguments") \
                    and not (kind == "at-rule" and part == "prelude" and node.lower_at_keyword == "import"):
                yield from _urls_in(children)


def _srcset(value: str) -> list[str]:
    """The URLs of a ``srcset`` (``a.png 1x, b.png 2x``; HTML's "parse a srcset attribute",
    simplified: a candidate is its first white-space-separated word)."""
    out = []
    for candidate in value.split(","):
        words = candidate.split()
        if words:
            out.append(words[0])
    return out


def absolute(raw: Iterable[str], base: str) -> list[str]:
    """``raw`` URLs resolved against ``base``: http(s) only, fragments dropped, each once, in
    order."""
    out: dict[str, None] = {}
    for value in raw:
        value = value.strip()
        if not value or value.lower().startswith(_DROPPED):
            continue
        try:
            url = urljoin(base, value).partition("#")[0]
        except ValueError:
            continue
        if url.startswith(("http://", "https://")):
            out[url] = None
    return list(out)
