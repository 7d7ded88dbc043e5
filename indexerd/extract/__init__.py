"""Document bytes + media type -> title, visible text, meta tags and links (pure functions).

Everything here takes values and returns values: no file, network or clock access, no logging,
no module state besides constant tables and two memo caches (charset labels, lexbor tag ids,
both behind ``functools.lru_cache``). Every public function is safe to call from any number
of threads at once (each call builds its own parser; the lexbor parser object is not
thread-safe, so it never outlives the call).

Outside contracts relied on (measured in ``shared/LIBRARIES.md``, sections 9 and 11):

- **selectolax 1.0, lexbor backend only** (``selectolax.lexbor.LexborHTMLParser``). It parses
  5,000-deep trees without truncation and returns an empty tree for empty input. It is fed the
  ``str`` we decoded ourselves (or the raw bytes when they are UTF-8 without a BOM, which it reads
  as UTF-8), because it ignores ``<meta charset>`` unless asked, and we must also honour the HTTP
  charset first. Per the HTML parsing rules a NUL in text content never reaches a text node, which
  is what lets ``\\x00`` serve as the block separator below.
- **pypdf 7.1**: ``PdfReader`` raises many exception types on damaged files; all of them become
  ``SkipDocument("parse-error")``. ``metadata.modification_date`` is aware when the PDF date has
  a zone.
- **charset-normalizer**: a last resort, and only for documents over 1 KiB; on short latin-1 text
  it guesses cp1257 or even UTF-16.

selectolax, pypdf and charset_normalizer are imported inside the functions that use them, so
importing this module costs only the standard library.
"""

from __future__ import annotations

import codecs
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timezone
from functools import lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING
from urllib.parse import urljoin

from indexerd.core.errors import SkipDocument
from indexerd.extract.maincontent import main_element
from indexerd.extract.titles import plain_text_title

if TYPE_CHECKING:
    from pypdf import DocumentInformation

MEDIA_HTML = "text/html"
MEDIA_TEXT = "text/plain"
MEDIA_MARKDOWN = "text/markdown"
MEDIA_PDF = "application/pdf"
INDEXABLE_TYPES: frozenset[str] = frozenset({MEDIA_HTML, MEDIA_TEXT, MEDIA_MARKDOWN, MEDIA_PDF})

SNIFF_BYTES = 8192
"""How many leading bytes the media-type and binary sniffing look at."""

TITLE_MAX_CHARS = 300
"""HTML titles are cut here (an unclosed ``<title>`` swallows the rest of the document)."""

LINE_TITLE_MAX_CHARS = 200
"""Titles taken from a first line (plain text, Markdown, PDF without /Title) are cut here."""

LARGE_HTML_BYTES = 1024 * 1024
"""HTML larger than this (bytes) is read by a streaming parser instead of lexbor's DOM: a DOM
costs ~12x the page (an 8 MB page held 100 MB), the stream ~1x, at a third of lexbor's speed
(8 MB in 0.8 s).  Both give the same text, title, meta tags and links on every real page we
have (1,190 pages of Python, Node.js and Debian docs) and on ~60 hostile snippets
(``tests/test_extract.py``); they differ only where the HTML tree rules drop a misplaced tag (a
``<td>`` outside a table, a ``<frame>`` outside a frameset: lexbor drops it, the stream keeps its
word break or link) and after ``<plaintext>``.  Markup ``HTMLParser`` cannot read at all falls
back to lexbor."""

_LONG_SPAN = re.compile(rb"<[^<]{32768}")
"""32 KiB after a ``<`` without another: maybe one tag with thousands of attributes, which
lexbor parses in quadratic time (60,000 attributes in an 818 KB page: 5.5 s); such a page goes
through the streaming parser (linear).  Linear to search: each byte is scanned once."""

