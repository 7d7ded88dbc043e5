"""'Did you mean': a query that finds nothing, rewritten with the index's own terms.

For each plain word of the query (not under ``NOT``, not a phrase, prefix, identifier, CJK run
or field value) whose stem the index does not hold, the engine lists the terms near it
(:meth:`indexerd.index.base.SearchIndex.similar_terms`: the same first character, at most two
edits); the nearest wins, the one more documents hold among equally near ones (then the first
in alphabetical order).  The word is replaced in the query as typed, by the word a document
holds for that term (of the words of that term's best hits that analyse to it, the one nearest
to what was typed: ``confgure`` suggests ``configure``, not the stem ``configur`` nor ``configuration``).  The suggestion is given only when the rewritten query finds something.

The distance is the optimal-string-alignment distance (Damerau-Levenshtein without edits of
an edited part): an insertion, deletion, substitution or swap of two neighbours is one edit,
as in the spelling correctors of Lucene (``DirectSpellChecker``) and Whoosh.
:func:`edit_distance` and :func:`near_terms` are pure; :func:`suggest` asks the index.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from indexerd.core.errors import QueryError
from indexerd.index.analysis import Analyzer, is_cjk
from indexerd.index.query import parse
from indexerd.index.querytree import And, Or, Word

__all__ = ["MAX_EDITS", "MAX_LOOKED_UP", "MAX_WORDS", "Suggestion", "edit_distance", "near_terms", "suggest"]

#: Edits a suggested term may be from the typed word's stem (1-2, as the spelling correctors).
MAX_EDITS = 2
#: Words typed shorter than this get no suggestion: at 3 letters nearly every term
#: of the index is two edits away.
MIN_WORD_CHARS = 4
#: Hits whose marked words are looked at to show a suggested term as a word.
SURFACE_HITS = 10
#: A query with more plain words than this gets no suggestion (none is counted): each word costs
#: a count, and a long query held a Whoosh daemon's only query worker long after its caller gave
#: up (bench/RESULTS.md, "Long queries").
MAX_WORDS = 16
#: Words the index lacks that are looked up (one or two scans of the terms under their first
#: letter each: most of a long query's time); a query lacking more gets no suggestion: that many
#: unknown words are not a typo.
MAX_LOOKED_UP = 4
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Suggestion:
    """A query to try instead: ``query`` (the typed query with the words replaced),
    ``replaced`` the ``(typed, suggested)`` words, ``hits`` how many documents it matches."""

    query: str
    replaced: tuple[tuple[str, str], ...]
    hits: int


def edit_distance(a: str, b: str, limit: int) -> int:
    """The optimal-string-alignment distance of ``a`` and ``b`` (module docstring), or
    ``limit + 1`` when it exceeds ``limit`` (RapidFuzz's ``OSA``, in C++: it stops as soon as
    the cut-off is known to be passed)."""
    from rapidfuzz.distance import OSA

    return int(OSA.distance(a, b, score_cutoff=limit))


def near_terms(token: str, terms: Iterable[str], max_edits: int = MAX_EDITS) -> list[str]:
    """The terms of ``terms`` at most ``max_edits`` from ``token`` that begin with its first
    character (``token`` itself included when it is one of them), in their order.  What an
    engine that lists its terms by prefix gives :meth:`~indexerd.index.base.SearchIndex.similar_terms`.

    The candidates (first character, length within ``max_edits``) are measured all at once by
    RapidFuzz (``process.cdist`` with the ``OSA`` distance and the cut-off), not one Python call
    each: tens of thousands of terms share a first letter in a large index."""
    if not token:
        return []
    from rapidfuzz import process
    from rapidfuzz.distance import OSA

    first, n = token[0], len(token)
    candidates = [t for t in terms if t[:1] == first and abs(len(t) - n) <= max_edits]
    if not candidates:
        return []
    dist = process.cdist([token], candidates, scorer=OSA.distance, score_cutoff=max_edits, workers=1)[0]
    return [t for t, d in zip(candidates, dist) if d <= max_edits]


def _plain_words(node, out: list[Word]) -> None:
    """The :class:`Word` leaves of a parsed tree that are not under a ``NOT``, in order."""
    if isinstance(node, Word):
        out.append(node)
    elif isinstance(node, (And, Or)):
        for c in node.children:
            _plain_words(c, out)
    # Not, Phrase, Prefix and the field values are left as typed


def _replace_word(query: str, typed: str, by: str) -> str:
    """``query`` with the first occurrence of the word ``typed`` (standing alone, or after
    ``title:``/``content:``) replaced by ``by``."""
    pattern = re.compile(r"(?<![^\s(:])" + re.escape(typed) + r"(?![^\s)])")
    return pattern.sub(by.replace("\\", r"\\"), query, count=1)


def suggest(ix, query: str, analyzer: Analyzer, *, since=None, until=None,
            narrowed: Callable[[str], str] | None = None) -> Suggestion | None:
    """A query near ``query`` that finds something in ``ix`` (an
    :class:`~indexerd.index.base.SearchIndex`) in the date range (aware UTC, None: open), or
    None: no plain word is unknown to the index, no term is near enough, or the rewritten
    query still finds nothing.  ``analyzer`` is the one the index was built with;
    ``narrowed`` turns the rewritten query into the one counted (the search page's source and
    media-type filters added), None: counted as it is.  Costs a count per plain word, one or
    two :meth:`similar_terms` (within one edit, then two) per word the index lacks, one search
    of :data:`SURFACE_HITS` hits per replaced word and one count; None without any of it past
    :data:`MAX_WORDS` plain words, and as soon as a word past :data:`MAX_LOOKED_UP` is lacking.

    Raises:
        QueryError: the query is malformed.
        IndexUnavailable: the index cannot be read.
    """
    words: list[Word] = []
    _plain_words(parse(query), words)
    if len(words) > MAX_WORDS:
        return None
    replaced: list[tuple[str, str]] = []
    text = query
    looked_up = 0
    for w in words:
        units = [u for u in analyzer.units(w.text) if u.tokens]
        if len(units) != 1 or units[0].whole is not None or len(units[0].tokens) != 1:
            continue  # an identifier, several words, a stop word
        token = units[0].tokens[0]
        if len(w.text) < MIN_WORD_CHARS or any(is_cjk(c) for c in token):
            continue
        try:
            if ix.count(f"{w.field}:{w.text}" if w.field else w.text) > 0:
                continue  # the index holds the word: not what makes the query empty
        except QueryError:
            continue  # a word that reads otherwise alone: left as typed
        looked_up += 1
        if looked_up > MAX_LOOKED_UP:
            return None
        ranked: list[tuple[int, int, str]] = []
        for edits in range(1, MAX_EDITS + 1):  # most typos are one edit: two only when none is near
            near = ix.similar_terms(token, max_edits=edits)
            ranked = sorted((edit_distance(token, t, edits), -n, t) for t, n in near if n > 0 and t != token)
            if ranked:
                break
        if not ranked:
            continue
        term = ranked[0][2]
        shown = _surface(ix, analyzer, term, w.field, w.text) or term
        if shown.casefold() == w.text.casefold():
            continue
        text = _replace_word(text, w.text, shown)
        replaced.append((w.text, shown))
    if not replaced or text == query:
        return None
    hits = ix.count(narrowed(text) if narrowed is not None else text, since=since, until=until)
    return Suggestion(text, tuple(replaced), hits) if hits > 0 else None


def _surface(ix, analyzer: Analyzer, term: str, field: str | None, typed: str) -> str | None:
    """The word documents hold for the index term ``term`` (a stem) nearest to ``typed``: of
    the words of the titles and snippets of the term's best :data:`SURFACE_HITS` hits that the
    analyzer turns into ``term`` (lower-cased), the fewest edits from ``typed``, then the most
    often seen, then the first alphabetically (the same on every engine, whatever its ranking);
    None when no such word is shown (a match past the text kept for snippets)."""
    hits = ix.search(f"{field}:{term}" if field else term, limit=SURFACE_HITS, snippet_chars=120)
    seen: dict[str, int] = {}
    for h in hits:
        for word in _WORD.findall(f"{h.title} {h.snippet}"):
            word = word.casefold()
            if word in seen or analyzer.tokens(word) == [term]:
                seen[word] = seen.get(word, 0) + 1
    if not seen:
        return None
    typed = typed.casefold()
    return min(seen, key=lambda w: (edit_distance(typed, w, len(typed) + len(w)), -seen[w], w))
