"""The ``indexerd ctl`` commands: find the daemon or the state dir, ask or read, print.

Two kinds: requests to the running daemon over its control socket (``status``, ``reload``,
``scan``/``crawl``/``poll``, ``reindex``, ``forget``), and reads of the index and state store
that work with the daemon stopped (``search``, ``report``, ``changed``, ``explain``).  Both
find what they talk to with :func:`indexerd.cli.locate.locate` (a broken config file does not lock
``ctl`` out); text output of values from documents goes through :func:`indexerd.cli.terminal.safe`.
Each ``cmd_*`` takes the parsed arguments and returns the exit code (see :mod:`indexerd.cli.main`).
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timezone

from indexerd.core.errors import ConfigError, IndexerdError, UnknownKey
from indexerd.cli.terminal import safe

UTC = timezone.utc


def _located(args):
    """Where this ``ctl`` command looks (:func:`indexerd.cli.locate.locate`); a config file that
    does not validate is reported once on stderr and only its locating keys are used."""
    from indexerd.cli.locate import locate

    loc = getattr(args, "_located", None)
    if loc is None:
        loc = args._located = locate(getattr(args, "config", None))
        if loc.warning:
            print(f"indexerd: warning: {safe(loc.warning)}", file=sys.stderr)
    return loc


class _NotReadable(IndexerdError):
    """The state dir (or a file in it) exists but this user may not read it."""


def _check_readable(*paths) -> None:
    """Raise :class:`_NotReadable` naming the first of ``paths`` that exists but cannot be read
    (directories: read and search; files: read) by this process's user."""
    for p in paths:
        try:
            os.stat(p)
        except FileNotFoundError:
            return                               # absent: the opener says "no index yet"
        except PermissionError:
            pass                                 # a parent cannot be searched: report p
        else:
            if os.access(p, os.R_OK | (os.X_OK if os.path.isdir(p) else 0)):
                continue
        raise _NotReadable(
            f"permission denied: {p} is not readable by this user (uid {os.getuid()}); the state "
            f"dir belongs to the daemon's user: run as that user or join its group (e.g. `indexerd`), "
            f"or pass -c with the config that names your own state_dir")


def _open_index_readonly(args):
    """The index of the located state dir, read with the engine that wrote it."""
    from indexerd.index import index_dir, open_index

    state_dir = _located(args).state_dir
    _check_readable(state_dir, index_dir(state_dir))
    return open_index(state_dir, None, create=False)


def _open_store_readonly(args):
    from indexerd.core.store import Store

    state_dir = _located(args).state_dir
    _check_readable(state_dir, state_dir / Store.FILENAME)
    return Store.in_dir(state_dir, readonly=True)


def cmd_search(args) -> int:
    from indexerd.core.dates import format_utc, parse_since

    since = until = None
    if args.since:
        since, until = parse_since(args.since, datetime.now(UTC))
    if args.limit < 1:
        raise ConfigError(f"--limit must be 1 or more, got {args.limit}")
    ix = _open_index_readonly(args)
    try:
        hits = ix.search(args.query, limit=args.limit, since=since, until=until)
    finally:
        ix.close()
    if args.json:
        out = [{"rank": h.rank, "key": h.key, "url": h.url, "path": h.path, "title": h.title,
                "last_modified": format_utc(h.last_modified), "date_source": h.date_source,
                "score": round(h.score, 4), "snippet": h.snippet, "source": h.source,
                "media_type": h.media_type} for h in hits]
        if not any(h.path for h in hits):
            for o in out:
                o.pop("path")
        else:
            for o in out:
                if o["path"] is None:
                    o.pop("path")
        print(json.dumps(out, ensure_ascii=True))
        return 0
    if not hits:
        print(f"no documents match {safe(repr(args.query))}")
        return 0
    from indexerd.sources.files.keys import display_path
    from indexerd.cli.terminal import print_hits

    print_hits(hits, display_path=display_path, format_utc=format_utc)
    return 0


def _print_rows(rows: list[dict], cols: list[str], as_json: bool, empty: str) -> None:
    from indexerd.cli.terminal import print_rows

    if as_json:
        print(json.dumps(rows, ensure_ascii=True))
    elif not rows:
        print(safe(empty))
    else:
        print_rows(rows, cols)


def cmd_report(args) -> int:
    from indexerd.cli.reports import date_report

    if not args.dates:
        raise ConfigError("ctl report: choose a report; the only one is --dates (every document with its "
                     "last-modified date, where the date came from and when it was indexed)")
    store = _open_store_readonly(args)
    try:
        rows = list(date_report(store, args.source))
    finally:
        store.close()
    _print_rows(rows, ["last_modified", "date_source", "indexed_at", "key"], args.json, "no documents")
    return 0


