"""Configuration: defaults, durations and sizes, every kind of mistake named by file and key path,
where the file and the state dir are found, the shipped etc/indexerd.toml, and check-config."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from indexerd.config import load as config_mod  # find_config_path reads DEFAULT_CONFIG_PATH there
from indexerd.config import (
    Config,
    IndexSettings,
    WhooshSettings,
    find_config_path,
    load_config,
    parse_config,
    parse_size,
    resolve_state_dir,
    source_policy,
)
from indexerd.core.errors import ConfigError, StoreError
from indexerd.sources.files.table import DEFAULT_EXCLUDES

REPO = Path(__file__).resolve().parents[1]
ETC = REPO / "etc" / "indexerd.toml"
ORIGIN = "/etc/test/indexerd.toml"


def src(extra: str = "", name: str = "docs", path: str = "/srv/docs") -> str:
    return f'[[sources.filesystem]]\nname = "{name}"\npath = "{path}"\n{extra}'


def config_error(text: str) -> str:
    with pytest.raises(ConfigError) as ei:
        parse_config(text, ORIGIN)
    msg = str(ei.value)
    assert msg.startswith(ORIGIN + ": "), msg
    assert ei.value.exit_code == 2
    return msg


def test_defaults() -> None:
    cfg = parse_config("", ORIGIN)
    assert cfg.origin == ORIGIN
    assert (cfg.state_dir, cfg.control_socket, cfg.meta_map) == (None, None, None)
    assert cfg.log_level == "info"
    assert cfg.max_size == 20_000_000
    assert cfg.refresh_time == 86400.0
    assert cfg.strict_dates is False
    assert cfg.index == IndexSettings(engine="whoosh", commit_interval=1.0, commit_batch=200, bulk_commit_batch=5000,
                                      whoosh=WhooshSettings(merge_idle=600.0, writer_memory=16 * 1024 * 1024))
    assert cfg.sources.filesystem == []
    s = parse_config(src(), ORIGIN).sources.filesystem[0]
    assert s.include == ["*"]
    assert s.exclude == list(DEFAULT_EXCLUDES)
    assert (s.follow_symlinks, s.watch, s.interval) == (False, True, 3600.0)
    assert (s.max_size, s.meta_map, s.date_sources, s.refresh_time, s.strict_dates) == (None,) * 5
    assert Config().origin == "<defaults>"


@pytest.mark.parametrize("text,expected", [
    ("15m", 900.0), ("1h30m", 5400.0), ("2d", 172800.0), ("1.5h", 5400.0), ("500ms", 0.5), ("1w", 604800.0),
])
def test_durations(text, expected) -> None:
    cfg = parse_config(f'refresh_time = "{text}"\n[index.whoosh]\nmerge_idle = "{text}"\n', ORIGIN)
    assert cfg.refresh_time == expected and isinstance(cfg.refresh_time, float)
    assert cfg.index.whoosh.merge_idle == expected


def test_duration_as_number_of_seconds() -> None:
    assert parse_config("refresh_time = 90\n").refresh_time == 90.0


@pytest.mark.parametrize("text,expected", [
    ('"20MB"', 20_000_000), ('"20MiB"', 20 * 1024**2), ('"512KiB"', 512 * 1024), ('"1G"', 10**9),
    ('"1.5MB"', 1_500_000), ("1000", 1000), ('"7"', 7), ('"20 mb"', 20_000_000),
])
def test_sizes(text, expected) -> None:
    cfg = parse_config(f"max_size = {text}\n[index.whoosh]\nwriter_memory = {text}\n", ORIGIN)
    assert cfg.max_size == expected and isinstance(cfg.max_size, int)
    assert cfg.index.whoosh.writer_memory == expected


@pytest.mark.parametrize("bad", ["20XB", "-5MB", "", "MB", "twenty"])
def test_bad_sizes(bad) -> None:
    with pytest.raises(ValueError):
        parse_size(bad)
    msg = config_error(f'max_size = "{bad}"\n')
    assert "max_size" in msg and "size" in msg


def test_bad_duration() -> None:
    msg = config_error('[index.whoosh]\nmerge_idle = "soon"\n')
    assert "index.whoosh.merge_idle" in msg and "'soon'" in msg


def test_zero_commit_interval() -> None:
    assert "index.commit_interval" in config_error('[index]\ncommit_interval = "0s"\n')


@pytest.mark.parametrize("text,path,meant", [
    ('stat_dir = "/x"\n', "stat_dir", "state_dir"),
    ('[index]\ncommit_intervall = "1s"\n', "index.commit_intervall", "commit_interval"),
    (src('exlcude = ["*.tmp"]\n'), "sources.filesystem[0].exlcude", "exclude"),
    (src() + src("folow_symlinks = true\n", name="b", path="/b"), "sources.filesystem[1].folow_symlinks",
     "follow_symlinks"),
    ("[sources]\nftp = []\n", "sources.ftp", None),
    ('[[sources.web]]\nname = "w"\nseeds = ["http://e.test/"]\n[sources.web.politeness]\nmin_dealy = "1s"\n',
     "sources.web[0].politeness.min_dealy", "min_delay"),
    ("zzz = 1\n", "zzz", None),
    ('[[sources.filesystem]]\nname = "d"\nroot = "/x"\n', "sources.filesystem[0].root", "path"),
])
def test_unknown_key_names_the_path_and_the_key_meant(text, path, meant) -> None:
    """A new user's trial: a mistyped key was only "unknown"; now the schema's closest key of
    that table is offered."""
    msg = config_error(text)
    assert f": {path}: unknown key" in msg, msg
    assert (f"(did you mean {meant!r}?)" in msg) if meant else "did you mean" not in msg, msg


def test_origin_is_not_a_config_key() -> None:
    config_error('origin = "somewhere else"\n')


@pytest.mark.parametrize("text,path,words", [
    ('max_size = true\n', "max_size", "size"),
    ('[index]\ncommit_batch = "many"\n', "index.commit_batch", "expected int"),
    (src('exclude = "*.swp"\n'), "sources.filesystem[0].exclude", "expected a list"),
    (src("follow_symlinks = \"yes\"\n"), "sources.filesystem[0].follow_symlinks", "expected bool"),
    ('state_dir = 5\n', "state_dir", "str"),
    ('[index]\ncommit_batch = 0\n', "index.commit_batch", ">= 1"),
    ('log_level = "loud"\n', "log_level", "expected one of"),
    (src('exclude = ["", "*.swp"]\n'), "sources.filesystem[0].exclude", "glob"),
    ('[[sources.filesystem]]\nname = "docs"\n', "sources.filesystem[0].path", "missing required key"),
    (src(name="has space"), "sources.filesystem[0].name", "expected a name"),
])
def test_wrong_type_or_value(text, path, words) -> None:
    msg = config_error(text)
    assert f": {path}: " in msg and words in msg, msg


@pytest.mark.parametrize("key,pattern,words", [
    ("include", "[z-a]", "bad character range"),
    ("include", "foo\\", "'foo\\\\'"),
    ("exclude", "!foo", "negation"),
    ("exclude", "#notes", "comment"),
    ("exclude", "/", "selects no path"),
    ("exclude", "[", "selects no path"),
])
def test_a_glob_the_matcher_cannot_use_is_a_config_error(key, pattern, words) -> None:
    """A new user's trial: a bad include/exclude glob (a reversed range, a trailing backslash, a
    gitignore negation or comment) was a Python traceback and exit 1 from ``check-config``,
    ``indexerd index`` and the daemon's start; it is a config error naming key, value and why."""
    msg = config_error(src(f"{key} = [\"*.txt\", {json.dumps(pattern)}]\n"))
    assert f": sources.filesystem[0].{key}[1]: " in msg and repr(pattern) in msg and words in msg, msg


