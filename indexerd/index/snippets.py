"""Snippets: the best passage of a document's stored text for a query, with what matched marked.

Engine-neutral: an engine gives the analysed query (:mod:`indexerd.index.querytokens`), the
stored text (or its chunks) and the title; :func:`make_snippet` gives a :class:`Snippet`.

What counts as a match is what the index matched (issue 34, "search people trust"): words of the
stored text are analysed by the index's own analyzer (:mod:`indexerd.index.analysis`), so a
query ``running`` marks ``runs`` (one stem), ``CVE`` does not mark ``CVEs2`` and a query token
never marks a longer token that merely starts with it.  A phrase (``"event loop"``, and a word
the analyzer cuts into several tokens: ``CVE-2023-48795``, ``pg_hba``) matches only where its
tokens stand at consecutive positions (stop words and punctuation between them skipped, as the
index skips them), and is marked as one span; its words elsewhere are not marked.  Whole
identifiers (``pg_hba.conf``) match their word; ``prefix*`` matches a token starting with it.

The regex of :func:`indexerd.index.highlight.words_regex` only proposes candidate words
(fast, in C); each is then analysed.  The passage is the window of about ``chars`` characters
holding the most distinct query terms and phrases (a phrase of ``n`` words weighs ``2n``, a whole
identifier 2, a term or prefix 1; repeats add 0.1 each, at most 0.5), earliest on a tie, among
the windows of the text read (:meth:`SnippetQuery.scan`): the text is read from its start in
stretches that double, and no further than the first window that holds every term and phrase of
the query, plus the passage's width after it (so a word found at once costs a few hundred
characters, however long the text); without such a window, the whole stored text (at most
:data:`~indexerd.index.base.SNIPPET_TEXT_CAP_BYTES`) within :data:`SNIPPET_BUDGET_SECONDS`.
Stored text given as chunks (Whoosh's, inflated as it is read) is read only that far.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from indexerd.index.analysis import Analyzer, is_cjk
from indexerd.index.highlight import words_regex
from indexerd.index.passage import EDGE_WORD_CHARS, Match, best_window, render
from indexerd.index.querytokens import IDS_FIELD, TokenPrefix, Tokens
from indexerd.index.querytree import And, Or

#: time one hit's snippet may take to look for its passage (seconds); past it the best passage of
#: the text scanned so far is shown
SNIPPET_BUDGET_SECONDS = 0.05
#: the longest gap of stop words and punctuation (characters) across which two words still count
#: as adjacent for a phrase
MAX_GAP_CHARS = 200
#: the first stretch of text scanned (characters; each next one is twice as long): scanning stops
#: after the stretch where a window first holds every term and phrase of the query
FIRST_STEP_CHARS = 1024
#: text read past the end of a stretch (characters) so that a word, or a phrase's gap, that
#: crosses it is analysed whole (:data:`LONGEST_WORD_CHARS` each side, :data:`MAX_GAP_CHARS`)
READ_AHEAD_CHARS = 1024
#: the longest word (characters) a candidate is widened to on each side
LONGEST_WORD_CHARS = 256

_NO_WORD = re.compile(r"[\W_]*")

NOTE_TITLE_ONLY = "the match is in the title only"
NOTE_NO_TEXT = "the document has no stored text to show"
NOTE_NOT_IN_TEXT = ("the match is not in the text kept for snippets (it may be in a page's navigation, "
                    "or past the first 256 KiB of text)")
NOTE_BUDGET = "no passage was found within the snippet time budget"


@dataclass(frozen=True)
class Snippet:
    """A hit's snippet: ``text`` (whitespace runs as one space, about ``chars`` characters),
    ``marks`` the ``(start, end)`` character offsets (code points, end exclusive, ascending, not
    overlapping) of what matched in ``text``, and ``note`` why there is no marked passage
    (:data:`NOTE_TITLE_ONLY` ...; None when there is one, or when the query has no words)."""

    text: str
    marks: tuple[tuple[int, int], ...] = ()
    note: str | None = None


class _Occurrence(NamedTuple):
    """One token of the stored text: its span, token, whole identifier, and whether it stands
    right after the previous occurrence in the index's positions (computed only where a phrase
    of the query has the previous token and this one next to each other; False elsewhere)."""

    start: int
    end: int
    token: str
    whole: str | None
    word_start: int
    word_end: int
    adjacent: bool


class SnippetQuery:
    """What a snippet looks for, from an analysed query tree (leaves under a ``Not`` left out).

    Args:
        tree: :func:`indexerd.index.querytokens.analyse_query`'s result.
        analyzer: the analyzer the index was built with.
    """

    def __init__(self, tree, analyzer: Analyzer) -> None:
        self.analyzer = analyzer
        self.terms: set[str] = set()
        self.ids: set[str] = set()
        self.prefixes: set[str] = set()
        self.id_prefixes: set[str] = set()
        self.phrases: set[tuple[str, ...]] = set()

        def walk(n) -> None:
            if isinstance(n, Tokens):
                if n.field == IDS_FIELD:
                    self.ids.update(n.tokens)
                elif len(n.tokens) == 1:
                    self.terms.add(n.tokens[0])
                else:
                    self.phrases.add(n.tokens)
            elif isinstance(n, TokenPrefix):
                (self.id_prefixes if n.field == IDS_FIELD else self.prefixes).add(n.prefix)
            elif isinstance(n, (And, Or)):
                for c in n.children:
                    walk(c)

        walk(tree)
        tokens = self.terms | self.ids | {t for p in self.phrases for t in p}
        # a Porter stem ending in i may stand for a word's y (pony -> poni): the candidate is cut
        self.rx = words_regex({t[:-1] if len(t) > 2 and t.endswith("i") else t for t in tokens},
                              self.prefixes | self.id_prefixes)
        self._spans: dict[str, list[tuple[int, int, str, str | None]]] = {}
        self._phrase_starts: dict[str, list[tuple[str, ...]]] = {}
        for p in self.phrases:
            self._phrase_starts.setdefault(p[0], []).append(p)
        #: the pairs of tokens next to each other in a phrase: only between such a pair does
        #: :meth:`matches` read whether two words are adjacent
        self._phrase_pairs = {(p[j - 1], p[j]) for p in self.phrases for j in range(1, len(p))}

    @property
    def has_words(self) -> bool:
        """False when the query has nothing to mark (only filters, or only negations)."""
        return self.rx is not None

    # -- the stored text's tokens -------------------------------------------------------------
    def occurrences(self, text: str, deadline: float, *, pos: int = 0, stop: int | None = None,
                    prev_end: int = -1, partial: bool = False) -> tuple[list[_Occurrence], int, bool]:
        """The tokens of the candidate words of ``text`` that begin from ``pos`` to ``stop`` (None:
        the end), in order; where the scan stopped (the next ``pos``: past the last word read,
        ``stop`` at least; the text's end when no candidate is left, unless ``partial``, a text
        that may go on past its end); and whether it stopped before ``deadline``
        (``time.monotonic()``).  ``prev_end``: where the last word of an earlier scan ended (-1:
        none), for phrase adjacency."""
        out: list[_Occurrence] = []
        if self.rx is None:
            return out, len(text), True
        stop = len(text) if stop is None else stop
        n = 0
        search = self.rx.search
        while True:
            m = search(text, pos)
            if m is None or m.start() >= stop:
                return out, max(pos, stop) if m is not None or partial else len(text), True
            n += 1
            if n % 64 == 0 and time.monotonic() > deadline:
                return out, pos, False
            ws, we = _word_bounds(text, m.start(), m.end())
            pos = max(we, m.end())
            spans = self._token_spans(text, ws, we)
            if not spans:
                continue
            adjacent = (bool(self.phrases) and prev_end >= 0
                        and (not out or out[-1].word_end != prev_end
                             or (out[-1].token, spans[0][2]) in self._phrase_pairs)
                        and self._nothing_between(text, prev_end, ws))
            for i, (s, e, token, whole) in enumerate(spans):
                out.append(_Occurrence(s, e, token, whole, ws, we, adjacent if i == 0 else True))
            prev_end = we

    @property
    def keys(self) -> frozenset[tuple]:
        """Every match key the query can give (:meth:`matches`)."""
        return frozenset({("t", t) for t in self.terms} | {("p", p) for p in self.prefixes}
                         | {("i", i) for i in self.ids} | {("ip", p) for p in self.id_prefixes}
                         | {("ph", p) for p in self.phrases})

    def keys_left(self, absent: Collection[str]) -> frozenset[tuple]:
        """:attr:`keys` a text lacking the words ``absent`` can still give: without those words
        and the phrases holding one."""
        if not absent:
            return self.keys
        return frozenset(k for k in self.keys if not ((k[0] == "t" and k[1] in absent)
                                                      or (k[0] == "ph" and any(t in absent for t in k[1]))))

    def _nothing_between(self, text: str, end: int, start: int) -> bool:
        """True when ``text[end:start]`` gives the index no token (punctuation, stop words)."""
        if start - end > MAX_GAP_CHARS:
            return False
        gap = text[end:start]
        return _NO_WORD.fullmatch(gap) is not None or not self.analyzer.tokens(gap)

    def _token_spans(self, text: str, ws: int, we: int) -> list[tuple[int, int, str, str | None]]:
        """The analysed tokens of the word ``text[ws:we]``, each with its span in ``text``: an
        identifier's parts their own spans, a CJK run's bigrams theirs, else the word's."""
        word = text[ws:we]
        cached = self._spans.get(word)
        if cached is None:
            cached = self._word_spans(word)
            if len(self._spans) < 10_000:
                self._spans[word] = cached
        return [(ws + s, ws + e, t, whole) for s, e, t, whole in cached]

    def _word_spans(self, word: str) -> list[tuple[int, int, str, str | None]]:
        """:meth:`_token_spans` of one word, relative to its start."""
        ws, we = 0, len(word)
        units = self.analyzer.units(word)
        if len(units) != 1:
            return [(ws, we, t, u.whole) for u in units for t in u.tokens]
        tokens, whole = units[0]
        if not tokens:
            return []
        if whole is not None:
            parts = [(p.start(), p.end()) for p in re.finditer(r"[^._]+", word)]
            if len(parts) == len(tokens):
                return [(s, e, t, whole) for (s, e), t in zip(parts, tokens)]
        elif is_cjk(word[0]) and len(tokens) == max(1, len(word) - 1):
            return [(i, min(we, i + 2), t, None) for i, t in enumerate(tokens)]
        return [(ws, we, t, whole) for t in tokens]

    # -- what matched -------------------------------------------------------------------------
    def matches(self, occ: list[_Occurrence]) -> list[Match]:
        """The query's matches among ``occ``, in text order."""
        out: list[Match] = []
        last_word = -1
        for i, o in enumerate(occ):
            if o.token in self.terms:
                out.append(Match(o.start, o.end, ("t", o.token), 1.0))
            for p in self.prefixes:
                if o.token.startswith(p):
                    out.append(Match(o.start, o.end, ("p", p), 1.0))
            if o.whole is not None and o.word_start != last_word:
                if o.whole in self.ids:
                    out.append(Match(o.word_start, o.word_end, ("i", o.whole), 2.0))
                for p in self.id_prefixes:
                    if o.whole.startswith(p):
                        out.append(Match(o.word_start, o.word_end, ("ip", p), 2.0))
            last_word = o.word_start
            for phrase in self._phrase_starts.get(o.token, ()):
                k = len(phrase)
                if i + k <= len(occ) and all(occ[i + j].token == phrase[j] and occ[i + j].adjacent
                                             for j in range(1, k)):
                    out.append(Match(o.start, occ[i + k - 1].end, ("ph", phrase), 2.0 * k))
        out.sort()
        return out

    def matches_in(self, text: str) -> list[Match]:
        """:meth:`matches` of a short text (a title), without a time bound."""
        return self.matches(self.occurrences(text, float("inf"))[0])

    def scan(self, text: "TextReader", deadline: float, fit: int,
             absent: Collection[str] = ()) -> tuple[list[Match], bool, tuple | None]:
        """The matches of the text ``text`` reads, as far as it is scanned, whether it was
        scanned to its end or to an early stop before ``deadline`` (``time.monotonic()``), and
        ``best_window(matches, fit)`` when the scan computed it (else None).
        ``absent``: words of the query the text is known not to hold (the engine's postings).

        The text is scanned in stretches of :data:`FIRST_STEP_CHARS`, each next one twice as
        long; after the stretch in which one window of ``fit`` characters first holds every term
        and phrase of the query (but ``absent``), the scan goes on to ``fit`` characters past that window's first
        match (its repeats) and stops: no window further on can hold more of the query.  ``text``
        is read only as far as the scan needs (plus :data:`READ_AHEAD_CHARS`)."""
        occ: list[_Occurrence] = []
        found: list[Match] = []
        pos, step, everything = 0, FIRST_STEP_CHARS, self.keys_left(absent)
        stop_at: int | None = None
        window: tuple | None = None  # best_window(found, fit) of the latest found, when known
        while True:
            stop = pos + step if stop_at is None else max(stop_at, pos)
            body = text.upto(stop + READ_AHEAD_CHARS)
            prev_end = occ[-1].word_end if occ else -1
            more, pos, in_time = self.occurrences(body, deadline, pos=pos, stop=stop, prev_end=prev_end,
                                                  partial=not text.complete)
            if more:
                occ += more
                found, window = self.matches(occ), None
            if not in_time or (text.complete and pos >= len(body)):
                return found, in_time, window
            if stop_at is not None:
                return found, True, window
            if found and {m.key for m in found} >= everything:   # (else no window can hold them all)
                window = best_window(found, fit)
                first, _end, keys = window
                if keys >= everything:
                    stop_at = first + fit
                    if pos >= stop_at:
                        return found, True, window
                    continue
            step *= 2


