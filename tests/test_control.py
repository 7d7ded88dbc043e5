"""The control socket with real Unix sockets in a temp dir; every wait has a timeout."""

from __future__ import annotations

import json
import os
import socket
import stat
import tempfile
import threading
import time
from pathlib import Path

import pytest

from indexerd.daemon import control, control_server
from indexerd.daemon.control import request
from indexerd.daemon.control_server import ControlServer
from indexerd.core.errors import ConfigError, DaemonNotRunning, IndexerdError, StateDirLocked


def handler(req: dict) -> dict:
    cmd = req.get("cmd")
    if cmd == "status":
        return {"state": "idle"}
    if cmd == "slow":
        time.sleep(1.0)
        return {"done": True}
    if cmd == "value-error":
        raise ValueError("boom")
    if cmd == "not-running":
        raise DaemonNotRunning("nobody home")
    if cmd == "config-error":
        raise ConfigError("bad key")
    if cmd == "echo":
        return {"request": req}
    return {"ok": False, "error": f"unknown command {cmd!r}", "exit_code": 2}


@pytest.fixture
def sock_path():
    # tmp_path can exceed the 107-byte sun_path limit; use a short dir of our own.
    with tempfile.TemporaryDirectory(prefix="ixd") as d:
        yield Path(d) / "run" / "indexerd.sock"


@pytest.fixture
def server(sock_path):
    srv = ControlServer(sock_path, handler, group=None)
    srv.start()
    yield srv
    srv.stop()


def raw_exchange(path: Path, data: bytes, timeout: float = 5.0) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(os.fspath(path))
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def test_round_trip(server, sock_path):
    assert request(sock_path, {"cmd": "status"}) == {"ok": True, "state": "idle"}
    assert request(sock_path, {"cmd": "echo", "x": [1, "é"]}) == \
        {"ok": True, "request": {"cmd": "echo", "x": [1, "é"]}}
    assert request(sock_path, {"cmd": "nope"}) == \
        {"ok": False, "error": "unknown command 'nope'", "exit_code": 2}


def test_parent_dir_created_and_socket_mode(server, sock_path):
    assert stat.S_IMODE(os.stat(sock_path.parent).st_mode) & 0o027 == 0   # 0750 under umask
    st = os.stat(sock_path)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o660


@pytest.mark.alone  # a wall-clock bound (0.5 s)
def test_slow_request_does_not_block_status(server, sock_path):
    slow: dict = {}
    t = threading.Thread(target=lambda: slow.update(request(sock_path, {"cmd": "slow"})))
    t.start()
    time.sleep(0.1)                                 # the slow handler is now sleeping
    t0 = time.monotonic()
    assert request(sock_path, {"cmd": "status"}, timeout=5)["ok"] is True
    assert time.monotonic() - t0 < 0.5
    t.join(timeout=5)
    assert slow == {"ok": True, "done": True}


@pytest.mark.parametrize("data, fragment", [
    (b"{not json\n", "bad request: not JSON"),
    (b"[1, 2]\n", "bad request: expected a JSON object, got list"),
    (b"\xff\xfe\n", "bad request: not JSON"),
    (b"\n", "bad request: not JSON"),
])
def test_bad_request_gets_exit_2_and_server_lives(server, sock_path, data, fragment):
    reply = json.loads(raw_exchange(sock_path, data))
    assert reply["ok"] is False and reply["exit_code"] == 2
    assert reply["error"].startswith(fragment)
    assert request(sock_path, {"cmd": "status"})["ok"] is True


def test_oversized_request_refused(server, sock_path):
    reply = request(sock_path, {"cmd": "echo", "blob": "x" * (control.MAX_REQUEST_BYTES + 10)})
    assert reply["ok"] is False and reply["exit_code"] == 2
    assert "larger than" in reply["error"]
    assert request(sock_path, {"cmd": "status"})["ok"] is True


def test_handler_value_error_is_exit_1_and_logged(server, sock_path, caplog):
    with caplog.at_level("ERROR", logger="indexerd.daemon.control"):
        reply = request(sock_path, {"cmd": "value-error"})
    assert reply == {"ok": False, "error": "ValueError: boom", "exit_code": 1}
    assert any(r.exc_info for r in caplog.records)
    assert request(sock_path, {"cmd": "status"})["ok"] is True