def test_not_toml() -> None:
    assert "not valid TOML" in config_error("state_dir = \n")


def test_duplicate_source_names() -> None:
    msg = config_error(src() + src(path="/other"))
    assert "sources.filesystem[1].name" in msg and "duplicate source name 'docs'" in msg
    assert "sources.filesystem[0]" in msg


def test_relative_source_path_refused() -> None:
    msg = config_error(src(path="docs/notes"))
    assert "sources.filesystem[0].path" in msg and "absolute" in msg and "'docs/notes'" in msg


def test_home_relative_source_path_accepted() -> None:
    assert parse_config(src(path="~/notes")).sources.filesystem[0].path == "~/notes"


@pytest.mark.parametrize("order,words", [
    ('["mtime", "bogus"]', "unknown date source 'bogus'"),
    ('["fallback", "mtime"]', "comes after 'fallback'"),
    ('["mtime", "header"]', "repeats the protocol slot"),
    ("[]", "at least one"),
])
def test_bad_date_sources(order, words) -> None:
    msg = config_error(src(f"date_sources = {order}\n"))
    assert "sources.filesystem[0].date_sources" in msg and words in msg, msg


def test_good_date_sources_and_source_policy() -> None:
    cfg = parse_config('max_size = "1MB"\nrefresh_time = "2h"\n'
                       + src('date_sources = ["mtime", "meta"]\nmax_size = "5MB"\nstrict_dates = true\n'))
    pol = source_policy(cfg, cfg.sources.filesystem[0])
    assert pol.date_sources == ("mtime", "meta")
    assert (pol.max_size_bytes, pol.refresh_time_seconds, pol.strict_dates) == (5_000_000, 7200.0, True)


