"""The text analysis of the Whoosh engine, in Whoosh's terms.

The index analyses text with :mod:`indexerd.index.analysis` (engine-neutral, the token stream
every engine implements).  Here it is wrapped for Whoosh:

- :class:`NeutralAnalyzer` is the analyzer the schema names for ``title`` and ``content``: it
  yields Whoosh ``Token`` objects from that token stream (position = index in the stream);
- :class:`TokenList` is a text already analysed: the session analyses each document once and
  hands the tokens to Whoosh as this list (the whole identifiers go to the ``ids`` field);
- :class:`TokenPositions` is the ``Positions`` posting format with the position lists built in
  one loop in ``array('I')`` (4 bytes a position instead of a Python int in a list); it yields
  exactly what ``Positions`` yields through :class:`NeutralAnalyzer`, so a stock Whoosh writer
  (patches off) writes the same postings, slower.

The classes are pickled *by reference* into each index's schema: keep their module path and
names.  :class:`FusedStemmingAnalyzer` and :class:`FusedPositions` are what indexes written
before (analysis version 1: Whoosh's ``StemmingAnalyzer`` fused into one loop, about 2x faster
than Whoosh's chain) pickled; they stay importable so such an index still opens, and it is rebuilt.
"""

from __future__ import annotations

from array import array
from itertools import accumulate

from whoosh.analysis import Token
from whoosh.analysis.analyzers import Analyzer
from whoosh.analysis.filters import STOP_WORDS
from whoosh.analysis.tokenizers import default_pattern
from whoosh.compat import loads
from whoosh.formats import Positions
from whoosh.lang.porter import stem
from whoosh.system import _INT_SIZE

from indexerd.index.analysis import Analyzer as _TextAnalyzer
from indexerd.index.analysis import analyzer as _shared_analyzer
from indexerd.index.whoosh.postingvalues import PostingValues

_CACHE: dict[str, str] = {}
_CACHE_MAX = 50_000
"""Stems kept (cleared when full).  Words are Zipf-distributed, so 50,000 keeps nearly every hit;
at 200,000 the cache alone held ~30 MB of the first index's peak (659,102 distinct terms in
docs-fs fill any size)."""


class FusedStemmingAnalyzer(Analyzer):
    """Tokenize on ``[\\w*]+(\\.?[\\w*]+)*``, lower-case, drop stop words and 1-letter words,
    Porter-stem; positions count kept tokens only (Whoosh's ``renumber=True``).

    Thread-safe: the stem cache is a module dict (a lost race only repeats a stem).
    """

    def __call__(self, value, positions=False, chars=False, keeporiginal=False, removestops=True,
                 start_pos=0, start_char=0, tokenize=True, mode="", **kwargs):
        t = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        cache = _CACHE
        if len(cache) > _CACHE_MAX:
            cache.clear()
        stops = STOP_WORDS
        tokpos = start_pos - 1  # the tokenizer's position of each token
        pos = None  # Whoosh's StopFilter(renumber=True): the first kept token keeps its
        # tokenizer position, each later kept token takes the next one
        if not tokenize:  # the whole value is one token (Whoosh's contract)
            matches = [None]
        else:
            matches = default_pattern.finditer(value)
        for m in matches:
            tokpos += 1
            raw = value if m is None else m.group()
            w = raw.lower()
            if len(w) < 2 or w in stops:
                if removestops:
                    continue
                t.stopped = True
                t.text = w  # stop words are not stemmed
                if positions:
                    t.pos = tokpos
            else:
                t.stopped = False
                s = cache.get(w)
                if s is None:
                    s = cache[w] = stem(w)
                t.text = s
                if positions:
                    pos = tokpos if pos is None else pos + 1
                    t.pos = pos
            t.boost = 1.0
            if keeporiginal:
                t.original = raw
            if chars:
                if m is None:
                    t.startchar, t.endchar = start_char, start_char + len(value)
                else:
                    t.startchar, t.endchar = start_char + m.start(), start_char + m.end()
            yield t

    def __eq__(self, other):
        return type(other) is type(self)

    def __hash__(self):
        return hash(type(self))

    def __getstate__(self):
        return {}

    def __setstate__(self, state):
        pass


def _word_values(poses: dict[str, array], field_boost: float, encode):
    """Whoosh's ``word_values`` rows ``(word, frequency, weight, encoded positions)`` of the
    positions gathered per word."""
    for w, plist in poses.items():
        yield (w, len(plist), float(len(plist)) * field_boost, encode(plist))


def _decode_positions(self, valuestring):
    """The positions of a posting value, as ``Positions.decode_positions`` gives them (the
    deltas summed by ``itertools.accumulate`` in C, not a Python loop: an exact phrase of common
    words decodes thousands of postings).  A method of both position formats below."""
    if not valuestring.endswith(b"."):
        valuestring += b"."
    return list(accumulate(loads(valuestring[_INT_SIZE:])))


