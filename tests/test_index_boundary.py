"""The index boundary: which engine opens a state dir's index, an index written before the
boundary, rebuilds when the engine or the text analysis changes, the Whoosh patches' version
check, and the session rule "last write of a key wins until commit" on the real engine."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from indexerd.core.errors import ConfigError, IndexUnavailable
from conftest import one_pass
from indexerd.index import IndexDoc, IndexIdentity, open_index, read_identity
from indexerd.index import base, opening

REPO = Path(__file__).resolve().parents[1]
OLD = REPO / "tests" / "fixtures" / "whoosh-index-v1"
UTC = timezone.utc


def doc(key: str, text: str, title: str = "t") -> IndexDoc:
    return IndexDoc(key=key, source="s", url=key, path=None, title=title, content=text,
                    last_modified=datetime(2024, 1, 1, tzinfo=UTC), date_source="mtime",
                    media_type="text/plain", size=len(text))


def old_state(tmp_path: Path) -> Path:
    """A state dir holding the index written before the boundary (see the fixture's README)."""
    state = tmp_path / "state"
    state.mkdir()
    shutil.copytree(OLD / "index", state / "index")
    return state


def _config(tmp_path: Path, tree: Path, engine: str = "whoosh"):
    cfg = tmp_path / "indexerd.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\n[index]\nengine = "{engine}"\n'
                   f'[[sources.filesystem]]\nname = "tree"\npath = "{tree}"\nwatch = false\n', encoding="utf-8")
    from indexerd.config import load_config

    return load_config(str(cfg))


def _pass(cfg) -> dict:
    return one_pass(cfg)


def test_an_index_written_before_the_boundary_is_refused_by_readers_saying_why(tmp_path, cli) -> None:
    """Its schema pickles ``indexerd.analysis.*`` and its terms are analysis version 1: a reader
    (the real CLI, a fresh process) says it must be rebuilt, with no traceback."""
    state = old_state(tmp_path)
    assert cli.state_dir == state
    assert read_identity(state) == IndexIdentity("whoosh", 1, 1)
    p = cli.run("ctl", "search", "falcon", "--json", check=False)
    assert p.returncode == 1 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    assert "text analysis version 1" in p.stderr and f"version {base.ANALYSIS_VERSION}" in p.stderr, p.stderr
    assert "run `indexerd index`" in p.stderr, p.stderr


def test_an_index_written_before_the_boundary_is_rebuilt_at_the_first_start_saying_so(tmp_path, caplog) -> None:
    state = old_state(tmp_path)
    tree = tmp_path / "tree"
    shutil.copytree(OLD / "tree", tree)
    cfg = _config(tmp_path, tree)
    with caplog.at_level(logging.WARNING):
        assert _pass(cfg)["indexed"] == 3
    said = [r.getMessage() for r in caplog.records if "rebuilding the index" in r.getMessage()]
    assert len(said) == 1 and "text analysis version 1" in said[0], said
    assert read_identity(state) == opening.wanted_identity(base.load_engine("whoosh"))
    ix = open_index(state, cfg.index, create=False)
    assert [h.key.rsplit("/", 1)[-1] for h in ix.search("falcon")] == ["falcon.txt"]
    assert [h.key.rsplit("/", 1)[-1] for h in ix.search("pg_hba")] == ["pg.txt"]  # analysis 2: by its parts
    ix.close()
    assert _pass(cfg)["indexed"] == 0


def test_a_changed_analysis_rebuilds_the_index_from_the_sources(tmp_path, monkeypatch, caplog) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(OLD / "tree", tree)
    cfg = _config(tmp_path, tree)
    assert _pass(cfg)["indexed"] == 3
    assert _pass(cfg)["indexed"] == 0                      # nothing changed: nothing re-read
    before = base.ANALYSIS_VERSION
    monkeypatch.setattr(opening, "ANALYSIS_VERSION", 99)
    with caplog.at_level(logging.WARNING):
        counts = _pass(cfg)
    assert counts["indexed"] == 3, counts                  # every document read again
    said = [r.getMessage() for r in caplog.records if "rebuilding the index" in r.getMessage()]
    assert len(said) == 1 and f"analysis version {before}" in said[0] and "version 99" in said[0], said
    assert read_identity(tmp_path / "state") == IndexIdentity("whoosh", 99, base.load_engine("whoosh").format_version)
    ix = open_index(tmp_path / "state", cfg.index, create=False)
    assert [h.key.rsplit("/", 1)[-1] for h in ix.search("falcon")] == ["falcon.txt"]
    ix.close()
    assert _pass(cfg)["indexed"] == 0


