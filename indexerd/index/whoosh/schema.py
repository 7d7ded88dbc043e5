"""The Whoosh schema of indexerd's index, and the names older indexes pickled.

Whoosh pickles the schema -- field types, analyzer and posting format classes *by reference*
(module path and class name) -- into every TOC.  Indexes written before the package layout name
``indexerd.analysis.FusedStemmingAnalyzer`` and ``indexerd.analysis.FusedPositions``;
:func:`keep_old_names_importable` registers those module paths so such an index still opens
(to be rebuilt: it was analysed with version 1, see :mod:`indexerd.index.base`).
"""

from __future__ import annotations

import importlib
import sys

#: module paths older indexes pickled -> where those classes live now
OLD_MODULES = {"indexerd.analysis": "indexerd.index.whoosh.analysis"}


def keep_old_names_importable() -> None:
    """Make every module path in :data:`OLD_MODULES` importable (idempotent)."""
    for old, new in OLD_MODULES.items():
        if old not in sys.modules:
            sys.modules[old] = importlib.import_module(new)


def new_schema():
    """The schema of a new index (analysis :data:`~indexerd.index.analysis.ANALYSIS_VERSION`):

    - ``key`` (unique, sortable), ``source`` (sortable), ``date_source``, ``media_type``: raw
      terms, stored;
    - ``title`` (boosted 3x) and ``content``: the engine-neutral analyzer's tokens
      (:class:`~indexerd.index.whoosh.analysis.NeutralAnalyzer`, posting format
      :class:`~indexerd.index.whoosh.analysis.TokenPositions`); the title as shown is stored
      beside its tokens (``_stored_title``); ``headings`` (boosted
      :data:`~indexerd.index.base.HEADINGS_BOOST`) the same analyzer's tokens of the section
      headings;
    - ``ids``: the whole identifiers of title and content (``pg_hba.conf``), space-separated,
      without positions;
    - ``path`` (stored), ``text_z`` (zlib-compressed text for snippets), ``last_modified``
      (naive UTC), ``size`` (bytes).

    Changing any of this changes the on-disk format: bump the engine's ``format_version``.
    """
    from whoosh.fields import DATETIME, ID, KEYWORD, NUMERIC, STORED, TEXT, Schema

    from indexerd.index.base import HEADINGS_BOOST

    from indexerd.index.whoosh.analysis import NeutralAnalyzer, TokenPositions

    analyzer = NeutralAnalyzer()
    schema = Schema(
        key=ID(unique=True, stored=True, sortable=True),
        source=ID(stored=True, sortable=True),
        path=STORED,
        title=TEXT(stored=True, field_boost=3.0, analyzer=analyzer),
        content=TEXT(analyzer=analyzer),
        headings=TEXT(field_boost=HEADINGS_BOOST, analyzer=analyzer),
        ids=KEYWORD(lowercase=False, commas=False, scorable=True),
        text_z=STORED,
        last_modified=DATETIME(stored=True, sortable=True),
        date_source=ID(stored=True),
        media_type=ID(stored=True),
        size=NUMERIC(stored=True, bits=64),
    )
    for name in ("title", "content", "headings"):
        fmt = schema[name].format
        schema[name].format = TokenPositions(field_boost=fmt.field_boost, **fmt.options)
    return schema
