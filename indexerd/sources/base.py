"""The shape every kind of source has: what the daemon, ``indexerd index`` and ``ctl`` ask of one.

A source is built from one config table by the registry (:mod:`indexerd.sources.registry`),
which also holds the facts of its kind (the ctl verb that asks for a pass, what a pass counts,
the start-up rule).  Adding a kind is its package (its config table, :mod:`indexerd.sources.files.table` for one,
and one class satisfying :class:`Source`) and one registry entry: nothing else branches on the
kind (tests/jsonl_kind.py is one in a single module).

:class:`TreeSource` is the capability of a source of local paths (a tree): it reads one path at
a time (a watcher event, ``indexerd index PATH``, ``ctl reindex PATH``) and may be watched for
live changes.  The daemon tests for it with :func:`as_tree` (the protocols are runtime-checkable:
the test sees attributes and methods, not signatures).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

if TYPE_CHECKING:
    from indexerd.core.store.protocols import StateStore

if TYPE_CHECKING:  # the config imports this module: its start stays light
    from indexerd.core.counts import PassCounts
    from indexerd.pipeline.stages import Pipeline
    from indexerd.core.progress import Progress


@runtime_checkable
class Source(Protocol):
    """One configured source of documents.

    Attributes:
        name: the configured ``name`` (unique over every kind).
        kind: the registry name of its kind (``filesystem``, ``sql``, ``web``), which is also
            the config table ``[[sources.<kind>]]``.
        cfg: its config table (the frozen msgspec struct its kind declares; compared at a
            reload to tell a changed source).
        key_prefixes: what the keys of its documents start with (``file:``, ``sql:``,
            ``http://``/``https://``): ``ctl reindex KEY`` finds the source of a key by them.
        unknown_reason: why an item :meth:`reindex` returns is unknown, for the message
            (``full_sql returns no such row``).

    Thread safety: the daemon runs one pass of a source at a time; :meth:`reindex` may run
    beside a pass (each call gets its own pipeline).
    """

    name: str
    kind: str
    cfg: Any
    key_prefixes: tuple[str, ...]
    unknown_reason: str

    def check(self, where: str, *, files: bool) -> None:
        """Check-time tests that connect to nothing (credentials readable, URL parses; a SQLite
        file exists when ``files``).  ``where`` is the table's key path for messages
        (``FILE: sources.sql[0]``).

        Raises:
            ConfigError: naming ``where`` and the key.
        """

    def run_pass(self, pipeline: Pipeline, counts: PassCounts, *, progress: Progress | None = None,
                 forced: bool = False, start: str | None = None,
                 cancel: threading.Event | None = None, recheck: bool = False) -> None:
        """One pass: bring the index up to date with the source.

        Args:
            pipeline: where verdicts go (it counts them in ``counts``).
            counts: this pass's counts; ``counts.failed`` set means the whole pass failed.
            progress: walk/work progress, or None.
            forced: re-index whatever the decision would say (``ctl reindex SOURCE``).
            start: a subtree of a tree to reconcile alone (None: the whole source).
            recheck: ask everything the source knows now, conditionally (``ctl crawl NAME
                --all``: every known page with its validators, whatever adaptive recrawl
                scheduled); a kind that always looks at everything ignores it.
            cancel: once set, the pass ends early; what it did stays, it resumes next time.
        """

    def owns(self, key: str) -> bool:
        """Whether this source may read ``key`` now though nothing is stored for it (a URL in
        its scope, ``sql:<name>/<id>``, a file below its root)."""

    def reindex(self, items: list[str], pipeline: Pipeline, counts: PassCounts, *,
                cancel: threading.Event | None = None) -> list[str]:
        """``ctl reindex``: read these documents again now and index them whatever the decision
        would say; returns the items that are neither stored nor readable (unknown).

        ``items`` are keys (a web or SQL source) or confined paths (a tree, see
        :meth:`TreeSource.confine`).

        Raises:
            IndexerdError: the source cannot be read (exit 1); ConfigError: credentials.
        """

    def on_forgotten(self, store: StateStore, key: str) -> None:
        """``ctl forget KEY`` dropped this source's document ``key``: make the next pass read it
        again if it is still there (a tree's next scan finds it anyway)."""

    def status_facts(self) -> dict[str, object]:
        """What ``ctl status`` shows of the source itself: ``{"root": str | None}`` (a tree's
        root as displayed, None for other kinds)."""

    def close(self) -> None:
        """Release connections and sessions; safe to call twice."""


@runtime_checkable
class TreeSource(Source, Protocol):
    """A source of local paths below ``root`` (a real, absolute path).

    ``watches`` is True when its live changes are wanted (``watch = true``): the daemon then
    watches ``root`` and hands each changed path to :meth:`apply_change`.
    """

    root: str
    watches: bool

    def contains(self, path: str) -> bool:
        """Is the absolute real ``path`` inside ``root`` (the root included)?"""

    def accepts(self, path: str, is_dir: bool) -> bool:
        """Whether a change event of ``path`` below the root concerns this source (selected
        by its include/exclude rules; for a directory, not excluded)."""

    def confine(self, path: str) -> str:
        """The path a control request may name, checked to stay inside the root.

        Raises:
            ValueError: naming the path and why.
        """

    def stat_path(self, path: str) -> os.stat_result | None:
        """The stat of ``path`` as this source sees it (None: missing or not reachable)."""

    def handle_path(self, path: str, pipeline: Pipeline, counts: PassCounts, *,
                    forced: bool = False) -> str:
        """Index, skip or delete one path; returns the verdict (``ignored``: nothing to do)."""

    def apply_change(self, pipeline: Pipeline, path: str, was_dir: bool, counts: PassCounts, *,
                     cancel: threading.Event | None = None) -> None:
        """One path from the change queue: what the path is *now* decides, not what the events
        said (see :func:`indexerd.sources.files.live.apply_change`)."""


#: class -> does it satisfy TreeSource: ``isinstance`` on a runtime protocol costs ~80 us (it
#: looks up every member), too slow for the watcher's per-event test
_TREE_CLASSES: dict[type, bool] = {}


def as_tree(src: Source | None) -> TreeSource | None:
    """``src`` when it is a :class:`TreeSource`, else None (decided once per class: every
    instance of a source class has the same members)."""
    if src is None:
        return None
    cls = type(src)
    ok = _TREE_CLASSES.get(cls)
    if ok is None:
        ok = _TREE_CLASSES[cls] = isinstance(src, TreeSource)
    return cast(TreeSource, src) if ok else None


def trees(sources: Iterable[Source]) -> list[TreeSource]:
    """The tree sources among ``sources`` (an iterable of :class:`Source`), in order."""
    return [t for s in sources if (t := as_tree(s)) is not None]
