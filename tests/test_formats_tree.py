"""The formats in a real tree, through the real ``indexerd index`` and ``indexerd run`` (issue 15):
an mbox gives one document per message under its own key (``Date:`` its date, sender and
subject searchable, messages removed from the file deleted); the hostile files the issue names
(a zip bomb inside a .docx, an .xlsx with a million empty cells, a truncated .gz, an mbox with a
50 MB message, an EPUB with a path-traversal member name) each indexed or skipped with its exact
reason, in bounded time and memory, with the daemon alive; ``ctl report --skipped`` lists the
skipped ones with their reasons; ``ctl explain`` shows a document date's provenance.
"""

from __future__ import annotations

import gzip
import json
import mailbox
import sys
import time
from pathlib import Path

import pytest
from conftest import CLI
from test_daemon import DaemonUnderTest
from test_formats import (RTF, make_docx, make_epub, make_message, make_odf, make_pptx, make_xlsx,
                          million_empty_cells_xlsx, zip_bomb_docx)
from test_hostile_files import run_measured

from indexerd.core.filekeys import path_to_key

RSS_LIMIT_MB = 400


def write_mbox(path: Path, messages) -> None:
    box = mailbox.mbox(str(path))
    for message in messages:
        box.add(message)
    box.flush()
    box.close()


def rows(cli: CLI, *args: str) -> dict[str, dict]:
    return {r["key"]: r for r in json.loads(cli.run("ctl", "report", *args, "--json").stdout)}