@pytest.mark.parametrize("cmd, exc", [("not-running", DaemonNotRunning),
                                      ("config-error", ConfigError)])
def test_handler_indexerd_error_keeps_its_exit_code(server, sock_path, cmd, exc):
    reply = request(sock_path, {"cmd": cmd})
    assert reply["ok"] is False
    assert reply["exit_code"] == exc.exit_code
    assert reply["error"] in ("nobody home", "bad key")


def test_handler_returning_non_json_is_exit_1(sock_path):
    srv = ControlServer(sock_path, lambda req: {"when": object()}, group=None)
    srv.start()
    try:
        reply = request(sock_path, {"cmd": "status"})
    finally:
        srv.stop()
    assert reply["ok"] is False and reply["exit_code"] == 1
    assert reply["error"].startswith("TypeError:")


def test_request_to_missing_path_is_daemon_not_running(sock_path):
    with pytest.raises(DaemonNotRunning, match="not running") as ei:
        request(sock_path, {"cmd": "status"})
    assert ei.value.exit_code == 3


@pytest.mark.alone  # a wall-clock bound (2 s)
def test_request_timeout_is_indexerd_error(sock_path):
    sock_path.parent.mkdir()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as mute:   # listens, never replies
        mute.bind(os.fspath(sock_path))
        mute.listen(1)
        t0 = time.monotonic()
        with pytest.raises(IndexerdError, match="no reply from the daemon") as ei:
            request(sock_path, {"cmd": "status"}, timeout=0.3)
        assert time.monotonic() - t0 < 2
    assert type(ei.value) is IndexerdError and ei.value.exit_code == 1


def test_stale_socket_file_is_replaced(sock_path):
    sock_path.parent.mkdir()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(os.fspath(sock_path))
    s.close()                                       # the file stays behind, nobody answers
    assert sock_path.exists()
    with pytest.raises(DaemonNotRunning):
        request(sock_path, {"cmd": "status"})
    srv = ControlServer(sock_path, handler, group=None)
    srv.start()
    try:
        assert request(sock_path, {"cmd": "status"})["ok"] is True
    finally:
        srv.stop()


def test_live_server_on_same_path_refuses_start(server, sock_path):
    other = ControlServer(sock_path, handler, group=None)
    with pytest.raises(StateDirLocked, match="in use by a running indexerd") as ei:
        other.start()
    assert ei.value.exit_code == 4
    assert request(sock_path, {"cmd": "status"})["ok"] is True   # the first one is untouched


def test_regular_file_is_not_removed(sock_path):
    sock_path.parent.mkdir()
    sock_path.write_text("precious")
    with pytest.raises(ConfigError, match="not a socket"):
        ControlServer(sock_path, handler, group=None).start()
    assert sock_path.read_text() == "precious"


def test_path_too_long_is_config_error():
    long_path = "/tmp/" + "d" * 120 + "/indexerd.sock"
    with pytest.raises(ConfigError, match="d{120}/indexerd.sock"):
        ControlServer(long_path, handler).start()
    with pytest.raises(ConfigError):
        request(long_path, {"cmd": "status"})


def test_stop_removes_file_and_is_idempotent(sock_path):
    srv = ControlServer(sock_path, handler, group=None)
    srv.start()
    assert sock_path.exists()
    srv.stop()
    assert not sock_path.exists()
    srv.stop()
    with pytest.raises(DaemonNotRunning):
        request(sock_path, {"cmd": "status"})


def test_missing_group_is_ignored(sock_path):
    srv = ControlServer(sock_path, handler, group="no-such-group-ixd")
    srv.start()
    try:
        assert request(sock_path, {"cmd": "status"})["ok"] is True
    finally:
        srv.stop()


