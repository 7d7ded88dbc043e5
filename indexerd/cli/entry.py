"""``indexerd ctl search`` answered by a running daemon without the full command line's start-up.

The console script starts here.  A process that only asks the daemon a question and prints the
answer spends most of its life importing: argparse, logging, msgspec and the config schema,
pathlib, dataclasses; even ``json`` (through ``re``) and ``tomllib`` cost more than the daemon's
answer.  For the one command people run in a loop, ``ctl search`` with the daemon up, this
module asks the daemon for the very text to print (a ``render`` request,
:mod:`indexerd.daemon.control`) with nothing but ``os``, ``sys`` and ``_socket``; the daemon
renders it with :func:`indexerd.output.terminal.search_reply_text`, the function the full path
prints the same reply with.  The config file's two keys come from
:mod:`indexerd.cli.configmemo` while the file is unchanged, else from ``tomllib``.

It answers only when it is sure to print what the full path (:func:`indexerd.cli.ctl.cmd_search`)
prints; in every other case :func:`answer` returns None and :func:`main` runs the full command
line, which then does everything again and reports what went wrong:

- arguments other than ``[-c PATH] ctl search QUERY [--limit N] [--since SPAN] [--sort S]
  [--json]`` (``-c``/``--config`` before or after the command; ``--help``, ``--log-level``,
  abbreviations, ``--``: the full parser);
- a config file that is not TOML, or whose ``state_dir``/``control_socket`` are not strings;
- no daemon answering at any of the sockets, or any reply but the rendered text (an error such
  as a malformed query or a time bound, a daemon serving another state dir, one too old to
  render).

What it does not do that the full path does: validate the rest of the config file (the daemon
validated the config it runs on; ``indexerd check-config`` reports a broken file).  Where it
looks follows :mod:`indexerd.cli.locate` rule for rule (``tests/test_ctl_fastpath.py`` holds them
to the same answers).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:   # typing (and the re, functools, contextlib it imports) cost a start 5-20 ms
    from typing import Any

#: as in indexerd.config.load, indexerd.cli.locate and systemd/indexerd.service
DEFAULT_CONFIG_PATH = "/etc/indexerd/indexerd.toml"
SYSTEM_SOCKET = "/run/indexerd/indexerd.sock"
SYSTEM_STATE_DIR = "/var/lib/indexerd"
STORE_FILENAME = "state.sqlite3"
#: seconds a read command waits for the daemon (as indexerd.cli.ctl)
READ_WAIT_SECONDS = 120.0
MAX_REPLY_BYTES = 64 * 1024 * 1024
_SORTS = ("relevance", "date")


class _NotHere(Exception):
    """This path cannot answer: the full command line does."""


def parse(argv: list[str]) -> dict:
    """The request of ``argv`` (without the program name), or :class:`_NotHere`.

    Returns ``{"config": str | None, "query": str, "limit": int, "since": str | None,
    "sort": str, "json": bool}``.
    """
    out: dict[str, Any] = {"config": None, "query": None, "limit": 10, "since": None, "sort": "relevance", "json": False}
    words: list[str] = []
    it = iter(argv)
    for a in it:
        if a in ("-c", "--config"):
            out["config"] = next(it, None)
            if out["config"] is None or out["config"].startswith("-"):
                raise _NotHere
        elif a.startswith("--config="):
            out["config"] = a[len("--config="):]
        elif words[:2] != ["ctl", "search"]:
            if a.startswith("-"):
                raise _NotHere                   # the search's options come after "search"
            words.append(a)
        elif a in ("--limit", "--since", "--sort") or a.startswith(("--limit=", "--since=", "--sort=")):
            name, eq, value = a.partition("=")
            if not eq:
                following = next(it, None)
                if following is None or following.startswith("-"):
                    raise _NotHere
                value = following
            out[name[2:]] = value
        elif a == "--json":
            out["json"] = True
        elif a.startswith("-"):
            raise _NotHere                       # --help, --log-level, abbreviations, "--"
        else:
            words.append(a)
    if len(words) != 3 or words[:2] != ["ctl", "search"]:
        raise _NotHere
    out["query"] = words[2]
    limit = out["limit"]
    if isinstance(limit, str):
        if not limit.isascii() or not limit.isdigit():
            raise _NotHere
        out["limit"] = int(limit)
    if out["limit"] < 1 or out["sort"] not in _SORTS:
        raise _NotHere
    out["since"] = out["since"] or None          # as ``args.since or None``
    return out


def _config_keys(explicit: str | None) -> tuple[dict, bool]:
    """``({"state_dir": ..., "control_socket": ...} as far as set, a config file was found)``,
    read as :func:`indexerd.config.load.find_config_path` finds the file."""
    path = None
    for value in (explicit, os.environ.get("INDEXERD_CONFIG")):
        if value:
            path = os.path.expanduser(value)
            if not os.path.isfile(path):
                raise _NotHere                   # the full path names the missing file
            break
    else:
        path = DEFAULT_CONFIG_PATH if os.path.isfile(DEFAULT_CONFIG_PATH) else None
    if path is None:
        return {}, False
    from indexerd.cli import configmemo

    try:
        st = os.stat(path)
    except OSError:
        raise _NotHere from None
    keys = configmemo.recall(path, st)
    if keys is not None:
        return keys, True
    import time
    import tomllib

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, ValueError, RecursionError):  # unreadable, not UTF-8, not TOML, nested too deep
        raise _NotHere from None
    keys = {}
    for k in configmemo.KEYS:
        v = data.get(k)
        if v is not None and not isinstance(v, str):
            raise _NotHere
        if v:
            keys[k] = v
    configmemo.remember(path, st, keys, time.time_ns())
    return keys, True


def _is_root() -> bool:
    return os.geteuid() == 0


def _user_state_dir() -> str:
    """platformdirs' ``user_state_dir("indexerd")`` on Linux."""
    base = os.environ.get("XDG_STATE_HOME", "").strip() or os.path.expanduser("~/.local/state")
    return os.path.join(base, "indexerd")


