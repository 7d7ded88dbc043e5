"""What the rest of indexerd knows about a full-text index: the protocols, and which engine.

The writer, the indexer, the CLI and the daemon use only this module (re-exported by
:mod:`indexerd.index`); each engine lives in its own package (``indexerd/index/<engine>/``) and
is the only code that imports its library.  An engine package exports ``ENGINE``, an object
following :class:`Engine`.

On disk, the index of a state dir is the directory ``<state_dir>/index``.  Beside the engine's
own files it holds :data:`IDENTITY_FILE`, which says which engine wrote the index, with which
text analysis (:data:`ANALYSIS_VERSION`) and which engine format: a reader that finds another
engine or analysis than the one configured knows the index must be rebuilt from the sources
(:func:`rebuild_reason`) instead of answering queries with differently analysed terms.  An index
written before the identity file existed holds files of the default engine (``ENGINES[0]``)
only: it reads as that engine with analysis version 1, so it is rebuilt (saying why) at the first
start of a writer.

Thread safety: :meth:`SearchIndex.search`, :meth:`SearchIndex.count` and the other readers may
be called from any thread; at most one :class:`IndexSession` is open at a time in one process
(the index writer thread's).  The embedded engines enforce one across processes too; the
PostgreSQL engine lets several processes (nodes, each with its own state dir) write at once.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from indexerd.core.errors import ConfigError, IndexUnavailable, QueryError
from indexerd.index.analysis import ANALYSIS_VERSION as _TOKEN_STREAM_VERSION

log = logging.getLogger(__name__)

#: The engines indexerd knows, by their ``[index] engine`` name; the first is the default.
ENGINES = ("whoosh", "tantivy", "postgresql")
#: The version of the text analysis (tokenising, normalisation, stemming) every engine applies
#: through :mod:`indexerd.index.analysis` (bumped there whenever a text yields other terms than
#: before): an index written with another version is rebuilt from the sources at the next start.
#: 1: the default engine's own stemming analyzer (indexes written before the identity file existed);
#: 2: NFC and case folding, identifiers, CJK bigrams, diacritic folding.
ANALYSIS_VERSION = _TOKEN_STREAM_VERSION
#: The index directory's name inside a state dir.
INDEX_DIRNAME = "index"
#: The file in the index directory that names the engine, analysis and format that wrote it.
IDENTITY_FILE = "indexerd-index.json"
#: Stored text used for snippets is capped (bytes of UTF-8) to bound index size and highlight time.
SNIPPET_TEXT_CAP_BYTES = 256 * 1024

Sort = Literal["relevance", "date"]


def check_sort(sort: str) -> None:
    """The one check of a search's ``sort`` every engine makes.

    Raises:
        QueryError: ``sort`` is not ``relevance`` or ``date``.
    """
    if sort not in ("relevance", "date"):
        raise QueryError(f"unknown sort {sort!r} (expected relevance or date)")


@dataclass(frozen=True)
class IndexDoc:
    """One document as the index sees it.

    ``key`` is the unique document key (``file:`` URI, canonical URL, ``sql:<source>/<id>``);
    ``url`` is what a person opens (equal to the key for web and SQL); ``path`` is the file
    system path for files (may hold surrogate escapes), else None; ``last_modified`` is aware UTC.
    ``content`` is what is searched; ``snippet_text`` the part snippets are taken from (a page's
    main content, without navigation), None for all of ``content``.  ``size`` is in bytes.
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
    """One search result.  ``rank`` counts from 1; ``score`` is the engine's relevance (higher is
    better; not comparable between engines); ``last_modified`` is aware UTC."""

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
    """A batch of writes by the one writer; nothing is visible to searchers until :meth:`commit`.

    Within a session the last write of a key wins: ``update(a); update(a')`` leaves ``a'``,
    ``update(a); delete(a.key)`` leaves nothing, ``delete(k); update(b)`` with ``b.key == k``
    leaves ``b`` -- whatever the engine's own rules are for uncommitted documents.
    A session is used by one thread.
    """

    def update(self, doc: IndexDoc) -> None:
        """Add ``doc``, replacing any document with the same key.

        Raises:
            OSError: the index cannot be written (disk full, read-only); the session must then
                be cancelled.
        """

    def delete(self, key: str) -> None:
        """Delete the document ``key`` (nothing when there is none)."""

    def delete_many(self, keys: Iterable[str]) -> None:
        """:meth:`delete` for every key (engines batch the lookups)."""

    def commit(self, *, merge: bool) -> str:
        """Make every write of this session searchable and durable; end the session.

        ``merge``: the engine may merge segments now (a bulk pass); False on the daemon's hot
        path, where only cheap cleanup is allowed.  Returns the new commit token
        (:meth:`SearchIndex.commit_token`).  The session is closed even when this raises.

        Raises:
            OSError: the commit failed (disk full, read-only); the previous commit stays.
        """

    def cancel(self) -> None:
        """Drop every write of this session and end it; safe after a failure."""


