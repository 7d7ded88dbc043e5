"""The cluster's rows on a real PostgreSQL server, without daemons: host leases between two
"nodes" of one test (two politeness slot sets on one shared store), source locks held by a
process that is then killed, node names and heartbeats."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from conftest import pg_store_address
from indexerd.core.errors import StoreError
from indexerd.core.store import PgStore
from indexerd.core.store.cluster import SourceLock, lock_key, node_application
from indexerd.sources.web.hostleases import HostLeases
from indexerd.sources.web.politeness import HostSlots, PolitenessSettings, next_delay

pytestmark = pytest.mark.usefixtures("pg_index_server")
FAST = PolitenessSettings(min_delay=0.2, good_guy_factor=0.0)


@pytest.fixture
def address():
    a = pg_store_address()
    PgStore(a).close()  # created and migrated
    return a


def node_slots(address, name: str) -> HostSlots:
    slots = HostSlots()
    slots.shared = HostLeases(lambda: PgStore(address), name)
    return slots


def test_one_request_in_flight_per_host_across_nodes_and_the_delay_kept(address) -> None:
    a, b = node_slots(address, "a"), node_slots(address, "b")
    host = "http://127.0.0.9:1"
    assert a.try_acquire(host) == 0.0
    wait = b.try_acquire(host)
    assert 0 < wait <= 0.25  # a's request is in flight: b polls
    a.release(host, FAST, elapsed=0.01, ok=True)
    wait = b.try_acquire(host)
    assert 0.1 < wait <= 0.2  # a's delay holds for b too (database time)
    time.sleep(wait + 0.02)
    assert b.try_acquire(host) == 0.0
    b.release(host, FAST, elapsed=0.01, ok=True)


def test_retry_after_and_backoff_hold_for_every_node(address) -> None:
    a, b = node_slots(address, "a"), node_slots(address, "b")
    host = "http://127.0.0.9:2"
    assert a.try_acquire(host) == 0.0
    set_by_a = a.release(host, FAST, elapsed=0.01, ok=False, retry_after=2.5)  # a 503, Retry-After: 2.5
    assert set_by_a == next_delay(FAST, elapsed=0.01, ok=False, failures=1, retry_after=2.5) == 2.5
    assert 2.3 < b.try_acquire(host) <= 2.5  # b waits for a's Retry-After
    time.sleep(2.55)
    assert b.try_acquire(host) == 0.0
    assert b.failures(host) == 1  # the host's run of failures came with the lease
    delay = b.release(host, FAST, elapsed=0.01, ok=False)
    assert delay == next_delay(FAST, elapsed=0.01, ok=False, failures=2, previous_delay=2.5) == 4.0  # backoff
    with PgStore(address) as s:
        assert {h["host"]: h["failures"] for h in s.host_leases()}[host] == 2


def test_a_dead_nodes_lease_runs_out_and_a_stopped_nodes_is_handed_back(address) -> None:
    a, b = node_slots(replace(address, lease_seconds=1.0), "a"), node_slots(address, "b")  # a's lease: 1 s
    host, other = "http://127.0.0.9:3", "http://127.0.0.9:4"
    assert a.try_acquire(host) == 0.0  # and a dies holding it: never released, never renewed
    assert b.try_acquire(host) > 0
    time.sleep(1.1)
    assert b.try_acquire(host) == 0.0
    assert a.try_acquire(other) == 0.0
    with PgStore(address) as s:
        s.register_node("a", "h", 1, "x", [])
        s.node_stopped("a")  # SIGTERM: its leases go back at once
    assert b.try_acquire(other) == 0.0


HOLDER = """
import sys, time
from indexerd.core.store.cluster import SourceLock
from indexerd.core.store import PgStoreAddress
a = PgStoreAddress(url=sys.argv[1], schema=sys.argv[2])
lock = SourceLock(a, "holder", "source", "web1")
assert lock.try_acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_a_source_lock_goes_with_its_killed_holder(address) -> None:
    p = subprocess.Popen([sys.executable, "-c", HOLDER, address.url, address.schema], stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        mine = SourceLock(address, "me", "source", "web1")
        assert not mine.try_acquire()
        assert mine.holder() == "holder"
        p.kill()
        p.wait(10)
        deadline = time.monotonic() + 5
        while not mine.try_acquire():
            assert time.monotonic() < deadline, "the killed holder's lock was not released"
            time.sleep(0.05)
        assert mine.held and mine.holder() == "me"
        mine.release()
        assert not mine.held
    finally:
        if p.poll() is None:
            p.kill()


def test_lock_keys_are_stable_signed_32_bit() -> None:
    assert lock_key("source", "web1", "st") == lock_key("source", "web1", "st")
    assert lock_key("source", "web1", "st") != lock_key("queue", "web1", "st")
    assert lock_key("source", "web1", "a_state") != lock_key("source", "web1", "b_state")
    assert all(-(2 ** 31) <= lock_key("source", str(i), "st") < 2 ** 31 for i in range(1000))


def test_a_node_application_name_is_cut_as_postgresql_cuts_it() -> None:
    assert node_application("st", "n1") == "indexerd-node:" + hashlib.md5(b"st").hexdigest()[:8] + ":n1"
    long = node_application("st", "x" + "é" * 40)
    assert len(long.encode("utf-8")) == 62 and long.endswith("é")  # 63 bytes would cut an é in two


def test_two_live_nodes_may_not_share_a_name(address) -> None:
    first = PgStore(address, application_name=node_application(address.schema, "n1"))
    first.register_node("n1", "host-a", 100, "0.1", ["docs"])
    second = PgStore(address, application_name=node_application(address.schema, "n1"))
    with pytest.raises(StoreError, match="node 'n1' is already running .*host-a, pid 100"):
        second.register_node("n1", "host-b", 200, "0.1", [])
    second.close()  # as Node.start does when refused
    with PgStore(address) as reader:
        nodes = {n["name"]: n for n in reader.nodes()}
        assert nodes["n1"]["alive"] and nodes["n1"]["sources"] == ["docs"]
        first.close()  # its connection is gone: dead at once (the server ends its backend), whatever its last heartbeat
        deadline = time.monotonic() + 5
        while {n["name"]: n for n in reader.nodes()}["n1"]["alive"]:
            assert time.monotonic() < deadline, "a node whose connection closed still counts as alive"
            time.sleep(0.02)
    second = PgStore(address, application_name=node_application(address.schema, "n1"))
    second.register_node("n1", "host-b", 200, "0.1", [])  # the name is free again
    second.heartbeat("n1", "passes of docs", ["docs", "web"])
    with PgStore(address) as reader:
        n1 = {n["name"]: n for n in reader.nodes()}["n1"]
        assert (n1["host"], n1["alive"], n1["working_on"], n1["sources"]) == ("host-b", True, "passes of docs",
                                                                             ["docs", "web"])
        assert reader.live_node_sources() == {"docs", "web"}
    second.close()


def test_each_node_counts_as_dead_by_its_own_lease(address) -> None:
    """A node that stops beating (frozen: its connection open) is dead 1.5 leases after its last
    beat, its own lease ([store] lease): one with a 2 s lease after 3 s, while one with the
    default 20 s lease that stopped beating at the same moment is still alive."""
    quick_address = replace(address, lease_seconds=2.0)
    quick = PgStore(quick_address, application_name=node_application(address.schema, "quick"))
    slow = PgStore(address, application_name=node_application(address.schema, "slow"))
    try:
        assert (quick.timings.heartbeat, quick.timings.node_dead, quick.timings.host_claim) == (0.5, 3.0, 2.0)
        assert (slow.timings.heartbeat, slow.timings.node_dead, slow.timings.host_lease) == (5.0, 30.0, 20.0)
        quick.register_node("quick", "h", 1, "x", [])
        slow.register_node("slow", "h", 2, "x", [])
        began = time.monotonic()
        with PgStore(address) as reader:
            alive = {n["name"]: n["alive"] for n in reader.nodes()}
            assert alive == {"quick": True, "slow": True}, alive
            while (alive := {n["name"]: n["alive"] for n in reader.nodes()})["quick"]:
                assert time.monotonic() - began < 6, "a node silent past 1.5 of its leases still counts as alive"
                time.sleep(0.1)
            assert time.monotonic() - began > 2.5  # not before its 3 s
            assert alive["slow"], "a node was judged by another node's lease"
    finally:
        quick.close()
        slow.close()


def test_a_robots_verdict_is_fetched_once_for_every_node(address) -> None:
    from indexerd.sources.web import robots
    from indexerd.sources.web.httpresponse import Response

    body = b"User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n"
    resp = Response(url="http://127.0.0.9:5/robots.txt", method="GET", status=200, headers={}, body=body,
                    elapsed=0.01)
    shared = robots.SharedRobots()
    shared.store = PgStore(address)
    old, robots.SHARED = robots.SHARED, shared
    try:
        node_a, node_b = robots.RobotsCache(token="indexerd"), robots.RobotsCache(token="otherbot")
        assert node_b.get("http://127.0.0.9:5") is None
        node_a.put_response("http://127.0.0.9:5", resp)
        got = node_b.get("http://127.0.0.9:5")  # no request of its own: the shared verdict
        assert got is not None and got.status == "ok" and got.crawl_delay == 2.0 and got.token == "otherbot"
        assert not got.allowed("http://127.0.0.9:5/private/x") and got.allowed("http://127.0.0.9:5/public")
        assert 86000 < got.expires_at - got.fetched_at <= 86400  # what is left of a's 24 h
        node_a.put_response("http://127.0.0.9:6", Response(url="http://127.0.0.9:6/robots.txt", method="GET",
                                                           status=503, headers={}, body=b"", elapsed=0.01))
        assert robots.RobotsCache().get("http://127.0.0.9:6").status == "unreachable"
    finally:
        robots.SHARED = old
        shared.store.close()


def test_a_store_connection_the_server_ended_is_replaced(address, pg_index_server) -> None:
    from indexerd.core.store import DocumentRecord

    s = PgStore(address)
    s.write_batch([DocumentRecord(key="k1", source="docs")])
    for _ in range(2):  # a read, then a write, each right after the server ended the connection
        pg_index_server.admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE application_name = 'indexerd-store' AND pid <> pg_backend_pid()",
                              dbname="indexerd_index")  # the session server's database (conftest)
        assert s.get("k1") is not None
        s.write_batch([DocumentRecord(key="k2", source="docs")])
    assert s.keys() == {"k1", "k2"}
    s.close()


