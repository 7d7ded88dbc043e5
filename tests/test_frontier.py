"""The frontier's end of a pass (indexerd/sources/web/frontier.py): when ``take`` answers None."""

from __future__ import annotations

import threading

from indexerd.sources.web.frontier import Frontier, Task
from indexerd.sources.web.politeness import HostSlots
from indexerd.sources.web.robots import RobotsCache

HOST = "http://site.test:80"


def _take_within(frontier: Frontier, seconds: float) -> list:
    """What :meth:`Frontier.take` answered within ``seconds`` (``[]``: it was still waiting; the
    frontier is then stopped so the thread ends)."""
    answer: list = []
    t = threading.Thread(target=lambda: answer.append(frontier.take()), daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        frontier.stop()
        t.join(5)
        return []
    return answer


def test_a_shared_pass_let_go_ends_though_urls_of_hosts_no_longer_held_wait() -> None:
    """A node whose cluster pass was let go (over for the cluster, or its page budget spent and
    its hosts left for the next pass) still holding queued URLs of a host it no longer holds:
    the pass ends.  Its fence stays shut (no claim is renewed after the hold is let go), and a
    web test hung for 20 minutes in ``take``, a worker waiting 0.25 s at a time, under load."""
    frontier = Frontier("breadth", HostSlots(), RobotsCache(), budget=10)
    frontier.fence = lambda host: False   # the claim on HOST is no longer known to hold
    frontier.hold()
    frontier.put(Task(url=HOST + "/a", host=HOST))
    frontier.let_go()
    assert _take_within(frontier, 2.0) == [None]


def test_a_held_pass_keeps_waiting_for_a_fenced_host() -> None:
    """While the pass is held the fenced host may be confirmed again: ``take`` waits."""
    frontier = Frontier("breadth", HostSlots(), RobotsCache(), budget=10)
    frontier.fence = lambda host: False
    frontier.hold()
    frontier.put(Task(url=HOST + "/a", host=HOST))
    assert _take_within(frontier, 0.6) == []
