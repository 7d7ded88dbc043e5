"""The command line: parse, call one function, map errors to a message and an exit code.

Exit codes, for every command: 0 success (also no search results, and documents skipped or
failed inside a pass, which the summary reports); 1 the command failed (for ``indexerd index``:
also a source that failed its whole pass); 2 bad usage, bad config
or a malformed query; 3 the daemon is needed and not running; 4 another indexerd process holds
the state dir.

Heavy libraries (the index engine, requests, APScheduler) are imported only by the commands that use them.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable
from typing import NoReturn

from indexerd import __version__
from indexerd.core.errors import IndexerdError
from indexerd.index import engines as _engines  # noqa: F401  (registers the index engines with the config)
from indexerd.sources import registry as _registry  # noqa: F401  (registers the kinds of source with the config)
from indexerd.cli.logformat import SafeLogFormatter, is_journal_stream
from indexerd.output.terminal import safe

log = logging.getLogger("indexerd")


def _ctl(name: str) -> Callable[[argparse.Namespace], int]:
    """The ``ctl`` command ``name`` of :mod:`indexerd.cli.ctl`, imported when it runs (the other
    commands start without it)."""
    def run(args: argparse.Namespace) -> int:
        from indexerd.cli import ctl

        return getattr(ctl, name)(args)
    return run


def _check_config(args: argparse.Namespace) -> int:
    """``indexerd check-config`` (:mod:`indexerd.cli.checkconfig`, imported when it runs)."""
    from indexerd.cli.checkconfig import cmd_check_config

    return cmd_check_config(args)


def _setup_logging(level: str) -> None:
    # journald stamps each line itself: under systemd a second timestamp is noise
    fmt = "%(levelname)s %(name)s: %(message)s"
    try:
        journal = is_journal_stream(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # stderr replaced by an object without a descriptor
        journal = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(SafeLogFormatter(fmt if journal else "%(asctime)s " + fmt))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler])


def _load(args, *, required: bool = False):
    from indexerd.config import load_config

    return load_config(getattr(args, "config", None), required=required)


def _with_the_state_dirs_engine(cfg):
    """``cfg`` itself, or, when no config file was read (``indexerd index PATH`` alone), ``cfg``
    with the engine of the index already in its state dir: without a config nobody asked for
    another engine, and a rebuild would drop the documents of ad-hoc trees no pass reads again."""
    from msgspec import structs

    from indexerd.config import DEFAULTS_ORIGIN, resolve_state_dir
    from indexerd.index import read_identity
    from indexerd.index.base import ENGINES

    if cfg.origin != DEFAULTS_ORIGIN:
        return cfg
    found = read_identity(resolve_state_dir(cfg))
    if found is None or found.engine == cfg.index.engine or found.engine not in ENGINES:
        return cfg
    return structs.replace(cfg, index=structs.replace(cfg.index, engine=found.engine))


# -- commands -------------------------------------------------------------------------------
def cmd_index(args) -> int:
    from indexerd.runtime import removal
    from indexerd.runtime.indexer import Indexer

    cfg = _with_the_state_dirs_engine(_load(args))
    if not args.paths and not any(getattr(cfg.sources, k) for k in _registry.KINDS):
        tables = [f"[[sources.{k}]]" for k in _registry.KINDS]
        raise _usage(f"nothing to index: give PATH arguments or configure {', '.join(tables[:-1])} "
                     f"or {tables[-1]} (config: {cfg.origin})")
    ix = Indexer(cfg)
    ix.open("index", rebuild=args.rebuild)
    # SIGINT/SIGTERM end the pass early (requests cut, SQL interrupted), commit what is done and
    # exit 128 + the signal; a second signal is not caught
    cancel, caught = threading.Event(), []

    def on_signal(signum, frame):
        caught.append(signum)
        cancel.set()
        signal.signal(signum, signal.SIG_DFL)

    old_handlers = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if not args.paths:  # the configured sources are the truth: forget removed ones first
            removal.forget_sources(ix.pipeline, removal.removed_sources(ix), cancel=cancel)
        summary = ix.run_pass(args.source or None, args.paths or None, forced=args.force, cancel=cancel,
                              recheck=args.recheck)
    finally:
        ix.close()
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
    if caught:
        print(f"indexerd: interrupted by {signal.Signals(caught[0]).name}: what was read is committed, "
              f"the rest resumes at the next run", file=sys.stderr)
        return 128 + caught[0]
    d = summary.as_dict()
    if args.json:
        print(json.dumps(d, ensure_ascii=True))
    else:
        print(f"seen {d['seen']}, indexed {d['indexed']}, unchanged {d['unchanged']}, "
              f"deleted {d['deleted']}, skipped {d['skipped']}, errors {d['errors']} "
              f"in {d['elapsed_seconds']:.2f} s (state dir {ix.state.path})")
    # a source that failed its whole pass (missing root, failed statement, no site reachable)
    # makes the command fail, so cron and monitoring can tell; its documents are kept
    failed = {n: c.failed for n, c in summary.sources.items() if c.failed}
    for name, why in failed.items():
        print(f"indexerd: source {name}: the pass failed: {why}", file=sys.stderr)
    return 1 if failed else 0


def cmd_run(args) -> int:
    from indexerd.config import load_config
    from indexerd.daemon.main import run_daemon

    config = getattr(args, "config", None)
    level = getattr(args, "log_level", None) or load_config(config).log_level
    logging.getLogger().setLevel(getattr(logging, level.upper(), logging.INFO))
    return run_daemon(config)


# -- parser ---------------------------------------------------------------------------------
class _UsageError(IndexerdError):
    exit_code = 2


def _usage(msg: str) -> _UsageError:
    return _UsageError(msg)


def _common_options() -> argparse.ArgumentParser:
    """``-c`` and ``--log-level``, accepted before and after any (sub)command.

    Their default is SUPPRESS, so a level that does not see the option sets nothing and cannot
    overwrite what another level parsed (``indexerd -c X ctl status`` keeps X); readers use
    ``getattr(args, "config", None)``.
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-c", "--config", metavar="PATH", default=argparse.SUPPRESS,
                        help="config file (default: $INDEXERD_CONFIG, else /etc/indexerd/indexerd.toml); "
                             "may come before or after the command")
    common.add_argument("--log-level", default=argparse.SUPPRESS, type=str.lower,
                        choices=("debug", "info", "warning", "error", "critical"),
                        help="debug, info, warning, error or critical (default: for run, the config's "
                             "log_level, itself info by default; for the other commands, warning)")
    return common


