"""Whoosh's posting lists read as arrays: a term's block headers at once, a block's document
ids and weights from the start of its data (the positions after them not inflated), the
positions of a phrase's candidates from their joined bytes; and the phrase test on them.

The layout read is Whoosh 2.7.5's (``whoosh/codec/whoosh3.py``, ``W3LeafMatcher._goto`` and
``_read_data``) with the block data :mod:`indexerd.index.whoosh.postingwriter` writes (a
protocol-4 pickle of ``(id deltas from 0, weights, values)``, zlib-compressed) and the
``Positions`` values Whoosh writes (a count, then a protocol-2 pickle of the deltas).  Anything
laid out otherwise is read by ``pickle.loads`` as Whoosh reads it; what cannot be read at all
raises :class:`Unsupported`.  Used by :mod:`indexerd.index.whoosh.bulkscore`.
"""

from __future__ import annotations

import io
import pickle
import struct
import zlib
from itertools import accumulate
from typing import Any, NamedTuple

import numpy as np
from isal.isal_zlib import decompress  # zlib's inflate, 2-2.5x as fast (ISA-L)

__all__ = ["EMPTY_IDS", "EMPTY_SCORES", "Postings", "TermBlocks", "Unsupported", "phrase_places"]

_INT = struct.Struct("!i")  # whoosh.system.pack_int: a block's length, negative for the last
_INT_SIZE = 4
#: a document's place among the phrase's candidates, shifted above any position in it
_DOC_SHIFT = 1 << 32
EMPTY_IDS = np.zeros(0, dtype=np.int64)
EMPTY_SCORES = np.zeros(0, dtype=np.float64)


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct ``values`` (a 1-d integer array), increasing: ``np.unique(values)``.

    A sort (timsort: a concatenation of increasing runs, as a union's parts are, is merged in
    ``n log runs``) and one comparison with the neighbour; ``np.unique`` of numpy 2.x hashes
    every value first and was 15-30x slower on posting lists of 500-40,000 documents (bench/RESULTS.md)."""
    out = np.sort(values, kind="stable")
    if len(out) < 2:
        return out
    keep = np.empty(len(out), dtype=bool)
    keep[0] = True
    np.not_equal(out[1:], out[:-1], out=keep[1:])
    return out[keep]


class Unsupported(Exception):
    """The query's matcher tree holds a matcher that cannot be evaluated here (the caller runs
    Whoosh's own collector instead); not an error of the query."""


class Postings(NamedTuple):
    """One term's postings in one segment: ``ids`` (int64, increasing), ``weights`` (float64,
    Whoosh's float32 weights widened) and ``values`` (the raw posting values, one ``bytes`` per
    posting, or None when not kept)."""

    ids: np.ndarray
    weights: np.ndarray
    values: list | None


