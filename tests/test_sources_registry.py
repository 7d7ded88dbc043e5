"""The Source protocol and the registry of kinds: every registered kind is a config table, builds
from a config and satisfies the protocol; an unknown kind is refused naming its key; nothing
outside the registry and the sources branches on a kind's name."""

from __future__ import annotations

import ast
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import msgspec
import pytest

from indexerd.config import Sources, parse_config
from indexerd.config import kinds as config_kinds
from indexerd.core.errors import ConfigError
from indexerd.pipeline.stages import PassCounts
from indexerd.core.store import Store
from indexerd.sources import registry
from indexerd.sources.base import Source, TreeSource, as_tree, trees

PACKAGE = Path(__file__).resolve().parents[1] / "indexerd"
ORIGIN = "/etc/test/indexerd.toml"
UTC = timezone.utc


def every_kind(tmp_path: Path) -> str:
    """A config with one source of every registered kind (the test below fails when a kind is
    added without a table here)."""
    db = tmp_path / "app.db"
    sqlite3.connect(db).close()
    (tmp_path / "tree").mkdir()
    tables = {
        "filesystem": f'name = "docs"\npath = "{tmp_path / "tree"}"\n',
        "sql": f'name = "rows"\nurl = "sqlite:///{db}"\nfull_sql = "SELECT 1 AS id"\n',
        "web": 'name = "site"\nseeds = ["http://127.0.0.1:9/"]\n',
    }
    assert set(tables) == set(registry.KINDS)
    return "".join(f"[[sources.{k}]]\n{v}\n" for k, v in tables.items())


def test_every_kind_is_a_config_table() -> None:
    sources = msgspec.structs.fields(config_kinds.file_type())
    tables = {f.name: f.type for f in sources if f.name == "sources"}["sources"]
    assert issubclass(tables, Sources)
    assert {f.name: f.type for f in msgspec.structs.fields(tables)} == {k.name: list[k.table]
                                                                        for k in registry.KINDS.values()}
    assert list(config_kinds.registered()) == list(registry.KINDS)


def test_every_registered_kind_builds_and_satisfies_the_protocol(tmp_path) -> None:
    cfg = parse_config(every_kind(tmp_path), ORIGIN)
    sources = registry.build_sources(cfg, check_files=True)
    assert {s.kind for s in sources.values()} == set(registry.KINDS)
    for name, src in sources.items():
        assert isinstance(src, Source), name
        assert src.name == name and src.cfg is not None
        assert src.key_prefixes and all(isinstance(p, str) for p in src.key_prefixes)
        schemes = registry.kind(src.kind).key_schemes  # what ctl reads without building a source
        assert all(p.startswith(schemes) for p in src.key_prefixes), (name, schemes)
        assert set(src.status_facts()) == {"root"}
        assert isinstance(registry.kind(src.kind).source_class(), type)
        src.close()
        src.close()  # safe twice
    assert [s.name for s in trees(sources.values())] == ["docs"]
    assert isinstance(sources["docs"], TreeSource) and as_tree(sources["docs"]) is sources["docs"]
    assert as_tree(sources["rows"]) is None and as_tree(sources["site"]) is None
    assert sources["docs"].status_facts()["root"] == str(tmp_path / "tree")


def test_keys_find_their_source(tmp_path) -> None:
    sources = registry.build_sources(parse_config(every_kind(tmp_path), ORIGIN))
    tree = tmp_path / "tree"
    owners = {f"file://{tree}/a.txt": "docs", "sql:rows/7": "rows", "http://127.0.0.1:9/page": "site"}
    for key, owner in owners.items():
        assert [n for n, s in sources.items() if key.startswith(s.key_prefixes) and s.owns(key)] == [owner], key
    assert not any(s.owns("sql:other/7") for s in sources.values())
    assert not any(s.owns("file:///elsewhere/a.txt") for s in sources.values())


def test_forgetting_a_row_makes_the_next_pass_read_it(tmp_path) -> None:
    sources = registry.build_sources(parse_config(every_kind(tmp_path), ORIGIN))
    with Store(tmp_path / "state.sqlite3") as store:
        sources["rows"].on_forgotten(store, "sql:rows/7")
        sources["docs"].on_forgotten(store, f"file://{tmp_path}/tree/a.txt")  # nothing to remember
        assert sources["rows"].forgotten(store) == ["7"]


def test_the_kinds_facts() -> None:
    assert registry.VERBS == {"scan": "filesystem", "poll": "sql", "crawl": "web"}
    assert {k.name: k.unit for k in registry.KINDS.values()} == {"filesystem": "files", "sql": "rows",
                                                                 "web": "pages"}
    assert [k.name for k in registry.KINDS.values() if k.reconcile_at_start] == ["filesystem"]
    with pytest.raises(ConfigError, match=r"unknown kind of source 'ftp' \(known: filesystem, sql, web\)"):
        registry.kind("ftp")


def test_an_unknown_kind_is_refused_naming_its_key() -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config('[[sources.ftp]]\nname = "x"\nurl = "ftp://example.org/"\n', ORIGIN)
    assert str(ei.value) == f"{ORIGIN}: sources.ftp: unknown key"


def test_each_kinds_config_check_runs_from_the_registry(tmp_path) -> None:
    for table, key in (('[[sources.filesystem]]\nname = "a"\npath = "rel/tree"\n', "sources.filesystem[0].path"),
                       ('[[sources.sql]]\nname = "a"\nurl = "nourl"\nfull_sql = "SELECT 1"\n', "sources.sql[0].url"),
                       ('[[sources.web]]\nname = "a"\nseeds = []\n', "sources.web[0].seeds")):
        with pytest.raises(ConfigError) as ei:
            parse_config(table, ORIGIN)
        assert str(ei.value).startswith(f"{ORIGIN}: {key}: "), ei.value