_CHARDET_MIN_BYTES = 1024
_META_SCAN_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Extracted:
    """What one document yields for the index and the crawler.

    Attributes:
        title: one line, whitespace collapsed; ``""`` when none was found.
        text: visible text; runs of whitespace collapsed to one space inside a block, one
            ``"\\n"`` between blocks (HTML block elements, non-empty lines of text, PDF lines).
            The HTML ``<title>`` is not repeated in it.
        media_type: one of :data:`INDEXABLE_TYPES`.
        encoding: the Python codec name actually used to decode (``"utf-8"``, ``"cp1252"``,
            ``"utf-16-le"`` ...); ``None`` for PDF.
        meta: read-only; HTML: lower-cased ``<meta name|http-equiv|property>`` -> stripped
            ``content``, first occurrence wins. PDF: ``"pdf:title"`` and ``"pdf:moddate"``
            (ISO 8601 UTC, ``2023-05-01T10:00:00Z``) when present.
        links: HTML only: ``a[href]``, ``area[href]``, ``frame[src]``, ``iframe[src]`` in document
            order, de-duplicated, resolved against ``<base href>`` (itself resolved against
            ``base_url``) else ``base_url``; kept as written when there is no base. ``javascript:``,
            ``mailto:`` and ``data:`` links are dropped. Not canonicalised (the crawler does that).
            A ``<meta http-equiv=refresh>`` target comes last.
        image_links: ``img[src]``, resolved the same way.
        canonical: ``<link rel=canonical href>`` resolved the same way, else ``None``.
        noindex: a ``<meta name=robots|indexerd>`` says ``noindex`` or ``none``.
        nofollow: a ``<meta name=robots|indexerd>`` says ``nofollow`` or ``none``.
        refresh: HTML only: ``<meta http-equiv=refresh>`` naming a URL, as ``(delay in whole
            seconds, URL resolved like the links)`` (:func:`parse_refresh`); ``None`` when there
            is none or it only reloads the page.  :attr:`redirect` says whether it is a redirect.
        main_text: HTML only: the text of the page's main content, collapsed like ``text`` (a
            part of it): the first ``<main>`` or ``role=main`` element (HTML Living Standard
            §4.4.14; WAI-ARIA 1.2 ``main`` role), else the only ``<article>``, else the body
            without its navigation landmarks (``nav``, ARIA navigation/banner/contentinfo/search,
            a page-level header or footer, DocBook's navheader/navfooter); ``None`` when the
            page has none of these, it is empty, or the page went through the streaming parser.
            Snippets are taken from it; the whole ``text`` stays searchable.

    Instances are immutable and safe to share between threads. ``meta`` is left out of
    ``hash()`` (a mapping is not hashable) but not out of ``==``.
    """

    title: str
    text: str
    media_type: str
    encoding: str | None
    meta: Mapping[str, str] = field(hash=False)
    links: tuple[str, ...]
    image_links: tuple[str, ...]
    canonical: str | None
    noindex: bool
    nofollow: bool
    refresh: tuple[int, str] | None = None
    main_text: str | None = None

    @property
    def redirect(self) -> str | None:
        """The refresh target when the page is an HTML-level redirect, else None.

        A redirect is an instant refresh (delay 0: the reader never sees the page, and
        "Redirecting..." stubs carry a line of text) or a refresh on a page without text of its
        own; a page with text and a slower refresh is a document, and its target one more link.
        """
        if self.refresh is None or (self.refresh[0] > 0 and self.text):
            return None
        return self.refresh[1]


def content_hash(title: str, text: str) -> str:
    """Return the SHA-256 hex digest (64 lower-case chars) of ``title + "\\x00" + text``.

    The re-index decision compares this digest: pass the ``title`` and ``text`` of an
    :class:`Extracted`, whose whitespace is already normalised. Because only visible text and
    the title go in, a rotating nonce in a ``<script>``, a session id in a link ``href`` or an
    ad id in an attribute does not change it; one changed visible word does. Never raises
    (lone surrogates are hashed as they are). Thread-safe.
    """
    digest = hashlib.sha256(title.encode("utf-8", "surrogatepass"))
    digest.update(b"\x00")
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


# --------------------------------------------------------------------------- media types

_DECLARED_TYPES = {
    "text/html": MEDIA_HTML,
    "application/xhtml+xml": MEDIA_HTML,
    "text/plain": MEDIA_TEXT,
    "text/markdown": MEDIA_MARKDOWN,
    "text/x-markdown": MEDIA_MARKDOWN,
    "application/pdf": MEDIA_PDF,
    "application/x-pdf": MEDIA_PDF,
    "application/json": MEDIA_TEXT,
    "application/xml": MEDIA_TEXT,
}
# Types that say nothing about the content: decide by the name and the bytes instead.
_GENERIC_TYPES = frozenset(
    {"", "application/octet-stream", "binary/octet-stream", "application/unknown", "*/*",
     "application/x-unknown", "unknown/unknown"}
)
_EXTENSION_TYPES = {
    **dict.fromkeys((".html", ".htm", ".xhtml", ".shtml"), MEDIA_HTML),
    **dict.fromkeys(
        (".txt", ".text", ".log", ".rst", ".csv", ".tsv", ".ini", ".cfg", ".conf", ".json",
         ".xml"),
        MEDIA_TEXT,
    ),
    ".md": MEDIA_MARKDOWN,
    ".markdown": MEDIA_MARKDOWN,
    ".pdf": MEDIA_PDF,
}
_BINARY_EXTENSIONS = frozenset(
    ".png .jpg .jpeg .gif .bmp .ico .webp .tif .tiff .svg .psd .heic .avif .mp3 .mp4 .m4a .ogg"
    " .oga .ogv .wav .flac .avi .mov .mkv .webm .gz .tgz .bz2 .xz .zst .lz4 .zip .7z .rar .tar"
    " .jar .war .whl .egg .deb .rpm .iso .dmg .so .dll .exe .bin .o .a .lib .class .pyc .pyo"
    " .pyd .woff .woff2 .ttf .otf .eot .sqlite .sqlite3 .db .doc .docx .xls .xlsx .ppt .pptx"
    " .odt .ods .odp .epub".split()
)
# C0 controls that do not occur in text (tab, LF, VT, FF, CR and ESC do).
_CONTROL_BYTES = bytes(b for b in range(32) if b not in b"\t\n\x0b\x0c\r\x1b") + b"\x7f"
_NOT_CONTROL_BYTES = bytes(b for b in range(256) if b not in _CONTROL_BYTES)
_HTML_STARTS = (b"<!doctype html", b"<html", b"<head", b"<body")
_TAG_ENDS = (b"", b">", b" ", b"\t", b"\r", b"\n", b"\x0c")
_XML_DECL_RE = re.compile(rb"<\?xml[^>]{0,200}\?>\s*")
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
         (codecs.BOM_UTF16_BE, "utf-16-be"))


