"""A Whoosh query's best documents, every match scored at once with numpy.

Whoosh's ``TopCollector`` walks the query's matcher tree one document at a time in Python: per
match a ``next()`` down the tree, a ``score()`` down the tree, a field-length lookup and a heap
push.  On 50,000 files that was most of every broad query (``difo``, in every file: 20,000 matcher
steps and scorer calls per 10,000 files; its block-quality skipping saves little when every block
holds the word; bench/RESULTS.md).

Here the same matcher tree Whoosh builds for each segment (the same classes and shape, from the
query's own ``matcher()``) is evaluated a node at a time over whole posting lists:

- a term's postings (``W3LeafMatcher``) are read straight from the postings file, block by block
  (Whoosh 2.7.5's block layout: ``whoosh/codec/whoosh3.py``, ``W3LeafMatcher._goto`` and
  ``_read_data``), and scored by BM25F's formula on arrays -- the same float64 operations in the
  same order as ``whoosh.scoring.bm25``, so the same scores to the last bit;
- ``UnionMatcher`` (a + b where both match), ``IntersectionMatcher`` (a + b),
  ``ArrayUnionMatcher`` (the children's scores added in order), the deletions'
  ``FilterMatcher``, ``WrappingMatcher`` (times its boost), indexerd's ``AndNot`` matcher
  (:func:`indexerd.index.whoosh.compile.and_not`: a's documents not in b) and the exact phrase
  (:mod:`indexerd.index.whoosh.phrase`: the words' intersection, kept where the shifted position
  sets meet) are done on the arrays;
- any other matcher is walked by Whoosh itself (``next()``/``score()``), where it stands
  unconsumed; under an ``ArrayUnionMatcher`` (which reads ahead when built) that is not possible,
  and :class:`Unsupported` sends the caller back to Whoosh's collector.

The best ``limit`` are then those ``TopCollector`` keeps: highest score first, equal scores in
document order (its heap lets a later document in only with a strictly higher score; its
block-quality skipping passes over blocks that cannot beat the heap's least score, so it never
changes them).  ``tests/test_whoosh_bulkscore.py`` compares documents, order and scores with
Whoosh's own search on real indexes (several segments, deletions, phrases, prefixes, filters).
"""

from __future__ import annotations

import io
import pickle
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import accumulate
from typing import Any, NamedTuple

import numpy as np
import zlib
from isal.isal_zlib import decompress  # zlib's inflate, 2-2.5x as fast (ISA-L)
from whoosh.codec.whoosh3 import LENGTHS_COLUMN, W3LeafMatcher, _lenfield
from whoosh.matching import FilterMatcher, IntersectionMatcher, UnionMatcher, WrappingMatcher
from whoosh.matching.combo import ArrayUnionMatcher, CombinationMatcher
from whoosh.matching.mcore import NullMatcherClass
from whoosh.scoring import BM25FScorer, WeightScorer
from whoosh.util.numeric import byte_to_length

from indexerd.index.whoosh.compile import and_not_matcher_class, unpositioned_and_not
from indexerd.index.whoosh.phrase import ExactSpansMatcher

__all__ = ["Unsupported", "count_documents", "top_documents"]

_INT = struct.Struct("!i")  # whoosh.system.pack_int: a block's length, negative for the last
_INT_SIZE = 4
#: a document's place among the phrase's candidates, shifted above any position in it
_DOC_SHIFT = 1 << 32
#: Whoosh's field length of each length byte (``byte_to_length``), as an array
_BYTE_TO_LENGTH = np.array([byte_to_length(b) for b in range(256)], dtype=np.int64)
_EMPTY_IDS = np.zeros(0, dtype=np.int64)
_EMPTY_SCORES = np.zeros(0, dtype=np.float64)


class Unsupported(Exception):
    """The query's matcher tree holds a matcher that cannot be evaluated here (the caller runs
    Whoosh's own collector instead); not an error of the query."""


class Matches(NamedTuple):
    """The documents a matcher matches in one segment: ``ids`` (int64, segment document numbers,
    increasing, no repeats) and their ``scores`` (float64, same length)."""

    ids: np.ndarray
    scores: np.ndarray


