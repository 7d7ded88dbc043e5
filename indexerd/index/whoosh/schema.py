"""The Whoosh schema of indexerd's index, and the names older indexes pickled.

Whoosh pickles the schema -- field types, analyzer and posting format classes *by reference*
(module path and class name) -- into every TOC.  Indexes written before the package layout name
``indexerd.analysis.FusedStemmingAnalyzer`` and ``indexerd.analysis.FusedPositions``;
:func:`keep_old_names_importable` registers those module paths so such an index still opens.
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
    """The schema of a new index: ``key`` (unique, sortable), ``source``, stored ``path``,
    ``title`` (boosted 3x) and ``content`` analysed by ``FusedStemmingAnalyzer``, ``text_z``
    (zlib-compressed text for snippets), ``last_modified`` (naive UTC), ``date_source``,
    ``media_type``, ``size`` (bytes)."""
    from whoosh.fields import DATETIME, ID, NUMERIC, STORED, TEXT, Schema

    from indexerd.index.whoosh.analysis import FusedStemmingAnalyzer
    from indexerd.index.whoosh.patches import patch_schema

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
    patch_schema(schema)
    return schema
