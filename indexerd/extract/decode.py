"""Document bytes -> text: the WHATWG order of charset evidence, and charset labels -> codecs.

Pure functions, thread-safe (the label cache is a ``functools.lru_cache``). charset-normalizer is
imported only when a document needs a guess: on short latin-1 text it guesses cp1257 or even
UTF-16, so it is a last resort, and only for documents over 1 KiB.
"""

from __future__ import annotations

import codecs
import re
from functools import lru_cache

BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"))
"""The byte order marks the WHATWG Encoding Standard honours, and their codecs."""

_CHARDET_MIN_BYTES = 1024
_META_SCAN_BYTES = 4096

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
def codec_for_label(label: str) -> str | None:
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
    text, codec, _ = decode_document(data, declared_charset, sniff_html)
    return text, codec


def decode_document(data: bytes, declared: str | None, sniff_html: bool) -> tuple[str, str, int]:
    """:func:`decode_text` plus the length in bytes of the BOM that was skipped (0 when none):
    ``(text, codec name, BOM bytes)``. Never raises."""
    for bom, codec in BOMS:
        if data.startswith(bom):
            return data[len(bom):].decode(codec, "replace"), codec, len(bom)
    codec = codec_for_label(declared) if declared else None
    if codec is None and sniff_html:
        head = data[:_META_SCAN_BYTES]
        match = _META_CHARSET_RE.search(head) or _XML_ENCODING_RE.match(head)
        codec = codec_for_label(match.group(1).decode("ascii")) if match else None
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
    codec = codec_for_label(best.encoding) if best is not None else None
    if codec is None or (codec.startswith(("utf-16", "utf-32")) and b"\x00" not in data):
        return None
    return codec
