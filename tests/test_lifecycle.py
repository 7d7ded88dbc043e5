"""The source lifecycle in the real daemon: a source removed from the config is forgotten at every
start (not only on SIGHUP), a source renamed by SIGHUP keeps every document, and a ``--wait``
reply fails when the pass it waited for failed (issues 13 and 18).

The SQL and web sides of the same rules (re-added SQL source, the start-up rule, an interrupted
pass resuming) are in ``tests/test_sqlfeed.py`` and ``tests/test_web.py``.
"""

from __future__ import annotations

import json
import shutil
import signal
from datetime import datetime, timedelta, timezone

import pytest
from test_daemon import DaemonUnderTest, base, write  # noqa: F401 (base: the fixture)

from indexerd.daemon.sourcestate import first_run_time


UTC = timezone.utc


@pytest.fixture
def lc(base, request, capsys):
    d = DaemonUnderTest(base)
    failed_before = request.session.testsfailed
    try:
        yield d
    finally:
        try:
            if d.alive():
                d.stop()
        finally:
            if request.session.testsfailed > failed_before:
                with capsys.disabled():
                    print(f"\n--- daemon log of {request.node.name} (tail) ---\n{d.log_tail(150)}")


def report_keys(d: DaemonUnderTest, source: str) -> set[str]:
    return {r["key"] for r in json.loads(d.ctl_ok("report", "--dates", "--json", "--source", source))}


def test_a_source_removed_while_the_daemon_was_down_is_forgotten_at_start(lc):
    """Issue 18: the purge ran only on SIGHUP, so a removed source's documents stayed searchable
    for ever after a restart."""
    d = lc
    root2 = d.base / "root2"
    write(d.root / "a.txt", "keptword\n")
    for i in range(5):
        write(root2 / f"x{i}.txt", f"removedword {i}\n")
    d.write_config({"docs": d.root, "extra": root2})
    d.start(("docs", "extra"))
    d.wait_hits("removedword", 5)
    d.stop()
    d.write_config({"docs": d.root})
    d.start(("docs",))
    assert d.search("removedword") == []
    assert report_keys(d, "extra") == set()
    assert set(d.status()["sources"]) == {"docs"}
    assert len(d.search("keptword")) == 1


def test_renaming_a_source_by_sighup_loses_no_document(lc):
    """Issue 18: renaming a source lost 689 of 3,000 documents (the purge of the old name raced
    the new name's indexing of the same keys)."""
    d = lc
    n = 400
    for i in range(n):
        write(d.root / "many" / f"f{i:04d}.txt", f"renameword number{i}\n")
    d.start(("docs",))
    assert len(report_keys(d, "docs")) == n
    d.write_config({"renamed": d.root})
    d.signal(signal.SIGHUP)
    d.poll(lambda: d.status()["sources"].get("renamed", {}).get("last_run", {}).get("finished"),
           bool, 60.0, "the renamed source's first pass")
    d.settle(timeout=60.0)
    assert report_keys(d, "docs") == set()
    assert len(report_keys(d, "renamed")) == n
    assert len(d.search("renameword", limit=n + 10)) == n
    d.stop()                                      # and the next start keeps them all
    d.start(("renamed",))
    assert len(d.search("renameword", limit=n + 10)) == n


def test_ctl_scan_wait_fails_when_the_root_is_missing(lc):
    d = lc
    write(d.root / "a.txt", "keptword\n")
    d.start(("docs",))
    shutil.rmtree(d.root)
    p = d.ctl("scan", "docs", "--wait")
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert "the pass of docs failed" in p.stderr and "missing" in p.stderr, p.stderr
    st = d.status()["sources"]["docs"]
    assert "missing" in (st["last_run"]["error"] or ""), st


def test_first_run_time_is_the_start_up_rule():
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    done = {"running_since": None, "completed_at": now - timedelta(seconds=25)}
    assert first_run_time("filesystem", 3600, done, now) == now            # trees: always
    assert first_run_time("web", 3600, done, now) == done["completed_at"] + timedelta(hours=1)
    assert first_run_time("sql", 3600, None, now) == now                   # never ran
    assert first_run_time("sql", 10, done, now) == now                     # overdue
    interrupted = dict(done, running_since=now - timedelta(seconds=5))
    assert first_run_time("web", 3600, interrupted, now) == now            # resumes
    assert first_run_time("sql", 3600, {"running_since": None, "completed_at": None}, now) == now


@pytest.mark.parametrize("how", ["schedule", "reindex"])
def test_a_source_removed_while_its_pass_runs_leaves_nothing_searchable(lc, how):
    """Removing a source by reload while its pass runs: the running pass is cancelled and
    finished before the source is forgotten, so it cannot write documents, crawl rows or its
    pass state back afterwards (it did: 808 of a tree's documents stayed until the next start).
    ``how``: the pass is the scheduled first pass, or a ``ctl reindex --source``."""
    import subprocess
    import sys

    from conftest import CLI  # noqa: F401 (the CLI runner's environment)
    from test_daemon import ENV, REPO

    d = lc
    big = d.base / "big"
    n = 4000
    write(d.root / "a.txt", "keptword\n")
    for i in range(n):
        write(big / f"d{i // 500}" / f"f{i:05d}.txt", f"goneword number{i}\n")
    if how == "reindex":
        d.write_config({"docs": d.root, "big": big})
        d.start(("docs", "big"))
        assert len(report_keys(d, "big")) == n
        reindex = subprocess.Popen(
            [sys.executable, "-m", "indexerd.cli.main", "ctl", "reindex", "--source", "big", "-c", str(d.client_cfg)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=REPO, text=True)
    else:
        d.start(("docs",))
        d.write_config({"docs": d.root, "big": big})
        d.ctl_ok("reload")
    d.poll(lambda: d.status()["sources"].get("big", {}), lambda s: s.get("running"), 60.0, "big's pass running")
    d.write_config({"docs": d.root})
    d.ctl_ok("reload", timeout=120)
    if how == "reindex":
        out, err = reindex.communicate(timeout=120)
        assert reindex.returncode == 1 and "removed by a reload" in err, (reindex.returncode, out, err)
    d.settle(timeout=60.0)
    assert "big" not in d.status()["sources"]
    assert report_keys(d, "big") == set()
    assert d.search("goneword") == []
    assert len(d.search("keptword")) == 1
    assert "removed source big" in d.log()
