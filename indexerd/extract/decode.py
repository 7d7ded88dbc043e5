"""Document bytes -> text: the WHATWG order of charset evidence, and charset labels -> codecs.

Outside contracts relied on:

- **w3lib 2.5** ``w3lib.encoding`` (https://github.com/scrapy/w3lib/blob/master/w3lib/encoding.py):
  ``resolve_encoding`` maps labels as the WHATWG Encoding Standard does, except for the labels in
  :data:`_WHATWG_LABELS`; ``html_body_declared_encoding`` is the HTML prescan for ``<meta
  charset>``, the ``http-equiv`` pragma and ``<?xml encoding?>`` (comments skipped, quoted
  attribute values whole; unlike the standard's prescan it stops at ``<body>``, so a page
  declaring its charset after ``<body>`` falls through to UTF-8 and the guess); ``to_unicode``
  decodes with U+FFFD for bad bytes (and the euro sign for 0x80 in gb18030). ``html_to_unicode``
  is not used: it honours UTF-32 byte order marks and reads a declared ``utf-16`` as big-endian,
  where the standard says otherwise, and has no way to skip the prescan for plain text.
- **charset-normalizer** (imported only when a document needs a guess): on short latin-1 text it
  guesses cp1257 or even UTF-16, so it is a last resort, and only for documents over 1 KiB.

Pure functions, thread-safe (the label cache is a ``functools.lru_cache``).
"""

from __future__ import annotations

import codecs
from functools import lru_cache

from w3lib.encoding import html_body_declared_encoding, resolve_encoding, to_unicode

BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"))
"""The byte order marks the WHATWG Encoding Standard honours, and their codecs."""

_CHARDET_MIN_BYTES = 1024
_META_SCAN_BYTES = 4096

_WHATWG_LABELS = {
    # The labels of the WHATWG Encoding Standard (https://encoding.spec.whatwg.org/encodings.json)
    # that w3lib's resolve_encoding does not know or reads otherwise ("utf-16" there is the
    # byte-order-detecting codec; here, as in the standard, UTF-16LE).
    **dict.fromkeys(("utf-16", "unicode", "csunicode", "iso-10646-ucs-2", "ucs-2", "unicodefeff"),
                    "utf-16-le"),
    "unicodefffe": "utf-16-be",
    **dict.fromkeys(("unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "x-unicode20utf8"),
                    "utf-8"),
    **dict.fromkeys(("cn-big5", "x-x-big5"), "big5hkscs"),
    **dict.fromkeys(("csgb2312", "gb_2312", "x-gbk"), "gb18030"),
    **dict.fromkeys(("cseuckr", "csksc56011987", "iso-ir-149", "ks_c_5601-1989", "ksc_5601",
                     "windows-949"), "cp949"),
    **dict.fromkeys(("cseucpkdfmtjapanese", "x-euc-jp"), "euc_jp"),
    **dict.fromkeys(("iso88591", "x-cp1252"), "cp1252"),
    **dict.fromkeys(("iso88599", "x-cp1254"), "cp1254"),
    **{f"x-cp125{n}": f"cp125{n}" for n in (0, 1, 3, 5, 6, 7, 8)},
    **dict.fromkeys(("dos-874", "iso885911"), "cp874"),
    **{f"iso8859{n}": f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15)},
    **dict.fromkeys(("csiso88596e", "csiso88596i", "iso-8859-6-e", "iso-8859-6-i"), "iso8859-6"),
    **dict.fromkeys(("csiso88598e", "csiso88598i", "iso-8859-8-e", "iso-8859-8-i", "logical",
                     "visual"), "iso8859-8"),
    "sun_eu_greek": "iso8859-7",
    "csisolatin9": "iso8859-15",
    **dict.fromkeys(("koi", "koi8"), "koi8-r"),
    **dict.fromkeys(("x-mac-cyrillic", "x-mac-ukrainian"), "mac-cyrillic"),
    **dict.fromkeys(("csmacintosh", "mac", "x-mac-roman"), "mac-roman"),
}


