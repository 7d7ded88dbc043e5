"""The Whoosh engine (``[index] engine = "whoosh"``, the default): the only package that imports
Whoosh.  :mod:`~indexerd.index.whoosh.engine` (the index), ``session`` (the writer), ``schema``,
``patches`` (every change to Whoosh's internals), ``postingpool``, ``mergepolicy``, ``analysis``
(the analyzer in Whoosh's terms) and ``compile`` (the analysed query tree -> Whoosh queries).

Importing this package does not import Whoosh: :data:`ENGINE` imports it when an index opens
(``indexerd index`` over an unchanged tree never opens it: :mod:`indexerd.runtime.indexer`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from indexerd.index.base import library_installed
from indexerd.index.whoosh.ondisk import holds_index_files, on_disk_generation

if TYPE_CHECKING:
    from indexerd.index.whoosh.engine import WhooshIndex


class WhooshEngine:
    """The Whoosh engine as :func:`~indexerd.index.opening.open_index` sees it (``ENGINE``)."""

    name = "whoosh"
    #: 1: title/content analysed by FusedStemmingAnalyzer; 2: the shared analyzer's tokens and
    #: the ``ids`` field (:func:`~indexerd.index.whoosh.schema.new_schema`); 3: the ``headings`` field
    format_version = 3
    extra = None
    #: pure Python: one query at a time (4 at once gave the same page throughput under 20
    #: clients and left the writer 0.84 s from edit to searchable instead of 0.34-0.40 s)
    query_threads = 1

    def available(self) -> bool:
        """True when the ``whoosh`` package is installed (not imported here)."""
        return library_installed("whoosh")

    def open(self, path: Path, settings: Any | None, *, create: bool, fold_diacritics: bool = True) -> WhooshIndex:
        """Open (with ``create``, create) the Whoosh index in directory ``path``; ``settings`` is
        the ``[index.whoosh]`` table (None: defaults).  See
        :meth:`~indexerd.index.whoosh.engine.WhooshIndex.open`."""
        from indexerd.index.whoosh.engine import WhooshIndex

        return WhooshIndex.open(path, settings, create=create, fold_diacritics=fold_diacritics)

    def on_disk_token(self, path: Path) -> str | None:
        """The newest commit's generation (``_MAIN_<gen>.toc``) as text, None when there is none."""
        gen = on_disk_generation(path)
        return None if gen is None else str(gen)

    def holds_index(self, path: Path) -> bool:
        """True when ``path`` holds files of Whoosh's ``MAIN`` index."""
        return holds_index_files(path)


#: The engine object :func:`indexerd.index.base.load_engine` looks up.
ENGINE = WhooshEngine()

__all__ = ["ENGINE", "WhooshEngine"]