def guess_media_type(name: str | None, head: bytes, declared: str | None = None) -> str | None:
    """Decide which of :data:`INDEXABLE_TYPES` a document is, or ``None`` to skip it.

    Args:
        name: a file name, path or URL (its last path segment's extension is used; a URL's
            query and fragment are ignored), or ``None``.
        head: the first bytes of the document; only the first :data:`SNIFF_BYTES` are read.
        declared: an HTTP ``Content-Type`` value, parameters allowed
            (``"text/html; charset=utf-8"``), or ``None``.

    Order: the declared type (unless generic, like ``application/octet-stream``), else the
    extension, else sniffing ``head`` (``%PDF-`` -> PDF; ``<!doctype html``, ``<html``,
    ``<head``, ``<body`` after a BOM, whitespace or an XML declaration -> HTML; other text ->
    plain text). The bytes overrule a declared text type or a text extension: ``%PDF-`` makes
    it PDF, and a NUL byte or a high share of control bytes makes it binary (``None``), so
    binary data is never parsed as HTML. A declared or named PDF is left to the PDF reader
    (a damaged one is a parse error, not a guess). Returns ``None`` for binary data and for
    types not indexed (images, archives, executables, fonts, ...). Never raises. Thread-safe.
    """
    return _classify(name, head, declared, None)[0]


def _classify(
    name: str | None, head: bytes, declared: str | None, charset: str | None
) -> tuple[str | None, str]:
    """:func:`guess_media_type` plus why it is ``None``: ``"binary"`` or ``"unsupported-type"``."""
    head = head[:SNIFF_BYTES]
    declared_type, declared_charset = _parse_content_type(declared)
    charset = charset or declared_charset
    if declared_type in _DECLARED_TYPES:
        claimed: str | None = _DECLARED_TYPES[declared_type]
    elif declared_type.startswith("text/") or declared_type.endswith(("+xml", "+json")):
        claimed = MEDIA_TEXT
    elif declared_type not in _GENERIC_TYPES:
        return None, "binary" if _looks_binary(head, charset) else "unsupported-type"
    else:
        extension = _extension(name)
        if extension in _BINARY_EXTENSIONS:
            return None, "binary" if _looks_binary(head, charset) else "unsupported-type"
        claimed = _EXTENSION_TYPES.get(extension)
    if claimed == MEDIA_PDF or _is_pdf(head):
        return MEDIA_PDF, ""
    if _looks_binary(head, charset):
        return None, "binary"
    if claimed is not None:
        return claimed, ""
    return (MEDIA_HTML if _sniff_html(head) else MEDIA_TEXT), ""


def _parse_content_type(value: str | None) -> tuple[str, str | None]:
    """``"Text/HTML; charset=\\"UTF-8\\""`` -> ``("text/html", "UTF-8")``."""
    if not value:
        return "", None
    kind, _, params = value.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset":
            charset = val.strip().strip("\"'") or None
            break
    return kind.strip().lower(), charset


def _extension(name: str | None) -> str:
    """The lower-cased extension of the last path segment (``".html"``), or ``""``."""
    if not name:
        return ""
    if "://" in name:
        name = name.partition("#")[0].partition("?")[0]
    segment = name.replace("\\", "/").rpartition("/")[2]
    dot = segment.rfind(".")
    return segment[dot:].lower() if dot > 0 else ""


def _is_pdf(head: bytes) -> bool:
    return head.lstrip(b" \t\r\n\x0c")[:5] == b"%PDF-"


def _looks_binary(head: bytes, charset: str | None = None) -> bool:
    """True when ``head`` has a NUL byte or more than 5 % control bytes (UTF-16 excepted)."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    if charset and (_codec(charset) or "").startswith(("utf-16", "utf-32")):
        return False
    if b"\x00" in head:
        return True
    controls = len(head.translate(None, _NOT_CONTROL_BYTES))  # what is left are the controls
    return controls * 20 > len(head)


def _sniff_html(head: bytes) -> bool:
    for bom, codec in _BOMS:
        if head.startswith(bom):
            head = head[len(bom):]
            if codec != "utf-8":  # UTF-16: look at the ASCII of the first characters
                head = head[:512].decode(codec, "replace").encode("ascii", "replace")
            break
    head = head.lstrip()
    if head.startswith(b"<?xml"):
        match = _XML_DECL_RE.match(head)
        head = head[match.end():] if match else head
    start = head[:15].lower()
    for tag in _HTML_STARTS:
        if start.startswith(tag):
            after = start[len(tag):len(tag) + 1]
            return tag == b"<!doctype html" or after in _TAG_ENDS
    return False


# --------------------------------------------------------------------------- decoding

# WHATWG Encoding Standard labels whose Python codec differs from the label's own meaning.
_WHATWG_LABELS = {
    **dict.fromkeys(
        ("iso-8859-1", "iso8859-1", "iso_8859-1", "iso_8859-1:1987", "latin1", "latin-1", "l1",
         "cp819", "ibm819", "iso-ir-100", "csisolatin1", "us-ascii", "ascii", "ansi_x3.4-1968",
         "us_ascii", "windows-1252", "x-cp1252"),
        "cp1252",
    ),
    **dict.fromkeys(("iso-8859-9", "iso8859-9", "iso_8859-9", "latin5", "l5"), "cp1254"),
    **dict.fromkeys(("tis-620", "iso-8859-11", "windows-874"), "cp874"),
    **dict.fromkeys(("gb2312", "gbk", "x-gbk", "chinese", "csgb2312"), "gbk"),
    **dict.fromkeys(("euc-kr", "ks_c_5601-1987", "windows-949", "korean"), "cp949"),
    **dict.fromkeys(("shift_jis", "shift-jis", "sjis", "x-sjis", "ms_kanji", "windows-31j"),
                    "cp932"),
    "big5": "big5hkscs",
    "utf-16": "utf-16-le",
    "unicode": "utf-16-le",
}
_META_CHARSET_RE = re.compile(rb"""<meta\s[^>]*?charset\s*=\s*["']?\s*([a-z0-9_.:\-]+)""", re.I)
_XML_ENCODING_RE = re.compile(rb"""\s*<\?xml[^>]{0,200}?\sencoding\s*=\s*["']([a-z0-9_.:\-]+)""",
                              re.I)


