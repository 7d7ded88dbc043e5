"""The daemon's control server: the control protocol (:mod:`indexerd.daemon.control`) served on
a Unix socket, requests read by one selector loop, each handled in a short-lived thread.

The loop is ours, not ``socketserver.ThreadingUnixStreamServer``: that server starts a thread
per accepted connection before a byte is read, so slow or silent clients (the attack run's
hardening case) would each hold a thread until its timeout; here a connection costs a thread
only once its whole request has arrived within :data:`READ_TIMEOUT_SECONDS`, at most
:data:`MAX_PENDING` connections wait, and at most :data:`MAX_HANDLERS` requests run (more get a
"busy" reply), so ``ctl status`` stays answerable.

Outside contract relied on (Linux ``unix(7)``): connecting needs write permission on the socket
file; the file is chmod-ed (and chgrp-ed) between ``bind()`` and ``listen()``, when a connect
would still be refused.
"""

from __future__ import annotations

import json
import logging
import os
import selectors
import socket
import threading
import time
from typing import cast
from collections.abc import Callable
from pathlib import Path

from indexerd.core.errors import ConfigError, IndexerdError
from indexerd.daemon import socketfile
from indexerd.daemon.control import MAX_REQUEST_BYTES, check_path, encode, error_reply, request_problem

log = logging.getLogger("indexerd.daemon.control")  # the control socket's lines, as before the split

READ_TIMEOUT_SECONDS = 10.0           # whole-request deadline per connection (server side)
MAX_PENDING = 256                     # connections still sending their request; past it the
                                      # oldest is closed to make room
MAX_HANDLERS = 32                     # requests handled at once; more get a "busy" reply
ACCEPT_POLL_SECONDS = 1.0             # accept loop wait; stop() also wakes it at once
STOP_JOIN_SECONDS = 5.0               # how long stop() waits for threads in total


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
        #: the group of the socket file: its members may use the daemon (0660)
        self.access_gid: int = os.getegid()
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
        check_path(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o750)
        except OSError as e:
            raise ConfigError(f"control socket {self.path}: cannot create "
                              f"{self.path.parent}: {e.strerror}") from None
        socketfile.remove_stale(self.path)

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.bind(os.fspath(self.path))
            os.chmod(self.path, self.mode)
            socketfile.chgrp(self.path, self.group)
            st = os.stat(self.path)
            sock.listen(128)
            sock.setblocking(False)
        except OSError as e:
            sock.close()
            raise ConfigError(f"control socket {self.path}: {e.strerror or e}") from None
        self._inode = (st.st_dev, st.st_ino)
        self.access_gid = st.st_gid
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
        socketfile.unlink_own(self.path, self._inode)
        wake = self._wake
        try:
            if wake is not None:
                wake.send(b"x")
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
        if wake is not None:
            wake.close()
        self._wake = None
        self._listener = None
        self._thread = None

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
                        self._read_some(cast(socket.socket, key.fileobj), sel, pending)
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
            self._reply(conn, error_reply("busy: too many control requests at once; retry", 1), timeout=0.5)
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
            return error_reply(f"bad request: larger than {MAX_REQUEST_BYTES} bytes", 2)
        try:
            request = json.loads(raw)
        except (UnicodeDecodeError, ValueError) as e:
            return error_reply(f"bad request: not JSON: {e}", 2)
        except RecursionError:
            return error_reply("bad request: JSON nested too deeply", 2)
        if not isinstance(request, dict):
            return error_reply(f"bad request: expected a JSON object, got {type(request).__name__}", 2)
        problem = request_problem(request)
        if problem:
            return error_reply(f"bad request: {problem}", 2)
        try:
            reply = self.handler(request)
            if not isinstance(reply, dict):
                raise TypeError(f"handler returned {type(reply).__name__}, not dict")
            if "ok" not in reply:
                reply = {"ok": True, **reply}
            encode(reply)                       # fail here, inside the try, if not serialisable
            return reply
        except IndexerdError as e:
            log.info("control request %s failed: %s", request.get("cmd"), e)
            return error_reply(str(e), e.exit_code)
        except Exception as e:
            log.exception("control request %s failed", request.get("cmd"))
            return error_reply(f"{type(e).__name__}: {e}", 1)

    @staticmethod
    def _reply(conn: socket.socket, reply: dict, timeout: float = READ_TIMEOUT_SECONDS) -> None:
        try:
            conn.settimeout(timeout)
            conn.sendall(encode(reply), getattr(socket, "MSG_NOSIGNAL", 0))
        except OSError as e:
            log.debug("control reply not delivered: %s", e)