def test_mbox_one_document_per_message(tmp_path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    box = root / "lists.mbox"
    write_mbox(box, [
        make_message(),
        make_message(subject="Gardening club", sender="Rosalind Franklin <rf@example.org>",
                     body="tulips and dahlias", msgid="<m2@example.org>",
                     date="Wed, 02 Dec 2026 10:00:00 +0000"),
        make_message(subject="Same id again", body="a duplicate message id", msgid="<m2@example.org>"),
    ])
    cli = CLI(tmp_path / "state")
    s = cli.index(str(root))
    assert (s["indexed"], s["skipped"], s["errors"]) == (3, 1, 0), s  # 3 messages + the container
    key = path_to_key(str(box))
    got = rows(cli, "--dates")
    assert set(got) == {key, f"{key}#m1@example.org", f"{key}#m2@example.org", f"{key}#n3"}
    assert got[f"{key}#m2@example.org"]["date_source"] == "document:Date"
    assert got[f"{key}#m2@example.org"]["last_modified"] == "2026-12-02T10:00:00Z"
    # sender and subject are searchable and lead to that message
    assert [h["key"] for h in cli.search("Rosalind")] == [f"{key}#m2@example.org"]
    assert [h["key"] for h in cli.search("gardening")] == [f"{key}#m2@example.org"]
    assert {h["title"] for h in cli.search("noodle")} == {"Lunch on Friday"}
    # ctl explain: the date came from the message's Date: header
    e = json.loads(cli.run("ctl", "explain", f"{key}#m1@example.org", "--json").stdout)
    assert e["date_source"] == "document:Date"
    assert any("document:Date" in line for line in e["explanation"]), e["explanation"]
    # the file itself is a container, listed with its reason
    skipped = rows(cli, "--skipped")
    assert skipped[key]["reason"] == "container" and len(skipped) == 1

    # unchanged file: one stat, nothing read
    s = cli.index(str(root))
    assert (s["seen"], s["unchanged"], s["indexed"], s["deleted"]) == (1, 1, 0, 0), s
    # a message removed from the mailbox is deleted; the others stay
    write_mbox_over = [make_message()]
    box.unlink()
    write_mbox(box, write_mbox_over)
    s = cli.index(str(root))
    assert s["deleted"] == 2 and s["errors"] == 0, s
    assert set(rows(cli, "--dates")) == {key, f"{key}#m1@example.org"}
    assert cli.search("gardening") == []
    # the mailbox gone: its messages go with it
    box.unlink()
    s = cli.index(str(root))
    assert s["deleted"] == 2, s
    assert rows(cli, "--dates") == {}


@pytest.mark.slow
def test_mbox_with_a_50mb_message(tmp_path) -> None:
    """``max_size`` (20 MB by default) applies to each message: the 50 MB one is skipped
    ``too-large`` under its own key, the messages around it are indexed, memory stays bounded."""
    root = tmp_path / "root"
    root.mkdir()
    big = make_message(subject="Huge attachment", msgid="<big@example.org>",
                       body="bigword\n" + ("x" * 76 + "\n") * 650_000)
    write_mbox(root / "inbox", [make_message(), big,
                                make_message(subject="After the big one", body="afterword",
                                             msgid="<m3@example.org>")])
    assert (root / "inbox").stat().st_size > 50_000_000
    cli = CLI(tmp_path / "state")
    code, out, err, secs, rss = run_measured(
        [sys.executable, "-m", "indexerd.cli.main", "index", "--json", str(root)], cli.env, timeout=120)
    assert code == 0, err[-2000:]
    s = json.loads(out)
    assert (s["indexed"], s["skipped"], s["errors"]) == (2, 2, 0), s  # + the big one, the container
    key = path_to_key(str(root / "inbox"))
    skipped = rows(cli, "--skipped")
    assert skipped[f"{key}#big@example.org"]["reason"] == "too-large"
    assert [h["key"] for h in cli.search("afterword")] == [f"{key}#m3@example.org"]
    assert cli.search("bigword") == []
    assert secs < 60, f"{secs:.1f} s"
    assert rss < RSS_LIMIT_MB, f"peak RSS {rss:.0f} MB"


def build_format_tree(root: Path) -> dict[str, tuple[str, str | None, str | None]]:
    """Good and hostile files of every format: ``{path: (status, skip reason or None, a word
    it must be found by or None)}``."""
    evil = b"<html><body><p>escapedword</p></body></html>"
    changelog = gzip.compress(b"bash (5.2-1) unstable; urgency=low\n\n  * gzchangelogword\n" * 200)
    files = {
        "plan.docx": (make_docx(body=("docxbodyword here",)), "indexed", None, "docxbodyword"),
        "stock.xlsx": (make_xlsx(), "indexed", None, "papaya"),
        "deck.pptx": (make_pptx(), "indexed", None, "narwhal"),
        "text.odt": (make_odf("odt"), "indexed", None, "otter"),
        "sheet.ods": (make_odf("ods"), "indexed", None, "heron"),
        "slides.odp": (make_odf("odp"), "indexed", None, "badgers"),
        "book.epub": (make_epub(), "indexed", None, "seagull"),
        "minutes.rtf": (RTF, "indexed", None, "committee"),
        "lunch.eml": (make_message(body="emlbodyword").as_bytes(), "indexed", None, "emlbodyword"),
        "changelog.Debian.gz": (changelog, "indexed", None, "gzchangelogword"),
        # hostile
        "bomb.docx": (zip_bomb_docx(), "skipped", "too-large", None),
        "cells.xlsx": (million_empty_cells_xlsx(), "indexed", None, "needle"),
        "cut.txt.gz": (changelog[: len(changelog) // 2], "skipped", "parse-error", None),
        "traversal.epub": (make_epub({"../../evil.xhtml": evil, "/abs/evil.xhtml": evil},
                                     extra_spine_href="../../../evil.xhtml"),
                           "indexed", None, "fogbank"),
        "broken.odt": (b"PK\x03\x04\x14\x00garbage", "skipped", "parse-error", None),
        "twice.txt.gz.gz": (gzip.compress(gzip.compress(b"text")), "skipped", "unsupported-type", None),
    }
    out = {}
    for name, (data, status, reason, word) in files.items():
        (root / name).write_bytes(data)
        out[str(root / name)] = (status, reason, word)
    return out


@pytest.mark.slow
def test_hostile_formats_through_the_daemon(tmp_path_factory, request, capsys) -> None:
    """The daemon indexes a tree of good and hostile files of every format: each has its exact
    outcome, the pass ends in bounded time, the daemon stays up and answers."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="ixf"))
    d = DaemonUnderTest(base)
    d.root.mkdir()
    expected = build_format_tree(d.root)
    try:
        started = time.monotonic()
        d.start()
        secs = time.monotonic() - started
        assert secs < 30, f"first pass took {secs:.1f} s"
        status = d.status()
        assert status["sources"]["docs"]["last_run"]["finished"]
        got = {r["key"]: r for r in json.loads(d.ctl_ok("report", "--dates", "--json"))}
        skipped = {r["key"]: r for r in json.loads(d.ctl_ok("report", "--skipped", "--json"))}
        for path, (want_status, reason, word) in expected.items():
            key = path_to_key(path)
            assert got[key]["status"] == want_status, (path, got[key], skipped.get(key))
            if reason:
                assert skipped[key]["reason"] == reason, (path, skipped[key])
            if word:  # a copy of another file's text is that hit's "also at" (identical documents collapse)
                hits = d.search(word)
                assert key in [h["key"] for h in hits] + [k for h in hits for k in h["also_at"]], (path, word)
        assert d.search("escapedword") == []
        assert set(skipped) == {path_to_key(p) for p, (_s, r, _w) in expected.items() if r}
        # document dates with their provenance
        e = json.loads(d.ctl_ok("explain", str(d.root / "plan.docx"), "--json"))
        assert e["date_source"] == "document:dcterms:modified", e
        assert e["last_modified"] == "2024-03-04T05:06:07Z"
        e = json.loads(d.ctl_ok("explain", str(d.root / "text.odt"), "--json"))
        assert e["date_source"] == "document:dc:date", e
        # the extraction workers are the daemon's children, bounded, and the daemon lives on
        d.assert_alive()
        (d.root / "later.txt").write_text("laterword\n")
        d.wait_hits("laterword", 1, timeout=10)
        d.stop()
    finally:
        if d.proc is not None and d.proc.returncode is None:
            d.kill9()
        if request.session.testsfailed:
            with capsys.disabled():
                print(d.log_tail(100))
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_skipped_formats_are_retried_only_when_they_change(tmp_path) -> None:
    """A second pass over the tree reads nothing (every verdict, skips included, stands on the
    same stat); a hostile file replaced by a good one is read again and indexed."""
    root = tmp_path / "root"
    root.mkdir()
    expected = build_format_tree(root)
    cli = CLI(tmp_path / "state")
    first = cli.index(str(root))
    assert first["seen"] == len(expected) and first["errors"] == 0, first
    code, out, err, secs, _rss = run_measured(
        [sys.executable, "-m", "indexerd.cli.main", "index", "--json", str(root)], cli.env, timeout=60)
    s = json.loads(out)
    assert (code, s["unchanged"], s["indexed"], s["skipped"]) == (0, len(expected), 0, 0), (s, err[-500:])
    (root / "cut.txt.gz").write_bytes(gzip.compress(b"repairedword\n"))
    s = cli.index(str(root))
    assert (s["indexed"], s["unchanged"]) == (1, len(expected) - 1), s
    assert [h["path"] for h in cli.search("repairedword")] == [str(root / "cut.txt.gz")]


def test_a_decompression_too_large_is_retried_when_max_size_grows(tmp_path) -> None:
    """A .gz that inflates past ``max_size`` stands as ``too-large`` while the limit stays (its
    file fits the limit, so the stat alone cannot say), and is read again once it is raised."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "big.txt.gz").write_bytes(gzip.compress(b"inflatedword " * 250_000))  # 3.25 MB
    state = tmp_path / "state"

    def run(max_size: str) -> dict:
        cfg = tmp_path / f"{max_size}.toml"
        cfg.write_text(f'state_dir = "{state}"\nmax_size = "{max_size}"\n'
                       f'[[sources.filesystem]]\nname = "t"\npath = "{root}"\n')
        return CLI(state).index("-c", str(cfg))

    assert run("1MB")["skipped"] == 1
    assert (run("1MB")["unchanged"], run("500KB")["unchanged"]) == (1, 1)
    assert run("5MB")["indexed"] == 1