def test_build_sources_runs_each_sources_check(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("INDEXERD_TEST_UNSET", raising=False)
    cfg = parse_config(f'[[sources.sql]]\nname = "rows"\nurl = "sqlite:///{tmp_path}/none.db"\n'
                       f'full_sql = "SELECT 1"\npassword_env = "INDEXERD_TEST_UNSET"\n', ORIGIN)
    with pytest.raises(ConfigError, match=r"sources\.sql\[0\]\.password_env: environment variable "
                                          r"INDEXERD_TEST_UNSET is not set"):
        registry.build_sources(cfg)


def test_shared_status_is_there_only_for_kinds_that_have_one(tmp_path) -> None:
    sources = registry.build_sources(parse_config(every_kind(tmp_path), ORIGIN))
    assert set(registry.shared_status(sources.values())) == {"hosts"}
    assert registry.shared_status([sources["docs"], sources["rows"]]) == {}


def test_a_tree_reindexes_paths_and_names_the_unknown(tmp_path) -> None:
    from indexerd.runtime.indexer import Indexer

    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "a.txt").write_text("alpha\n")
    cfg = parse_config(f'state_dir = "{tmp_path / "state"}"\n[[sources.filesystem]]\nname = "docs"\n'
                       f'path = "{tmp_path / "tree"}"\n', ORIGIN)
    ix = Indexer(cfg)
    ix.open()
    try:
        src = ix.sources["docs"]
        counts = PassCounts()
        missing = str(tmp_path / "tree" / "gone.txt")
        assert src.reindex([str(tmp_path / "tree" / "a.txt"), missing], ix.pipeline, counts) == [missing]
        assert counts.indexed == 1
    finally:
        ix.close()


def test_first_run_time_reads_the_kind() -> None:
    from indexerd.daemon.sourcestate import first_run_time

    now = datetime(2026, 1, 1, tzinfo=UTC)
    done = {"running_since": None, "completed_at": now}
    for k in registry.KINDS.values():
        due = first_run_time(k.name, 60, done, now)
        assert due == (now if k.reconcile_at_start else now + timedelta(seconds=60)), k.name


def _kind_branches(path: Path) -> list[str]:
    """``x.kind == "web"``-style comparisons of a kind attribute or name with a registered kind."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        names = {s.attr if isinstance(s, ast.Attribute) else getattr(s, "id", None) for s in sides}
        literals = {s.value for s in sides if isinstance(s, ast.Constant)}
        if names & {"kind", "kind_name"} and literals & set(registry.KINDS):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_no_kind_branches_outside_the_registry_and_the_sources() -> None:
    outside = [p for p in PACKAGE.rglob("*.py") if "sources" not in p.relative_to(PACKAGE).parts]
    assert [b for p in outside for b in _kind_branches(p)] == []


def test_no_table_of_a_kind_is_read_outside_the_registry_and_the_sources() -> None:
    """``cfg.sources.web`` outside the sources is a kind named by the code that should ask the
    registry (the daemon's write-access checks and ``check-config``'s missing roots did)."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        if "sources" in path.relative_to(PACKAGE).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in registry.KINDS and \
                    isinstance(node.value, ast.Attribute) and node.value.attr == "sources":
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == []


def test_the_core_and_the_daemon_import_no_crawler_module() -> None:
    """The crawler's process-wide state joins a cluster through its kind's ``cluster_join``
    (registry), so a process whose config has no web source never imports the crawler (only
    the kind's config table, ``sources/web/table.py``)."""
    import subprocess
    import sys

    code = ("import sys, indexerd.runtime.indexer, indexerd.daemon.main, indexerd.cli.main\n"
            "print(sorted(m for m in sys.modules if m.startswith('indexerd.sources.web')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['indexerd.sources.web', 'indexerd.sources.web.table']", out


def test_a_config_read_before_any_kind_is_registered_says_so() -> None:
    """The config knows the kinds the registry registers when imported: a program that reads a
    config without importing it is told what to import, not only "unknown key"."""
    import subprocess
    import sys

    code = ("from indexerd.config import parse_config\n"
            "try:\n    parse_config('[[sources.web]]\\nname = \"x\"\\nseeds = [\"http://a/\"]\\n', 't.toml')\n"
            "except Exception as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ("t.toml: sources.web: unknown key (no kind of source is registered: "
                           "import indexerd.sources.registry first)")


def test_each_kind_declares_the_paths_it_needs(tmp_path) -> None:
    """check-config's and the daemon start's access warnings ask the kinds (daemon/writeaccess.py
    names none): a tree is read, a mirror directory written, a SQLite queue marked in place."""
    db = tmp_path / "q.db"
    sqlite3.connect(db).close()
    cfg = parse_config(f'[[sources.web]]\nname = "site"\nseeds = ["http://127.0.0.1:9/"]\nmirror_dir = "{tmp_path}/m"\n'
                       f'[[sources.sql]]\nname = "ro"\nurl = "sqlite:///{db}"\nfull_sql = "SELECT 1"\n'
                       f'[[sources.sql]]\nname = "rw"\nurl = "sqlite:///{db}"\nfull_sql = "SELECT 1"\n'
                       f'post_update_sql = "DELETE FROM q"\n'
                       f'[[sources.filesystem]]\nname = "docs"\npath = "{tmp_path}/tree"\n', ORIGIN)
    assert registry.source_paths(cfg) == [("sources.filesystem[0].path", f"{tmp_path}/tree", "read"),
                                          ("sources.sql[1].url", str(db), "sqlite"),
                                          ("sources.web[0].mirror_dir", f"{tmp_path}/m", "dir")]
