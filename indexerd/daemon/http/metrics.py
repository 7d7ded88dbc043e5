"""The daemon's metrics in the Prometheus text format, through ``prometheus_client``.

Two kinds:

- **observed** as they happen, histograms fed by the daemon: each pass's duration (its count
  is the number of passes), each index commit's latency, edit-to-searchable latency (a live
  file event to the commit that made the change searchable) and each query's time; and the time
  of each source's last successful pass;
- **read at scrape time** from the status document (``ctl status --json``) and the named
  counters: documents per source and status, queue lengths, the index's size, commits, and the
  counters as documents indexed / skipped / failed / deleted by reason, fetches by HTTP status
  and bytes downloaded (``web.fetch.<status>``, ``web.bytes``), plus every counter by name.

Each :class:`DaemonMetrics` has its own registry (never the process-global one), so several
daemons in one test process do not mix.  Thread safety: the ``observe_*`` methods may be called
from any thread (prometheus_client's metrics lock themselves); :meth:`render` too.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

#: decision reasons that mean "indexed" and "skipped" (:data:`indexerd.core.decide.REASONS`)
INDEX_REASONS = ("new", "no-stored-date", "newer-date", "content-changed", "refresh-due", "forced")
SKIP_REASONS = ("not-newer", "content-unchanged", "recently-indexed", "not-modified")

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_PASS_BUCKETS = (0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0)


class DaemonMetrics:
    """The registry of one daemon.

    Args:
        status: returns the status document (``ctl status --json``'s object); called at each
            scrape.
    """

    def __init__(self, status: Callable[[], dict]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.pass_seconds = Histogram(
            "indexerd_pass_duration_seconds", "Duration of each source pass (reconcile, crawl, poll).",
            ["source", "kind"], buckets=_PASS_BUCKETS, registry=self.registry)
        self.commit_seconds = Histogram(
            "indexerd_commit_seconds", "Latency of each index commit.", buckets=_LATENCY_BUCKETS,
            registry=self.registry)
        self.edit_to_searchable_seconds = Histogram(
            "indexerd_edit_to_searchable_seconds",
            "From a live file event to the commit that made the change searchable.",
            buckets=_LATENCY_BUCKETS, registry=self.registry)
        self.query_seconds = Histogram(
            "indexerd_query_seconds", "Time of each search through the daemon (control socket or HTTP).",
            ["via"], buckets=_LATENCY_BUCKETS, registry=self.registry)
        self.last_success = Gauge(
            "indexerd_last_successful_pass_timestamp_seconds",
            "When each source's last pass that did not fail ended (Unix time).", ["source"],
            registry=self.registry)
        self.registry.register(_StatusCollector(status))

    def observe_pass(self, source: str, kind: str, seconds: float, ok: bool, ended_at: float | None = None) -> None:
        """One pass of ``source`` ended after ``seconds``; ``ok``: it did not fail as a whole."""
        self.pass_seconds.labels(source=source, kind=kind).observe(seconds)
        if ok:
            self.last_success.labels(source=source).set(ended_at if ended_at is not None else time.time())

    def seed_last_success(self, source: str, ended_at: float) -> None:
        """The last successful pass recorded before this daemon started (Unix time)."""
        self.last_success.labels(source=source).set(ended_at)

    def forget_source(self, source: str) -> None:
        """Drop the per-source series of a source the config no longer names."""
        for metric in (self.last_success,):
            try:
                metric.remove(source)
            except KeyError:
                pass

    def render(self) -> bytes:
        """The text exposition format (``text/plain; version=0.0.4``)."""
        return generate_latest(self.registry)


class _StatusCollector:
    """Metric families read from the status document and the counters at each scrape."""

    def __init__(self, status: Callable[[], dict]) -> None:
        self._status = status

    def describe(self):
        return []            # families vary with the sources; collected at scrape time only

    def collect(self):
        st = self._status()
        docs = GaugeMetricFamily("indexerd_documents", "Documents in the state store by source and status.",
                                 labels=["source", "status"])
        running = GaugeMetricFamily("indexerd_source_running", "1 while a pass of the source runs.",
                                    labels=["source"])
        for name, src in sorted(st.get("sources", {}).items()):
            for status, n in sorted((src.get("documents") or {}).items()):
                docs.add_metric([name, status], n)
            running.add_metric([name], 1 if src.get("running") else 0)
        yield docs
        yield running
        yield _progress_family(st)
        yield _frontier_family(st)
        yield _cluster_pass_family(st)
        yield GaugeMetricFamily("indexerd_change_queue_length", "Live file changes waiting to be read.",
                                value=st.get("change_queue", 0))
        writer = st.get("writer") or {}
        yield GaugeMetricFamily("indexerd_writer_queue_length", "Operations waiting for the index writer.",
                                value=writer.get("queue", 0))
        yield CounterMetricFamily("indexerd_commits", "Index commits since the daemon started.",
                                  value=writer.get("commits", 0))
        yield CounterMetricFamily("indexerd_commit_errors", "Index commits that failed since the daemon started.",
                                  value=writer.get("commit_errors", 0))
        index = st.get("index") or {}
        for key, name, doc in (("documents", "indexerd_index_documents", "Documents in the search index."),
                               ("size_bytes", "indexerd_index_size_bytes", "Bytes of the search index on disk."),
                               ("segments", "indexerd_index_segments", "Segments of the search index.")):
            if index.get(key) is not None:
                yield GaugeMetricFamily(name, doc, value=index[key])
        if index.get("read_server"):
            lag = index.get("replica_lag_seconds")
            yield GaugeMetricFamily("indexerd_replica_up", "1 while the index's read replica answers "
                                    "(searches read it), 0 while searches read the primary.",
                                    value=0 if lag is None else 1)
            if lag is not None:
                yield GaugeMetricFamily("indexerd_replica_lag_seconds", "Seconds the index's read replica "
                                        "is behind its primary (0: it replayed all it received).", value=lag)
        yield GaugeMetricFamily("indexerd_uptime_seconds", "Seconds since the daemon started.",
                                value=st.get("uptime_seconds", 0))
        yield from _counter_families(st.get("counters") or {})


def _progress_family(st: dict) -> GaugeMetricFamily:
    """How far each running pass is (``ctl status``'s ``progress``): the items it found and
    read, and their total when known (a crawl finds its pages as it goes)."""
    fam = GaugeMetricFamily("indexerd_pass_progress", "Items of each running pass: found, done, and "
                            "the total when known (files, URLs or queue rows).", labels=["source", "what"])
    for name, src in sorted(st.get("sources", {}).items()):
        prog = src.get("progress") or {}
        for what in ("found", "done", "total"):
            if prog.get(what) is not None:
                fam.add_metric([name, what], prog[what])
    return fam


def _frontier_family(st: dict) -> GaugeMetricFamily:
    """In a cluster, the shared frontier of each web source's current pass per host (``ctl
    status``'s ``cluster.frontier``): URLs queued (waiting or in a node's frontier) and done."""
    fam = GaugeMetricFamily("indexerd_frontier_urls", "URLs of each web source's current pass in a "
                            "cluster, per host: queued and done.", labels=["source", "host", "state"])
    for row in (st.get("cluster") or {}).get("frontier") or []:
        for state in ("queued", "done"):
            fam.add_metric([row["source"], row["host"], state], row[state])
    return fam


def _cluster_pass_family(st: dict) -> GaugeMetricFamily:
    """In a cluster, each web source's latest cluster pass (``ctl status``'s
    ``cluster.passes``): the requests each node made that were answered (``fetched``) or not
    (``errors``), the same on every node (summed over ``node``: the pass's totals)."""
    fam = GaugeMetricFamily("indexerd_cluster_pass_requests", "GET requests of each web source's latest "
                            "cluster pass, per node: answered (fetched) and unanswered (errors).",
                            labels=["source", "node", "outcome"])
    for source, p in sorted(((st.get("cluster") or {}).get("passes") or {}).items()):
        for node, share in sorted(p["nodes"].items()):
            for outcome in ("fetched", "errors"):
                fam.add_metric([source, node, outcome], share[outcome])
    return fam


def _counter_families(counters: dict[str, int]):
    """The named counters as documents by outcome and reason, fetches, bytes, and all by name."""
    indexed = CounterMetricFamily("indexerd_documents_indexed", "Documents indexed, by decision reason.",
                                  labels=["reason"])
    skipped = CounterMetricFamily("indexerd_documents_skipped", "Documents not indexed, by reason.",
                                  labels=["reason"])
    failed = CounterMetricFamily("indexerd_documents_failed", "Documents that failed, by reason.",
                                 labels=["reason"])
    fetches = CounterMetricFamily("indexerd_fetches", "HTTP responses received by web sources, by status.",
                                  labels=["status"])
    every = CounterMetricFamily("indexerd_events", "Every named counter (ctl status 'counters').",
                                labels=["name"])
    deleted = downloaded = 0
    for name, n in counters.items():
        every.add_metric([name], n)
        group, _, reason = name.partition(".")
        if group == "decide" and reason in INDEX_REASONS:
            indexed.add_metric([reason], n)
        elif group == "decide" and reason in SKIP_REASONS:
            skipped.add_metric([reason], n)
        elif group == "decide" and reason == "gone":
            deleted += n
        elif group == "skip":
            skipped.add_metric([reason], n)
        elif group == "error":
            failed.add_metric([reason], n)
        elif name.startswith("web.fetch."):
            fetches.add_metric([name[len("web.fetch."):]], n)
        elif name == "web.bytes":
            downloaded = n
    yield from (indexed, skipped, failed, fetches, every)
    yield CounterMetricFamily("indexerd_documents_deleted", "Documents deleted (gone at their source).",
                              value=deleted)
    yield CounterMetricFamily("indexerd_downloaded_bytes", "Bytes of response bodies downloaded by web sources.",
                              value=downloaded)