def phrase_places(cand: np.ndarray, words: list[Postings]) -> np.ndarray:
    """The places in ``cand`` (increasing document ids, each holding every word) of the
    documents where some start ``s`` has word ``k`` at position ``s + k`` for every ``k``;
    ``words`` are the phrase's words' postings of ``cand``, with their values."""
    place = np.arange(len(cand), dtype=np.int64)
    starts: np.ndarray | None = None
    for k, p in enumerate(words):
        at = np.searchsorted(p.ids, cand).tolist()
        vals = p.values or []
        lens, flat = _position_deltas_of([vals[i] for i in at])
        pos = np.cumsum(flat)
        ends = np.cumsum(lens)
        base = np.zeros(len(lens), dtype=np.int64)
        base[1:] = pos[ends[:-1] - 1]  # each document's positions summed from its own start
        pos -= np.repeat(base, lens)
        keys = np.repeat(place, lens) * _DOC_SHIFT + (pos - k + len(words))
        starts = keys if starts is None else _sorted_intersection(starts, keys)
        if not len(starts):
            return EMPTY_IDS
    return EMPTY_IDS if starts is None else sorted_unique(starts // _DOC_SHIFT)


def _position_deltas_of(values: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """How many positions each ``Positions`` posting value holds, and all their deltas in
    order (int64 arrays).  A value laid out as the common case -- the count, then protocol 2's
    pickle of a list of at most 1,000 deltas below 256, one ``K`` opcode each (13 bytes for one
    position, ``2n + 12`` for ``n``) -- is read from the joined bytes as arrays; any other by
    :func:`_position_deltas`."""
    m = len(values)
    if not m:
        return EMPTY_IDS, EMPTY_IDS
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


#: bytes read at a block's start for its length and header (a header is ~30 bytes; a longer
#: one is read again whole)
_HEADER_READ = 96
#: bytes of the postings file read ahead at once: the headers of many small blocks (Whoosh's own
#: of 128 postings, ~1-2 KB each) or one big block's header and ids and weights in one read
_WINDOW = 16384
#: compressed bytes of a block read first for its ids and weights, per posting (they inflate
#: to ~11 bytes a posting and compress to 2-4; each next read is twice as long)
_HEAD_BYTES_PER_POSTING = 4


class TermBlocks:
    """One term's posting blocks in one segment (the ``W3LeafMatcher`` ``m``'s, read from its
    first block wherever ``m`` stands): the block headers read first, a block's data read and
    decoded when a document it may hold is asked for, and kept.  Without the values only the
    start of a block's data is read (its ids and weights: the positions after them are most of
    a common word's bytes, 5.7 MB of the 6 MB a query of the most common word of a 50,000-file
    index read before).

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
        self._file = m._postfile
        self._window, self._window_at = b"", 0
        load, unpack = pickle.load, _INT.unpack_from
        maxids: list[int] = []
        self._data: list[tuple[int, int, int]] = []  # (start, end, compression) of each block
        self._counts: list[int] = []
        counts = 0
        pos, n = m._baseoffset, m._startoffset + length
        self._end = n
        while pos < n:
            got = self._read(pos, min(_HEADER_READ, n - pos))
            (blen,) = unpack(got, 0)
            nxt = pos + _INT_SIZE + abs(blen)
            try:
                bio = io.BytesIO(got)
                bio.seek(_INT_SIZE)
                count, maxid, _maxw, comp, _mnlen, _mxlen = load(bio)
            except (EOFError, pickle.UnpicklingError):  # a header longer than the first read
                bio = io.BytesIO(self._read(pos, nxt - pos))
                bio.seek(_INT_SIZE)
                count, maxid, _maxw, comp, _mnlen, _mxlen = load(bio)
            maxids.append(maxid)
            self._data.append((pos + bio.tell(), nxt, comp))
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
            at = sorted_unique(np.searchsorted(self._maxids, within))
            blocks = at[at < nblocks].tolist()
        ids_parts: list[np.ndarray] = [EMPTY_IDS]
        w_parts: list[np.ndarray] = [EMPTY_SCORES]
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

    def _read(self, pos: int, n: int) -> bytes:
        """``n`` bytes of the postings file from ``pos`` (within this list), through a window of
        :data:`_WINDOW` bytes read ahead (the list is read forward, block by block)."""
        at = pos - self._window_at
        if 0 <= at and at + n <= len(self._window):
            return self._window[at:at + n]
        self._window = self._file.get(pos, min(max(n, _WINDOW), self._end - pos))
        self._window_at = pos
        return self._window[:n]

    def _decode(self, j: int, values: bool) -> tuple[np.ndarray, np.ndarray, Any]:
        """Block ``j``'s ids, weights and (when ``values``, else None) values.  Without values
        only the start of the block is inflated when it reads as :func:`_ids_weights` reads."""
        start, end, comp = self._data[j]
        if not values:
            count = self._counts[j]
            need = _head_bytes(count)
            if comp:
                # zlib stops at max_length; ISA-L's decompressobj inflates the whole block
                inflate, head = zlib.decompressobj(), b""
                at, step = start, max(512, _HEAD_BYTES_PER_POSTING * count)
                while len(head) < need and at < end:
                    data = self._read(at, min(step, end - at))
                    at += len(data)
                    step *= 2
                    head += inflate.decompress(data, need - len(head))
            else:
                head = self._read(start, min(need, end - start))
            fast = _ids_weights(head, count)
            if fast is not None:
                return fast[0], fast[1], None
        data = self._read(start, end - start)
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
        return EMPTY_IDS
    at = np.searchsorted(b, a)
    at[at == len(b)] = 0
    return a[b[at] == a]