@pytest.mark.alone  # a wall-clock bound (0.2-3 s)
def test_idle_client_is_dropped(monkeypatch, sock_path):
    monkeypatch.setattr(control_server, "READ_TIMEOUT_SECONDS", 0.3)
    srv = ControlServer(sock_path, handler, group=None)
    srv.start()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(os.fspath(sock_path))
            t0 = time.monotonic()
            assert s.recv(1) == b""                 # closed by the server, no reply
            assert 0.2 < time.monotonic() - t0 < 3
        assert request(sock_path, {"cmd": "status"})["ok"] is True
    finally:
        srv.stop()


# -- robustness: hostile nesting and slow clients (issue 18) ------------------------------------
@pytest.mark.parametrize("depth", [10_000, 200_000])
def test_deeply_nested_request_gets_an_error_reply(server, sock_path, depth):
    for body in (b"[" * depth + b"]" * depth, b'{"cmd": "echo", "x": ' + b"[" * depth + b"]" * depth + b"}"):
        reply = json.loads(raw_exchange(sock_path, body + b"\n", timeout=20))
        assert reply["ok"] is False and reply["exit_code"] == 2, reply
        assert "nested" in reply["error"], reply
    assert request(sock_path, {"cmd": "status"})["ok"] is True


@pytest.mark.parametrize("body, problem", [
    ({"cmd": "reindex", "targets": [1, None, {}]}, "'targets' must hold strings, got int"),
    ({"cmd": "reindex", "source": ["t"]}, "'source' must be str or null, got list"),
    ({"cmd": "scan", "source": {"a": 1}}, "'source' must be str or null, got dict"),
    ({"cmd": "forget", "key": ["a"]}, "'key' must be str, got list"),
    ({"cmd": "scan", "source": "t", "wait": 1}, "'wait' must be bool, got int"),
    ({"cmd": 7}, "'cmd' must be str, got int"),
    ({"cmd": "reindex", "targets": ["/srv/tree/a\x00b"]}, "'targets' contains a NUL character"),
])
def test_wrongly_typed_request_is_a_bad_request_not_a_handler_error(server, sock_path, body, problem):
    """Fields of the wrong JSON type reached the handlers and came back as exit 1 with a logged
    traceback (AttributeError, unhashable type, embedded null byte): they are a bad request."""
    reply = request(sock_path, body)
    assert (reply["ok"], reply["exit_code"], reply["error"]) == (False, 2, f"bad request: {problem}")
    assert request(sock_path, {"cmd": "status"})["ok"] is True


def _slow_clients(path: Path, n: int, drip: bool) -> list[socket.socket]:
    clients = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(os.fspath(path))
        if drip:
            s.sendall(b'{"cmd": ')               # a request that never ends
        clients.append(s)
    return clients


@pytest.mark.alone  # a wall-clock bound (2 s)
@pytest.mark.parametrize("drip", [False, True])
def test_slow_clients_do_not_starve_status(server, sock_path, drip):
    """40 clients that connect and send nothing (or drip a request that never ends) are more
    than MAX_HANDLERS; status must still be answered at once, while they are all connected."""
    clients = _slow_clients(sock_path, 40, drip)
    try:
        time.sleep(0.3)                          # let the server accept them all
        for _ in range(5):
            t0 = time.monotonic()
            assert request(sock_path, {"cmd": "status"}, timeout=5)["state"] == "idle"
            assert time.monotonic() - t0 < 2.0
        if drip:
            for s in clients:
                s.sendall(b'"st')
            assert request(sock_path, {"cmd": "status"}, timeout=5)["ok"] is True
    finally:
        for s in clients:
            s.close()


def test_pending_connections_are_bounded_oldest_dropped(monkeypatch, sock_path):
    """Past MAX_PENDING silent connections, the oldest is closed to make room: a new client is
    always read."""
    monkeypatch.setattr(control_server, "MAX_PENDING", 8)
    srv = ControlServer(sock_path, handler, group=None)
    srv.start()
    clients = _slow_clients(sock_path, 12, drip=False)
    try:
        assert request(sock_path, {"cmd": "status"}, timeout=5)["ok"] is True
        assert clients[0].recv(1) == b""         # the oldest was closed, without a reply
    finally:
        for s in clients:
            s.close()
        srv.stop()