def test_a_node_whose_index_is_elsewhere_is_refused(address) -> None:
    from indexerd.config import parse_config
    from indexerd.core.errors import ConfigError
    from indexerd.runtime.recovery import check_cluster_identity, cluster_identity
    from indexerd.index import load_engine, wanted_identity

    wanted = wanted_identity(load_engine("postgresql"))

    def identity(url: str) -> str:
        cfg = parse_config(f'[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "{url}"\n', "<t>")
        return cluster_identity(wanted, cfg.index)

    with PgStore(address) as s:
        check_cluster_identity(s, identity("postgresql://u@db/search"), rebuild=False)  # the first node
        check_cluster_identity(s, identity("postgresql://u@db/search"), rebuild=False)  # the same again
        with pytest.raises(ConfigError, match="search2"):
            check_cluster_identity(s, identity("postgresql://u@db/search2"), rebuild=False)
        assert "secret" not in s.get_meta("cluster:index_identity")


def test_a_node_whose_store_is_not_the_clusters_is_refused_before_it_crawls_anything(tmp_path) -> None:
    """A new-user trial: ``[store] schema`` mistyped on one node made it a cluster of its own,
    sharing the index but not the host leases (every site crawled again beside the others).  A
    new store whose index already holds documents is refused, every time, naming both."""
    from conftest import engine_toml, fresh_schema, store_toml
    from indexerd.config import parse_config
    from indexerd.core.errors import ConfigError
    from indexerd.runtime.indexer import Indexer

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.txt").write_text("clusterword\n")
    index, store = engine_toml("postgresql", fresh=True), fresh_schema()

    def node(name: str, schema: str) -> Indexer:
        return Indexer(parse_config(f'state_dir = "{tmp_path / name}"\nnode = "{name}"\n{index}{store_toml(schema)}'
                                    f'[[sources.filesystem]]\nname = "tree"\npath = "{tree}"\nnode = "a"\n', "<t>"))

    a = node("a", store)
    a.open("index")
    try:
        assert a.run_pass(progress=False).as_dict()["indexed"] == 1
    finally:
        a.close()
    typo = fresh_schema()
    for _ in range(2):  # refused again at the next start: nothing was recorded
        b = node("b", typo)
        with pytest.raises(ConfigError, match=f"schema {typo}|{typo}") as e:
            b.open("index")
        assert "already holds 1 document," in str(e.value) and "same [store] url and schema" in str(e.value)
    b = node("b", store)  # the cluster's store: joins
    b.open("index")
    try:
        assert b.index().count() == 1
    finally:
        b.close()


# -- the shared frontier: URLs queued once per pass, hosts claimed by one node ------------------
def offer_row(url: str, pass_id: int, via: str = "link") -> dict:
    from indexerd.sources.web.urlstate import UrlState

    return UrlState(url, pass_id=pass_id, state="spilled", hops=1, seed_depth=1, seq=0, via=via).as_row()


def beating_node(address, name: str) -> PgStore:
    s = PgStore(address, application_name=node_application(address.schema, name))
    s.register_node(name, "host", 1, "0.1", ["site"])
    return s


