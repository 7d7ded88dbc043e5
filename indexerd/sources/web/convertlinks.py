"""Links made for offline browsing in a mirror's copy of a page (``convert_links``, wget's
``-k``/``--convert-links``): a link to what the mirror keeps becomes a relative path to its file,
a link to anything else an absolute URL.  Only the copy on disk changes: the bytes indexed and
dated stay the server's.

As wget does, the pages a pass kept are converted once the pass is over, when it knows what it
kept (:meth:`indexerd.sources.web.mirrorlinks.KeptForConversion.convert`): a link is made relative
when its target's file exists (or, for a duplicate's alias, the kept page's), else absolute.  A
page not fetched again in a later pass keeps the links it was given then.

Attribute values are replaced in place in the decoded text (the page's codec, undecodable bytes
kept by ``surrogateescape``), so everything else in the copy is byte for byte the server's.
Tags are found by :class:`html.parser.HTMLParser` (the standard library's tokenizer, lenient with
broken markup).  CSS is converted too, as wget's ``-k`` does: a mirrored stylesheet's
``url(...)`` and ``@import`` (:func:`convert_stylesheet`, relative to the stylesheet's own
file), a page's ``<style>`` blocks and ``style`` attributes (:func:`convert_css`), so the images
and fonts a stylesheet names are found on disk too.  Pure: what a URL becomes is the caller's
``target``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from html import unescape
from html.parser import HTMLParser
from urllib.parse import quote, urljoin, urlsplit

from indexerd.extract.decode import decode_document

#: Attributes holding URLs, by tag; ``*`` for every tag.  Values are (attribute, displays):
#: ``displays`` is True for a URL the page needs to display (a page requisite).
_URL_ATTRIBUTES: dict[str, tuple[tuple[str, bool], ...]] = {
    "a": (("href", False),), "area": (("href", False),), "link": (("href", True),),
    "frame": (("src", False),), "iframe": (("src", False),), "img": (("src", True), ("srcset", True)),
    "script": (("src", True),), "source": (("src", True), ("srcset", True)),
    "video": (("src", True), ("poster", True)), "audio": (("src", True),), "track": (("src", True),),
    "embed": (("src", True),), "object": (("data", True),), "input": (("src", True),),
    "body": (("background", True),), "td": (("background", True),), "table": (("background", True),),
}
_ATTRIBUTE = re.compile(r"""(\s)([^\s"'>/=]+)(\s*=\s*)("[^"]*"|'[^']*'|[^\s"'=<>`]+)""")
#: ``url(x)``, ``url("x")``, ``url( 'x' )`` and ``@import "x"`` in CSS text (CSS Syntax Level 3's
#: url token and the string an ``@import`` names; escapes inside a URL are left as written)
_CSS_URL = re.compile(r"""(url\(\s*)(["']?)([^"')\s]*)(\2\s*\))|(@import\s+)(["'])([^"']*)(\6)""", re.I)
_STYLE_END = re.compile(r"</style\s*>", re.I)


def convert_page(data: bytes, charset: str | None, page_url: str,
                 target: Callable[[str, bool], str | None]) -> bytes:
    """The copy of HTML page ``data`` (fetched from ``page_url``; ``charset`` the protocol's)
    with every URL attribute rewritten: ``target(url, displays)`` gives the relative path to
    write for an absolute ``url`` (``displays``: the element shows it, a page requisite), or
    None to write ``url`` absolute.  Fragments are kept.  ``<base href>`` is removed from the
    copy (its relative links are written against the mirror's layout).  Never raises: a page
    the parser cannot read is returned as it came."""
    _text, codec, _bom = decode_document(data, charset, True)
    try:
        raw = data.decode(codec or "utf-8", "surrogateescape")
    except (LookupError, UnicodeDecodeError):
        return data
    try:
        tags = _Tags.read(raw)
    except Exception:  # noqa: BLE001 - HTMLParser gave up on some markup: the copy stays as it is
        return data
    base = page_url
    for _start, _end, name, tag_text in tags:
        if name == "base":
            m = re.search(r"""href\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)""", tag_text, re.I)
            if m:
                base = urljoin(page_url, unescape(m.group(1).strip("\"'")))
            break
    out: list[str] = []
    last = 0
    for start, end, name, tag_text in tags:
        if end <= last:
            continue  # inside a <style> block already converted
        if name == "base":
            out.append(raw[last:start])
            last = end
            continue
        rules = {**dict(_URL_ATTRIBUTES.get(name, ())), "style": True}
        new = _ATTRIBUTE.sub(lambda m: _rewrite(m, rules, base, target), tag_text)
        if name == "style" and (close := _STYLE_END.search(raw, end)) is not None:
            css = raw[end:close.start()]
            converted = convert_css(css, base, target)
            if new != tag_text or converted != css:
                out.append(raw[last:start])
                out.append(new + converted)
                last = close.start()
            continue
        if new != tag_text:
            out.append(raw[last:start])
            out.append(new)
            last = end
    if not out:
        return data
    out.append(raw[last:])
    try:
        return "".join(out).encode(codec or "utf-8", "surrogateescape")
    except (UnicodeEncodeError, LookupError):
        return data


def _rewrite(m: re.Match, rules: dict[str, bool], base: str,
             target: Callable[[str, bool], str | None]) -> str:
    attribute = m.group(2).lower()
    if attribute not in rules:
        return m.group(0)
    quoted = m.group(4)
    quote_char = quoted[0] if quoted[0] in "\"'" else ""
    value = unescape(quoted.strip("\"'") if quote_char else quoted)
    if attribute == "style":
        new = convert_css(value, base, target)
        if new == value:
            return m.group(0)
    elif attribute == "srcset":
        parts = []
        for candidate in value.split(","):
            words = candidate.split()
            if words:
                words[0] = _one(words[0], base, rules[attribute], target)
            parts.append(" ".join(words))
        new = ", ".join(parts)
    else:
        new = _one(value, base, rules[attribute], target)
    q = quote_char or '"'
    escaped = new.replace("&", "&amp;").replace(q, "&quot;" if q == '"' else "&#39;")
    return f"{m.group(1)}{m.group(2)}{m.group(3)}{q}{escaped}{q}"


def _one(value: str, base: str, displays: bool, target: Callable[[str, bool], str | None]) -> str:
    stripped = value.strip()
    try:
        scheme = urlsplit(stripped).scheme.lower()
    except ValueError:
        return value
    if not stripped or stripped.startswith("#") or scheme not in ("", "http", "https"):
        return value  # a fragment, javascript:, mailto:, data: ... stays as written
    try:
        url = urljoin(base, stripped)
    except ValueError:
        return value
    if not url.startswith(("http://", "https://")):
        return value
    url, hash_mark, fragment = url.partition("#")
    local = target(url, displays)
    return (local if local is not None else url) + hash_mark + fragment


def convert_css(css: str, base: str, target: Callable[[str, bool], str | None]) -> str:
    """CSS text with every ``url(...)`` and ``@import`` URL rewritten as :func:`convert_page`
    rewrites a page requisite's (``target(url, True)``; relative ones resolved against
    ``base``); everything else as it was.  ``data:`` and fragment-only URLs stay as written."""
    def sub(m: re.Match) -> str:
        if m.group(1) is not None:
            return m.group(1) + m.group(2) + _one(m.group(3), base, True, target) + m.group(4)
        return m.group(5) + m.group(6) + _one(m.group(7), base, True, target) + m.group(8)

    return _CSS_URL.sub(sub, css) if ("url(" in css.lower() or "@import" in css.lower()) else css


def convert_stylesheet(data: bytes, charset: str | None, sheet_url: str,
                       target: Callable[[str, bool], str | None]) -> bytes:
    """The copy of stylesheet ``data`` (fetched from ``sheet_url``; ``charset`` the protocol's)
    with its URLs rewritten by :func:`convert_css`, relative to the stylesheet.  Decoded as CSS
    Syntax Level 3 says (the protocol charset, else ``@charset``, else UTF-8: tinycss2's
    ``decode_stylesheet_bytes``); bytes it cannot decode are kept.  Never raises: a stylesheet
    it cannot read is returned as it came."""
    try:
        from tinycss2.bytes import decode_stylesheet_bytes

        _text, encoding = decode_stylesheet_bytes(data, protocol_encoding=charset)
        codec = encoding.codec_info.name
        raw = data.decode(codec, "surrogateescape")
        new = convert_css(raw, sheet_url, target)
        return data if new == raw else new.encode(codec, "surrogateescape")
    except Exception:  # noqa: BLE001 - an unreadable stylesheet is kept as the server sent it
        return data


def relative_path(from_file: str, to_file: str) -> str:
    """The URL path (percent-encoded, ``/``-separated) from the directory of ``from_file`` to
    ``to_file``, both paths in the mirror."""
    rel = os.path.relpath(to_file, os.path.dirname(from_file))
    return quote(rel.replace(os.sep, "/"), safe="/")


class _Tags(HTMLParser):
    """Start tags with their spans in the text: ``(start, end, name, raw tag text)``."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=False)
        self._line_starts = [0]
        for m in re.finditer("\n", text):
            self._line_starts.append(m.end())
        self.tags: list[tuple[int, int, str, str]] = []

    @classmethod
    def read(cls, text: str) -> list[tuple[int, int, str, str]]:
        parser = cls(text)
        parser.feed(text)
        parser.close()
        return parser.tags

    def _tag(self, tag: str) -> None:
        raw = self.get_starttag_text()
        if raw is None:
            return
        line, column = self.getpos()
        start = self._line_starts[line - 1] + column
        self.tags.append((start, start + len(raw), tag, raw))

    def handle_starttag(self, tag, attrs) -> None:
        self._tag(tag)

    def handle_startendtag(self, tag, attrs) -> None:
        self._tag(tag)

