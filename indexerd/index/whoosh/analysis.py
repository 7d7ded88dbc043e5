"""The text analyzer of the index: Whoosh's ``StemmingAnalyzer`` fused into one generator.

Whoosh chains four generators per token (regex tokenizer -> lowercase -> stop words -> Porter
stemmer with an LRU cache), and that chain was the largest single cost of a first index (about
60% of the writer thread).  :class:`FusedStemmingAnalyzer` produces exactly the same tokens and
positions (same pattern, the same stop list with ``minsize=2``, renumbered positions, the same
stemmer) in one loop with a plain dict cache, about 2x faster.  It is used at index and query time
alike (the schema stores it), so a query is analysed the same way as the documents.

The class is pickled *by reference* into each index's schema: keep its module path and name.
"""

from __future__ import annotations

from array import array

from whoosh.analysis import Token
from whoosh.analysis.analyzers import Analyzer
from whoosh.analysis.filters import STOP_WORDS
from whoosh.analysis.tokenizers import default_pattern
from whoosh.formats import Positions
from whoosh.lang.porter import stem

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
        fb = self.field_boost
        encode = self.encode
        for w, plist in poses.items():
            yield (w, len(plist), float(len(plist)) * fb, encode(plist))
