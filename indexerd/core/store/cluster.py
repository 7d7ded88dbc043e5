"""A cluster's rows in the shared store (PostgreSQL only): the nodes and their heartbeats, the
host leases that keep one request in flight per host across every node, and the source locks
that let one node at a time run a shared source's pass.

- **Nodes** register at start (:meth:`ClusterRows.register_node`), beat every quarter of their
  lease (``[store] lease``, :class:`ClusterTimings`; 5 s by default) and count as dead 1.5 times
  their lease after their last beat (30 s by default), each node by the timings it registered
  with (``nodes.dead_seconds``), or at once when they stopped cleanly.  Times are the
  database's (``now()``), so the nodes' clocks need not agree.
- **Host leases** (:meth:`ClusterRows.try_host_lease`): a row per host holding the node whose
  request is in flight, until when that lease holds (longer than any request may take, so a
  live node never loses it mid-request; a dead node's lease simply runs out), and when the next
  request may start -- the politeness delay, computed by the node that made the request with the
  one pure function (:func:`indexerd.sources.web.politeness.next_delay`) from the failures and
  the last delay kept in the row, so a backoff or a ``Retry-After`` holds for every node.
- **robots.txt** verdicts (:meth:`ClusterRows.robots_put`): fetched once per host and expiry
  for the whole cluster, parsed by each node with its sources' product token.
- **Source locks** (:class:`SourceLock`): a session advisory lock on a connection of its own;
  PostgreSQL drops it the moment that connection ends, so a node killed with ``kill -9`` hands
  its sources over without waiting for a timeout.

A cluster is its store's database and schema: any number of clusters share one server without
seeing each other.  Advisory locks belong to a database already, and a lock's key includes the
schema (:func:`lock_key`); a node's heartbeat connection is found in ``pg_stat_activity`` by its
database and by an ``application_name`` that names the schema (:func:`node_application`).
"""

from __future__ import annotations

import json
import threading
import zlib
from dataclasses import dataclass

from indexerd.core.errors import StoreError
from indexerd.core.pgaddress import first_line
from indexerd.core.store.connection import StoreConnection

__all__ = ["ClusterRows", "ClusterTimings", "SourceLock", "DEFAULT_LEASE_SECONDS", "lock_key",
           "node_application"]

#: ``[store] lease`` when unset (seconds).
DEFAULT_LEASE_SECONDS = 20.0


@dataclass(frozen=True)
class ClusterTimings:
    """A node's timings in a cluster, all from its ``lease`` (seconds, ``[store] lease``).

    - ``host_lease``: a host lease (one request in flight per host) lasts this long without
      renewal; every heartbeat of its node renews it, so a dead node's hosts are free again at
      most this long after its last beat;
    - ``host_claim``: the same for a node's claim on a host of a shared crawl
      (:mod:`indexerd.core.store.sharedfrontier`);
    - ``heartbeat``: a quarter of the lease between two beats, so three beats may fail before
      a lease runs out;
    - ``node_dead``: 1.5 leases without a beat and the node counts as dead (its name may be
      taken again; others stop waiting for it), recorded with the node (``nodes.dead_seconds``)
      so that every node judges it by its own timings.
    """

    lease: float = DEFAULT_LEASE_SECONDS

    @property
    def host_lease(self) -> float:
        return self.lease

    @property
    def host_claim(self) -> float:
        return self.lease

    @property
    def heartbeat(self) -> float:
        return self.lease / 4

    @property
    def node_dead(self) -> float:
        return self.lease * 1.5

#: ``application_name`` prefix of a node's heartbeat connection: a node whose connection is
#: gone (``pg_stat_activity``) is dead at once, whatever its last heartbeat says.  The full name
#: also names the cluster's schema: :func:`node_application`.
NODE_APPLICATION = "indexerd-node:"
#: PostgreSQL keeps the first NAMEDATALEN - 1 bytes of an ``application_name``.
_APPLICATION_NAME_BYTES = 63


def _schema_tag(schema: str) -> str:
    """8 hex digits naming ``schema`` (the first of its MD5, as SQL's ``left(md5(s), 8)``)."""
    import hashlib  # a cluster's only: a local store's start does without it

    return hashlib.md5(schema.encode("utf-8")).hexdigest()[:8]