def cmd_changed(args) -> int:
    from indexerd.cli.reports import changed

    store = _open_store_readonly(args)
    try:
        rows = list(changed(store, args.since))
    finally:
        store.close()
    _print_rows(rows, ["last_modified", "date_source", "key"], args.json,
                f"no documents changed in {args.since!r}")
    return 0


def cmd_explain(args) -> int:
    from indexerd.cli.reports import explain

    store = _open_store_readonly(args)
    try:
        out = explain(store, args.key)
    finally:
        store.close()
    if out is None:
        raise UnknownKey(f"{args.key}: not known to indexerd")
    if args.json:
        print(json.dumps(out, ensure_ascii=True))
        return 0
    from indexerd.cli.terminal import print_explain

    print_explain(out)
    return 0


#: how long ``--wait`` style commands wait for the daemon's answer (seconds): a pass may be long
_LONG_WAIT = 24 * 3600.0
#: how long ``ctl reload`` waits: a reload re-reads the config and meta maps (seconds)
_RELOAD_WAIT = 120.0


def _daemon_request(args, payload: dict, timeout: float = 30.0) -> dict:
    """Send ``payload`` to the first control socket a daemon answers on (search order:
    :mod:`indexerd.cli.locate`); raise the daemon's error with its exit code."""
    from indexerd.daemon.control import request
    from indexerd.core.errors import DaemonNotRunning

    loc = _located(args)
    sockets = loc.sockets
    for i, sock in enumerate(sockets):
        try:
            reply = request(sock, payload, timeout=timeout)
            break
        except DaemonNotRunning:
            if i == len(sockets) - 1:
                if loc.guessed:
                    raise ConfigError(
                        "no daemon answered on " + " nor on ".join(map(str, sockets)) + ", a guess: "
                        "the config file did not parse and no control_socket line could be read from "
                        "it; fix the file or pass -c with one that names the daemon's control_socket"
                    ) from None
                if len(sockets) == 1:
                    raise
                raise DaemonNotRunning("indexerd is not running (no answer on "
                                       + " nor on ".join(map(str, sockets)) + ")") from None
    if not reply.get("ok", False):
        err = _DaemonError(reply.get("error", "the daemon refused the request"))
        err.exit_code = int(reply.get("exit_code", 1))
        raise err
    return reply


def cmd_status(args) -> int:
    r = _daemon_request(args, {"cmd": "status"})
    if args.json:
        print(json.dumps(r, ensure_ascii=True))
        return 0
    from indexerd.cli.terminal import print_status

    print_status(r)
    return 0


def cmd_reload(args) -> int:
    r = _daemon_request(args, {"cmd": "reload"}, timeout=_RELOAD_WAIT)
    print(f"reloaded {safe(r.get('config'))}: {r.get('sources')} sources")
    return 0


def cmd_scan(args) -> int:
    r = _daemon_request(args, {"cmd": args.ctl_command, "source": args.name, "wait": args.wait},
                        timeout=_LONG_WAIT if args.wait else 30.0)
    if args.wait:
        print(json.dumps(r.get("counts"), ensure_ascii=True))
    elif r.get("queued"):
        print(f"a pass of {safe(args.name)} is running; another {args.ctl_command} will follow it "
              "(see `indexerd ctl status`)")
    else:
        print(f"{args.ctl_command} of {safe(args.name)} started (see `indexerd ctl status`)")
    return 0


def cmd_reindex(args) -> int:
    if not (args.targets or args.source or args.all):
        raise ConfigError("ctl reindex: name what to re-index: PATH_OR_KEY..., --source NAME, or --all "
                          "(every source, a forced full pass of each)")
    if args.all and (args.targets or args.source):
        raise ConfigError("ctl reindex: --all takes no target and no --source")
    # a path is resolved here, as the user sees it (relative to this cwd, through the user's
    # links); the daemon then refuses any path that is not already real inside a source
    targets = [t if "://" in t or t.startswith(("sql:", "file:")) else os.path.realpath(t)
               for t in args.targets]
    r = _daemon_request(args, {"cmd": "reindex", "source": args.source, "targets": targets,
                                  "all": args.all},
                        timeout=_LONG_WAIT)
    print(json.dumps(r["counts"], ensure_ascii=True))
    return 0


def cmd_forget(args) -> int:
    from indexerd.cli.reports import normalise_key

    # a path is resolved here, as the user sees it (relative to this cwd); URLs canonicalised
    r = _daemon_request(args, {"cmd": "forget", "key": normalise_key(args.key)})
    print(f"forgot {safe(r['forgotten'])}")
    return 0


class _DaemonError(IndexerdError):
    """An error the daemon reported, with its exit code."""
