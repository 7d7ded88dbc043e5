"""Repairs at a start: an index rebuilt from the sources (another engine or analysis wrote it, or
it is corrupt), and the store and the index made to agree after a crash."""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from indexerd.core.errors import StoreError
from indexerd.core.store import DocumentRecord, StateStore

if TYPE_CHECKING:
    from indexerd.index.base import SearchIndex

log = logging.getLogger("indexerd.runtime.indexer")  # its lines, as before they moved here
UTC = timezone.utc
#: the store's meta key holding when the index was last rebuilt from the sources (aware UTC, as
#: the store writes times): searches are partial until each source's pass ends after it
REBUILT_AT_KEY = "index_rebuilt_at"


def rebuilt_at(store: StateStore) -> datetime | None:
    """When the index was last rebuilt from the sources (aware UTC), None if never (since the
    time was first recorded)."""
    from indexerd.core.store.values import from_db_time

    return from_db_time(store.get_meta(REBUILT_AT_KEY))


def rebuild_pending(run: dict | None, rebuilt: datetime | None) -> bool:
    """Whether a source's next pass must read every document again, unconditionally (a forced
    pass: no validators, no unchanged stat), because the index was rebuilt at ``rebuilt`` (aware
    UTC; None: never) after its last completed pass ended, or after its interrupted pass began
    (that pass does not resume: what it read before the rebuild is in the store, not in the
    index).  ``run``: the source's row of :meth:`Store.source_runs` (None: it never ran, so its
    first pass reads everything anyway)."""
    if rebuilt is None or run is None:
        return False
    if run.get("completed_at") is not None:
        return run["completed_at"] < rebuilt
    began = run.get("running_since") or run.get("started_at")
    return began is not None and began < rebuilt


def rebuild(state_path: Path, store: StateStore, why: str | None = None) -> None:
    """Make every document be read again into a new index: an index another engine or text
    analysis wrote (``why``) is deleted; one rebuilt on request (``--rebuild``, a corrupt
    index) is moved aside to ``index.broken-<UTC time>``."""
    from indexerd.index import index_dir

    ix_dir = index_dir(state_path)
    if why is not None:
        log.warning("%s: rebuilding the index from the sources; the %d documents the state store "
                    "knows are read again by the next pass of each source", why, store.count_documents())
        if ix_dir.exists():
            shutil.rmtree(ix_dir)
    elif ix_dir.exists():
        aside = state_path / f"index.broken-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
        shutil.move(str(ix_dir), str(aside))
        log.warning("moved the old index to %s", aside)
    store.reset_every_stat()  # searches are partial until each source's next pass ends
    store.write_batch([], meta={"index_generation": "", REBUILT_AT_KEY: datetime.now(UTC).isoformat()})

#: The shared store's meta key holding the identity of the cluster's index.
CLUSTER_IDENTITY_KEY = "cluster:index_identity"


def cluster_identity(wanted, index_settings) -> str:
    """The JSON every node of a cluster must agree on: the index's identity and where it is
    (``[index.postgresql]`` url without password, and schema)."""
    from indexerd.core.pgaddress import PgAddress, strip_password

    pg = getattr(index_settings, "postgresql", None)
    d = json.loads(wanted.as_json())
    if pg is not None:
        address = PgAddress.from_settings(pg)
        d["where"] = f"{strip_password(address.url)} schema {address.schema}"
    return json.dumps(d, sort_keys=True)


def check_cluster_identity(store: StateStore, wanted: str, *, rebuild: bool,
                           index_documents: Callable[[], int] = lambda: 0) -> None:
    """A node joining a cluster must write the shared index as every other node does, in the
    same place (``wanted``: :func:`cluster_identity`; another server or schema would leave it
    searching an index of its own), and another engine or text analysis would make it empty the
    shared index (every node's documents) at
    its start, and the next node with the old config empty it again.  The first node records
    the identity (:data:`CLUSTER_IDENTITY_KEY`); ``indexerd index --rebuild`` on one node
    changes it for the whole cluster.

    A store that records no identity yet is a new cluster's, and a new cluster's index is empty:
    ``index_documents()`` (the documents the shared index holds) above 0 means another store
    already fills that index -- most often a ``[store] schema`` or url that differs from the
    other nodes' by a typo, which would make this node a cluster of its own, crawling every
    site again beside the others with politeness leases of its own.

    Raises:
        ConfigError: this node's ``[index]`` asks for another identity than the cluster's, or
            its store is new and the index it names already holds documents.
    """
    from indexerd.core.errors import ConfigError

    recorded = store.get_meta(CLUSTER_IDENTITY_KEY)
    if recorded == wanted:
        return
    if recorded is not None and not rebuild:
        raise ConfigError(f"{store.where}: the cluster's index is {recorded} and this node's config asks for "
                          f"{wanted}: give every node the same [index] settings (or run "
                          f"`indexerd index --rebuild` on one node to change the cluster's index, which "
                          f"makes every node read its sources again)")
    if recorded is None and not rebuild:
        held = index_documents()
        if held:
            raise ConfigError(
                f"{store.where}: this state store is new (no node has used it), but the index it is to share "
                f"({json.loads(wanted).get('where', 'the configured index')}) already holds {held:,} document{'' if held == 1 else 's'}, "
                f"written with another store: give every node the same [store] url and schema as the nodes "
                f"already running; for a new cluster give it an index of its own ([index.postgresql] schema), "
                f"or, to move the index to this store, stop the nodes of the other one and run "
                f"`indexerd index --rebuild` here (every source is read again)")
    store.write_batch([], meta={CLUSTER_IDENTITY_KEY: wanted})