def node_application(schema: str, node: str) -> str:
    """The ``application_name`` of node ``node``'s heartbeat connection in the cluster whose store
    is schema ``schema``: ``indexerd-node:<schema tag>:<node>``, cut to the 63 bytes PostgreSQL
    keeps (never inside a character, as PostgreSQL cuts it; the liveness check, in the same
    database only, takes a name that long for any node whose full name starts with it)."""
    return (f"{NODE_APPLICATION}{_schema_tag(schema)}:{node}".encode("utf-8")
            [:_APPLICATION_NAME_BYTES].decode("utf-8", "ignore"))

#: Seconds before the database server's start within which a node's last heartbeat makes it
#: one the restart cut off rather than a dead one (see :data:`_ALIVE`).
RESTART_GRACE_SECONDS = 300.0
#: SQL: node ``nodes.name`` is alive: not stopped, and either beating (its last heartbeat newer
#: than its ``dead_seconds``, its heartbeat connection open -- another than the asking one:
#: a node registering again after a crash finds only its own), or cut off by a restart of the
#: database server (every connection ended with it): not heard from since the server started,
#: having beaten within :data:`RESTART_GRACE_SECONDS` before, and the server up for less than
#: its ``dead_seconds`` -- the time its heartbeat has to reconnect.  Without that, every node
#: looked dead the moment the server came back and the first to tick took the others' hosts.
_BEATING = ("nodes.heartbeat_at > now() - make_interval(secs => nodes.dead_seconds) AND "
            "EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid <> pg_backend_pid() AND "
            "a.datname = current_database() AND "
            "starts_with('" + NODE_APPLICATION + "' || left(md5(current_schema()), 8) || ':' || nodes.name, "
            "a.application_name) AND (a.application_name = '" + NODE_APPLICATION + "' || "
            "left(md5(current_schema()), 8) || ':' || nodes.name OR octet_length(a.application_name) > {cut} - 4))"
            ).format(cut=_APPLICATION_NAME_BYTES)
_ALIVE = ("(nodes.stopped_at IS NULL AND CASE WHEN nodes.heartbeat_at < pg_postmaster_start_time() "
          "THEN nodes.heartbeat_at > pg_postmaster_start_time() - make_interval(secs => {grace}) "
          "AND pg_postmaster_start_time() > now() - make_interval(secs => nodes.dead_seconds) "
          "ELSE {beating} END)").format(grace=RESTART_GRACE_SECONDS, beating=_BEATING)
#: SQL: node ``nodes.name`` runs now (not stopped, beating, its connection open): a second
#: process may not register under its name.  A node the server's restart cut off does not count.
_RUNNING = f"(nodes.stopped_at IS NULL AND {_BEATING})"

#: The first half of every source lock's key: indexerd's advisory locks, apart from anyone else's.
LOCK_CLASS = 0x1DE8


def lock_key(kind: str, name: str, schema: str) -> int:
    """The second half of the advisory lock key of a shared thing (``kind`` ``source``,
    ``queue``...) named ``name`` in the cluster whose store is schema ``schema`` (advisory locks
    belong to a database already): a stable signed 32-bit hash (CRC-32), the same on every node."""
    h = zlib.crc32(f"{schema}\x00{kind}:{name}".encode("utf-8"))
    return h - (1 << 32) if h >= (1 << 31) else h