class SearchIndex(Protocol):
    """One open full-text index (``<state_dir>/index``).

    ``path`` is the index directory; ``engine`` the engine's name (one of :data:`ENGINES`).
    Readers retry internally when a concurrent commit changes the files under them, and raise
    :class:`~indexerd.core.errors.IndexUnavailable` when that keeps failing.
    """

    path: Path
    engine: str

    def session(self, *, timeout_seconds: float = 10.0) -> IndexSession:
        """Open the single writer (memory and threads come from the engine's settings).

        Raises:
            RetryLater: another process holds the writer for ``timeout_seconds``.
        """

    def search(self, query: str, *, limit: int = 10, since: datetime | None = None,
               until: datetime | None = None, snippet_chars: int = 240,
               sort: Sort = "relevance") -> list[Hit]:
        """The best ``limit`` hits of ``query`` (the query language of :mod:`indexerd.index.query`),
        restricted to ``since <= last_modified < until`` (aware datetimes, None: unbounded),
        ordered by relevance or by date (newest first).  Snippets are at most about
        ``snippet_chars`` characters.

        Raises:
            QueryError: the query is malformed (the same message on every engine).
            IndexUnavailable: the index cannot be read.
        """

    def count(self, query: str | None = None, *, since: datetime | None = None,
              until: datetime | None = None) -> int:
        """How many live documents match ``query`` (None: every live document) in the range.

        Raises:
            QueryError, IndexUnavailable: as :meth:`search`.
        """

    def keys(self) -> Iterator[tuple[str, str]]:
        """Every live document as ``(key, source)``, streamed from one snapshot (in no order)."""

    def commit_token(self) -> str:
        """An opaque text naming the latest commit: two tokens are equal when the index did not
        change between them (the crash reconcile compares it with the store's record)."""

    def size_bytes(self) -> int:
        """Bytes of the index on disk."""

    def status(self) -> dict[str, Any]:
        """What ``ctl status`` shows: at least ``engine``, ``documents``, ``size_bytes``; an
        engine adds its own (``segments``).  JSON-serialisable.

        Raises:
            IndexUnavailable: the index cannot be read.
        """

    def maintenance_delay(self, commits_since: int) -> float | None:
        """Seconds of writer idleness after which :meth:`maintain` should run, given the number
        of live commits since the last maintenance; None: nothing to do."""

    def maintain(self) -> None:
        """Idle-time work (merge segments, reclaim deleted documents).  Takes the writer, so it
        is only called by the writer thread with no session open.

        Raises:
            RetryLater: the writer is held by another process.
        """

    def close(self) -> None:
        """Release the index; safe to call twice."""


