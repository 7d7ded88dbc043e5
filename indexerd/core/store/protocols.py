"""The state store's interface, declared by concern: what the rest of indexerd may ask of a store.

A consumer names the narrowest part it uses (a pass's documents: :class:`DocumentStore`; ``ctl
status``: :class:`RunStore` and :class:`DocumentStore`; a cluster crawl:
:class:`SharedFrontierStore`), or :class:`StateStore` (documents, runs and crawl rows: what both
stores offer) or :class:`ClusterStateStore` (also the cluster's rows: PostgreSQL only).

Each part has one implementation in this package, a mixin written once in portable SQL over
either connection (:mod:`.connection`): :class:`~indexerd.core.store.Store` (SQLite) and
:class:`~indexerd.core.store.PgStore` (PostgreSQL) are checked against these protocols by mypy
(:func:`_conforms`) and against each other by one conformance suite
(tests/test_store_conformance.py).  Each method's whole contract (units, order, errors) is in its
implementation's docstring; the protocol keeps its first line.
"""

from __future__ import annotations

from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Protocol, Self, Sequence

if TYPE_CHECKING:
    from indexerd.core.store import PgStore, Store
    from indexerd.core.store.cluster import ClusterTimings
    from indexerd.core.store.documents import DocumentRecord
    from indexerd.core.store.sharedfrontier import ClaimFence

__all__ = ["ClusterStateStore", "ClusterStore", "CrawlStore", "DocumentStore", "RunStore",
           "Row", "SharedFrontierStore", "StateStore", "StoreBasics"]

#: one row as the stores return it: column name -> value (text, numbers, None; times as the
#: ISO 8601 UTC text of :func:`indexerd.core.store.values.to_db_time`)
Row = dict[str, Any]


