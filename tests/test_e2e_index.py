"""End-to-end: the real ``indexerd`` CLI in a subprocess on the real corpus and small trees.

One read-only index of the corpus is built per module (``indexed``) for the search tests; the
incremental-pass test builds its own from the ``corpus`` fixture because it edits the tree.
"""

from __future__ import annotations

import calendar
import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import CLI, FIXED_MTIME, copy_corpus

UTC = timezone.utc
ISO_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
SEARCH_KEYS = {"key", "url", "path", "title", "last_modified", "date_source", "score", "snippet"}
SUMMARY_KEYS = {"seen", "indexed", "unchanged", "skipped", "deleted", "errors", "elapsed_seconds", "sources"}


def count_files(root: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(root))


def assert_balanced(summary: dict) -> None:
    """Every document met lands in exactly one bucket (totals and every source)."""
    for counts in [summary, *summary.get("sources", {}).values()]:
        assert counts["seen"] == counts["indexed"] + counts["unchanged"] + counts["skipped"] + counts["errors"], counts


def index_json(cli: CLI, *args: str, timeout: float = 120) -> dict:
    p = cli.run("index", "--json", *args, timeout=timeout)
    summary = json.loads(p.stdout)
    assert SUMMARY_KEYS <= summary.keys()
    assert_balanced(summary)
    return summary


def search(cli: CLI, query: str, *args: str) -> list[dict]:
    p = cli.run("ctl", "search", query, "--json", *args, timeout=60)
    return json.loads(p.stdout)


def rel_paths(hits: list[dict], root: Path) -> list[str]:
    return [os.path.relpath(h["path"], root) for h in hits]


def utc_ts(*fields: int) -> int:
    return calendar.timegm(datetime(*fields, tzinfo=UTC).utctimetuple())


# -- a shared, read-only index of the corpus ---------------------------------------------------
@pytest.fixture(scope="module")
def indexed(tmp_path_factory, corpus_src):
    """(corpus copy with mtimes 2024-01-01, its CLI, the first summary): indexed once per module."""
    base = tmp_path_factory.mktemp("e2e-ro")
    dest = copy_corpus(corpus_src, base / "corpus")
    cli = CLI(base / "state")
    summary = index_json(cli, str(dest))
    return dest, cli, summary


def test_first_index_of_corpus_without_config(indexed) -> None:
    root, cli, summary = indexed
    n = count_files(root)
    assert n > 10
    assert summary["seen"] == n
    assert summary["indexed"] == n
    assert (summary["unchanged"], summary["skipped"], summary["deleted"], summary["errors"]) == (0, 0, 0, 0)
    # an ad-hoc PATH is a source named by its real path
    assert list(summary["sources"]) == [os.path.realpath(root)]
    assert (cli.state_dir / "state.sqlite3").is_file()
    assert (cli.state_dir / "index").is_dir()


def test_asyncio_event_loop_page_in_top_3(indexed) -> None:
    root, cli, _ = indexed
    hits = search(cli, "asyncio event loop")
    top3 = rel_paths(hits[:3], root)
    assert "python-docs/library/asyncio-eventloop.html" in top3, top3


def test_phrase_query_finds_gpl(indexed) -> None:
    root, cli, _ = indexed
    hits = search(cli, '"GNU General Public License"', "--limit", "50")
    assert "text/GPL-3.txt" in rel_paths(hits, root)


def test_search_json_shape(indexed) -> None:
    root, cli, _ = indexed
    hits = search(cli, "asyncio event loop")
    assert hits
    page = root / "python-docs/library/asyncio-eventloop.html"
    for h in hits:
        assert SEARCH_KEYS <= h.keys(), h.keys()
        assert ISO_Z.match(h["last_modified"]), h["last_modified"]
        assert isinstance(h["score"], float) and h["score"] > 0
        assert isinstance(h["snippet"], str) and h["snippet"]
        assert h["key"] == h["url"] == Path(h["path"]).as_uri()
        assert os.path.isfile(h["path"])
    # scores are in rank order
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    (h,) = [h for h in hits if h["path"] == str(page)]
    assert h["last_modified"] == "2024-01-01T00:00:00Z"
    assert h["date_source"] == "mtime"
    assert "event loop" in h["title"].lower()