@lru_cache(maxsize=256)
def _codec(label: str) -> str | None:
    """A charset label -> Python codec name (``"Windows-1252"`` -> ``"cp1252"``), or ``None``.

    Unknown labels and bytes-to-bytes codecs (``base64``, ``rot13``) give ``None``.
    """
    label = label.strip().strip("\"'").lower()
    label = _WHATWG_LABELS.get(label, label)
    try:
        name = codecs.lookup(label).name
        b"A".decode(name, "replace")  # LookupError for codecs that do not decode bytes to text
    except (LookupError, ValueError, TypeError):
        return None
    return name


def decode_text(
    data: bytes, declared_charset: str | None = None, *, sniff_html: bool = False
) -> tuple[str, str]:
    """Decode document bytes; return ``(text, codec name actually used)``.

    Order (WHATWG, never a forced Latin-1): a BOM (UTF-8, UTF-16 LE/BE; stripped); then
    ``declared_charset`` (the protocol's, e.g. the HTTP ``charset`` parameter; an unknown or
    non-text codec name is ignored); then, with ``sniff_html``, the document's own declaration
    in its first 4 KiB (``<meta charset>``, ``<meta http-equiv=content-type content=...charset=>``,
    else ``<?xml ... encoding=...?>``; a declared UTF-16 there means UTF-8, as in WHATWG); then
    strict UTF-8; then charset-normalizer for documents over 1 KiB; then cp1252. The labels
    ``iso-8859-1``, ``latin1`` and ``us-ascii`` decode as cp1252 (the WHATWG mapping).

    Bytes invalid in the chosen codec become U+FFFD. Never raises for any ``data``.
    The codec name is Python's (``"utf-8"``, ``"cp1252"``, ``"utf-16-le"``). Thread-safe.
    """
    text, codec, _ = _decode(data, declared_charset, sniff_html)
    return text, codec


def _decode(data: bytes, declared: str | None, sniff_html: bool) -> tuple[str, str, int]:
    """:func:`decode_text` plus the length of the BOM that was skipped."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return data[len(bom):].decode(codec, "replace"), codec, len(bom)
    codec = _codec(declared) if declared else None
    if codec is None and sniff_html:
        head = data[:_META_SCAN_BYTES]
        match = _META_CHARSET_RE.search(head) or _XML_ENCODING_RE.match(head)
        codec = _codec(match.group(1).decode("ascii")) if match else None
        if codec is not None and codec.startswith(("utf-16", "utf-32")):
            codec = "utf-8"
    if codec is not None:
        return data.decode(codec, "replace"), codec, 0
    try:
        return data.decode("utf-8"), "utf-8", 0
    except UnicodeDecodeError:
        pass
    if len(data) > _CHARDET_MIN_BYTES:
        codec = _detect_charset(data)
        if codec is not None:
            return data.decode(codec, "replace"), codec, 0
    return data.decode("cp1252", "replace"), "cp1252", 0


def _detect_charset(data: bytes) -> str | None:
    """charset-normalizer's best guess as a codec name; no UTF-16/32 guess for NUL-free data."""
    from charset_normalizer import from_bytes

    try:
        best = from_bytes(data).best()
    except Exception:  # a heuristic on hostile input: any failure just means "no guess"
        return None
    codec = _codec(best.encoding) if best is not None else None
    if codec is None or (codec.startswith(("utf-16", "utf-32")) and b"\x00" not in data):
        return None
    return codec


# --------------------------------------------------------------------------- extract


def extract(
    data: bytes,
    media_type: str | None = None,
    *,
    charset: str | None = None,
    base_url: str | None = None,
    name: str | None = None,
) -> Extracted:
    """Turn one document's bytes into an :class:`Extracted`.

    Args:
        data: the whole document.
        media_type: a media type or HTTP ``Content-Type`` value (parameters allowed; its
            ``charset`` is used when ``charset`` is ``None``). It is checked against the bytes
            as in :func:`guess_media_type`; ``None`` -> guessed from ``name`` and the bytes.
        charset: the protocol's charset (HTTP ``charset`` parameter), or ``None``.
        base_url: the document's URL, for resolving relative links; ``None`` keeps them as
            written.
        name: file name, path or URL, for the extension and for error details.

    Raises:
        SkipDocument: ``"empty"`` (0 bytes, whitespace only, or no title and no text, even
            when an HTML page has links; not a page with a refresh target, which is a redirect); ``"binary"`` (NUL bytes or many control bytes, also
            in a ``.html`` or when declared ``text/html``); ``"unsupported-type"`` (a type not
            in :data:`INDEXABLE_TYPES`); ``"parse-error"`` (a PDF pypdf cannot read, including
            one encrypted with a password). Nothing else, for any input.

    Pure and thread-safe; HTML parsing is O(size), and links are resolved once per distinct
    ``href`` (a page with 100,000 links takes well under a second).
    """
    label = name or "document"
    if not data or data.isspace():
        raise SkipDocument("empty", f"{label}: no content")
    kind, why = _classify(name, data[:SNIFF_BYTES], media_type, charset)
    if kind is None:
        if why == "binary":
            raise SkipDocument(why, f"{label}: NUL or control bytes in the first 8 KiB")
        shown = _parse_content_type(media_type)[0] or _extension(name) or "unknown"
        raise SkipDocument(why, f"{label}: {shown} is not indexed")
    charset = charset or _parse_content_type(media_type)[1]
    if kind == MEDIA_HTML:
        if len(data) > LARGE_HTML_BYTES or _LONG_SPAN.search(data):
            result = _extract_html_streaming(data, charset, base_url)
        else:
            result = _extract_html(data, charset, base_url)
    elif kind == MEDIA_PDF:
        result = _extract_pdf(data, label)
    else:
        result = _extract_text(data, charset, kind, name)
    if not (result.title or result.text or result.refresh):
        raise SkipDocument("empty", f"{label}: no title and no text")
    return result