class ClusterRows(StoreConnection):
    """The ``nodes`` and ``host_leases`` tables, with the :class:`ClusterTimings` of the node
    that opened the store (its address's ``lease_seconds``)."""

    @property
    def timings(self) -> ClusterTimings:
        """This node's timings (``[store] lease``)."""
        return ClusterTimings(float(getattr(getattr(self, "address", None), "lease_seconds", DEFAULT_LEASE_SECONDS)))

    # -- nodes ----------------------------------------------------------------------------
    def register_node(self, name: str, host: str, pid: int, version: str, sources: list[str]) -> None:
        """Record node ``name`` as started (its machine, pid, indexerd version and source names).

        Raises:
            StoreError: a node of that name is alive on another machine or process (two nodes
                may not share a name: filesystem sources and leases are held by name).
        """
        with self._lock:
            try:
                conn = self._db.connection()
                with conn.transaction():
                    row = conn.execute(
                        f"SELECT host, pid FROM nodes WHERE name = %s AND {_RUNNING} FOR UPDATE",
                        (name,)).fetchone()
                    if row is not None and (row[0], row[1]) != (host, pid):
                        raise StoreError(f"{self.where}: node {name!r} is already running (on {row[0]}, "
                                         f"pid {row[1]}); give each node its own name (`node` in its config)")
                    conn.execute(
                        "INSERT INTO nodes(name, host, pid, version, started_at, heartbeat_at, sources, dead_seconds) "
                        "VALUES (%s, %s, %s, %s, to_char(now() AT TIME ZONE 'UTC', "
                        "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), now(), %s, %s) ON CONFLICT (name) DO UPDATE SET "
                        "host = excluded.host, pid = excluded.pid, version = excluded.version, "
                        "started_at = excluded.started_at, heartbeat_at = now(), stopped_at = NULL, "
                        "working_on = '', sources = excluded.sources, dead_seconds = excluded.dead_seconds",
                        (name, host, pid, version, json.dumps(sorted(sources)), self.timings.node_dead))
                    # a lease this name held before a crash is not ours any more
                    conn.execute("UPDATE host_leases SET node = NULL WHERE node = %s", (name,))
                    conn.execute("UPDATE crawl_hosts SET node = NULL WHERE node = %s", (name,))
            except StoreError:
                raise
            except Exception as e:  # psycopg.Error
                raise StoreError(f"{self.where}: registering node {name!r}: {first_line(e)}") from None

    def heartbeat(self, name: str, working_on: str, sources: list[str] | None = None) -> None:
        """Node ``name`` is alive, doing ``working_on`` (a short text for ``ctl status``), with
        ``sources`` configured (None: as before); the host leases it holds are renewed for
        its :attr:`ClusterTimings.host_lease`, its claims on hosts of a shared crawl for its
        :attr:`ClusterTimings.host_claim`."""
        t = self.timings
        beat = ("UPDATE nodes SET heartbeat_at = now(), working_on = ?, sources = coalesce(?, sources) "
                "WHERE name = ?", [(working_on, json.dumps(sorted(sources)) if sources is not None else None, name)])
        renew = ("UPDATE host_leases SET lease_until = now() + make_interval(secs => ?) "
                 "WHERE node = ? AND lease_until >= now()", [(t.host_lease, name)])
        claims = ("UPDATE crawl_hosts SET claim_until = now() + make_interval(secs => ?) "
                  "WHERE node = ? AND claim_until >= now()", [(t.host_claim, name)])
        self._transaction([beat, renew, claims])

    def node_stopped(self, name: str) -> None:
        """Node ``name`` stopped cleanly: it is dead at once and every host lease it holds is
        handed back (the next request to those hosts keeps their politeness delay), and so is
        every host of a shared crawl it claimed."""
        self._transaction([("UPDATE nodes SET stopped_at = now(), working_on = '' WHERE name = ?", [(name,)]),
                           ("UPDATE host_leases SET node = NULL WHERE node = ?", [(name,)]),
                           ("UPDATE crawl_hosts SET node = NULL WHERE node = ?", [(name,)])])

    def nodes(self) -> list[dict]:
        """Every node ever registered, by name: ``{name, host, pid, version, started_at,
        alive, stopped (cleanly, by SIGTERM), seconds_since_heartbeat, working_on, sources}``."""
        cur = self._db.execute(
            f"SELECT name, host, pid, version, started_at, working_on, sources, {_ALIVE} AS alive, "
            "stopped_at IS NOT NULL AS stopped, "
            "extract(epoch FROM now() - heartbeat_at) AS since FROM nodes ORDER BY name")
        return [{"name": r["name"], "host": r["host"], "pid": r["pid"], "version": r["version"],
                 "started_at": r["started_at"], "alive": bool(r["alive"]), "stopped": bool(r["stopped"]),
                 "seconds_since_heartbeat": round(float(r["since"]), 1), "working_on": r["working_on"],
                 "sources": json.loads(r["sources"] or "[]")} for r in cur]

    def live_node_sources(self) -> set[str]:
        """The source names configured on any live node."""
        return {s for n in self.nodes() if n["alive"] for s in n["sources"]}

    # -- host leases ----------------------------------------------------------------------
    def try_host_lease(self, host: str, node: str, lease_seconds: float) -> tuple[float, int, float]:
        """Take the politeness slot of ``host`` for ``node`` if no live lease holds it and its
        next-allowed time has come.

        A lease ``node`` holds already is taken again: the node's own slots allow one request
        per host, so such a lease is one whose hand-back failed (the store was unreachable).

        Returns ``(wait, failures, last_delay)``: ``wait`` 0.0 when the lease is now ``node``'s
        (for ``lease_seconds``; hand it back with :meth:`release_host_lease`), else the seconds
        until it may be free (a guess while another node's request is in flight); ``failures``
        and ``last_delay`` (seconds) are the host's, for the next delay.
        """
        row = self._db.execute(
            "INSERT INTO host_leases AS h (host, node, lease_until, next_allowed) "
            "VALUES (?, ?, now() + make_interval(secs => ?), now()) "
            "ON CONFLICT (host) DO UPDATE SET node = excluded.node, lease_until = excluded.lease_until "
            "WHERE (h.node IS NULL OR h.lease_until < now() OR h.node = excluded.node) AND h.next_allowed <= now() "
            "RETURNING failures, last_delay", (host, node, lease_seconds)).fetchone()
        if row is not None:
            return 0.0, int(row[0]), float(row[1])
        row = self._db.execute(
            "SELECT node IS NOT NULL AND lease_until >= now() AS held, "
            "extract(epoch FROM next_allowed - now()) AS left, "
            "extract(epoch FROM lease_until - now()) AS lease_left, failures, last_delay "
            "FROM host_leases WHERE host = ?", (host,)).fetchone()
        if row is None:  # deleted meanwhile: try again soon
            return 0.05, 0, 0.0
        held, left, lease_left, failures, last_delay = row
        if held:
            wait = max(0.05, min(0.25, float(lease_left)), float(left))
        else:
            wait = max(0.01, float(left))
        return wait, int(failures), float(last_delay)

    def release_host_lease(self, host: str, node: str, delay: float, failures: int) -> None:
        """Hand back ``node``'s lease on ``host``: the next request to it may start ``delay``
        seconds from now (database time); ``failures`` is the host's run of failures."""
        self._exec_many("UPDATE host_leases SET node = NULL, next_allowed = now() + make_interval(secs => ?), "
                        "failures = ?, last_delay = ?, requests = requests + 1 WHERE host = ? AND node = ?",
                        [(delay, failures, delay, host, node)])

    def host_leases(self) -> list[dict]:
        """Every host's lease: ``{host, node (None: free), next_in (seconds), failures,
        last_delay, requests}``."""
        cur = self._db.execute(
            "SELECT host, CASE WHEN lease_until >= now() THEN node END AS node, "
            "greatest(0, extract(epoch FROM next_allowed - now())) AS next_in, failures, last_delay, requests "
            "FROM host_leases ORDER BY host")
        return [{"host": r["host"], "node": r["node"], "next_in": round(float(r["next_in"]), 3),
                 "failures": r["failures"], "last_delay": r["last_delay"], "requests": r["requests"]} for r in cur]

    # -- robots.txt -----------------------------------------------------------------------
    def robots_put(self, host: str, status: str, body: bytes | None, detail: str, ttl_seconds: float) -> None:
        """Keep ``host``'s robots.txt verdict (``status`` ok / allow-all / unreachable, the body
        for ``ok``) for every node, for ``ttl_seconds`` from now (database time)."""
        self._exec_many("INSERT INTO robots (host, status, body, detail, fetched_at, expires_at) "
                        "VALUES (?, ?, ?, ?, now(), now() + make_interval(secs => ?)) ON CONFLICT (host) DO UPDATE "
                        "SET status = excluded.status, body = excluded.body, detail = excluded.detail, "
                        "fetched_at = excluded.fetched_at, expires_at = excluded.expires_at",
                        [(host, status, body, detail, ttl_seconds)])

    def robots_get(self, host: str) -> tuple[str, bytes | None, str, float] | None:
        """``(status, body, detail, seconds left)`` of ``host``'s shared verdict, None when there is
        none or it expired."""
        row = self._db.execute("SELECT status, body, detail, extract(epoch FROM expires_at - now()) FROM robots "
                               "WHERE host = ? AND expires_at > now()", (host,)).fetchone()
        if row is None:
            return None
        return row[0], bytes(row[1]) if row[1] is not None else None, row[2], float(row[3])

    def frontier_by_host(self) -> list[dict]:
        """The shared frontier of each web source's current pass, per host: ``{source, host,
        queued, done, node}`` (the pass's URLs waiting or queued, and asked; a canonical URL
        always has a path, so its host is what its second slash and third enclose; ``node``:
        the node whose claim on the host holds (:mod:`indexerd.core.store.sharedfrontier`),
        None: nobody's).  Read through ``crawl_pass``: the cost is the current passes' rows,
        not every URL the sources know."""
        claims = {(r[0], r[1]): r[2] for r in self._db.execute(
            "SELECT source, host, CASE WHEN claim_until >= now() THEN node END FROM crawl_hosts")}
        out = []
        # one query per (source, pass) with its values, so the planner sees how few rows the
        # pass has (a join over all passes at once reads the whole table)
        for source, pass_id in self._db.execute("SELECT DISTINCT source, pass_id FROM crawl_hosts").fetchall():
            cur = self._db.execute(
                "SELECT split_part(url, '/', 1) || '//' || split_part(url, '/', 3) AS host, "
                "count(*) FILTER (WHERE state IN ('queued', 'spilled')) AS queued, "
                "count(*) FILTER (WHERE state = 'done') AS done FROM crawl WHERE source = ? AND pass_id = ? "
                "GROUP BY 1", (source, pass_id))
            out += [{"source": source, "host": r["host"], "queued": r["queued"], "done": r["done"],
                     "node": claims.get((source, r["host"]))} for r in cur]
        return sorted(out, key=lambda r: (r["source"], r["host"]))