def test_since_filters_on_last_modified(indexed) -> None:
    root, cli, _ = indexed
    page = str(root / "python-docs/library/asyncio-eventloop.html")
    inside = search(cli, "asyncio event loop", "--since", "2023-12-31..2024-01-02")
    assert page in [h["path"] for h in inside]
    assert all(h["last_modified"] == "2024-01-01T00:00:00Z" for h in inside)
    # the span is half-open and 2024-01-01T00:00:00Z is its very start
    assert page in [h["path"] for h in search(cli, "asyncio event loop", "--since", "2024-01-01T00:00:00Z")]
    assert search(cli, "asyncio event loop", "--since", "2024-01-01T00:00:01Z") == []
    assert search(cli, "asyncio event loop", "--since", "..2023-12-31") == []
    assert search(cli, "asyncio event loop", "--since", "1d") == []


def test_no_results_is_exit_0(indexed) -> None:
    _, cli, _ = indexed
    p = cli.run("ctl", "search", "zzqxjvnonexistentword", "--json", check=False)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == []
    p = cli.run("ctl", "search", "zzqxjvnonexistentword", check=False)
    assert p.returncode == 0, p.stderr
    assert "no documents match" in p.stdout


@pytest.mark.parametrize("query", ['foo"', "(a", "a)", '"', "title:", "dir: /srv", "-", "a -"])
def test_malformed_query_is_exit_2(indexed, query) -> None:
    _, cli, _ = indexed
    p = cli.run("ctl", "search", query, "--json", check=False)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "malformed query" in p.stderr or "empty query" in p.stderr
    assert "Traceback" not in p.stderr
    assert p.stdout == ""


def test_stored_only_field_names_the_searchable_fields(indexed) -> None:
    _, cli, _ = indexed
    p = cli.run("ctl", "search", "path:tmp", check=False)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "field 'path' is stored but not searchable (searchable: content," in p.stderr
    assert "STORED(" not in p.stderr  # Whoosh's internals are not the user's business


def test_unknown_field_prefix_is_exit_2_and_field_case_does_not_matter(indexed) -> None:
    """``Title:x`` and ``nosuchfield:x`` used to find nothing with exit 0 (Whoosh reads an
    unknown prefix as words); colons that are not prefixes still search the text."""
    _, cli, _ = indexed
    p = cli.run("ctl", "search", "nosuchfield:asyncio", check=False)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "no field 'nosuchfield' (searchable: content," in p.stderr and "quote it" in p.stderr
    assert cli.search("Title:asyncio") == cli.search("title:asyncio") != []
    assert cli.search("TITLE:asyncio") == cli.search("title:asyncio")
    for text in ('"nosuchfield:asyncio"', "asyncio::loop", "asyncio 12:30", "http://example.com/asyncio"):
        assert cli.run("ctl", "search", text, check=False).returncode == 0, text


def test_bad_since_is_exit_2(indexed) -> None:
    _, cli, _ = indexed
    p = cli.run("ctl", "search", "asyncio", "--since", "yesterday-ish", check=False)
    assert p.returncode == 2
    assert "--since" in p.stderr and "yesterday-ish" in p.stderr
    assert "Traceback" not in p.stderr


def test_search_before_any_index_is_a_clear_error(cli) -> None:
    p = cli.run("ctl", "search", "anything", "--json", check=False)
    assert p.returncode == 1
    assert p.stdout == ""
    assert "Traceback" not in p.stderr
    assert p.stderr.startswith("indexerd: ")
    assert "no index yet" in p.stderr
    assert "indexerd index" in p.stderr  # says what to do
    assert str(cli.state_dir) in p.stderr  # and where it looked


