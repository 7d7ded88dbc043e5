"""The daemon's control protocol and its client: a Unix stream socket speaking one JSON line each
way.  The server is :mod:`indexerd.daemon.control_server` (its socket file:
:mod:`indexerd.daemon.socketfile`); the commands it answers, :mod:`indexerd.daemon.commands`.

Protocol: the client connects, sends ONE JSON object terminated by ``\\n`` (``{"cmd": "status"}``,
``{"cmd": "scan", "source": "docs"}``); the server replies with ONE JSON object plus ``\\n`` and
closes.  Replies are ``{"ok": true, ...}`` or ``{"ok": false, "error": "...", "exit_code": N}``
where ``N`` is the CLI exit status (2 bad request, 1 handler failure, else the ``exit_code`` of
the :class:`~indexerd.core.errors.IndexerdError` the handler raised).

One reply is not all JSON: a ``search`` request with ``"render": {"tty": bool, "json": bool}``
(what ``ctl search``'s fast path, :mod:`indexerd.cli.entry`, sends) is answered by the line
``{"ok":true,"rendered":N}`` and then N bytes of UTF-8: the text ``ctl search`` prints
(:data:`RENDERED_PREFIX`, :func:`encode`), so that client needs no JSON decoder.  Its first
line is still one JSON object; a client reading one line sees ``rendered`` as a byte count.

Outside contract relied on (Linux ``unix(7)``):

- ``sun_path`` holds 108 bytes including the terminating NUL, so a path is at most 107 bytes.
- ``connect()`` on a socket file nobody serves fails with ``ECONNREFUSED`` (or ``ENOENT``):
  :class:`DaemonNotRunning`.
- Connecting needs write permission on the socket file (``EACCES``: not in the socket's group).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import time
from pathlib import Path

from indexerd.core.errors import ConfigError, DaemonNotRunning, IndexerdError

MAX_PATH_BYTES = 107                  # sizeof(sun_path) - 1 on Linux
MAX_REQUEST_BYTES = 1024 * 1024       # a request line longer than this is refused
MAX_REPLY_BYTES = 64 * 1024 * 1024    # the client refuses a longer reply


def check_path(path: Path) -> None:
    """Raise ConfigError when ``path`` does not fit in ``sockaddr_un.sun_path``."""
    n = len(os.fsencode(path))
    if n > MAX_PATH_BYTES:
        raise ConfigError(f"control socket path {path} is {n} bytes long; Unix sockets allow at "
                          f"most {MAX_PATH_BYTES} (set control_socket to a shorter path)")


#: how a rendered reply starts (module docstring): the byte count and ``}\n`` follow
RENDERED_PREFIX = b'{"ok":true,"rendered":'


def encode(reply: dict) -> bytes:
    """The bytes of ``reply``: one JSON line, or for ``{"ok": True, "rendered": text}`` the
    rendered form (module docstring; text encoded with ``surrogatepass``, as printing it would
    fail on a lone surrogate in the client, not here)."""
    if len(reply) == 2 and reply.get("ok") is True and isinstance(reply.get("rendered"), str):
        data = reply["rendered"].encode("utf-8", "surrogatepass")
        return RENDERED_PREFIX + str(len(data)).encode() + b"}\n" + data
    return (json.dumps(reply, separators=(",", ":")) + "\n").encode("utf-8")


def error_reply(message: str, exit_code: int) -> dict:
    return {"ok": False, "error": message, "exit_code": exit_code}


#: The fields of a control request and their JSON types (what ``indexerd ctl`` sends); a request
#: with another type, or a string holding NUL, is refused before any handler sees it.
REQUEST_FIELDS: dict[str, tuple[type, ...]] = {
    "cmd": (str,), "source": (str, type(None)), "key": (str,), "wait": (bool,), "all": (bool,),
    "targets": (list,), "query": (str,), "limit": (int,), "since": (str, type(None)),
    "state_dir": (str,), "render": (dict,),
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
    check_path(p)
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
                sock.sendall(encode(payload))
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