class SourceLock:
    """One node's hold on a shared thing (a web source's pass, a SQL queue): a session advisory
    lock (``pg_try_advisory_lock(LOCK_CLASS, key)``) on a connection of its own, which
    PostgreSQL releases the moment that connection ends (a node killed, a network cut).

    ``holder()`` names the node holding it, from ``pg_locks`` and the holder's
    ``application_name`` (``indexerd-lock:<node>``).

    Raises (from :meth:`try_acquire`): StoreError when the server cannot be reached.
    """

    #: the keys of the locks this process holds now (its share of the shared sources)
    held_here: set[int] = set()

    def __init__(self, address, node: str, kind: str, name: str) -> None:
        self.address = address
        self.node = node
        self.what = f"{kind} {name}"
        self.key = lock_key(kind, name, address.schema)
        self._conn = None
        self._mutex = threading.Lock()

    def _connect(self):
        import psycopg

        kw = self.address.connect_kwargs()
        kw["application_name"] = f"indexerd-lock:{self.node}"[:63]
        try:
            return psycopg.connect(self.address.url, autocommit=True, **kw)
        except psycopg.Error as e:
            raise StoreError(f"{self.address.WHAT} at {self.address.shown}: cannot connect: {first_line(e)}") from None

    def try_acquire(self) -> bool:
        """Take the lock if no other node holds it; True when this node holds it now."""
        import psycopg

        with self._mutex:
            if self._conn is not None:
                return True
            conn = self._connect()
            try:
                got = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, self.key)).fetchone()[0]
            except psycopg.Error as e:
                conn.close()
                raise StoreError(f"{self.address.WHAT}: locking {self.what}: {first_line(e)}") from None
            if not got:
                conn.close()
                return False
            self._conn = conn
            SourceLock.held_here.add(self.key)
            return True

    @property
    def held(self) -> bool:
        return self._conn is not None

    def release(self) -> None:
        """Let go of the lock (closing its connection); safe to call when not held."""
        with self._mutex:
            conn, self._conn = self._conn, None
            if conn is not None:
                SourceLock.held_here.discard(self.key)
        if conn is not None:
            try:  # unlocked before the reply: a server ends a closed session's locks a moment later
                conn.execute("SELECT pg_advisory_unlock_all()")
            except Exception:  # a broken connection: the server dropped the lock with it
                pass
            try:
                conn.close()
            except Exception:  # closing a broken connection: the server dropped the lock anyway
                pass

    def holder(self) -> str | None:
        """The node holding the lock now (None: nobody, or it cannot be told)."""
        import psycopg

        try:
            conn = self._connect()
        except StoreError:
            return None
        try:
            row = conn.execute(
                "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.classid::bigint = %s AND l.objid::bigint = %s "
                "AND l.objsubid = 2 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())", (LOCK_CLASS & 0xFFFFFFFF, self.key & 0xFFFFFFFF)).fetchone()
        except psycopg.Error:
            return None
        finally:
            conn.close()
        if row is None:
            return None
        return str(row[0]).removeprefix("indexerd-lock:")
