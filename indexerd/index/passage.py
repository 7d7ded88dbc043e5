"""A snippet's passage: the best window over a text's matches, and its text cut at whole words
with the matches marked (:mod:`indexerd.index.snippets` finds the matches and weighs them).
Pure functions."""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["EDGE_WORD_CHARS", "Match", "best_window", "render"]

_SPACES = re.compile(r"\s+")


class Match(NamedTuple):
    """One match in a text: its span (``start``, ``end``: code points), the ``key`` of what it
    matched (a term, a phrase, an identifier) and its ``weight``."""

    start: int
    end: int
    key: tuple
    weight: float


def best_window(found: list[Match], fit: int) -> tuple[int, int, frozenset[tuple]]:
    """The span from the first to the last match of the best window of matches (``found`` in
    text order) that fits in ``fit`` characters (:mod:`indexerd.index.snippets`' docstring: the
    weights), earliest on a tie, and the
    match keys it holds.  Linear: one window slides over the matches."""
    best, best_i, best_j = -1.0, 0, 0
    counts: dict[tuple, int] = {}
    weight: dict[tuple, float] = {}
    for m in found:
        weight[m.key] = max(weight.get(m.key, 0.0), m.weight)
    score, n, j = 0.0, 0, -1
    for i, first in enumerate(found):
        while j + 1 < len(found) and found[j + 1].end - first.start <= fit:
            j += 1
            k = found[j].key
            counts[k] = counts.get(k, 0) + 1
            score += weight[k] if counts[k] == 1 else 0.1
            n += 1
        if j < i:                       # one match longer than the window: a window of its own
            j = i
            counts[first.key] = 1
            score, n = weight[first.key], 1
        repeats = n - len(counts)
        capped = score - 0.1 * repeats + min(0.5, 0.1 * repeats)
        if capped > best + 1e-9:
            best, best_i, best_j = capped, i, j
        k = first.key
        counts[k] -= 1
        score -= weight[k] if counts[k] == 0 else 0.1
        if counts[k] == 0:
            del counts[k]
        n -= 1
    window = found[best_i:best_j + 1]
    return window[0].start, max(m.end for m in window), frozenset(m.key for m in window)


def render(text: str, found: list[Match], ms: int, me: int, chars: int) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The passage of about ``chars`` characters around ``text[ms:me]``, cut at whitespace, with
    every match inside it marked (overlapping marks merged), whitespace runs as one space:
    ``(text, marks)``, the marks as :class:`~indexerd.index.snippets.Snippet` holds them."""
    pad = max(0, chars - (me - ms))
    start = max(0, ms - pad // 3)
    end = min(len(text), max(me, start + chars))
    if end - start < chars:
        start = max(0, min(start, end - chars))
    if start > 0:  # at a whole word: after a space before the match, else where its word begins
        cut = _first_space(text, start, ms)
        start = cut if cut is not None else _word_start(text, start)
    if end < len(text):
        cut = max(text.rfind(" ", me, end), text.rfind("\n", me, end))
        end = cut if cut > me else _word_end(text, end)
    spans: list[list[int]] = []
    for m in found:
        if m.start >= start and m.end <= end:
            if spans and m.start <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], m.end)
            else:
                spans.append([m.start, m.end])
    out: list[str] = []
    marks: list[tuple[int, int]] = []
    length = 0
    at = start
    for s, e in spans:
        for piece, marked in ((text[at:s], False), (text[s:e], True)):
            piece = _SPACES.sub(" ", piece)
            if marked:
                marks.append((length, length + len(piece)))
            out.append(piece)
            length += len(piece)
        at = e
    out.append(_SPACES.sub(" ", text[at:end]))
    joined = "".join(out)
    lead = len(joined) - len(joined.lstrip())
    joined = joined.strip()
    return joined, tuple((s - lead, e - lead) for s, e in marks)


#: how far (characters) a snippet's edge moves to a word's start or end before it gives up and
#: cuts the word (a token longer than this: a hash, a base64 run)
EDGE_WORD_CHARS = 40


def _word_start(text: str, at: int) -> int:
    """Where the word holding ``text[at]`` begins (after the whitespace before it), at most
    :data:`EDGE_WORD_CHARS` back; else ``at``."""
    lo = max(0, at - EDGE_WORD_CHARS)
    for i in range(at, lo - 1, -1):
        if i == 0 or text[i - 1].isspace():
            return i
    return at


def _word_end(text: str, at: int) -> int:
    """Where the word holding ``text[at - 1]`` ends (at the whitespace after it), at most
    :data:`EDGE_WORD_CHARS` on; else ``at``."""
    m = _SPACES.search(text, at, min(len(text), at + EDGE_WORD_CHARS))
    return m.start() if m else (len(text) if len(text) - at <= EDGE_WORD_CHARS else at)


def _first_space(text: str, start: int, limit: int) -> int | None:
    """Where the first whole word after ``start`` begins, if before ``limit``."""
    m = _SPACES.search(text, start, limit)
    return m.end() if m else None
