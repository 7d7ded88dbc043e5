"""The daemon's control socket: a Unix stream socket speaking one JSON line each way.

Protocol: the client connects, sends ONE JSON object terminated by ``\\n`` (``{"cmd": "status"}``,
``{"cmd": "scan", "source": "docs"}``); the server replies with ONE JSON object plus ``\\n`` and
closes.  Replies are ``{"ok": true, ...}`` or ``{"ok": false, "error": "...", "exit_code": N}``
where ``N`` is the CLI exit status (2 bad request, 1 handler failure, else the ``exit_code`` of
the :class:`~indexerd.core.errors.IndexerdError` the handler raised).

Outside contract relied on (Linux ``unix(7)``):

- ``sun_path`` holds 108 bytes including the terminating NUL, so a path is at most 107 bytes.
- ``connect()`` on a socket file whose server is gone fails with ``ECONNREFUSED``; that is how a
  stale file left by a killed daemon is told from a live one.  The decision is not atomic; two
  daemons racing here are kept apart by the state-dir ``flock`` (:mod:`indexerd.core.statedir`),
  which the daemon takes before it starts this server.
- Connecting needs write permission on the socket file; the file is chmod-ed (and chgrp-ed)
  between ``bind()`` and ``listen()``, when a connect would still be refused.
"""

from __future__ import annotations

import errno
import grp
import json
import logging
import os
import selectors
import socket
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from indexerd.core.errors import ConfigError, DaemonNotRunning, IndexerdError, StateDirLocked

log = logging.getLogger(__name__)

MAX_PATH_BYTES = 107                  # sizeof(sun_path) - 1 on Linux
MAX_REQUEST_BYTES = 1024 * 1024       # a request line longer than this is refused
MAX_REPLY_BYTES = 64 * 1024 * 1024    # the client refuses a longer reply
READ_TIMEOUT_SECONDS = 10.0           # whole-request deadline per connection (server side)
MAX_PENDING = 256                     # connections still sending their request; past it the
                                      # oldest is closed to make room
MAX_HANDLERS = 32                     # requests handled at once; more get a "busy" reply
ACCEPT_POLL_SECONDS = 1.0             # accept loop wait; stop() also wakes it at once
STOP_JOIN_SECONDS = 5.0               # how long stop() waits for threads in total
PROBE_TIMEOUT_SECONDS = 1.0           # connect timeout when testing an existing socket file


def _check_path(path: Path) -> None:
    """Raise ConfigError when ``path`` does not fit in ``sockaddr_un.sun_path``."""
    n = len(os.fsencode(path))
    if n > MAX_PATH_BYTES:
        raise ConfigError(f"control socket path {path} is {n} bytes long; Unix sockets allow at "
                          f"most {MAX_PATH_BYTES} (set control_socket to a shorter path)")


def _encode(reply: dict) -> bytes:
    return (json.dumps(reply, separators=(",", ":")) + "\n").encode("utf-8")


def _error(message: str, exit_code: int) -> dict:
    return {"ok": False, "error": message, "exit_code": exit_code}


#: The fields of a control request and their JSON types (what ``indexerd ctl`` sends); a request
#: with another type, or a string holding NUL, is refused before any handler sees it.
REQUEST_FIELDS: dict[str, tuple[type, ...]] = {
    "cmd": (str,), "source": (str, type(None)), "key": (str,), "wait": (bool,), "all": (bool,),
    "targets": (list,), "query": (str,), "limit": (int,), "since": (str, type(None)),
    "state_dir": (str,),
}


def request_problem(request: dict) -> str | None:
    """What is wrong with the fields of ``request`` (a decoded JSON object), or None.

    Unknown fields are ignored (a newer client may send more); known ones must have the type of
    :data:`REQUEST_FIELDS`, ``targets`` must hold strings, and no string may contain NUL (no path
    or key can)."""
    for name, types in REQUEST_FIELDS.items():
        if name not in request:
            continue
        value = request[name]
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            return f"{name!r} must be {' or '.join('null' if t is type(None) else t.__name__ for t in types)}, " \
                   f"got {type(value).__name__}"
        values = value if isinstance(value, list) else [value]
        for v in values:
            if name == "targets" and not isinstance(v, str):
                return f"'targets' must hold strings, got {type(v).__name__}"
            if isinstance(v, str) and "\x00" in v:
                return f"{name!r} contains a NUL character"
    return None


