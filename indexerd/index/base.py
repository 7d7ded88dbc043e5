"""What the rest of indexerd knows about a full-text index: the protocols, and which engine.

The writer, the indexer, the CLI and the daemon use only this module (re-exported by
:mod:`indexerd.index`); each engine lives in its own package (``indexerd/index/<engine>/``) and
is the only code that imports its library.  An engine package exports ``ENGINE``, an object
following :class:`Engine`.

On disk, the index of a state dir is the directory ``<state_dir>/index``; which engine opens it,
and when it must be rebuilt, is :mod:`indexerd.index.opening`'s.

Thread safety: :meth:`SearchIndex.search`, :meth:`SearchIndex.count` and the other readers may
be called from any thread; at most one :class:`IndexSession` is open at a time in one process
(the index writer thread's).  The embedded engines enforce one across processes too; the
PostgreSQL engine lets several processes (nodes, each with its own state dir) write at once.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from collections.abc import Callable, Container, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from indexerd.core.errors import ConfigError, QueryError
from indexerd.index.engines import ENGINES as ENGINES  # the engines' names (re-exported)

log = logging.getLogger(__name__)

#: The version of the text analysis (tokenising, normalisation, stemming) every engine applies
#: through :mod:`indexerd.index.analysis` (bumped here whenever a text yields other terms than
#: before; kept here, not there, so that opening the index's identity costs no analyzer): an
#: index written with another version is rebuilt from the sources at the next start.
#: 1: the default engine's own stemming analyzer (indexes written before the identity file existed);
#: 2: NFC and case folding, identifiers, CJK bigrams, diacritic folding.
ANALYSIS_VERSION = 2
#: The index directory's name inside a state dir.
INDEX_DIRNAME = "index"
#: Stored text used for snippets is capped (bytes of UTF-8) to bound index size and highlight time.
SNIPPET_TEXT_CAP_BYTES = 256 * 1024
#: How much a match in a document's headings weighs beside one in its content (1) and its title
#: (3): between them, as a heading names what its section is about (bench/RESULTS.md, the
#: judged set of issue 34).
HEADINGS_BOOST = 2.0
#: The fields :meth:`SearchIndex.facets` counts documents by (the query language's keyword
#: fields of the same names narrow a query to one value).
FACET_FIELDS = ("media_type", "source")

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
    ``headings``: the document's section headings (an HTML page's ``h1``-``h6``), one a line,
    a part of ``content`` that also goes to the boosted ``headings`` field (a word there ranks a
    document above one that only mentions it: :data:`HEADINGS_BOOST`); ``""`` for none.
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
    headings: str = ""


@dataclass(frozen=True)
class Hit:
    """One search result.  ``rank`` counts from 1; ``score`` is the engine's relevance (higher is
    better; not comparable between engines); ``last_modified`` is aware UTC.  ``snippet`` is the
    best passage for the query (:mod:`indexerd.index.snippets`), ``marks`` the ``(start, end)``
    character offsets of what matched in it, ``snippet_note`` why there is no marked passage
    (None when there is one).  ``also_at``: the keys of identical documents (the same content
    hash) folded into this hit by the daemon's searches (:mod:`indexerd.daemon.collapse`)."""

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
    marks: tuple[tuple[int, int], ...] = ()
    snippet_note: str | None = None
    also_at: tuple[str, ...] = ()


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

    def full(self) -> bool:
        """True when the session holds as much as its engine should before a commit (the
        writer then commits the batch early): tantivy's documents waiting for its indexing
        thread, held outside ``writer_memory``; never on the other engines."""


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
               sort: Sort = "relevance",
               snippets_for: Callable[[list[str]], Container[str]] | None = None,
               others_keys_only: bool = False) -> list[Hit]:
        """The best ``limit`` hits of ``query`` (the query language of :mod:`indexerd.index.query`),
        restricted to ``since <= last_modified < until`` (aware datetimes, None: unbounded),
        ordered by relevance or by date (newest first).  Snippets are at most about
        ``snippet_chars`` characters.  ``snippets_for``: given the hits' keys in rank order, the
        keys whose hits get a snippet (the others: ``snippet`` empty, no marks, no note), so a
        caller that shows some of the hits only (identical documents collapsed) pays for the
        snippets it shows; None: every hit.  ``others_keys_only``: the hits ``snippets_for`` did
        not choose may carry their ``key`` and ``source`` only (title and snippet empty, path,
        date and media type None): a caller that lists the others by key only does not pay to
        read them (an engine may give them whole).

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

    def facets(self, query: str | None = None, *, since: datetime | None = None,
               until: datetime | None = None) -> dict[str, list[tuple[str, int]]]:
        """How many live documents matching ``query`` (None: every one) in the range hold each
        value of the fields of :data:`FACET_FIELDS`: ``{"media_type": [("text/html", 812), ...],
        "source": [...]}``, each list most documents first, then by value; a value no matching
        document holds is left out.  Counted by the engine (grouped counts, term counts under a
        filter, ``GROUP BY``), never by reading the hits.

        Raises:
            QueryError, IndexUnavailable: as :meth:`search`.
        """

    def similar_terms(self, token: str, *, max_edits: int = 2) -> list[tuple[str, int]]:
        """Terms of the ``title`` and ``content`` fields (analysed tokens: stems) that begin with
        ``token``'s first character and are at most ``max_edits`` insertions, deletions,
        substitutions or swaps of neighbours away from it (``token`` itself included when the
        index holds it), each with the number of live documents holding it in either field (an
        upper bound on engines that count per field: the larger field's count), in no order.
        Terms no live document holds any more are left out.  For "did you mean"
        (:mod:`indexerd.index.suggest`).

        Raises:
            IndexUnavailable: the index cannot be read.
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

    def maintain(self, interrupted: Callable[[], bool] | None = None) -> None:
        """Idle-time work (merge segments, reclaim deleted documents).  Takes the writer, so it
        is only called by the writer thread with no session open.  ``interrupted``: True once
        a write waits (a long merge may give way to it and be tried again at the next idle).

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


def library_installed(package: str) -> bool:
    """True when the top-level ``package`` (an engine's library) can be imported, without
    importing it: an engine's :meth:`Engine.available`."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # a module blocked in sys.modules, a broken install
        return False


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
        how = install_hint(engine.extra) if engine.extra else "reinstall indexerd"
        raise ConfigError(f"index.engine = {name!r}, but its library is not installed: {how}")
    return engine


def install_hint(extra: str) -> str:
    """How to install the pip extra ``extra`` into *this* installation, whatever it came from (a
    venv, a checkout, PyPI): this interpreter's pip with the extra's own requirements, as the
    installed indexerd's metadata lists them (``/opt/indexerd/bin/python -m pip install
    'tantivy==0.27.0'``); ``pip install 'indexerd[EXTRA]'`` when the metadata cannot be read."""
    import sys
    from importlib import metadata

    try:
        marker = f'extra == "{extra}"'
        specs = [r.split(";")[0].strip() for r in metadata.requires("indexerd") or ()
                 if marker in r.replace("'", '"')]
    except metadata.PackageNotFoundError:
        specs = []
    if not specs:
        return f"pip install 'indexerd[{extra}]'"
    return (f"{sys.executable} -m pip install {' '.join(repr(s) for s in specs)} (the 'indexerd[{extra}]' "
            f"extra, into the environment indexerd runs from)")
