"""The daemon's live path (indexerd.daemon.live) end to end: a slow document never delays the
others (issue 29, attack run: a text file written 3 s after a hostile PDF was still not
searchable after 126 s).  The real daemon, a real watched tree, the real CLI."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest
from test_daemon import LIVE_SECONDS, DaemonUnderTest, base, write  # noqa: F401 (base: the fixture)

from tests.test_format_isolation import hostile_pdf

TIMEOUT_SECONDS = 3.0


class BoundedDaemon(DaemonUnderTest):
    """The standard daemon with a 3 s extraction bound and room for a 50 MB file."""

    def config_text(self, sources: dict[str, Path], typo: bool = False) -> str:
        return ('max_size = "64MB"\n' + super().config_text(sources, typo)
                + f'\n[extract]\ntimeout = "{TIMEOUT_SECONDS:g}s"\n')

    def record(self, path: Path) -> dict | None:
        """``ctl explain PATH --json``, or None while the store has no record of it."""
        p = self.ctl("explain", str(path), "--json")
        return json.loads(p.stdout) if p.returncode == 0 else None


@pytest.fixture
def bounded(base, request, capsys):  # noqa: F811 (base: the fixture imported above)
    d = BoundedDaemon(base)
    write(d.root / "a.txt", "apple original\n")
    failed_before = request.session.testsfailed
    try:
        d.start()
        yield d
    finally:
        try:
            if d.proc is not None and d.proc.returncode is None:
                d.stop()
        finally:
            if request.session.testsfailed > failed_before:
                with capsys.disabled():
                    print(f"\n--- daemon log of {request.node.name} (tail) ---\n{d.log_tail(150)}")


@pytest.mark.alone  # a live edit within LIVE_SECONDS
def test_a_text_file_is_searchable_while_hostile_files_take_their_whole_bound(bounded):
    d = bounded
    pdf, gz = d.root / "slow.pdf", d.root / "many.txt.gz"
    # over an hour of pypdf (2,000 pages sharing one content stream), and ~9 s of decompression
    # (2,500,000 empty gzip members, linear now): both past the 3 s bound
    pdf.write_bytes(hostile_pdf(2000, 100_000))
    gz.write_bytes(gzip.compress(b"") * 2_500_000)
    d.poll(lambda: d.status()["change_queue"], lambda n: n == 0, 10.0,
           "the hostile files taken from the change queue")
    taken = time.monotonic()
    started = time.monotonic()
    write(d.root / "fresh.txt", "freshword beside hostile files\n")
    hits, _ = d.wait_hits("freshword", 1)
    elapsed = time.monotonic() - started
    assert hits[0]["key"] == d.key(d.root / "fresh.txt")
    assert elapsed < LIVE_SECONDS, f"the text file took {elapsed:.2f} s to show in search"
    print(f"text file searchable after {elapsed:.2f} s beside two hostile files")
    # still being worked on: neither has a verdict yet
    assert time.monotonic() - taken < TIMEOUT_SECONDS
    assert (d.record(pdf), d.record(gz)) == (None, None)
    # both end skipped at the bound, and the daemon goes on
    for path in (pdf, gz):
        rec, _ = d.poll(lambda p=path: d.record(p), lambda r: r is not None, 30.0,
                        f"a verdict for {path.name}", interval=0.2)
        assert (rec["status"], rec["reason"]) == ("skipped", "timeout"), rec
        assert rec["detail"].endswith(f"took more than {TIMEOUT_SECONDS:g} s"), rec
    started = time.monotonic()
    write(d.root / "a.txt", "apple editedword\n")
    d.wait_hits("editedword", 1)
    assert time.monotonic() - started < LIVE_SECONDS
    d.assert_alive()
