"""``ctl search``'s fast path (indexerd/cli/quick.py): it prints exactly what the full command
line prints, hands everything it is not sure of to the full command line, and looks for the
daemon where :mod:`indexerd.cli.locate` looks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from daemonhttp import HttpDaemon, serving, short_base
from indexerd.cli import locate, quick
from indexerd.config import load_config

REPO = Path(__file__).resolve().parent.parent
#: the fast path as the console script runs it, and a check that it did not import the full CLI
QUICK = ("import atexit, sys; atexit.register(lambda: print('FULL' if 'indexerd.cli.main' in sys.modules "
         "else 'QUICK', file=sys.stderr)); from indexerd.cli.quick import main; sys.exit(main())")


@pytest.fixture(scope="module")
def d():
    with serving(HttpDaemon(short_base())) as daemon:
        yield daemon


def _run(d, code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=d.env, cwd=REPO, timeout=60)


def _both(d, *args: str):
    """(fast path's result, full command line's result) of ``indexerd ARGS``."""
    quick_p = _run(d, QUICK, *args)
    full_p = _run(d, "import sys; from indexerd.cli.main import main; sys.exit(main())", *args)
    return quick_p, full_p


@pytest.mark.parametrize("args", [
    ("ctl", "search", "falcon"),
    ("ctl", "search", "bird", "--limit", "3"),
    ("ctl", "search", "--limit=25", "bird", "--sort", "date"),
    ("ctl", "search", "bird", "--json", "--sort=date"),
    ("ctl", "search", "bird", "--since", "2023-01-01..2025-01-01"),
    ("ctl", "search", "hostile OR terminal OR title"),      # control characters, escaped alike
    ("ctl", "search", "xyzzynotaword"),
])
def test_the_fast_path_prints_what_the_full_command_line_prints(d, args) -> None:
    quick_p, full_p = _both(d, "-c", str(d.cfg), *args)
    assert quick_p.stderr.strip() == "QUICK", quick_p.stderr
    assert (quick_p.returncode, quick_p.stdout) == (full_p.returncode, full_p.stdout)
    assert full_p.returncode == 0 and full_p.stdout, full_p


def test_config_after_the_command_and_from_the_environment(d) -> None:
    full = _run(d, "import sys; from indexerd.cli.main import main; sys.exit(main())",
                "ctl", "search", "falcon", "-c", str(d.cfg))
    after = _run(d, QUICK, "ctl", "search", "falcon", "-c", str(d.cfg))
    env = {**d.env, "INDEXERD_CONFIG": str(d.cfg)}
    from_env = subprocess.run([sys.executable, "-c", QUICK, "ctl", "search", "falcon"], capture_output=True,
                              text=True, env=env, cwd=REPO, timeout=60)
    assert "falcon" in full.stdout.lower()
    assert after.stdout == from_env.stdout == full.stdout
    assert after.stderr.strip() == from_env.stderr.strip() == "QUICK"


@pytest.mark.parametrize("args", [
    ("ctl", "search", '"unclosed'),                  # an error reply: the full path reports it
    ("ctl", "search", "falcon", "--limit", "0"),
    ("ctl", "search", "falcon", "--since", "yesterday-ish"),
    ("ctl", "search", "falcon", "--sort", "size"),
    ("ctl", "search", "falcon", "--lim", "3"),       # an abbreviation argparse accepts
    ("ctl", "search", "--help"),
    ("--json", "ctl", "search", "falcon"),           # a search option before the command
    ("ctl", "search", "falcon", "extra"),
    ("ctl", "status"),
])
def test_what_the_fast_path_is_not_sure_of_goes_to_the_full_command_line(d, args) -> None:
    quick_p, full_p = _both(d, "-c", str(d.cfg), *args)
    assert quick_p.stderr.splitlines()[-1] == "FULL", quick_p.stderr
    assert quick_p.returncode == full_p.returncode
    def layout(text: str) -> list[str]:                  # status names its uptime: not compared
        return [line.split(", up ")[0] for line in text.splitlines()[:3]]
    assert layout(quick_p.stdout) == layout(full_p.stdout)
    assert quick_p.stderr.splitlines()[:-1] == full_p.stderr.splitlines()


def test_a_config_that_is_not_toml_goes_to_the_full_command_line(d, tmp_path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(f'control_socket = "{d.sock}"\nstate_dir = "{d.base / "state"}"\n[index\n', encoding="utf-8")
    quick_p, full_p = _both(d, "-c", str(bad), "ctl", "search", "falcon")
    assert quick_p.stderr.splitlines()[-1] == "FULL"
    assert "warning" in full_p.stderr and quick_p.stdout == full_p.stdout and "falcon" in full_p.stdout.lower()


def test_no_daemon_goes_to_the_full_command_line(tmp_path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\ncontrol_socket = "{tmp_path / "s.sock"}"\n',
                   encoding="utf-8")
    assert quick.answer(["-c", str(cfg), "ctl", "search", "falcon"]) is None


# -- where it looks: the same as indexerd.cli.locate -------------------------------------------
_ENVS = [{}, {"STATE_DIRECTORY": "/srv/st:/other"}, {"RUNTIME_DIRECTORY": "/run/x"},
         {"XDG_STATE_HOME": "/xdg/state"}, {"XDG_STATE_HOME": "  "}]
_FILES = [None, "", 'state_dir = "~/ixstate"\n', 'control_socket = "/tmp/ix/c.sock"\n',
          'state_dir = "/var/lib/indexerd"\n', 'state_dir = "/srv/a"\ncontrol_socket = "~/s.sock"\n']


@pytest.mark.parametrize("root", [False, True])
@pytest.mark.parametrize("env", _ENVS)
@pytest.mark.parametrize("text", _FILES)
def test_where_it_looks_is_where_locate_looks(tmp_path, monkeypatch, root, env, text) -> None:
    for k in ("STATE_DIRECTORY", "RUNTIME_DIRECTORY", "XDG_STATE_HOME", "INDEXERD_CONFIG"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(os, "geteuid", lambda: 0 if root else 1000)
    explicit = None
    if text is not None:
        explicit = str(tmp_path / "c.toml")
        Path(explicit).write_text(text, encoding="utf-8")
    monkeypatch.setattr(quick, "DEFAULT_CONFIG_PATH", str(tmp_path / "no-such.toml"))
    cfg = load_config(explicit)
    want = ([str(p) for p in locate.socket_candidates(cfg)], str(locate.state_dir_for_readers(cfg)))
    keys, has_file = quick._config_keys(explicit)
    got = quick.where(keys, has_file)
    assert got == want


def test_the_readers_state_dir_is_the_one_holding_a_store(tmp_path, monkeypatch) -> None:
    from indexerd.config import Config

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    for k in ("STATE_DIRECTORY", "RUNTIME_DIRECTORY"):
        monkeypatch.delenv(k, raising=False)
    own = tmp_path / "xdg" / "indexerd"
    assert quick.where({}, False) == ([str(own / "indexerd.sock"), quick.SYSTEM_SOCKET], str(own))
    own.mkdir(parents=True)
    (own / "state.sqlite3").write_bytes(b"")
    assert quick.where({}, False)[1] == str(locate.state_dir_for_readers(Config())) == str(own)


def test_the_console_script_starts_at_the_fast_path() -> None:
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["indexerd"] == "indexerd.cli.quick:main"
