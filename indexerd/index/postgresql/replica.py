"""Searches on a read replica (``[index.postgresql] read_url``): how far behind it is
(whether it is taken for reads now is :class:`indexerd.core.replica.ReplicaHealth`'s).

Outside contract relied on (PostgreSQL 15, "Hot Standby" and "Monitoring" in its manual): a
streaming-replication standby answers read-only queries on the data it has *replayed*;
``pg_is_in_recovery()`` is true on a standby; ``pg_last_wal_receive_lsn()`` is the WAL it has
received from the primary and ``pg_last_wal_replay_lsn()`` the WAL it has replayed (both NULL on
a primary); ``pg_last_xact_replay_timestamp()`` is the primary's commit time of the last
transaction replayed (NULL until one is, after the standby starts).  So a standby that has
replayed all it received shows the primary as of then; one that has received more than it
replayed is behind by at least ``now() - pg_last_xact_replay_timestamp()``: the commits after
that one are not visible yet.  WAL the primary wrote but has not yet sent is not seen here (on
a loopback or LAN link that is milliseconds).
"""

from __future__ import annotations

__all__ = ["LAG_SQL", "lag_seconds"]

#: One statement on the replica: in recovery?, received more than replayed?, seconds since the
#: last replayed commit (since the standby started when none was replayed yet).
LAG_SQL = ("SELECT pg_is_in_recovery(), "
           "coalesce(pg_last_wal_receive_lsn() > pg_last_wal_replay_lsn(), false), "
           "extract(epoch FROM now() - coalesce(pg_last_xact_replay_timestamp(), "
           "pg_postmaster_start_time()))::float8")


def lag_seconds(in_recovery: bool, behind: bool, since_replay_seconds: float | None) -> float:
    """How far behind its primary a replica is, in seconds, from :data:`LAG_SQL`'s row: 0.0
    when it is no standby (promoted, or ``read_url`` names a primary) or has replayed all the
    WAL it received; else the age of the last replayed commit (at least 0.0)."""
    if not in_recovery or not behind or since_replay_seconds is None:
        return 0.0
    return max(0.0, float(since_replay_seconds))
