"""The Whoosh engine (``[index] engine = "whoosh"``, the default): the only package that imports
Whoosh.  :mod:`~indexerd.index.whoosh.engine` (the index), ``session`` (the writer), ``schema``,
``patches`` (every change to Whoosh's internals), ``postingpool``, ``mergepolicy``, ``analysis``
(the analyzer in Whoosh's terms) and ``compile`` (the analysed query tree -> Whoosh queries)."""

from indexerd.index.whoosh.engine import WhooshEngine, WhooshIndex

#: The engine object :func:`indexerd.index.base.load_engine` looks up.
ENGINE = WhooshEngine()

__all__ = ["ENGINE", "WhooshIndex"]