_ASCII_SPACE = "\t\n\x0c\r "


def parse_refresh(content: str) -> tuple[int, str] | None:
    """Read a ``<meta http-equiv=refresh>`` ``content`` (or an HTTP ``Refresh`` header) value.

    The HTML Living Standard's "shared declarative refresh steps": a delay in whole seconds (a
    fraction is ignored), then ``;`` / ``,`` / whitespace, then the URL, with or without a
    ``url=`` label (any case, spaces around ``=``), optionally in single or double quotes (cut at
    the closing quote).  Returns ``(delay_seconds, url_as_written)`` or None: no delay, junk after
    it, or no URL (a reload of the page itself).  Never raises.

    w3lib's ``get_meta_refresh`` is not used: its pattern misses the label-less form
    (``0; /docs/``), a comma, spaces around ``=`` and ``.5``, all of which browsers follow.
    """
    s, i, n = content, 0, len(content)

    def skip_space(i: int) -> int:
        while i < n and s[i] in _ASCII_SPACE:
            i += 1
        return i

    i = skip_space(i)
    start = i
    while i < n and s[i].isascii() and s[i].isdigit():
        i += 1
    if i == start and not (i < n and s[i] == "."):
        return None
    delay = int(s[start:i] or 0)
    while i < n and s[i].isascii() and (s[i].isdigit() or s[i] == "."):
        i += 1
    if i < n:
        if s[i] not in ";," + _ASCII_SPACE:
            return None
        i = skip_space(i)
        if i < n and s[i] in ";,":
            i = skip_space(i + 1)
    url = s[i:]
    if s[i:i + 3].lower() == "url":
        j = skip_space(i + 3)
        if j < n and s[j] == "=":
            i = skip_space(j + 1)
            url = s[i:]
    if i < n and s[i] in "'\"":
        url = s[i + 1:].partition(s[i])[0]
    url = url.strip(_URL_SPACE)
    return (delay, url) if url else None


_COLLAPSE_CHUNK_CHARS = 256 * 1024


def _collapse_lines(text: str, separator: str = "\n") -> str:
    """Collapse whitespace inside each ``separator``-delimited piece; drop empty pieces; join
    with newlines.  A long text is done in chunks of about 256 Ki characters cut at a separator,
    so the list of pieces never holds more than one chunk (a 9 MB file held ~6x its size)."""
    def collapse(chunk: str) -> str:
        return "\n".join(filter(None, [" ".join(piece.split()) for piece in chunk.split(separator)]))

    if len(text) <= _COLLAPSE_CHUNK_CHARS:
        return collapse(text)
    parts = []
    start = 0
    while start <= len(text):
        end = text.find(separator, start + _COLLAPSE_CHUNK_CHARS)
        if end == -1:
            end = len(text)
        if part := collapse(text[start:end]):
            parts.append(part)
        start = end + 1
    return "\n".join(parts)


def _one_line(text: str | None, limit: int) -> str:
    return " ".join((text or "").split())[:limit]


def _text_result(title: str, text: str, kind: str, codec: str | None,
                 meta: Mapping[str, str] = MappingProxyType({})) -> Extracted:
    return Extracted(title=title, text=text, media_type=kind, encoding=codec, meta=meta,
                     links=(), image_links=(), canonical=None, noindex=False, nofollow=False)


# HTML: what each tag contributes. Block-level and word-breaking elements get a "\x00" text node
# before and after them, and lexbor's text() is then split on it; hidden ones are removed.
_BLOCK, _H1, _HIDDEN, _HREF, _SRC, _IFRAME, _IMG, _TITLE, _META, _BASE, _LINK = range(11)
_TAG_KINDS = {
    **dict.fromkeys(
        "address article aside blockquote br button caption center dd details dialog dir div dl"
        " dt fieldset figcaption figure footer form h2 h3 h4 h5 h6 header hgroup hr input legend"
        " li main menu nav ol optgroup option p pre section select summary table tbody td"
        " textarea tfoot th thead tr ul video audio canvas".split(),
        _BLOCK,
    ),
    # Not shown: scripts, styles, inert templates, SVG drawings, and what the parser keeps as
    # raw text for browsers without a feature (noembed, noframes; iframe below).
    **dict.fromkeys("script style noscript template svg noembed noframes".split(), _HIDDEN),
    "h1": _H1, "a": _HREF, "area": _HREF, "frame": _SRC, "iframe": _IFRAME, "img": _IMG,
    "title": _TITLE, "meta": _META, "base": _BASE, "link": _LINK,
}
_DROPPED_SCHEMES = ("javascript:", "mailto:", "data:")
_URL_SPACE = " \t\n\r\x0c"


