"""sd_notify against real AF_UNIX datagram sockets standing in for systemd."""

from __future__ import annotations

import os
import socket
import tempfile
import time

import pytest

from indexerd.cli import logformat
from indexerd.daemon import notify


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


@pytest.mark.alone  # a wall-clock bound (MONOTONIC_USEC within 1 s)
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
    with caplog.at_level("WARNING", logger="indexerd.daemon.notify"):
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


@pytest.mark.alone  # a wall-clock bound (1 s)
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


# -- logging to the journal ($JOURNAL_STREAM, systemd.exec(5)) --------------------------------
def _stream_id(fd: int) -> str:
    st = os.fstat(fd)
    return f"{st.st_dev}:{st.st_ino}"


def test_journal_stream_matches_only_the_same_stream(monkeypatch):
    journal, other = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)  # journald's kind of stream
    with journal, other:
        monkeypatch.setenv("JOURNAL_STREAM", _stream_id(journal.fileno()))
        assert logformat.is_journal_stream(journal.fileno()) is True
        assert logformat.is_journal_stream(other.fileno()) is False        # a child's stderr redirected
        for junk in ("", "12", "a:b", "1:2:3", ":"):
            monkeypatch.setenv("JOURNAL_STREAM", junk)
            assert logformat.is_journal_stream(journal.fileno()) is False
    monkeypatch.delenv("JOURNAL_STREAM")
    assert logformat.is_journal_stream(2) is False


def _index_log(tmp_path, journal_stream: str | None) -> list[str]:
    """The log lines of a real ``indexerd index --log-level info`` whose stderr is a stream socket."""
    import subprocess
    import sys

    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "a.txt").write_text("hello journal\n")
    reader, writer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    env = dict(os.environ, STATE_DIRECTORY=str(tmp_path / "state"))
    env.pop("INDEXERD_CONFIG", None)
    env.pop("JOURNAL_STREAM", None)
    if journal_stream is not None:
        env["JOURNAL_STREAM"] = journal_stream(writer.fileno())
    with reader, writer:
        p = subprocess.run([sys.executable, "-m", "indexerd.cli.main", "index", "--log-level", "info", str(tree)],
                           stdout=subprocess.DEVNULL, stderr=writer.fileno(), env=env, timeout=120)
        writer.shutdown(socket.SHUT_WR)
        reader.settimeout(10)
        data = b""
        while chunk := reader.recv(65536):
            data += chunk
    assert p.returncode == 0, data
    lines = data.decode().splitlines()
    assert any("INFO indexerd" in line for line in lines), lines
    return lines


def test_cli_logs_without_timestamp_when_stderr_is_the_journal(tmp_path):
    stamp = __import__("re").compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
    plain = _index_log(tmp_path, None)
    assert all(stamp.match(line) for line in plain), plain
    journal = _index_log(tmp_path, _stream_id)
    assert journal and not any(stamp.match(line) for line in journal), journal
    assert all(line.startswith(("INFO ", "WARNING ", "ERROR ", "DEBUG ")) for line in journal), journal
    # inherited but stale (stderr is another stream now): keep our timestamp
    stale = _index_log(tmp_path, lambda fd: "1:1")
    assert all(stamp.match(line) for line in stale), stale
