"""The tantivy engine (``[index] engine = "tantivy"``): tantivy, the Rust full-text engine,
through its official Python bindings (``pip install 'indexerd[tantivy]'``).

Importing this package does not import tantivy: :data:`ENGINE` imports it when an index opens.
:mod:`.schema` holds the fields and the document conversion, :mod:`.engine` the index and its
write session, :mod:`.compile` turns the product's query AST into tantivy queries and
:mod:`.search` runs them and builds the hits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from indexerd.index.base import library_installed

#: Changes whenever the schema (fields, their options, the tokenizer) changes: an index written
#: with another format is rebuilt from the sources.  2: the ``headings`` field; 3: the
#: ``content_pairs`` field (word pairs answering phrases, :mod:`.pairs`).
FORMAT_VERSION = 3


class TantivyEngine:
    """The engine object :func:`indexerd.index.base.load_engine` finds as ``ENGINE``."""

    name = "tantivy"
    format_version = FORMAT_VERSION
    extra = "tantivy"
    #: native search (not measured against 1)
    query_threads = 4

    def available(self) -> bool:
        """True when the ``tantivy`` package is installed (not imported here)."""
        return library_installed("tantivy")

    def open(self, path: Path, settings: Any | None, *, create: bool, fold_diacritics: bool = True):
        """Open (with ``create``, create) the tantivy index in directory ``path``; ``settings``
        is the ``[index.tantivy]`` table (None: defaults).  See
        :meth:`~indexerd.index.tantivy.engine.TantivyIndex.open`."""
        from .engine import TantivyIndex

        return TantivyIndex.open(path, settings, create=create, fold_diacritics=fold_diacritics)

    def on_disk_token(self, path: Path) -> str | None:
        """The last commit's token from ``meta.json`` alone, None when there is no tantivy index."""
        from .token import read_token

        return read_token(path)

    def holds_index(self, path: Path) -> bool:
        """True when ``path`` holds a tantivy index (its ``meta.json``)."""
        return (Path(path) / "meta.json").is_file()


ENGINE = TantivyEngine()
