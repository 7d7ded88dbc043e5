"""Every change indexerd makes to Whoosh's internals, installed by one :func:`install`.

The patches were written against ``whoosh-reloaded`` 2.7.5 (:data:`WRITTEN_FOR`) and rely on
private names of that release; each gives the same results as stock Whoosh, faster or in less
memory:

- **HashWriter compaction** (process-wide): ``whoosh.filedb.filetables.HashWriter`` (the term
  index of every segment a commit or merge writes) keeps its pending entries in ``array``
  columns instead of a list of ``(hash, position)`` tuples: 12 bytes per term instead of ~130.
  The file written is byte-for-byte the same (same hash, slots and order).
- **Posting pool** (per writer): ``SegmentWriter.pool`` is replaced before the first document by
  :class:`~indexerd.index.whoosh.postingpool.TermPostingPool`, which yields the same postings.
- **Field format** (per writer and new schema): text fields analysed by
  :class:`~indexerd.index.whoosh.analysis.FusedStemmingAnalyzer` get the
  :class:`~indexerd.index.whoosh.analysis.FusedPositions` format (same posting bytes).
- **Posting lists written per term** (per writer): the segment's postings go from the pool to
  the postings file a term at a time (:mod:`~indexerd.index.whoosh.postingwriter`), not through
  ``FieldWriter.add_postings`` one posting at a time (same bytes).
- **Documents with their postings** (per writer): ``add_document`` takes a field given as
  :class:`~indexerd.index.whoosh.postingvalues.PostingValues` (the session's title and content)
  in one call to the pool per field instead of a generator step, a tuple and a call per posting;
  other fields as Whoosh does.
- **Unread array unions** (process-wide): ``whoosh.matching.ArrayUnionMatcher`` (what ``Or``
  builds on segments of at most 5,000 documents) becomes
  :class:`~indexerd.index.whoosh.unread.UnreadArrayUnion`, which skips reading ahead only
  while the bulk scorer builds its matchers (the same matcher otherwise).  The bulk scorer
  itself (:mod:`~indexerd.index.whoosh.bulkscore`: Whoosh's posting blocks and matcher classes)
  is used only with the patches.
- **Term infos remembered** (process-wide): ``W3TermsReader.term_info`` and ``__contains__``
  answer from a dict per segment reader (:data:`TERM_INFOS_KEPT` terms at most), as Lucene 3's
  ``TermInfosReader`` kept its last 1,024: building one term's matcher looked the term up three
  times (``in``, the postings, the scorer's block statistics), in every segment.
- **Writer lock** (per writer): the session takes ``MAIN_WRITELOCK`` itself and opens the writer
  with ``_lk=False``, so the lock is released even when Whoosh's commit or cancel fails before
  its own release (a read-only or full state dir left the lock's descriptor open for good).

With another Whoosh version, :func:`install` installs none of them and logs one warning: stock
Whoosh is slower and uses more memory, and gives the same results.  A schema pickled with
``FusedPositions`` is read either way (the class stays importable); stock writers get plain
``Positions`` in their schema copy.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)

#: The Whoosh version (``whoosh.__version__``) these patches were written against.
WRITTEN_FOR = (2, 7, 5)

_lock = threading.Lock()
_state: bool | None = None  # None: not decided yet; True: installed; False: stock Whoosh


def install() -> bool:
    """Install the process-wide patches once, if the installed Whoosh is :data:`WRITTEN_FOR`.

    Returns True when the patches are in use (then :func:`patch_writer` and :func:`patch_schema`
    apply theirs), False when stock Whoosh is used (one warning logged, the first time).
    Thread-safe; later calls return the first answer.
    """
    global _state
    with _lock:
        if _state is None:
            import whoosh

            version = tuple(getattr(whoosh, "__version__", ()))
            if version == WRITTEN_FOR:
                _compact_hash_writer()
                _unread_array_unions()
                _remembered_term_infos()
                _state = True
            else:
                log.warning("Whoosh %s is installed, indexerd's speed-ups were written for %s: using "
                            "stock Whoosh (same results, slower, more memory)",
                            ".".join(map(str, version)) or "of unknown version",
                            ".".join(map(str, WRITTEN_FOR)))
                _state = False
        return _state


def _unread_array_unions() -> None:
    """Install :class:`~indexerd.index.whoosh.unread.UnreadArrayUnion` as the
    ``ArrayUnionMatcher`` ``whoosh.query.compound`` builds (it looks the name up at each call)."""
    import whoosh.matching

    from indexerd.index.whoosh.unread import UnreadArrayUnion

    whoosh.matching.ArrayUnionMatcher = UnreadArrayUnion
    _unread_intersections()


def _unread_intersections() -> None:
    """Whoosh's ``IntersectionMatcher`` moves to its first match when built: over a child built
    unread (:class:`~indexerd.index.whoosh.unread.UnreadArrayUnion`, an and-not matcher) it
    would walk what cannot be walked (``AttributeError: '_docnum'`` for ``crème brûlée``, each
    word an ``Or`` of its fields).  Built over such a child, it stays unread too and says so
    (``unpositioned``): the bulk scorer evaluates it from its children."""
    from whoosh.matching import IntersectionMatcher

    if getattr(IntersectionMatcher._find_first, "indexerd_unread", False):
        return
    stock = IntersectionMatcher._find_first

    def _find_first(self) -> None:
        if getattr(self.a, "unpositioned", False) or getattr(self.b, "unpositioned", False):
            self.unpositioned = True
            return
        stock(self)

    _find_first.indexerd_unread = True  # type: ignore[attr-defined]
    IntersectionMatcher._find_first = _find_first


#: term infos a segment reader remembers (each ~200 bytes); past it, looked up each time
TERM_INFOS_KEPT = 4096
_NOT_LOOKED_UP = object()


def _remembered_term_infos() -> None:
    """``W3TermsReader.term_info`` and ``__contains__`` through a dict on the reader (a
    segment's terms never change; the reader goes with its searcher at the next commit).  The
    same ``W3TermInfo`` is handed to every caller: Whoosh only reads it."""
    from whoosh.codec.whoosh3 import W3TermsReader
    from whoosh.reading import TermNotFound

    if getattr(W3TermsReader.term_info, "indexerd_remembered", False):
        return
    stock = W3TermsReader.term_info

    def remembered(self, fieldname, tbytes):
        kept = self.__dict__.get("_indexerd_infos")
        if kept is None:
            kept = self._indexerd_infos = {}
        info = kept.get((fieldname, tbytes), _NOT_LOOKED_UP)
        if info is _NOT_LOOKED_UP:
            try:
                info = stock(self, fieldname, tbytes)
            except TermNotFound:
                info = None
            if len(kept) < TERM_INFOS_KEPT:
                kept[fieldname, tbytes] = info
        return info

    def term_info(self, fieldname, tbytes):
        info = remembered(self, fieldname, tbytes)
        if info is None:
            raise TermNotFound("No term %s:%r" % (fieldname, tbytes))
        return info

    def contains(self, term) -> bool:
        return remembered(self, *term) is not None

    term_info.indexerd_remembered = True  # type: ignore[attr-defined]
    W3TermsReader.term_info = term_info
    W3TermsReader.__contains__ = contains


def active() -> bool:
    """True when :func:`install` installed the patches."""
    return install()


def patch_schema(schema) -> None:
    """Give every text field analysed by ``FusedStemmingAnalyzer`` the ``FusedPositions`` format
    (patches active), or turn ``FusedPositions`` back into Whoosh's ``Positions`` (stock).  Used
    on a new index's schema and on each writer's copy (an index created before the format existed
    records it at its next commit)."""
    from whoosh.formats import Positions

    from indexerd.index.whoosh.analysis import FusedPositions, FusedStemmingAnalyzer

    on = install()
    for _name, field in schema.items():
        fmt = getattr(field, "format", None)
        if on and fmt is not None and type(fmt) is Positions and type(getattr(field, "analyzer", None)) is FusedStemmingAnalyzer:
            field.format = FusedPositions(field_boost=fmt.field_boost, **fmt.options)
        elif not on and type(fmt) is FusedPositions:
            field.format = Positions(field_boost=fmt.field_boost, **fmt.options)


def open_writer(ix, *, memory_bytes: int, timeout_seconds: float):
    """Take the write lock and open a segment writer on ``ix``; returns ``(writer, lock)``.

    Patches active: the lock is ours (``lock.release()`` must be called whatever happens; Whoosh
    releases it too at the end of a good commit or cancel) and the writer gets our posting pool,
    field format and posting blocks (:func:`indexerd.index.whoosh.postingwriter.codec`).  Stock: Whoosh takes and releases its own lock; ``lock`` is None.
    ``memory_bytes`` bounds the posting buffer before it spills to temp files.

    Raises:
        whoosh.index.LockError: the lock is held for ``timeout_seconds`` (stock path); the
            patched path returns ``(None, None)`` instead.
    """
    from whoosh.util.filelock import try_for

    limitmb = max(8, memory_bytes // (1024 * 1024))
    # compound=False: a searcher then maps segment files instead of copying a compound file into
    # memory on every open
    if not install():
        w = ix.writer(limitmb=limitmb, compound=False, timeout=timeout_seconds, delay=0.1)
        patch_schema(w.schema)
        return w, None
    from indexerd.index.whoosh import postingwriter
    from indexerd.index.whoosh.postingpool import TermPostingPool

    lock = ix.lock("WRITELOCK")
    if not try_for(lock.acquire, timeout=timeout_seconds, delay=0.1):
        return None, None
    try:
        w = ix.writer(limitmb=limitmb, compound=False, _lk=False, codec=postingwriter.codec())
        patch_schema(w.schema)
        w.pool = TermPostingPool(w._tempstorage, limit_bytes=memory_bytes)
        postingwriter.install_on(w)
        _add_documents_fast(w)
    except BaseException:
        lock.release()
        raise
    w.writelock = lock  # Whoosh releases it at the end of a good commit or cancel
    return w, lock


def _compact_hash_writer() -> None:
    """Make ``HashWriter`` keep pending entries in ``array`` columns (see the module docstring);
    the bytes written are the same (``tests/test_index.py`` compares them)."""
    from array import array

    from whoosh.filedb import filetables as ft

    original_init = ft.HashWriter.__init__
    pointer = ft._pointer

    def __init__(self, dbfile, *args, **kwargs):
        original_init(self, dbfile, *args, **kwargs)
        self.buckets = [array("I") for _ in range(256)]  # hash values (32-bit: see ft.md5_hash)
        self._positions = [array("q") for _ in range(256)]  # file positions (ft._pointer "q")

    def add(self, key, value):
        dbfile = self.dbfile
        pos = dbfile.tell()
        dbfile.write(ft._lengths.pack(len(key), len(value)))
        dbfile.write(key)
        dbfile.write(value)
        h = self.hashfn(key)
        self.buckets[h & 255].append(h)
        self._positions[h & 255].append(pos)

    def _write_hashes(self):
        dbfile = self.dbfile
        null = (0, 0)
        for hashes, positions in zip(self.buckets, self._positions):
            pos = dbfile.tell()
            numslots = 2 * len(hashes)
            self.directory.append((pos, numslots))
            hashtable = [null] * numslots
            for hashval, position in zip(hashes, positions):
                slot = (hashval >> 8) % numslots
                while hashtable[slot] != null:
                    slot = (slot + 1) % numslots
                hashtable[slot] = (hashval, position)
            dbfile.write(b"".join(pointer.pack(h, p) for h, p in hashtable))

    ft.HashWriter.__init__ = __init__
    ft.HashWriter.add = add
    ft.HashWriter._write_hashes = _write_hashes


def _add_documents_fast(writer) -> None:
    """Give ``writer`` (a ``SegmentWriter`` with a ``TermPostingPool``) the ``add_document`` of
    the module docstring: Whoosh 2.7.5's ``SegmentWriter.add_document`` (``whoosh/writing.py``)
    with one branch added for :class:`~indexerd.index.whoosh.postingvalues.PostingValues` in a
    field of the ``TokenPositions`` format; same postings, lengths and stored values."""
    from whoosh.util.text import utf8encode

    from indexerd.index.whoosh.analysis import TokenPositions
    from indexerd.index.whoosh.postingvalues import PostingValues

    pool = writer.pool
    if not hasattr(pool, "add_many"):
        return

    def add_document(**fields):
        self = writer
        self._check_state()
        perdocwriter = self.perdocwriter
        schema = self.schema
        docnum = self.docnum
        add_post = pool.add

        docboost = self._doc_boost(fields)
        fieldnames = sorted([name for name in fields.keys() if not name.startswith("_")])
        self._check_fields(schema, fieldnames)

        perdocwriter.start_doc(docnum)
        try:
            for fieldname in fieldnames:
                value = fields.get(fieldname)
                if value is None:
                    continue
                field = schema[fieldname]

                length = 0
                fast = (type(value) is PostingValues and field.indexed and type(field.format) is TokenPositions
                        and not field.separate_spelling() and not field.vector)
                if fast:
                    fieldboost = self._field_boost(fields, fieldname, docboost)
                    terms, freqs, values = value
                    fb = field.format.field_boost
                    # Whoosh: weight = float(freq) * field_boost (word_values), then *= fieldboost
                    pool.add_many(fieldname, docnum, terms, [float(f) * fb * fieldboost for f in freqs], values)
                    if field.scorable:
                        length = sum(freqs)
                elif field.indexed:
                    fieldboost = self._field_boost(fields, fieldname, docboost)
                    items = field.index(value)
                    scorable = field.scorable
                    for tbytes, freq, weight, vbytes in items:
                        weight *= fieldboost
                        if scorable:
                            length += freq
                        add_post((fieldname, tbytes, docnum, weight, vbytes))

                if not fast and field.separate_spelling():
                    spellfield = field.spelling_fieldname(fieldname)
                    for word in field.spellable_words(value):
                        word = utf8encode(word)[0]
                        add_post((spellfield, word, 0, 1, vbytes))

                vformat = field.vector
                if vformat:
                    analyzer = field.analyzer
                    vitems = vformat.word_values(value, analyzer, mode="index")
                    vitems = sorted((text, weight, vbytes) for text, _, weight, vbytes in vitems)
                    perdocwriter.add_vector_items(fieldname, field, vitems)

                customval = fields.get("_stored_%s" % fieldname, value)
                sv = customval if field.stored else None
                perdocwriter.add_field(fieldname, field, sv, length)

                column = field.column_type
                if column and customval is not None:
                    cv = field.to_column_value(customval)
                    perdocwriter.add_column_value(fieldname, column, cv)
        except Exception as ex:
            perdocwriter.cancel_doc()
            raise ex

        perdocwriter.finish_doc()
        self._added = True
        self.docnum += 1

    writer.add_document = add_document
