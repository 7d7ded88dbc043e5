"""Links made for offline browsing in a mirror's copy of a page (``convert_links``, wget's
``-k``/``--convert-links``): a link to what the mirror keeps becomes a relative path to its file,
a link to anything else an absolute URL.  Only the copy on disk changes: the bytes indexed and
dated stay the server's.

As wget does, the pages a pass kept are converted once the pass is over, when it knows what it
kept (:meth:`indexerd.sources.web.answers.Answers.convert_mirrored_pages`): a link is made relative
when its target's file exists (or, for a duplicate's alias, the kept page's), else absolute.  A
page not fetched again in a later pass keeps the links it was given then.

Attribute values are replaced in place in the decoded text (the page's codec, undecodable bytes
kept by ``surrogateescape``), so everything else in the copy is byte for byte the server's.
Tags are found by :class:`html.parser.HTMLParser` (the standard library's tokenizer, lenient with
broken markup); pure except for :meth:`PageLinks.relative_to`'s look at the mirror.
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
        if name == "base":
            out.append(raw[last:start])
            last = end
            continue
        rules = dict(_URL_ATTRIBUTES.get(name, ()))
        if not rules:
            continue
        new = _ATTRIBUTE.sub(lambda m: _rewrite(m, rules, base, target), tag_text)
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
    if attribute == "srcset":
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