class Engine(Protocol):
    """What an engine package exports as ``ENGINE``.

    ``name`` is the ``[index] engine`` value; ``format_version`` changes when the engine's schema
    changes (an index with another format is rebuilt); ``extra`` is the pip extra that installs
    its library (None: always installed); ``query_threads`` how many queries the daemon runs at
    once: 1 where a search holds the GIL (more take the writer's share: bench/RESULTS.md).
    """

    name: str
    format_version: int
    extra: str | None
    query_threads: int

    def available(self) -> bool:
        """True when the engine's library can be imported (without importing it twice)."""

    def open(self, path: Path, settings: Any | None, *, create: bool, fold_diacritics: bool = True) -> SearchIndex:
        """Open the index in directory ``path`` (with ``create``, create it when absent).
        ``settings`` is the engine's table of the config (``[index.<name>]``), None for defaults;
        ``fold_diacritics``: the shared analyzer folds accents (``[index] fold_diacritics``).

        Raises:
            IndexUnavailable: nothing there (``create`` False), or it cannot be read; the
                message says how to rebuild.
        """

    def on_disk_token(self, path: Path) -> str | None:
        """The latest commit token from the files alone (cheap, no library import where
        possible); None when ``path`` holds no index of this engine."""

    def holds_index(self, path: Path) -> bool:
        """True when ``path`` holds files of this engine's index."""


@dataclass(frozen=True)
class IndexIdentity:
    """Who wrote an index: engine name, :data:`ANALYSIS_VERSION`, the engine's format version, and
    whether its text was analysed with accents folded (``diacritics`` ``"fold"``, the default)
    or kept (``"keep"``)."""

    engine: str
    analysis: int
    format: int
    diacritics: str = "fold"

    @property
    def fold_diacritics(self) -> bool:
        return self.diacritics != "keep"

    def as_json(self) -> str:
        return json.dumps({"engine": self.engine, "analysis": self.analysis, "format": self.format,
                           "diacritics": self.diacritics})


def index_dir(state_dir: str | Path) -> Path:
    """The index directory of a state dir."""
    return Path(state_dir) / INDEX_DIRNAME


def directory_bytes(path: Path) -> int:
    """Bytes of the files directly in ``path`` (an embedded engine's index directory); files a
    concurrent commit removes meanwhile are not counted."""
    total = 0
    for p in path.iterdir():
        try:
            total += p.stat().st_size if p.is_file() else 0
        except FileNotFoundError:
            pass
    return total


def load_engine(name: str) -> Engine:
    """The engine called ``name`` (its package is imported, its library only when it opens).

    Raises:
        ConfigError: no such engine, or its library is not installed (the message names the
            pip extra that installs it).
    """
    if name not in ENGINES:
        raise ConfigError(f"index.engine: unknown engine {name!r} (expected one of: {', '.join(ENGINES)})")
    try:
        engine: Engine = importlib.import_module(f"indexerd.index.{name}").ENGINE
    except ImportError as e:
        raise ConfigError(f"index.engine = {name!r}: this indexerd cannot load it ({e})") from None
    if not engine.available():
        how = f"pip install 'indexerd[{engine.extra}]'" if engine.extra else "reinstall indexerd"
        raise ConfigError(f"index.engine = {name!r}, but its library is not installed: {how}")
    return engine


def wanted_identity(engine: Engine, fold_diacritics: bool = True) -> IndexIdentity:
    """The identity an index written now by ``engine`` gets (``fold_diacritics``: the config's
    ``[index] fold_diacritics``)."""
    return IndexIdentity(engine.name, ANALYSIS_VERSION, engine.format_version,
                         "fold" if fold_diacritics else "keep")


def read_identity(state_dir: str | Path) -> IndexIdentity | None:
    """Who wrote the index of ``state_dir``: its identity file; for an index older than that file,
    the default engine with analysis 1, format 1; None when there is no index.

    An identity file that cannot be read or parsed yields an identity no engine matches
    (``engine`` ``"unknown"``), so the index is rebuilt rather than misread.
    """
    path = index_dir(state_dir)
    try:
        raw = (path / IDENTITY_FILE).read_text(encoding="utf-8")
    except FileNotFoundError:
        if not path.is_dir():
            return None
        # before the identity file, every index was the default engine's (its files say so)
        legacy: Engine = importlib.import_module(f"indexerd.index.{ENGINES[0]}").ENGINE
        return IndexIdentity(legacy.name, 1, 1) if legacy.holds_index(path) else None
    except OSError as e:
        raise IndexUnavailable(f"{path / IDENTITY_FILE}: cannot read: {e.strerror}") from None
    try:
        d = json.loads(raw)
        diacritics = d.get("diacritics", "fold")  # files written before the setting: folded
        if diacritics not in ("fold", "keep"):
            raise ValueError(diacritics)
        return IndexIdentity(str(d["engine"]), int(d["analysis"]), int(d["format"]), diacritics)
    except (ValueError, KeyError, TypeError, AttributeError):
        return IndexIdentity("unknown", 0, 0)


