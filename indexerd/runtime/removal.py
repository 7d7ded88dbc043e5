"""Sources the config no longer names: which they are (in a cluster, which are this node's to
forget), and forgetting one: its documents leave the index and the store, then its crawl rows,
run record and meta values.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from indexerd.sources.registry import kind, meta_prefixes

if TYPE_CHECKING:
    from indexerd.pipeline.stages import Pipeline
    from indexerd.runtime.indexer import Indexer

log = logging.getLogger(__name__)

#: documents of a removed source handed to the writer at once (a stop is noticed between batches)
FORGET_BATCH = 1000


def removed_sources(ix: Indexer) -> list[str]:
    """Sources the store holds anything of that the config no longer names.  Ad-hoc trees of
    ``indexerd index PATH`` (named by their absolute path, which no configured name can be)
    are not configured sources and are kept."""
    gone = {n for n in ix.store.known_sources() - set(ix.sources) if not n.startswith("/")}
    if ix.state.shared and gone:
        gone = _removed_from_cluster(ix, gone)
    return sorted(gone)


def _removed_from_cluster(ix: Indexer, gone: set[str]) -> set[str]:
    """Of the sources this node's config does not name, those the cluster has removed: a
    filesystem source this node ran (another node's trees are never its to forget), or a
    web or SQL source that no live node's config names.  A source with no run record yet is
    left alone (nothing says whose it is)."""
    if ix.cluster_node is not None:
        ix.cluster_node.beat_now()  # the source list the others check against is ours now
    store = ix.cluster_store
    runs = store.source_runs()
    named = store.live_node_sources() - set(ix.sources)
    out = set()
    for n in gone - named:
        run = runs.get(n)
        if run is None:
            continue
        if kind(run["kind"]).node_owned and run["node"] != ix.node:
            continue
        out.add(n)
    return out


def forget_sources(pipeline: Pipeline, names: Iterable[str],
                   cancel: threading.Event | None = None) -> dict[str, int]:
    """Forget everything about each source in ``names`` (removed from the config): its
    documents leave the index and the store (through the writer, committed), then its crawl
    frontier, run record and meta values (a SQL source's full-load mark) go.

    Runs to the end before any pass of a new source starts (the daemon's start and reload
    call it first), so a source renamed in the config -- whose new name indexes the same keys
    -- never loses a document to the purge of its old name.  Interrupted (``cancel`` set, a
    ``kill -9``, a failed commit), it leaves the source's rows in the store and the next
    start finishes it.

    Returns ``{name: documents deleted}`` for the sources fully forgotten.

    Raises:
        RetryLater: the index commit failed (the rest is left for the next start).
    """
    done: dict[str, int] = {}
    for name in names:
        deleted = 0
        batch: list[str] = []
        keys = pipeline.store.iter_keys(source=name)  # in key order, a chunk at a time
        while True:
            key = next(keys, None)
            if key is not None:
                batch.append(key)
            if batch and (key is None or len(batch) == FORGET_BATCH):
                if cancel is not None and cancel.is_set():
                    log.info("removal of source %s interrupted; it resumes at the next start", name)
                    return done
                pipeline.writer.submit_remove_many(batch, urgent=False)
                deleted += len(batch)
                batch = []
            if key is None:
                break
        pipeline.flush()
        pipeline.store.forget_source(name, meta_prefixes(name))
        done[name] = deleted
        log.info("removed source %s: %d documents deleted, its state forgotten", name, deleted)
    return done