class TextReader:
    """A document's stored text read as far as asked: ``source`` is the whole text, or its
    chunks in order (an iterator read lazily: Whoosh's stored text inflated chunk by chunk).

    Not thread safe (one per snippet)."""

    def __init__(self, source: str | Iterable[str]) -> None:
        self._chunks: Iterator[str] | None
        if isinstance(source, str):
            self._text, self._chunks = source, None
        else:
            self._text, self._chunks = "", iter(source)

    @property
    def complete(self) -> bool:
        """True once the whole text has been read."""
        return self._chunks is None

    def upto(self, chars: int) -> str:
        """The text from its start, at least ``chars`` characters of it (all of it when shorter;
        more when a chunk runs past)."""
        if self._chunks is not None and len(self._text) < chars:
            parts, have = [self._text], len(self._text)
            for chunk in self._chunks:
                parts.append(chunk)
                have += len(chunk)
                if have >= chars:
                    break
            else:
                self._chunks = None
            self._text = "".join(parts)
        return self._text

    def whole(self) -> str:
        """The whole text."""
        if self._chunks is not None:
            self._text = self._text + "".join(self._chunks)
            self._chunks = None
        return self._text


def make_snippet(text: str | Iterable[str], query: SnippetQuery | None, chars: int, *, title: str = "",
                 budget_seconds: float = SNIPPET_BUDGET_SECONDS, absent: Collection[str] = ()) -> Snippet:
    """The snippet of a hit: the best passage of ``text`` (the stored text, or its chunks in
    order, read only as far as the passage needs) for ``query``, about ``chars`` characters, its
    matches marked (module docstring).

    Without a passage (nothing of the query in the text) the snippet is the text's start, unmarked,
    and ``note`` says why: the match is in ``title`` only, the document has no stored text, or
    the match lies outside the text kept for snippets.  ``query`` None or without words (a
    filter-only query): the text's start, no note.  Takes at most about ``budget_seconds`` (then
    the best passage of the text scanned so far).  ``absent``: words of the query the document
    is known to lack (the scan stops as soon as no window can hold more of what it has)."""
    reader = TextReader(text)
    if query is None or not query.has_words:
        return Snippet(_head(reader.upto(chars), chars))
    fit = chars * 4 // 5
    found, complete, window = query.scan(reader, time.monotonic() + budget_seconds, fit, absent)
    if not found:
        body = reader.whole() if complete else reader.upto(0)
        return Snippet(_head(body, chars), (), _why_unmarked(query, body, title, complete))
    start, end, _keys = window if window is not None else best_window(found, fit)
    # render reads up to a passage's width past the window, then a word's length to a whole word
    return Snippet(*render(reader.upto(end + chars + 2 * EDGE_WORD_CHARS + 2), found, start, end, chars))


