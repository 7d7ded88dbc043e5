"""Identical documents collapse into one hit, "also at" the others (issue 34): three packages'
identical changelogs took hits 3-5 of one query."""

from __future__ import annotations

import json

from conftest import CLI

CHANGELOG = ("postgresql-15 (15.5-0+deb12u1) bookworm-security; urgency=medium\n\n"
             "  * New upstream version. Fixes pg_hba handling of hostssl lines.\n\n"
             " -- Christoph Berg <myon@debian.org>  Thu, 09 Nov 2023 15:41:58 +0100\n")


def _tree(tmp_path):
    tree = tmp_path / "doc"
    for pkg in ("libpq-dev", "libpq5", "postgresql-15"):
        (tree / pkg).mkdir(parents=True)
        (tree / pkg / "changelog.Debian").write_text(CHANGELOG, encoding="utf-8")
    (tree / "other").mkdir()
    (tree / "other" / "notes.txt").write_text("Our pg_hba notes differ from the changelog.\n", encoding="utf-8")
    return tree


def _cli(tmp_path, tree, collapse: bool | None) -> CLI:
    cfg = tmp_path / f"indexerd-{collapse}.toml"
    index = "" if collapse is None else f"[index]\ncollapse_duplicates = {str(collapse).lower()}\n"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\n{index}[[sources.filesystem]]\nname = "doc"\n'
                   f'path = "{tree}"\nwatch = false\n', encoding="utf-8")
    return CLI(tmp_path / "state", cfg)


def test_identical_documents_are_one_hit_also_at_the_others_unless_turned_off(tmp_path):
    tree = _tree(tmp_path)
    cli = _cli(tmp_path, tree, None)          # the default: collapse
    cli.run("index")
    hits = cli.search("pg_hba")
    assert len(hits) == 2, hits
    logs = [h for h in hits if h["path"].endswith("changelog.Debian")]
    assert len(logs) == 1 and len(logs[0]["also_at"]) == 2, hits
    keys = {logs[0]["key"], *logs[0]["also_at"]}
    assert {k.split("/")[-2] for k in keys} == {"libpq-dev", "libpq5", "postgresql-15"}
    assert [h["rank"] for h in hits] == [1, 2]
    assert next(h for h in hits if h["path"].endswith("notes.txt"))["also_at"] == []
    text = cli.run("ctl", "search", "pg_hba").stdout
    assert "also at 2 other places" in text, text
    off = _cli(tmp_path, tree, False)
    hits = json.loads(off.run("ctl", "search", "pg_hba", "--json").stdout)
    assert len(hits) == 4 and all(h["also_at"] == [] for h in hits), hits
    assert "also at" not in off.run("ctl", "search", "pg_hba").stdout


def test_collapse_folds_later_hits_into_the_first_and_counts_them():
    from datetime import datetime, timezone

    from indexerd.daemon.collapse import collapse
    from indexerd.index import Hit

    def hit(rank, key):
        return Hit(rank=rank, key=key, url=key, path=None, source="s", title="t",
                   last_modified=datetime(2024, 1, 1, tzinfo=timezone.utc), date_source="mtime",
                   media_type="text/plain", score=1.0, snippet="")
    hits = [hit(1, "a"), hit(2, "b"), hit(3, "c"), hit(4, "d"), hit(5, "e")]
    out, folded = collapse(hits, {"a": "x", "b": "y", "c": "x", "d": "x"})   # e has no hash: alone
    assert [(h.rank, h.key, h.also_at) for h in out] == [(1, "a", ("c", "d")), (2, "b", ()), (3, "e", ())]
    assert folded == 2