def write_identity(state_dir: str | Path, identity: IndexIdentity) -> None:
    """Write the identity file (atomically: a temp file renamed into place)."""
    path = index_dir(state_dir)
    path.mkdir(parents=True, exist_ok=True)
    tmp = path / (IDENTITY_FILE + ".tmp")
    tmp.write_text(identity.as_json() + "\n", encoding="utf-8")
    os.replace(tmp, path / IDENTITY_FILE)


def rebuild_reason(found: IndexIdentity | None, wanted: IndexIdentity) -> str | None:
    """Why an index written as ``found`` must be rebuilt to serve as ``wanted``, or None when it
    can be used (or there is no index: ``found`` None)."""
    if found is None or found == wanted:
        return None
    if found.engine != wanted.engine:
        return f"the index was written by the {found.engine} engine and the config asks for {wanted.engine}"
    if found.analysis != wanted.analysis:
        return (f"the index was written with text analysis version {found.analysis} and this indexerd "
                f"analyses text with version {wanted.analysis}")
    if found.diacritics != wanted.diacritics:
        said = {"fold": "with accents folded (cafe finds café)", "keep": "with accents kept (cafe does not find café)"}
        return (f"the index was written {said[found.diacritics]} and the config asks for it "
                f"{said[wanted.diacritics]} ([index] fold_diacritics = "
                f"{'true' if wanted.fold_diacritics else 'false'})")
    return f"the index was written in {found.engine} format {found.format}, this indexerd writes format {wanted.format}"


def engine_settings(settings: Any | None, name: str) -> Any | None:
    """The ``[index.<name>]`` table of ``[index]`` settings, or None."""
    return getattr(settings, name, None) if settings is not None else None


def open_index(state_dir: str | Path, settings: Any | None = None, *, create: bool = True) -> SearchIndex:
    """Open (with ``create``, create) the index of ``state_dir`` with the configured engine.

    ``settings`` is the config's ``[index]`` (``engine``, ``fold_diacritics`` and the engines'
    tables); None (a reader without a config, such as ``ctl search``) uses the engine and the
    analysis that wrote the index, else the defaults.  A writer (``create``) must first rebuild an index :func:`rebuild_reason` rejects
    (:class:`~indexerd.core.indexer.Indexer` does, from the sources); a reader gets an error.

    Raises:
        ConfigError: the engine is unknown or not installed (names the pip extra).
        IndexUnavailable: no index (``create`` False), one written by another engine or analysis
            (the message says to run ``indexerd index``), or one that cannot be read.
    """
    found = read_identity(state_dir)
    if settings is not None:
        name = settings.engine
    else:
        name = found.engine if found is not None and found.engine in ENGINES else ENGINES[0]
    engine = load_engine(name)
    if settings is not None:
        fold = bool(getattr(settings, "fold_diacritics", True))
    else:
        fold = found.fold_diacritics if found is not None else True
    wanted = wanted_identity(engine, fold)
    why = rebuild_reason(found, wanted)
    if why is not None:
        raise IndexUnavailable(f"{index_dir(state_dir)}: {why}; run `indexerd index` (or start the daemon) "
                               f"to rebuild it from the sources")
    path = index_dir(state_dir)
    if create and found is None:
        write_identity(state_dir, wanted)  # before the engine's files: never an index without it
    return engine.open(path, engine_settings(settings, name), create=create, fold_diacritics=fold)


def on_disk_token(state_dir: str | Path) -> str | None:
    """The commit token of the index on disk from its files alone, or None when there is none
    (or it was written by an engine that is not installed: it will be rebuilt)."""
    found = read_identity(state_dir)
    if found is None or found.engine not in ENGINES:
        return None
    try:
        engine = load_engine(found.engine)
    except ConfigError:
        return None
    return engine.on_disk_token(index_dir(state_dir))