@lru_cache(maxsize=1)
def _tag_kinds_by_id() -> dict[int, int]:
    """:data:`_TAG_KINDS` keyed by lexbor tag id (reading ``node.tag_id`` is twice as fast as
    ``node.tag``, which is a tenth of the whole extraction). Known HTML tags have small static
    ids; a custom tag gets a per-document heap address, so only small ids are kept."""
    from selectolax.lexbor import LexborHTMLParser

    factory = LexborHTMLParser("")
    by_id = {factory.create_node(tag).tag_id: kind for tag, kind in _TAG_KINDS.items()}
    return {tag_id: kind for tag_id, kind in by_id.items() if tag_id < 1 << 16}


def _extract_html(data: bytes, charset: str | None, base_url: str | None) -> Extracted:
    from selectolax.lexbor import LexborHTMLParser

    text, codec, bom = _decode(data, charset, True)
    # lexbor reads bytes as UTF-8: skip the re-encode of a str when the bytes already are that.
    tree = LexborHTMLParser(data if codec == "utf-8" and not bom else text)
    kinds = _tag_kinds_by_id()
    title = h1 = base_href = canonical = None
    meta: dict[str, str] = {}
    robots: list[str] = []
    hrefs: list[str] = []
    srcs: list[str] = []
    blocks = []
    hidden = []
    root = tree.root
    for node in root.traverse() if root is not None else ():
        kind = kinds.get(node.tag_id)
        if kind is None:
            continue
        if kind == _BLOCK:
            blocks.append(node)
        elif kind == _HREF:
            if href := node.attrs.get("href"):
                hrefs.append(href)
        elif kind == _HIDDEN:
            hidden.append(node)
        elif kind == _IMG:
            blocks.append(node)
            if src := node.attrs.get("src"):
                srcs.append(src)
        elif kind == _SRC or kind == _IFRAME:
            if src := node.attrs.get("src"):
                hrefs.append(src)
            if kind == _IFRAME:  # its content is raw text that is never shown
                hidden.append(node)
        elif kind == _H1:
            blocks.append(node)
            if h1 is None:
                h1 = node.text()
        elif kind == _TITLE:
            if title is None:
                title = node.text()
        elif kind == _META:
            _add_meta(node.attributes, meta, robots)
        elif kind == _BASE:
            if base_href is None:
                base_href = node.attrs.get("href")
        elif canonical is None and "canonical" in (node.attrs.get("rel") or "").lower().split():
            canonical = node.attrs.get("href")
    for node in blocks:
        node.insert_before("\x00")
        node.insert_after("\x00")
    for node in reversed(hidden):  # innermost first, so no node is removed twice
        node.decompose()
    body = tree.body
    body_text = _collapse_lines(body.text(), "\x00") if body is not None else ""
    title = _one_line(title, TITLE_MAX_CHARS) or _one_line(h1, TITLE_MAX_CHARS)
    result = _html_result(title, body_text, codec, meta, robots, hrefs, srcs, base_href, canonical, base_url)
    main = main_element(tree) if body is not None else None
    main_text = _collapse_lines(main.text(), "\x00") if main is not None else ""
    return replace(result, main_text=main_text) if main_text and main_text != body_text else result


_HEAD_TAGS = frozenset("html head title meta link base script style noscript template".split())
"""``<html>`` and the elements that may stay in ``<head>``; any other start tag opens the body
(HTML tree construction rules)."""

_RAW_TEXT_TAGS = frozenset("script style xmp iframe noembed noframes noscript textarea title plaintext".split())
"""Elements whose content is text up to their end tag, never markup (HTML tokenizer: RAWTEXT,
RCDATA, script data and PLAINTEXT; ``noscript`` as with scripting on, as lexbor does)."""

_UNTERMINATED_MARKUP = re.compile(r"<[!/?A-Za-z]")

_VOID_TAGS = frozenset("area base br col embed hr img input link meta source track wbr".split())


