"""The index writer's posting pool, grouped by term (replaces Whoosh's ``PostingPool``).

Whoosh's writer hands every posting of every document to a pool as a tuple ``(fieldname,
tbytes, docnum, weight, vbytes)``; at commit the pool must give them back sorted by field, term
and document.  Whoosh's own pool sorts the tuples themselves and, past its memory limit, writes
and re-reads sorted runs one ``marshal`` record per posting, then merges the runs posting by
posting: about half of a first index of plain text (py-spy, 2,000 generated files: spilling runs
21%, reading and merging them 26%).

This pool groups postings by term as they arrive (documents come in increasing ``docnum``, so
each term's postings are already in order), sorts only the distinct terms, and spills and merges
runs a chunk of terms per record.  The postings it yields are exactly the sequence Whoosh's
pool yields (``tests/test_postingpool.py`` compares the segment files byte for byte), so the
index format does not change.

Interface (what ``whoosh.writing.SegmentWriter`` uses): ``add(item)``, ``iter_postings()``,
``cleanup()``, ``fieldnames``.  It imports nothing from Whoosh.
"""

from __future__ import annotations

import heapq
import marshal
import os
import struct
from collections.abc import Callable, Iterator

_POSTING_BYTES = 130
"""Estimated memory of one pending posting: three list slots, a docnum ``int``, a weight
``float`` and the value ``bytes`` (measured ~120-140 bytes with position values)."""

_TERM_BYTES = 200
"""Estimated memory of one pending distinct term: its ``bytes``, its list and the dict slot."""

_RUN_CHUNK_TERMS = 256
"""Terms per ``marshal`` record of a spilled run: a record is read whole and unmarshalled from
bytes (``marshal.load`` on a file calls its ``readinto`` per object); 256 terms hold a few
hundred KB at most while merging."""

_CHUNK_LEN = struct.Struct("!I")

_CHECK_EVERY = 4096
"""Postings added between two memory checks (keeps ``add`` to a dict lookup and an append)."""


class MergeInterrupted(Exception):
    """A merge stopped because a write is waiting (:attr:`TermPostingPool.interrupted`); the
    commit is cancelled and the index left as it was."""


