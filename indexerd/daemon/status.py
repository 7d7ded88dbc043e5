"""What the daemon says about itself: the ``ctl status`` document, systemd's one-line
``STATUS=``, and the metrics seeded from the store at a start.

The document (``ctl status --json`` prints it as is; :func:`indexerd.output.terminal.print_status`
words it): ``pid``, ``uptime_seconds``, ``state_dir``, ``config``, ``reload`` (the last reload),
``sources`` (per source: ``kind``, ``root``, ``watched``, ``watch_error``, ``documents`` by
status, ``running``, ``current``, ``progress``, ``current_run``, ``last_run``, ``last_error``,
``next_run``), ``change_queue``, ``writer``, ``index``, ``counters`` and ``hosts`` (the
politeness state of every host a web source talks to; empty without web sources).
"""

from __future__ import annotations

import logging
import os
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from indexerd.core.dates import format_utc
from indexerd.core.errors import IndexerdError
from indexerd.core.plurals import counted
from indexerd.daemon.sourcestate import SourceState
from indexerd.sources.registry import shared_status

if TYPE_CHECKING:
    from indexerd.daemon.main import Daemon

log = logging.getLogger(__name__)
UTC = timezone.utc


def status_document(d: Daemon) -> dict:
    """The ``ctl status`` document (see the module docstring); safe from any thread."""
    w = d.indexer.current_writer
    try:
        with d.indexer.state.open_store() as store:
            counts = store.counts_by_source()
    except IndexerdError:
        counts = {}
    sources = {name: _source_status(d, name, src, counts.get(name, {})) for name, src in d.sources.items()}
    return {
        "pid": os.getpid(), "uptime_seconds": round((datetime.now(UTC) - d.started_at).total_seconds(), 1),
        "state_dir": str(d.indexer.state.path), "config": d.config_path,
        "reload": d.reloader.status(),
        "sources": sources, "change_queue": d.live.queued(), "changes_applying": d.live.applying(),
        "writer": {"queue": w.queue_depth() if w else 0, "commits": w.stats.commits if w else 0,
                   "last_commit": format_utc(w.stats.last_commit_at) if w else None,
                   "commit_errors": w.stats.commit_errors if w else 0,
                   "last_error": w.stats.last_error if w else None},
        "index": index_status(d.indexer.opened_index),
        "counters": d.indexer.counters.snapshot(),
        "hosts": shared_status(d.sources.values()).get("hosts", {}),
        "cluster": cluster_status(d)}


def cluster_status(d: Daemon) -> dict | None:
    """In a cluster (a shared store): this node's name, every node (alive, last heartbeat, what
    it works on), every host's lease (which node has a request in flight, the next-allowed time),
    the shared frontier per source and host (queued, done, ``node`` whose claim holds now,
    ``fetched_by``: the nodes that fetched its pages in the pass, with how many) and each web
    source's latest cluster pass (:func:`cluster_passes`); None on a single machine.  A store
    that cannot be read gives ``{"node", "error"}``."""
    if not d.indexer.state.shared:
        return None
    try:
        with d.indexer.state.open_cluster_store(readonly=True) as store:
            frontier, fetched = store.frontier_by_host(), store.frontier_fetched()
            by_host: dict[tuple[str, str], dict[str, int]] = {}
            for r in fetched:
                by_host.setdefault((r["source"], r["host"]), {})[r["node"]] = r["fetched"]
            for f in frontier:
                f["fetched_by"] = by_host.get((f["source"], f["host"]), {})
            return {"node": d.indexer.node, "nodes": store.nodes(), "hosts": store.host_leases(),
                    "frontier": frontier, "passes": cluster_passes(frontier, fetched)}
    except IndexerdError as e:
        return {"node": d.indexer.node, "error": str(e)}


def cluster_passes(frontier: list[dict], fetched: list[dict]) -> dict[str, dict]:
    """Each web source's latest pass the cluster crawled together, as every node shows it:
    ``{source: {pass_id, fetched, errors, done, queued, nodes: {node: {fetched, errors}}}}``:
    GET requests the servers answered (``fetched``) and requests without an answer
    (``errors``), for the pass and per node (each node's share: the shares add up to the
    totals), and the pass's URLs done and queued (summed over ``frontier``'s hosts).
    ``frontier``: :meth:`~indexerd.core.store.ClusterRows.frontier_by_host`'s rows;
    ``fetched``: :meth:`~indexerd.core.store.sharedfrontier.SharedFrontierRows.frontier_fetched`'s."""
    out: dict[str, dict] = {}
    for r in fetched:
        p = out.setdefault(r["source"], {"pass_id": r["pass_id"], "fetched": 0, "errors": 0, "done": 0,
                                         "queued": 0, "nodes": {}})
        share = p["nodes"].setdefault(r["node"], {"fetched": 0, "errors": 0})
        for what in ("fetched", "errors"):
            share[what] += r[what]
            p[what] += r[what]
    for f in frontier:
        p = out.setdefault(f["source"], {"pass_id": None, "fetched": 0, "errors": 0, "done": 0, "queued": 0,
                                         "nodes": {}})
        p["done"] += f["done"]
        p["queued"] += f["queued"]
    return out


