"""The search-engine interface and its Whoosh implementation.  Nothing else imports Whoosh.

Outside contract relied on (Whoosh 2.7, the ``whoosh-reloaded`` fork):

- one writer at a time per index, enforced by ``fcntl.flock`` on ``MAIN_WRITELOCK``; the kernel
  drops the lock when the process dies, so there is never a stale lock (do not delete the file);
- a commit writes a new TOC and renames it into place, so a kill mid-commit leaves the previous
  generation readable; readers need no lock and see a snapshot;
- but a reader *finds* the TOC by listing the directory while the writer renames the new TOC in
  and deletes the old one, and POSIX leaves it unspecified whether ``readdir`` returns an entry
  added or removed meanwhile: a listing can see no TOC at all (``EmptyIndexError``, seen in CI
  from ``ctl status`` during a commit).  Readers retry (:meth:`WhooshIndex._retry_vanished`);
- ``create_in`` deletes every ``_MAIN_*`` file and writes an empty TOC, so it is only called on a
  directory that holds no TOC or segment file (a missed TOC must never become an empty index);
- ``update_document`` on the ``unique`` key field replaces the old copy (re-indexing is idempotent);
- the writer's posting pool is ours (:class:`~indexerd.index.whoosh.postingpool.TermPostingPool`, set on
  ``SegmentWriter.pool`` before the first document): grouped by term, the same postings out;
- Whoosh's ``filetables.HashWriter`` (each segment's term index) is patched to keep its pending
  entries in arrays (:func:`_compact_hash_writer`): same bytes on disk, a tenth of the memory;
- ``DATETIME`` drops tzinfo, so every date is handed to Whoosh as naive UTC and read back as UTC.

Stored text is kept zlib-compressed in a ``STORED`` field (``text_z``) for snippets: it costs a
fraction of Recoll's stored text and keeps highlighting exact.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import re
import time
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Iterable
from typing import Protocol

from indexerd.core.errors import IndexUnavailable, QueryError, RetryLater
from indexerd.index.whoosh.mergepolicy import drop_empty, reclaim_and_merge_small
from indexerd.index.whoosh.postingpool import TermPostingPool

log = logging.getLogger(__name__)
#: the temp name Whoosh writes a TOC to before renaming it to ``_MAIN_<generation>.toc``
_TEMP_TOC = re.compile(r"_MAIN_\d+\.toc\.[0-9.e+-]+")
UTC = timezone.utc

#: Stored text used for snippets is capped (bytes of UTF-8) to bound index size and highlight time.
SNIPPET_TEXT_CAP_BYTES = 256 * 1024


@dataclass(frozen=True)
class IndexDoc:
    """One document as the index sees it.

    ``key`` is the unique document key (``file:`` URI, canonical URL, ``sql:<source>/<id>``);
    ``url`` is what a person opens (equal to the key for web and SQL); ``path`` is the file
    system path for files (may hold surrogate escapes), else None; ``last_modified`` is aware UTC.
    ``content`` is what is searched; ``snippet_text`` the part snippets are taken from (a page's
    main content, without navigation), None for all of ``content``.
    """

    key: str
    source: str
    url: str
    path: str | None
    title: str
    content: str
    last_modified: datetime
    date_source: str
    media_type: str
    size: int
    snippet_text: str | None = None


@dataclass(frozen=True)
class Hit:
    """One search result.  ``score`` is the engine's relevance (higher is better)."""

    rank: int
    key: str
    url: str
    path: str | None
    source: str
    title: str
    last_modified: datetime | None
    date_source: str | None
    media_type: str | None
    score: float
    snippet: str


class IndexSession(Protocol):
    """A batch of writes; nothing is visible to searchers until :meth:`commit`."""

    def update(self, doc: IndexDoc) -> None: ...
    def delete(self, key: str) -> None: ...
    def delete_many(self, keys: Iterable[str]) -> int: ...
    def commit(self, *, merge: bool) -> None: ...
    def cancel(self) -> None: ...


def _naive_utc(dt: datetime | None) -> datetime | None:
    if dt is None:
        return None
    return dt.astimezone(UTC).replace(tzinfo=None)