#: what a hit carries when its caller asked for no snippet (``snippets_for`` of
#: :meth:`indexerd.index.SearchIndex.search`)
NO_SNIPPET = Snippet("")

#: time a document preview may take to mark its text (seconds): past it, what was scanned is marked
PREVIEW_BUDGET_SECONDS = 1.0


def mark_all(text: str, query: SnippetQuery | None, *, title: str = "",
             budget_seconds: float = PREVIEW_BUDGET_SECONDS) -> Snippet:
    """A document's preview: ``text`` whole, every match of ``query`` in it marked (as a
    snippet marks them: :meth:`SnippetQuery.matches`; overlapping matches as one mark), and
    ``note`` why nothing is marked (the match is in ``title`` only, there is no text, it lies
    outside the text, or the ``budget_seconds`` ran out first: then only the text scanned by
    then is marked).  ``query`` None or without words: the text unmarked, no note."""
    if query is None or not query.has_words:
        return Snippet(text)
    occ, _pos, in_time = query.occurrences(text, time.monotonic() + budget_seconds)
    spans: list[list[int]] = []
    for m in query.matches(occ):
        if spans and m.start <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], m.end)
        else:
            spans.append([m.start, m.end])
    if spans:
        return Snippet(text, tuple((s, e) for s, e in spans), None if in_time else NOTE_BUDGET)
    return Snippet(text, (), _why_unmarked(query, text, title, in_time))


