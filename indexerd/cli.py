"""The command line: parse, call one function, map errors to a message and an exit code.

Exit codes, for every command: 0 success (also no search results, and documents skipped or
failed inside a pass, which the summary reports); 1 the command failed; 2 bad usage, bad config
or a malformed query; 3 the daemon is needed and not running; 4 another indexerd process holds
the state dir.

Heavy libraries (Whoosh, requests, APScheduler) are imported only by the commands that use them.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from datetime import datetime, timezone

from . import __version__
from .errors import IndexerdError

UTC = timezone.utc
log = logging.getLogger("indexerd")


def _setup_logging(level: str) -> None:
    from .notify import is_journal_stream

    # journald stamps each line itself: under systemd a second timestamp is noise
    fmt = "%(levelname)s %(name)s: %(message)s"
    try:
        journal = is_journal_stream(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # stderr replaced by an object without a descriptor
        journal = False
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), stream=sys.stderr,
                        format=fmt if journal else "%(asctime)s " + fmt)


def _load(args, *, required: bool = False):
    from .config import load_config

    return load_config(getattr(args, "config", None), required=required)


# -- commands -------------------------------------------------------------------------------
def cmd_index(args) -> int:
    from .indexer import Indexer

    cfg = _load(args)
    if not args.paths and not (cfg.sources.filesystem or cfg.sources.sql or cfg.sources.web):
        raise _usage("nothing to index: give PATH arguments or configure [[sources.filesystem]], "
                     "[[sources.web]] or [[sources.sql]] "
                     f"(config: {cfg.origin})")
    ix = Indexer(cfg)
    ix.open("index", rebuild=args.rebuild)
    try:
        summary = ix.run_pass(args.source or None, args.paths or None, forced=args.force)
    finally:
        ix.close()
    d = summary.as_dict()
    if args.json:
        print(json.dumps(d, ensure_ascii=True))
    else:
        print(f"seen {d['seen']}, indexed {d['indexed']}, unchanged {d['unchanged']}, "
              f"deleted {d['deleted']}, skipped {d['skipped']}, errors {d['errors']} "
              f"in {d['elapsed_seconds']:.2f} s (state dir {ix.state.path})")
    # a missing or unreadable root was logged by the pass ("...; nothing is deleted")
    failed = [s for s in ix.sources.values() if getattr(s, "root_failed", None)]
    return 1 if failed and not args.paths else 0


def _missing_roots(cfg) -> list[tuple[str, str]]:
    """``(name, path)`` of each configured filesystem source whose root is not a directory now."""
    return [(s.name, s.path) for s in cfg.sources.filesystem if not os.path.isdir(s.path)]


def cmd_check_config(args) -> int:
    from .config import resolve_control_socket, resolve_state_dir, to_toml
    from .indexer import build_sources

    cfg = _load(args, required=True)
    build_sources(cfg)  # meta maps are read and checked too
    for name, path in _missing_roots(cfg):  # not an error: a disk may be mounted later
        print(f"indexerd: warning: source {name}: path {path} does not exist (or is not a "
              f"directory) now; its passes will report an error and delete nothing", file=sys.stderr)
    from .writeaccess import read_warnings, write_warnings

    for msg in read_warnings(cfg, args.user) + write_warnings(cfg, args.user):
        print(f"indexerd: warning: {msg}", file=sys.stderr)
    print(f"# {cfg.origin}: OK")
    print(f"# effective state_dir = {resolve_state_dir(cfg)}")
    print(f"# effective control_socket = {resolve_control_socket(cfg)}")
    print(to_toml(cfg), end="")
    return 0


def _open_index_readonly(cfg):
    from .config import resolve_state_dir
    from .index import WhooshIndex

    return WhooshIndex.open(resolve_state_dir(cfg), create=False)


def _open_store_readonly(cfg):
    from .config import resolve_state_dir
    from .store import Store

    return Store.in_dir(resolve_state_dir(cfg), readonly=True)


def cmd_search(args) -> int:
    from .dates import format_utc, parse_since

    since = until = None
    if args.since:
        since, until = parse_since(args.since, datetime.now(UTC))
    if args.limit < 1:
        raise _usage(f"--limit must be 1 or more, got {args.limit}")
    cfg = _load(args)
    ix = _open_index_readonly(cfg)
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
        print(f"no documents match {args.query!r}")
        return 0
    tty = sys.stdout.isatty()
    bold, off = ("\x1b[1m", "\x1b[0m") if tty else ("", "")
    from .files import display_path

    for h in hits:
        where = display_path(h.path) if h.path else h.url
        print(f"{h.rank:>3}. {bold}{h.title or '(untitled)'}{off}")
        print(f"     {where}")
        print(f"     last modified {format_utc(h.last_modified)} ({h.date_source}), score {h.score:.2f}")
        if h.snippet:
            print(f"     {h.snippet}")
    return 0


def _print_rows(rows: list[dict], cols: list[str], as_json: bool, empty: str) -> None:
    if as_json:
        print(json.dumps(rows, ensure_ascii=True))
        return
    if not rows:
        print(empty)
        return
    for r in rows:
        print("  ".join(str(r.get(c) if r.get(c) is not None else "-") for c in cols))


def cmd_report(args) -> int:
    from .reports import date_report

    if not args.dates:
        raise _usage("ctl report: choose a report, e.g. --dates")
    store = _open_store_readonly(_load(args))
    try:
        rows = list(date_report(store, args.source))
    finally:
        store.close()
    _print_rows(rows, ["last_modified", "date_source", "indexed_at", "key"], args.json, "no documents")
    return 0


def cmd_changed(args) -> int:
    from .reports import changed

    store = _open_store_readonly(_load(args))
    try:
        rows = list(changed(store, args.since))
    finally:
        store.close()
    _print_rows(rows, ["last_modified", "date_source", "key"], args.json,
                f"no documents changed in {args.since!r}")
    return 0


def cmd_explain(args) -> int:
    from .reports import explain

    store = _open_store_readonly(_load(args))
    try:
        out = explain(store, args.key)
    finally:
        store.close()
    if out is None:
        print(f"{args.key}: not known to indexerd", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(out, ensure_ascii=True))
        return 0
    for k, v in out.items():
        if k != "explanation" and v is not None:
            print(f"{k:22} {v}")
    for line in out["explanation"]:
        print(f"- {line}")
    return 0


def cmd_run(args) -> int:
    from .config import load_config
    from .daemon import run_daemon

    level = args.log_level or load_config(args.config).log_level
    logging.getLogger().setLevel(getattr(logging, level.upper(), logging.INFO))
    return run_daemon(args.config)


#: how long ``--wait`` style commands wait for the daemon's answer (seconds): a pass may be long
_LONG_WAIT = 24 * 3600.0


def _daemon_request(args, payload: dict, timeout: float = 30.0) -> dict:
    from .config import resolve_control_socket
    from .control import request

    reply = request(resolve_control_socket(_load(args)), payload, timeout=timeout)
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
    print(f"indexerd pid {r['pid']}, up {r['uptime_seconds']:.0f} s, state dir {r['state_dir']}")
    ix = r["index"]
    print(f"index: {ix['documents']} documents, {ix['segments']} segments, "
          f"{(ix['size_bytes'] or 0) / 1e6:.1f} MB; last commit {r['writer']['last_commit'] or '-'}; "
          f"queues: changes {r['change_queue']}, writer {r['writer']['queue']}")
    if ix.get("error"):
        print(f"index error: {ix['error']}")
    if r["writer"]["last_error"]:
        print(f"writer error: {r['writer']['last_error']}")
    for name, s in r["sources"].items():
        docs = ", ".join(f"{k} {v}" for k, v in sorted(s["documents"].items())) or "no documents"
        where = f", {s['root']}" if s["root"] else ""
        print(f"- {name} ({s['kind']}{where}{', watched' if s['watched'] else ''}): {docs}")
        if s["running"]:
            p = s["progress"] or {}
            if s["kind"] == "web":
                print(f"    crawling now: {p.get('done', 0)} pages fetched, "
                      f"{p.get('total', 0) - p.get('done', 0)} queued")
            else:
                print(f"    reconciling now: {p.get('done', 0)}/{p.get('total', 0)} read, "
                      f"{p.get('found', 0)} files found")
        lr = s["last_run"]
        if lr["finished"]:
            c = lr["counts"] or {}
            counts = ", ".join(f"{k} {v}" for k, v in c.items())
            print(f"    last run {lr['started']} .. {lr['finished']}: {counts}"
                  + (f"; error: {lr['error']}" if lr["error"] else ""))
        print(f"    next run {s['next_run'] or '-'}")
    failures = {k: v for k, v in r.get("counters", {}).items() if k.startswith(("error.", "skip.", "web."))}
    if failures:
        print("counts by reason: " + ", ".join(f"{k} {v}" for k, v in failures.items()))
    for host, h in (r.get("hosts") or {}).items():
        print(f"host {host}: " + ", ".join(f"{k} {round(v, 2) if isinstance(v, float) else v}"
                                            for k, v in h.items()))
    return 0


def cmd_scan(args) -> int:
    r = _daemon_request(args, {"cmd": args.ctl_command, "source": args.name, "wait": args.wait},
                        timeout=_LONG_WAIT if args.wait else 30.0)
    if args.wait:
        print(json.dumps(r.get("counts"), ensure_ascii=True))
    elif r.get("queued"):
        print(f"a pass of {args.name} is running; another {args.ctl_command} will follow it "
              "(see `indexerd ctl status`)")
    else:
        print(f"{args.ctl_command} of {args.name} started (see `indexerd ctl status`)")
    return 0


def cmd_reindex(args) -> int:
    # a path is resolved here, as the user sees it (relative to this cwd, through the user's
    # links); the daemon then refuses any path that is not already real inside a source
    targets = [t if "://" in t or t.startswith(("sql:", "file:")) else os.path.realpath(t)
               for t in args.targets]
    r = _daemon_request(args, {"cmd": "reindex", "source": args.source, "targets": targets},
                        timeout=_LONG_WAIT)
    print(json.dumps(r["counts"], ensure_ascii=True))
    return 0


def cmd_forget(args) -> int:
    r = _daemon_request(args, {"cmd": "forget", "key": args.key})
    print(f"forgot {r['forgotten']}")
    return 0


# -- parser ---------------------------------------------------------------------------------
class _UsageError(IndexerdError):
    exit_code = 2


class _DaemonError(IndexerdError):
    """An error the daemon reported, with its exit code."""


def _usage(msg: str) -> _UsageError:
    return _UsageError(msg)


def _parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-c", "--config", metavar="PATH",
                        help="config file (default: $INDEXERD_CONFIG, else /etc/indexerd/indexerd.toml)")
    common.add_argument("--log-level", default=None, help="debug, info, warning (default), error")

    p = argparse.ArgumentParser(prog="indexerd", formatter_class=fmt,
                                description="Keep a full-text index of local trees and SQL change queues current, and search it.",
                                epilog="example:\n  indexerd index ~/docs && indexerd ctl search 'event loop'")
    p.add_argument("--version", action="version", version=f"indexerd {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    s = sub.add_parser("index", parents=[common], formatter_class=fmt,
                       help="one pass over the configured sources (or PATHs), then exit",
                       epilog="examples:\n  indexerd index ~/notes\n  indexerd index -c etc/indexerd.toml --json")
    s.add_argument("paths", nargs="*", metavar="PATH", help="index these files or trees (no config needed)")
    s.add_argument("--source", action="append", metavar="NAME", help="only this configured source (repeatable)")
    s.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    s.add_argument("--force", action="store_true", help="read and re-index every document")
    s.add_argument("--rebuild", action="store_true",
                   help="move a broken index aside and re-index everything into a new one")
    s.set_defaults(func=cmd_index)

    s = sub.add_parser("check-config", parents=[common], formatter_class=fmt,
                       help="validate the config and print the effective settings",
                       epilog="examples:\n  indexerd check-config -c /etc/indexerd/indexerd.toml\n"
                              "  sudo indexerd check-config -c /etc/indexerd/indexerd.toml --user indexerd")
    s.add_argument("--user", metavar="NAME",
                   help="warn about trees this user cannot read and paths indexerd must write that it "
                        "cannot (default: you; another user needs root)")
    s.set_defaults(func=cmd_check_config)

    s = sub.add_parser("run", parents=[common], formatter_class=fmt,
                       help="run the daemon in the foreground (systemd Type=notify)",
                       epilog="example:\n  indexerd run -c /etc/indexerd/indexerd.toml --log-level info")
    s.set_defaults(func=cmd_run)

    ctl = sub.add_parser("ctl", formatter_class=fmt,
                         help="control the daemon; search and reports also work with it stopped",
                         description="Talk to the running daemon over its control socket (status, scan, poll, "
                                     "reindex, forget), or read the index and state store directly "
                                     "(search, report, changed, explain: these work with the daemon stopped).",
                         epilog="examples:\n  indexerd ctl status\n  indexerd ctl search 'event loop' --limit 5")
    csub = ctl.add_subparsers(dest="ctl_command", metavar="CTL_COMMAND")
    csub.required = True

    s = csub.add_parser("status", parents=[common], formatter_class=fmt, help="what the daemon is doing",
                        epilog="example:\n  indexerd ctl status --json")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_status)

    for name, what in (("scan", "reconcile a filesystem source now"), ("crawl", "crawl a web source now"),
                       ("poll", "poll a SQL source now")):
        s = csub.add_parser(name, parents=[common], formatter_class=fmt, help=what,
                            epilog=f"example:\n  indexerd ctl {name} docs --wait")
        s.add_argument("name", metavar="NAME", help="the source's name")
        s.add_argument("--wait", action="store_true", help="wait until the pass ends and print its counts")
        s.set_defaults(func=cmd_scan)

    s = csub.add_parser("reindex", parents=[common], formatter_class=fmt, help="force re-indexing",
                        epilog="examples:\n  indexerd ctl reindex ~/docs/a.html\n  indexerd ctl reindex --source docs")
    s.add_argument("targets", nargs="*", metavar="PATH_OR_KEY")
    s.add_argument("--source", metavar="NAME", help="every document of this source")
    s.set_defaults(func=cmd_reindex)

    s = csub.add_parser("forget", parents=[common], formatter_class=fmt,
                        help="drop one document from the index and the store",
                        epilog="example:\n  indexerd ctl forget ~/docs/secret.txt")
    s.add_argument("key", help="a file path, URL or sql:<source>/<id> key")
    s.set_defaults(func=cmd_forget)

    s = csub.add_parser("search", parents=[common], formatter_class=fmt, help="search the index",
                        epilog="examples:\n  indexerd ctl search 'asyncio event loop'\n"
                               "  indexerd ctl search '\"GNU General Public License\"' --json\n"
                               "  indexerd ctl search 'title:sqlite3 OR cursor*' --since 2d")
    s.add_argument("query", help="Whoosh query: words (ANDed), \"phrases\", AND/OR/NOT, title:word, prefix*")
    s.add_argument("--limit", type=int, default=10, help="most hits to show (default 10)")
    s.add_argument("--since", metavar="SPEC",
                   help="only documents last modified in SPEC: 2d, 3h, 90m, 2024-01-31, FROM..TO (UTC)")
    s.add_argument("--json", action="store_true", help="print a JSON list of hits")
    s.set_defaults(func=cmd_search)

    s = csub.add_parser("report", parents=[common], formatter_class=fmt,
                        help="reports from the state store",
                        epilog="example:\n  indexerd ctl report --dates --json")
    s.add_argument("--dates", action="store_true", help="every document with its date and date source")
    s.add_argument("--source", metavar="NAME", help="only this source")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_report)

    s = csub.add_parser("changed", parents=[common], formatter_class=fmt,
                        help="documents whose last-modified falls in a time span",
                        epilog="examples:\n  indexerd ctl changed --since 2d\n"
                               "  indexerd ctl changed --since 2024-01-01..2024-02-01 --json")
    s.add_argument("--since", required=True, metavar="SPEC", help="2d, 3h, 90m, ISO date/datetime, FROM..TO")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_changed)

    s = csub.add_parser("explain", parents=[common], formatter_class=fmt,
                        help="why a document was (not) re-indexed",
                        epilog="examples:\n  indexerd ctl explain ~/docs/notes.txt\n"
                               "  indexerd ctl explain https://example.test/page.html --json")
    s.add_argument("key", help="a file path, URL or sql:<source>/<id> key")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_explain)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``indexerd`` console script; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    _setup_logging(args.log_level or "warning")
    try:
        return args.func(args)
    except IndexerdError as e:
        print(f"indexerd: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("indexerd: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
