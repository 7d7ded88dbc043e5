"""A Whoosh query's best documents, every match scored at once with numpy.

Whoosh's ``TopCollector`` walks the query's matcher tree one document at a time in Python: per
match a ``next()`` down the tree, a ``score()`` down the tree, a field-length lookup and a heap
push.  On 50,000 files that was most of every broad query (``difo``, in every file: 20,000 matcher
steps and scorer calls per 10,000 files; its block-quality skipping saves little when every block
holds the word; bench/RESULTS.md).

Here the same matcher tree Whoosh builds for each segment (the same classes and shape, from the
query's own ``matcher()``) is evaluated a node at a time over whole posting lists:

- a term's postings (``W3LeafMatcher``) are read straight from the postings file as arrays
  (:mod:`indexerd.index.whoosh.postingarrays`), only in the blocks that may hold the documents
  asked for, and scored by BM25F's formula on arrays -- the same float64 operations in the same
  order as ``whoosh.scoring.bm25``, so the same scores to the last bit;
- ``UnionMatcher`` (a + b where both match), ``IntersectionMatcher`` (a + b),
  ``ArrayUnionMatcher`` (the children's scores added in order), the deletions'
  ``FilterMatcher``, ``WrappingMatcher`` (times its boost), indexerd's ``AndNot`` matcher
  (:func:`indexerd.index.whoosh.compile.and_not`: a's documents not in b) and the exact phrase
  (:mod:`indexerd.index.whoosh.phrase`: the words' intersection, kept where the shifted position
  sets meet) are done on the arrays;
- any other matcher is walked by Whoosh itself (``next()``/``score()``), where it stands
  unconsumed; under an ``ArrayUnionMatcher`` (which reads ahead when built) that is not possible,
  and :class:`Unsupported` sends the caller back to Whoosh's collector.

The best ``limit`` are then those ``TopCollector`` keeps when it scores every match: highest
score first, equal scores in document order (its heap lets a later document in only with a
strictly higher score).  Exact phrases are checked last, best candidates first
(:func:`top_documents`).  ``tests/test_whoosh_bulkscore.py`` compares documents, order, scores
and counts with Whoosh's own on a real index (several segments, deletions, phrases, prefixes,
filters).  Whoosh's ``Searcher.search`` itself, which replaces its matcher every 10 matches,
lost a better document on that index; the test keeps the input.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
from whoosh.codec.whoosh3 import LENGTHS_COLUMN, W3LeafMatcher, _lenfield
from whoosh.matching import FilterMatcher, IntersectionMatcher, UnionMatcher, WrappingMatcher
from whoosh.matching.combo import ArrayUnionMatcher
from whoosh.matching.mcore import NullMatcherClass
from whoosh.scoring import BM25FScorer, WeightScorer
from whoosh.util.numeric import byte_to_length

from indexerd.index.whoosh.compile import and_not_matcher_class
from indexerd.index.whoosh.phrase import ExactSpansMatcher
from indexerd.index.whoosh.unread import UnreadArrayUnion, unpositioned
from indexerd.index.whoosh.postingarrays import (EMPTY_IDS, EMPTY_SCORES, TermBlocks, Unsupported,
                                                 phrase_places, sorted_unique)

__all__ = ["Unsupported", "count_documents", "top_documents"]

#: Whoosh's field length of each length byte (``byte_to_length``), as an array
_BYTE_TO_LENGTH = np.array([byte_to_length(b) for b in range(256)], dtype=np.int64)


class Matches(NamedTuple):
    """The documents a matcher matches in one segment: ``ids`` (int64, segment document numbers,
    increasing, no repeats) and their ``scores`` (float64, same length)."""

    ids: np.ndarray
    scores: np.ndarray


_EMPTY = Matches(EMPTY_IDS, EMPTY_SCORES)

#: candidates whose phrases are checked first (doubled each round while more may still beat the
#: best found)
FIRST_CHECK = 64


def top_documents(searcher, q, limit: int, allow: set | None = None,
                  kept: list | None = None) -> list[tuple[float, int]]:
    """The best ``limit`` documents of Whoosh query ``q`` on ``searcher`` (a
    ``whoosh.searching.Searcher``, scored by its weighting) as ``(score, docnum)`` pairs, best
    first, equal scores in document order: what ``searcher.search(q, limit=limit,
    filter=...)`` returns.  ``allow``: the global document numbers allowed (a filter's set), None
    for all.

    Exact phrases are checked last, and only as far as needed: the tree is first evaluated with
    every phrase outside a negation taken as its words' intersection (a superset of its
    documents, each scored at least as high: phrase scores are its words' scores, all above 0);
    then the candidates are checked best first, a batch at a time, until the best optimistic
    score left is below the ``limit``-th exact one.

    ``kept``: when given, each segment's evaluation ``(_Segment, offset of its first document)``
    is appended to it, in document order, for :func:`indexerd.index.whoosh.wordsheld.words_absent`.

    Raises:
        Unsupported: the tree holds a matcher evaluated neither here nor safely by Whoosh's own
            walk (the caller uses ``searcher.search``); what reading the index raises
            (``OSError``, Whoosh's ``ReaderClosed``).
    """
    if limit < 1:
        return []
    context = searcher.context()
    segments: list[tuple[_Segment, Any, int]] = []
    docs: list[np.ndarray] = [EMPTY_IDS]
    scores: list[np.ndarray] = [EMPTY_SCORES]
    where: list[np.ndarray] = [EMPTY_IDS]
    for sub, offset in searcher.leaf_searchers():
        with unpositioned():
            m = q.matcher(sub, context)
        seg = _Segment(sub.reader())
        found = seg.matches(m, consumed=False, optimistic=True)
        docs.append(found.ids + offset)
        scores.append(found.scores)
        where.append(np.full(len(found.ids), len(segments), dtype=np.int64))
        segments.append((seg, m, offset))
        if kept is not None:
            kept.append((seg, offset))
    d = np.concatenate(docs)
    s = np.concatenate(scores)
    if allow is not None:
        keep = np.isin(d, np.fromiter(allow, dtype=np.int64, count=len(allow)))
        d, s = d[keep], s[keep]
        where = [np.concatenate(where)[keep]]
    if not any(seg.guessed for seg, _m, _o in segments):
        return _best(d, s, limit)
    # the phrases: candidates checked best first
    seg_of = np.concatenate(where)
    order = np.lexsort((d, -s))
    exact_d: list[np.ndarray] = [EMPTY_IDS]
    exact_s: list[np.ndarray] = [EMPTY_SCORES]
    done, batch = 0, max(FIRST_CHECK, 2 * limit)
    while done < len(order):
        take = order[done:done + batch]
        done += len(take)
        batch *= 2
        for i, (seg, m, offset) in enumerate(segments):
            mine = take[seg_of[take] == i]
            if len(mine):
                r = seg.matches(m, False, np.sort(d[mine]) - offset)
                exact_d.append(r.ids + offset)
                exact_s.append(r.scores)
        if done < len(order):
            found_s = np.concatenate(exact_s)
            if len(found_s) >= limit:
                kth = np.partition(found_s, len(found_s) - limit)[len(found_s) - limit]
                if s[order[done]] < kth:  # no candidate left can reach the best found
                    break
    return _best(np.concatenate(exact_d), np.concatenate(exact_s), limit)


def count_documents(searcher, q, allow: set | None = None) -> int:
    """How many documents Whoosh query ``q`` matches on ``searcher`` (of the global document
    numbers ``allow``; None: all): what ``searcher.search(q, limit=None, scored=False,
    filter=...).scored_length()`` counts, phrases checked in every candidate.

    Raises:
        Unsupported: as :func:`top_documents` (the caller counts with Whoosh's collector).
    """
    return sum(len(ids) for _reader, ids in segment_matches(searcher, q, allow))


def segment_matches(searcher, q, allow: set | None = None) -> Iterator[tuple[object, np.ndarray]]:
    """Each segment's reader of ``searcher`` with the documents of Whoosh query ``q`` in it
    (segment-local ids, increasing; of the global document numbers ``allow``, None: all),
    phrases checked in every candidate: one evaluation that a count and facets can share
    (:func:`indexerd.index.whoosh.bulkfacets.count_and_facet_counts`).

    Raises:
        Unsupported: as :func:`top_documents`.
    """
    context = searcher.context()
    allowed = None if allow is None else np.fromiter(allow, dtype=np.int64, count=len(allow))
    for sub, offset in searcher.leaf_searchers():
        with unpositioned():
            m = q.matcher(sub, context)
        reader = sub.reader()
        ids = _Segment(reader).matches(m, consumed=False).ids
        if allowed is not None and len(ids):
            ids = ids[np.isin(ids + offset, allowed)]
        yield reader, ids


def _best(d: np.ndarray, s: np.ndarray, limit: int) -> list[tuple[float, int]]:
    """The ``limit`` best of documents ``d`` scored ``s`` as ``TopCollector`` keeps them:
    highest score first, equal scores by lower document number."""
    if len(d) > limit:
        # every document scoring at least the limit-th best score, ties included
        kth = np.partition(s, len(s) - limit)[len(s) - limit]
        keep = s >= kth
        d, s = d[keep], s[keep]
    order = np.lexsort((d, -s))[:limit]
    return list(zip(s[order].tolist(), d[order].tolist()))


class _Segment:
    """The evaluation of matcher trees on one segment's reader (a ``SegmentReader``); keeps each
    term's block headers, decoded blocks and each field's lengths read once."""

    def __init__(self, reader) -> None:
        self._reader = reader
        self._terms: dict[int, TermBlocks] = {}
        self._by_term: dict[tuple[str, bytes], TermBlocks] = {}
        self._lengths: dict[str, np.ndarray | None] = {}
        self._walked: dict[int, Matches] = {}
        #: whether an evaluation took a phrase for its words' intersection (``optimistic``)
        self.guessed = False

    def matches(self, m, consumed: bool, within: np.ndarray | None = None,
                optimistic: bool = False) -> Matches:
        """What ``m`` matches among the documents ``within`` (increasing ids; None: all),
        scored as ``m.score()`` would score each document.  ``consumed``: an ancestor may have
        moved ``m`` ahead (then Whoosh's own walk of it would miss documents).  ``optimistic``:
        an exact phrase outside a negation is taken as its words' intersection (more documents,
        none scored lower; :attr:`guessed` is set).  The same tree may be evaluated again (a
        walked matcher's documents are kept).

        Raises:
            Unsupported: ``m`` holds a matcher that cannot be evaluated (see the module).
        """
        t = type(m)
        if t is W3LeafMatcher:
            return self._term(m, within)
        if t is UnionMatcher:
            return _union(self.matches(m.a, consumed, within, optimistic),
                          self.matches(m.b, consumed, within, optimistic))
        if t is IntersectionMatcher:
            # the smaller side first; the other read only in the blocks holding its documents
            first, second = (m.a, m.b) if self.estimate(m.a) <= self.estimate(m.b) else (m.b, m.a)
            f = self.matches(first, consumed, within, optimistic)
            if not len(f.ids):
                return _EMPTY
            g = self.matches(second, consumed, f.ids, optimistic)
            return _intersection(f, g) if first is m.a else _intersection(g, f)
        if t is and_not_matcher_class():
            a = self.matches(m.a, consumed, within, optimistic)
            if not len(a.ids):
                return _EMPTY
            b = self.matches(m.b, consumed, a.ids)  # exact: fewer documents would let more in
            keep = ~np.isin(a.ids, b.ids, assume_unique=True)
            return Matches(a.ids[keep], a.scores[keep])
        if t is FilterMatcher:
            c = self.matches(m.child, consumed, within, optimistic)
            ids = np.fromiter(m._ids, dtype=np.int64, count=len(m._ids))
            keep = np.isin(c.ids, ids)
            if m._exclude:
                keep = ~keep
            return Matches(c.ids[keep], c.scores[keep] * m.boost)
        if t is WrappingMatcher:
            c = self.matches(m.child, consumed, within, optimistic)
            return Matches(c.ids, c.scores * m.boost)
        if t is UnreadArrayUnion or t is ArrayUnionMatcher:
            return self._array_union(m, within, optimistic)
        if t is ExactSpansMatcher:
            if optimistic and m.boost > 0:
                self.guessed = True
                c = self.matches(m.child, consumed, within, optimistic)
                return Matches(c.ids, c.scores * m.boost)
            return self._exact_phrase(m, consumed, within)
        if isinstance(m, NullMatcherClass):
            return _EMPTY
        if id(m) not in self._walked:
            if consumed or _holds_unpositioned(m):
                raise Unsupported(f"cannot evaluate {t.__name__} here")
            self._walked[id(m)] = _walk(m)
        return _restrict(self._walked[id(m)], within)

    def estimate(self, m) -> float:
        """How many documents ``m`` may match at most (its terms' document counts; infinite for
        a matcher walked by Whoosh), to read an intersection's smaller side first."""
        t = type(m)
        if t is W3LeafMatcher:
            return self._blocks(m).postings
        if t in (UnionMatcher, ArrayUnionMatcher, UnreadArrayUnion):
            kids = (m.a, m.b) if t is UnionMatcher else m._submatchers
            return sum(self.estimate(c) for c in kids)
        if t is IntersectionMatcher:
            return min(self.estimate(m.a), self.estimate(m.b))
        if t is and_not_matcher_class():
            return self.estimate(m.a)
        if t in (FilterMatcher, WrappingMatcher, ExactSpansMatcher):
            return self.estimate(m.child)
        if isinstance(m, NullMatcherClass):
            return 0
        return float("inf")

    def _array_union(self, m, within: np.ndarray | None, optimistic: bool) -> Matches:
        """``ArrayUnionMatcher``: each document's score the sum, in the children's order, of
        their scores times the boost (1 each when unscored), kept when above 0."""
        parts = [self.matches(c, True, within, optimistic) for c in m._submatchers]
        ids = sorted_unique(np.concatenate([p.ids for p in parts])) if parts else EMPTY_IDS
        acc = np.zeros(len(ids), dtype=np.float64)
        for p in parts:
            at = np.searchsorted(ids, p.ids)
            if m._scored:
                acc[at] += p.scores * m._boost
            else:
                acc[at] = 1
        keep = acc > 0
        return Matches(ids[keep], acc[keep])

    def _blocks(self, m) -> TermBlocks:
        got = self._terms.get(id(m))
        if got is None:
            got = self._terms[id(m)] = TermBlocks(m)
            if m._term is not None:
                self._by_term[m._term] = got
        return got

    @property
    def reader(self):
        """The segment's reader (a ``SegmentReader``)."""
        return self._reader

    def term_blocks(self, fieldname: str, tbytes: bytes) -> TermBlocks | None:
        """The postings of the term ``(fieldname, tbytes)`` as an evaluation here read them, or
        None when none did."""
        return self._by_term.get((fieldname, tbytes))

    def _term(self, m, within: np.ndarray | None) -> Matches:
        """A term's postings scored as its scorer scores them (BM25F or the bare weight)."""
        p = self._blocks(m).read(within)
        scorer = type(m.scorer)
        if scorer is WeightScorer:
            return Matches(p.ids, p.weights)
        if scorer is not BM25FScorer:
            raise Unsupported(f"scorer {scorer.__name__}")
        fl = self._field_lengths(m._term[0], p.ids)
        sc = m.scorer
        idf, w, avgfl, B, K1 = sc.idf, p.weights, sc.avgfl, sc.B, sc.K1
        # whoosh.scoring.bm25, operation by operation (float64 throughout, as Python's floats)
        return Matches(p.ids, idf * ((w * (K1 + 1)) / (w + K1 * ((1 - B) + B * fl / avgfl))))

    def _field_lengths(self, fieldname: str, ids: np.ndarray) -> np.ndarray:
        """The length of ``fieldname`` in documents ``ids`` as ``doc_field_length(docnum,
        fieldname, 1)`` gives it (1 everywhere when the field keeps no lengths).

        Raises:
            Unsupported: a document has no length (Whoosh would score None) or the reader is not
                Whoosh 2.7.5's ``W3PerDocReader``.
        """
        if fieldname not in self._lengths:
            self._lengths[fieldname] = self._read_lengths(fieldname)
        table = self._lengths[fieldname]
        if table is None:
            return np.ones(len(ids), dtype=np.int64)
        fl = table[ids]
        if len(fl) and not fl.min() > 0:
            raise Unsupported("a document without a field length")
        return fl

    def _read_lengths(self, fieldname: str) -> np.ndarray | None:
        perdoc = getattr(self._reader, "_perdoc", None)
        if perdoc is None or not hasattr(perdoc, "_cached_reader"):
            raise Unsupported("not a W3 segment reader")
        col = perdoc._cached_reader(_lenfield(fieldname), LENGTHS_COLUMN)
        if col is None:
            return None
        if getattr(col, "_fixedlen", None) != 1:
            raise Unsupported("unknown length column")
        raw = col._dbfile.get(col._basepos, col._count) if col._count else b""
        doccount = max(col._doccount, col._count)
        b = np.zeros(doccount + 1, dtype=np.uint8)  # past the column's end: the default, 0
        b[:len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        return _BYTE_TO_LENGTH[b]

    def _exact_phrase(self, m, consumed: bool, within: np.ndarray | None) -> Matches:
        """The exact phrase's matcher: the documents of its words' intersection (scored as it
        scores them) where some start ``s`` has word ``k`` at ``s + k`` for every ``k``."""
        both = self.matches(m.child, consumed, within)
        if not len(both.ids):
            return both
        cand = both.ids
        keep = phrase_places(cand, [self._blocks(_leaf(wm)).read(cand, values=True) for wm in m.ms])
        return Matches(cand[keep], both.scores[keep] * m.boost)


def _leaf(m):
    """The ``W3LeafMatcher`` under a phrase word's matcher (deletions wrap it in a filter)."""
    while type(m) in (FilterMatcher, WrappingMatcher):
        m = m.child
    if type(m) is not W3LeafMatcher:
        raise Unsupported(f"phrase word matcher {type(m).__name__}")
    return m


def _restrict(found: Matches, within: np.ndarray | None) -> Matches:
    """``found`` among the documents ``within`` (None: all)."""
    if within is None:
        return found
    keep = np.isin(found.ids, within, assume_unique=True)
    return Matches(found.ids[keep], found.scores[keep])


def _holds_unpositioned(m) -> bool:
    """Whether ``m`` or a matcher under it is an and-not matcher built unpositioned
    (:func:`indexerd.index.whoosh.compile.unpositioned_and_not`), which Whoosh cannot walk."""
    return getattr(m, "unpositioned", False) or any(_holds_unpositioned(c) for c in m.children())


def _walk(m) -> Matches:
    """What Whoosh's own walk of ``m`` yields from where it stands: each document and
    ``m.score()`` there."""
    ids: list[int] = []
    scores: list[float] = []
    while m.is_active():
        ids.append(m.id())
        scores.append(m.score())
        m.next()
    return Matches(np.array(ids, dtype=np.int64), np.array(scores, dtype=np.float64))


def _union(a: Matches, b: Matches) -> Matches:
    """``UnionMatcher``: every document of either; a's score + b's where both match."""
    if not len(a.ids):
        return b
    if not len(b.ids):
        return a
    ids = sorted_unique(np.concatenate([a.ids, b.ids]))
    scores = np.zeros(len(ids), dtype=np.float64)
    ia = np.searchsorted(ids, a.ids)
    ib = np.searchsorted(ids, b.ids)
    ina = np.zeros(len(ids), dtype=bool)
    ina[ia] = True
    scores[ia] = a.scores
    inb = np.zeros(len(ids), dtype=bool)
    inb[ib] = True
    both = ina & inb
    only_b = inb & ~ina
    sb = np.zeros(len(ids), dtype=np.float64)
    sb[ib] = b.scores
    scores[both] = scores[both] + sb[both]
    scores[only_b] = sb[only_b]
    return Matches(ids, scores)


def _intersection(a: Matches, b: Matches) -> Matches:
    """``IntersectionMatcher``: the documents of both, a's score + b's."""
    ids, ia, ib = np.intersect1d(a.ids, b.ids, assume_unique=True, return_indices=True)
    return Matches(ids, a.scores[ia] + b.scores[ib])