class Postings(NamedTuple):
    """One term's postings in one segment: ``ids`` (int64, increasing), ``weights`` (float64,
    Whoosh's float32 weights widened) and ``values`` (the raw posting values, one ``bytes`` per
    posting, or None when not kept)."""

    ids: np.ndarray
    weights: np.ndarray
    values: list | None


_EMPTY = Matches(_EMPTY_IDS, _EMPTY_SCORES)

#: set while :func:`_unpositioned` holds: an ``ArrayUnionMatcher`` is built without reading
#: its first part of documents (a Python walk of up to 2,048 documents of every child)
_unread: ContextVar[bool] = ContextVar("indexerd_unread_array_union", default=False)


class UnreadArrayUnion(ArrayUnionMatcher):
    """Whoosh's ``ArrayUnionMatcher`` (``Or`` builds it on segments of at most 5,000 documents),
    built unread while :func:`_unpositioned` holds; then it says so (``unpositioned``) and must
    not be walked.  :func:`indexerd.index.whoosh.patches.install` installs it as
    ``whoosh.matching.ArrayUnionMatcher``, the name ``whoosh.query.compound`` builds it by
    (without it, Whoosh's own reads ahead when built, and this module evaluates that too)."""

    unpositioned = False

    def __init__(self, submatchers, doccount, boost=1.0, scored=True, partsize=2048):
        if not _unread.get():
            super().__init__(submatchers, doccount, boost=boost, scored=scored, partsize=partsize)
            return
        CombinationMatcher.__init__(self, submatchers, boost=boost)
        self._scored = scored
        self._doccount = doccount
        self._partsize = partsize or doccount
        self.unpositioned = True



@contextmanager
def _unpositioned() -> Iterator[None]:
    """While the block runs (in this thread), matchers are built without moving to their first
    match or reading ahead: and-not matchers (:func:`unpositioned_and_not`) and
    ``ArrayUnionMatcher`` (:class:`UnreadArrayUnion`, once installed); only this module
    evaluates them."""
    token = _unread.set(True)
    try:
        with unpositioned_and_not():
            yield
    finally:
        _unread.reset(token)


#: candidates whose phrases are checked first (doubled each round while more may still beat the
#: best found)
FIRST_CHECK = 64