def working_on(d: Daemon) -> str:
    """What this node does now, for its heartbeat (``ctl status`` on any node shows it)."""
    running = sorted(n for n, s in d.states.items() if s.running)
    return "passes of " + ", ".join(running) if running else "idle"


def _source_status(d: Daemon, name: str, src, documents: dict) -> dict:
    st = d.states.get(name) or SourceState()
    next_run = d.jobs.next_run(name)
    with d.lock:
        running = st.running
        cur = st.current.as_dict() if st.current else None
        prog = {"found": st.progress.found, "done": st.progress.done, "total": st.progress.total,
                "unit": st.progress.unit} if running and st.progress else None
        current_run = {"started": format_utc(st.current_started), "counts": cur, "progress": prog,
                       "error": st.current.last_error if st.current else None} if running else None
        latest = {"at": format_utc(st.latest_error[0]), "message": st.latest_error[1]} \
            if st.latest_error else None
        last_run = {"started": format_utc(st.last_started), "finished": format_utc(st.last_finished),
                    "counts": st.last_counts, "error": st.last_message}
        cluster_note = st.cluster_note
    return {
        "kind": src.kind, "root": src.status_facts()["root"], "watched": st.watched, "cluster": cluster_note,
        "watch_error": st.watch_error,
        "documents": documents, "running": running, "current": cur, "progress": prog,
        "current_run": current_run, "last_run": last_run, "last_error": latest,
        "next_run": format_utc(next_run) if next_run else None}


def index_status(ix) -> dict:
    """The index's status (engine, documents, bytes, segments: :meth:`SearchIndex.status`); a
    read that keeps failing is reported in ``error`` instead of failing the whole status.
    ``ix`` None (not open yet): every figure None."""
    if ix is None:
        return {"documents": None, "size_bytes": None, "segments": None}
    try:
        return ix.status()
    except IndexerdError as e:
        return {"engine": ix.engine, "documents": None, "size_bytes": None, "segments": None, "error": str(e)}


def status_line(d: Daemon) -> str:
    """systemd's one-line STATUS=: sources, watches, running passes with their progress (``docs
    1200/7473 files``, as ``ctl status`` counts them), a refused reload."""
    running = [_pass_progress(n, s) for n, s in d.states.items() if s.running]
    rl = d.reloader.info
    refused = (f"; RELOAD REFUSED at {format_utc(rl['at'])}, running on the old config: {rl['error']}"
               if rl["ok"] is False else "")
    failed = [f"{n} ({s.watch_error})" for n, s in d.states.items() if s.watch_error]
    return (f"{counted(len(d.sources), 'source')}, {sum(s.watched for s in d.states.values())} watched"
            + (f", NOT WATCHED: {', '.join(failed)}" if failed else "")
            + (f", reconciling {', '.join(running)}" if running else "") + refused)


def _pass_progress(name: str, st: SourceState) -> str:
    """``name`` and how far its running pass is: ``docs 1200/7473 files`` (read of found), or
    ``docs 340 files`` while the total is unknown (a crawl finds its pages as it goes)."""
    prog = st.progress
    if prog is None:
        return name
    if prog.total:
        return f"{name} {prog.done}/{prog.total} {prog.unit}"
    return f"{name} {max(prog.done, prog.found)} {prog.unit}" if (prog.done or prog.found) else name


def seed_metrics(d: Daemon) -> None:
    """Each source's last successful pass before this start, from the store."""
    try:
        with d.indexer.state.open_store(readonly=True) as store:
            runs = store.source_runs()
    except IndexerdError as e:
        log.debug("no run records for the metrics: %s", e)
        return
    for name, run in runs.items():
        if name in d.sources and run.get("completed_at") is not None:
            d.metrics.seed_last_success(name, run["completed_at"].timestamp())