@lru_cache(maxsize=256)
def codec_for_label(label: str) -> str | None:
    """A charset label -> Python codec name (``"Windows-1252"`` -> ``"cp1252"``), or ``None``.

    Labels are read by ``w3lib.encoding.resolve_encoding`` (https://github.com/scrapy/w3lib,
    ``w3lib/encoding.py``), which maps them as the WHATWG Encoding Standard does (``latin1``,
    ``us-ascii`` -> cp1252; ``gbk``, ``gb2312`` -> gb18030; ``shift_jis`` -> cp932 ...) and refuses
    UTF-7; the standard's labels it does not know are in :data:`_WHATWG_LABELS` (``utf-16`` is
    UTF-16LE there). Unknown labels and bytes-to-bytes codecs (``base64``, ``rot13``) give ``None``.
    """
    label = label.strip().strip("\"'").lower()
    name = _WHATWG_LABELS.get(label) or resolve_encoding(label)
    if name is None:
        return None
    try:
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
    in its first 4 KiB, before ``<body>`` and outside comments (``<meta charset>``, ``<meta
    http-equiv=content-type content=...charset=>``, ``<?xml ... encoding=...?>``; a declared
    UTF-16 there means UTF-8, as in WHATWG); then strict UTF-8, or UTF-8 with bad bytes (no
    more of them than bytes of valid multi-byte sequences); then charset-normalizer for
    documents over 1 KiB; then cp1252. Labels are read by :func:`codec_for_label`: ``iso-8859-1``,
    ``latin1`` and ``us-ascii`` decode as cp1252, ``gbk`` as gb18030 (the WHATWG mapping).

    Bytes invalid in the chosen codec become U+FFFD. Never raises for any ``data``.
    The codec name is Python's (``"utf-8"``, ``"cp1252"``, ``"utf-16-le"``). Thread-safe.
    """
    text, codec, _ = decode_document(data, declared_charset, sniff_html)
    return text, codec


def decode_document(data: bytes, declared: str | None, sniff_html: bool) -> tuple[str, str, int]:
    """:func:`decode_text` plus the length in bytes of the BOM that was skipped (0 when none):
    ``(text, codec name, BOM bytes)``. Never raises."""
    for bom, bom_codec in BOMS:
        if data.startswith(bom):
            return data[len(bom):].decode(bom_codec, "replace"), bom_codec, len(bom)
    codec = codec_for_label(declared) if declared else None
    if codec is None and sniff_html:
        declared_in_page = html_body_declared_encoding(data[:_META_SCAN_BYTES])
        codec = codec_for_label(declared_in_page) if declared_in_page else None
        if codec is not None and codec.startswith(("utf-16", "utf-32")):
            codec = "utf-8"  # WHATWG: bytes that can carry an ASCII <meta> are not UTF-16
    if codec is not None:
        return to_unicode(data, codec), codec, 0
    try:
        return data.decode("utf-8"), "utf-8", 0
    except UnicodeDecodeError:
        pass
    text = _mostly_utf8(data)
    if text is not None:
        return text, "utf-8", 0
    if len(data) > _CHARDET_MIN_BYTES:
        codec = _detect_charset(data)
        if codec is not None:
            return to_unicode(data, codec), codec, 0
    return data.decode("cp1252", "replace"), "cp1252", 0


def _mostly_utf8(data: bytes) -> str | None:
    """``data`` decoded as UTF-8 with U+FFFD for its invalid bytes, when it is UTF-8 with bad
    bytes: at least one valid multi-byte sequence, and its valid multi-byte sequences' bytes at
    least as many as its invalid bytes (``naïve`` and two stray bytes, ``café`` and one).
    A text in a legacy 8-bit charset has next to no valid multi-byte UTF-8 sequences (a cp1251
    capital before ``і`` or ``ё`` now and then, against every other letter invalid), so it is
    left to the detector; read as cp1252 or a detector's guess, a UTF-8 text with a few stray
    bytes showed every accent as two characters (``cafÃ©``, ``naÃ¯ve``) and lost its words."""
    text = data.decode("utf-8", "replace")
    own = data.count("\ufffd".encode())  # the file's own U+FFFD are valid
    valid = text.replace("\ufffd", "")
    valid_bytes = len(valid.encode("utf-8")) + 3 * own
    bad_bytes = len(data) - valid_bytes
    multibyte_bytes = valid_bytes - len(valid.encode("ascii", "ignore"))
    if multibyte_bytes >= 2 and bad_bytes <= multibyte_bytes:
        return text
    return None


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