def test_a_url_is_queued_once_per_pass_whichever_nodes_offer_it(address) -> None:
    with PgStore(address) as a, PgStore(address) as b:
        a.crawl_write("site", [dict(offer_row("http://h1/old", 1), state="done", last_status=200,
                                    last_outcome="indexed:new", doc_key=None)])
        a.frontier_offer("site", 2, [offer_row("http://h1/new", 2), offer_row("http://h1/old", 2)])
        # b offers the same URLs with other hops in the same pass: the first offer stands
        b.frontier_offer("site", 2, [dict(offer_row("http://h1/new", 2), hops=7), dict(offer_row("http://h1/old", 2), hops=7)])
        rows = {r["url"]: r for r in a.frontier_take("site", "http://h1", 2, 10)}
        assert {u: (r["state"], r["hops"]) for u, r in rows.items()} == {"http://h1/new": ("spilled", 1),
                                                                           "http://h1/old": ("spilled", 1)}
        assert a.frontier_take("site", "http://h1", 2, 10) == []  # taken once
        # what the row knew of the URL (its last answer) is kept by the offer
        assert rows["http://h1/old"]["last_status"] == 200
        assert a.frontier_hosts() == [{"source": "site", "host": "http://h1", "pass_id": 2, "node": None,
                                       "pending": True, "active": False}]
        # the next pass queues it again
        b.frontier_offer("site", 3, [dict(offer_row("http://h1/new", 3), hops=2)])
        assert [(r["url"], r["hops"]) for r in a.frontier_take("site", "http://h1", 3, 1)] == [("http://h1/new", 2)]
        # a host's rows are its own: a longer host name with the same start is not one of them
        a.frontier_offer("site", 3, [offer_row("http://h10/x", 3), offer_row("http://h1:8080/y", 3)])
        a.frontier_take("site", "http://h10", 3, 10)
        a.frontier_take("site", "http://h1:8080", 3, 10)
        assert [r["url"] for r in a.frontier_host_rows("site", "http://h1", 3)] == ["http://h1/new"]
        assert [r["url"] for r in a.frontier_host_rows("site", "http://h1", 2)] == ["http://h1/old"]


def test_a_host_is_claimed_by_one_node_and_a_dead_nodes_hosts_are_taken_at_once(address) -> None:
    n1, n2 = beating_node(address, "n1"), beating_node(address, "n2")
    try:
        n1.frontier_offer("site", 1, [offer_row(f"http://h{i}/p", 1) for i in range(4)])
        assert n1.frontier_load("site", 1, "n1") == (4, 0)
        got1 = n1.frontier_claim("site", 1, "n1", 3)
        got2 = n2.frontier_claim("site", 1, "n2", 3)
        assert len(got1) == 3 and len(got2) == 1 and not set(got1) & set(got2)
        assert n1.frontier_load("site", 1, "n1") == (4, 3)
        # the claimer reads its pending hosts once: a URL queued later marks the host pending again
        assert sorted(n1.frontier_pending_hosts("site", "n1")) == sorted(got1)
        assert n1.frontier_pending_hosts("site", "n1") == []
        n2.frontier_offer("site", 1, [offer_row(f"{got1[0]}/later", 1)])
        assert n1.frontier_pending_hosts("site", "n1") == [got1[0]]
        assert not n1.frontier_over("site", 1)
        # n1 is killed: its hosts are free at once (its heartbeat connection is gone), active or not
        n1.close()
        deadline = time.monotonic() + 5
        while not (taken := n2.frontier_claim("site", 1, "n2", 10)):
            assert time.monotonic() < deadline, "a dead node's hosts were not free"
            time.sleep(0.05)
        assert sorted(taken) == sorted(got1)
        n2.frontier_pending_hosts("site", "n2")
        assert not n2.frontier_over("site", 1)
        n2.frontier_idle("site", "n2", got1 + got2)
        assert n2.frontier_over("site", 1)
        # a node stopped cleanly hands its hosts back
        n2.node_stopped("n2")
        assert {h["node"] for h in n2.frontier_hosts()} == {None}
    finally:
        n1.close()
        n2.close()


def test_a_node_whose_budget_is_spent_leaves_its_hosts_for_the_next_pass(address) -> None:
    n1 = beating_node(address, "n1")
    try:
        n1.frontier_offer("site", 1, [offer_row("http://h1/p", 1)])
        assert n1.frontier_claim("site", 1, "n1", 1) == ["http://h1"]
        n1.frontier_pending_hosts("site", "n1")
        n1.frontier_drop("site", "n1")
        assert n1.frontier_over("site", 1)
        assert [h["node"] for h in n1.frontier_hosts()] == [None]  # a URL queued later goes to another node
        n1.frontier_reset("site")  # the next pass begins
        assert n1.frontier_hosts() == []
    finally:
        n1.close()


def test_a_claim_that_ran_out_while_the_store_was_down_is_lost_and_may_be_claimed_again(address) -> None:
    # a trial: after a database restart two nodes crawled the same hosts (the first still held
    # them in memory after another had claimed them)
    n1 = beating_node(address, "n1")
    try:
        n1.frontier_offer("site", 1, [offer_row("http://h1/p", 1)])
        assert n1.frontier_claim("site", 1, "n1", 1) == ["http://h1"]
        assert n1.frontier_held("site", "n1") == {"http://h1"}
        n1._exec_many("UPDATE crawl_hosts SET claim_until = now() - interval '1 second'", [()])  # not renewed
        assert n1.frontier_held("site", "n1") == {"http://h1"}  # nobody took it: renewed, kept
        n1._exec_many("UPDATE crawl_hosts SET claim_until = now() - interval '1 second'", [()])
        n2 = beating_node(address, "n2")
        try:
            assert n2.frontier_claim("site", 1, "n2", 1) == ["http://h1"]  # another node took it
            assert n1.frontier_held("site", "n1") == set()  # the node drops it from its frontier
            n2.node_stopped("n2")
            assert n1.frontier_claim("site", 1, "n1", 1) == ["http://h1"]  # and may take it again
        finally:
            n2.close()
    finally:
        n1.close()


def own_server_address(server, dbname: str):
    """The store address of schema ``st`` in a new database ``dbname`` of ``server`` (a
    PostgreSQL server of the test's own, which it may restart)."""
    from indexerd.core.store import PgStoreAddress

    return PgStoreAddress.from_settings(type("S", (), {
        "url": server.create_database(dbname), "schema": "st", "password_env": None,
        "password_file": None, "timeout": 30.0})())


