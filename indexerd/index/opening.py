"""Opening a state dir's index: which engine and analysis wrote it (the identity file), whether
it must be rebuilt, and :func:`open_index`.

Beside the engine's own files, the index directory holds :data:`IDENTITY_FILE`, which says which
engine wrote the index, with which text analysis (:data:`~indexerd.index.base.ANALYSIS_VERSION`,
accents folded or kept) and which engine format: a reader that finds another engine or analysis
than the one configured knows the index must be rebuilt from the sources (:func:`rebuild_reason`)
instead of answering queries with differently analysed terms.  An index written before the
identity file existed holds files of the default engine (``ENGINES[0]``) only: it reads as that
engine with analysis version 1, so it is rebuilt (saying why) at the first start of a writer.
"""

from __future__ import annotations

import importlib
import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from indexerd.core.errors import ConfigError, IndexUnavailable
from indexerd.index.base import ANALYSIS_VERSION, ENGINES, Engine, SearchIndex, index_dir, load_engine

#: The file in the index directory that names the engine, analysis and format that wrote it.
IDENTITY_FILE = "indexerd-index.json"


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
    (:class:`~indexerd.runtime.indexer.Indexer` does, from the sources); a reader gets an error.

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


def count_documents(state_dir: str | Path, settings: Any) -> int:
    """How many documents the configured index holds (``settings``: a config's ``[index]``,
    :class:`indexerd.config.IndexSettings`), opened for the count only, through its engine: for
    a shared index (PostgreSQL), whose count the state dir's own index identity does not know.

    Raises:
        IndexUnavailable: the index's server cannot be reached.
    """
    name = settings.engine
    ix = load_engine(name).open(index_dir(state_dir), engine_settings(settings, name),
                                create=True, fold_diacritics=settings.fold_diacritics)
    try:
        return int(ix.count())
    finally:
        ix.close()


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


def files_fingerprint(state_dir: str | Path) -> str | None:
    """A fingerprint of the index directory's listing (each file's name, size in bytes and mtime
    in ns: their count, total size and CRC-32), or None when there is no index directory.
    Equal fingerprints mean no file of the index was written, replaced or removed in between: an
    index seen good then is what a later start finds (:class:`~indexerd.runtime.indexer.Indexer`
    opens it again only when the fingerprint differs).  The file contents are not read: a change
    that keeps a file's size and mtime (bit rot) is found when the file is read, as before."""
    try:
        entries = sorted((e.name, e.stat(follow_symlinks=False)) for e in os.scandir(index_dir(state_dir)))
    except (FileNotFoundError, NotADirectoryError):
        return None
    crc, total = 0, 0
    for name, st in entries:
        crc = zlib.crc32(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"), crc)
        total += st.st_size
    return f"{len(entries)}:{total}:{crc:08x}"
