"""The crawl's persistence: one source's URL states and pass state in the state store.

During a pass the :class:`CrawlTable` holds in memory only the working set: the states of the
URLs queued in the frontier and those changed since the last write, plus a bounded cache of
states read back (:data:`CACHE_STATES`).  Any other URL's state is read from the store when the
pass asks for it (:meth:`CrawlTable.get`), and a new pass reads the source's states a chunk at
a time (:meth:`CrawlTable.stored_states`), so a pass's memory grows with what it queues, not
with every URL the source ever knew.  The frontier's overflow waits on disk (state ``spilled``)
until taken back.  Changed states are written back in batches (:meth:`CrawlTable.write_maybe`:
every 200 changed URLs or 2 seconds) with the pass state and the outlinks parsed, in one store
transaction, so a daemon stopped mid-crawl resumes the pass.  In a pass the cluster crawls
together (:meth:`CrawlTable.share`) the table holds this pass's states of the hosts this node
claimed, which the shared frontier (:mod:`indexerd.sources.web.sharedfrontier`) puts there, and
reads the other states of those hosts from the store as they are asked for.
Only the thread that runs the pass uses a table (not thread-safe).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from datetime import datetime, timedelta
from typing import Callable, Iterator, NamedTuple

from indexerd.core.store import PgStore, StateStore, to_db_time
from indexerd.core.store.crawl import Requisites
from indexerd.core.store.sharedfrontier import ClaimFence, url_origin
from indexerd.sources.web.urlstate import PassState, UrlState

#: Spilled states written to the store at once.
SPILL_BATCH = 1000
#: Changed URLs, or seconds since the last write, after which :meth:`CrawlTable.write_maybe` writes.
WRITE_EVERY_URLS = 200
WRITE_EVERY_SECONDS = 2.0
#: URL states read back from the store kept in memory (least recently asked dropped first).
CACHE_STATES = 10_000
#: Crawl rows read per query by :meth:`CrawlTable.stored_states`.
STATE_CHUNK = 2_000


def pass_meta_key(source: str) -> str:
    """The meta key of web source ``source``'s :class:`PassState`."""
    return f"web:{source}:pass"


def scope_meta_key(source: str) -> str:
    """The meta key of the scope fingerprint web source ``source``'s last pass ran with."""
    return f"web:{source}:scope"


class DueStates(NamedTuple):
    """What a new pass starts from, besides its seeds (:meth:`CrawlTable.due_states`).

    Attributes:
        due: the states of URLs asked before that are due (by ``due_at``; all of them when
            every one is due).
        unstored: the states of the last pass's pages said indexed while the store has no
            document for them (the write was lost): asked again now, due or not.
    """

    due: list[UrlState]
    unstored: list[UrlState]