class ControlServer:
    """Serve the control protocol on a Unix socket, one short-lived thread per connection.

    Args:
        path: socket file; its parent is created (mode 0750) if missing.
        handler: called with the request object, returns the reply object.  ``"ok": True`` is
            added when the reply has no ``ok`` key.  It runs in a connection thread, possibly
            several at once (a slow ``scan`` does not block ``status``), so it must be
            thread-safe.  An :class:`IndexerdError` it raises becomes ``{"ok": false, "error":
            str(e), "exit_code": e.exit_code}``; any other exception (or a reply that is not a
            JSON-serialisable dict) becomes exit code 1 and is logged with its traceback.
        mode: permission bits of the socket file (connect needs write permission).
        group: group to give the socket file; ignored when ``None``, when no such group exists,
            or when this process may not chgrp to it.

    Limits: a request line is at most :data:`MAX_REQUEST_BYTES` and must arrive within
    :data:`READ_TIMEOUT_SECONDS` of connecting (an idle client is dropped without a reply).
    Requests are read by one selector loop, so a client that sends nothing (or drips) costs a
    file descriptor and its buffer, never a thread: at most :data:`MAX_PENDING` connections are
    read at once (past it the one connected longest is closed, so a new client is always read),
    and at most :data:`MAX_HANDLERS` complete requests run their handler at once (more get a
    "busy" reply, exit code 1).  JSON nested too deeply for the parser gets a bad-request reply.

    Thread safety: call :meth:`start` and :meth:`stop` from one thread (the daemon's main thread).
    """

    def __init__(self, path: str | os.PathLike, handler: Callable[[dict], dict], *,
                 mode: int = 0o660, group: str | None = "indexerd") -> None:
        self.path = Path(path)
        self.handler = handler
        self.mode = mode
        self.group = group
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._wake: socket.socket | None = None      # stop() writes here to wake the accept loop
        self._inode: tuple[int, int] | None = None   # (st_dev, st_ino) of the file we bound
        self._thread: threading.Thread | None = None
        self._conns: set[threading.Thread] = set()
        self._conns_lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Bind, set mode and group, listen, and start the accept thread.

        Raises:
            ConfigError: the path is too long, exists and is not a socket, or cannot be bound
                or chmod-ed (the message names the path and the OS error).
            StateDirLocked: a live server answers on the path (exit code 4).
        """
        if self._listener is not None:
            return
        _check_path(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o750)
        except OSError as e:
            raise ConfigError(f"control socket {self.path}: cannot create "
                              f"{self.path.parent}: {e.strerror}") from None
        self._remove_stale()

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.bind(os.fspath(self.path))
            os.chmod(self.path, self.mode)
            self._chgrp()
            st = os.stat(self.path)
            sock.listen(128)
            sock.setblocking(False)
        except OSError as e:
            sock.close()
            raise ConfigError(f"control socket {self.path}: {e.strerror or e}") from None
        self._inode = (st.st_dev, st.st_ino)
        self._listener = sock
        self._wake, wake_r = socket.socketpair()
        self._stop.clear()
        self._thread = threading.Thread(target=self._accept_loop, args=(sock, wake_r),
                                        name="indexerd-control", daemon=True)
        self._thread.start()
        log.info("control socket listening on %s", self.path)

    def stop(self) -> None:
        """Stop accepting, remove the socket file, wait for threads; safe to call twice.

        Waits at most :data:`STOP_JOIN_SECONDS` in total; a handler still running after that
        is left to finish in its (daemon) thread, and its reply may fail to send.
        """
        if self._listener is None:
            return
        self._stop.set()
        self._unlink_own()
        try:
            self._wake.send(b"x")
        except OSError:
            pass
        deadline = time.monotonic() + STOP_JOIN_SECONDS
        if self._thread is not None:
            self._thread.join(timeout=STOP_JOIN_SECONDS)
            if self._thread.is_alive():
                log.warning("control accept thread did not stop within %.1f s", STOP_JOIN_SECONDS)
        with self._conns_lock:
            conns = list(self._conns)
        for t in conns:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        self._wake.close()
        self._wake = None
        self._listener = None
        self._thread = None

    def _remove_stale(self) -> None:
        """Unlink a socket file nobody answers on; refuse a live one or a non-socket."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        except OSError as e:
            raise ConfigError(f"control socket {self.path}: {e.strerror}") from None
        if not stat.S_ISSOCK(st.st_mode):
            raise ConfigError(f"control socket {self.path} exists and is not a socket; "
                              f"refusing to remove it")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        probe.settimeout(PROBE_TIMEOUT_SECONDS)
        try:
            probe.connect(os.fspath(self.path))
        except (ConnectionRefusedError, FileNotFoundError):
            pass                                 # stale (or just gone): replace it
        except TimeoutError:
            raise StateDirLocked(f"control socket {self.path} is in use by a running indexerd") \
                from None
        except OSError as e:
            raise ConfigError(f"control socket {self.path}: cannot test it: {e.strerror}") from None
        else:
            raise StateDirLocked(f"control socket {self.path} is in use by a running indexerd")
        finally:
            probe.close()
        log.info("removing stale control socket %s", self.path)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise ConfigError(f"control socket {self.path}: cannot remove the stale file: "
                              f"{e.strerror}") from None

    def _chgrp(self) -> None:
        if self.group is None:
            return
        try:
            gid = grp.getgrnam(self.group).gr_gid
        except KeyError:
            log.debug("group %s does not exist; control socket keeps its group", self.group)
            return
        try:
            os.chown(self.path, -1, gid)
        except PermissionError:
            log.debug("not permitted to chgrp %s to %s", self.path, self.group)

    def _unlink_own(self) -> None:
        """Unlink the socket file if it is still the one we bound (not a successor's)."""
        try:
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self._inode:
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            log.warning("cannot remove control socket %s: %s", self.path, e.strerror)

    # -- serving -----------------------------------------------------------------------------

    def _accept_loop(self, listener: socket.socket, wake: socket.socket) -> None:
        """Accept connections and read their request lines without blocking; hand each complete
        request to a handler thread.  ``pending`` maps a connection to its buffer and deadline
        (monotonic seconds), in connection order (dicts keep insertion order)."""
        sel = selectors.DefaultSelector()
        sel.register(listener, selectors.EVENT_READ)
        sel.register(wake, selectors.EVENT_READ)
        pending: dict[socket.socket, tuple[bytearray, float]] = {}
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                for conn in [c for c, (_, deadline) in pending.items() if deadline <= now]:
                    log.debug("control client sent no complete request in %s s; dropped",
                              READ_TIMEOUT_SECONDS)
                    self._drop(sel, pending, conn)
                wait = min([ACCEPT_POLL_SECONDS] + [max(0.0, d - now) for _, d in pending.values()])
                for key, _ in sel.select(wait):
                    if self._stop.is_set():
                        break
                    if key.fileobj is listener:
                        self._accept(listener, sel, pending)
                    elif key.fileobj is not wake:
                        self._read_some(key.fileobj, sel, pending)
        finally:
            for conn in list(pending):
                self._drop(sel, pending, conn)
            sel.close()
            listener.close()
            wake.close()

    def _accept(self, listener: socket.socket, sel, pending: dict) -> None:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return                               # the client went away before accept()
        except OSError as e:
            if not self._stop.is_set():
                log.warning("control socket accept failed: %s", e)
                self._stop.wait(ACCEPT_POLL_SECONDS)     # e.g. EMFILE: do not spin
            return
        conn.setblocking(False)
        if len(pending) >= MAX_PENDING:          # make room: the one connected longest goes
            log.warning("control socket: %d clients connected without a complete request; "
                        "closing the oldest", len(pending))
            self._drop(sel, pending, next(iter(pending)))
        pending[conn] = (bytearray(), time.monotonic() + READ_TIMEOUT_SECONDS)
        sel.register(conn, selectors.EVENT_READ)

    @staticmethod
    def _drop(sel, pending: dict, conn: socket.socket) -> None:
        pending.pop(conn, None)
        try:
            sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()

    def _read_some(self, conn: socket.socket, sel, pending: dict) -> None:
        """Read what ``conn`` has; once its line is complete (newline, EOF or over-long), hand it
        to a handler thread, or answer "busy" when :data:`MAX_HANDLERS` are running."""
        buf, _ = pending[conn]
        try:
            chunk = conn.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            log.debug("control client read failed: %s", e)
            chunk = None
        if chunk is None or (not chunk and not buf):
            self._drop(sel, pending, conn)       # a probe, or a client that went away
            return
        buf += chunk
        if chunk and b"\n" not in buf and len(buf) <= MAX_REQUEST_BYTES:
            return                               # more to come
        pending.pop(conn)
        sel.unregister(conn)
        raw = bytes(buf).split(b"\n", 1)[0]
        with self._conns_lock:
            busy = len(self._conns) >= MAX_HANDLERS
            if not busy:
                t = threading.Thread(target=self._serve, args=(conn, raw),
                                     name="indexerd-control-conn", daemon=True)
                self._conns.add(t)
        if busy:
            self._reply(conn, _error("busy: too many control requests at once; retry", 1), timeout=0.5)
            conn.close()
        else:
            t.start()

    def _serve(self, conn: socket.socket, raw: bytes) -> None:
        try:
            with conn:
                conn.setblocking(True)
                self._reply(conn, self._dispatch(raw))
        except Exception:                        # never let a connection kill the thread noisily
            log.exception("control connection failed")
        finally:
            with self._conns_lock:
                self._conns.discard(threading.current_thread())

    def _dispatch(self, raw: bytes) -> dict:
        if len(raw) > MAX_REQUEST_BYTES:
            return _error(f"bad request: larger than {MAX_REQUEST_BYTES} bytes", 2)
        try:
            request = json.loads(raw)
        except (UnicodeDecodeError, ValueError) as e:
            return _error(f"bad request: not JSON: {e}", 2)
        except RecursionError:
            return _error("bad request: JSON nested too deeply", 2)
        if not isinstance(request, dict):
            return _error(f"bad request: expected a JSON object, got {type(request).__name__}", 2)
        problem = request_problem(request)
        if problem:
            return _error(f"bad request: {problem}", 2)
        try:
            reply = self.handler(request)
            if not isinstance(reply, dict):
                raise TypeError(f"handler returned {type(reply).__name__}, not dict")
            if "ok" not in reply:
                reply = {"ok": True, **reply}
            _encode(reply)                       # fail here, inside the try, if not serialisable
            return reply
        except IndexerdError as e:
            log.info("control request %s failed: %s", request.get("cmd"), e)
            return _error(str(e), e.exit_code)
        except Exception as e:
            log.exception("control request %s failed", request.get("cmd"))
            return _error(f"{type(e).__name__}: {e}", 1)

    @staticmethod
    def _reply(conn: socket.socket, reply: dict, timeout: float = READ_TIMEOUT_SECONDS) -> None:
        try:
            conn.settimeout(timeout)
            conn.sendall(_encode(reply), getattr(socket, "MSG_NOSIGNAL", 0))
        except OSError as e:
            log.debug("control reply not delivered: %s", e)