def _why_unmarked(query: SnippetQuery, text: str, title: str, complete: bool) -> str:
    """Why ``text`` has no match of ``query`` to mark: the match is in ``title`` only, there is
    no text, it lies outside the text, or the text was not all scanned (``complete`` False)."""
    if query.matches_in(title):
        return NOTE_TITLE_ONLY
    if not text.strip():
        return NOTE_NO_TEXT
    return NOTE_NOT_IN_TEXT if complete else NOTE_BUDGET


def _head(text: str, chars: int) -> str:
    """The text's start as a snippet shows it (whitespace runs as one space); asked for the
    whole text kept (:data:`~indexerd.index.base.SNIPPET_TEXT_CAP_BYTES` characters or more: a
    document's preview), the text itself, its lines kept."""
    from indexerd.index.base import SNIPPET_TEXT_CAP_BYTES

    if chars >= SNIPPET_TEXT_CAP_BYTES:
        return text[:chars]
    return " ".join(text[:chars].split())


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_" or unicodedata.category(c)[0] == "M"


def _word_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """The analysis word (:mod:`indexerd.index.analysis`, step 2) around ``text[start:end]``:
    word characters joined by single dots, a CJK run apart from letters; at most
    :data:`LONGEST_WORD_CHARS` wider on each side."""
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    if not _is_word_char(before) and before != "." and not _is_word_char(after) and after != ".":
        return start, end
    cjk = is_cjk(text[start])
    if cjk:
        def inside(c: str) -> bool:
            return is_cjk(c)
    else:
        def inside(c: str) -> bool:
            return _is_word_char(c) and not is_cjk(c)
    s, lo = start, max(0, start - LONGEST_WORD_CHARS)
    while s > lo:
        c = text[s - 1]
        if inside(c) or (not cjk and c == "." and s >= 2 and inside(text[s - 2]) and inside(text[s])):
            s -= 1
        else:
            break
    e, hi = end, min(len(text), end + LONGEST_WORD_CHARS)
    while e < hi:
        c = text[e]
        if inside(c) or (not cjk and c == "." and e + 1 < len(text) and inside(text[e + 1]) and e > s
                         and inside(text[e - 1])):
            e += 1
        else:
            break
    return s, e