class StoreBasics(Protocol):
    """What every store offers beside its rows: its name in messages, its schema version,
    ``meta`` values, close."""

    #: the store as messages name it (the file, or the masked URL and schema)
    where: str

    @property
    def schema_version(self) -> int:
        """The schema version the store's database holds."""
        ...

    def get_meta(self, key: str) -> str | None:
        """The ``meta`` value of ``key``, or None."""
        ...

    def close(self) -> None:
        """Close the connection (idempotent)."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...


class DocumentStore(Protocol):
    """The document rows: what was indexed, by key, with its stat, hash, dates and verdict.

    Implemented by :class:`~indexerd.core.store.documents.DocumentRows` on both connections.
    """

    def get(self, key: str) -> DocumentRecord | None:
        """The record for ``key``, or None."""
        ...

    def stat_rows(self, source: str, prefix: str | None=None, *, chunk: int | None=None) -> Iterator[tuple[str, int | None, int | None, int | None, int | None, str | None]]:
        """``(key, mtime_ns, size, ctime_ns, ino, reason)`` of every document of ``source`` (whose key starts with ``prefix`` when given) in ascending key order, read ``chunk`` rows at a time by key (keyset pagination on the ``(source, key, ...)`` index: each chunk is one whole query, so no cursor stays open and the connection is free between chunks).  The reconcile merges them with the walk (:meth:`indexerd.sources.files.scan.FileSource.scan`): its change test (:func:`indexerd.sources.files.change.unchanged`).  ``ctime_ns`` and ``ino`` are None on rows written before schema 5 (and ``ctime_ns`` 0 when the stat was taken too close to a change to be trusted).  A row written behind the last key read is not seen; one written ahead of it is."""
        ...

    def iter_keys(self, source: str | None=None, status: str | None=None, *, chunk: int | None=None) -> Iterator[str]:
        """Every key (of one source / with one status when given) in ascending order, read ``chunk`` at a time by key as :meth:`stat_rows`: the streamed form of :meth:`keys`."""
        ...

    def set_stat_baseline(self, rows: Iterable[tuple[int, int, str, int, int]]) -> None:
        """Record ``(ctime_ns, ino, key, mtime_ns, size)`` on rows that have no ctime yet (written before schema 5) and still hold that mtime and size, in one transaction; a row rewritten meanwhile is left alone."""
        ...

    def keys(self, source: str | None=None, status: str | None=None) -> set[str]:
        """Every key (of one source / with one status when given)."""
        ...

    def existing_keys(self, keys: Iterable[str], *, chunk: int=500) -> set[str]:
        """Those of ``keys`` that have a row, looked up ``chunk`` at a time."""
        ...

    def content_hashes(self, keys: Iterable[str], *, chunk: int=500) -> dict[str, str]:
        """``{key: content hash}`` of those of ``keys`` that are indexed with a recorded hash, looked up ``chunk`` at a time."""
        ...

    def count_documents(self) -> int:
        """How many rows the store holds (every source, every status)."""
        ...

    def indexed_with_hash(self, source: str, content_hash: str) -> list[str]:
        """Keys of the indexed documents of ``source`` whose content hash is ``content_hash``."""
        ...

    def keys_with_prefix(self, source: str, prefix: str) -> set[str]:
        """Keys of ``source`` that start with ``prefix`` (every document below a directory)."""
        ...

    def iter_records(self, *, source: str | None=None, lm_from: datetime | None=None, lm_to: datetime | None=None, order: str='key') -> Iterator[DocumentRecord]:
        """Records, optionally of one source and with ``lm_from <= last_modified < lm_to``."""
        ...

    def counts_by_source(self) -> dict[str, dict[str, int]]:
        """``{source: {status: n}}``, from the counts the store keeps as document rows change (``document_counts``, kept by triggers): the cost is the number of sources and statuses, not of documents."""
        ...

    def media_types(self) -> list[str]:
        """The media types of indexed documents, sorted."""
        ...

    def write_batch(self, upserts: Iterable[DocumentRecord], deletes: Iterable[str]=(), meta: dict[str, str] | None=None, *, only_new: bool=False) -> None:
        """Apply upserts, deletions and ``meta`` values in one transaction (all or nothing). ``only_new``: a record whose key has a row already leaves that row as it is."""
        ...

    def reset_every_stat(self) -> None:
        """:meth:`reset_stats` of every row in one statement: every document is read and indexed again by the next pass of its source (the index is rebuilt)."""
        ...

    def reset_stats(self, keys: Iterable[str]) -> None:
        """Forget the stored stat and hash of ``keys`` so the next pass reads and re-indexes them."""
        ...


class RunStore(Protocol):
    """Each source's passes: the last one, one under way, the sources known.

    Implemented by :class:`~indexerd.core.store.runs.SourceRuns` on both connections.
    """

    def source_runs(self) -> dict[str, Row]:
        """Last run of each source: ``{source: {kind, started_at, finished_at, counts, completed_at, running_since, node}}`` (aware UTC or None; ``running_since`` set: a pass started and never ended, it was interrupted; ``node``: the cluster node that ran it, None on one machine)."""
        ...

    def known_sources(self) -> set[str]:
        """Every source name the store holds anything of (documents, crawl rows, run records): the documents' from their counts (``document_counts``), the crawl's by a loose index scan of its primary key (one index seek per source, the next name after the last one found), so the cost is the number of sources, not of rows."""
        ...

    def pass_started(self, source: str, kind: str, started_at: datetime, node: str | None=None) -> None:
        """Mark a pass of ``source`` as running (cleared by :meth:`record_run`; still set at the next start means it was interrupted) on ``node`` (a cluster's node name, else None)."""
        ...

    def record_run(self, source: str, kind: str, started_at: datetime, finished_at: datetime | None, counts: Row, *, completed: bool=True) -> None:
        """Remember the last pass of a source (for ``ctl status``) and clear its running mark; ``completed`` (it ran to its end and did not fail) also makes ``finished_at`` the time the next interval counts from."""
        ...

    def forget_source(self, source: str, meta_prefixes: Sequence[str]) -> None:
        """Forget everything but the document rows of a removed source, in one transaction: its frontier and seen set, its run record, and its meta values whose keys start with one of ``meta_prefixes`` (its kind's: ``sql:<source>:``, a SQL source's full-load mark).  Document rows go through the writer first."""
        ...


class CrawlStore(Protocol):
    """A web source's crawl rows: the frontier and the seen set, what is due, outlinks.

    Implemented by :class:`~indexerd.core.store.crawl.CrawlRows` on both connections.
    """

    def crawl_rows(self, source: str) -> dict[str, Row]:
        """Every crawl row of ``source`` as ``{url: {column: value}}`` (without ``links``), except the frontier's overflow on disk (state ``spilled``: :meth:`crawl_spilled`): the whole source at once, for tests and inspection; a pass reads :meth:`crawl_state_row` and :meth:`crawl_rows_chunked`."""
        ...

    def crawl_state_row(self, source: str, url: str, *, spilled: bool=False) -> Row | None:
        """The crawl row of ``url`` in ``source`` (without ``links``), or None when it has none or (unless ``spilled``) only a place in the frontier's overflow (state ``spilled``)."""
        ...

    def crawl_state_rows(self, source: str, urls: Iterable[str], *, spilled: bool=False) -> dict[str, Row]:
        """The crawl rows of those of ``urls`` that have one in ``source``, as ``{url: {column: value}}`` (without ``links``; a row in the frontier's overflow, state ``spilled``, only when ``spilled``); :data:`STATE_ROWS_CHUNK` URLs a query."""
        ...

    def crawl_rows_chunked(self, source: str, *, chunk: int=2000) -> Iterator[Row]:
        """The rows of :meth:`crawl_rows` in URL order, read ``chunk`` at a time by URL (keyset pagination on the primary key: each chunk one whole query, no cursor left open)."""
        ...

    def crawl_due_rows(self, source: str, before_pass: int, due_by: str) -> list[Row]:
        """The rows of ``source`` a new pass asks again because they are due: pages asked in a pass before ``before_pass`` (not sitemap files, not confirmed gone) whose ``due_at`` is NULL (never scheduled) or at most ``due_by`` (the store's time text, :func:`~indexerd.core.store.values.to_db_time`), without ``links``."""
        ...

    def crawl_pass_rows(self, source: str, pass_id: int) -> list[Row]:
        """The rows of pass ``pass_id`` of ``source`` (not the frontier's overflow), without ``links``, in discovery order: what that pass queued and asked, through the ``crawl_pass`` index (the cost is that pass's work, not the source's)."""
        ...

    def crawl_indexed_unstored(self, source: str, pass_id: int) -> list[Row]:
        """The rows of pass ``pass_id`` of ``source`` that say their page was indexed (``last_outcome`` ``indexed:...``; ``Verdict.INDEXED:...`` as older rows spell it) while the store holds no document under their key (``doc_key``, else the URL): the crawl row was written and the document's write was lost (a failed commit, a database restart, ``kill -9`` before the commit).  One query; the cost is that pass's rows (through ``crawl_pass``) and one key lookup each, and only the lost ones are returned."""
        ...

    def crawl_forget_unasked(self, source: str, pass_id: int) -> int:
        """Delete the rows pass ``pass_id`` of ``source`` queued and never asked (a pass a stop ended before it asked them; a finished pass forgets its own): they are found again if still linked.  Returns how many were deleted."""
        ...

    def crawl_spilled(self, source: str, pass_id: int, limit: int) -> list[Row]:
        """At most ``limit`` rows of the frontier's overflow on disk (state ``spilled``) of pass ``pass_id``, best first (fewest hops, then discovery order)."""
        ...

    def crawl_drop_spilled(self, source: str, since_pass: int) -> None:
        """Forget the frontier's overflow on disk of ``source`` left by pass ``since_pass`` and later (a pass finished or began; an older pass's overflow was dropped by its own end or by the next start), through ``crawl_pass``: the cost is those passes' rows."""
        ...

    def crawl_orphan_keys(self, source: str) -> list[str]:
        """The keys of ``source``'s indexed documents whose page no crawl row will ask again: no row under that URL (a page first fetched by a process killed before its row was written: its document committed, its row not), or a row that says the page is gone (its deletion's commit lost).  Read after an interrupted pass only: the cost is the source's indexed documents, one key lookup each (``documents_source``, the crawl's primary key).  A document kept under a canonical key other than its URL is listed too (asking it once more is harmless)."""
        ...

    def crawl_links(self, source: str, url: str) -> str | None:
        """The JSON list of outlinks stored for ``url`` at its last parse, or None."""
        ...

    def crawl_write(self, source: str, rows: Iterable[Row], deletes: Iterable[str]=(), meta: dict[str, str] | None=None, links: dict[str, str | None] | None=None, requisites: dict[str, tuple[bool, list[str]] | None] | None=None) -> None:
        """Upsert crawl rows (dicts with every column of :attr:`CRAWL_COLUMNS`), set the ``links`` of the URLs in ``links``, replace the page requisites of the URLs in ``requisites``, delete URLs (and the requisites they referenced) and set meta keys, in one transaction."""
        ...

    def crawl_requisites_referenced(self, source: str, urls: Iterable[str]) -> set[str]:
        """Those of the page requisites ``urls`` that a page kept in the mirror still needs, directly or through requisites it needs (stylesheets, redirects)."""
        ...

    def crawl_drop_requisites(self, source: str, urls: Iterable[str]) -> None:
        """Delete the crawl rows of the page requisites ``urls`` no page needs any more, and the requisites they referenced themselves, in one transaction."""
        ...

    def crawl_requisites_to_check(self, source: str) -> list[str]:
        """The URLs a referrer referenced before its references were replaced or cleared since the last pass began: the next pass checks them, due or not."""
        ...

    def crawl_requisites_checked(self, source: str, urls: Iterable[str]) -> None:
        """Forget the marks :meth:`crawl_requisites_to_check` returned for ``urls``."""
        ...

    def crawl_trust_requisite_references(self, source: str) -> None:
        """Drop the mark the migration put on the requisites known before references were kept (after a finished ``ctl reindex --source`` pass)."""
        ...

    def crawl_row(self, source: str, url: str) -> Row | None:
        """The crawl row of ``url`` in web source ``source`` (by primary key), or None."""
        ...

    def crawl_due_now(self, source: str, key: str, reason: str) -> None:
        """Make the page indexed under ``key`` (its crawl row's URL, or a redirect's target ``doc_key``) due at the next pass of ``source``: its adaptive-recrawl ``due_at`` is cleared (None is due: :func:`indexerd.sources.web.recrawl.is_due`), its learnt interval kept."""
        ...


class ClusterStore(Protocol):
    """A cluster's rows: nodes and heartbeats, host leases, robots.txt verdicts shared by every node.

    Implemented by :class:`~indexerd.core.store.cluster.ClusterRows` on both connections.
    """

    @property
    def timings(self) -> ClusterTimings:
        """The opening node's timings (``[store] lease``): host leases and claims, heartbeat, death."""
        ...

    def register_node(self, name: str, host: str, pid: int, version: str, sources: list[str]) -> None:
        """Record node ``name`` as started (its machine, pid, indexerd version and source names)."""
        ...

    def heartbeat(self, name: str, working_on: str, sources: list[str] | None=None) -> None:
        """Node ``name`` is alive, doing ``working_on`` (a short text for ``ctl status``), with ``sources`` configured (None: as before); the host leases it holds are renewed for its ``timings.host_lease``, its claims on hosts of a shared crawl for its ``timings.host_claim`` (seconds)."""
        ...

    def node_stopped(self, name: str) -> None:
        """Node ``name`` stopped cleanly: it is dead at once and every host lease it holds is handed back (the next request to those hosts keeps their politeness delay), and so is every host of a shared crawl it claimed."""
        ...

    def nodes(self) -> list[Row]:
        """Every node ever registered, by name: ``{name, host, pid, version, started_at, alive, stopped (cleanly, by SIGTERM), seconds_since_heartbeat, working_on, sources}``."""
        ...

    def live_node_sources(self) -> set[str]:
        """The source names configured on any live node."""
        ...

    def try_host_lease(self, host: str, node: str, lease_seconds: float) -> tuple[float, int, float]:
        """Take the politeness slot of ``host`` for ``node`` if no live lease holds it and its next-allowed time has come."""
        ...

    def release_host_lease(self, host: str, node: str, delay: float, failures: int) -> None:
        """Hand back ``node``'s lease on ``host``: the next request to it may start ``delay`` seconds from now (database time); ``failures`` is the host's run of failures."""
        ...

    def host_leases(self) -> list[Row]:
        """Every host's lease: ``{host, node (None: free), next_in (seconds), failures, last_delay, requests}``."""
        ...

    def robots_put(self, host: str, status: str, body: bytes | None, detail: str, ttl_seconds: float) -> None:
        """Keep ``host``'s robots.txt verdict (``status`` ok / allow-all / unreachable, the body for ``ok``) for every node, for ``ttl_seconds`` from now (database time)."""
        ...

    def robots_get(self, host: str) -> tuple[str, bytes | None, str, float] | None:
        """``(status, body, detail, seconds left)`` of ``host``'s shared verdict, None when there is none or it expired."""
        ...

    def frontier_by_host(self) -> list[Row]:
        """The shared frontier of each web source's current pass, per host: ``{source, host, queued, done, node}`` (the pass's URLs waiting or queued, and asked; a canonical URL always has a path, so its host is what its second slash and third enclose; ``node``: the node whose claim on the host holds (:mod:`indexerd.core.store.sharedfrontier`), None: nobody's).  Read through ``crawl_pass``: the cost is the current passes' rows, not every URL the sources know."""
        ...


class SharedFrontierStore(Protocol):
    """The shared crawl frontier of a pass every node crawls: offers, host claims, takes, the pass's end.

    Implemented by :class:`~indexerd.core.store.sharedfrontier.SharedFrontierRows` on both connections.
    """

    def frontier_reset(self, source: str) -> None:
        """A new pass of ``source`` begins: forget the host claims of the last one and what the nodes fetched in it."""
        ...

    def frontier_offer(self, source: str, pass_id: int, rows: Iterable[Row]) -> None:
        """Queue URLs for pass ``pass_id`` in the store: each of ``rows`` (``{column: value}`` with at least the offer's columns: url, pass_id, state -- ``spilled``, in no node's memory --, hops, seed_depth, seq, via, origin, redirects) is inserted, or updated when its stored row belongs to an earlier pass (a URL seen in this pass already, by any node, is left as it is); their hosts are marked pending.  One transaction."""
        ...

    def frontier_claim(self, source: str, pass_id: int, node: str, limit: int) -> list[str]:
        """Claim for ``node`` at most ``limit`` hosts of pass ``pass_id`` that have work (pending or active) and no live node's claim, skipping rows other nodes are claiming now; returns the hosts claimed (each marked pending, so that what waits for it is read after :meth:`frontier_pending_hosts`)."""
        ...

    def frontier_claim_tokens(self, source: str, pass_id: int, node: str, limit: int) -> dict[str, int]:
        """Claim hosts as :meth:`frontier_claim` does; returns them in host order, each with its new fencing token (larger than any the host had)."""
        ...

    def frontier_count(self, source: str, pass_id: int, node: str, counts: dict[str, tuple[int, int]]) -> None:
        """Add to what ``node`` fetched in pass ``pass_id`` of ``source``: ``{host: (GET requests answered, requests without an answer)}`` since the last call.  One transaction."""
        ...

    def frontier_fetched(self) -> list[Row]:
        """What each node fetched of each host in the latest pass of every web source the cluster crawled together: ``{source, pass_id, host, node, fetched, errors}``."""
        ...

    def frontier_claim_rows(self, source: str, node: str, pass_id: int | None=None) -> dict[str, tuple[float, int]]:
        """:meth:`frontier_claims` with each claim's fencing token: ``{host: (seconds it still holds, token)}``; a renewal keeps the token."""
        ...

    def frontier_write(self, source: str, fences: dict[str, ClaimFence], rows: Iterable[Row],
                       deletes: Iterable[str] = (), meta: dict[str, str] | None = None,
                       links: dict[str, str | None] | None = None,
                       requisites: dict[str, tuple[bool, list[str]] | None] | None = None) -> set[str]:
        """``crawl_write`` fenced: the rows, deletions, outlinks and page requisites of a host in ``fences`` are written only while the host's row takes that claim (checked at the transaction's start and by every statement); returns the hosts refused at the check."""
        ...

    def frontier_stale(self, fences: Iterable[ClaimFence]) -> set[ClaimFence]:
        """Those of ``fences`` whose host's row no longer takes their writes (claimed since, or a new pass began).  One query."""
        ...

    def frontier_load(self, source: str, pass_id: int, node: str) -> tuple[int, int]:
        """``(hosts with work in pass pass_id, of them claimed by node)`` -- what a node's fair share of the hosts is computed from."""
        ...

    def frontier_held(self, source: str, node: str, pass_id: int | None=None) -> set[str]:
        """The hosts of ``source`` whose claim ``node`` holds (:meth:`frontier_claims`' hosts)."""
        ...

    def frontier_claims(self, source: str, node: str, pass_id: int | None=None) -> dict[str, float]:
        """The hosts of ``source`` whose claim ``node`` holds, each with the seconds its claim still holds (database time; no other node may take it before then while ``node`` is alive).  A claim that ran out (the store was unreachable and the heartbeat could not renew it) and that no other node took since is renewed here: the host is still this node's, and nothing it fetched is fetched again; a host another node claimed meanwhile is not in the answer.  ``pass_id``: only the hosts of that pass."""
        ...

    def frontier_pending_hosts(self, source: str, node: str) -> list[str]:
        """The hosts ``node`` holds that are pending, now marked not pending and active: the caller reads what waits for them (:meth:`frontier_waiting`) right after; a URL queued after this marks its host pending again."""
        ...

    def frontier_host_rows(self, source: str, host: str, pass_id: int) -> list[Row]:
        """The crawl rows (:attr:`CRAWL_COLUMNS`) of ``host`` (``scheme://host[:port]``) in pass ``pass_id`` of ``source`` (not those waiting in the store, state ``spilled``), in discovery order: what that pass queued and asked of the host, through ``crawl_pass`` (the cost is the pass's rows, not every URL the host ever had)."""
        ...

    def frontier_take(self, source: str, host: str, pass_id: int, limit: int) -> list[Row]:
        """Take at most ``limit`` crawl rows of ``host`` waiting in the store in pass ``pass_id`` (state ``spilled``: offered, in no node's memory), best first (fewest hops, then discovery order): they are ``queued`` now (in the taker's memory), in the same statement (``FOR UPDATE SKIP LOCKED``), so no one takes a row twice.  Returned in that order, as they were before the take."""
        ...

    def frontier_pending_again(self, source: str, node: str, host: str) -> None:
        """``node`` read only part of what waits for ``host``: its next round reads more."""
        ...

    def frontier_row(self, source: str, url: str) -> Row | None:
        """The crawl row (:attr:`CRAWL_COLUMNS`) of ``url`` in ``source``, or None."""
        ...

    def frontier_idle(self, source: str, node: str, hosts: Iterable[str]) -> None:
        """``node`` has nothing more of ``hosts`` to do (its URLs were fetched and their rows written): not active any more (still claimed: URLs queued later come to ``node``)."""
        ...

    def frontier_drop(self, source: str, node: str) -> None:
        """``node`` stops crawling this pass with URLs left (its page budget is spent): its hosts are handed back, neither pending nor active -- the URLs it had queued for them wait for the next pass, unless more are queued for a host meanwhile (another node then claims it)."""
        ...

    def frontier_release(self, source: str, node: str, host: str) -> None:
        """``node`` gives ``host`` up in the pass (it holds more than its share, and its waiting URLs are back in the store): pending, for another node to claim."""
        ...

    def frontier_hand_back(self, source: str, node: str) -> None:
        """``node`` leaves the pass before its end (stopped): its hosts are free to claim."""
        ...

    def frontier_over(self, source: str, pass_id: int) -> bool:
        """Whether pass ``pass_id`` of ``source`` is over for the cluster: no host of it pending or active."""
        ...

    def frontier_hosts(self) -> list[Row]:
        """Every host claim: ``{source, host, pass_id, node (None: free or run out), pending, active}``."""
        ...


class StateStore(DocumentStore, RunStore, CrawlStore, StoreBasics, Protocol):
    """Either store: documents, runs and crawl rows (SQLite's :class:`~indexerd.core.store.Store`
    and PostgreSQL's :class:`~indexerd.core.store.PgStore`)."""


class ClusterStateStore(StateStore, ClusterStore, SharedFrontierStore, Protocol):
    """The store a cluster shares (:class:`~indexerd.core.store.PgStore`): also nodes, host
    leases, robots.txt verdicts and the shared frontier."""


def _conforms(sqlite: Store, pg: PgStore) -> tuple[StateStore, StateStore, ClusterStateStore]:
    """Never called: mypy checks here that both stores implement the protocols they claim."""
    return sqlite, pg, pg