def test_a_database_restart_leaves_every_live_node_its_hosts(tmp_path) -> None:
    """A new-user trial: after the server came back from a 30 s outage every node looked dead
    (its heartbeat connection gone, its claims run out), the first to tick took the others'
    hosts, and pages were fetched again for 4 s.  Nodes heard from shortly before the server
    started keep their claims while their heartbeats reconnect; a node long silent does not."""
    from pg import PgServer

    server = PgServer.start()
    try:
        server.wait_ready()
        address = own_server_address(server, "restart")
        PgStore(address).close()
        n1, n2, n3 = (beating_node(address, n) for n in ("n1", "n2", "n3"))
        try:
            n1.frontier_offer("site", 1, [offer_row(f"http://h{i}/p", 1) for i in (1, 2, 3)])
            assert n1.frontier_claim("site", 1, "n1", 1) == ["http://h1"]
            assert n3.frontier_claim("site", 1, "n3", 1) == ["http://h2"]
            n1._exec_many("UPDATE crawl_hosts SET claim_until = now() - interval '1 second'", [()])  # a long outage
            n1._exec_many("UPDATE nodes SET heartbeat_at = now() - interval '1 hour' WHERE name = 'n3'", [()])
            server.restart()
            # n2 is back first (its next statement reconnects it); n1 and n3 have not beaten yet
            alive = {n["name"]: n["alive"] for n in n2.nodes()}
            assert alive == {"n1": True, "n2": True, "n3": False}, alive
            assert sorted(n2.frontier_claim("site", 1, "n2", 3)) == ["http://h2", "http://h3"]  # not n1's h1
            assert n1.frontier_held("site", "n1") == {"http://h1"}  # n1 back: its host, renewed
            assert n3.frontier_held("site", "n3") == set()  # n3 was long silent: h2 went to n2
        finally:
            for n in (n1, n2, n3):
                n.close()
    finally:
        server.stop()


def test_a_tree_stays_with_its_stopped_owner_until_the_config_moves_it(address) -> None:
    # a trial: `indexerd index` on a second node took over a stopped node's tree (a directory of
    # the same path on its own machine), whose pass would delete the owner's documents as gone
    from datetime import datetime, timezone
    from types import SimpleNamespace

    from indexerd.sources.claims import claim_pass

    n1 = PgStore(address, application_name=node_application(address.schema, "n1"))  # its heartbeat connection
    store = PgStore(address)
    try:
        n1.register_node("n1", "host-1", 101, "test", ["home"])
        n1.pass_started("home", "filesystem", datetime.now(timezone.utc), "n1")
        home = SimpleNamespace(name="home", kind="filesystem", cfg=SimpleNamespace(node=None))
        alive = claim_pass(store, address, "n2", home, forced=True)
        assert (alive.run, alive.error) == (False, True) and "which is alive" in alive.reason
        n1.node_stopped("n1")
        n1.close()
        stopped = claim_pass(store, address, "n2", home, forced=True)
        assert (stopped.run, stopped.error) == (False, True), stopped
        assert "node n1 (not running now" in stopped.reason and 'node = "n2"' in stopped.reason
        assert claim_pass(store, address, "n1", home, forced=True).run  # the owner itself
        moved = SimpleNamespace(name="home", kind="filesystem", cfg=SimpleNamespace(node="n2"))
        assert claim_pass(store, address, "n2", moved, forced=True).run
    finally:
        n1.close()
        store.close()


def test_a_web_pass_just_completed_is_not_begun_again_for_a_node_that_joined_as_it_ended(address) -> None:
    # a trial: a node joined pass 1 as it ended (its running mark landed after the finisher's
    # run record), or claimed between the finisher's pass state and its run record, and began
    # pass 2 at once -- every page fetched again an hour early
    from datetime import datetime, timedelta, timezone
    from types import SimpleNamespace

    from indexerd.sources.claims import claim_pass
    from indexerd.sources.web.source import WebCrawlSource
    from indexerd.sources.web.urlstate import PassState

    now = datetime.now(timezone.utc)
    site = SimpleNamespace(name="site", kind="web", cfg=SimpleNamespace(interval=3600.0),
                           pass_running=lambda store: WebCrawlSource.pass_running(site, store),
                           pass_begun_at=lambda store: WebCrawlSource.pass_begun_at(site, store))
    with PgStore(address) as store:
        store.crawl_write("site", [], meta={"web:site:pass": PassState(1, running=False,
                                                                     started=now - timedelta(seconds=30)).to_json()})
        store.record_run("site", "web", now - timedelta(seconds=30), now - timedelta(seconds=2), {}, completed=True)
        store.pass_started("site", "web", now - timedelta(seconds=1), "n1")  # the late joiner's mark
        claim = claim_pass(store, address, "n1", site, forced=False)
        assert (claim.run, claim.lock) == (False, None), claim
        assert "began 30 s ago and is over" in claim.reason
        # the first pass, between the finisher's pass state (finished) and its run record
        first = SimpleNamespace(name="first", kind="web", cfg=SimpleNamespace(interval=3600.0),
                                pass_running=lambda store: WebCrawlSource.pass_running(first, store),
                                pass_begun_at=lambda store: WebCrawlSource.pass_begun_at(first, store))
        store.pass_started("first", "web", now - timedelta(seconds=20), "n2")
        store.crawl_write("first", [], meta={"web:first:pass": PassState(1, running=False,
                                                                       started=now - timedelta(seconds=20)).to_json()})
        claim = claim_pass(store, address, "n1", first, forced=False)
        assert (claim.run, claim.lock) == (False, None), claim
        assert "began 20 s ago" in claim.reason
        asked = claim_pass(store, address, "n1", site, forced=True)
        assert asked.run and asked.lock is not None  # a request still runs it
        asked.release()


def test_a_node_takes_up_the_hosts_its_ended_part_of_a_pass_still_holds(tmp_path, monkeypatch) -> None:
    """A retrial: after a database restart a node's part of a pass ended (the store gone) with
    a host still claimed in its name; rejoining, it claimed others and nobody crawled that host
    until the node left the pass (45 s).  A node joining a pass takes up the hosts the store
    says it holds."""
    import conftest
    from httpsite import Site
    from test_web import Crawl as OneNodeCluster, html
    from indexerd.config import parse_config
    from indexerd.config.paths import resolve_node_name
    from indexerd.runtime.indexer import Indexer
    from indexerd.sources.web.urls import canonicalize
    from indexerd.sources.web.urlstate import PassState, UrlState

    monkeypatch.setitem(conftest._CRAWL_STORE, "kind", "postgresql+store")
    monkeypatch.setitem(conftest._PG_INDEX, "schema", conftest.fresh_schema("ix"))
    site = Site().start()
    try:
        site.static("/", html("Home", "start", ["/a.html"]), etag='"h"')
        site.static("/a.html", html("A", "takenupword"), etag='"a"')
        crawl = OneNodeCluster(tmp_path, site)
        cfg = parse_config(crawl.config())
        node = resolve_node_name(cfg)
        ix = Indexer(cfg)
        ix.open("index")  # registered: the claims its name held before are cleared
        try:
            origin, page = site.base, canonicalize(site.url("/a.html"))
            store = ix.store
            store.crawl_write("site", [UrlState(page, pass_id=1, state="spilled", seq=1, hops=1).as_row()],
                              meta={"web:site:pass": PassState(1, running=True).to_json()})
            store._exec_many("INSERT INTO crawl_hosts (source, host, pass_id, node, claim_until, pending, active) "
                             "VALUES ('site', ?, 1, ?, now() + interval '20 seconds', false, true)", [(origin, node)])
            summary = ix.run_pass(progress=False).as_dict()
        finally:
            ix.close()
        assert [h.path for h in site.log if h.path != "/robots.txt"] == ["/a.html"], summary
        assert crawl.search("takenupword") == [page]
        assert '"finished"' in crawl.query("SELECT value FROM meta WHERE key = 'web:site:pass'")[0]["value"]
    finally:
        site.close()


