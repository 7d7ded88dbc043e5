"""The control commands the daemon answers: one handler per command, in :data:`COMMANDS`.

Each handler takes the daemon and the request (a dict whose field types
:func:`indexerd.daemon.control.request_problem` checked) and returns the reply's fields; it runs in
a control connection's thread.  An :class:`~indexerd.core.errors.IndexerdError` it raises becomes
the error reply with its exit code (a :class:`ConfigError`: 2, a failed pass: 1).

``scan``, ``poll`` and ``crawl`` ask for a pass of a source of the kind whose
:attr:`~indexerd.sources.registry.Kind.verb` they are; ``search``, ``report``, ``changed`` and
``explain`` read the open index and store (:mod:`indexerd.daemon.reads`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from indexerd.core.errors import ConfigError, DaemonNotRunning
from indexerd.pipeline.stages import PassCounts
from indexerd.daemon import reads
from indexerd.daemon.passes import PassFailed
from indexerd.daemon.status import status_document
from indexerd.sources.base import TreeSource
from indexerd.sources.registry import VERBS, key_file, of_kind
from indexerd.sources.registry import kind as kind_of

if TYPE_CHECKING:
    from indexerd.daemon.main import Daemon


def handle(d: Daemon, req: dict) -> dict:
    """Answer one control request.

    Raises:
        ConfigError: an unknown command, or what its handler raises.
    """
    handler = handler_of(str(req.get("cmd")))
    if handler is None:
        raise ConfigError(f"unknown control command {req.get('cmd')!r}")
    if req.get("cmd") not in reads.HANDLERS:  # a read answers other_state_dir itself
        own = str(d.indexer.state.path)
        if reads.other_state_dir(req, own) is not None:
            raise DaemonNotRunning(
                f"the indexerd answering on this control socket serves state dir {own}, not "
                f"{req['state_dir']}: it runs another config; give each config its own "
                "control_socket to run both")
    return handler(d, req)


def status(d: Daemon, req: dict) -> dict:
    """``ctl status``: :func:`indexerd.daemon.status.status_document`."""
    return status_document(d)


def reload(d: Daemon, req: dict) -> dict:
    """``ctl reload``: :meth:`Reloader.request` (waits for the main thread's reload)."""
    return d.reloader.request()


def run_pass(d: Daemon, req: dict, kind: str) -> dict:
    """``ctl scan|poll|crawl SOURCE [--wait] [--all]``: a pass of a source of ``kind`` now.

    Without ``wait`` the reply says whether it started or was queued behind a running pass; with
    it, the reply holds the pass's counts.  ``all``: that pass asks everything the source knows,
    conditionally (the source's ``recheck``; a pass running already is followed by one).

    Raises:
        ConfigError: no source of that kind has the name.
        PassFailed: ``wait`` and the pass failed or was interrupted.
    """
    name = req.get("source")
    if name not in of_kind(d.sources, kind):
        other = d.sources.get(name) if isinstance(name, str) else None
        hint = (f"; {name!r} is a {other.kind} source: `indexerd ctl {kind_of(other.kind).verb} {name}`"
                if other is not None else "")
        raise ConfigError(f"no {kind} source named {name!r} (configured {kind} sources: "
                          f"{', '.join(of_kind(d.sources, kind)) or 'none'}){hint}")
    if req.get("all"):
        with d.lock:
            d.states[name].recheck_asked = True
    if req.get("wait"):
        counts = d.passes.wait(name, fresh=bool(req.get("all")))
        d.passes.raise_if_failed([name])
        return {"source": name, "counts": counts}
    running = d.states[name].running
    d.jobs.run_soon({name})
    return {"source": name, "started": not running, "queued": running}


def reindex(d: Daemon, req: dict) -> dict:
    """``ctl reindex``: a forced pass of one source or all, or the named targets read again now
    (:func:`indexerd.runtime.verbs.reindex`).

    Raises:
        ConfigError: an unknown source, nothing named, a bad target (exit 2).
        PassFailed: a pass failed, was interrupted, or its source was removed meanwhile (exit 1).
        UnknownKey: a target is not known (exit 1).
    """
    targets = req.get("targets") or []
    name = req.get("source")
    if name is not None and name not in d.sources:
        raise ConfigError(f"no source named {name!r} (configured: {', '.join(sorted(d.sources)) or 'none'})")
    if not (targets or name or req.get("all")):
        raise ConfigError("reindex: name targets, a source, or all (a forced pass of every source)")
    counts = PassCounts()
    if not targets:
        names = [name] if name else list(d.sources)
        for n in names:
            c = d.passes.wait(n, forced=True)  # in a cluster: this node's part of the pass
            if c:
                counts.add(PassCounts(**c))
        gone = [n for n in names if n not in d.sources]
        if gone:
            raise PassFailed(f"source {', '.join(gone)} was removed by a reload while its pass ran: "
                             f"the pass was cancelled and the source forgotten")
        d.passes.raise_if_failed(names)
        return {"counts": counts.as_dict()}
    from indexerd.runtime import verbs

    try:
        with d.passes.pipeline() as pipeline:
            verbs.reindex(d.sources, targets, pipeline, counts, confined_path=partial(confined_path, d),
                             cancel=d.stop_event)
    finally:  # an unknown key fails the request after the other targets were read: commit them
        d.indexer.flush(timeout=60)
    if d.stop_event.is_set():  # a request in flight was cut: not every target was read
        raise PassFailed(f"reindex interrupted: the daemon is stopping; what was read is committed "
                         f"({counts.indexed} indexed), the rest was not read: ask again after the start")
    return {"counts": counts.as_dict()}


def forget(d: Daemon, req: dict) -> dict:
    """``ctl forget KEY``: :func:`indexerd.runtime.verbs.forget`, committed before the reply."""
    from indexerd.runtime import verbs

    with d.passes.pipeline() as pipeline:
        key = verbs.forget(d.sources, req.get("key") or "", pipeline)
    d.indexer.flush(timeout=60)
    return {"forgotten": key}


def confined_path(d: Daemon, target: str) -> tuple[TreeSource, str]:
    """A ``file:`` key or an absolute path from the control socket -> its source and the path
    to read, confined to the source (:meth:`TreeSource.confine`).

    Raises:
        ConfigError: not a file key or absolute path, not inside any tree source, or refused by
            the source (``..``, a symlink the source does not follow).
    """
    try:
        path = key_file(target) or target   # a local file's key, else a path
    except ValueError as e:
        raise ConfigError(f"{target}: {e}") from None
    if not os.path.isabs(path):
        raise ConfigError(f"{target}: not an absolute path (the CLI sends real paths)")
    src = d.live.source_for(path)
    if src is None:
        raise ConfigError(f"{target}: not inside any configured source")
    try:
        return src, src.confine(path)
    except ValueError as e:
        raise ConfigError(f"{target}: refused: {e}") from None


#: command -> handler(daemon, request) -> reply fields
COMMANDS: dict[str, Callable[[Daemon, dict], dict]] = {
    "status": status,
    "reload": reload,
    "reindex": reindex,
    "forget": forget,
    **{verb: partial(run_pass, kind=kind) for verb, kind in VERBS.items()},
    **reads.HANDLERS,
}


def handler_of(cmd: str) -> Callable[[Daemon, dict], dict] | None:
    """The handler of the control command ``cmd`` (:data:`COMMANDS`, or the verb of a kind
    registered after this module was imported: :func:`indexerd.sources.registry.register`),
    or None: no such command."""
    handler = COMMANDS.get(cmd)
    if handler is None and cmd in VERBS:
        handler = partial(run_pass, kind=VERBS[cmd])
    return handler
