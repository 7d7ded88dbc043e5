"""The ``indexerd ctl`` commands: find the daemon or the state dir, ask or read, print.

Two kinds: requests to the running daemon over its control socket (``status``, ``reload``,
``scan``/``crawl``/``poll``, ``reindex``, ``forget``), and reads of the index and state store
that work with the daemon stopped (``search``, ``report``, ``changed``, ``explain``).  Both
find what they talk to with :func:`indexerd.cli.locate.locate` (a broken config file does not lock
``ctl`` out); text output of values from documents goes through :func:`indexerd.output.terminal.safe`.
Each ``cmd_*`` takes the parsed arguments and returns the exit code (see :mod:`indexerd.cli.main`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import datetime, timezone

from indexerd.core.errors import ConfigError, IndexerdError, UnknownKey
from indexerd.core.plurals import counted
from indexerd.output.terminal import (display_path as _display_path, emit, no_hits_text, safe, search_reply_text,
                                   stdout_is_tty)

UTC = timezone.utc

log = logging.getLogger(__name__)


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
    from indexerd.core.store import PgStoreAddress, Store, open_store_in_dir

    state_dir = _located(args).state_dir
    _check_readable(state_dir)
    _check_readable(state_dir / (PgStoreAddress.FILENAME if (state_dir / PgStoreAddress.FILENAME).exists()
                                 else Store.FILENAME))
    return open_store_in_dir(state_dir, readonly=True)


def _ask_daemon(args, payload: dict) -> dict | None:
    """The running daemon's answer to a read command (:mod:`indexerd.daemon.reads`), or None
    when no daemon serving the state dir this command reads answers: then the caller reads the
    state dir itself, as it does with the daemon stopped.  A daemon that does not know the
    command (an older one), one that is busy, or a socket this user may not use also give None.

    Raises:
        the daemon's error (a malformed query: exit 2; a query over its time bound: exit 1).
    """
    from indexerd.core.errors import DaemonNotRunning
    from indexerd.daemon.control import request

    loc = _located(args)
    for sock in loc.sockets:
        if os.path.normpath(sock) in TIMED_OUT_SOCKETS:
            continue                         # the fast path waited there already (cli/entry.py)
        try:
            reply = request(sock, {**payload, "state_dir": str(loc.state_dir)}, timeout=_READ_WAIT)
        except DaemonNotRunning:
            continue
        except IndexerdError as e:           # not ours to use (permissions), or gone mid-way
            if os.environ.get("INDEXERD_DEBUG"):
                print(f"indexerd: reading the state dir itself: {safe(str(e))}", file=sys.stderr)
            continue
        if reply.get("ok") and reply.get("other_state_dir") is None:
            return reply
        if reply.get("ok"):
            continue                         # that daemon serves another state dir
        error = str(reply.get("error", ""))
        if error.startswith(("unknown control command", "busy:")):
            return None
        err = _DaemonError(error or "the daemon refused the request")
        err.exit_code = int(reply.get("exit_code", 1))
        raise err
    return None


#: how long a read command waits for the daemon (seconds): its queries are bounded far below
_READ_WAIT = 120.0
#: sockets (normalised paths) where ``ctl search``'s fast path already waited :data:`_READ_WAIT`
#: for a reply in this process: asked again they would double the wait; the full path goes on as
#: after its own timeout (it reads the state dir itself)
TIMED_OUT_SOCKETS: set[str] = set()


def cmd_search(args) -> int:
    if args.limit < 1:
        raise ConfigError(f"--limit must be 1 or more, got {args.limit}")
    sort = getattr(args, "sort", "relevance")
    reply = _ask_daemon(args, {"cmd": "search", "query": args.query, "limit": args.limit,
                               "since": args.since or None, "sort": sort})
    if reply is not None:
        suggestion = reply.get("suggestion")
        emit(search_reply_text(args.query, reply["hits"], reply["scores"], as_json=args.json,
                               tty=stdout_is_tty(), suggestion=suggestion))
        _suggestion_said(args, suggestion)
        _replica_lag_said(args, reply.get("replica_lag_seconds"))
        return _partial_said(args, reply, found=bool(reply["hits"]))
    from indexerd.core.dates import format_utc
    from indexerd.core.timespans import parse_since
    from indexerd.daemon.queries import hits_json, suggestion_json

    since = until = None
    if args.since:
        since, until = parse_since(args.since, datetime.now(UTC))
    from indexerd.daemon.queries import SearchRequest, search_any_engine

    loc = _located(args)
    collapse = loc.config is None or loc.config.index.collapse_duplicates

    def hashes(keys: list[str]) -> dict[str, str]:
        """The content hashes to collapse identical hits by; none (each hit its own) when the
        state store cannot be read: a search needs only the index (a reader without the
        config, a store being migrated or written by a newer indexerd, a full disk)."""
        try:
            with _open_store_readonly(args) as store:
                return store.content_hashes(keys)
        except (IndexerdError, OSError) as e:
            log.debug("identical hits not collapsed: %s", e)
            return {}

    ix = _open_index_readonly(args)
    try:
        req = SearchRequest(query=args.query, since=since, until=until, sort=sort, limit=args.limit)
        result = search_any_engine(ix, req, exact=True, hashes=hashes if collapse else None)
    finally:
        ix.close()
    hits = result.hits
    suggestion = suggestion_json(result.suggestion)
    if args.json:
        emit(json.dumps(hits_json(hits), ensure_ascii=True) + "\n")
    else:
        _print_hits(args, hits, format_utc=format_utc, suggestion=suggestion)
    _suggestion_said(args, suggestion)
    _replica_lag_said(args, result.replica_lag_seconds)
    return _partial_said(args, _coverage_from_store(args, loc), found=bool(hits))


def _coverage_from_store(args, loc) -> dict:
    """With no daemon to ask, whether the index is partial (a rebuild or a first pass not yet
    completed), read from the state store as the daemon reads it
    (:func:`indexerd.daemon.coverage.incomplete_sources`): ``{"coverage": ..., "coverage_text":
    ...}`` for :func:`_partial_said`; no progress figures (the pass's counts are the daemon's),
    only whether a pass runs.  ``{}`` when the store cannot be read (then nothing is said)."""
    from indexerd.daemon.coverage import SourceCoverage, Coverage, incomplete_sources
    from indexerd.runtime.recovery import rebuilt_at
    from indexerd.sources.registry import configured_names

    try:
        with _open_store_readonly(args) as store:
            runs = store.source_runs()
            rebuilt = rebuilt_at(store)
    except (IndexerdError, OSError) as e:
        log.debug("whether the index is partial not known: %s", e)
        return {}
    names = configured_names(loc.config) if loc.config is not None else sorted(runs)
    incomplete = incomplete_sources(names, runs, rebuilt)
    cov = Coverage(tuple(SourceCoverage(name, why, (runs.get(name) or {}).get("running_since") is not None)
                         for name, why in sorted(incomplete.items())))
    said = (f"the index is incomplete ({cov.doing}: {', '.join(c.source for c in cov.sources)}); "
            f"these are the hits indexed so far")
    return {"coverage": cov.as_json(), "coverage_text": said} if cov.partial else {}


#: ``ctl search``'s exit status when the index is partial (a rebuild or a first pass runs) and
#: nothing matched: "no documents match" may only mean "not indexed yet"
EXIT_PARTIAL_EMPTY = 5


def _replica_lag_said(args, lag_seconds) -> None:
    """Say on stderr that a read replica lagging ``lag_seconds`` behind its primary answered
    (None: say nothing): a line for people or, with ``--json``, one JSON object
    (``{"replica_lag_seconds": 12.3}``: stdout keeps the array of hits)."""
    if not isinstance(lag_seconds, (int, float)) or isinstance(lag_seconds, bool):
        return
    from indexerd.daemon.queries import replica_lag_text

    if args.json:
        print(json.dumps({"replica_lag_seconds": lag_seconds}), file=sys.stderr)
    else:
        print(f"indexerd: {replica_lag_text(float(lag_seconds))}", file=sys.stderr)


def _partial_said(args, reply: dict, *, found: bool) -> int:
    """Say on stderr that the daemon answered from a partial index (``reply["coverage"]``), as
    a line for people or, with ``--json``, as one JSON object (``{"partial": true, "progress":
    [...]}``: stdout keeps the array of hits); the exit status: 0, or :data:`EXIT_PARTIAL_EMPTY`
    when nothing matched."""
    cov = reply.get("coverage")
    if not cov or not cov.get("partial"):
        return 0
    if args.json:
        print(json.dumps(cov, ensure_ascii=True), file=sys.stderr)
    else:
        print(f"indexerd: {safe(reply.get('coverage_text', 'the index is incomplete'))}", file=sys.stderr)
    return 0 if found else EXIT_PARTIAL_EMPTY


def _suggestion_said(args, suggestion: dict | None) -> None:
    """With ``--json``, the suggestion on stderr as one JSON object (stdout keeps the array of
    hits; the text form printed it with "no documents match")."""
    from indexerd.output.terminal import suggestion_note

    note = suggestion_note(suggestion, as_json=args.json)
    if note:
        print(note, end="", file=sys.stderr)


def _print_hits(args, hits, *, format_utc, suggestion: dict | None = None) -> int:
    if not hits:
        emit(no_hits_text(args.query, suggestion))
        return 0
    from indexerd.output.terminal import print_hits

    print_hits(hits, display_path=_display_path, format_utc=format_utc)
    return 0


def _print_rows(rows: list[dict], cols: list[str], as_json: bool, empty: str) -> None:
    from indexerd.output.terminal import print_rows

    if as_json:
        print(json.dumps(rows, ensure_ascii=True))
    elif not rows:
        print(safe(empty))
    else:
        print_rows(rows, cols)


def cmd_report(args) -> int:
    skipped = getattr(args, "skipped", False)
    if not args.dates and not skipped:
        raise ConfigError("ctl report: choose a report: --dates (every document with its "
                          "last-modified date, where the date came from and when it was indexed) "
                          "or --skipped (every skipped document with its reason)")
    if args.dates and skipped:
        raise ConfigError("ctl report: choose one report, --dates or --skipped")
    request = {"cmd": "report", "source": args.source}
    if skipped:
        request["report"] = "skipped"
    reply = _ask_daemon(args, request)
    if reply is not None and "rows" in reply:
        rows = reply["rows"]
    else:
        from indexerd.output.reports import date_report, skipped_report

        store = _open_store_readonly(args)
        try:
            rows = list((skipped_report if skipped else date_report)(store, args.source))
        finally:
            store.close()
    if skipped:
        _print_rows(rows, ["reason", "decided_at", "key", "detail"], args.json, "no skipped documents")
    else:
        _print_rows(rows, ["last_modified", "date_source", "indexed_at", "key"], args.json, "no documents")
    return 0


def cmd_changed(args) -> int:
    reply = _ask_daemon(args, {"cmd": "changed", "since": args.since})
    if reply is not None and "rows" in reply:
        rows = reply["rows"]
    else:
        from indexerd.output.reports import changed

        store = _open_store_readonly(args)
        try:
            rows = list(changed(store, args.since))
        finally:
            store.close()
    _print_rows(rows, ["last_modified", "date_source", "key"], args.json,
                f"no documents changed in {args.since!r}")
    return 0


def cmd_explain(args) -> int:
    # a path is resolved here, as the user sees it (relative to this cwd); the daemon makes
    # the key of it as the state-dir reader below does
    from indexerd.sources.registry import is_key

    key = args.key
    if not is_key(key):
        key = os.path.realpath(key)
    reply = _ask_daemon(args, {"cmd": "explain", "key": key})
    if reply is not None:
        out = reply["explain"]
    else:
        from indexerd.output.reports import explain

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
    from indexerd.output.terminal import print_explain

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
    if (loc.config is not None and loc.config.state_dir) or os.environ.get("STATE_DIRECTORY"):
        # a state dir the config names: a daemon serving another one (another config's, on the
        # same control_socket) refuses the command; a guessed one is not sent
        payload = {**payload, "state_dir": str(loc.state_dir)}
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
    from indexerd.output.terminal import print_status

    print_status(r)
    return 0


def cmd_reload(args) -> int:
    r = _daemon_request(args, {"cmd": "reload"}, timeout=_RELOAD_WAIT)
    print(f"reloaded {safe(r.get('config'))}: {counted(r.get('sources') or 0, 'source')}")
    for warning in r.get("warnings") or []:
        print(f"indexerd: warning: {safe(warning)}", file=sys.stderr)
    return 0


def cmd_scan(args) -> int:
    r = _daemon_request(args, {"cmd": args.ctl_command, "source": args.name, "wait": args.wait,
                               "all": getattr(args, "all", False)},
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
    from indexerd.sources.registry import is_key
    targets = [t if is_key(t) else os.path.realpath(t) for t in args.targets]
    r = _daemon_request(args, {"cmd": "reindex", "source": args.source, "targets": targets,
                                  "all": args.all},
                        timeout=_LONG_WAIT)
    print(json.dumps(r["counts"], ensure_ascii=True))
    return 0


def cmd_forget(args) -> int:
    from indexerd.output.reports import normalise_key

    # a path is resolved here, as the user sees it (relative to this cwd); URLs canonicalised
    r = _daemon_request(args, {"cmd": "forget", "key": normalise_key(args.key)})
    print(f"forgot {safe(r['forgotten'])}")
    return 0


class _DaemonError(IndexerdError):
    """An error the daemon reported, with its exit code."""
