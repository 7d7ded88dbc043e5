"""``indexerd ctl search`` answered by a running daemon without the full command line's start-up.

The console script starts here.  A process that only asks the daemon a question and prints the
answer spends most of its life importing: argparse, logging, msgspec and the config schema,
pathlib, dataclasses.  For the one command people run in a loop, ``ctl search`` with the
daemon up, this module does the same exchange with the standard library's ``os``, ``json``,
``socket`` (and ``tomllib`` when there is a config file to read), then prints through
:mod:`indexerd.cli.terminal`, which imports only ``re``.

It answers only when it is sure to print what the full path (:func:`indexerd.cli.ctl.cmd_search`)
prints; in every other case :func:`answer` returns None and :func:`main` runs the full command
line, which then does everything again and reports what went wrong:

- arguments other than ``[-c PATH] ctl search QUERY [--limit N] [--since SPAN] [--sort S]
  [--json]`` (``-c``/``--config`` before or after the command; ``--help``, ``--log-level``,
  abbreviations, ``--``: the full parser);
- a config file that is not TOML, or whose ``state_dir``/``control_socket`` are not strings;
- no daemon answering for this state dir, or any error reply (a malformed query, a time bound).

What it does not do that the full path does: validate the rest of the config file (the daemon
validated the config it runs on; ``indexerd check-config`` reports a broken file).  Where it
looks follows :mod:`indexerd.cli.locate` rule for rule (``tests/test_ctl_quick.py`` holds them
to the same answers).
"""

from __future__ import annotations

import os
import sys

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
    out = {"config": None, "query": None, "limit": 10, "since": None, "sort": "relevance", "json": False}
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
                value = next(it, None)
                if value is None or value.startswith("-"):
                    raise _NotHere
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
    import tomllib

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, ValueError):                # unreadable, not UTF-8 or not TOML
        raise _NotHere from None
    keys = {}
    for k in ("state_dir", "control_socket"):
        v = data.get(k)
        if v is not None and not isinstance(v, str):
            raise _NotHere
        if v:
            keys[k] = v
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


def _ask(sock_path: str, payload: dict) -> dict | None:
    """One exchange of the control protocol (:func:`indexerd.daemon.control.request`); None when
    nothing answers there or the exchange fails."""
    import json
    import socket

    if len(os.fsencode(sock_path)) > 107:
        raise _NotHere
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as s:
        s.settimeout(READ_WAIT_SECONDS)
        try:
            s.connect(sock_path)
            s.sendall(json.dumps(payload, ensure_ascii=True).encode() + b"\n")
            buf = bytearray()
            while b"\n" not in buf:
                chunk = s.recv(1 << 16)
                if not chunk:
                    return None
                buf += chunk
                if len(buf) > MAX_REPLY_BYTES:
                    raise _NotHere
        except OSError:
            return None
    try:
        reply = json.loads(buf.partition(b"\n")[0])
    except ValueError:
        raise _NotHere from None
    return reply if isinstance(reply, dict) else None


def answer(argv: list[str]) -> int | None:
    """Answer ``ctl search`` from a running daemon and print it; the exit code, or None when
    the full command line must (module docstring)."""
    try:
        req = parse(argv)
        keys, has_file = _config_keys(req["config"])
        sockets, state_dir = where(keys, has_file)
        payload = {"cmd": "search", "query": req["query"], "limit": req["limit"], "since": req["since"],
                   "sort": req["sort"], "state_dir": state_dir}
        for sock in sockets:
            reply = _ask(sock, payload)
            if reply is None:
                continue
            if reply.get("ok") is not True or "hits" not in reply:
                raise _NotHere                   # an error reply: the full path reports it
            if reply.get("other_state_dir") is not None:
                continue
            return _print(req, reply)
    except _NotHere:
        return None
    return None


def _print(req: dict, reply: dict) -> int:
    """Print the reply as :func:`indexerd.cli.ctl.cmd_search` prints it."""
    from indexerd.cli.terminal import ReplyHit, display_path, print_hits, safe

    if req["json"]:
        import json

        print(json.dumps(reply["hits"], ensure_ascii=True))
    elif not reply["hits"]:
        print(f"no documents match {safe(repr(req['query']))}")
    else:
        print_hits([ReplyHit(h, s) for h, s in zip(reply["hits"], reply["scores"])],
                   display_path=display_path, format_utc=lambda text: text)
    return 0


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
    from indexerd.cli.main import main as full

    return full()
