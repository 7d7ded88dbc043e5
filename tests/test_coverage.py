"""What the index holds of its sources (indexerd/daemon/coverage.py) and which pass after a
rebuild must read everything again (indexerd/runtime/recovery.py; issue 34): pure functions."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from indexerd.core.progress import Progress
from indexerd.runtime.recovery import rebuild_pending
from indexerd.daemon.coverage import FIRST_PASS, REBUILD, coverage, incomplete_sources

T = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
H = timedelta(hours=1)


def _run(completed=None, started=None, running_since=None) -> dict:
    return {"completed_at": completed, "started_at": started, "running_since": running_since}


def test_which_sources_are_incomplete_and_why():
    runs = {"old": _run(completed=T - H), "new": _run(completed=T + H), "cut": _run(started=T - H, running_since=T - H)}
    names = ["old", "new", "cut", "never"]
    assert incomplete_sources(names, runs, None) == {"cut": FIRST_PASS, "never": FIRST_PASS}
    assert incomplete_sources(names, runs, T) == {"old": REBUILD, "cut": FIRST_PASS, "never": FIRST_PASS}
    # a pass this daemon saw complete counts before the store says so
    assert incomplete_sources(names, runs, T, completed_here={"old": T + H, "never": T + 2 * H}) == \
        {"cut": FIRST_PASS}


def test_the_progress_is_worded_as_status_counts_it():
    files, pages = Progress("docs", tty=False, unit="files"), Progress("site", tty=False, unit="pages")
    files.tick_walk(500)
    files.start_work(400)
    for _ in range(120):
        files.tick_work()
    pages.tick_crawl(3, 7)
    cov = coverage({"docs": REBUILD, "site": REBUILD, "db": REBUILD},
                   {"docs": (True, files), "site": (True, pages), "db": (False, None)})
    assert cov.text() == ("the index is incomplete (rebuilding from the sources: db waiting for its pass, "
                          "docs 120 of 400 files, site 3 pages so far); these are the hits indexed so far")
    assert cov.as_json()["progress"][2] == {"source": "site", "why": "rebuild", "running": True, "done": 3,
                                            "total": None, "unit": "pages"}
    assert coverage({}, {}).as_json() == {"partial": False, "progress": []} and coverage({}, {}).text() == ""


def test_a_pass_after_a_rebuild_reads_everything_unless_it_began_after_it():
    assert not rebuild_pending(_run(completed=T - H), None)           # never rebuilt
    assert rebuild_pending(_run(completed=T - H), T)                  # completed before it
    assert not rebuild_pending(_run(completed=T + H), T)              # completed after it
    assert not rebuild_pending(None, T)                               # never ran: reads all anyway
    assert rebuild_pending(_run(started=T - H, running_since=T - H), T)   # cut before: no resume
    assert not rebuild_pending(_run(started=T + H, running_since=T + H), T)  # cut after: resumes
