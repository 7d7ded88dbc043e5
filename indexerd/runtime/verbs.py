"""What ``ctl reindex`` and ``ctl forget`` do with one document key, for every kind of source.

The verbs mean the same for files, web pages and SQL rows (README, "the ctl verbs"):

- **reindex**: read the document again now and index it whatever the decision would say -- a
  file re-read (confined to its tree by the daemon), a page fetched once without validators
  through robots.txt and the politeness slot (:meth:`~indexerd.sources.web.source.WebCrawlSource.reindex`), a row read by its id
  (:meth:`SqlFeed.reread`).
- **forget**: drop it from the index and the store now; it comes back at its source's next pass
  if it still exists there (a forgotten SQL row is read again by the next poll).

Keys as typed: ``sql:<source>/<id>``, an http(s) URL (canonicalised: fragment dropped ...), a
``file:`` key or an absolute path (the CLI resolves relative ones).  A key that is neither stored
nor readable by a configured source is unknown (:class:`UnknownKey`, exit 1); a URL or path
outside every source, or a malformed key, is a usage error (:class:`ConfigError`, exit 2).
What a key is -- one naming its source, a local file's, or one a source's scope owns -- and what
is said when no source owns it, its kind declares (:class:`~indexerd.sources.registry.Kind`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from indexerd.output.reports import normalise_key
from indexerd.core.errors import ConfigError, UnknownKey
from indexerd.pipeline.stages import PassCounts, Pipeline
from indexerd.sources.base import Source, TreeSource
from indexerd.sources.registry import UNOWNED, Kind, kind_of_key, named_source, of_kind


def _check_named(sources: Mapping[str, Source], kind: Kind, name: str, key: str, target: str) -> None:
    """The source ``name`` that the key ``key`` of ``kind`` names
    (:func:`~indexerd.sources.registry.named_source`: ``sql:NAME/ID`` -> ``NAME``) is configured
    and owns the key.

    Raises:
        ConfigError: no such source of the kind (naming those configured).
    """
    src = sources.get(name)
    if src is None or not src.owns(key):
        label = kind.label or kind.name
        raise ConfigError(f"{target}: no {label} source named {name!r} (configured {label} sources: "
                          f"{', '.join(of_kind(sources, kind.name)) or 'none'})")


def _owner(sources: Mapping[str, Source], key: str, pipeline: Pipeline) -> Source | None:
    """The source that indexed ``key`` (when its keys look like this one), else the first that
    owns it (:meth:`Source.owns`: a URL in its scope), else None."""
    rec = pipeline.stored(key)
    src = sources.get(rec.source) if rec is not None else None
    if src is not None and key.startswith(src.key_prefixes):
        return src
    return next((s for s in sources.values() if key.startswith(s.key_prefixes) and s.owns(key)), None)


def reindex(sources: Mapping[str, Source], targets: list[str], pipeline: Pipeline, counts: PassCounts, *,
            confined_path: Callable[[str], tuple[TreeSource, str]], cancel: threading.Event | None = None) -> None:
    """Re-read every target now (see the module docstring); counts go to ``counts``.

    ``confined_path(target)`` returns ``(TreeSource, path)`` for a file key or path, or raises
    ConfigError (the daemon's tree confinement).  Targets of one web or SQL source are read
    together (:meth:`Source.reindex`: one fetch session, one connection pool).

    Raises:
        ConfigError: a malformed key, a SQL source that is not configured, a URL outside every
            web source, a path outside every tree (exit 2).
        UnknownKey: a SQL id that is neither stored nor returned by ``full_sql``, or a file that
            is neither stored nor there (nor selected by its source), after every other target
            was read (exit 1: "not known" is one exit code for every kind of key).
        IndexerdError: the database failed (exit 1).
    """
    groups: dict[str, list[str]] = {}
    missing: list[tuple[str, Source]] = []  # files neither there (nor selected by their source) nor stored
    for target in targets:
        key = normalise_key(target)
        kind, named = kind_of_key(key), named_source(key)
        if kind is not None and named is not None:  # the key names its source (sql:NAME/ID)
            _check_named(sources, kind, named, key, target)
            groups.setdefault(named, []).append(key)
        elif kind.key_file is not None if kind is not None else "://" not in key:  # a file's key, a path
            tree, path = confined_path(target)  # read through its tree's confinement
            if tree.reindex([path], pipeline, counts, cancel=cancel):
                missing.append((target, tree))
        else:  # a URL in a source's scope, or a key of another kind
            owner = _owner(sources, key, pipeline)
            if owner is None:
                raise ConfigError(f"{target}: {kind.unowned if kind is not None else UNOWNED}")
            groups.setdefault(owner.name, []).append(key)
    for name, items in groups.items():
        src = sources[name]
        unknown = src.reindex(items, pipeline, counts, cancel=cancel)
        if unknown:
            raise UnknownKey(f"{unknown[0]}: not known to indexerd (not stored, and {src.unknown_reason})")
    if missing:
        target, src = missing[0]
        raise UnknownKey(f"{target}: not known to indexerd (not stored, and {src.unknown_reason})")


def forget(sources: Mapping[str, Source], target: str, pipeline: Pipeline) -> str:
    """Drop the document ``target`` names from the index and the store now; return its key.

    A SQL row is remembered so that the source's next pass reads it again, a web page is made
    due at its source's next crawl whatever its adaptive-recrawl schedule said (as the next scan
    finds a forgotten file).  A crawl of the source running at that moment keeps its own
    schedule for the page; the pass after it asks the page.

    Raises:
        UnknownKey: nothing is stored under the key (exit 1).
    """
    key = normalise_key(target)
    rec = pipeline.stored(key)
    if rec is None:
        raise UnknownKey(f"{target}: not known to indexerd")
    pipeline.gone(key, PassCounts(), "forgotten (ctl forget)")
    src = sources.get(rec.source)
    if src is not None and key.startswith(src.key_prefixes):
        src.on_forgotten(pipeline.store, key)
    return key