def _aware(dt: datetime | None) -> datetime | None:
    if dt is None:
        return None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def _schema():
    from whoosh.fields import DATETIME, ID, NUMERIC, STORED, TEXT, Schema

    from indexerd.index.whoosh.analysis import FusedStemmingAnalyzer

    analyzer = FusedStemmingAnalyzer()
    schema = Schema(
        key=ID(unique=True, stored=True, sortable=True),
        source=ID(stored=True, sortable=True),
        path=STORED,
        title=TEXT(stored=True, field_boost=3.0, analyzer=analyzer),
        content=TEXT(analyzer=analyzer),
        text_z=STORED,
        last_modified=DATETIME(stored=True, sortable=True),
        date_source=ID(stored=True),
        media_type=ID(stored=True),
        size=NUMERIC(stored=True, bits=64),
    )
    _use_fused_positions(schema)
    return schema


def _use_fused_positions(schema) -> None:
    """Give every text field analysed by :class:`~indexerd.index.whoosh.analysis.FusedStemmingAnalyzer`
    the :class:`~indexerd.index.whoosh.analysis.FusedPositions` format (same postings bytes, a fraction of
    the time and memory).  Also applied to the schema of an index created before it existed,
    in the writer's copy, so its next commit records it."""
    from whoosh.formats import Positions

    from indexerd.index.whoosh.analysis import FusedPositions, FusedStemmingAnalyzer

    for _name, field in schema.items():
        fmt = getattr(field, "format", None)
        if type(fmt) is Positions and type(getattr(field, "analyzer", None)) is FusedStemmingAnalyzer:
            field.format = FusedPositions(field_boost=fmt.field_boost, **fmt.options)


class _WhooshSession:
    """One open Whoosh writer and the write lock we took for it.

    Whoosh releases its write lock at the very end of ``commit``/``cancel``, after removing its
    temp files; when that fails (a read-only or full state dir) the lock's file descriptor stays
    open, and this process could never write again.  So the lock is ours, and released whatever
    happens.
    """

    def __init__(self, writer, lock) -> None:
        self._w = writer
        self._lock = lock

    def _release(self) -> None:
        if getattr(self._lock, "fd", None) is not None:
            try:
                self._lock.release()
            except OSError:
                pass

    def update(self, doc: IndexDoc) -> None:
        shown = doc.content if doc.snippet_text is None else doc.snippet_text
        text_bytes = shown.encode("utf-8", "replace")[:SNIPPET_TEXT_CAP_BYTES]
        self._w.update_document(
            key=doc.key, source=doc.source, path=doc.path, title=doc.title, content=doc.content,
            text_z=zlib.compress(text_bytes, 6), last_modified=_naive_utc(doc.last_modified),
            date_source=doc.date_source, media_type=doc.media_type, size=doc.size)

    def delete(self, key: str) -> None:
        self.delete_many((key,))

    def delete_many(self, keys: Iterable[str]) -> int:
        """Delete the committed documents of ``keys`` through one searcher; returns how many.

        Whoosh's ``delete_by_term`` opens a searcher over every segment for each call (a cost
        per key that grows with the segments); one searcher serves the whole batch here.
        Like ``delete_by_term``, a document added in this session is not reached."""
        from whoosh.query import Term

        keys = keys if isinstance(keys, (set, frozenset)) else set(keys)
        if not keys:
            return 0
        with self._w.searcher() as s:
            reader = s.reader()
            if reader.doc_count_all() == 0:  # nothing committed yet (an empty reader has no columns)
                return 0
            # one term lookup per key and segment, or one pass over the key column (sortable):
            # the column wins once the keys outnumber about a fifth of the documents per segment
            if len(keys) * len(reader.leaf_readers()) * 5 > reader.doc_count_all():
                docnums = [d for d, k in enumerate(reader.column_reader("key")) if k in keys]
            else:
                docnums = [d for k in keys for d in s.docs_for_query(Term("key", k), for_deletion=True)]
            for d in docnums:
                self._w.delete_document(d)
        return len(docnums)

    def commit(self, *, merge: bool) -> None:
        try:
            # both drop segments with no live document; only a merge rewrites (see mergepolicy)
            self._w.commit(mergetype=reclaim_and_merge_small if merge else drop_empty)
        except BaseException:
            self._remove_temp_tocs()  # still under our lock: no other writer can be making one
            raise
        finally:
            self._release()

    def _remove_temp_tocs(self) -> None:
        """Remove the ``_MAIN_<gen>.toc.<time>`` file a failed commit leaves (Whoosh writes the
        TOC to that name, then renames it; a full or read-only disk stops it in between)."""
        folder = getattr(getattr(self._w, "storage", None), "folder", None)
        if folder is None:
            return
        try:
            names = os.listdir(folder)
        except OSError:
            return
        for name in names:
            if _TEMP_TOC.fullmatch(name):
                try:
                    os.unlink(os.path.join(folder, name))
                except OSError as e:
                    log.warning("cannot remove %s: %s", os.path.join(folder, name), e.strerror)

    def cancel(self) -> None:
        try:
            self._w.cancel()
        finally:
            self._release()


