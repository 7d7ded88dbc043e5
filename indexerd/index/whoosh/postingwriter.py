"""The segment's posting lists written a term at a time (replaces Whoosh's per-posting path).

At commit Whoosh's ``SegmentWriter`` hands every posting of the new segment, one tuple at a
time, to ``FieldWriter.add_postings``, which calls ``W3PostingsWriter.add_posting`` per posting
(type checks, a field-length column read, min/max updates) and writes a block of up to 128
postings: a pickled ``(id deltas, weights, values)`` tuple compressed with zlib, behind a pickled
block header.  That per-posting Python path was 60% of a first index of plain text (cProfile,
bench/RESULTS.md).

:func:`write_postings` takes the postings grouped by term from
:class:`~indexerd.index.whoosh.postingpool.TermPostingPool` (``(fieldname, tbytes, flat)`` with
``flat = [docnum, weight, vbytes, ...]``) and writes each block from list slices, the field
lengths read once per field into a list.  The files are Whoosh 2.7.5's format (``W3FieldWriter``
/ ``W3PostingsWriter`` / ``W3TermInfo``, ``whoosh/codec/whoosh3.py``), each block's data
encoded as :data:`BLOCK_FORMAT` says (faster and smaller than Whoosh's own, read by any Whoosh);
with :data:`WHOOSHS_BLOCKS` they are Whoosh's bytes exactly: ``tests/test_postingpool.py``
compares every segment file with stock Whoosh's, and what Whoosh reads from both formats.  It is installed
by :func:`indexerd.index.whoosh.patches.open_writer` only on that version.
"""

from __future__ import annotations

import zlib
from array import array
from collections.abc import Iterable
from pickle import dumps
from typing import NamedTuple

from whoosh.codec.whoosh3 import LENGTHS_COLUMN, WHOOSH3_HEADER_MAGIC, W3TermInfo, _lenfield
from whoosh.filedb.filetables import _lengths
from whoosh.system import pack_int, pack_ushort
from whoosh.util.numeric import byte_to_length, length_to_byte


class BlockFormat(NamedTuple):
    """How a posting block's data is encoded; every choice is read by Whoosh's reader as it is
    (``W3LeafMatcher._read_data``: ``zlib.decompress`` when the block header's compression
    level is not 0, then ``pickle.loads``, which reads any protocol).

    - ``pickle_protocol``: Whoosh pickles the ``(ids, weights, values)`` tuple with protocol 2,
      which writes each value ``bytes`` as a call of ``_codecs.encode`` on a latin-1 ``str``:
      ~10x slower to write and to read than protocol 4's plain bytes, and twice the size.
    - ``zlib_window_bits``, ``zlib_memory_level``: Whoosh's ``zlib.compress(data, 3)`` (window
      2**15, memory level 8) sets up and clears ~256 KB of zlib state per block of often ~100
      bytes (~50 us, more than the rest of the block); a 4 KB window and level 4 take ~4 us.
    - ``raw_below``: a block whose pickle is shorter (bytes) is stored uncompressed
      (compression level 0 in its header), where zlib only adds its 6 bytes; Whoosh meant to do
      this below 20 bytes and always compresses (``W3PostingsWriter._write_block``).
    - ``postings``: the most postings a block holds (``W3Codec``'s ``blocklimit``; Whoosh's is
      128).  A query reads a common word's list a block at a time, each block a file read, a
      header unpickled and an inflate: 1,024 a block read the posting lists of a 50,000-file
      index's broad queries ~30% faster (bench/RESULTS.md); the block header's count tells any
      Whoosh reader how many a block holds.
    """

    pickle_protocol: int
    zlib_window_bits: int
    zlib_memory_level: int
    raw_below: int
    postings: int


#: The blocks this writer writes (measured in bench/RESULTS.md).
BLOCK_FORMAT = BlockFormat(pickle_protocol=4, zlib_window_bits=12, zlib_memory_level=4, raw_below=64,
                           postings=1024)
#: Whoosh 2.7.5's own blocks, byte for byte (tests/test_postingpool.py compares the files).
WHOOSHS_BLOCKS = BlockFormat(pickle_protocol=2, zlib_window_bits=15, zlib_memory_level=8, raw_below=0,
                             postings=128)


