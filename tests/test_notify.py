"""sd_notify against real AF_UNIX datagram sockets standing in for systemd."""

from __future__ import annotations

import os
import socket
import tempfile
import time

import pytest

from indexerd import notify


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def listener(monkeypatch):
    """A bound datagram socket set as $NOTIFY_SOCKET (a short path: sun_path is 108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="ixn") as d:
        path = os.path.join(d, "notify")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.bind(path)
            s.settimeout(2)
            monkeypatch.setenv("NOTIFY_SOCKET", path)
            yield s


def test_ready_delivers_datagram(listener):
    assert notify.ready("x") is True
    assert listener.recv(4096) == b"READY=1\nSTATUS=x"


def test_other_messages(listener):
    assert notify.ready() and listener.recv(4096) == b"READY=1"
    assert notify.status("indexing\n3/10") and listener.recv(4096) == b"STATUS=indexing 3/10"
    assert notify.stopping() and listener.recv(4096) == b"STOPPING=1"
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    assert notify.reloading()
    first, second = listener.recv(4096).split(b"\n")
    assert first == b"RELOADING=1"
    key, value = second.split(b"=")
    assert key == b"MONOTONIC_USEC" and 0 <= int(value) - before < 1_000_000


def test_abstract_socket(monkeypatch):
    name = f"indexerd-test-{os.getpid()}-{time.monotonic_ns()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind("\0" + name)
        s.settimeout(2)
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        assert notify.ready("abstract") is True
        assert s.recv(4096) == b"READY=1\nSTATUS=abstract"


def test_unset_is_false():
    assert notify.notify("READY=1") is False
    assert notify.ready() is False


def test_missing_socket_is_false_and_logged(monkeypatch, caplog):
    monkeypatch.setenv("NOTIFY_SOCKET", "/nonexistent-indexerd-test/notify")
    with caplog.at_level("WARNING", logger="indexerd.notify"):
        assert notify.ready("x") is False
    assert "sd_notify" in caplog.text


def test_relative_address_is_false(monkeypatch):
    monkeypatch.setenv("NOTIFY_SOCKET", "relative/sock")
    assert notify.stopping() is False


def test_watchdog_interval(monkeypatch):
    assert notify.watchdog_interval_seconds() is None
    monkeypatch.setenv("WATCHDOG_USEC", "2000000")
    assert notify.watchdog_interval_seconds() == 1.0
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    assert notify.watchdog_interval_seconds() == 1.0
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() + 1))
    assert notify.watchdog_interval_seconds() is None
    monkeypatch.setenv("WATCHDOG_PID", "junk")
    assert notify.watchdog_interval_seconds() is None
    monkeypatch.delenv("WATCHDOG_PID")
    monkeypatch.setenv("WATCHDOG_USEC", "0")
    assert notify.watchdog_interval_seconds() is None


def _drain(sock: socket.socket, seconds: float) -> list[bytes]:
    got, deadline = [], time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            got.append(sock.recv(4096))
        except TimeoutError:
            break
    return got


def test_pinger_pings(listener, monkeypatch):
    monkeypatch.setenv("WATCHDOG_USEC", "1000000")
    pinger = notify.WatchdogPinger()
    pinger.start()
    try:
        got = _drain(listener, 1.5)
    finally:
        t0 = time.monotonic()
        pinger.stop()
        assert time.monotonic() - t0 < 1
        pinger.stop()
    assert len(got) >= 2 and set(got) == {b"WATCHDOG=1"}
    _drain(listener, 0.05)                              # a ping sent just before stop()
    assert _drain(listener, 0.7) == []                  # stopped means stopped


def test_pinger_skips_when_unhealthy(listener, monkeypatch):
    monkeypatch.setenv("WATCHDOG_USEC", "200000")
    pinger = notify.WatchdogPinger(healthy=lambda: False)
    pinger.start()
    try:
        assert _drain(listener, 0.5) == []
    finally:
        pinger.stop()


def test_pinger_without_watchdog_does_nothing(listener):
    pinger = notify.WatchdogPinger()
    pinger.start()
    assert pinger.interval_seconds is None and pinger._thread is None
    pinger.stop()
    pinger.stop()
    assert _drain(listener, 0.2) == []