_SOURCES_TEXT = "local trees, web sites and SQL change queues"


def _parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    common = _common_options()

    p = argparse.ArgumentParser(prog="indexerd", formatter_class=fmt, parents=[common],
                                description=f"Keep a full-text index of {_SOURCES_TEXT} current, and "
                                            "search it.",
                                epilog="examples:\n  indexerd index ~/docs && indexerd ctl search 'event loop'\n"
                                       "  indexerd run -c /etc/indexerd/indexerd.toml\n"
                                       "  indexerd -c /etc/indexerd/indexerd.toml ctl status")
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
    s.add_argument("--recheck", action="store_true",
                   help="web sources: ask every known page now with its validators (If-None-Match / "
                        "If-Modified-Since), whatever adaptive recrawl scheduled (as `ctl crawl NAME --all`)")
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
    s.set_defaults(func=_check_config)

    s = sub.add_parser("run", parents=[common], formatter_class=fmt,
                       help="run the daemon in the foreground (systemd Type=notify)",
                       epilog="example:\n  indexerd run -c /etc/indexerd/indexerd.toml --log-level info")
    s.set_defaults(func=cmd_run)

    ctl = sub.add_parser("ctl", parents=[common], formatter_class=fmt,
                         help="control the daemon; search and reports also work with it stopped",
                         description=f"Talk to the running daemon over its control socket (status, reload, "
                                     f"scan a tree, crawl a web site, poll a SQL source, reindex, forget), "
                                     f"or read the index and state store of {_SOURCES_TEXT} directly "
                                     f"(search, report, changed, explain: these work with the daemon "
                                     f"stopped).\n\n"
                                     f"The daemon is found even when the config file is broken now (only "
                                     f"control_socket and state_dir are read from it); without "
                                     f"control_socket, the first that answers of: "
                                     f"$RUNTIME_DIRECTORY/indexerd.sock (under systemd); for root "
                                     f"/run/indexerd/indexerd.sock; for other users "
                                     f"<state_dir>/indexerd.sock, then /run/indexerd/indexerd.sock.",
                         epilog="examples:\n  indexerd ctl status\n  indexerd ctl crawl intranet --wait\n"
                                "  indexerd ctl search 'event loop' --limit 5")
    csub = ctl.add_subparsers(dest="ctl_command", metavar="CTL_COMMAND")
    csub.required = True

    s = csub.add_parser("status", parents=[common], formatter_class=fmt,
                        help="what the daemon is doing: per source documents, running pass, last run, "
                             "last error, next run; the last reload",
                        epilog="example:\n  indexerd ctl status --json")
    s.add_argument("--json", action="store_true",
                   help="print the whole status as one JSON object (the fields are listed in the README)")
    s.set_defaults(func=_ctl("cmd_status"))

    s = csub.add_parser("reload", parents=[common], formatter_class=fmt,
                        help="re-read the config file now and wait for the outcome (exit 2 if refused)",
                        epilog="example:\n  indexerd ctl reload   # what `systemctl reload indexerd` runs")
    s.set_defaults(func=_ctl("cmd_reload"))

    for k in _registry.KINDS.values():  # each kind's verb asking the daemon for a pass
        s = csub.add_parser(k.verb, parents=[common], formatter_class=fmt, help=k.verb_help,
                            epilog=f"example:\n  indexerd ctl {k.verb} {k.verb_example} --wait")
        s.add_argument("name", metavar="NAME", help="the source's name")
        s.add_argument("--wait", action="store_true", help="wait until the pass ends and print its counts")
        if k.recheck_help:
            s.add_argument("--all", action="store_true", help=k.recheck_help)
        s.set_defaults(func=_ctl("cmd_scan"))

    s = csub.add_parser("reindex", parents=[common], formatter_class=fmt,
                        help="re-read documents now and index them whatever the decision would say",
                        description="Re-read each document now (a file, a web page by an unconditional GET "
                                    "through robots.txt and the politeness slot, a SQL row by its id) and "
                                    "index it even if unchanged; or, with --source, every document of a "
                                    "source (a forced pass); or, with --all, every document of every "
                                    "source. Without a target, --source or --all it exits 2.",
                        epilog="examples:\n" + "".join(f"  indexerd ctl reindex {k.key_example}\n"
                                                       for k in _registry.KINDS.values() if k.key_example)
                               + "  indexerd ctl reindex --source docs\n  indexerd ctl reindex --all")
    s.add_argument("targets", nargs="*", metavar="PATH_OR_KEY", help=_registry.key_forms())
    s.add_argument("--source", metavar="NAME", help="every document of this source")
    s.add_argument("--all", action="store_true",
                   help="every document of every source (a forced full pass of each: every site is "
                        "crawled again)")
    s.set_defaults(func=_ctl("cmd_reindex"))

    s = csub.add_parser("forget", parents=[common], formatter_class=fmt,
                        help="drop one document from the index and the store now",
                        description="Drop one document from the index and the store now. It comes back "
                                    "at its source's next pass if it still exists there (a file at the "
                                    "next scan, a page at the next crawl, a SQL row at the next poll). "
                                    "An unknown key exits 1, as for explain.",
                        epilog="example:\n  indexerd ctl forget ~/docs/secret.txt")
    s.add_argument("key", help=_registry.key_forms())
    s.set_defaults(func=_ctl("cmd_forget"))

    s = csub.add_parser("search", parents=[common], formatter_class=fmt, help="search the index",
                        epilog="examples:\n  indexerd ctl search 'asyncio event loop'\n"
                               "  indexerd ctl search '\"GNU General Public License\"' --json\n"
                               "  indexerd ctl search 'title:sqlite3 OR cursor*' --since 2d\n"
                               "  indexerd ctl search 'size:>100k last_modified:2024-01..2024-03' --sort date\n"
                               "exit 5: nothing matched while a rebuild or a first pass runs (stderr says how far)")
    s.add_argument("query", help="query: words (ANDed), \"phrases\", AND/OR/NOT, title:word, prefix*")
    s.add_argument("--limit", type=int, default=10, help="most hits to show (default 10)")
    s.add_argument("--since", metavar="SPEC",
                   help="only documents last modified in SPEC: 2d, 3h, 90m, 2024-01-31, FROM..TO (UTC)")
    s.add_argument("--sort", choices=("relevance", "date"), default="relevance",
                   help="best match first (default), or newest last_modified first")
    s.add_argument("--json", action="store_true", help="print a JSON list of hits")
    s.set_defaults(func=_ctl("cmd_search"))
    _search_error = s.error

    def search_error(message: str) -> NoReturn:  # `-draft` read as an option: no query left
        if "required: query" in message:
            message += f"; {DASH_QUERY_HINT}"
        _search_error(message)

    s.error = search_error  # type: ignore[method-assign]

    s = csub.add_parser("report", parents=[common], formatter_class=fmt,
                        help="reports from the state store (choose one: --dates, --skipped)",
                        description="Reports from the state store. Choose the report with a flag: "
                                    "--dates or --skipped. Without a flag the command exits 2.",
                        epilog="examples:\n  indexerd ctl report --dates\n  indexerd ctl report --dates "
                               "--source docs --json\n  indexerd ctl report --skipped")
    s.add_argument("--dates", action="store_true",
                   help="every document with its last-modified date, where the date came from "
                        "(date source) and when it was indexed")
    s.add_argument("--skipped", action="store_true",
                   help="every document skipped or failed, with its reason (binary, "
                        "unsupported-type, too-large, parse-error, timeout ...) and detail")
    s.add_argument("--source", metavar="NAME", help="only this source")
    s.add_argument("--json", action="store_true", help="print a JSON list of rows")
    s.set_defaults(func=_ctl("cmd_report"))

    s = csub.add_parser("changed", parents=[common], formatter_class=fmt,
                        help="documents whose last-modified falls in a time span",
                        epilog="examples:\n  indexerd ctl changed --since 2d\n"
                               "  indexerd ctl changed --since 2024-01-01..2024-02-01 --json")
    s.add_argument("--since", required=True, metavar="SPEC", help="2d, 3h, 90m, ISO date/datetime, FROM..TO")
    s.add_argument("--json", action="store_true", help="print a JSON list of rows")
    s.set_defaults(func=_ctl("cmd_changed"))

    s = csub.add_parser("explain", parents=[common], formatter_class=fmt,
                        help="why a document was (not) re-indexed (an unknown key exits 1)",
                        epilog="examples:\n  indexerd ctl explain ~/docs/notes.txt\n"
                               "  indexerd ctl explain https://example.test/page.html --json")
    s.add_argument("key", help=_registry.key_forms())
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=_ctl("cmd_explain"))
    return p