def test_a_node_joining_a_pass_asks_the_pages_a_dead_node_left_without_a_crawl_row(tmp_path, monkeypatch) -> None:
    """Issue 30: a node killed mid-pass can leave an indexed page no crawl row will ask again
    (its document committed, its row not written; or a gone page whose deletion was lost).  On
    one node the resume asks such pages again; a node joining the cluster's pass did not, so
    the page stayed indexed for good after the server deleted it.  Whoever joins asks them."""
    import conftest
    from httpsite import Site
    from test_web import Crawl as OneNodeCluster, html
    from indexerd.config import parse_config
    from indexerd.core.store import DocumentRecord
    from indexerd.runtime.indexer import Indexer
    from indexerd.sources.web.urls import canonicalize
    from indexerd.sources.web.urlstate import PassState, UrlState

    monkeypatch.setitem(conftest._CRAWL_STORE, "kind", "postgresql+store")
    monkeypatch.setitem(conftest._PG_INDEX, "schema", conftest.fresh_schema("ix"))
    site = Site().start()
    try:
        site.static("/", html("Home", "start"), etag='"h"')
        site.add("/orphan.html", b"gone", status=404)  # deleted since the dead node indexed it
        crawl = OneNodeCluster(tmp_path, site)
        ix = Indexer(parse_config(crawl.config()))
        ix.open("index")
        try:
            orphan = canonicalize(site.url("/orphan.html"))
            store = ix.store
            # the dead node's pass: its home page's row written, the orphan's document
            # committed and its row lost with the process
            store.crawl_write("site", [dict(UrlState(canonicalize(site.url("/")), pass_id=1, state="done",
                                                     seq=0).as_row(), last_status=200)],
                              meta={"web:site:pass": PassState(1, running=True).to_json()})
            store.write_batch([DocumentRecord(key=orphan, source="site", status="indexed")])
            ix.run_pass(progress=False)
            counters = ix.counters.snapshot()
        finally:
            ix.close()
        assert [h.path for h in site.hits("/orphan.html")] == ["/orphan.html"]
        assert counters.get("web.resume.orphans") == 1, counters
    finally:
        site.close()


def test_a_node_with_nothing_to_do_stays_in_the_pass_until_it_is_over(tmp_path, monkeypatch) -> None:
    """Issue 31 (a quiet end): a node that joins a pass whose only host with work another live
    node holds has nothing to do; it left the pass after 1 s and came back every 5 s (a claim,
    a join, a leave each time) until the pass ended.  It stays, and ends with the pass."""
    import threading

    import conftest
    from httpsite import Site
    from test_web import Crawl as OneNodeCluster, html
    from indexerd.config import parse_config
    from indexerd.runtime.indexer import Indexer
    from indexerd.sources.web.urlstate import PassState

    monkeypatch.setitem(conftest._CRAWL_STORE, "kind", "postgresql+store")
    monkeypatch.setitem(conftest._PG_INDEX, "schema", conftest.fresh_schema("ix"))
    site = Site().start()
    other = None
    try:
        site.static("/", html("Home", "start"), etag='"h"')
        crawl = OneNodeCluster(tmp_path, site)
        ix = Indexer(parse_config(crawl.config()))
        ix.open("index")
        other = beating_node(pg_store_address(crawl.store_schema), "busy")  # alive, holding the host
        out: dict = {}
        try:
            ix.store.crawl_write("site", [], meta={"web:site:pass": PassState(1, running=True).to_json()})
            other._exec_many("INSERT INTO crawl_hosts (source, host, pass_id, node, claim_until, pending, active) "
                             "VALUES ('site', ?, 1, 'busy', now() + interval '60 seconds', false, true)",
                             [(site.base,)])
            runner = threading.Thread(target=lambda: out.update(summary=ix.run_pass(progress=False)), daemon=True)
            runner.start()
            runner.join(3.0)  # well past LEAVE_SECONDS: it left the pass here
            assert runner.is_alive(), f"the node left a pass that goes on: {out}"
            other._exec_many("UPDATE crawl_hosts SET active = false WHERE node = 'busy'", [()])  # the pass is over
            runner.join(30)
            assert not runner.is_alive()
            counters = ix.counters.snapshot()
        finally:
            ix.close()
        assert '"finished"' in crawl.query("SELECT value FROM meta WHERE key = 'web:site:pass'")[0]["value"]
        assert site.log == [] and counters.get("web.fetch.200", 0) == 0
    finally:
        if other is not None:
            other.close()
        site.close()


# -- issue 30: a cluster is its store's database and schema ---------------------------------
def _wait_dead(reader: PgStore, name: str) -> None:
    deadline = time.monotonic() + 5
    while {n["name"]: n for n in reader.nodes()}[name]["alive"]:
        assert time.monotonic() < deadline, f"node {name} still counts as alive after its connection closed"
        time.sleep(0.02)


def _two_clusters(pg_index_server, where: str):
    """Two stores with the same node and source names: two schemas of one database, or one
    schema name in two databases of one server."""
    from indexerd.core.store import PgStoreAddress

    a = pg_store_address()
    if where == "schemas":
        b = pg_store_address()
    else:
        url = pg_index_server.create_database(f"other{a.schema}")
        b = PgStoreAddress.from_settings(SimpleNamespace(url=url, schema=a.schema, password_env=None,
                                                         password_file=None, timeout=30.0))
    for address in (a, b):
        PgStore(address).close()
    return a, b


@pytest.mark.parametrize("where", ["schemas", "databases"])
def test_two_clusters_on_one_server_see_nothing_of_each_others_nodes(pg_index_server, where) -> None:
    """Cluster A's node n1 stops; cluster B's n1 runs on: A's n1 is dead at once, B's stays
    alive (liveness was read server-wide, by node name: B's connection kept A's n1 alive)."""
    a, b = _two_clusters(pg_index_server, where)
    a_n1 = PgStore(a, application_name=node_application(a.schema, "n1"))
    a_n1.register_node("n1", "host-a", 100, "0.1", ["web"])
    b_n1 = PgStore(b, application_name=node_application(b.schema, "n1"))
    b_n1.register_node("n1", "host-b", 200, "0.1", ["web"])  # not refused: another cluster's name
    try:
        with PgStore(a) as reader_a, PgStore(b) as reader_b:
            assert {n["name"]: n["alive"] for n in reader_a.nodes()} == {"n1": True}
            a_n1.close()  # A's n1 is killed
            _wait_dead(reader_a, "n1")
            assert {n["name"]: n["alive"] for n in reader_b.nodes()} == {"n1": True}
    finally:
        b_n1.close()