# -- where things are found -------------------------------------------------------------------
@pytest.fixture
def no_system_config(monkeypatch, tmp_path):
    monkeypatch.setattr(config_mod, "DEFAULT_CONFIG_PATH", str(tmp_path / "no-such-system.toml"))
    monkeypatch.delenv("INDEXERD_CONFIG", raising=False)


def test_find_config_path_order(no_system_config, monkeypatch, tmp_path) -> None:
    flag = tmp_path / "flag.toml"
    env = tmp_path / "env.toml"
    flag.write_text('log_level = "debug"\n')
    env.write_text('log_level = "error"\n')
    assert find_config_path(None) is None
    monkeypatch.setenv("INDEXERD_CONFIG", str(env))
    assert find_config_path(None) == env
    assert find_config_path(str(flag)) == flag  # -c beats the environment
    assert load_config(str(flag)).log_level == "debug"
    assert load_config(None).log_level == "error"
    assert load_config(None).origin == str(env)


def test_find_config_path_system_file(no_system_config, monkeypatch, tmp_path) -> None:
    system = tmp_path / "system.toml"
    system.write_text("")
    monkeypatch.setattr(config_mod, "DEFAULT_CONFIG_PATH", str(system))
    assert find_config_path(None) == system


def test_named_config_missing(no_system_config, monkeypatch, tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"config file not found \(from -c\)"):
        find_config_path(str(tmp_path / "nope.toml"))
    monkeypatch.setenv("INDEXERD_CONFIG", str(tmp_path / "nope-env.toml"))
    with pytest.raises(ConfigError, match=r"nope-env.toml: config file not found \(from INDEXERD_CONFIG\)"):
        find_config_path(None)


def test_load_config_without_file(no_system_config) -> None:
    assert load_config(None) == Config()
    with pytest.raises(ConfigError, match="no config file"):
        load_config(None, required=True)


