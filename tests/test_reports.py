"""Reports from a real state store built by ``indexerd index``: dates, changed-in-a-span, explain."""

from __future__ import annotations

import calendar
import json
import os
from datetime import datetime, timezone

import pytest

from conftest import CLI

UTC = timezone.utc


def ts(*fields: int) -> int:
    return calendar.timegm(datetime(*fields, tzinfo=UTC).utctimetuple())


MTIMES = {
    "old.txt": (ts(2001, 9, 9, 1, 46, 40), "2001-09-09T01:46:40Z", "ancient parchment"),
    "mid.txt": (ts(2010, 6, 15, 12, 0, 0), "2010-06-15T12:00:00Z", "middling vellum"),
    "new.txt": (ts(2024, 1, 1, 0, 0, 0), "2024-01-01T00:00:00Z", "recent papyrus"),
}


def parse_z(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


@pytest.fixture
def built(tmp_path, cli):
    root = tmp_path / "root"
    root.mkdir()
    for name, (t, _, text) in MTIMES.items():
        p = root / name
        p.write_text(text + "\n")
        os.utime(p, (t, t))
    before = datetime.now(UTC).replace(microsecond=0)
    s = json.loads(cli.run("index", "--json", str(root)).stdout)
    after = datetime.now(UTC)
    assert (s["seen"], s["indexed"]) == (3, 3)
    return root, cli, before, after


def run_json(cli: CLI, *args: str):
    return json.loads(cli.run(*args, "--json").stdout)


def test_report_dates(built) -> None:
    root, cli, before, after = built
    rows = run_json(cli, "ctl", "report", "--dates")
    assert [r["key"] for r in rows] == sorted((root / n).as_uri() for n in MTIMES)  # ordered by key
    for r in rows:
        name = r["key"].rsplit("/", 1)[1]
        assert r["last_modified"] == MTIMES[name][1]
        assert r["date_source"] == "mtime"
        assert r["status"] == "indexed"
        assert r["source"] == str(root)
        assert before <= parse_z(r["indexed_at"]) <= after
    # text form: one line per document
    p = cli.run("ctl", "report", "--dates")
    lines = p.stdout.splitlines()
    assert len(lines) == 3
    assert any(line.startswith("2010-06-15T12:00:00Z  mtime  ") for line in lines)
    # --source filter
    assert run_json(cli, "ctl", "report", "--dates", "--source", "no-such-source") == []
    assert len(run_json(cli, "ctl", "report", "--dates", "--source", str(root))) == 3


def test_report_needs_a_choice(built) -> None:
    _, cli, _, _ = built
    p = cli.run("ctl", "report", check=False)
    assert p.returncode == 2 and "--dates" in p.stderr


def test_changed_in_a_span(built) -> None:
    root, cli, _, _ = built
    rows = run_json(cli, "ctl", "changed", "--since", "2009-01-01..2011-01-01")
    assert [r["key"] for r in rows] == [(root / "mid.txt").as_uri()]
    assert (rows[0]["last_modified"], rows[0]["date_source"], rows[0]["title"]) == \
        ("2010-06-15T12:00:00Z", "mtime", "middling vellum")
    # newest first
    rows = run_json(cli, "ctl", "changed", "--since", "2000-01-01..")
    assert [r["key"].rsplit("/", 1)[1] for r in rows] == ["new.txt", "mid.txt", "old.txt"]
    # half-open span: the instant itself is in, the end is out
    assert [r["key"].rsplit("/", 1)[1] for r in run_json(
        cli, "ctl", "changed", "--since", "2001-09-09T01:46:40Z..2010-06-15T12:00:00Z")] == ["old.txt"]
    assert run_json(cli, "ctl", "changed", "--since", "1d") == []
    p = cli.run("ctl", "changed", "--since", "1d", check=False)
    assert p.returncode == 0 and "no documents changed" in p.stdout


def test_changed_with_bad_span(built) -> None:
    _, cli, _, _ = built
    p = cli.run("ctl", "changed", "--since", "2011-01-01..2009-01-01", "--json", check=False)
    assert p.returncode == 2 and "is not before the end" in p.stderr
    p = cli.run("ctl", "changed", "--since", "whenever", check=False)
    assert p.returncode == 2 and "'whenever'" in p.stderr


def test_explain_after_first_index_and_after_touch(built) -> None:
    root, cli, before, after = built
    mid = root / "mid.txt"
    e = run_json(cli, "ctl", "explain", str(mid))
    assert e["key"] == mid.as_uri()
    assert e["path"] == str(mid)
    assert (e["status"], e["reason"], e["date_source"], e["last_modified"]) == \
        ("indexed", "new", "mtime", "2010-06-15T12:00:00Z")
    assert e["size"] == mid.stat().st_size and e["mtime_ns"] == mid.stat().st_mtime_ns
    assert isinstance(e["explanation"], list) and all(isinstance(x, str) for x in e["explanation"])
    text = "\n".join(e["explanation"])
    assert "2010-06-15T12:00:00Z came from mtime" in text
    assert ": new (" in text  # the reason with its meaning
    # the key itself works as well as the path
    assert run_json(cli, "ctl", "explain", mid.as_uri()) == e

    # touch with the same bytes: read again, found unchanged
    t = ts(2011, 1, 1)
    os.utime(mid, (t, t))
    s = json.loads(cli.run("index", "--json", str(root)).stdout)
    assert (s["seen"], s["indexed"], s["unchanged"]) == (3, 0, 3)
    e2 = run_json(cli, "ctl", "explain", str(mid))
    assert (e2["status"], e2["reason"]) == ("indexed", "content-unchanged")
    assert e2["mtime_ns"] == t * 10**9  # the new stat is remembered: the next pass reads nothing
    assert e2["indexed_at"] == e["indexed_at"]  # not re-indexed
    assert "content-unchanged" in "\n".join(e2["explanation"])

    # text form
    p = cli.run("ctl", "explain", str(mid))
    assert "reason" in p.stdout and "content-unchanged" in p.stdout and p.stdout.count("\n- ") >= 1


def test_explain_unknown_key_exit_1(built) -> None:
    root, cli, _, _ = built
    for key in (str(root / "never-indexed.txt"), "https://example.test/none", "sql:src/42"):
        p = cli.run("ctl", "explain", key, "--json", check=False)
        assert p.returncode == 1
        assert "not known to indexerd" in p.stderr
        assert p.stdout == ""


def test_reports_before_any_index_exit_1(cli) -> None:
    for args in (("ctl", "report", "--dates"), ("ctl", "changed", "--since", "1d"), ("ctl", "explain", "/x")):
        p = cli.run(*args, check=False)
        assert p.returncode == 1, args
        assert "no state store yet" in p.stderr and "Traceback" not in p.stderr
