"""Plain text: decoded bytes -> title and its lines (:mod:`indexerd.extract.whitespace` holds the
white space rules every format shares).

Pure functions, thread-safe; importing costs the standard library and w3lib.
"""

from __future__ import annotations

from indexerd.extract.decode import decode_text
from indexerd.extract.whitespace import tidy_lines
from indexerd.extract.extracted import LINE_TITLE_MAX_CHARS, MEDIA_TEXT, Extracted, text_document
from indexerd.extract.titles import plain_text_title

def extract_plain_text(data: bytes, *, charset: str | None, base_url: str | None,
                       name: str | None) -> Extracted:
    """Plain text: its lines as written (:func:`~indexerd.extract.whitespace.tidy_lines`:
    indentation kept, trailing white space dropped, blank lines one at most); the title from
    :func:`~indexerd.extract.titles.plain_text_title` (first line, header field or file name).

    ``charset`` is the protocol's (see :func:`~indexerd.extract.decode.decode_text`);
    ``base_url`` is unused (text has no links). Never raises.
    """
    decoded, codec = decode_text(data, charset)
    text = tidy_lines(decoded)
    title = plain_text_title(decoded, name, LINE_TITLE_MAX_CHARS)
    return text_document(title, text, MEDIA_TEXT, codec)


def one_line(text: str | None, limit: int) -> str:
    """``text`` with all whitespace runs collapsed to one space, cut at ``limit`` characters."""
    return " ".join((text or "").split())[:limit]