# -- the incremental passes on a private copy ---------------------------------------------------
def test_incremental_passes(corpus, cli) -> None:
    n = count_files(corpus)
    first = index_json(cli, str(corpus))
    assert first["seen"] == first["indexed"] == n
    assert first["errors"] == first["skipped"] == 0

    # 2. nothing changed: everything unchanged, nothing read (text summary as a person sees it)
    p = cli.run("index", str(corpus))
    m = re.match(r"seen (\d+), indexed (\d+), unchanged (\d+), deleted (\d+), skipped (\d+), errors (\d+) in ",
                 p.stdout)
    assert m, p.stdout
    assert tuple(map(int, m.groups())) == (n, 0, n, 0, 0, 0)
    assert str(cli.state_dir) in p.stdout

    # 3. one file edited (new content, new mtime): exactly that file re-indexed
    edited = corpus / "text" / "GPL-3.txt"
    with open(edited, "a", encoding="utf-8") as fh:
        fh.write("\nquuxblorfle is a word no licence uses\n")
    os.utime(edited)  # now
    s = index_json(cli, str(corpus))
    assert (s["seen"], s["indexed"], s["unchanged"], s["deleted"], s["skipped"], s["errors"]) == (n, 1, n - 1, 0, 0, 0)
    hits = search(cli, "quuxblorfle")
    assert [h["path"] for h in hits] == [str(edited)]
    # its date is the new mtime, so it is the only document of the last day
    assert [h["path"] for h in search(cli, "quuxblorfle", "--since", "1d")] == [str(edited)]
    assert search(cli, "asyncio event loop", "--since", "1d") == []
    # the phrase still finds it (the old text was replaced, not lost)
    assert str(edited) in [h["path"] for h in search(cli, '"GNU General Public License"', "--limit", "50")]

    # 4. another file touched, same bytes: read, found content-unchanged, not re-indexed
    touched = corpus / "python-docs" / "library" / "json.html"
    os.utime(touched)
    s = index_json(cli, str(corpus))
    assert (s["seen"], s["indexed"], s["unchanged"], s["deleted"], s["skipped"], s["errors"]) == (n, 0, n, 0, 0, 0)
    explain = json.loads(cli.run("ctl", "explain", str(touched), "--json").stdout)
    assert explain["reason"] == "content-unchanged"
    s = index_json(cli, str(corpus))  # and the next pass does not read it again
    assert (s["seen"], s["indexed"], s["unchanged"]) == (n, 0, n)
    assert json.loads(cli.run("ctl", "explain", str(touched), "--json").stdout)["decided_at"] == explain["decided_at"]

    # 5. one file deleted: removed from the index and the store
    gone = corpus / "python-docs" / "library" / "sqlite3.html"
    assert str(gone) in [h["path"] for h in search(cli, "sqlite3", "--limit", "100")]
    gone.unlink()
    s = index_json(cli, str(corpus))
    assert (s["seen"], s["indexed"], s["unchanged"], s["deleted"], s["skipped"], s["errors"]) == (n - 1, 0, n - 1, 1, 0, 0)
    assert str(gone) not in [h["path"] for h in search(cli, "sqlite3", "--limit", "100")]
    assert cli.run("ctl", "explain", str(gone), check=False).returncode == 1
    s = index_json(cli, str(corpus))
    assert (s["seen"], s["unchanged"], s["deleted"]) == (n - 1, n - 1, 0)