class _HTMLStream:
    """The streaming twin of :func:`_extract_html`, on the standard library's ``HTMLParser``:
    the same tag kinds (:data:`_TAG_KINDS`) decide word breaks, hidden content, title, first
    ``h1``, meta tags, links, ``<base>`` and ``rel=canonical``; only body text is kept.  Where
    ``HTMLParser`` is laxer than the HTML parsing rules, it is told what lexbor does: raw-text
    elements (``<textarea>``, ``<title>``, ``<iframe>``, ...), a self-closing slash on a non-void
    element ignored, ``<head>`` closed by the first body content, a NUL dropped, an unterminated
    comment or tag at the end dropped, a malformed ``<![ ... ]>`` read as a bogus comment.
    Memory is the text it keeps, not a tree."""

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
        self.in_body = False
        self.title: list[str] | None = None   # collecting the first <title>
        self.in_title = False
        self.title_in_body = False
        self.h1: list[str] | None = None      # collecting the first <h1>
        self.title_done = self.h1_done = False
        self.meta: dict[str, str] = {}
        self.robots: list[str] = []
        self.hrefs: list[str] = []
        self.srcs: list[str] = []
        self.base_href: str | None = None
        self.canonical: str | None = None

    def feed(self, text: str) -> None:
        """Parse the whole document.  Given in one piece: fed in chunks, a tag longer than a
        chunk is re-parsed from its start at every chunk (200,000 attributes: 2.8 s, 240 MB)."""
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
        kind = _TAG_KINDS.get(tag)
        if kind is None:
            return
        attributes = dict(attrs)
        if kind == _HIDDEN or kind == _IFRAME:
            if kind == _IFRAME and (src := attributes.get("src")):
                self.hrefs.append(src)
            self.hidden += 1
            return
        if (kind == _BLOCK or kind == _H1 or kind == _IMG) and not self.hidden:
            self.out.append("\x00")
        if kind == _HREF:
            if href := attributes.get("href"):
                self.hrefs.append(href)
        elif kind == _IMG:
            if src := attributes.get("src"):
                self.srcs.append(src)
        elif kind == _SRC:
            if src := attributes.get("src"):
                self.hrefs.append(src)
        elif kind == _H1:
            if not self.h1_done:
                self.h1 = []
        elif kind == _TITLE:
            self.in_title = True
            self.title_in_body = self.in_body
            if not self.title_done and not self.hidden:
                self.title = []
        elif kind == _META:
            _add_meta(attributes, self.meta, self.robots)
        elif kind == _BASE:
            if self.base_href is None:
                self.base_href = attributes.get("href")
        elif kind == _LINK:
            if self.canonical is None and "canonical" in (attributes.get("rel") or "").lower().split():
                self.canonical = attributes.get("href")

    def end(self, tag: str) -> None:
        kind = _TAG_KINDS.get(tag)
        if kind == _HIDDEN or kind == _IFRAME:
            self.hidden = max(0, self.hidden - 1)
        elif kind == _BLOCK or kind == _H1 or kind == _IMG:
            if not self.hidden:
                self.out.append("\x00")
            if kind == _H1 and self.h1 is not None:
                self.h1_done = True
        elif kind == _TITLE:
            self.in_title = False
            if self.title is not None:
                self.title_done = True

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
        if not self.in_body and not text.isspace():
            self.in_body = True  # text before <body> opens it
        if self.in_body:
            self.out.append(text)


def _extract_html_streaming(data: bytes, charset: str | None, base_url: str | None) -> Extracted:
    text, codec, bom = _decode(data, charset, True)
    stream = _HTMLStream()
    try:
        stream.feed(text)
    except Exception:  # noqa: BLE001 - HTMLParser gave up on some markup: lexbor reads anything
        del text, stream
        return _extract_html(data, charset, base_url)
    del text
    body_text = _collapse_lines("".join(stream.out), "\x00")
    title = _one_line("".join(stream.title or ()), TITLE_MAX_CHARS) \
        or _one_line("".join(stream.h1 or ()), TITLE_MAX_CHARS)
    return _html_result(title, body_text, codec, stream.meta, stream.robots, stream.hrefs, stream.srcs,
                        stream.base_href, stream.canonical, base_url)


def _html_result(title: str, body_text: str, codec: str | None, meta: dict[str, str], robots: list[str],
                 hrefs: list[str], srcs: list[str], base_href: str | None, canonical: str | None,
                 base_url: str | None) -> Extracted:
    """The :class:`Extracted` of an HTML page from what a parser collected: links resolved
    against ``<base href>`` (itself resolved against ``base_url``), robots tokens read."""
    base = base_url
    if base_href and (base_href := base_href.strip(_URL_SPACE)):
        try:
            base = urljoin(base_url, base_href) if base_url else base_href
        except ValueError:
            pass
    tokens = {t for value in robots for t in value.lower().replace(",", " ").split()}
    refresh = parse_refresh(meta["refresh"]) if "refresh" in meta else None
    if refresh is not None:
        target = _resolve([refresh[1]], base)
        refresh = (refresh[0], target[0]) if target else None
        if target:
            hrefs.append(target[0])
    return Extracted(
        title=title,
        text=body_text,
        media_type=MEDIA_HTML,
        encoding=codec,
        meta=MappingProxyType(meta),
        links=_resolve(hrefs, base),
        image_links=_resolve(srcs, base),
        canonical=(_resolve([canonical], base) or (None,))[0] if canonical else None,
        noindex=bool(tokens & {"noindex", "none"}),
        nofollow=bool(tokens & {"nofollow", "none"}),
        refresh=refresh,
    )


def _add_meta(attributes: dict[str, str | None], meta: dict[str, str], robots: list[str]) -> None:
    content = attributes.get("content")
    if content is None:
        return
    content = content.strip()
    for attribute in ("name", "http-equiv", "property"):
        key = (attributes.get(attribute) or "").strip().lower()
        if key:
            meta.setdefault(key, content)
            if attribute == "name" and key in ("robots", "indexerd"):
                robots.append(content)