@pytest.mark.parametrize("where", ["schemas", "databases"])
def test_two_clusters_on_one_server_hold_their_source_locks_apart(pg_index_server, where) -> None:
    """A source named ``web`` in each cluster: each cluster's node takes its own source's lock
    (the key ignored the schema: B's node stood by for A's pass), and names its own holder."""
    a, b = _two_clusters(pg_index_server, where)
    in_a = SourceLock(a, "a1", "source", "web")
    in_b = SourceLock(b, "b1", "source", "web")
    try:
        assert in_a.try_acquire()
        assert in_b.try_acquire(), "cluster B's source lock was taken by cluster A's node"
        assert (in_a.holder(), in_b.holder()) == ("a1", "b1")
        assert lock_key("source", "web", a.schema) in SourceLock.held_here
    finally:
        in_a.release()
        in_b.release()
    assert SourceLock(b, "b2", "source", "web").holder() is None


def test_the_frontier_by_host_counts_the_current_pass_only(address) -> None:
    """``ctl status``'s cluster frontier: per host of each source's current pass, its URLs
    queued (waiting or taken) and done, and the node whose claim holds; the rows of earlier
    passes (millions, on a big site) are not read."""
    with beating_node(address, "n1") as a:
        a.crawl_write("site", [dict(offer_row(f"http://h1/old{i}", 1), state="done", last_status=200)
                               for i in range(5)])
        a.frontier_offer("site", 2, [offer_row("http://h1/a", 2), offer_row("http://h1/b", 2),
                                     offer_row("http://h2/c", 2)])
        assert a.frontier_claim("site", 2, "n1", 1) == ["http://h1"]
        taken = a.frontier_take("site", "http://h1", 2, 1)
        a.crawl_write("site", [dict(taken[0], state="done", last_status=200)])
        assert a.frontier_by_host() == [
            {"source": "site", "host": "http://h1", "queued": 1, "done": 1, "node": "n1"},
            {"source": "site", "host": "http://h2", "queued": 1, "done": 0, "node": None}]


def test_statements_made_while_the_server_restarts_wait_for_it(tmp_path) -> None:
    """Issue 30: a ``pg_ctl -m fast restart`` mid-pass made 25 pages be fetched twice: the
    crawl rows written in the second the server was down failed once more on a new connection
    (refused: the server was still starting), the pass ended, and its resume asked them again.
    A statement whose connection broke now waits for the server to come back."""
    import threading

    from pg import PgServer

    server = PgServer.start()
    try:
        server.wait_ready()
        address = own_server_address(server, "restarting")
        with PgStore(address) as s:
            s.crawl_write("site", [offer_row("http://h/0", 1)])
            restarted = threading.Event()
            t = threading.Thread(target=lambda: (server.restart(), restarted.set()), daemon=True)
            t.start()
            written = 0
            while not restarted.is_set() or written < 5:  # writes all through the restart
                written += 1
                s.crawl_write("site", [offer_row(f"http://h/{written}", 1)])
                assert s.get_meta("nothing") is None
            t.join(60)
            assert len(s.crawl_spilled("site", 1, 100_000)) == written + 1
    finally:
        server.stop()


# -- fencing: a write under a claim's old token is refused by the store ------------------------
def _fence(node: PgStore, name: str, pass_id: int = 1):
    from indexerd.core.store.sharedfrontier import ClaimFence

    tokens = node.frontier_claim_tokens("site", pass_id, name, 1)
    assert list(tokens) == ["http://h1"]
    return ClaimFence("site", "http://h1", name, tokens["http://h1"])


def test_a_write_under_a_lost_claims_token_is_refused_and_the_new_holders_rows_stay(address) -> None:
    """Issue 30 (Kleppmann's fencing token): node a claims a host, its claim runs out (a was
    paused) and b takes the host over; the page a fetched under its old token is refused by
    the store, crawl row, outlinks, a deletion and a new URL alike, and nothing b wrote is
    overwritten; a write under the current token passes."""
    a, b = beating_node(address, "n1"), beating_node(address, "n2")
    try:
        a.frontier_offer("site", 1, [offer_row("http://h1/p", 1), offer_row("http://h1/q", 1)])
        fence_a = _fence(a, "n1")
        a._exec_many("UPDATE crawl_hosts SET claim_until = now() - interval '1 second'", [()])  # a paused
        fence_b = _fence(b, "n2")
        assert fence_b.token > fence_a.token
        done_b = dict(offer_row("http://h1/p", 1), state="done", last_status=200, last_outcome="indexed:new")
        assert b.frontier_write("site", {"http://h1": fence_b}, [done_b], links={"http://h1/p": '["http://h1/q"]'},
                                requisites={"http://h1/p": (False, ["http://h1/s.css"])}) == set()
        # a wakes and writes what it fetched under its old token: refused, every part of it
        stale = dict(done_b, last_status=404, last_outcome="gone:404")
        refused = a.frontier_write("site", {"http://h1": fence_a}, [stale, offer_row("http://h1/new", 1)],
                                   deletes=["http://h1/q"], links={"http://h1/p": None},
                                   requisites={"http://h1/p": (False, ["http://h1/t.css"])},
                                   meta={"web:site:pass": "a's"})
        assert refused == {"http://h1"}
        row = a.crawl_row("site", "http://h1/p")
        assert (row["state"], row["last_status"], row["last_outcome"]) == ("done", 200, "indexed:new")
        assert a.crawl_links("site", "http://h1/p") == '["http://h1/q"]'
        a.crawl_write("site", [dict(offer_row(u, 1, "requisite"), state="done", last_status=200)
                               for u in ("http://h1/s.css", "http://h1/t.css")])
        assert a.crawl_requisites_referenced("site", ["http://h1/s.css", "http://h1/t.css"]) == {"http://h1/s.css"}
        assert a.crawl_row("site", "http://h1/q") is not None and a.crawl_row("site", "http://h1/new") is None
        assert a.get_meta("web:site:pass") == "a's"  # the pass state is not the host's: written
        # the writer's check before a page goes to the index: a's fence is stale, b's current
        assert a.frontier_stale([fence_a, fence_b]) == {fence_a}
        # a write under the current token passes
        assert b.frontier_write("site", {"http://h1": fence_b}, [dict(done_b, last_status=304)]) == set()
        assert b.crawl_row("site", "http://h1/p")["last_status"] == 304
        # a renewal after an outage keeps the token (no hand-over); a claim again draws a new one
        b._exec_many("UPDATE crawl_hosts SET claim_until = now() - interval '1 second'", [()])
        assert b.frontier_claims("site", "n2") == {"http://h1": pytest.approx(20.0, abs=1)}
        assert b.frontier_stale([fence_b]) == set()
        b.frontier_release("site", "n2", "http://h1")
        # handed back and not claimed since: what b still had in flight is written (no newer token)
        assert b.frontier_stale([fence_b]) == set()
        assert b.frontier_write("site", {"http://h1": fence_b}, [dict(done_b, last_status=304)]) == set()
        fence_a2 = _fence(a, "n1")
        assert fence_a2.token > fence_b.token
        assert a.frontier_stale([fence_a, fence_b, fence_a2]) == {fence_a, fence_b}
        assert b.frontier_write("site", {"http://h1": fence_b}, [dict(done_b, last_status=500)]) == {"http://h1"}
        assert a.crawl_row("site", "http://h1/p")["last_status"] == 304
    finally:
        a.close()
        b.close()