def codec():
    """The ``W3Codec`` a writer of this module's blocks is opened with: Whoosh 2.7.5's own, its
    blocks holding :data:`BLOCK_FORMAT`'s ``postings`` (read when called: tests swap the
    format)."""
    from whoosh.codec.whoosh3 import W3Codec

    return W3Codec(blocklimit=BLOCK_FORMAT.postings)


def install_on(writer) -> bool:
    """Make ``writer`` (a ``SegmentWriter`` whose ``pool`` is a ``TermPostingPool``) write its
    segment's postings with :func:`write_postings`; True when installed.  Not installed (Whoosh's
    own path stays) for a codec other than ``W3Codec`` with inlining off (``inlinelimit`` 1, the
    default), which is all this writer reproduces."""
    from whoosh.codec.whoosh3 import W3Codec

    codec = writer.codec
    if type(codec) is not W3Codec or codec._inlinelimit != 1 or not hasattr(writer.pool, "iter_terms"):
        return False

    def _flush_segment():  # SegmentWriter._flush_segment with the postings written per term
        writer.perdocwriter.close()
        pdr = writer.per_document_reader() if codec.length_stats else None
        try:
            write_postings(writer.fieldwriter, writer.schema, pdr, writer.pool.iter_terms(),
                           writer.docnum)
            writer.fieldwriter.close()
        finally:
            if pdr:
                pdr.close()

    writer._flush_segment = _flush_segment
    return True


def field_lengths(pdr, fieldname: str, doccount: int) -> list[int] | None:
    """The length of ``fieldname`` in each document of the segment (0 where Whoosh's
    ``doc_field_length`` gives 0 or None), or None when the field keeps no lengths."""
    if pdr is None:
        return None
    reader = pdr._cached_reader(_lenfield(fieldname), LENGTHS_COLUMN)
    if reader is None:
        return None
    out = [0] * doccount
    for d in range(doccount):
        b = reader[d]
        if b:
            out[d] = byte_to_length(b)
    return out


