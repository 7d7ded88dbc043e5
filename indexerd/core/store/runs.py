"""Source rows: each source's last pass and a pass under way (``source_runs``), and what the store
holds of a source as a whole (known sources, forgetting a removed one).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from indexerd.core.store.connection import StoreConnection
from indexerd.core.store.values import from_db_time, prefix_range, to_db_time

__all__ = ["SourceRuns"]


class SourceRuns(StoreConnection):
    """The ``source_runs`` table, and the source-wide reads and deletions."""

    def source_runs(self) -> dict[str, dict]:
        """Last run of each source: ``{source: {kind, started_at, finished_at, counts, completed_at,
        running_since, node}}`` (aware UTC or None; ``running_since`` set: a pass started and never
        ended, it was interrupted; ``node``: the cluster node that ran it, None on one machine)."""
        out = {}
        for row in self._db.execute("SELECT * FROM source_runs"):
            out[row["source"]] = {"kind": row["kind"], "started_at": from_db_time(row["started_at"]),
                                  "finished_at": from_db_time(row["finished_at"]),
                                  "counts": json.loads(row["counts"] or "{}"),
                                  "completed_at": from_db_time(row["completed_at"]),
                                  "running_since": from_db_time(row["running_since"]),
                                  "node": row["node"]}
        return out

    def known_sources(self) -> set[str]:
        """Every source name the store holds anything of (documents, crawl rows, run records):
        the documents' from their counts (``document_counts``), the crawl's by a loose index
        scan of its primary key (one index seek per source, the next name after the last one
        found), so the cost is the number of sources, not of rows."""
        cur = self._db.execute(
            "WITH RECURSIVE c(source) AS (SELECT min(source) FROM crawl UNION ALL "
            "SELECT (SELECT min(source) FROM crawl WHERE crawl.source > c.source) FROM c WHERE c.source IS NOT NULL) "
            "SELECT source FROM c WHERE source IS NOT NULL "
            "UNION SELECT source FROM document_counts GROUP BY source HAVING sum(n) != 0 "
            "UNION SELECT source FROM source_runs")
        return {r[0] for r in cur}

    def pass_started(self, source: str, kind: str, started_at: datetime, node: str | None = None) -> None:
        """Mark a pass of ``source`` as running (cleared by :meth:`record_run`; still set at the
        next start means it was interrupted) on ``node`` (a cluster's node name, else None)."""
        self._exec_many("INSERT INTO source_runs(source, kind, running_since, node) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT(source) DO UPDATE SET kind=excluded.kind, running_since=excluded.running_since, "
                        "node=excluded.node", [(source, kind, to_db_time(started_at), node)])

    def record_run(self, source: str, kind: str, started_at: datetime, finished_at: datetime | None,
                   counts: dict, *, completed: bool = True) -> None:
        """Remember the last pass of a source (for ``ctl status``) and clear its running mark;
        ``completed`` (it ran to its end and did not fail) also makes ``finished_at`` the time
        the next interval counts from."""
        self._exec_many("INSERT INTO source_runs(source, kind, started_at, finished_at, counts, completed_at) "
                        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(source) DO UPDATE SET kind=excluded.kind, "
                        "started_at=excluded.started_at, finished_at=excluded.finished_at, "
                        "counts=excluded.counts, running_since=NULL, "
                        "completed_at=coalesce(excluded.completed_at, source_runs.completed_at)",
                        [(source, kind, to_db_time(started_at), to_db_time(finished_at), json.dumps(counts),
                          to_db_time(finished_at) if completed else None)])

    def forget_source(self, source: str, meta_prefixes: Sequence[str]) -> None:
        """Forget everything but the document rows of a removed source, in one transaction: its
        frontier and seen set, its run record, and its meta values whose keys start with one of
        ``meta_prefixes`` (its kind's: ``sql:<source>:``, a SQL source's full-load mark).
        Document rows go through the writer first."""
        ranges = [prefix_range(p) for p in meta_prefixes]
        self._transaction([("DELETE FROM crawl WHERE source = ?", [(source,)]),
                           ("DELETE FROM crawl_requisites WHERE source = ?", [(source,)]),
                           ("DELETE FROM source_runs WHERE source = ?", [(source,)]),
                           *([("DELETE FROM meta WHERE key >= ? AND key < ?", ranges)] if ranges else [])])
