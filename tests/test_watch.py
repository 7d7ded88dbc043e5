"""The change queue of the file watcher (indexerd.sources.files.watch): pure timing, no files."""

from __future__ import annotations

import time

import pytest


# -- issue 18: one file that keeps changing --------------------------------------------------------
@pytest.mark.alone  # a wall-clock bound (1.3 s)
def test_change_queue_rate_limits_one_path_without_delaying_others():
    """A token bucket per path: 3 takes in a burst, then one per interval; another path is
    due at once meanwhile; the busy path's last event is still taken."""
    from indexerd.sources.files.watch import ChangeQueue

    q = ChangeQueue(max_delay_seconds=0.05, hot_after=3, hot_interval_seconds=1.0)
    taken: list[tuple[float, str]] = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3.0:
        q.put("s", "/t/log", False, 0.01)  # a content event (debounced)
        for c in q.take_due(timeout=0.02):
            taken.append((time.monotonic() - t0, c.path))
    logs = [t for t, p in taken if p == "/t/log"]
    assert 3 + 2 <= len(logs) <= 3 + 4, logs  # the burst, then about one per second
    q.put("s", "/t/log", False, 0.01)  # one more change of the busy path: pending, not dropped
    q.put("s", "/t/other", False, 0.0)
    t1 = time.monotonic()
    got = q.take_due(timeout=0.1)
    assert "/t/other" in [c.path for c in got]  # not held back by the busy path
    while "/t/log" not in [c.path for c in got] and time.monotonic() - t1 < 2.0:
        got = q.take_due(timeout=0.1)
    assert "/t/log" in [c.path for c in got]
    assert time.monotonic() - t1 <= 1.3  # within one interval
    q.put("s", "/t/log", False, 0.0)  # a deletion or a move of the busy path is not held back
    assert [c.path for c in q.take_due(timeout=0.1)] == ["/t/log"]