def on_disk_generation(state_dir: str | Path) -> int | None:
    """The newest committed generation in ``<state_dir>/index`` from file names alone (no Whoosh
    import), or None when there is no index."""
    best = None
    try:
        for name in os.listdir(Path(state_dir) / WhooshIndex.DIRNAME):
            if name.startswith("_MAIN_") and name.endswith(".toc"):
                try:
                    gen = int(name[6:-4])
                except ValueError:
                    continue
                best = gen if best is None or gen > best else best
    except OSError:
        return None
    return best


_HASH_WRITER_PATCHED = False


def _compact_hash_writer() -> None:
    """Make Whoosh's on-disk hash writer (the term index of every segment written by a commit or
    a merge) keep its pending entries in ``array`` columns instead of a list of ``(hash,
    position)`` tuples: 12 bytes per term instead of ~130.  Measured: the 5,000-document commit of
    docs-fs (659,102 distinct terms) grew the process by ~70 MB; the daemon's idle merge of a big
    index paid the same.  The file written is byte-for-byte the same (same hash, same slots, same
    order: see ``tests/test_index.py``).  Applied once, process-wide, before the first writer."""
    global _HASH_WRITER_PATCHED
    if _HASH_WRITER_PATCHED:
        return
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
    _HASH_WRITER_PATCHED = True


def _holds_index_files(path: Path) -> bool:
    """True when ``path`` holds a TOC (``_MAIN_<gen>.toc``) or segment file (``MAIN_<id>.*``) of
    Whoosh's ``MAIN`` index; the lock file alone does not count."""
    try:
        return any(name.startswith(("_MAIN_", "MAIN_")) and name != "MAIN_WRITELOCK"
                   for name in os.listdir(path))
    except FileNotFoundError:
        return False