class FusedPositions(Positions):
    """Whoosh's ``Positions`` posting format with :class:`FusedStemmingAnalyzer` run inline.

    ``Positions.word_values`` makes one ``Token`` per word and keeps every position as a Python
    ``int`` in a list (about 37 bytes per word: a 9 MB text file held ~50 MB while it was being
    indexed).  This version tokenizes in the same loop and keeps positions in ``array('I')``
    (4 bytes per word).  It yields exactly what ``Positions.word_values`` yields for the same
    text -- the same terms in the same order, frequencies, weights (``freq * field_boost``) and
    value bytes (``Positions.encode``) -- so the index bytes do not change; any other analyzer or
    a non-string value goes through ``Positions`` unchanged.

    Pickled by reference into each index's schema: keep its module path and name.  The loop
    repeats :meth:`FusedStemmingAnalyzer.__call__`'s ``removestops`` path inline on purpose (a
    generator between them costs a call per word); change both together --
    ``tests/test_analysis.py`` checks both against Whoosh's own on any text.
    """

    decode_positions = _decode_positions

    def word_values(self, value, analyzer, **kwargs):
        if type(analyzer) is not FusedStemmingAnalyzer or not isinstance(value, str) \
                or kwargs.keys() - {"mode"}:
            yield from super().word_values(value, analyzer, **kwargs)
            return
        cache = _CACHE
        if len(cache) > _CACHE_MAX:
            cache.clear()
        stops = STOP_WORDS
        poses: dict[str, array] = {}
        pos = None  # renumbered as in FusedStemmingAnalyzer.__call__ (start_pos 0)
        for tokpos, m in enumerate(default_pattern.finditer(value)):
            w = m.group().lower()
            if len(w) < 2 or w in stops:
                continue
            s = cache.get(w)
            if s is None:
                s = cache[w] = stem(w)
            pos = tokpos if pos is None else pos + 1
            plist = poses.get(s)
            if plist is None:
                poses[s] = array("I", (pos,))
            else:
                plist.append(pos)
        yield from _word_values(poses, self.field_boost, self.encode)


class TokenList(list):
    """A text's analysed tokens in position order (:meth:`indexerd.index.analysis.Analyzer.analyse`),
    given to Whoosh as a field's value instead of the text."""

    __slots__ = ()


class NeutralAnalyzer(Analyzer):
    """Whoosh's view of :class:`indexerd.index.analysis.Analyzer` (``fold_diacritics`` as set).

    Takes a text or a :class:`TokenList`; yields one ``Token`` per token, ``pos`` its index in
    the stream plus ``start_pos``.  Character offsets are not known (snippets find words in the
    stored text with :mod:`indexerd.index.highlight`): ``startchar``/``endchar`` are 0.
    ``removestops`` is ignored (stop words never enter the stream).  Thread-safe.
    """

    def __init__(self, fold_diacritics: bool = True) -> None:
        self.fold_diacritics = fold_diacritics

    @property
    def text_analyzer(self) -> _TextAnalyzer:
        """The engine-neutral analyzer of this setting (shared, with its word cache)."""
        return _shared_analyzer(fold_diacritics=self.fold_diacritics)

    def tokens(self, value) -> list[str]:
        """The token stream of a text, or the :class:`TokenList` itself."""
        if type(value) is TokenList:
            return value
        return self.text_analyzer.tokens(value)

    def __call__(self, value, positions=False, chars=False, keeporiginal=False, removestops=True,
                 start_pos=0, start_char=0, tokenize=True, mode="", **kwargs):
        t = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        tokens = self.tokens(value) if tokenize or type(value) is TokenList else [value]
        for i, text in enumerate(tokens):
            t.text = text
            t.stopped = False
            t.boost = 1.0
            if positions:
                t.pos = start_pos + i
            if chars:
                t.startchar = t.endchar = start_char
            if keeporiginal:
                t.original = text
            yield t

    def __eq__(self, other):
        return type(other) is type(self) and other.fold_diacritics == self.fold_diacritics

    def __hash__(self):
        return hash((type(self), self.fold_diacritics))

    def __getstate__(self):
        return {"fold_diacritics": self.fold_diacritics}

    def __setstate__(self, state):
        self.fold_diacritics = state.get("fold_diacritics", True)


class TokenPositions(Positions):
    """Whoosh's ``Positions`` format for fields analysed by :class:`NeutralAnalyzer`: the same
    terms, frequencies, weights (``freq * field_boost``) and value bytes, with positions kept in
    ``array('I')`` while a document is indexed.  Any other analyzer or value goes through
    ``Positions``.  A :class:`~indexerd.index.whoosh.postingvalues.PostingValues` value is
    yielded as it is (its terms decoded).  Pickled by reference into each index's schema."""

    decode_positions = _decode_positions

    def word_values(self, value, analyzer, **kwargs):
        if type(value) is PostingValues:  # computed by the session (postingvalues.field_postings)
            fb = self.field_boost
            for tbytes, freq, vbytes in zip(*value):
                yield (tbytes.decode("utf-8"), freq, float(freq) * fb, vbytes)
            return
        if type(analyzer) is not NeutralAnalyzer or kwargs.keys() - {"mode"} \
                or not isinstance(value, (str, TokenList)):
            yield from super().word_values(value, analyzer, **kwargs)
            return
        poses: dict[str, array] = {}
        for pos, tok in enumerate(analyzer.tokens(value)):
            plist = poses.get(tok)
            if plist is None:
                poses[tok] = array("I", (pos,))
            else:
                plist.append(pos)
        yield from _word_values(poses, self.field_boost, self.encode)