def _resolve(raw: list[str], base: str | None) -> tuple[str, ...]:
    """Resolve each distinct href against ``base``; drop empty and javascript:/mailto:/data:.

    ``urljoin`` (about 5 us a call) dominates link-heavy pages, so it runs once per distinct
    part before ``#``: ``page.html#a`` and ``page.html#b`` share one call, and ``#a`` needs none.
    """
    resolved: dict[str, None] = {}
    joined: dict[str, str | None] = {}
    page = base.partition("#")[0] if base is not None else ""
    for href in dict.fromkeys(raw):
        href = href.strip(_URL_SPACE)
        if "\t" in href or "\n" in href or "\r" in href:  # the URL parser removes these
            href = href.replace("\t", "").replace("\n", "").replace("\r", "")
        if not href or href[:11].lower().startswith(_DROPPED_SCHEMES):
            continue
        if base is not None and not href.startswith(("http://", "https://")):
            target, hash_mark, fragment = href.partition("#")
            if target not in joined:
                try:
                    joined[target] = urljoin(base, target) if target else page
                except ValueError:  # e.g. an invalid IPv6 host: not a link we can follow
                    joined[target] = None
            url = joined[target]
            if url is None:
                continue
            href = url + hash_mark + fragment
        resolved[href] = None
    return tuple(resolved)


def _extract_text(data: bytes, charset: str | None, kind: str, name: str | None) -> Extracted:
    decoded, codec = decode_text(data, charset)
    if kind == MEDIA_MARKDOWN:
        title = _markdown_title(decoded)
        text = _collapse_lines(_strip_markdown(decoded))
    else:
        text = _collapse_lines(decoded)
        title = plain_text_title(decoded, name, LINE_TITLE_MAX_CHARS)
    return _text_result(title, text, kind, codec)


_MD_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_MD_ATX_RE = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_MD_SETEXT_RE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
_MD_STRIPS = (
    (re.compile(r"^ {0,3}(?:`{3,}|~{3,}).*$", re.M), ""),  # code fence lines
    (re.compile(r"^ {0,3}\[[^\]\n]+\]:[ \t]*\S.*$", re.M), ""),  # reference definitions
    (re.compile(r"!?\[([^\]\n]*)\](?:\([^)\n]*\)|\[[^\]\n]*\])"), r"\1"),  # [text](url) -> text
    (re.compile(r"^ {0,3}(?:#{1,6}(?=[ \t]|$)|(?:=+|-+)[ \t]*$|>[ \t]?)", re.M), ""),
    (re.compile(r"[*`]+|~~"), ""),  # emphasis and code spans
)


def _strip_markdown(source: str) -> str:
    for pattern, replacement in _MD_STRIPS:
        source = pattern.sub(replacement, source)
    return source


def _markdown_title(source: str) -> str:
    """First ATX or setext heading outside code fences and front matter, else the first line."""
    lines = source.splitlines()
    start = 0
    if lines and lines[0].strip() == "---":  # YAML front matter
        end = next((i for i, line in enumerate(lines[1:50], 1) if line.strip() in ("---", "...")),
                   0)
        for line in lines[1:end]:
            key, _, value = line.partition(":")
            if key.strip().lower() == "title" and value.strip():
                return _collapse_title(value.strip().strip("\"'"))
        start = end + 1 if end else 0
    first = fence = previous = ""
    for line in lines[start:]:
        marker = _MD_FENCE_RE.match(line)
        if fence:
            if marker and marker.group(1)[0] == fence:
                fence = ""
            previous = ""
            continue
        if marker:
            fence = marker.group(1)[0]
            previous = ""
            continue
        atx = _MD_ATX_RE.match(line)
        if atx and atx.group(1):
            return _collapse_title(atx.group(1))
        if previous and _MD_SETEXT_RE.match(line):
            return _collapse_title(previous)
        previous = line if line.strip() and not atx else ""
        first = first or _collapse_title(previous)
    return first


def _collapse_title(line: str) -> str:
    return _one_line(_strip_markdown(line), LINE_TITLE_MAX_CHARS)


def _extract_pdf(data: bytes, label: str) -> Extracted:
    import io

    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise SkipDocument("parse-error", f"{label}: encrypted with a password")
        pages = [page.extract_text() or "" for page in reader.pages]
        info = reader.metadata
    except SkipDocument:
        raise
    except Exception as exc:  # pypdf on a damaged file raises many types; all mean "unreadable"
        raise SkipDocument("parse-error", f"{label}: {type(exc).__name__}: {exc}") from exc
    text = _collapse_lines(_scrub("\n".join(pages)))
    meta: dict[str, str] = {}
    pdf_title, moddate = _pdf_info(info)
    if pdf_title:
        meta["pdf:title"] = pdf_title
    if moddate:
        meta["pdf:moddate"] = moddate
    title = pdf_title[:LINE_TITLE_MAX_CHARS] or text.partition("\n")[0][:LINE_TITLE_MAX_CHARS]
    return _text_result(title, text, MEDIA_PDF, None, MappingProxyType(meta))


def _pdf_info(info: DocumentInformation | None) -> tuple[str, str | None]:
    """(/Title with whitespace collapsed or ``""``, /ModDate as ``2023-05-01T10:00:00Z`` or None).

    A naive date (the PDF gave no zone) is taken as UTC. A malformed field is treated as absent.
    """
    if info is None:
        return "", None
    try:
        title = info.title
    except Exception:  # pypdf resolves the field lazily, from a possibly damaged file
        title = None
    title = " ".join(_scrub(title).split()) if isinstance(title, str) else ""
    try:
        moment = info.modification_date  # ValueError "Can not convert date: garbage"
        if moment is not None and moment.tzinfo is not None:
            moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
        moddate = moment.isoformat(timespec="seconds") + "Z" if moment is not None else None
    except Exception:  # as above; also OverflowError for year-1 dates east of UTC
        moddate = None
    return title, moddate


def _scrub(text: str) -> str:
    """Drop NULs and replace lone surrogates, which pypdf can produce from broken font maps."""
    text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text