class CrawlTable:
    """The ``crawl`` rows and pass state of source ``source`` in ``store``.

    Attributes:
        rows: ``{url: UrlState}``: the working set (queued, or changed since the last write).
        lazy: a URL not in ``rows`` is looked up in the store (in a shared pass only one of
            a host this node claimed: :meth:`share`).
    """

    def __init__(self, store: StateStore, source: str, *, lazy: bool = True) -> None:
        self.store = store
        self.source = source
        self.lazy = lazy
        self.readable: Callable[[str], bool] | None = None  # a shared pass: see :meth:`share`
        self._with_spilled = False  # a shared pass: rows waiting in the store are read too
        self.meta_key = pass_meta_key(source)
        self.rows: dict[str, UrlState] = {}
        self._cache: OrderedDict[str, UrlState | None] = OrderedDict()  # read back; None: no row
        self._dirty: set[str] = set()
        self._links: dict[str, str | None] = {}  # outlinks parsed in this pass, not yet written
        self._requisites: dict[str, Requisites | None] = {}  # page requisites, the same
        self._spill_buffer: list[UrlState] = []  # spilled states not written yet
        self._meta: dict[str, str] = {}  # meta values written with the next write
        self._last_write = time.monotonic()
        #: a shared pass: the claims the rows of each host are written under (:meth:`fence`)
        self._fences: Callable[[], dict[str, ClaimFence]] | None = None
        self._on_refused: Callable[[set[str], int], None] = lambda hosts, rows: None

    def fence(self, fences: Callable[[], dict[str, ClaimFence]],
              on_refused: Callable[[set[str], int], None]) -> None:
        """A pass the cluster crawls together: the rows of a host in ``fences()`` (origin -> the
        claim this node holds, or held, on it) are written only while the store says that claim
        still holds (:meth:`~indexerd.core.store.sharedfrontier.SharedFrontierRows.frontier_write`);
        ``on_refused(hosts, rows)`` hears of the hosts whose rows the store refused."""
        self._fences, self._on_refused = fences, on_refused

    def _store_write(self, rows: list[dict], deletes: list[str] | None = None, meta: dict[str, str] | None = None,
                     links: dict[str, str | None] | None = None,
                     requisites: dict[str, Requisites | None] | None = None) -> None:
        """One write of crawl rows: fenced in a shared pass (:meth:`fence`), else plain.

        Raises:
            StoreError: the store cannot be written.
        """
        if self._fences is None or not isinstance(self.store, PgStore):
            self.store.crawl_write(self.source, rows, deletes or (), meta, links, requisites)
            return
        refused = self.store.frontier_write(self.source, self._fences(), rows, deletes or (), meta, links,
                                            requisites)
        if refused:
            self._on_refused(refused, sum(1 for r in rows if url_origin(r["url"]) in refused))

    def load(self) -> PassState:
        """The source's pass state (URL states are read as they are asked for).

        Raises:
            StoreError: the store cannot be read.
        """
        return PassState.from_json(self.store.get_meta(self.meta_key))

    def load_pass_state(self) -> PassState:
        """The source's pass state alone (a node joining a pass the cluster crawls together
        reads the rows of each host it claims).

        Raises:
            StoreError: the store cannot be read.
        """
        return PassState.from_json(self.store.get_meta(self.meta_key))

    def stored_states(self) -> Iterator[UrlState]:
        """Every stored state of the source (not the spilled ones), in URL order, read
        :data:`STATE_CHUNK` rows at a time; none is kept (a new or resumed pass goes through
        them once).  States changed in memory and not yet written are not reflected.

        Raises:
            StoreError: the store cannot be read.
        """
        for row in self.store.crawl_rows_chunked(self.source, chunk=STATE_CHUNK):
            yield UrlState.from_row(row)

    def due_states(self, *, before_pass: int, pass_start: datetime, min_interval: float,
                   all_due: bool) -> DueStates:
        """The stored states a new pass ``before_pass`` starts from (:class:`DueStates`),
        through indexed queries: the rows due at ``pass_start`` (aware UTC; due up to half
        ``min_interval`` seconds later counts, as
        :func:`~indexerd.sources.web.recrawl.is_due` says) and the last pass's lost writes.
        ``all_due``: every row asked before is due (a forced pass, adaptive recrawl off), read
        a chunk at a time.

        Raises:
            StoreError: the store cannot be read.
        """
        if all_due:
            due = [st for st in self.stored_states() if st.pass_id < before_pass and st.asked_before]
        else:
            due_by = pass_start + timedelta(seconds=min_interval / 2)
            due = [UrlState.from_row(r) for r in self.store.crawl_due_rows(self.source, before_pass,
                                                                              str(to_db_time(due_by)))]
        lost = [UrlState.from_row(r) for r in self.store.crawl_indexed_unstored(self.source, before_pass - 1)]
        return DueStates(due, lost)

    def pass_states(self, pass_id: int) -> list[UrlState]:
        """The stored states of pass ``pass_id`` (what it queued and asked), by index.

        Raises:
            StoreError: the store cannot be read.
        """
        return [UrlState.from_row(r) for r in self.store.crawl_pass_rows(self.source, pass_id)]

    def scope_fingerprint(self) -> str | None:
        """The scope fingerprint the source's last pass ran with (None: none recorded)."""
        return self.store.get_meta(scope_meta_key(self.source))

    def set_scope_fingerprint(self, value: str) -> None:
        """Record the scope fingerprint this pass runs with, at the next :meth:`write`."""
        self._meta[scope_meta_key(self.source)] = value

    def stored_state_chunks(self) -> Iterator[list[UrlState]]:
        """:meth:`stored_states`, a chunk (a list of up to :data:`STATE_CHUNK`) at a time."""
        chunk: list[UrlState] = []
        for st in self.stored_states():
            chunk.append(st)
            if len(chunk) >= STATE_CHUNK:
                yield chunk
                chunk = []
        if chunk:
            yield chunk

    def share(self, readable: Callable[[str], bool]) -> None:
        """A pass the cluster crawls together: a URL's stored state is read (:meth:`get`) only
        when ``readable(url)`` (a URL of a host this node claimed), a row waiting in the shared
        store for this pass (state ``spilled``: offered by some node, not yet taken) included,
        and this pass's states stay in memory once written (the shared frontier hands a host
        over from them)."""
        self.lazy, self.readable, self._with_spilled = True, readable, True
        self._cache.clear()

    def drop_cached(self, readable: Callable[[str], bool]) -> None:
        """Forget the states read back whose URL ``readable(url)`` (a host claimed again: the
        node that held it meanwhile may have changed them)."""
        for url in [u for u in self._cache if readable(u)]:
            del self._cache[url]

    def get(self, url: str) -> UrlState | None:
        """``url``'s state: in memory, else (``lazy``, and in a shared pass for a host this node
        holds) from the store, or None."""
        st = self.rows.get(url)
        if st is not None or not self._readable(url):
            return st
        if url in self._cache:
            self._cache.move_to_end(url)
            return self._cache[url]
        row = self.store.crawl_state_row(self.source, url, spilled=self._with_spilled)
        st = UrlState.from_row(row) if row is not None else None
        self._remember(url, st)
        return st

    def _readable(self, url: str) -> bool:
        """Whether :meth:`get` would look ``url`` up in the store (not in memory, not removed)."""
        return self.lazy and url not in self._dirty and (self.readable is None or self.readable(url))

    def prefetch(self, urls: list[str]) -> None:
        """Read the stored states of those of ``urls`` that :meth:`get` would read one by one, in
        a few queries (the outlinks of a page), into the cache.

        Raises:
            StoreError: the store cannot be read.
        """
        ask = [u for u in dict.fromkeys(urls) if u not in self.rows and u not in self._cache
               and self._readable(u)][-CACHE_STATES:]  # more would push each other out of the cache
        if not ask:
            return
        found = self.store.crawl_state_rows(self.source, ask, spilled=self._with_spilled)
        for url in ask:
            row = found.get(url)
            self._remember(url, UrlState.from_row(row) if row is not None else None)

    def _remember(self, url: str, st: UrlState | None) -> None:
        self._cache[url] = st
        self._cache.move_to_end(url)
        while len(self._cache) > CACHE_STATES:
            self._cache.popitem(last=False)

    def __contains__(self, url: str) -> bool:
        return self.get(url) is not None

    def keep(self, state: UrlState) -> None:
        """Hold ``state`` (read from :meth:`stored_states`) in memory, unchanged, so the pass
        finds it without a read (it leaves memory at the next write unless queued)."""
        self.rows[state.url] = state
        self._cache.pop(state.url, None)

    def put(self, state: UrlState) -> UrlState:
        """Keep ``state`` (new or changed) and mark it to be written."""
        self.rows[state.url] = state
        self._cache.pop(state.url, None)
        self._dirty.add(state.url)
        return state

    def forget_unwritten(self, url: str) -> None:
        """Drop ``url``'s state from memory without writing anything of it (another node's now)."""
        self.rows.pop(url, None)
        self._cache.pop(url, None)
        self._dirty.discard(url)
        self._links.pop(url, None)
        self._requisites.pop(url, None)

    def removed(self, url: str) -> bool:
        """Whether ``url`` was forgotten in this pass (:meth:`remove`; its row is deleted at the
        next write)."""
        return url in self._dirty and url not in self.rows

    def remove(self, url: str) -> None:
        """Forget ``url``: its row is deleted at the next write."""
        self.rows.pop(url, None)
        self._cache.pop(url, None)
        self._dirty.add(url)

    # -- outlinks -------------------------------------------------------------------------
    def set_links(self, url: str, links: list[str] | None) -> None:
        """The canonical outlinks of ``url`` at this parse (None: none kept), written with its row."""
        self._links[url] = json.dumps(links) if links else None

    def links_of(self, url: str) -> list[str]:
        """The outlinks of ``url`` at its last parse (this pass's, else the stored ones)."""
        text = self._links[url] if url in self._links else self.store.crawl_links(self.source, url)
        return json.loads(text) if text else []

    # -- page requisites ------------------------------------------------------------------
    def set_requisites(self, url: str, urls: list[str] | None, *, nested: bool = False) -> None:
        """What the file kept for ``url`` needs to display (absolute URLs; None or empty: none),
        written with the next :meth:`write` (:mod:`indexerd.sources.web.orphans`); ``nested``:
        ``url`` is itself a page requisite (a stylesheet, or a requisite that redirected)."""
        self._requisites[url] = (nested, list(urls)) if urls else None

    # -- the frontier's overflow ----------------------------------------------------------
    def spill(self, state: UrlState) -> None:
        """Keep ``state`` (state ``spilled``) on disk only; written in batches of ``SPILL_BATCH``."""
        self._spill_buffer.append(state)
        if len(self._spill_buffer) >= SPILL_BATCH:
            self.flush_spilled()

    def flush_spilled(self) -> None:
        if self._spill_buffer:
            self._store_write([s.as_row() for s in self._spill_buffer])
            self._spill_buffer = []

    def take_spilled(self, pass_id: int, limit: int) -> list[UrlState]:
        """At most ``limit`` spilled states of pass ``pass_id``, best first (fewest hops, then
        discovery order); the caller queues them and must :meth:`put` them (then :meth:`write`)
        before asking again."""
        self.flush_spilled()
        return [UrlState.from_row(r) for r in self.store.crawl_spilled(self.source, pass_id, limit)]

    def drop_spilled(self, since_pass: int) -> None:
        """Forget the overflow on disk of pass ``since_pass`` and later (a pass began or finished)."""
        self._spill_buffer = []
        self.store.crawl_drop_spilled(self.source, since_pass)

    # -- writing back ---------------------------------------------------------------------
    def write_maybe(self, pass_state: PassState | None) -> None:
        """:meth:`write` when ``WRITE_EVERY_URLS`` URLs changed or ``WRITE_EVERY_SECONDS`` passed."""
        if len(self._dirty) >= WRITE_EVERY_URLS or (
                self._dirty and time.monotonic() - self._last_write > WRITE_EVERY_SECONDS):
            self.write(pass_state)

    def write(self, pass_state: PassState | None, *, finished: bool = False) -> None:
        """Write the changed states, deletions, outlinks and ``pass_state`` (None: leave the
        stored one as it is) in one transaction.

        ``finished``: the pass is over; URLs queued but never asked (the page budget ran out)
        are forgotten, to be found again by the next pass, and so is the overflow on disk.

        Raises:
            StoreError: the store cannot be written.
        """
        if finished:
            for url in [u for u, s in self.rows.items() if s.state == "queued" and s.last_status is None
                        and s.via != "sitemapfile" and not s.doc_key]:
                self.remove(url)
            self.drop_spilled(pass_state.id if pass_state is not None else 0)
        rows = [self.rows[u].as_row() for u in self._dirty if u in self.rows]
        rows += [s.as_row() for s in self._spill_buffer]
        self._spill_buffer = []
        deletes = [u for u in self._dirty if u not in self.rows]
        meta = {self.meta_key: pass_state.to_json()} if pass_state is not None else {}
        meta.update(self._meta)
        links = {u: v for u, v in self._links.items() if u in self.rows}
        # a removed file's references are cleared with or without its row; new ones with it
        requisites = {u: v for u, v in self._requisites.items() if v is None or u in self.rows}
        self._store_write(rows, deletes, meta, links, requisites)
        self._dirty.clear()
        self._meta.clear()
        self._links.clear()  # kilobytes per page: read back from the store when a 304 needs them
        self._requisites.clear()
        self._last_write = time.monotonic()
        if self.lazy and self.readable is None:  # written and not queued: into the cache
            for url in [u for u, st in self.rows.items() if st.state != "queued"]:
                self._remember(url, self.rows.pop(url))