class TermPostingPool:
    """Pending postings of one segment, grouped by ``(fieldname, tbytes)``.

    Args:
        tempstore: a Whoosh storage for spill files (``create_file(name).raw_file()``,
            ``open_file(name).raw_file()``, ``delete_file(name)``): the writer's temp storage.
        limit_bytes: estimated memory of pending postings above which a sorted run is written
            to ``tempstore`` (about 130 bytes per posting, 200 per distinct term).

    Not thread-safe: one writer thread owns it, as it owns the Whoosh writer.
    """

    def __init__(self, tempstore, limit_bytes: int) -> None:
        self.tempstore = tempstore
        self.limit_bytes = max(1, int(limit_bytes))
        self.fieldnames: set[str] = set()
        self._fields: dict[str, dict[bytes, list]] = {}
        self._postings = 0
        self._terms = 0
        self._until_check = _CHECK_EVERY
        self._runs: list[str] = []
        self._unordered: set[tuple[str, bytes]] = set()  # terms whose docnums did not increase
        self.runs_written = 0
        #: asked every :data:`_CHECK_EVERY` postings added and terms read back (a merge sets
        #: it): True stops the writer's work with :exc:`MergeInterrupted`
        self.interrupted: Callable[[], bool] | None = None

    # -- adding --------------------------------------------------------------------------
    def add(self, item: tuple) -> None:
        """Add one posting ``(fieldname, tbytes, docnum, weight, vbytes)``."""
        fieldname, tbytes, docnum, weight, vbytes = item
        terms = self._fields.get(fieldname)
        if terms is None:
            terms = self._fields[fieldname] = {}
            self.fieldnames.add(fieldname)
        flat = terms.get(tbytes)
        if flat is None:
            terms[tbytes] = [docnum, weight, vbytes]
            self._terms += 1
        else:
            if docnum <= flat[-3]:
                self._unordered.add((fieldname, tbytes))
            flat += (docnum, weight, vbytes)
        self._added(1)

    def add_many(self, fieldname: str, docnum: int, terms: list[bytes], weights: list[float],
                 values: list[bytes]) -> None:
        """Add one document's postings of one field: ``add((fieldname, terms[i], docnum,
        weights[i], values[i]))`` for each ``i``, in one call."""
        fieldterms = self._fields.get(fieldname)
        if fieldterms is None:
            fieldterms = self._fields[fieldname] = {}
            self.fieldnames.add(fieldname)
        get = fieldterms.get
        new = 0
        for tbytes, weight, vbytes in zip(terms, weights, values):
            flat = get(tbytes)
            if flat is None:
                fieldterms[tbytes] = [docnum, weight, vbytes]
                new += 1
            else:
                if docnum <= flat[-3]:
                    self._unordered.add((fieldname, tbytes))
                flat += (docnum, weight, vbytes)
        self._terms += new
        self._added(len(terms))

    def _added(self, postings: int) -> None:
        """Count ``postings`` just added; spill a run when the estimate passes the limit (checked
        every :data:`_CHECK_EVERY` postings)."""
        self._postings += postings
        self._until_check -= postings
        if self._until_check <= 0:
            self._until_check = _CHECK_EVERY
            self._check_interrupted()
            if self.pending_bytes() > self.limit_bytes:
                self._spill()

    def _check_interrupted(self) -> None:
        """Raises :exc:`MergeInterrupted` when :attr:`interrupted` says so."""
        if self.interrupted is not None and self.interrupted():
            raise MergeInterrupted("a write is waiting")

    def pending_bytes(self) -> int:
        """Estimated memory of the postings not yet spilled (bytes)."""
        return self._postings * _POSTING_BYTES + self._terms * _TERM_BYTES

    # -- runs ----------------------------------------------------------------------------
    def _sorted_terms(self) -> Iterator[tuple[str, bytes, list]]:
        """``(fieldname, tbytes, flat)`` in (field, term) order, each term's postings in
        (docnum, weight, vbytes) order; the pending postings are handed over and forgotten."""
        fields, self._fields = self._fields, {}
        unordered, self._unordered = self._unordered, set()
        self._postings = self._terms = 0
        for fieldname in sorted(fields):
            terms = fields.pop(fieldname)
            for tbytes in sorted(terms):
                flat = terms.pop(tbytes)
                if (fieldname, tbytes) in unordered:
                    flat = _sort_flat(flat)
                yield fieldname, tbytes, flat

    def _spill(self) -> None:
        name = f"{os.getpid()}-{id(self):x}-{len(self._runs)}.trun"
        f = self.tempstore.create_file(name).raw_file()
        try:
            chunk: list[tuple] = []
            for record in self._sorted_terms():
                chunk.append(record)
                if len(chunk) >= _RUN_CHUNK_TERMS:
                    _write_chunk(f, chunk)
                    chunk = []
            if chunk:
                _write_chunk(f, chunk)
        finally:
            f.close()
        self._runs.append(name)
        self.runs_written += 1

    def _read_run(self, name: str, order: int) -> Iterator[tuple]:
        f = self.tempstore.open_file(name).raw_file()
        try:
            while True:
                chunk = _read_chunk(f)
                if chunk is None:
                    return
                for fieldname, tbytes, flat in chunk:
                    yield fieldname, tbytes, order, flat
        finally:
            f.close()

    # -- reading back --------------------------------------------------------------------
    def iter_postings(self) -> Iterator[tuple]:
        """Every posting added, as ``(fieldname, tbytes, docnum, weight, vbytes)``, sorted as
        Whoosh's ``PostingPool.items()`` sorts them (by the whole tuple)."""
        for fieldname, tbytes, flat in self.iter_terms():
            for i in range(0, len(flat), 3):
                yield fieldname, tbytes, flat[i], flat[i + 1], flat[i + 2]

    def iter_terms(self) -> Iterator[tuple[str, bytes, list]]:
        """Every term added, as ``(fieldname, tbytes, flat)`` in (field, term) order, ``flat``
        its postings ``[docnum, weight, vbytes, ...]`` in the order :meth:`iter_postings`
        gives them (what :func:`indexerd.index.whoosh.postingwriter.write_postings` takes)."""
        n = 0
        for term in self._iter_terms():
            n += 1
            if n % _CHECK_EVERY == 0:
                self._check_interrupted()
            yield term

    def _iter_terms(self) -> Iterator[tuple[str, bytes, list]]:
        if not self._runs:
            yield from self._sorted_terms()
            return
        if self._postings:
            self._spill()
        runs, self._runs = self._runs, []
        try:
            merged = heapq.merge(*(self._read_run(name, n) for n, name in enumerate(runs)))
            key: tuple[str, bytes] | None = None
            parts: list[list] = []
            for fieldname, tbytes, _order, flat in merged:
                if (fieldname, tbytes) != key:
                    if key is not None:
                        yield (*key, _joined(parts))
                    key, parts = (fieldname, tbytes), []
                parts.append(flat)
            if key is not None:
                yield (*key, _joined(parts))
        finally:
            for name in runs:
                self._remove(name)

    def cleanup(self) -> None:
        """Remove the spill files (also after a cancelled or failed commit)."""
        runs, self._runs = self._runs, []
        for name in runs:
            self._remove(name)
        self._fields = {}
        self._unordered = set()
        self._postings = self._terms = 0

    def _remove(self, name: str) -> None:
        try:
            self.tempstore.delete_file(name)
        except OSError:
            pass


def _write_chunk(f, chunk: list[tuple]) -> None:
    """One record of a run: its length (4 bytes), then ``marshal.dumps(chunk)``."""
    data = marshal.dumps(chunk, 4)
    f.write(_CHUNK_LEN.pack(len(data)))
    f.write(data)


def _read_chunk(f) -> list[tuple] | None:
    """The next record of a run (None at its end).  Read whole, then ``marshal.loads``:
    ``marshal.load`` on a file calls its ``readinto`` for every object."""
    head = f.read(_CHUNK_LEN.size)
    if len(head) < _CHUNK_LEN.size:
        return None
    (n,) = _CHUNK_LEN.unpack(head)
    return marshal.loads(f.read(n))


def _sort_flat(flat: list) -> list:
    """A flat ``[docnum, weight, vbytes, ...]`` list sorted by posting tuple."""
    postings = sorted(zip(flat[0::3], flat[1::3], flat[2::3]))
    return [x for posting in postings for x in posting]


def _joined(parts: list[list]) -> list:
    """One term's flat postings from its runs (in run order), sorted when the runs overlap."""
    flat = parts[0]
    for more in parts[1:]:
        if more[0] <= flat[-3]:
            flat = _sort_flat(flat + more)
        else:
            flat = flat + more
    return flat