def reconcile_after_crash(state_path: Path, store: StateStore, index: Callable[[], SearchIndex]) -> None:
    """After a crash the store may lag the index (or the index may be gone): repair both.
    ``index()`` opens the index (only called when there is one on disk).

    The writer records the index's commit token (opaque, defined by the engine) with every
    store batch (meta ``index_generation``); when the token on disk differs, documents the
    store believes indexed but the index lacks are marked stale (re-read next pass), so are
    documents the index holds while the store says they are not indexed (skipped, an error:
    the index's copy is newer than the row), and documents only the index knows get a stale
    row (re-indexed if they still exist, deleted if not).
    """
    from indexerd.index import on_disk_token

    on_disk = on_disk_token(state_path)
    recorded = store.get_meta("index_generation")
    if on_disk is None and next(store.iter_keys(status="indexed", chunk=1), None) is None:
        return
    if recorded and on_disk is not None and recorded == on_disk:
        return
    started = time.monotonic()
    missing = set(store.iter_keys(status="indexed"))  # the one whole set: the index's keys come in no order
    orphans = []
    if on_disk is not None:
        unmatched: dict[str, str] = {}  # in the index, not indexed in the store: known at all?
        for k, src in index().keys():
            if k in missing:
                missing.discard(k)
            else:
                unmatched[k] = src
        known = store.existing_keys(unmatched)
        orphans = [DocumentRecord(key=k, source=src, status="stale", reason="reconcile")
                   for k, src in unmatched.items() if k not in known]
        # known, but not as indexed (skipped, an error): the index got a newer copy whose row
        # was lost -- read again, so that the pass replaces or deletes that copy
        missing.update(k for k in unmatched if k in known)
    if missing:
        store.reset_stats(missing)
    token = index().commit_token() if on_disk is not None else ""
    # only_new: on a shared store another node may have written the row since `known` was read
    store.write_batch(orphans, meta={"index_generation": token}, only_new=True)
    if missing or orphans:
        log.warning("reconcile: %d documents missing from the index will be re-indexed, "
                    "%d unknown to the store will be checked (%.2f s)",
                    len(missing), len(orphans), time.monotonic() - started)


#: store meta key: :func:`~indexerd.index.opening.files_fingerprint` of the index when the last
#: process that used it closed it
INDEX_FILES_META = "index_files_seen"


def index_files_as_left(state_path: Path, store: StateStore) -> bool:
    """Whether the index's files are as the last process that used the index left them (the
    fingerprint :func:`record_index_files` stored equals today's): that index was read or
    written without error then, so a start that changes nothing need not open it to find it
    corrupt.  False when no fingerprint was stored (a first start, a crash)."""
    from indexerd.index import files_fingerprint

    seen = store.get_meta(INDEX_FILES_META)
    return seen is not None and seen == files_fingerprint(state_path)


def record_index_files(state_path: Path, store: StateStore) -> None:
    """Store the index's :func:`~indexerd.index.opening.files_fingerprint` after the index was
    used and closed cleanly (a state dir's own store only: a cluster's meta is shared).  A store
    that cannot be written costs the next start only an open of the index."""
    from indexerd.index import files_fingerprint

    fingerprint = files_fingerprint(state_path)
    if fingerprint is None or fingerprint == store.get_meta(INDEX_FILES_META):
        return  # nothing changed since it was recorded: no write
    try:
        store.write_batch([], meta={INDEX_FILES_META: fingerprint})
    except StoreError as e:
        log.debug("cannot record the index's fingerprint: %s", e)