def write_postings(fieldwriter, schema, pdr, terms: Iterable[tuple[str, bytes, list]], doccount: int) -> None:
    """Write the posting lists of ``terms`` (``(fieldname, tbytes, flat)`` sorted by field and
    term, each ``flat`` sorted by document) through ``fieldwriter`` (a ``W3FieldWriter``).

    ``pdr`` is the new segment's per-document reader (field lengths), ``doccount`` its document
    count.  Postings with document number -1 (Whoosh's spelling entries) are skipped as Whoosh
    skips them.  Raises what writing the files raises (``OSError``).
    """
    codec = fieldwriter._codec
    blocklimit, comp = codec._blocklimit, codec._compression
    postfile = fieldwriter._postfile.raw_file()
    write = postfile.write
    offset = postfile.tell()  # kept here: a buffered file's tell() is a system call
    compressobj, deflated = zlib.compressobj, zlib.DEFLATED
    protocol, wbits, memlevel, raw_below, _postings = BLOCK_FORMAT
    add_term = _term_adder(fieldwriter._tindex)
    fieldname_now = None
    fieldkey = b""
    lens: list[int] | None = None
    fixedsize = None
    for fieldname, tbytes, flat in terms:
        if flat and flat[0] == -1:
            flat = _without_spelling(flat)
            if not flat:
                continue
        if fieldname != fieldname_now:
            if fieldname_now is not None:
                fieldwriter.finish_field()
            fieldobj = schema[fieldname]
            fieldwriter.start_field(fieldname, fieldobj)
            fieldname_now = fieldname
            fieldkey = pack_ushort(fieldwriter._fieldid)
            lens = field_lengths(pdr, fieldname, doccount)
            fixedsize = fieldobj.format.fixed_value_size()
        ti = W3TermInfo()
        startoffset = offset
        n = len(flat) // 3
        write(WHOOSH3_HEADER_MAGIC)
        offset += len(WHOOSH3_HEADER_MAGIC)
        tweight = 0.0
        tminlen: int | None = None
        tmaxlen = 0
        tmaxweight = 0
        for start in range(0, n, blocklimit):
            end = min(n, start + blocklimit)
            ids = flat[3 * start:3 * end:3]
            weights = flat[3 * start + 1:3 * end:3]
            vals = flat[3 * start + 2:3 * end:3]
            count = end - start
            w32 = array("f", weights)
            maxweight = max(weights)
            if not maxweight > 0:  # Whoosh's block maximum starts at the int 0
                maxweight = 0
            if lens is None:
                minlen, maxlen = None, 0
            else:
                present = [x for x in map(lens.__getitem__, ids) if x]
                minlen, maxlen = (min(present), max(present)) if present else (None, 0)
            # the term's statistics (W3TermInfo.add_block)
            tweight += sum(w32)
            if minlen is not None:
                tminlen = minlen if tminlen is None else min(tminlen, minlen)
            if maxlen > tmaxlen:
                tmaxlen = maxlen
            if maxweight > tmaxweight:
                tmaxweight = maxweight
            # the block (W3PostingsWriter._write_block)
            deltas = [ids[0]]
            deltas += [b - a for a, b in zip(ids, ids[1:])]
            if w32.count(1.0) == count:
                wmini = None
            elif w32.count(w32[0]) == count:
                wmini = w32[0]
            else:
                wmini = tuple(w32)
            if not all(vals):  # Whoosh keeps only non-empty values
                vals = [v for v in vals if v]
            vmini: tuple | bytes | None
            if fixedsize is None or fixedsize < 0:
                vmini = tuple(vals)
            elif fixedsize == 0:
                vmini = None
            else:
                vmini = b"".join(vals)
            databytes = dumps((tuple(deltas), wmini, vmini), protocol)
            blockcomp = comp if len(databytes) >= raw_below else 0
            if blockcomp:
                z = compressobj(blockcomp, deflated, wbits, memlevel)
                databytes = z.compress(databytes) + z.flush()
            infobytes = dumps((count, ids[-1], maxweight, blockcomp, length_to_byte(minlen),
                               length_to_byte(maxlen)), 2)
            blocklength = len(infobytes) + len(databytes)
            write(pack_int(-blocklength if end == n else blocklength))
            write(infobytes)
            write(databytes)
            offset += 4 + blocklength
        ti._weight = tweight
        ti._df = n
        ti._minlength = tminlen
        ti._maxlength = tmaxlen
        ti._maxweight = tmaxweight
        ti._minid = flat[0]
        ti._maxid = flat[-3]
        ti.set_extent(startoffset, offset - startoffset)
        add_term(fieldkey + tbytes, ti.to_bytes())
    if fieldname_now is not None:
        fieldwriter.finish_field()


def _term_adder(tindex):
    """``add(key, value)`` for the segment's term index ``tindex`` (an ``OrderedHashWriter``
    with :mod:`~indexerd.index.whoosh.patches`' array columns): ``OrderedHashWriter.add``, the
    file position counted here instead of asked twice per term; Whoosh's ``add`` otherwise."""
    if not isinstance(getattr(tindex, "_positions", None), list):
        return tindex.add
    dbfile = tindex.dbfile.raw_file()
    write, hashfn, lengths = dbfile.write, tindex.hashfn, _lengths
    buckets, positions, index = tindex.buckets, tindex._positions, tindex.index
    pos = dbfile.tell()

    def add(key: bytes, value: bytes) -> None:
        nonlocal pos
        if key <= tindex.lastkey:
            raise ValueError(f"Keys must increase: {tindex.lastkey!r}..{key!r}")
        index.append(pos)
        write(lengths.pack(len(key), len(value)))
        write(key)
        write(value)
        h = hashfn(key)
        buckets[h & 255].append(h)
        positions[h & 255].append(pos)
        pos += lengths.size + len(key) + len(value)
        tindex.lastkey = key

    return add


def _without_spelling(flat: list) -> list:
    """``flat`` without its leading document-number -1 postings (sorted: they come first)."""
    i = 0
    while i < len(flat) and flat[i] == -1:
        i += 3
    return flat[i:]