def _own_state_dir(keys: dict, has_file: bool) -> str:
    """:func:`indexerd.config.paths.resolve_state_dir`."""
    if "state_dir" in keys:
        return os.path.expanduser(keys["state_dir"])
    env = os.environ.get("STATE_DIRECTORY")
    if env:
        return env.split(":")[0]
    if _is_root() and has_file:
        return SYSTEM_STATE_DIR
    return _user_state_dir()


def where(keys: dict, has_file: bool) -> tuple[list[str], str]:
    """``(control sockets in search order, the readers' state dir)``: what
    :func:`indexerd.cli.locate.socket_candidates` and :func:`~indexerd.cli.locate.state_dir_for_readers`
    return for a config with these keys."""
    own = _own_state_dir(keys, has_file)
    if "control_socket" in keys:
        sockets = [os.path.expanduser(keys["control_socket"])]
    elif os.environ.get("RUNTIME_DIRECTORY"):
        sockets = [os.path.join(os.environ["RUNTIME_DIRECTORY"].split(":")[0], "indexerd.sock")]
    elif _is_root():
        sockets = [SYSTEM_SOCKET]
    else:
        first = os.path.join(own, "indexerd.sock")
        sockets = [first] if os.path.normpath(first) == SYSTEM_SOCKET else [first, SYSTEM_SOCKET]
    state_dir = own
    if not ("state_dir" in keys or os.environ.get("STATE_DIRECTORY") or _is_root()):
        for candidate in (own, SYSTEM_STATE_DIR):
            try:
                os.stat(os.path.join(candidate, STORE_FILENAME))
            except PermissionError:
                pass                             # there, but not readable: the full path says so
            except OSError:
                continue
            state_dir = candidate
            break
    return sockets, state_dir


def json_string(text: str) -> str:
    """``text`` as a JSON string, as ``json.dumps(text, ensure_ascii=True)`` writes it (RFC 8259
    section 7; lone surrogates as ``\\udcxx``), without importing :mod:`json`."""
    out = []
    for c in text:
        o = ord(c)
        if c in '"\\':
            out.append("\\" + c)
        elif 0x20 <= o < 0x7f:
            out.append(c)
        elif c in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[c])
        elif o > 0xFFFF:
            o -= 0x10000
            out.append(f"\\u{0xD800 | (o >> 10):04x}\\u{0xDC00 | (o & 0x3FF):04x}")
        else:
            out.append(f"\\u{o:04x}")
    return '"' + "".join(out) + '"'