def test_resolve_state_dir(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("STATE_DIRECTORY", f"{tmp_path}/first:{tmp_path}/second")
    assert resolve_state_dir(Config()) == tmp_path / "first"
    assert resolve_state_dir(parse_config(f'state_dir = "{tmp_path}/cfg"\n')) == tmp_path / "cfg"
    monkeypatch.delenv("STATE_DIRECTORY")
    assert resolve_state_dir(Config()) != tmp_path / "first"


# -- the shipped example and check-config ------------------------------------------------------
def test_etc_config_parses_and_documents_the_defaults() -> None:
    cfg = parse_config(ETC.read_bytes(), str(ETC))
    defaults = Config()
    assert cfg.index == defaults.index
    assert (cfg.max_size, cfg.refresh_time, cfg.strict_dates, cfg.log_level) == \
        (defaults.max_size, defaults.refresh_time, defaults.strict_dates, defaults.log_level)
    (s,) = cfg.sources.filesystem
    d = parse_config(src()).sources.filesystem[0]
    assert (s.include, s.exclude, s.follow_symlinks, s.watch, s.interval) == \
        (d.include, d.exclude, d.follow_symlinks, d.watch, d.interval)


def test_etc_config_has_no_active_source_that_points_nowhere_and_its_web_example_works() -> None:
    """A sysadmin's first week: the example installed an active web source for
    ``http://intranet.example/`` and check-config said OK.  Now the web table is an example to
    uncomment, and uncommented (its politeness too) it is a valid source."""
    text = ETC.read_text(encoding="utf-8")
    assert parse_config(text, str(ETC)).sources.web == []
    start = text.index("# [[sources.web]]")
    end = text.index("# [sources.web.auth]")
    example = "\n".join(line[2:] if re.match(r"# (\[|[a-z_]+ = )", line) else line
                        for line in text[start:end].splitlines())
    (web,) = parse_config(text[:start] + example, str(ETC)).sources.web
    assert (web.name, web.seeds, web.politeness.min_delay) == ("intranet", ["http://intranet.example/"], 1.0)


def test_the_effective_config_as_toml_reads_back_as_the_same_config() -> None:
    """``check-config``'s TOML (config/render.py, our writer: unset keys as comments) is valid
    TOML that parses back to the same settings: the shipped example, the shipped SQL example and
    a web source whose seed needs escapes."""
    import tomllib

    from indexerd.config import to_toml

    web = '\n[[sources.web]]\nname = "site"\nseeds = ["https://example.org/a b?q=\\"x\\"\\u00e9"]\n'
    for text in (ETC.read_text() + web, (ETC.parent / "sql-sqlite.toml").read_text()):
        cfg = parse_config(text, "<test>")
        out = to_toml(cfg)
        assert "(unset)" in out  # unset keys are listed, as comments
        tomllib.loads(out)
        again = parse_config(out, "<again>")
        assert again.index == cfg.index and again.sources == cfg.sources
        assert (again.max_size, again.log_level, again.state_dir) == (cfg.max_size, cfg.log_level, cfg.state_dir)


def test_the_effective_config_lists_an_engines_keys_in_its_table_only() -> None:
    """``[index]`` showed ``# writer_memory = (unset)`` and ``# merge_idle = (unset)`` (the old
    names of ``[index.whoosh]``'s keys) while ``[index.whoosh]`` held their values."""
    import tomllib

    from indexerd.config import to_toml

    for text in ('[index]\n[index.whoosh]\nmerge_idle = "5m"\n', '[index]\nmerge_idle = "5m"\n'):
        out = to_toml(parse_config(text, "<test>"))
        index = out.split("[index]\n", 1)[1].split("\n\n[", 1)[0]
        assert "writer_memory" not in index and "merge_idle" not in index, index
        assert tomllib.loads(out)["index"]["whoosh"]["merge_idle"] == 300.0
        assert "\n\n\n" not in out  # one blank line between tables


def test_the_effective_config_shows_an_unset_table_as_a_table() -> None:
    """``[index]`` showed ``# postgresql = (unset)`` and the top ``# store = (unset)``, as if
    ``postgresql`` were a key to set there: an unset table is its commented header, after the
    tables that are set; a table that is set shows its values."""
    import tomllib

    from indexerd.config import to_toml

    out = to_toml(parse_config('state_dir = "/s"\n', "<test>"))
    assert "postgresql =" not in out and "store =" not in out, out
    index = out.split("[index]\n", 1)[1].split("\n\n", 1)[0]
    assert "postgresql" not in index, index
    assert "\n\n# [index.postgresql] (unset)\n" in out and "\n\n# [store] (unset)\n" in out, out
    assert out.index("[index.tantivy]") < out.index("# [index.postgresql] (unset)")
    assert "\n\n\n" not in out
    tomllib.loads(out)
    out = to_toml(parse_config('[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "postgresql://u@h/db"\n'
                               'schema = "ix"\n', "<test>"))
    assert "\n\n[index.postgresql]\nurl = " in out and "# [index.postgresql] (unset)" not in out, out
    assert tomllib.loads(out)["index"]["postgresql"]["schema"] == "ix"


def test_check_config_of_etc_exits_0(cli) -> None:
    p = cli.run("check-config", "-c", str(ETC), check=False)
    assert p.returncode == 0, p.stderr
    assert f"# {ETC}: OK" in p.stdout
    assert "effective state_dir = /var/lib/indexerd" in p.stdout
    # what it prints is itself a valid config equal to the input
    assert parse_config(p.stdout) == parse_config(ETC.read_bytes())


def test_check_config_with_malformed_meta_map_exits_2(cli, tmp_path) -> None:
    metamap = tmp_path / "metamap.txt"
    metamap.write_text("# comment\nlast-modified Last-Modified Y\ndc.date Last-Modified maybe\n")
    cfg = tmp_path / "indexerd.toml"
    cfg.write_text(f'meta_map = "{metamap}"\n' + src(path=str(tmp_path)))
    p = cli.run("check-config", "-c", str(cfg), check=False)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert f"{metamap}:3" in p.stderr
    assert "dc.date Last-Modified maybe" in p.stderr
    assert "Traceback" not in p.stderr
    # indexing with it refuses to start too
    p = cli.run("index", "-c", str(cfg), check=False)
    assert p.returncode == 2 and f"{metamap}:3" in p.stderr


@pytest.mark.parametrize("table", ["store", "index.postgresql"])
def test_check_config_names_an_unset_password_variable_of_the_servers(cli, tmp_path, table) -> None:
    # a trial: check-config said OK, and the daemon failed at start
    url = "postgresql://indexerd@db.example.com/search"
    store_pw = ' password_env = "INDEXERD_TEST_UNSET_PW"' if table == "store" else ""
    index_pw = ' password_env = "INDEXERD_TEST_UNSET_PW"' if table == "index.postgresql" else ""
    cfg = tmp_path / "indexerd.toml"
    cfg.write_text(f'[store]\nurl = "{url}"\n{store_pw.strip()}\n[index]\nengine = "postgresql"\n'
                   f'[index.postgresql]\nurl = "{url}"\n{index_pw.strip()}\n' + src(path=str(tmp_path)))
    p = cli.run("check-config", "-c", str(cfg), check=False)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert f"{table}: environment variable INDEXERD_TEST_UNSET_PW is not set" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("bad", ["postgresql://indexerd:s3cret@db.example.com/search",
                                 "postgresql://indexerd@db.example.com/search?sslmode=require&password=s3cret"])
@pytest.mark.parametrize("table", ["store", "index.postgresql"])
def test_a_password_in_a_server_url_is_refused(tmp_path, table, bad) -> None:
    # the state dir records the address without its password: a restarted daemon's crash
    # reconcile could not connect ("no password supplied") and the daemon exited; libpq also
    # takes it as a ``password=`` parameter (the attack run's check-config printed that one)
    good = "postgresql://indexerd@db.example.com/search"
    text = (f'[store]\nurl = "{bad if table == "store" else good}"\n[index]\nengine = "postgresql"\n'
            f'[index.postgresql]\nurl = "{bad if table != "store" else good}"\n')
    with pytest.raises(ConfigError, match=rf"{table}.url: the URL holds a password.*password_env or password_file") as e:
        parse_config(text, "<test>")
    assert "s3cret" not in str(e.value)


@pytest.mark.skipif(Path(config_mod.DEFAULT_CONFIG_PATH).exists(), reason="a system config exists here")
def test_check_config_without_config_exits_2(cli) -> None:
    p = cli.run("check-config", check=False)
    assert p.returncode == 2 and "no config file" in p.stderr


@pytest.mark.skipif(Path(config_mod.DEFAULT_CONFIG_PATH).exists(), reason="a system config exists here")
def test_run_without_config_exits_2(cli) -> None:
    """A daemon with no config would watch nothing on /var/lib/indexerd (found by a new user)."""
    p = cli.run("run", check=False, timeout=20)
    assert p.returncode == 2 and "no config file" in p.stderr, (p.returncode, p.stderr)


def test_etc_metamap_parses() -> None:
    from indexerd.core.metamap import MetaMap

    MetaMap.load(REPO / "etc" / "metamap.txt")


@pytest.mark.parametrize("extra, key", [
    ('interval = "3000000d"\n', "sources.filesystem[0].interval"),   # overflowed APScheduler on reload
    ('interval = "0s"\n', "sources.filesystem[0].interval"),
    ('max_size = "99999999999999999999999TB"\n', "sources.filesystem[0].max_size"),
])
def test_values_that_overflow_timers_or_reads_are_refused(extra, key) -> None:
    assert key in config_error(src(extra))


@pytest.mark.parametrize("extra, key", [
    ("workers = 100000", "sources.web[0].workers"),               # one thread each: memory ran away
    ('timeout = "10000000d"', "sources.web[0].timeout"),
    ('timeout = "2d"', "sources.web[0].timeout"),
])
def test_web_values_that_would_exhaust_the_process_are_refused(extra, key) -> None:
    text = f'[[sources.web]]\nname = "w"\nseeds = ["http://127.0.0.1:9/"]\n{extra}\n'
    assert key in config_error(text)


# -- [index]: the engine and its own table ---------------------------------------------------------


def test_index_engine_and_engine_tables() -> None:
    cfg = parse_config('[index]\nengine = "whoosh"\n[index.whoosh]\nwriter_memory = "32MB"\nmerge_idle = "5m"\n', ORIGIN)
    assert cfg.index.engine == "whoosh"
    assert cfg.index.whoosh == WhooshSettings(writer_memory=32_000_000, merge_idle=300.0)


def test_index_unknown_engine_and_unknown_engine_key_name_the_key() -> None:
    msg = config_error('[index]\nengine = "lucene"\n')
    assert "index.engine" in msg and "'whoosh', 'tantivy' or 'postgresql'" in msg and "lucene" in msg
    msg = config_error('[index.whoosh]\nwriter_mem = "32MB"\n')
    assert "index.whoosh.writer_mem: unknown key" in msg
    msg = config_error('[index.tantivy]\nmerge_idle = "5m"\n')
    assert "index.tantivy.merge_idle: unknown key" in msg


def test_old_index_writer_keys_move_to_the_whoosh_table_with_a_warning(caplog) -> None:
    """``[index] writer_memory``/``merge_idle`` (before engine tables) still work, and say where
    they moved; set in both places is an error."""
    import logging

    with caplog.at_level(logging.WARNING, logger="indexerd.config"):
        cfg = parse_config('[index]\nwriter_memory = "32MB"\nmerge_idle = "5m"\n', ORIGIN)
    assert cfg.index.whoosh == WhooshSettings(writer_memory=32_000_000, merge_idle=300.0)
    assert (cfg.index.writer_memory, cfg.index.merge_idle) == (None, None)
    moved = [r.getMessage() for r in caplog.records if "moved to [index.whoosh]" in r.getMessage()]
    assert len(moved) == 2 and any("index.writer_memory" in m for m in moved), moved
    msg = config_error('[index]\nmerge_idle = "5m"\n[index.whoosh]\nmerge_idle = "1m"\n')
    assert "index.merge_idle" in msg and "index.whoosh.merge_idle" in msg


def test_tantivy_engine_needs_its_extra() -> None:
    """Configured but not installed: the error names the pip extra (installed: the config loads)."""
    from indexerd.index.base import load_engine

    try:
        load_engine("tantivy")
    except ConfigError as e:
        msg = config_error('[index]\nengine = "tantivy"\n')
        assert "index.engine" in msg and ("indexerd[tantivy]" in msg or "cannot load" in msg), (msg, e)
    else:
        assert parse_config('[index]\nengine = "tantivy"\n', ORIGIN).index.engine == "tantivy"


def test_the_engines_come_from_the_index_registry() -> None:
    """The config asks the engines the index registered (config/engines.py), not the index
    package: an engine registered by another package is accepted, its own load error is the
    config's error, with the file named."""
    from indexerd.config import engines

    def load() -> None:
        raise ConfigError("index.engine = 'lucene', but its library is not installed: pip install 'indexerd[lucene]'")

    engines.register("lucene", None)
    try:
        assert parse_config('[index]\nengine = "lucene"\n', ORIGIN).index.engine == "lucene"
        engines.register("lucene", load)
        with pytest.raises(ConfigError, match=rf"^{re.escape(ORIGIN)}: index\.engine = 'lucene', but its library "
                                              r"is not installed: pip install 'indexerd\[lucene\]'$"):
            parse_config('[index]\nengine = "lucene"\n', ORIGIN)
    finally:
        engines.unregister("lucene")
    assert engines.registered() == ("whoosh", "tantivy", "postgresql")
    assert config_error('[index]\nengine = "lucene"\n') == \
        f"{ORIGIN}: index.engine: expected 'whoosh', 'tantivy' or 'postgresql', got 'lucene'"


@pytest.mark.parametrize("engine, said", [
    ("lucene", "index.engine: expected 'whoosh', 'tantivy' or 'postgresql', got 'lucene'"),
    ("tantivy", "index.engine = 'tantivy', but its library is not installed: "),
])
def test_check_config_refuses_an_unknown_engine_and_one_without_its_library(tmp_path, engine, said) -> None:
    """The command line registers the engines before it reads the config (index/engines.py), so
    check-config says what it said when the config imported the index itself: exit 2, the file,
    the key and what is wrong (tantivy's import made to fail, as when its extra is missing)."""
    import subprocess
    import sys

    cfg = tmp_path / "indexerd.toml"
    cfg.write_text(f'state_dir = "{tmp_path}/state"\ncontrol_socket = "{tmp_path}/s.sock"\n'
                   f'[index]\nengine = "{engine}"\n', encoding="utf-8")
    code = ("import sys; sys.modules['tantivy'] = None\n"
            f"sys.argv = ['indexerd', 'check-config', '-c', {str(cfg)!r}]\n"
            "from indexerd.cli.entry import main\nraise SystemExit(main())\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert f"indexerd: {cfg}: {said}" in p.stderr, p.stderr


def test_a_config_read_before_any_engine_is_registered_says_so() -> None:
    """A program that reads a config without importing indexerd.index.engines: the default
    engine reads, another is refused saying what to import (not a bare "unknown")."""
    import subprocess
    import sys

    code = ("from indexerd.config import parse_config\n"
            "assert parse_config('[index]\\nengine = \"whoosh\"\\n', 't.toml').index.engine == 'whoosh'\n"
            "try:\n    parse_config('[index]\\nengine = \"tantivy\"\\n', 't.toml')\n"
            "except Exception as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.strip() == ("t.toml: index.engine: unknown engine 'tantivy' (no index engine is registered: "
                           "import indexerd.index.engines first)")


@pytest.mark.parametrize("key, value", [("commit_batch", 0), ("bulk_commit_batch", -1)])
def test_a_value_out_of_range_is_refused_naming_the_key_and_the_value(key, value) -> None:
    """config/checks.py keeps the range checks (not msgspec Meta) so that the error names the
    value given."""
    with pytest.raises(ConfigError, match=rf"^<t>: index\.{key}: expected a whole number >= 1, got {value}$"):
        parse_config(f"[index]\n{key} = {value}\n", "<t>")


# -- a cluster's keys: [store], node ----------------------------------------------------------------
@pytest.mark.parametrize("text, named", [
    ('[store]\nurl = "postgresql://u@h/db"\n', "index must be shared too"),
    ('[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "postgresql://u@h/db"\n'
     '[store]\nurl = "mysql://u@h/db"\n', "store.url: expected a postgresql:// URL"),
    ('[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "postgresql://u@h/db"\nschema = "s"\n'
     '[store]\nurl = "postgresql://u@h/db"\nschema = "s"\n', "schemas of their own"),
    ('[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "postgresql://u@h/db"\n'
     '[store]\nurl = "postgresql://u@h/db"\nschema = "a-b"\n', "store.schema"),
    ('[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "postgresql://u@h/db"\n'
     '[store]\nurl = "postgresql://u@h/db"\nschema = "st"\nlease = "1s"\n',
     "store.lease: expected a duration from 2 s to 3600 s, got 1 s"),
    ('node = "two words"\n', "node: expected a name"),
    ('[[sources.filesystem]]\nname = "t"\npath = "/tmp"\nnode = "../x"\n', "sources.filesystem[0].node"),
])
def test_cluster_keys_are_checked(text, named) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(text, "cluster.toml")
    assert named in str(e.value) and "cluster.toml" in str(e.value)


def test_a_nodes_lease_reaches_its_store_and_the_address_file(tmp_path) -> None:
    """``[store] lease`` is the node's timings (ClusterTimings) wherever its store is opened,
    also from the address file ``ctl`` and a restarted daemon read."""
    from indexerd.core.store import PgStoreAddress, store_address
    from indexerd.core.store.cluster import ClusterTimings

    head = '[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "postgresql://u@h/db"\n'
    cfg = parse_config(head + '[store]\nurl = "postgresql://u@h/db"\nschema = "st"\nlease = "8s"\n', "<test>")
    address = store_address(cfg)
    assert address is not None and address.lease_seconds == 8.0
    address.record(tmp_path)
    assert PgStoreAddress.from_file(tmp_path) == address
    t = ClusterTimings(address.lease_seconds)
    assert (t.heartbeat, t.host_lease, t.host_claim, t.node_dead) == (2.0, 8.0, 8.0, 12.0)
    default = store_address(parse_config(head + '[store]\nurl = "postgresql://u@h/db"\nschema = "st"\n', "<test>"))
    assert default is not None and default.lease_seconds == 20.0
    (tmp_path / PgStoreAddress.FILENAME).write_text('{"url": "postgresql://u@h/db", "schema": "st"}')
    assert PgStoreAddress.from_file(tmp_path).lease_seconds == 20.0  # a file written before the key
    (tmp_path / PgStoreAddress.FILENAME).write_text('{"url": "postgresql://u@h/db", "schema": "st", '
                                                    '"lease_seconds": "8s"}')
    with pytest.raises(StoreError, match="'lease_seconds' is \"8s\", not a number"):
        PgStoreAddress.from_file(tmp_path)


def test_a_filesystem_source_of_another_node_is_not_built() -> None:
    from indexerd.sources.registry import build_sources

    cfg = parse_config('node = "a"\n[[sources.filesystem]]\nname = "mine"\npath = "/tmp"\nnode = "a"\n'
                       '[[sources.filesystem]]\nname = "theirs"\npath = "/tmp"\nnode = "b"\n'
                       '[[sources.filesystem]]\nname = "anyone"\npath = "/tmp"\n', "<test>")
    assert sorted(build_sources(cfg)) == ["anyone", "mine"]


@pytest.mark.parametrize("table", ["store", "index.postgresql"])
def test_check_config_tries_the_login_of_the_servers(cli, tmp_path, pg_index_server, table) -> None:
    # a trial: check-config said OK with a wrong password, and the daemon failed at start
    pg_index_server.create_database("ccpw")
    pg_index_server.create_role("ccpw_r", "right", "ccpw")
    url = pg_index_server.url("ccpw", "ccpw_r")
    (tmp_path / "right").write_text("right\n")
    (tmp_path / "wrong").write_text("wrong\n")
    store_pw = tmp_path / ("wrong" if table == "store" else "right")
    index_pw = tmp_path / ("wrong" if table != "store" else "right")
    cfg = tmp_path / "indexerd.toml"
    cfg.write_text(f'[store]\nurl = "{url}"\npassword_file = "{store_pw}"\n[index]\nengine = "postgresql"\n'
                   f'[index.postgresql]\nurl = "{url}"\npassword_file = "{index_pw}"\nschema = "ix"\n'
                   + src(path=str(tmp_path)))
    p = cli.run("check-config", "-c", str(cfg), check=False)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert f"[{table}]: " in p.stderr and "password authentication failed" in p.stderr, p.stderr
    assert "OK" not in p.stdout and "Traceback" not in p.stderr
    store_pw.write_text("right\n")
    index_pw.write_text("right\n")
    p = cli.run("check-config", "-c", str(cfg), check=False)
    assert p.returncode == 0 and "OK" in p.stdout, p.stderr


def test_check_config_warns_of_a_server_that_does_not_answer(cli, tmp_path) -> None:
    cfg = tmp_path / "indexerd.toml"
    url = f"postgresql://indexerd@/search?host={tmp_path}&port=1"  # no server on that socket
    cfg.write_text(f'[store]\nurl = "{url}"\n[index]\nengine = "postgresql"\n'
                   f'[index.postgresql]\nurl = "{url}"\nschema = "ix"\n' + src(path=str(tmp_path)))
    p = cli.run("check-config", "-c", str(cfg), check=False)
    assert p.returncode == 0 and "OK" in p.stdout, p.stderr
    assert "warning: [store]: " in p.stderr and "cannot connect" in p.stderr, p.stderr
    assert "warning: [index.postgresql]: " in p.stderr


@pytest.mark.parametrize("agent", ["bot2/1.0", "  ", "/1.0", "my.bot/2"])
def test_a_user_agent_without_a_robots_product_token_is_a_config_error(agent) -> None:
    """A digit in the product token (``ixtest-n1/1.0``) passed the config check and the daemon
    died at start with a ValueError traceback from the robots.txt cache."""
    text = f'[[sources.web]]\nname = "w"\nseeds = ["http://example.org/"]\nuser_agent = "{agent}"\n'
    with pytest.raises(ConfigError, match=r"sources\.web\[0\]\.user_agent: expected a product token"):
        parse_config(text, "<test>")
    parse_config(text.replace(agent, "my-bot_X/2.0 (+https://example.org/bot)"), "<test>")



def test_extract_table_sets_the_workers_limits() -> None:
    from indexerd.extract.isolation import Limits

    assert Limits.from_config(parse_config("", ORIGIN).extract) == Limits()
    cfg = parse_config('[extract]\ntimeout = "2s"\nmemory = "512MiB"\nworkers = 3\n', ORIGIN)
    assert Limits.from_config(cfg.extract) == Limits(timeout_seconds=2.0,
                                                     memory_bytes=512 * 1024 * 1024, workers=3)
    assert config_error('[extract]\ntimeout = "0s"\n') == (
        f"{ORIGIN}: extract.timeout: expected a duration over 0 and at most 1 day, got 0 s")
    assert config_error("[extract]\nworkers = 0\n") == (
        f"{ORIGIN}: extract.workers: expected a whole number from 1 to 64, got 0")