def test_an_index_of_another_engine_is_rebuilt_and_readers_are_told(tmp_path, caplog) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(OLD / "tree", tree)
    cfg = _config(tmp_path, tree)
    _pass(cfg)
    state = tmp_path / "state"
    opening.write_identity(state, IndexIdentity("tantivy", base.ANALYSIS_VERSION, 1))
    with pytest.raises(IndexUnavailable, match="written by the tantivy engine.*asks for whoosh.*rebuild"):
        open_index(state, cfg.index, create=False)
    with caplog.at_level(logging.WARNING):
        assert _pass(cfg)["indexed"] == 3
    assert any("tantivy engine and the config asks for whoosh" in r.getMessage()
               and "rebuilding the index" in r.getMessage() for r in caplog.records)
    assert read_identity(state).engine == "whoosh"


def test_an_unreadable_identity_file_means_rebuild_not_a_crash(tmp_path) -> None:
    state = tmp_path / "state"
    open_index(state).close()
    (state / "index" / opening.IDENTITY_FILE).write_text("{not json", encoding="utf-8")
    found = read_identity(state)
    assert found.engine == "unknown"
    assert opening.rebuild_reason(found, opening.wanted_identity(base.load_engine("whoosh")))


def test_registering_the_engines_imports_nothing_of_the_index() -> None:
    """The command line registers the engines with the config at its start (index/engines.py);
    the index's modules (the analysis, its stemmer) load only when something uses them, so a
    ``ctl`` command that opens no index does not pay for them."""
    code = ("import sys, indexerd.cli.main\n"
            "from indexerd.config import engines\n"
            "print(engines.registered(), sorted(m for m in sys.modules if m.startswith('indexerd.index')))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert p.stdout.strip() == "('whoosh', 'tantivy', 'postgresql') ['indexerd.index', 'indexerd.index.engines']"


def test_an_unknown_engine_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown engine 'lucene'"):
        base.load_engine("lucene")


def test_tantivy_configured_without_its_library_names_the_extra(tmp_path) -> None:
    """A process where ``import tantivy`` fails: the error names the extra and how to install it
    into this very environment (a sysadmin's first week: it said ``pip install
    'indexerd[tantivy]'`` to a service installed from a checkout into /opt/indexerd)."""
    code = ("import sys; sys.modules['tantivy'] = None\n"
            "from indexerd.index.base import load_engine\n"
            "from indexerd.core.errors import ConfigError\n"
            "try:\n    load_engine('tantivy')\nexcept ConfigError as e:\n    print(e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "index.engine" in p.stdout and "tantivy" in p.stdout
    assert f"{sys.executable} -m pip install 'tantivy==" in p.stdout or "cannot load it" in p.stdout, p.stdout
    assert "'indexerd[tantivy]' extra" in p.stdout or "cannot load it" in p.stdout, p.stdout


# -- the Whoosh session: the last write of a key wins until commit -------------------------------


def test_whoosh_session_last_write_wins_within_one_batch(tmp_path) -> None:
    ix = open_index(tmp_path)
    s = ix.session()
    s.update(doc("a", "ephemeral words"))
    s.delete("a")
    s.update(doc("b", "first version"))
    s.update(doc("b", "second version"))
    s.delete("c")                         # nothing there: no error
    s.update(doc("c", "third version"))
    s.commit(merge=False)
    assert ix.count() == 2
    assert ix.search("ephemeral") == []
    assert sorted(h.key for h in ix.search("version")) == ["b", "c"]
    assert not ix.search("first") and [h.key for h in ix.search("second")] == ["b"]
    s = ix.session()
    s.delete("b")
    s.update(doc("b", "fourth version"))  # delete then add in one batch: the add stays
    s.update(doc("c", "fifth version"))
    s.delete("c")                         # add then delete: gone, committed copy too
    s.commit(merge=True)
    assert [h.key for h in ix.search("version")] == ["b"] and ix.search("fourth")
    assert ix.count() == 1


# -- the Whoosh patches: installed on the version they were written for, else stock Whoosh -------


_PATCH_PROBE = """
import json, sys, logging
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
import whoosh
if sys.argv[2] != "as-installed":
    whoosh.__version__ = (2, 7, 4)
from datetime import datetime, timezone
from indexerd.index import IndexDoc, open_index
from indexerd.index.whoosh import patches
ix = open_index(sys.argv[1])
s = ix.session()
for n in range(60):
    s.update(IndexDoc(key=f"k{n}", source="s", url=f"k{n}", path=None, title=f"title {n}",
                      content=f"running word{n} common " * 5, last_modified=datetime(2024, 1, 1 + n % 28,
                      tzinfo=timezone.utc), date_source="mtime", media_type="text/plain", size=n))
s.update(IndexDoc(key="k3", source="s", url="k3", path=None, title="again", content="replaced text",
                  last_modified=datetime(2024, 1, 1, tzinfo=timezone.utc), date_source="mtime",
                  media_type="text/plain", size=1))
s.commit(merge=False)
out = {q: sorted(h.key for h in ix.search(q, limit=100)) for q in ("running", "word7", "replaced", '"running word1"')}
out["pool"] = type(ix.session()._w.pool).__name__
print(json.dumps({"active": patches.active(), "results": out}))
"""


@pytest.mark.parametrize("version", ["as-installed", "other"])
def test_whoosh_patches_install_only_on_their_version(tmp_path, version) -> None:
    p = subprocess.run([sys.executable, "-c", _PATCH_PROBE, str(tmp_path / "state"), version],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    warnings = [line for line in p.stderr.splitlines() if "stock Whoosh" in line]
    if version == "as-installed":
        assert got["active"] is True and got["results"]["pool"] == "TermPostingPool" and warnings == []
    else:
        assert got["active"] is False and got["results"]["pool"] == "PostingPool"
        assert len(warnings) == 1 and "2.7.4" in warnings[0] and "2.7.5" in warnings[0]
    results = got["results"]
    assert results["replaced"] == ["k3"] and results["word7"] == ["k7"]
    assert len(results["running"]) == 59 and "k3" not in results["running"]
    assert results['"running word1"'] == ["k1"]


def test_an_ad_hoc_index_without_a_config_keeps_the_engine_of_the_state_dir(tmp_path) -> None:
    """``indexerd index PATH`` without a config writes with the engine the state dir's index
    already has: it rebuilt a tantivy index as Whoosh (the default), and the documents of other
    ad-hoc trees, which no pass reads again, were gone from search."""
    from conftest import CLI

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "one.txt").write_text("zebrafinch nests\n")
    (b / "two.txt").write_text("kingfisher dives\n")
    state = tmp_path / "state"
    cfg = tmp_path / "tantivy.toml"
    cfg.write_text(f'state_dir = "{state}"\n[index]\nengine = "tantivy"\n')
    CLI(state).run("index", "--json", "-c", str(cfg), str(a))
    assert read_identity(state).engine == "tantivy"
    c = CLI(state)  # no config: STATE_DIRECTORY names the same state dir
    p = c.run("index", "--json", str(b))
    assert "rebuilding" not in p.stderr, p.stderr
    assert read_identity(state).engine == "tantivy"
    assert [h["title"] for h in c.search("zebrafinch")] == ["zebrafinch nests"]
    assert [h["title"] for h in c.search("kingfisher")] == ["kingfisher dives"]


def test_every_engine_says_how_many_queries_run_at_once() -> None:
    """The daemon runs one Whoosh query at a time (pure Python under the GIL: more threads only
    took the writer's share, bench/RESULTS.md) and several on engines that wait outside Python."""
    import importlib

    from indexerd.daemon.queries import MAX_CONCURRENT, workers_for
    from indexerd.index.base import ENGINES

    for name in ENGINES:
        engine = importlib.import_module(f"indexerd.index.{name}").ENGINE
        assert isinstance(engine.query_threads, int) and engine.query_threads >= 1, name
    assert workers_for("whoosh") == 1
    assert workers_for("postgresql") == 4
    assert workers_for("no-such-engine") == MAX_CONCURRENT