def test_a_page_fetched_under_a_stale_token_is_not_written_to_the_index(address, tmp_path) -> None:
    """The writer asks the store, before a page goes to the index, whether the claim it was
    fetched under still holds: a page of a lost claim is neither indexed nor stored, counted as
    ``web.fenced_writes``; a page under the current claim is written."""
    from datetime import datetime, timezone

    from indexerd.core.counts import Counters
    from indexerd.core.store import DocumentRecord
    from indexerd.index import IndexDoc, open_index
    from indexerd.pipeline.writer import IndexWriter

    a, b = beating_node(address, "n1"), beating_node(address, "n2")
    counters = Counters()
    ix = open_index(tmp_path)
    w = IndexWriter(ix, address, live=False, counters=counters)
    now = datetime.now(timezone.utc)

    def doc(key: str) -> IndexDoc:
        return IndexDoc(key=key, source="site", url=key, path=None, title="t", content=f"fencedword {key}",
                        last_modified=now, date_source="header", media_type="text/html", size=1)
    try:
        a.frontier_offer("site", 1, [offer_row("http://h1/p", 1)])
        fence_a = _fence(a, "n1")
        a._exec_many("UPDATE crawl_hosts SET claim_until = now() - interval '1 second'", [()])
        fence_b = _fence(b, "n2")
        w.submit_index(doc("http://h1/p"), DocumentRecord(key="http://h1/p", source="site", status="indexed"),
                       fence=fence_b)
        w.flush(30)
        w.submit_index(doc("http://h1/stale"), DocumentRecord(key="http://h1/stale", source="site",
                                                              status="indexed"), fence=fence_a)
        w.submit_remove("http://h1/p", fence=fence_a)  # a's page said gone: b's document stays
        w.submit_remove_many(["http://h1/p"], fence=fence_a)
        w.flush(30)
        assert w.pending_record("http://h1/stale") == (False, None)
        assert [h.key for h in ix.search("fencedword")] == ["http://h1/p"]
        assert a.get("http://h1/stale") is None and a.get("http://h1/p") is not None
        assert counters.snapshot()["web.fenced_writes"] == 3
    finally:
        w.close()
        ix.close()
        a.close()
        b.close()


def test_a_take_over_while_a_page_waits_for_the_index_commit_keeps_it_out(address, tmp_path) -> None:
    """Issue 30 (fencing): a page whose claim held when the writer took it, and whose host is
    taken over before the batch commits (within the commit interval), is not committed: the
    claims of a batch are asked right before the index commit, not when each page arrives."""
    from datetime import datetime, timezone

    from indexerd.core.counts import Counters
    from indexerd.core.store import DocumentRecord
    from indexerd.index import IndexDoc, open_index
    from indexerd.pipeline.writer import IndexWriter

    a, b = beating_node(address, "n1"), beating_node(address, "n2")
    counters = Counters()
    ix = open_index(tmp_path)
    w = IndexWriter(ix, address, live=False, counters=counters, commit_interval_seconds=3600)
    now = datetime.now(timezone.utc)
    try:
        a.frontier_offer("site", 1, [offer_row("http://h1/p", 1)])
        fence_a = _fence(a, "n1")
        w.submit_index(IndexDoc(key="http://h1/p", source="site", url="http://h1/p", path=None, title="t",
                                content="latefencedword", last_modified=now, date_source="header",
                                media_type="text/html", size=1),
                       DocumentRecord(key="http://h1/p", source="site", status="indexed"), fence=fence_a)
        deadline = time.monotonic() + 10
        while w._loop.batch.first_at is None:  # the writer took the page into its open batch
            assert time.monotonic() < deadline, "the writer never took the page"
            time.sleep(0.01)
        a._exec_many("UPDATE crawl_hosts SET claim_until = now() - interval '1 second'", [()])
        _fence(b, "n2")  # taken over before the batch commits
        w.flush(30)
        assert ix.search("latefencedword") == []
        assert a.get("http://h1/p") is None
        assert counters.snapshot()["web.fenced_writes"] == 1
    finally:
        w.close()
        ix.close()
        a.close()
        b.close()


def test_a_take_over_between_the_fence_check_and_the_write_still_refuses_it(address, monkeypatch) -> None:
    """The fence is checked again by every statement of the write, not only at its start: a
    host taken over after the check (another transaction, committed meanwhile) is not written,
    and it is named among the hosts refused (it was not: such refusals went uncounted)."""
    a, b = beating_node(address, "n1"), beating_node(address, "n2")
    try:
        a.frontier_offer("site", 1, [offer_row("http://h1/p", 1)])
        fence_a = _fence(a, "n1")
        a._exec_many("UPDATE crawl_hosts SET claim_until = now() - interval '1 second'", [()])
        real = a._read_then_write

        def taken_over_after_the_check(steps, returned=None):
            def late(read):
                out = steps(read)  # the check: a's claim holds
                _fence(b, "n2")    # b takes the host over, committed before a's statements run
                return out
            real(late, returned)
        monkeypatch.setattr(a, "_read_then_write", taken_over_after_the_check)
        refused = a.frontier_write("site", {"http://h1": fence_a},
                                   [dict(offer_row("http://h1/p", 1), state="done", last_status=200),
                                    offer_row("http://h1/new", 1)], links={"http://h1/p": '["x"]'})
        assert refused == {"http://h1"}  # named, so the node counts it (web.fenced_writes)
        row = b.crawl_row("site", "http://h1/p")
        assert (row["state"], row["last_status"]) == ("spilled", None)
        assert b.crawl_row("site", "http://h1/new") is None and b.crawl_links("site", "http://h1/p") is None
    finally:
        a.close()
        b.close()