def _mark_leaves(parser: argparse.ArgumentParser) -> None:
    """Give every command's parser to its parsed arguments (``_leaf``), so an unknown option is
    reported with that command's usage, not the top level's."""
    for action in parser._actions:  # argparse keeps subcommands there (no public accessor)
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.set_defaults(_leaf=child)
                _mark_leaves(child)


#: how to search for a query that starts with ``-`` (argparse reads ``-draft`` as an option)
DASH_QUERY_HINT = ("a query starting with '-' goes after '--', every option before it: "
                   "indexerd ctl search -c CONFIG -- '-draft'")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``indexerd`` console script; returns the exit code."""
    parser = _parser()
    _mark_leaves(parser)
    args, extras = parser.parse_known_args(argv)
    if extras:
        leaf = getattr(args, "_leaf", None) or parser
        hint = ""
        verb = getattr(args, "ctl_command", None)
        rechecks = [k.verb for k in _registry.KINDS.values() if k.recheck_help]
        if "--all" in extras and verb in _registry.VERBS and verb not in rechecks and rechecks:
            hint = f" (--all is ctl {' and ctl '.join(rechecks)}'s: everything a source knows asked now)"
        if verb == "search" and "--" in (argv if argv is not None else sys.argv[1:]):
            hint = f" (after '--' every word is the query's: {DASH_QUERY_HINT})"
        leaf.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
    _setup_logging(getattr(args, "log_level", None) or "warning")
    try:
        return args.func(args)
    except IndexerdError as e:
        print(f"indexerd: {safe(e)}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("indexerd: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