def request(path: str | os.PathLike, payload: dict, *, timeout: float = 30.0) -> dict:
    """Send one request to the daemon and return its reply object (``ok`` false included).

    Args:
        path: the daemon's control socket.
        payload: the request, e.g. ``{"cmd": "status"}``; must be JSON-serialisable.
        timeout: seconds for the whole exchange (connect, send, reply).

    Raises:
        DaemonNotRunning: no socket file, or nothing listens on it (exit code 3).
        ConfigError: the path is too long for a Unix socket.
        IndexerdError: no complete reply within ``timeout``, permission denied, the connection
            was closed without a reply, or the reply is not one JSON object under
            :data:`MAX_REPLY_BYTES` (exit code 1).

    Thread safety: safe; each call uses its own connection.
    """
    p = Path(path)
    _check_path(p)
    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(os.fspath(p))
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
            raise DaemonNotRunning(f"indexerd is not running (no answer on {p})") from None
        except TimeoutError:
            raise IndexerdError(f"no reply from the daemon on {p} within {timeout} s") from None
        except OSError as e:
            hint = " (is this user in the socket's group?)" if e.errno == errno.EACCES else ""
            raise IndexerdError(f"cannot connect to the daemon on {p}: {e.strerror}{hint}") \
                from None
        buf = bytearray()
        try:
            try:
                sock.sendall(_encode(payload))
            except (BrokenPipeError, ConnectionResetError):
                pass                             # refused mid-send (too large?): read why
            while b"\n" not in buf:
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
                chunk = sock.recv(65536)
                if not chunk:
                    break
                buf += chunk
                if len(buf) > MAX_REPLY_BYTES:
                    raise IndexerdError(f"reply from the daemon on {p} is larger than "
                                        f"{MAX_REPLY_BYTES} bytes")
        except TimeoutError:
            raise IndexerdError(f"no reply from the daemon on {p} within {timeout} s") from None
        except OSError as e:
            raise IndexerdError(f"connection to the daemon on {p} failed: {e.strerror or e}") \
                from None
    line = bytes(buf).split(b"\n", 1)[0]
    if not line.strip():
        raise IndexerdError(f"the daemon on {p} closed the connection without a reply")
    try:
        reply = json.loads(line)
    except ValueError as e:
        raise IndexerdError(f"bad reply from the daemon on {p}: {e}") from None
    if not isinstance(reply, dict):
        raise IndexerdError(f"bad reply from the daemon on {p}: not a JSON object")
    return reply