def test_what_each_node_fetched_adds_up_per_host_for_the_latest_pass(address) -> None:
    """The cluster pass's figures every node's status shows: each node adds what it fetched of
    a host as it goes; the latest pass of each source is read, and a new pass starts from 0."""
    from indexerd.daemon.status import cluster_passes

    with beating_node(address, "n1") as a, beating_node(address, "n2") as b:
        a.frontier_count("site", 1, "n1", {"http://h1": (3, 1), "http://h2": (0, 0)})
        a.frontier_count("site", 1, "n1", {"http://h1": (2, 0)})
        b.frontier_count("site", 1, "n2", {"http://h1": (1, 0), "http://h2": (4, 0)})
        b.frontier_count("other", 7, "n2", {"http://h9": (5, 2)})
        fetched = a.frontier_fetched()
        assert [(r["source"], r["pass_id"], r["host"], r["node"], r["fetched"], r["errors"]) for r in fetched] == [
            ("other", 7, "http://h9", "n2", 5, 2), ("site", 1, "http://h1", "n1", 5, 1),
            ("site", 1, "http://h1", "n2", 1, 0), ("site", 1, "http://h2", "n2", 4, 0)]
        frontier = [{"source": "site", "host": "http://h1", "queued": 2, "done": 6, "node": "n2"},
                    {"source": "site", "host": "http://h2", "queued": 0, "done": 4, "node": None}]
        assert cluster_passes(frontier, fetched)["site"] == {
            "pass_id": 1, "fetched": 10, "errors": 1, "done": 10, "queued": 2,
            "nodes": {"n1": {"fetched": 5, "errors": 1}, "n2": {"fetched": 5, "errors": 0}}}
        a.frontier_reset("site")  # the next pass begins
        a.frontier_count("site", 2, "n1", {"http://h1": (1, 0)})
        assert [(r["source"], r["pass_id"], r["fetched"]) for r in a.frontier_fetched()] == [("other", 7, 5), ("site", 2, 1)]


def test_a_schema_4_store_migrates_its_host_claims_to_fenced_ones(address) -> None:
    """PostgreSQL schema 4 -> 5: a store from before the fencing tokens keeps its host claims
    (token 0: none drawn yet), the next claim draws a larger one, and the fetch counts start."""
    from indexerd.core.store.pg_migrations import PG_SCHEMA_VERSION

    assert PG_SCHEMA_VERSION >= 5
    with beating_node(address, "n1") as a:
        a.frontier_offer("site", 1, [offer_row("http://h1/p", 1), offer_row("http://h2/p", 1)])
        assert a.frontier_claim("site", 1, "n1", 1) == ["http://h1"]
        a._exec_many("ALTER TABLE crawl_hosts DROP COLUMN claim_token", [()])
        a._exec_many("DROP SEQUENCE crawl_claim_tokens", [()])
        a._exec_many("DROP TABLE crawl_node_counts", [()])
        a._exec_many("DROP TABLE crawl_requisites", [()])  # schema 6's, made again by its step
        a._exec_many("ALTER TABLE nodes DROP COLUMN dead_seconds", [()])  # schema 7's
        a._exec_many("UPDATE store_schema SET version = 4", [()])
    with PgStore(address) as s:
        assert s.schema_version == PG_SCHEMA_VERSION
        # a node registered before schema 7 is dead after the fixed 30 s it was judged by then
        assert s._db.execute("SELECT dead_seconds FROM nodes WHERE name = 'n1'").fetchone()[0] == 30.0
        assert s.frontier_claim_rows("site", "n1") == {"http://h1": (pytest.approx(20.0, abs=2), 0)}
        s.frontier_count("site", 1, "n1", {"http://h1": (1, 0)})
        assert [r["fetched"] for r in s.frontier_fetched()] == [1]
    with beating_node(address, "n1") as a:
        tokens = a.frontier_claim_tokens("site", 1, "n1", 5)
        assert sorted(tokens) == ["http://h1", "http://h2"] and sorted(tokens.values()) == [1, 2]


def test_an_answer_to_a_request_made_under_an_older_claim_writes_nothing(tmp_path, monkeypatch) -> None:
    """Issue 30 (fencing): the claim a page's writes carry is the one its request was made
    under, not the one the node holds when the answer comes.  While the server holds back the
    answer of /a.html, the host is taken over (by a node that is gone since) and the node claims
    it again, with a newer token: the late answer writes nothing -- its text is not indexed and
    the link only it has is never asked -- and is counted in ``web.fenced_writes``."""
    import threading

    import psycopg

    import conftest
    from httpsite import Site
    from test_web import Crawl as OneNodeCluster, html
    from indexerd.config import parse_config
    from indexerd.config.paths import resolve_node_name
    from indexerd.runtime.indexer import Indexer

    monkeypatch.setitem(conftest._CRAWL_STORE, "kind", "postgresql+store")
    monkeypatch.setitem(conftest._PG_INDEX, "schema", conftest.fresh_schema("ix"))
    site = Site().start()
    asked = {"n": 0}
    lock = threading.Lock()

    def sql(statement: str, args=()) -> list[tuple]:
        a = pg_store_address(crawl.store_schema)
        with psycopg.connect(a.url, autocommit=True, **a.connect_kwargs()) as con:
            con.execute(f'SET search_path = "{crawl.store_schema}"')
            cur = con.execute(statement, args)
            return cur.fetchall() if cur.description else []

    def page_a(hit):
        with lock:
            asked["n"] += 1
            first = asked["n"] == 1
        if not first:
            return 200, {"Content-Type": "text/html"}, html("A", "freshword")
        ((token,),) = sql("SELECT claim_token FROM crawl_hosts WHERE host = %s", (site.base,))
        sql("UPDATE crawl_hosts SET node = 'gone', claim_token = nextval('crawl_claim_tokens'), "
            "claim_until = now() - interval '1 second' WHERE host = %s", (site.base,))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the node claims the host again: a token newer than both
            (row,) = sql("SELECT node, claim_token FROM crawl_hosts WHERE host = %s", (site.base,))
            if row[0] == node and row[1] > token + 1:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the node did not claim the host again")
        return 200, {"Content-Type": "text/html"}, html("A", "staleword", ["/stale-only.html"])

    try:
        site.static("/", html("Home", "start", ["/a.html"]), etag='"h"')
        site.add("/a.html", handler=page_a)
        site.static("/stale-only.html", html("S", "staleonly"))
        crawl = OneNodeCluster(tmp_path, site)
        cfg = parse_config(crawl.config())
        node = resolve_node_name(cfg)
        ix = Indexer(cfg)
        ix.open("index")
        try:
            ix.run_pass(progress=False)
            counters = ix.counters.snapshot()
        finally:
            ix.close()
        assert site.hits("/stale-only.html") == []
        assert crawl.search("staleword") == []
        assert counters.get("web.fenced_writes", 0) >= 1, counters
    finally:
        site.close()