# -- a config-driven run ------------------------------------------------------------------------
def test_config_driven_run_with_per_source_counts(tmp_path, cli) -> None:
    notes = tmp_path / "notes"
    more = tmp_path / "more"
    notes.mkdir()
    more.mkdir()
    (notes / "a.txt").write_text("pelican migration notes\n")
    (notes / "b.txt").write_text("cormorant diving notes\n")
    (notes / "c.swp").write_text("swap file of an editor\n")  # default exclude
    (more / "c.txt").write_text("albatross gliding\n")
    state = tmp_path / "cfg-state"
    cfg = tmp_path / "indexerd.toml"
    cfg.write_text(f'state_dir = "{state}"\n\n'
                   f'[[sources.filesystem]]\nname = "notes"\npath = "{notes}"\n\n'
                   f'[[sources.filesystem]]\nname = "more"\npath = "{more}"\n')
    assert cli.run("check-config", "-c", str(cfg)).returncode == 0

    s = index_json(cli, "-c", str(cfg), "--source", "notes")
    assert list(s["sources"]) == ["notes"]
    assert s["sources"]["notes"] == {"seen": 2, "indexed": 2, "unchanged": 0, "skipped": 0, "deleted": 0, "errors": 0}

    s = index_json(cli, "-c", str(cfg))
    assert s["sources"] == {
        "notes": {"seen": 2, "indexed": 0, "unchanged": 2, "skipped": 0, "deleted": 0, "errors": 0},
        "more": {"seen": 1, "indexed": 1, "unchanged": 0, "skipped": 0, "deleted": 0, "errors": 0},
    }
    assert (s["seen"], s["indexed"], s["unchanged"]) == (3, 1, 2)
    # state went where the config says, not to $STATE_DIRECTORY
    assert (state / "state.sqlite3").is_file()
    assert not cli.state_dir.exists()

    hits = search(cli, "pelican", "-c", str(cfg))
    assert [(h["path"], h["source"]) for h in hits] == [(str(notes / "a.txt"), "notes")]
    assert search(cli, "albatross", "-c", str(cfg))[0]["source"] == "more"
    assert search(cli, "swap", "-c", str(cfg)) == []

    p = cli.run("index", "-c", str(cfg), "--source", "nope", check=False)
    assert p.returncode == 2 and "unknown source 'nope'" in p.stderr


def test_reindexing_never_duplicates_b24(tmp_path, cli) -> None:
    root = tmp_path / "root"
    root.mkdir()
    a = root / "a.txt"
    a.write_text("alpha\n")
    assert index_json(cli, str(root))["indexed"] == 1
    for i, text in enumerate(["alpha beta\n", "alpha beta gamma\n", "alpha beta delta\n"], 1):
        a.write_text(text)
        os.utime(a, (FIXED_MTIME + i * 60, FIXED_MTIME + i * 60))
        s = index_json(cli, str(root))
        assert (s["seen"], s["indexed"]) == (1, 1)
    assert index_json(cli, "--force", str(root))["indexed"] == 1
    assert [h["path"] for h in search(cli, "alpha")] == [str(a)]
    assert [h["path"] for h in search(cli, "beta")] == [str(a)]
    assert [h["path"] for h in search(cli, "delta")] == [str(a)]
    assert search(cli, "gamma") == []  # the old copy was replaced, not kept beside the new one
    rows = json.loads(cli.run("ctl", "report", "--dates", "--json").stdout)
    assert [r["key"] for r in rows] == [a.as_uri()]


def test_document_dates_meta_mtime_fallback(tmp_path, cli) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "ssi.html").write_text(
        '<html><head><meta name="last-modified" content="Saturday, 08-Sep-2001 21:46:40 EDT">'
        "<title>SSI sample</title></head><body>serverside include sample</body></html>")
    note = root / "note.txt"
    note.write_text("marmalade recipe\n")
    t_note = utc_ts(2010, 5, 6, 7, 8, 9)
    os.utime(note, ns=(t_note * 10**9 + 750_000_000, t_note * 10**9 + 750_000_000))  # sub-second part
    epoch = root / "epoch.txt"
    epoch.write_text("quokka sighting\n")
    os.utime(epoch, (0, 0))  # 1970-01-01: "unknown", never a real date

    before = datetime.now(UTC).replace(microsecond=0)
    s = index_json(cli, str(root))
    after = datetime.now(UTC)
    assert s["indexed"] == 3

    (h,) = search(cli, "serverside")
    assert (h["last_modified"], h["date_source"]) == ("2001-09-09T01:46:40Z", "meta:last-modified")
    (h,) = search(cli, "marmalade")
    assert (h["last_modified"], h["date_source"]) == ("2010-05-06T07:08:09Z", "mtime")
    (h,) = search(cli, "quokka")
    assert h["date_source"] == "fallback"
    lm = datetime.fromisoformat(h["last_modified"].replace("Z", "+00:00"))
    assert before <= lm <= after, (before, lm, after)

    # and the --since filter uses those dates
    assert [x["path"] for x in search(cli, "serverside OR marmalade OR quokka", "--since", "2001-09-09..2001-09-09")] \
        == [str(root / "ssi.html")]