def top_documents(searcher, q, limit: int, allow: set | None = None) -> list[tuple[float, int]]:
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

    Raises:
        Unsupported: the tree holds a matcher evaluated neither here nor safely by Whoosh's own
            walk (the caller uses ``searcher.search``); what reading the index raises
            (``OSError``, Whoosh's ``ReaderClosed``).
    """
    if limit < 1:
        return []
    context = searcher.context()
    segments: list[tuple[_Segment, Any, int]] = []
    docs: list[np.ndarray] = [_EMPTY_IDS]
    scores: list[np.ndarray] = [_EMPTY_SCORES]
    where: list[np.ndarray] = [_EMPTY_IDS]
    for sub, offset in searcher.leaf_searchers():
        with _unpositioned():
            m = q.matcher(sub, context)
        seg = _Segment(sub.reader())
        found = seg.matches(m, consumed=False, optimistic=True)
        docs.append(found.ids + offset)
        scores.append(found.scores)
        where.append(np.full(len(found.ids), len(segments), dtype=np.int64))
        segments.append((seg, m, offset))
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
    exact_d: list[np.ndarray] = [_EMPTY_IDS]
    exact_s: list[np.ndarray] = [_EMPTY_SCORES]
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
    context = searcher.context()
    allowed = None if allow is None else np.fromiter(allow, dtype=np.int64, count=len(allow))
    total = 0
    for sub, offset in searcher.leaf_searchers():
        with _unpositioned():
            m = q.matcher(sub, context)
        ids = _Segment(sub.reader()).matches(m, consumed=False).ids
        total += len(ids) if allowed is None else int(np.isin(ids + offset, allowed).sum())
    return total


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
        self._terms: dict[int, _TermBlocks] = {}
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
        ids = np.unique(np.concatenate([p.ids for p in parts])) if parts else _EMPTY_IDS
        acc = np.zeros(len(ids), dtype=np.float64)
        for p in parts:
            at = np.searchsorted(ids, p.ids)
            if m._scored:
                acc[at] += p.scores * m._boost
            else:
                acc[at] = 1
        keep = acc > 0
        return Matches(ids[keep], acc[keep])

    def _blocks(self, m) -> _TermBlocks:
        got = self._terms.get(id(m))
        if got is None:
            got = self._terms[id(m)] = _TermBlocks(m)
        return got

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
        place = np.arange(len(cand), dtype=np.int64)
        starts: np.ndarray | None = None
        for k, wm in enumerate(m.ms):
            p = self._blocks(_leaf(wm)).read(cand, values=True)
            at = np.searchsorted(p.ids, cand).tolist()
            vals = p.values or []
            lens, flat = _position_deltas_of([vals[i] for i in at])
            pos = np.cumsum(flat)
            ends = np.cumsum(lens)
            base = np.zeros(len(lens), dtype=np.int64)
            base[1:] = pos[ends[:-1] - 1]  # each document's positions summed from its own start
            pos -= np.repeat(base, lens)
            keys = np.repeat(place, lens) * _DOC_SHIFT + (pos - k + len(m.ms))
            starts = keys if starts is None else _sorted_intersection(starts, keys)
            if not len(starts):
                return _EMPTY
        assert starts is not None
        keep = np.unique(starts // _DOC_SHIFT)
        return Matches(cand[keep], both.scores[keep] * m.boost)


def _position_deltas_of(values: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """How many positions each ``Positions`` posting value holds, and all their deltas in
    order (int64 arrays).  A value laid out as the common case -- the count, then protocol 2's
    pickle of a list of at most 1,000 deltas below 256, one ``K`` opcode each (13 bytes for one
    position, ``2n + 12`` for ``n``) -- is read from the joined bytes as arrays; any other by
    :func:`_position_deltas`."""
    m = len(values)
    if not m:
        return _EMPTY_IDS, _EMPTY_IDS
    size = np.fromiter(map(len, values), dtype=np.int64, count=m)
    buf = np.frombuffer(b"".join(values), dtype=np.uint8)
    start = np.zeros(m, dtype=np.int64)
    start[1:] = np.cumsum(size)[:-1]
    big = buf.astype(np.int64)
    n = (big[start] << 24) | (big[start + 1] << 16) | (big[start + 2] << 8) | big[start + 3]
    simple = ((n == 1) & (size == 13)) | ((n > 1) & (n <= 1000) & (size == 2 * n + 12))
    first = start + np.where(n == 1, 9, 10)  # the first K: after the count, PROTO, EMPTY_LIST, BINPUT (, MARK)
    sn = np.where(simple, n, 0)
    j = np.arange(int(sn.sum()), dtype=np.int64) - np.repeat(np.cumsum(sn) - sn, sn)
    ops = np.repeat(first, sn) + 2 * j
    bad = buf[ops] != _K
    if bad.any():  # a value whose bytes only looked like the common case
        owner = np.repeat(np.arange(m), sn)
        simple[np.unique(owner[bad])] = False
        sn = np.where(simple, n, 0)
        j = np.arange(int(sn.sum()), dtype=np.int64) - np.repeat(np.cumsum(sn) - sn, sn)
        ops = np.repeat(first, sn) + 2 * j
    others = {int(i): _position_deltas(values[i]) for i in np.flatnonzero(~simple)}
    lens = n.copy()
    for i, d in others.items():
        lens[i] = len(d)
    out_start = np.cumsum(lens) - lens
    flat = np.empty(int(lens.sum()), dtype=np.int64)
    flat[np.repeat(out_start, sn) + j] = buf[ops + 1]
    for i, d in others.items():
        flat[out_start[i]:out_start[i] + len(d)] = d
    return lens, flat


def _position_deltas(value: bytes) -> list[int]:
    """The position deltas of a ``Positions`` posting value (its count, then the pickled
    deltas; a value whose pickle lost its final STOP byte gets it back, as
    :func:`indexerd.index.whoosh.analysis._decode_positions` does)."""
    if not value.endswith(b"."):
        value += b"."
    return pickle.loads(value[_INT_SIZE:])


def _leaf(m):
    """The ``W3LeafMatcher`` under a phrase word's matcher (deletions wrap it in a filter)."""
    while type(m) in (FilterMatcher, WrappingMatcher):
        m = m.child
    if type(m) is not W3LeafMatcher:
        raise Unsupported(f"phrase word matcher {type(m).__name__}")
    return m


class _TermBlocks:
    """One term's posting blocks in one segment (the ``W3LeafMatcher`` ``m``'s, read from its
    first block wherever ``m`` stands): the block headers read at once, a block's data decoded
    when a document it may hold is asked for, and kept.

    The layout is ``W3LeafMatcher``'s (``_goto``, ``_read_data``): per block a 4-byte length
    (negative on the last block), a pickled ``(count, max id, max weight, compression, min
    length, max length)`` header, then the pickled ``(id deltas from 0, weights, values)``,
    zlib-compressed when the header's compression is not 0 (inflated by ISA-L).

    Raises (when built):
        Unsupported: byte-packed ids (vector postings), a fixed-size value format, or a term
            info without its postings' extent.
        OSError: reading the postings file failed.
    """

    def __init__(self, m) -> None:
        if m._byteids or not (m._fixedsize is None or m._fixedsize < 0):
            raise Unsupported("vector or fixed-size postings")
        length = m._length
        if isinstance(length, tuple) and len(length) == 1:  # as the term index's arrays give it
            length = length[0]
        if not isinstance(length, int):
            raise Unsupported("a term info without its postings' extent")
        start = m._baseoffset
        buf = self._buf = bytes(m._postfile.get(start, m._startoffset + length - start))
        bio = io.BytesIO(buf)
        load, unpack = pickle.load, _INT.unpack_from
        maxids: list[int] = []
        self._data: list[tuple[int, int, int]] = []  # (start, end, compression) of each block
        self._counts: list[int] = []
        counts = 0
        pos, n = 0, len(buf)
        while pos < n:
            (blen,) = unpack(buf, pos)
            nxt = pos + _INT_SIZE + abs(blen)
            bio.seek(pos + _INT_SIZE)
            count, maxid, _maxw, comp, _mnlen, _mxlen = load(bio)
            maxids.append(maxid)
            self._data.append((bio.tell(), nxt, comp))
            self._counts.append(count)
            counts += count
            pos = nxt
            if blen < 0:
                break
        self.postings = counts
        self._maxids = np.array(maxids, dtype=np.int64)
        self._decoded: dict[int, tuple[np.ndarray, np.ndarray, Any]] = {}

    def read(self, within: np.ndarray | None, values: bool = False) -> Postings:
        """The postings of the documents ``within`` (increasing ids; None: all), with their
        raw values when ``values`` (then every block read is decoded whole)."""
        nblocks = len(self._maxids)
        if within is None:
            blocks: Any = range(nblocks)
        else:
            at = np.unique(np.searchsorted(self._maxids, within))
            blocks = at[at < nblocks].tolist()
        ids_parts: list[np.ndarray] = [_EMPTY_IDS]
        w_parts: list[np.ndarray] = [_EMPTY_SCORES]
        vals: list[Any] = []
        for j in blocks:
            got = self._decoded.get(j)
            if got is None or (values and got[2] is None):
                got = self._decoded[j] = self._decode(j, values)
            ids_parts.append(got[0])
            w_parts.append(got[1])
            if values:
                if len(got[2]) != len(got[0]):  # Whoosh keeps only non-empty values
                    raise Unsupported("postings without their values")
                vals.extend(got[2])
        ids = np.concatenate(ids_parts)
        w = np.concatenate(w_parts)
        if within is not None and len(ids):
            keep = np.isin(ids, within, assume_unique=True)
            ids, w = ids[keep], w[keep]
            if values:
                vals = [v for v, k in zip(vals, keep.tolist()) if k]
        return Postings(ids, w, vals if values else None)

    def _decode(self, j: int, values: bool) -> tuple[np.ndarray, np.ndarray, Any]:
        """Block ``j``'s ids, weights and (when ``values``, else None) values.  Without values
        only the start of the block is inflated when it reads as :func:`_ids_weights` reads."""
        start, end, comp = self._data[j]
        data = self._buf[start:end]
        if not values:
            count = self._counts[j]
            head = data
            if comp:
                # zlib stops at max_length; ISA-L's decompressobj inflates the whole block
                head = zlib.decompressobj().decompress(data, _head_bytes(count))
            fast = _ids_weights(head, count)
            if fast is not None:
                return fast[0], fast[1], None
        ids, ws, vs = pickle.loads(decompress(data) if comp else data)
        count = len(ids)
        if ws is None:
            ws = [1.0] * count
        elif isinstance(ws, float):
            ws = [ws] * count
        return (np.fromiter(accumulate(ids), dtype=np.int64, count=count),
                np.array(ws, dtype=np.float64), vs)


def _head_bytes(count: int) -> int:
    """The most bytes the ids and weights of a block of ``count`` postings take at the start of
    its protocol-4 pickle when :func:`_ids_weights` can read them: the protocol and frame
    opcodes (11), the ids tuple (a mark, a first id of up to 5 bytes, 2 bytes per other delta,
    its end and memo: 3), the weights tuple (a mark, 9 bytes per weight, its end and memo)."""
    return 11 + 1 + 5 + 2 * (count - 1) + 3 + 1 + 9 * count + 3


_K, _G = 0x4B, 0x47  # pickle's BININT1 (an int below 256 in one byte) and BINFLOAT


def _ids_weights(head: bytes, count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The document ids and weights of a block from the start of its data, read as arrays, or
    None when it is not laid out as the common case: a protocol-4 pickle (as
    :data:`indexerd.index.whoosh.postingwriter.BLOCK_FORMAT` writes) of a tuple whose first item,
    the id deltas, holds at least 4 ids, every delta after the first below 256 (one ``K``
    opcode each), and whose weights are None, one float, or a tuple of ``count`` floats.  The
    values after them (the positions) are never inflated."""
    if count < 4 or head[:2] != b"\x80\x04":
        return None
    n = len(head)
    p = 11 if n > 2 and head[2] == 0x95 else 2  # FRAME and its 8-byte length
    if p + 7 > n or head[p] != 0x28:  # MARK
        return None
    op = head[p + 1]
    if op == _K:
        first, p = head[p + 2], p + 3
    elif op == 0x4D:  # BININT2
        first, p = head[p + 2] | head[p + 3] << 8, p + 4
    elif op == 0x4A:  # BININT
        first, p = int.from_bytes(head[p + 2:p + 6], "little", signed=True), p + 6
    else:
        return None
    end = p + 2 * (count - 1)
    if end + 2 > n or head[end] != 0x74:  # TUPLE
        return None
    rest = np.frombuffer(head, dtype=np.uint8, count=2 * (count - 1), offset=p)
    if not (rest[0::2] == _K).all():
        return None
    ids = np.empty(count, dtype=np.int64)
    ids[0] = first
    ids[1:] = rest[1::2]
    np.cumsum(ids, out=ids)
    p = end + 1
    if head[p] == 0x94:  # MEMOIZE
        p += 1
    if p >= n:
        return None
    op = head[p]
    if op == 0x4E:  # None: every weight 1.0
        return ids, np.ones(count, dtype=np.float64)
    if op == _G:
        if p + 9 > n:
            return None
        return ids, np.full(count, struct.unpack_from(">d", head, p + 1)[0], dtype=np.float64)
    if op != 0x28 or p + 2 + 9 * count > n or head[p + 1 + 9 * count] != 0x74:
        return None
    cells = np.frombuffer(head, dtype=np.uint8, count=9 * count, offset=p + 1).reshape(count, 9)
    if not (cells[:, 0] == _G).all():
        return None
    return ids, cells[:, 1:].copy().view(">f8").ravel().astype(np.float64)


def _sorted_intersection(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The values of both increasing arrays ``a`` and ``b`` (no repeats), increasing."""
    if not len(a) or not len(b):
        return _EMPTY_IDS
    at = np.searchsorted(b, a)
    at[at == len(b)] = 0
    return a[b[at] == a]


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
    ids = np.union1d(a.ids, b.ids)
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
