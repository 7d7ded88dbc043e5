"""The shared crawl frontier of a cluster (PostgreSQL only): a web source's pass crawled by every
live node at once, each host of it by one node at a time.

The ``crawl`` rows are the frontier and the seen set: a URL is queued for pass ``P`` by setting
its row's ``pass_id`` to ``P`` and its state to ``queued`` -- an upsert that changes nothing when
the row is at ``P`` already, so a URL is queued once per pass whichever nodes find it
(:meth:`SharedFrontierRows.frontier_offer`).  The ``crawl_hosts`` rows shard the pass by host
(Nutch's and StormCrawler's partition by host): a host is *claimed* by one node
(:meth:`~SharedFrontierRows.frontier_claim`, ``FOR UPDATE SKIP LOCKED``), which fetches every
URL of it in the pass; the claim lasts the node's lease (``[store] lease``,
:attr:`~indexerd.core.store.cluster.ClusterTimings.host_claim`), renewed by its node's heartbeat, and a host whose node died is free to claim at once (its heartbeat connection is
gone).  Two flags say whether a host still has work: ``pending`` (URLs were queued for it that
its node has not read yet) and ``active`` (its node has URLs of it in memory or in flight).  The
pass is over for the cluster when no host of it is pending or active
(:meth:`~SharedFrontierRows.frontier_over`).

**Fencing** (Kleppmann's fencing token, "How to do distributed locking", 2016): every claim of a
host draws a new ``claim_token`` from one sequence (a new claim, a take-over after its node's
claim ran out or its node died, a claim again), so the token grows at every hand-over; a renewal
keeps it.  A node remembers the token of each host it claimed (:class:`ClaimFence`), and what
it writes for a page it fetched of that host carries it: the crawl rows
(:meth:`~SharedFrontierRows.frontier_write`, each statement conditional on the host's row
still holding that token, and that node or none, in the transaction that writes them) and the page's document
(the writer asks :meth:`~SharedFrontierRows.frontier_stale` before the index gets it).  A write
under a token that is no longer the host's is refused: a node paused, partitioned or slow past
its claim never overwrites what the host's new holder wrote.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from indexerd.core.store.cluster import _ALIVE
from indexerd.core.store.connection import META_UPSERT, StoreConnection
from indexerd.core.store.crawl import (MARK_CONFLICT, REQUISITES_ADD, REQUISITES_CLEAR, REQUISITES_MARK, Requisites,
                                      requisite_rows)
from indexerd.core.store.values import prefix_range

__all__ = ["ClaimFence", "SharedFrontierRows", "url_origin"]

log = logging.getLogger(__name__)

#: The columns an offer sets; the rest of a known URL's row (validators' record, schedule) stays.
_OFFER_COLUMNS = ("url", "pass_id", "state", "hops", "seed_depth", "seq", "via", "origin", "redirects")
#: SQL: the claim of crawl host row ``c`` may be taken: nobody's, its node dead, or run out --
#: but not the claim of a live node the database server's restart cut off (not heard from since
#: the server started: it could not renew it, and renews it as soon as it reconnects,
#: :meth:`SharedFrontierRows.frontier_held`).
_FREE = (f"(c.node IS NULL OR NOT EXISTS (SELECT 1 FROM nodes WHERE nodes.name = c.node AND {_ALIVE} "
         f"AND (c.claim_until >= now() OR nodes.heartbeat_at < pg_postmaster_start_time())))")
#: SQL: the crawl host row of (source, host) still holds the claim token, and the node's claim or
#: none (handed back, and nobody claimed it since): ``?`` x 4, :meth:`ClaimFence.args`.
_FENCE = ("EXISTS (SELECT 1 FROM crawl_hosts h WHERE h.source = ? AND h.host = ? AND h.claim_token = ? "
          "AND (h.node IS NULL OR h.node = ?))")

#: SQL: :data:`~indexerd.core.store.crawl.REQUISITES_ADD` while the referrer's host takes the
#: write (``?`` x 4, then :data:`_FENCE`'s).
_REQUISITE_ADD_FENCED = ("INSERT INTO crawl_requisites(source, page, requisite, nested) SELECT ?, ?, ?, ? "
                         f"WHERE {_FENCE} ON CONFLICT(source, page, requisite) DO NOTHING")


@dataclass(frozen=True)
class ClaimFence:
    """The claim a node fetched a page under: node ``node``'s claim on ``host``
    (``scheme://host[:port]``) in web source ``source``, with the token the store gave it
    (:meth:`SharedFrontierRows.frontier_claim_tokens`; larger is newer).  A write carrying it
    is refused once the host's row holds another token (claimed since, by any node) or another
    node; a claim the node handed back that nobody took since (its page budget was spent while
    requests were in flight) still takes its writes: no one else wrote under a newer token."""

    source: str
    host: str
    node: str
    token: int

    def args(self) -> tuple[str, str, int, str]:
        """The four values of :data:`_FENCE`."""
        return self.source, self.host, self.token, self.node

    def holds(self, node: str | None, token: int) -> bool:
        """Whether a host row holding ``node`` (None: nobody's) and ``token`` takes a write under
        this claim (the rule :data:`_FENCE` says in SQL)."""
        return token == self.token and node in (None, self.node)


class SharedFrontierRows(StoreConnection):
    """The ``crawl_hosts`` table and the shared use of the ``crawl`` rows (see the module docstring).

    A claim lasts the opening node's ``timings.host_claim`` (seconds; the ``timings`` of
    :class:`~indexerd.core.store.cluster.ClusterRows`, which every store with these rows has)."""

    if TYPE_CHECKING:
        from indexerd.core.store.cluster import ClusterTimings

        @property
        def timings(self) -> ClusterTimings: ...

    def frontier_reset(self, source: str) -> None:
        """A new pass of ``source`` begins: forget the host claims of the last one and what the
        nodes fetched in it."""
        self._transaction([("DELETE FROM crawl_hosts WHERE source = ?", [(source,)]),
                           ("DELETE FROM crawl_node_counts WHERE source = ?", [(source,)])])

    def frontier_count(self, source: str, pass_id: int, node: str, counts: dict[str, tuple[int, int]]) -> None:
        """Add to what ``node`` fetched in pass ``pass_id`` of ``source``: ``counts`` is ``{host:
        (GET requests the server answered, requests without an answer)}`` since the last call.
        One transaction.

        Raises:
            StoreError: the store cannot be written (nothing was added).
        """
        self._exec_many("INSERT INTO crawl_node_counts AS c (source, pass_id, host, node, fetched, errors) "
                        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (source, pass_id, host, node) DO UPDATE SET "
                        "fetched = c.fetched + excluded.fetched, errors = c.errors + excluded.errors",
                        [(source, pass_id, h, node, f, e) for h, (f, e) in sorted(counts.items()) if f or e])

    def frontier_fetched(self) -> list[dict]:
        """What each node fetched of each host in the latest pass of every web source the
        cluster crawled together: ``{source, pass_id, host, node, fetched, errors}`` (requests
        the server answered, and those it did not), by source, host and node.  The cost is
        the rows of those passes' hosts times their nodes, not the URLs."""
        cur = self._db.execute(
            "SELECT c.source, c.pass_id, c.host, c.node, c.fetched, c.errors FROM crawl_node_counts c "
            "WHERE c.pass_id = (SELECT max(pass_id) FROM crawl_node_counts m WHERE m.source = c.source) "
            "ORDER BY c.source, c.host, c.node")
        return [dict(r) for r in cur]

    def frontier_offer(self, source: str, pass_id: int, rows: Iterable[dict]) -> None:
        """Queue URLs for pass ``pass_id`` in the store: each of ``rows`` (``{column: value}``
        with at least the offer's columns: url, pass_id, state -- ``spilled``, in no node's
        memory --, hops, seed_depth, seq, via, origin, redirects) is inserted, or updated when
        its stored row belongs to an earlier pass (a URL seen in this pass already, by any node,
        is left as it is); their hosts are marked pending.  One transaction.

        Raises:
            StoreError: the store cannot be written.
        """
        rows = list(rows)
        if not rows:
            return
        cols = ("source",) + _OFFER_COLUMNS
        sets = ", ".join(f"{c} = excluded.{c}" for c in _OFFER_COLUMNS if c != "url")
        upsert = (f"INSERT INTO crawl AS c ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
                  f"ON CONFLICT (source, url) DO UPDATE SET {sets} WHERE c.pass_id < excluded.pass_id")
        hosts = sorted({url_origin(r["url"]) for r in rows})
        pending = ("INSERT INTO crawl_hosts AS h (source, host, pass_id, pending) VALUES (?, ?, ?, true) "
                   "ON CONFLICT (source, host) DO UPDATE SET pending = true, pass_id = excluded.pass_id")
        self._transaction([(upsert, [(source,) + tuple(r[c] for c in _OFFER_COLUMNS) for r in rows]),
                           (pending, [(source, h, pass_id) for h in hosts])])

    def frontier_claim(self, source: str, pass_id: int, node: str, limit: int) -> list[str]:
        """The hosts of :meth:`frontier_claim_tokens`, in host order."""
        return list(self.frontier_claim_tokens(source, pass_id, node, limit))

    def frontier_claim_tokens(self, source: str, pass_id: int, node: str, limit: int) -> dict[str, int]:
        """Claim for ``node`` at most ``limit`` hosts of pass ``pass_id`` that have work (pending
        or active) and no live node's claim, skipping rows other nodes are claiming now; returns
        the hosts claimed, in host order, each with its new fencing token (larger than any the
        host had: see the module docstring); each is marked pending, so that what waits for it
        is read after :meth:`frontier_pending_hosts`."""
        if limit <= 0:
            return {}
        cur = self._db.execute(
            "UPDATE crawl_hosts AS h SET node = ?, claim_until = now() + make_interval(secs => ?), pending = true, "
            "claim_token = nextval('crawl_claim_tokens') "
            "WHERE (h.source, h.host) IN (SELECT c.source, c.host FROM crawl_hosts c WHERE c.source = ? AND "
            "c.pass_id = ? AND (c.pending OR c.active) AND (c.node IS DISTINCT FROM ? OR c.claim_until < now()) "
            f"AND {_FREE} "
            "ORDER BY c.host LIMIT ? FOR UPDATE SKIP LOCKED) RETURNING h.host, h.claim_token",
            (node, self.timings.host_claim, source, pass_id, node, limit))
        return {r[0]: int(r[1]) for r in sorted(cur)}

    def frontier_load(self, source: str, pass_id: int, node: str) -> tuple[int, int]:
        """``(hosts with work in pass pass_id, of them claimed by node)`` -- what a node's fair
        share of the hosts is computed from."""
        row = self._db.execute(
            "SELECT count(*), count(*) FILTER (WHERE node = ? AND claim_until >= now()) FROM crawl_hosts "
            "WHERE source = ? AND pass_id = ? AND (pending OR active)", (node, source, pass_id)).fetchone()
        return int(row[0]), int(row[1])

    def frontier_held(self, source: str, node: str, pass_id: int | None = None) -> set[str]:
        """The hosts of ``source`` whose claim ``node`` holds (:meth:`frontier_claims`' hosts)."""
        return set(self.frontier_claims(source, node, pass_id))

    def frontier_claims(self, source: str, node: str, pass_id: int | None = None) -> dict[str, float]:
        """The seconds of :meth:`frontier_claim_rows`, by host."""
        return {h: left for h, (left, _token) in self.frontier_claim_rows(source, node, pass_id).items()}

    def frontier_claim_rows(self, source: str, node: str, pass_id: int | None = None) -> dict[str, tuple[float, int]]:
        """The hosts of ``source`` whose claim ``node`` holds, each with ``(seconds its claim
        still holds, its fencing token)`` (database time; no other node may take it before then
        while ``node`` is alive).  A claim that ran out (the store was unreachable and the
        heartbeat could not renew it) and that no other node took since is renewed here, with
        its token (no hand-over happened): the host is still this node's, and nothing it fetched
        is fetched again; a host another node claimed meanwhile is not in the answer.
        ``pass_id``: only the hosts of that pass."""
        this_pass, args = ("", ()) if pass_id is None else (" AND pass_id = ?", (pass_id,))
        rows = self._db.execute(f"SELECT host, extract(epoch FROM claim_until - now()), claim_token FROM crawl_hosts "
                                f"WHERE source = ? AND node = ?{this_pass}", (source, node, *args)).fetchall()
        out = {r[0]: (float(r[1]), int(r[2])) for r in rows}
        if any(left < 0 for left, _ in out.values()):  # a write only after an outage, not at every tick
            claim = self.timings.host_claim
            self._db.execute("UPDATE crawl_hosts SET claim_until = now() + make_interval(secs => ?) "
                             f"WHERE source = ? AND node = ? AND claim_until < now(){this_pass}",
                             (claim, source, node, *args))
            out = {h: (claim if left < 0 else left, token) for h, (left, token) in out.items()}
        return out

    def frontier_write(self, source: str, fences: dict[str, ClaimFence], rows: Iterable[dict],
                       deletes: Iterable[str] = (), meta: dict[str, str] | None = None,
                       links: dict[str, str | None] | None = None,
                       requisites: dict[str, Requisites | None] | None = None) -> set[str]:
        """:meth:`~indexerd.core.store.crawl.CrawlRows.crawl_write` of a node in a shared pass,
        fenced: the rows, deletions, outlinks and page requisites of a URL whose host (:func:`url_origin`) is in
        ``fences`` (host -> the claim its page was fetched under) are written only while that
        host's row takes them (:meth:`ClaimFence.holds`) -- checked at the start of the transaction,
        to name the hosts refused, and again by every statement, so a take-over committed in
        between refuses them too (a fenced crawl row the upsert did not write names its host
        among the refused, so every refusal is counted); the others (and ``meta``) are written
        as ``crawl_write`` writes them.  One transaction, no row lock held on ``crawl_hosts`` (a
        node paused inside it blocks no claim).  Returns the hosts refused, at the check or by a
        statement (a host refused by a statement may have had some of its deletions and
        outlinks written before the take-over: they were its holder's then).

        Raises:
            StoreError: the store cannot be written.
        """
        rows, deletes, links = list(rows), list(deletes), dict(links or {})
        cleared, added = requisite_rows(source, dict(requisites or {}), deletes)
        urls = [r["url"] for r in rows] + deletes + list(links) + [page for _, page in cleared]
        fenced = sorted({url_origin(u) for u in urls} & set(fences))
        refused: set[str] = set()
        cols = ("source",) + self.CRAWL_COLUMNS
        updates = ", ".join(f"{c} = excluded.{c}" for c in self.CRAWL_COLUMNS if c != "url")
        upsert = (f"INSERT INTO crawl AS c ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
                  f"ON CONFLICT (source, url) DO UPDATE SET {updates}")
        upsert_fenced = (f"INSERT INTO crawl AS c ({', '.join(cols)}) SELECT {', '.join('?' * len(cols))} "
                         f"WHERE {_FENCE} ON CONFLICT (source, url) DO UPDATE SET {updates} WHERE {_FENCE} "
                         "RETURNING c.url")

        def fence_of(url: str) -> ClaimFence | None:
            return fences.get(url_origin(url))

        def steps(read) -> list[tuple[str, list[tuple]]]:
            refused.clear()
            if fenced:
                held = {r[0]: (r[1], int(r[2])) for r in read(
                    "SELECT host, node, claim_token FROM crawl_hosts WHERE source = ? AND host = ANY(?)",
                    (source, fenced))}
                refused.update(h for h in fenced if h not in held or not fences[h].holds(*held[h]))
            mine = [r for r in rows if url_origin(r["url"]) not in refused]
            plain = [(source,) + tuple(r[c] for c in self.CRAWL_COLUMNS) for r in mine if fence_of(r["url"]) is None]
            checked = [(source,) + tuple(r[c] for c in self.CRAWL_COLUMNS) + f.args() + f.args()
                       for r in mine if (f := fence_of(r["url"])) is not None]
            out = [(upsert, plain), (upsert_fenced, checked)]
            for sql, args in (("UPDATE crawl SET links = ? WHERE source = ? AND url = ?", links.items()),
                              ("DELETE FROM crawl WHERE source = ? AND url = ?", [(u, None) for u in deletes])):
                todo = [(u, v) for u, v in args if url_origin(u) not in refused]
                head = (lambda u, v: (v, source, u)) if "links" in sql else (lambda u, v: (source, u))
                out.append((sql, [head(u, v) for u, v in todo if fence_of(u) is None]))
                out.append((f"{sql} AND {_FENCE}", [head(u, v) + f.args() for u, v in todo
                                                   if (f := fence_of(u)) is not None]))
            for plain_sql, fenced_sql, refs in (
                    (REQUISITES_MARK + MARK_CONFLICT, f"{REQUISITES_MARK} AND {_FENCE}{MARK_CONFLICT}", cleared),
                    (REQUISITES_CLEAR, f"{REQUISITES_CLEAR} AND {_FENCE}", cleared),
                    (REQUISITES_ADD, _REQUISITE_ADD_FENCED, added)):
                mine_refs = [r for r in refs if url_origin(r[1]) not in refused]  # r[1]: the referrer
                out.append((plain_sql, [r for r in mine_refs if fence_of(r[1]) is None]))
                out.append((fenced_sql, [r + f.args() for r in mine_refs if (f := fence_of(r[1])) is not None]))
            out.append((META_UPSERT, list((meta or {}).items())))
            return out

        written: list[tuple] = []
        self._read_then_write(steps, written)
        upserted = {r[0] for r in written}
        refused.update(url_origin(r["url"]) for r in rows
                       if fence_of(r["url"]) is not None and r["url"] not in upserted)
        return set(refused)

    def frontier_stale(self, fences: Iterable[ClaimFence]) -> set[ClaimFence]:
        """Those of ``fences`` whose host's row no longer takes their writes
        (:meth:`ClaimFence.holds`: another node claimed it since, or the node itself claimed it
        again, or a new pass began): what was fetched under them must not be written.  One
        query."""
        fences = set(fences)
        if not fences:
            return set()
        held = {(r[0], r[1]): (r[2], int(r[3])) for r in self._db.execute(
            "SELECT source, host, node, claim_token FROM crawl_hosts WHERE host = ANY(?)",
            (sorted({f.host for f in fences}),))}
        return {f for f in fences if (f.source, f.host) not in held or not f.holds(*held[(f.source, f.host)])}

    def frontier_pending_hosts(self, source: str, node: str) -> list[str]:
        """The hosts ``node`` holds that are pending, now marked not pending and active: the
        caller reads what waits for them (:meth:`frontier_waiting`) right after; a URL queued
        after this marks its host pending again."""
        cur = self._db.execute("UPDATE crawl_hosts SET pending = false, active = true WHERE source = ? "
                               "AND node = ? AND pending RETURNING host", (source, node))
        return [r[0] for r in cur]

    def frontier_host_rows(self, source: str, host: str, pass_id: int) -> list[dict]:
        """The crawl rows (:attr:`CRAWL_COLUMNS`) of ``host`` (``scheme://host[:port]``) in pass
        ``pass_id`` of ``source`` (not those waiting in the store, state ``spilled``), in
        discovery order: what that pass queued and asked of the host, through ``crawl_pass``
        (the cost is the pass's rows, not every URL the host ever had)."""
        low, high = prefix_range(host + "/")
        cur = self._db.execute(f"SELECT {', '.join(self.CRAWL_COLUMNS)} FROM crawl WHERE source = ? "
                               "AND pass_id = ? AND state != 'spilled' AND url >= ? AND url < ? ORDER BY seq",
                               (source, pass_id, low, high))
        return [dict(r) for r in cur]

    def frontier_take(self, source: str, host: str, pass_id: int, limit: int) -> list[dict]:
        """Take at most ``limit`` crawl rows of ``host`` waiting in the store in pass ``pass_id``
        (state ``spilled``: offered, in no node's memory), best first (fewest hops, then
        discovery order): they are ``queued`` now (in the taker's memory), in the same statement
        (``FOR UPDATE SKIP LOCKED``), so no one takes a row twice.  Returned in that order, as
        they were before the take."""
        low, high = prefix_range(host + "/")
        cur = self._db.execute(
            "UPDATE crawl AS c SET state = 'queued' WHERE (c.source, c.url) IN (SELECT source, url FROM crawl "
            "WHERE source = ? AND url >= ? AND url < ? AND pass_id = ? AND state = 'spilled' "
            "ORDER BY hops, seq LIMIT ? FOR UPDATE SKIP LOCKED) RETURNING "
            + ", ".join("c." + x for x in self.CRAWL_COLUMNS),
            (source, low, high, pass_id, limit))
        rows = [dict(zip(self.CRAWL_COLUMNS, r)) for r in cur]
        for r in rows:
            r["state"] = "spilled"
        return sorted(rows, key=lambda r: (r["hops"], r["seq"]))

    def frontier_pending_again(self, source: str, node: str, host: str) -> None:
        """``node`` read only part of what waits for ``host``: its next round reads more."""
        self._exec_many("UPDATE crawl_hosts SET pending = true WHERE source = ? AND host = ? AND node = ?",
                        [(source, host, node)])

    def frontier_row(self, source: str, url: str) -> dict | None:
        """The crawl row (:attr:`CRAWL_COLUMNS`) of ``url`` in ``source``, or None."""
        row = self._db.execute(f"SELECT {', '.join(self.CRAWL_COLUMNS)} FROM crawl WHERE source = ? AND url = ?",
                               (source, url)).fetchone()
        return dict(row) if row is not None else None

    def frontier_idle(self, source: str, node: str, hosts: Iterable[str]) -> None:
        """``node`` has nothing more of ``hosts`` to do (its URLs were fetched and their rows
        written): not active any more (still claimed: URLs queued later come to ``node``)."""
        self._exec_many("UPDATE crawl_hosts SET active = false WHERE source = ? AND host = ? AND node = ?",
                        [(source, h, node) for h in hosts])

    def frontier_drop(self, source: str, node: str) -> None:
        """``node`` stops crawling this pass with URLs left (its page budget is spent): its hosts
        are handed back, neither pending nor active -- the URLs it had queued for them wait for
        the next pass, unless more are queued for a host meanwhile (another node then claims
        it)."""
        self._exec_many("UPDATE crawl_hosts SET node = NULL, pending = false, active = false "
                        "WHERE source = ? AND node = ?", [(source, node)])

    def frontier_release(self, source: str, node: str, host: str) -> None:
        """``node`` gives ``host`` up in the pass (it holds more than its share, and its waiting
        URLs are back in the store): pending, for another node to claim."""
        self._exec_many("UPDATE crawl_hosts SET node = NULL, pending = true, active = false "
                        "WHERE source = ? AND host = ? AND node = ?", [(source, host, node)])

    def frontier_hand_back(self, source: str, node: str) -> None:
        """``node`` leaves the pass before its end (stopped): its hosts are free to claim."""
        self._exec_many("UPDATE crawl_hosts SET node = NULL WHERE source = ? AND node = ?", [(source, node)])

    def frontier_over(self, source: str, pass_id: int) -> bool:
        """Whether pass ``pass_id`` of ``source`` is over for the cluster: no host of it pending
        or active."""
        row = self._db.execute("SELECT NOT EXISTS (SELECT 1 FROM crawl_hosts WHERE source = ? AND pass_id = ? "
                               "AND (pending OR active))", (source, pass_id)).fetchone()
        return bool(row[0])

    def frontier_hosts(self) -> list[dict]:
        """Every host claim: ``{source, host, pass_id, node (None: free or run out), pending, active}``."""
        cur = self._db.execute("SELECT source, host, pass_id, CASE WHEN claim_until >= now() THEN node END AS node, "
                               "pending, active FROM crawl_hosts ORDER BY source, host")
        return [dict(r) for r in cur]


def url_origin(url: str) -> str:
    """``scheme://host[:port]`` of a canonical URL as it is written (it always has a path; a
    default port is not written): the prefix its host's URLs share, the ``crawl_hosts`` key."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"
