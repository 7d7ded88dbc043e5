"""Snippets: up to two windows of a document's stored text around the words a query matched.

Engine-neutral: an engine gives the stored text and a regex finding the matched words in it
(:func:`indexerd.index.highlight.words_regex`).
"""

from __future__ import annotations

import re


def snippet(text: str, rx: re.Pattern | None, chars: int) -> str:
    """Up to two windows of plain text around the first matches (whole-word trimmed), or the
    start of the text.  Linear in the text: no re-analysis of the document."""
    if not text:
        return ""
    spans = []
    if rx is not None:
        half = chars // 4
        for m in rx.finditer(text):
            if spans and m.start() < spans[-1][1]:
                continue
            spans.append((max(0, m.start() - half), min(len(text), m.end() + half)))
            if len(spans) == 2:
                break
    if not spans:
        return " ".join(text[:chars].split())
    parts = []
    for start, end in spans:
        frag = text[start:end]
        if start > 0:
            frag = frag.split(" ", 1)[-1]
        if end < len(text):
            frag = frag.rsplit(" ", 1)[0]
        parts.append(" ".join(frag.split()))
    return " … ".join(parts)