class WhooshIndex:
    """The embedded full-text index in ``<state_dir>/index``.

    Thread safety: :meth:`search` may be called from any thread (each call opens its own
    searcher); at most one :class:`IndexSession` may be open at a time in the whole system, and
    only the writer thread opens one.

    Raises (from :meth:`open`):
        IndexUnavailable: the directory holds something Whoosh cannot read (a corrupt or
            foreign index); the message says how to rebuild.
    """

    DIRNAME = "index"

    def __init__(self, ix, path: Path) -> None:
        self._ix = ix
        self.path = path

    @classmethod
    def open(cls, state_dir: str | Path, *, create: bool = True) -> "WhooshIndex":
        """Open (or, with ``create``, create) the index under ``state_dir``."""
        from whoosh import index as windex

        _compact_hash_writer()
        # indexes written before the package layout pickled the analyzer as
        # ``indexerd.analysis.FusedStemmingAnalyzer``: keep that name importable
        sys.modules.setdefault("indexerd.analysis", importlib.import_module("indexerd.index.whoosh.analysis"))
        path = Path(state_dir) / cls.DIRNAME
        attempt = 0
        while True:
            try:
                if windex.exists_in(str(path)):
                    ix = windex.open_dir(str(path))
                elif _holds_index_files(path):
                    # segments but no TOC in this listing: a commit is renaming one in (retry), or
                    # the TOC is gone for good (the retries run out: corrupt, rebuild)
                    raise FileNotFoundError(f"{path}: no TOC in this listing")
                elif create:
                    path.mkdir(parents=True, exist_ok=True)
                    ix = windex.create_in(str(path), _schema())
                else:
                    raise IndexUnavailable(f"{path}: no index yet (run `indexerd index` first)")
                with ix.reader() as r:  # touches the TOC and opens each segment: corrupt files fail here
                    r.doc_count()
                    for fieldname in ("key", "content"):
                        r.field_length(fieldname)
                        next(iter(r.lexicon(fieldname)), None)
                break
            except IndexUnavailable:
                raise
            except FileNotFoundError:
                # a commit replaced the TOC (or a merge removed a segment) between listing the
                # directory and opening the file: the next generation is already there
                attempt += 1
                if attempt > 20:
                    raise IndexUnavailable(f"{path}: the index has segment files but no readable table "
                                           f"of contents (or keeps changing under the reader); if this "
                                           f"persists, rebuild it with `indexerd index --rebuild`") from None
                time.sleep(0.01 * attempt)
            except Exception as e:  # Whoosh raises many kinds on a damaged TOC/segment
                raise IndexUnavailable(
                    f"{path}: the index cannot be opened ({type(e).__name__}: {e}); "
                    f"rebuild it with `indexerd index --rebuild`") from None
        return cls(ix, path)

    def session(self, *, memory_bytes: int = 16 * 1024 * 1024, timeout_seconds: float = 10.0) -> IndexSession:
        """Open the single writer.

        Raises:
            RetryLater: the writer lock is held by another process for ``timeout_seconds``.
        """
        from whoosh.util.filelock import try_for

        lock = self._ix.lock("WRITELOCK")
        if not try_for(lock.acquire, timeout=timeout_seconds, delay=0.1):
            raise RetryLater(f"{self.path}: index writer lock is held by another process")
        try:
            # compound=False: a searcher then maps segment files instead of copying a compound
            # file into memory on every open (measured: ~10 ms per open per 100 MB of index)
            w = self._ix.writer(limitmb=max(8, memory_bytes // (1024 * 1024)), compound=False, _lk=False)
            _use_fused_positions(w.schema)
            w.pool = TermPostingPool(w._tempstorage, limit_bytes=memory_bytes)
        except BaseException:
            lock.release()
            raise
        w.writelock = lock  # Whoosh releases it at the end of a good commit or cancel
        return _WhooshSession(w, lock)

    def generation(self) -> int:
        """The committed generation number (grows by one per commit).

        Raises:
            IndexUnavailable: no TOC could be found after retries.
        """
        from whoosh.index import EmptyIndexError

        def read() -> int:
            gen = self._ix.latest_generation()
            if gen < 0:  # the listing missed the TOC (see the module docstring)
                raise EmptyIndexError(f"no TOC in {self.path}")
            return gen

        return self._retry_vanished(read)

    def _retry_vanished(self, fn):
        """Run ``fn()`` again when a concurrent commit removed the TOC or a segment it was about
        to read (Whoosh deletes the previous generation's files at each commit), or when the
        directory listing caught no TOC at all (``EmptyIndexError``, see the module docstring).

        Raises:
            IndexUnavailable: still failing after 20 tries (about 2 s).
        """
        from whoosh.index import EmptyIndexError

        for attempt in range(20):
            try:
                return fn()
            except (FileNotFoundError, EmptyIndexError) as e:
                if attempt == 19:
                    raise IndexUnavailable(f"{self.path}: the index keeps changing under the reader "
                                           f"({type(e).__name__}: {e}); if this persists, rebuild it "
                                           f"with `indexerd index --rebuild`") from None
                time.sleep(0.01 * (attempt + 1))

    def doc_count(self) -> int:
        """Number of live documents."""
        return self._retry_vanished(self._ix.doc_count)

    def keys(self) -> dict[str, str]:
        """``{key: source}`` for every live document (used by the start-up reconcile)."""
        def read() -> dict[str, str]:
            with self._ix.reader() as r:
                if r.doc_count_all() == 0:
                    return {}  # an index with no segments has no columns (Whoosh raises)
                keys, sources = r.column_reader("key"), r.column_reader("source")
                return {keys[n]: sources[n] for n in r.all_doc_ids()}

        return self._retry_vanished(read)

    def last_modified_time(self) -> datetime | None:
        """When the index last changed (its TOC file's mtime), aware UTC."""
        try:
            toc = max(self.path.glob("_MAIN_*.toc"), key=lambda p: p.stat().st_mtime)
        except ValueError:
            return None
        return datetime.fromtimestamp(toc.stat().st_mtime, UTC)

    def size_bytes(self) -> int:
        """Bytes on disk (files a concurrent commit removes meanwhile are not counted)."""
        total = 0
        for p in self.path.iterdir():
            try:
                total += p.stat().st_size if p.is_file() else 0
            except FileNotFoundError:
                pass
        return total

    def optimize(self) -> None:
        """Merge every segment into one (slow: tens of seconds on thousands of documents)."""
        self._ix.optimize()

    def segment_count(self) -> int:
        """Number of segments in the latest generation."""
        return self._retry_vanished(lambda: len(self._ix._segments()))

    def search(self, query: str, *, limit: int = 10, since: datetime | None = None,
               until: datetime | None = None, snippet_chars: int = 240) -> list[Hit]:
        """Run a query (see :meth:`_search_once`), retrying on a fresh snapshot when a concurrent
        commit or merge removed a segment file this reader had not opened yet (Whoosh opens
        segment columns lazily).

        Raises:
            QueryError: the query is malformed.
            IndexUnavailable: the index kept failing after retries.
        """
        attempts = 6
        for attempt in range(attempts):
            try:
                return self._search_once(query, limit=limit, since=since, until=until,
                                         snippet_chars=snippet_chars)
            except QueryError:
                raise
            except Exception as e:  # FileNotFoundError, or Whoosh's TypeError on a vanished column
                if attempt == attempts - 1:
                    raise IndexUnavailable(f"{self.path}: search failed ({type(e).__name__}: {e}); "
                                           f"if this persists, rebuild with `indexerd index --rebuild`") from None
                log.debug("search retry %d after %s: %s", attempt + 1, type(e).__name__, e)
                time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    def _search_once(self, query: str, *, limit: int, since: datetime | None,
                     until: datetime | None, snippet_chars: int) -> list[Hit]:
        """Run a query in Whoosh syntax over title and content.

        Words are ANDed; phrases, ``AND``/``OR``/``NOT``, ``title:word`` and ``prefix*`` work.
        ``since``/``until`` (aware) filter on last_modified, ``since <= lm < until``.

        Raises:
            QueryError: the query is malformed (unbalanced quotes or parentheses, a field we do
                not have, nothing searchable left).
        """
        from whoosh import query as wq
        from whoosh.qparser import MultifieldParser

        _check_balanced(query)
        with self._ix.searcher() as searcher:
            parser = MultifieldParser(["title", "content"], self._ix.schema)
            query = _check_field_prefixes(query, self._ix.schema)
            try:
                q = parser.parse(query)
            except Exception as e:
                raise QueryError(f"malformed query {query!r}: {e}") from None
            _check_parsed(q, query, self._ix.schema)
            flt = None
            if since or until:
                flt = wq.DateRange("last_modified", _naive_utc(since), _naive_utc(until),
                                   startexcl=False, endexcl=True)
            results = searcher.search(q, limit=limit, filter=flt)
            snippet_re = _snippet_regex(q)
            hits = []
            for i, h in enumerate(results, 1):
                stored = h.fields()
                text = zlib.decompress(stored["text_z"]).decode("utf-8", "replace") if stored.get("text_z") else ""
                snippet = _snippet(text, snippet_re, snippet_chars)
                hits.append(Hit(rank=i, key=stored["key"],
                                url=stored["key"], path=stored.get("path"),
                                source=stored.get("source", ""), title=stored.get("title") or "",
                                last_modified=_aware(stored.get("last_modified")),
                                date_source=stored.get("date_source"), media_type=stored.get("media_type"),
                                score=float(h.score or 0.0), snippet=" ".join(snippet.split())))
            return hits

    def close(self) -> None:
        """Release the index object; safe to call twice."""
        ix, self._ix = getattr(self, "_ix", None), None
        if ix is not None:
            ix.close()


def _check_balanced(query: str) -> None:
    if query.count('"') % 2:
        raise QueryError(f"malformed query {query!r}: unbalanced double quote")
    depth = 0
    in_quote = False
    for ch in query:
        if ch == '"':
            in_quote = not in_quote
        elif not in_quote and ch == "(":
            depth += 1
        elif not in_quote and ch == ")":
            depth -= 1
            if depth < 0:
                break
    if depth != 0:
        raise QueryError(f"malformed query {query!r}: unbalanced parentheses")
    if not query.strip():
        raise QueryError("empty query")


def _searchable_fields(schema) -> list[str]:
    return sorted(name for name, field in schema.items()
                  if getattr(field, "format", None) is not None and not name.endswith("_z"))


_FIELD_PREFIX = r"(?<![\w:])([A-Za-z_]\w*):(?=[^\s:/])"
"""``name:`` right before a term: not ``std::vector``, ``http://``, ``12:30`` or a trailing colon."""


def _check_field_prefixes(text: str, schema) -> str:
    """Check the ``field:`` prefixes of a query outside phrases and return the query with field
    names in lower case (``Title:x`` -> ``title:x``).

    Whoosh reads an unknown prefix as two words, so ``Title:falcon`` or a typo silently found
    nothing.

    Raises:
        QueryError: a prefix names a stored-only field (``path:tmp``) or no field at all; the
            message lists the searchable fields (and says how to search the text itself).
    """
    import re

    searchable = _searchable_fields(schema)
    pieces = re.split(r'("[^"]*")', text)  # odd pieces are phrases: their words are not fields
    for i in range(0, len(pieces), 2):
        def field(m: re.Match) -> str:
            name = m.group(1)
            lower = name.lower()
            if lower in searchable:
                return lower + ":"
            if lower in schema:
                raise QueryError(f"malformed query {text!r}: field {name!r} is stored but not "
                                 f"searchable (searchable: {', '.join(searchable)})")
            raise QueryError(f"malformed query {text!r}: no field {name!r} (searchable: "
                             f"{', '.join(searchable)}); to search for the text itself, quote it: "
                             f"'\"{name}:...\"'")
        pieces[i] = re.sub(_FIELD_PREFIX, field, pieces[i])
    return "".join(pieces)


def _check_parsed(q, text: str, schema) -> None:
    from whoosh import query as wq

    if q is wq.NullQuery or isinstance(q, type(wq.NullQuery)):
        raise QueryError(f"malformed query {text!r}: nothing to search for (only stop words or operators?)")
    for fieldname, _ in q.iter_all_terms() if hasattr(q, "iter_all_terms") else ():
        if fieldname not in schema:
            raise QueryError(f"malformed query {text!r}: unknown field {fieldname!r} "
                             f"(fields: title, content)")
    searchable = _searchable_fields(schema)
    for sub in q.leaves() if hasattr(q, "leaves") else ():
        fn = getattr(sub, "fieldname", None)
        if fn and fn not in schema:
            raise QueryError(f"malformed query {text!r}: unknown field {fn!r} (fields: title, content)")
        if fn and fn not in searchable:
            raise QueryError(f"malformed query {text!r}: field {fn!r} is stored but not searchable "
                             f"(searchable: {', '.join(searchable)})")


def _snippet_regex(q):
    """A regex finding the query's content terms (stems used as word prefixes) in raw text."""
    import re

    words = set()
    for fieldname, text in q.iter_all_terms() if hasattr(q, "iter_all_terms") else ():
        if fieldname in ("content", "title") and isinstance(text, (str, bytes)):
            w = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
            if w.strip("*?"):
                words.add(re.escape(w.strip("*?")))
    if not words:
        return None
    return re.compile(r"\b(?:" + "|".join(sorted(words, key=len, reverse=True)) + r")\w*", re.IGNORECASE)


def _snippet(text: str, rx, chars: int) -> str:
    """Up to two windows of plain text around the first matches (whole-word trimmed), or the
    start of the text.  Linear in the text: no re-analysis of the document."""
    if not text:
        return ""
    spans = []
    if rx is not None:
        half = chars // 4
        for m in rx.finditer(text):
            if spans and m.start() < spans[-1][1]:
                continue
            spans.append((max(0, m.start() - half), min(len(text), m.end() + half)))
            if len(spans) == 2:
                break
    if not spans:
        return " ".join(text[:chars].split())
    parts = []
    for start, end in spans:
        frag = text[start:end]
        if start > 0:
            frag = frag.split(" ", 1)[-1]
        if end < len(text):
            frag = frag.rsplit(" ", 1)[0]
        parts.append(" ".join(frag.split()))
    return " … ".join(parts)
