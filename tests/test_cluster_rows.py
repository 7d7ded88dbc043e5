"""The cluster's rows on a real PostgreSQL server, without daemons: host leases between two
"nodes" of one test (two politeness slot sets on one shared store), source locks held by a
process that is then killed, node names and heartbeats."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from conftest import pg_store_address
from indexerd.core.errors import StoreError
from indexerd.core.store import PgStore
from indexerd.core.store.cluster import NODE_APPLICATION, SourceLock, lock_key
from indexerd.sources.web import hostleases
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


def test_a_dead_nodes_lease_runs_out_and_a_stopped_nodes_is_handed_back(address, monkeypatch) -> None:
    monkeypatch.setattr(hostleases, "HOST_LEASE_SECONDS", 1.0)
    a, b = node_slots(address, "a"), node_slots(address, "b")
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
    assert lock_key("source", "web1") == lock_key("source", "web1")
    assert lock_key("source", "web1") != lock_key("queue", "web1")
    assert all(-(2 ** 31) <= lock_key("source", str(i)) < 2 ** 31 for i in range(1000))


def test_two_live_nodes_may_not_share_a_name(address) -> None:
    first = PgStore(address, application_name=NODE_APPLICATION + "n1")
    first.register_node("n1", "host-a", 100, "0.1", ["docs"])
    second = PgStore(address, application_name=NODE_APPLICATION + "n1")
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
    second = PgStore(address, application_name=NODE_APPLICATION + "n1")
    second.register_node("n1", "host-b", 200, "0.1", [])  # the name is free again
    second.heartbeat("n1", "passes of docs", ["docs", "web"])
    with PgStore(address) as reader:
        n1 = {n["name"]: n for n in reader.nodes()}["n1"]
        assert (n1["host"], n1["alive"], n1["working_on"], n1["sources"]) == ("host-b", True, "passes of docs",
                                                                             ["docs", "web"])
        assert reader.live_node_sources() == {"docs", "web"}
    second.close()


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
    from indexerd.core.recovery import check_cluster_identity, cluster_identity
    from indexerd.index import load_engine, wanted_identity

    wanted = wanted_identity(load_engine("postgresql"))

    def identity(url: str) -> str:
        cfg = parse_config(f'[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "{url}"\n', "<t>")
        return cluster_identity(wanted, cfg.index)

    with PgStore(address) as s:
        check_cluster_identity(s, identity("postgresql://u:secret@db/search"), rebuild=False)  # the first node
        check_cluster_identity(s, identity("postgresql://u@db/search"), rebuild=False)  # the password is no part of it
        with pytest.raises(ConfigError, match="search2"):
            check_cluster_identity(s, identity("postgresql://u@db/search2"), rebuild=False)
        assert "secret" not in s.get_meta("cluster:index_identity")
