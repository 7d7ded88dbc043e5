"""Which kind of document is it? Declared type, file extension and first bytes -> media type.

Pure functions, thread-safe; importing costs the standard library.
"""

from __future__ import annotations

import codecs
import re

from indexerd.extract.decode import BOMS, codec_for_label
from indexerd.extract.extracted import (
    MEDIA_HTML,
    MEDIA_JSON,
    MEDIA_JSON_LINES,
    MEDIA_MARKDOWN,
    MEDIA_PDF,
    MEDIA_TEXT,
)
from indexerd.extract.formats import MEDIA_POSTSCRIPT, extension_of, format_of

SNIFF_BYTES = 8192
"""How many leading bytes the media-type and binary sniffing look at."""

_DECLARED_TYPES = {
    "text/html": MEDIA_HTML,
    "application/xhtml+xml": MEDIA_HTML,
    "text/plain": MEDIA_TEXT,
    "text/markdown": MEDIA_MARKDOWN,
    "text/x-markdown": MEDIA_MARKDOWN,
    "application/pdf": MEDIA_PDF,
    "application/x-pdf": MEDIA_PDF,
    "application/json": MEDIA_JSON,
    "text/json": MEDIA_JSON,
    "application/x-json": MEDIA_JSON,
    "text/x-json": MEDIA_JSON,
    "application/x-ndjson": MEDIA_JSON_LINES,
    "application/ndjson": MEDIA_JSON_LINES,
    "application/jsonl": MEDIA_JSON_LINES,
    "application/jsonlines": MEDIA_JSON_LINES,
    "application/x-jsonlines": MEDIA_JSON_LINES,
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
        (".txt", ".text", ".log", ".rst", ".csv", ".tsv", ".ini", ".cfg", ".conf", ".xml"),
        MEDIA_TEXT,
    ),
    **dict.fromkeys((".json", ".ipynb", ".geojson", ".jsonld"), MEDIA_JSON),
    **dict.fromkeys((".jsonl", ".ndjson"), MEDIA_JSON_LINES),
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


def guess_media_type(name: str | None, head: bytes, declared: str | None = None) -> str | None:
    """Decide which of :data:`INDEXABLE_TYPES` a document is, or ``None`` to skip it.

    Args:
        name: a file name, path or URL (its last path segment's extension is used; a URL's
            query and fragment are ignored), or ``None``.
        head: the first bytes of the document; only the first :data:`SNIFF_BYTES` are read.
        declared: an HTTP ``Content-Type`` value, parameters allowed
            (``"text/html; charset=utf-8"``), or ``None``.

    Order: the declared type (unless generic, like ``application/octet-stream``), else the
    extension, else sniffing ``head`` (``%PDF-`` -> PDF; ``%!PS`` -> PostScript;
    ``<!doctype html``, ``<html``, ``<head``, ``<body`` after a BOM, whitespace or an XML
    declaration -> HTML; other text -> plain text). The bytes overrule a declared text type or
    a text extension: ``%PDF-`` makes it PDF, ``%!PS`` PostScript (a program whose words only
    Ghostscript shows), and a NUL byte or a high share of control bytes makes it binary
    (``None``), so binary data is never parsed as HTML. A declared or named PDF is left to the
    PDF reader (a damaged one is a parse error, not a guess). JSON is never guessed from the
    bytes (a text may well start with ``{``): it is JSON by its declared type
    (``application/json``, any ``+json`` type, RFC 6839 §3.1) or its extension (``.json``,
    ``.ipynb``, ``.geojson``, ``.jsonld``), JSON Lines by ``.jsonl``, ``.ndjson`` or
    ``application/x-ndjson``. Returns ``None`` for binary data and for
    types not indexed (images, archives, executables, fonts, ...). Never raises. Thread-safe.
    """
    return classify(name, head, declared, None)[0]


def classify(
    name: str | None, head: bytes, declared: str | None, charset: str | None
) -> tuple[str | None, str]:
    """:func:`guess_media_type` with the protocol's ``charset`` too (a UTF-16 or UTF-32 charset
    makes NUL bytes text), and why the type is ``None``: returns ``(media type or None, reason)``,
    the reason ``""``, ``"binary"`` or ``"unsupported-type"``. Never raises."""
    head = head[:SNIFF_BYTES]
    declared_type, declared_charset = parse_content_type(declared)
    charset = charset or declared_charset
    extension = extension_of(name)
    other = format_of(name, head, declared_type, sniff=extension not in _BINARY_EXTENSIONS
                      and extension not in _EXTENSION_TYPES)
    if other is not None:  # Office, OpenDocument, EPUB, RTF, mail, compressed
        return other, ""
    if declared_type in _DECLARED_TYPES:
        claimed: str | None = _DECLARED_TYPES[declared_type]
    elif declared_type.endswith("+json"):  # RFC 6839 §3.1: JSON whatever the vocabulary
        claimed = MEDIA_JSON
    elif declared_type.startswith("text/") or declared_type.endswith("+xml"):
        claimed = MEDIA_TEXT
    elif declared_type not in _GENERIC_TYPES:
        return None, "binary" if _looks_binary(head, charset) else "unsupported-type"
    else:
        extension = extension_of(name)
        if extension in _BINARY_EXTENSIONS:
            return None, "binary" if _looks_binary(head, charset) else "unsupported-type"
        claimed = _EXTENSION_TYPES.get(extension)
    if claimed == MEDIA_PDF or _is_pdf(head):
        return MEDIA_PDF, ""
    if head.startswith(b"%!PS"):
        return MEDIA_POSTSCRIPT, ""
    if _looks_binary(head, charset):
        return None, "binary"
    if claimed is not None:
        return claimed, ""
    return (MEDIA_HTML if _sniff_html(head) else MEDIA_TEXT), ""


def parse_content_type(value: str | None) -> tuple[str, str | None]:
    """``"Text/HTML; charset=\\"UTF-8\\""`` -> ``("text/html", "UTF-8")``; ``None`` -> ``("", None)``."""
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


def _is_pdf(head: bytes) -> bool:
    return head.lstrip(b" \t\r\n\x0c")[:5] == b"%PDF-"


def _looks_binary(head: bytes, charset: str | None = None) -> bool:
    """True when ``head`` has a NUL byte or more than 5 % control bytes (UTF-16 excepted)."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    if charset and (codec_for_label(charset) or "").startswith(("utf-16", "utf-32")):
        return False
    if b"\x00" in head:
        return True
    controls = len(head.translate(None, _NOT_CONTROL_BYTES))  # what is left are the controls
    return controls * 20 > len(head)


def _sniff_html(head: bytes) -> bool:
    for bom, codec in BOMS:
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