_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def request_line(req: dict, state_dir: str, tty: bool) -> bytes:
    """The control request (:mod:`indexerd.daemon.control`) asking the daemon for the printed
    answer to ``req`` (:func:`parse`), as one JSON line."""
    since = "null" if req["since"] is None else json_string(req["since"])
    return (f'{{"cmd":"search","query":{json_string(req["query"])},"limit":{int(req["limit"])},'
            f'"since":{since},"sort":{json_string(req["sort"])},"state_dir":{json_string(state_dir)},'
            f'"render":{{"tty":{"true" if tty else "false"},"json":{"true" if req["json"] else "false"}}}}}'
            "\n").encode("ascii")


#: sockets that gave no reply within READ_WAIT_SECONDS (handed to indexerd.cli.ctl by :func:`main`)
TIMED_OUT: set[str] = set()

#: as indexerd.daemon.control.RENDERED_PREFIX
RENDERED_PREFIX = b'{"ok":true,"rendered":'


def _ask(sock_path: str, line: bytes) -> bytes | None:
    """One exchange of the control protocol asking for a rendered reply: the text's bytes, None
    when nothing answers there; :class:`_NotHere` for any other reply (an error, another state
    dir, a daemon that does not render).

    The socket is ``_socket``'s, the C module under :mod:`socket`: the Python module adds
    enum classes for every constant at import, a tenth of this path's time."""
    import _socket

    if len(os.fsencode(sock_path)) > 107:
        raise _NotHere
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM | _socket.SOCK_CLOEXEC)
    try:
        s.settimeout(READ_WAIT_SECONDS)
        try:
            s.connect(sock_path)
        except OSError:
            return None
        try:
            s.sendall(line)
            buf = bytearray()
            while True:
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
                if len(buf) > MAX_REPLY_BYTES:
                    raise _NotHere
        except TimeoutError:
            TIMED_OUT.add(os.path.normpath(sock_path))  # the full path does not wait there again
            raise _NotHere from None
        except OSError:
            raise _NotHere from None
    finally:
        s.close()
    head, newline, body = bytes(buf).partition(b"\n")
    if not newline or not head.startswith(RENDERED_PREFIX) or not head.endswith(b"}"):
        raise _NotHere
    count = head[len(RENDERED_PREFIX):-1]
    if not count.isdigit() or int(count) != len(body):
        raise _NotHere
    return body


def answer(argv: list[str]) -> int | None:
    """Answer ``ctl search`` from a running daemon and print it; the exit code, or None when
    the full command line must (module docstring)."""
    try:
        if sys.stdout is None:
            raise _NotHere                       # closed at start: the full path says what it says
        req = parse(argv)
        keys, has_file = _config_keys(req["config"])
        sockets, state_dir = where(keys, has_file)
        line = request_line(req, state_dir, sys.stdout.isatty())
        for sock in sockets:
            text = _ask(sock, line)
            if text is not None:
                return _emit(text.decode("utf-8", "surrogatepass"))
    except _NotHere:
        return None
    return None


def _emit(text: str) -> int:
    """Write ``text`` as the full path does (:func:`indexerd.output.stdout.write_stdout`): 0, or 1
    with the full path's line when the write fails (a full disk)."""
    from indexerd.output.stdout import write_stdout

    problem = write_stdout(text)
    if problem is None:
        return 0
    print(f"indexerd: {problem}", file=sys.stderr)
    return 1


def main() -> int:
    """The ``indexerd`` console script: :func:`answer`, else the full command line
    (:func:`indexerd.cli.main.main`)."""
    try:
        code = answer(sys.argv[1:])
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("indexerd: interrupted", file=sys.stderr)
        return 130
    if code is not None:
        return code
    if TIMED_OUT:
        from indexerd.cli import ctl

        ctl.TIMED_OUT_SOCKETS.update(TIMED_OUT)
    from indexerd.cli.main import main as full

    return full()
