"""Snippets: up to two windows of a document's stored text around the words a query matched.

Engine-neutral: an engine gives the stored text and a regex finding the matched words in it
(:func:`indexerd.index.highlight.words_regex`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: a matched word longer than this may make :func:`snippet_of_chunks` pick other windows than
#: :func:`snippet` over the whole text (characters)
LONGEST_WORD_CHARS = 256


def snippet(text: str, rx: re.Pattern | None, chars: int) -> str:
    """Up to two windows of plain text around the first matches (whole-word trimmed), or the
    start of the text.  Linear in the text: no re-analysis of the document."""
    return snippet_of_chunks((text,), rx, chars)


def snippet_of_chunks(chunks: Iterable[str], rx: re.Pattern | None, chars: int) -> str:
    """:func:`snippet` of the text that ``chunks`` spell in order, reading only as far as the
    snippet needs: once two windows are found whose words end, and whose windows close, in the
    text read so far, the rest is not read.  A stored text is inflated chunk by chunk into this,
    so a document whose matched words come early costs its first chunks only; each character is
    searched once (a new chunk's search starts where the last one's stopped, less
    :data:`LONGEST_WORD_CHARS`).

    The same snippet as over the whole text, unless a matched word is longer than
    :data:`LONGEST_WORD_CHARS` characters (then other matches may be chosen)."""
    half = chars // 4
    need = half + 1 + LONGEST_WORD_CHARS      # text past a match's end that settles its window
    text, pos = "", 0
    spans: list[tuple[int, int]] = []
    it = iter(chunks)
    complete = False
    while not complete:
        chunk = next(it, None)
        if chunk is None:
            complete = True
        else:
            text += chunk
            if rx is None:
                complete = len(text) > chars
                continue
        if rx is None:
            break
        stopped = False
        for m in rx.finditer(text, pos):
            if not complete and m.end() + need > len(text):
                pos, stopped = m.start(), True  # its word or window may go on in the next chunk
                break
            pos = m.end()
            if spans and m.start() < spans[-1][1]:
                continue
            spans.append((max(0, m.start() - half), min(len(text), m.end() + half)))
            if len(spans) == 2:
                return _render(text, spans)
        if not stopped:
            pos = max(pos, len(text) - LONGEST_WORD_CHARS)
    if not spans:
        return " ".join(text[:chars].split())
    return _render(text, spans)


def _render(text: str, spans: list[tuple[int, int]]) -> str:
    """The windows ``spans`` of ``text``, each trimmed to whole words, joined by an ellipsis."""
    parts = []
    for start, end in spans:
        frag = text[start:end]
        if start > 0:
            frag = frag.split(" ", 1)[-1]
        if end < len(text):
            frag = frag.rsplit(" ", 1)[0]
        parts.append(" ".join(frag.split()))
    return " … ".join(parts)
