"""Plain text: decoded bytes -> title and collapsed lines; the whitespace rules every format shares.

Pure functions, thread-safe; importing costs the standard library and w3lib.
"""

from __future__ import annotations

from indexerd.extract.decode import decode_text
from indexerd.extract.extracted import LINE_TITLE_MAX_CHARS, MEDIA_TEXT, Extracted, text_document
from indexerd.extract.titles import plain_text_title

COLLAPSE_CHUNK_CHARS = 256 * 1024
""":func:`collapse_lines` works on pieces of about this many characters."""


def extract_plain_text(data: bytes, *, charset: str | None, base_url: str | None,
                       name: str | None) -> Extracted:
    """Plain text: lines with whitespace collapsed, blank lines dropped; the title from
    :func:`~indexerd.extract.titles.plain_text_title` (first line, header field or file name).

    ``charset`` is the protocol's (see :func:`~indexerd.extract.decode.decode_text`);
    ``base_url`` is unused (text has no links). Never raises.
    """
    decoded, codec = decode_text(data, charset)
    text = collapse_lines(decoded)
    title = plain_text_title(decoded, name, LINE_TITLE_MAX_CHARS)
    return text_document(title, text, MEDIA_TEXT, codec)


def collapse_lines(text: str, separator: str = "\n") -> str:
    """Collapse whitespace inside each ``separator``-delimited piece; drop empty pieces; join
    with newlines.

    A text longer than :data:`COLLAPSE_CHUNK_CHARS` is done in chunks cut at a separator, so the
    list of pieces never holds more than one chunk; the result is the same as in one piece.
    """
    def collapse(chunk: str) -> str:
        return "\n".join(filter(None, [" ".join(piece.split()) for piece in chunk.split(separator)]))

    if len(text) <= COLLAPSE_CHUNK_CHARS:
        return collapse(text)
    parts = []
    start = 0
    while start <= len(text):
        end = text.find(separator, start + COLLAPSE_CHUNK_CHARS)
        if end == -1:
            end = len(text)
        if part := collapse(text[start:end]):
            parts.append(part)
        start = end + 1
    return "\n".join(parts)


def one_line(text: str | None, limit: int) -> str:
    """``text`` with all whitespace runs collapsed to one space, cut at ``limit`` characters."""
    return " ".join((text or "").split())[:limit]
