"""The status document's figures as metric families (the daemon's ``/metrics``): a running pass's
progress and a cluster's frontier per host, read from what ``ctl status`` already holds (no scan
of the store at a scrape)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from indexerd.daemon.http.metrics import DaemonMetrics


def samples(doc: dict) -> dict:
    text = DaemonMetrics(lambda: doc).render().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_a_running_pass_and_a_clusters_frontier_are_exported() -> None:
    doc = {"sources": {"site": {"documents": {"indexed": 7}, "running": True,
                                "progress": {"found": 40, "done": 12, "total": None, "unit": "URLs"}},
                       "docs": {"documents": {"indexed": 3}, "running": False, "progress": None}},
           "cluster": {"node": "n1", "frontier": [{"source": "site", "host": "http://a", "queued": 5, "done": 9,
                                                   "node": "n1"}]}}
    got = samples(doc)
    assert got[("indexerd_pass_progress", (("source", "site"), ("what", "found")))] == 40
    assert got[("indexerd_pass_progress", (("source", "site"), ("what", "done")))] == 12
    assert ("indexerd_pass_progress", (("source", "site"), ("what", "total"))) not in got  # not known yet
    assert not any(k[0] == "indexerd_pass_progress" and ("source", "docs") in k[1] for k in got)
    assert got[("indexerd_frontier_urls", (("host", "http://a"), ("source", "site"), ("state", "queued")))] == 5
    assert got[("indexerd_frontier_urls", (("host", "http://a"), ("source", "site"), ("state", "done")))] == 9
    assert got[("indexerd_documents", (("source", "site"), ("status", "indexed")))] == 7


def test_a_cluster_passs_requests_are_exported_per_node() -> None:
    """Issue 30: every node's ``/metrics`` holds the cluster pass's figures (ctl status's
    ``cluster.passes``), each node's share a series, so summing over ``node`` gives the pass's
    totals whichever node is scraped."""
    doc = {"sources": {}, "cluster": {"node": "n1", "frontier": [], "passes": {"site": {
        "pass_id": 4, "fetched": 11, "errors": 2, "done": 11, "queued": 0,
        "nodes": {"n1": {"fetched": 3, "errors": 0}, "n2": {"fetched": 8, "errors": 2}}}}}}
    got = samples(doc)
    fam = "indexerd_cluster_pass_requests"
    assert {k[1]: v for k, v in got.items() if k[0] == fam} == {
        (("node", "n1"), ("outcome", "fetched"), ("source", "site")): 3,
        (("node", "n1"), ("outcome", "errors"), ("source", "site")): 0,
        (("node", "n2"), ("outcome", "fetched"), ("source", "site")): 8,
        (("node", "n2"), ("outcome", "errors"), ("source", "site")): 2}
