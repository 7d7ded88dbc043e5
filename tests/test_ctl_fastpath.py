"""``ctl search``'s fast path (indexerd/cli/entry.py): it prints exactly what the full command
line prints, hands everything it is not sure of to the full command line, and looks for the
daemon where :mod:`indexerd.cli.locate` looks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from daemonhttp import HttpDaemon, serving, short_base
from indexerd.cli import entry as quick, locate
from indexerd.config import load_config

REPO = Path(__file__).resolve().parent.parent
#: the fast path as the console script runs it, and a check that it did not import the full CLI
QUICK = ("import atexit, sys; atexit.register(lambda: print('FULL' if 'indexerd.cli.main' in sys.modules "
         "else 'QUICK', file=sys.stderr)); from indexerd.cli.entry import main; sys.exit(main())")


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
    assert scripts["indexerd"] == "indexerd.cli.entry:main"


# -- the rendered reply, the request without json, the config memo ------------------------------
def test_the_fast_path_asks_for_text_and_reads_the_config_from_its_memo(d, monkeypatch) -> None:
    """Once the config file is memorised, the fast path imports neither tomllib nor json (nor
    the full CLI) and still prints what the full command line prints.  (``re`` is not checked:
    a development checkout's import hook imports it before any of ours.)"""
    import time

    from indexerd.cli import configmemo

    monkeypatch.setenv("XDG_CACHE_HOME", d.env["XDG_CACHE_HOME"])   # the memo the commands below keep
    Path(configmemo.memo_path()).unlink(missing_ok=True)
    age = time.time() - os.stat(d.cfg).st_ctime
    time.sleep(max(0.0, 2.2 - age))       # a file changed in the last 2 s is not memorised
    code = ("import atexit, sys; atexit.register(lambda: print(sorted(m for m in ('json', 'tomllib', "
            "'socket', 'indexerd.cli.main') if m in sys.modules), file=sys.stderr)); "
            "from indexerd.cli.entry import main; sys.exit(main())")
    first = _run(d, code, "-c", str(d.cfg), "ctl", "search", "falcon")
    second = _run(d, code, "-c", str(d.cfg), "ctl", "search", "falcon")
    full = _run(d, "import sys; from indexerd.cli.main import main; sys.exit(main())",
                "-c", str(d.cfg), "ctl", "search", "falcon")
    assert first.stderr.strip() == "['tomllib']", first.stderr      # parsed, then memorised
    assert second.stderr.strip() == "[]", second.stderr              # nothing heavy at all
    assert first.stdout == second.stdout == full.stdout and "falcon" in full.stdout.lower()


def test_bold_titles_on_a_terminal_as_the_full_command_line_prints_them(d) -> None:
    import pty

    def on_a_tty(code: str) -> bytes:
        master, slave = pty.openpty()
        p = subprocess.Popen([sys.executable, "-c", code, "-c", str(d.cfg), "ctl", "search", "falcon"],
                             stdout=slave, stderr=subprocess.DEVNULL, env=d.env, cwd=REPO)
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:                  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        p.wait(60)
        os.close(master)
        return out

    fast = on_a_tty(QUICK)
    full = on_a_tty("import sys; from indexerd.cli.main import main; sys.exit(main())")
    assert b"\x1b[1m" in fast and fast == full


def test_a_daemon_that_does_not_render_goes_to_the_full_command_line(tmp_path) -> None:
    """A daemon older than the rendered reply answers JSON hits: the fast path does not guess."""
    import socket
    import threading

    path = str(tmp_path / "old.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)

    def serve():
        conn, _ = srv.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b'{"ok":true,"hits":[],"scores":[]}\n')
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\ncontrol_socket = "{path}"\n', encoding="utf-8")
    assert quick.answer(["-c", str(cfg), "ctl", "search", "falcon"]) is None
    t.join(5)
    srv.close()


def test_a_rendered_reply_is_a_json_line_then_the_bytes() -> None:
    from indexerd.daemon.control import RENDERED_PREFIX, encode

    assert RENDERED_PREFIX == quick.RENDERED_PREFIX
    assert encode({"ok": True, "rendered": "café\n"}) == b'{"ok":true,"rendered":6}\ncaf\xc3\xa9\n'
    assert encode({"ok": True, "rendered": "x", "more": 1}).startswith(b'{"ok":true,"rendered":"x"')


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=())))
def test_the_request_strings_are_what_json_writes(text) -> None:
    import json

    assert quick.json_string(text) == json.dumps(text, ensure_ascii=True)


def test_the_request_line_is_json() -> None:
    import json

    req = quick.parse(["ctl", "search", 'a "b"\n\udcff', "--since", "7d", "--json", "--limit", "5"])
    line = quick.request_line(req, "/srv/state \u00e9", True)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"cmd": "search", "query": 'a "b"\n\udcff', "limit": 5, "since": "7d",
                                "sort": "relevance", "state_dir": "/srv/state \u00e9",
                                "render": {"tty": True, "json": True}}


def test_the_config_memo_holds_while_the_file_is_unchanged(tmp_path, monkeypatch) -> None:
    import time

    from indexerd.cli import configmemo

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cfg = tmp_path / "c.toml"
    cfg.write_text('state_dir = "/srv/a"\n', encoding="utf-8")
    st = os.stat(cfg)
    keys = {"state_dir": "/srv/a"}
    configmemo.remember(str(cfg), st, keys, time.time_ns())
    assert configmemo.recall(str(cfg), st) is None                    # changed 0 s ago: not kept
    later = time.time_ns() + 3_000_000_000
    configmemo.remember(str(cfg), st, keys, later)
    assert configmemo.recall(str(cfg), st) == keys
    assert os.stat(configmemo.memo_path()).st_mode & 0o777 == 0o600
    assert configmemo.recall(str(tmp_path / "other.toml"), st) is None   # another path
    cfg.write_text('state_dir = "/srv/b"\n', encoding="utf-8")           # same size, new times
    assert configmemo.recall(str(cfg), os.stat(cfg)) is None
    os.chmod(cfg, 0o600)                                                  # ctime moves too
    Path(configmemo.memo_path()).write_bytes(b"garbage\0")
    assert configmemo.recall(str(cfg), os.stat(cfg)) is None
    configmemo.remember(str(cfg), os.stat(cfg), {"state_dir": "/a\0b"}, later)   # no NUL in a field
    assert configmemo.recall(str(cfg), os.stat(cfg)) is None


def test_an_unwritable_cache_dir_memorises_nothing_and_fails_nothing(tmp_path, monkeypatch) -> None:
    import time

    from indexerd.cli import configmemo

    (tmp_path / "file").write_text("x", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))       # not a directory
    cfg = tmp_path / "c.toml"
    cfg.write_text('state_dir = "/srv/a"\n', encoding="utf-8")
    configmemo.remember(str(cfg), os.stat(cfg), {}, time.time_ns() + 3_000_000_000)
    assert configmemo.recall(str(cfg), os.stat(cfg)) is None


def test_a_render_request_with_wrong_types_is_refused(d) -> None:
    from indexerd.daemon.control import request

    for render in ({"tty": "yes"}, {"json": 1}, []):
        reply = request(d.sock, {"cmd": "search", "query": "falcon", "state_dir": str(d.base / "state"),
                                 "render": render})
        assert reply["ok"] is False and reply["exit_code"] == 2 and "render" in reply["error"], reply


def test_a_memo_that_is_a_fifo_or_a_link_is_not_read(tmp_path, monkeypatch) -> None:
    """Nothing in the memo's place can make ``ctl search`` block or read elsewhere."""
    from indexerd.cli import configmemo

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cfg = tmp_path / "c.toml"
    cfg.write_text('state_dir = "/srv/a"\n', encoding="utf-8")
    memo = Path(configmemo.memo_path())
    memo.parent.mkdir(parents=True)
    os.mkfifo(memo)
    assert configmemo.recall(str(cfg), os.stat(cfg)) is None        # returns at once
    memo.unlink()
    (tmp_path / "elsewhere").write_bytes(b"x")
    memo.symlink_to(tmp_path / "elsewhere")
    assert configmemo.recall(str(cfg), os.stat(cfg)) is None


def test_a_memo_others_may_write_is_not_read(tmp_path, monkeypatch) -> None:
    import time

    from indexerd.cli import configmemo

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cfg = tmp_path / "c.toml"
    cfg.write_text('state_dir = "/srv/a"\n', encoding="utf-8")
    configmemo.remember(str(cfg), os.stat(cfg), {"state_dir": "/srv/a"}, time.time_ns() + 3_000_000_000)
    assert configmemo.recall(str(cfg), os.stat(cfg)) == {"state_dir": "/srv/a"}
    os.chmod(configmemo.memo_path(), 0o620)               # group-writable: someone else's words
    assert configmemo.recall(str(cfg), os.stat(cfg)) is None


def test_output_closed_or_on_a_full_disk_ends_alike_on_both_paths(d) -> None:
    full = "import sys; from indexerd.cli.main import main; sys.exit(main())"
    for args in (("falcon",), ('"unclosed',), ("falcon", "--json")):
        both = []
        for code in (QUICK, full):
            with open("/dev/full", "w") as devfull:
                p_full = subprocess.run([sys.executable, "-c", code, "-c", str(d.cfg), "ctl", "search", *args],
                                        stdout=devfull, stderr=subprocess.PIPE, text=True, env=d.env, cwd=REPO,
                                        timeout=60)
            p_closed = subprocess.run([sys.executable, "-c", code, "-c", str(d.cfg), "ctl", "search", *args],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=d.env,
                                      cwd=REPO, timeout=60, preexec_fn=lambda: os.close(1))
            both.append([(p.returncode, [ln for ln in p.stderr.splitlines() if ln not in ("QUICK", "FULL")])
                         for p in (p_full, p_closed)])
        assert both[0] == both[1], (args, both)
        (rc_full, err_full), (rc_closed, err_closed) = both[1]
        assert "Traceback" not in "".join(err_full + err_closed), both
        if args[0] == "falcon":
            assert (rc_full, err_full) == (1, ["indexerd: cannot write the output: No space left on device"])
            assert (rc_closed, err_closed) == (0, [])
        else:
            assert rc_full == rc_closed == 2


def test_a_title_with_undecodable_bytes_prints_as_an_escape(tmp_path) -> None:
    from indexerd.output.terminal import safe

    assert safe("weird_\udce9.conf") == "weird_\\udce9.conf"
    assert safe("café 東京 😀") == "café 東京 😀"


def test_a_daemon_that_never_answers_is_waited_for_once(tmp_path, monkeypatch) -> None:
    """The fast path's wait is not repeated by the full command line it hands over to, which then
    reads the state dir itself (as after its own wait)."""
    import socket
    import threading
    import time

    from indexerd.cli import ctl

    path = str(tmp_path / "silent.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(8)
    accepted = []

    def hold():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            accepted.append(conn)                 # read nothing, answer nothing
    threading.Thread(target=hold, daemon=True).start()
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\ncontrol_socket = "{path}"\n', encoding="utf-8")
    monkeypatch.setattr(quick, "READ_WAIT_SECONDS", 0.5)
    monkeypatch.setattr(ctl, "_READ_WAIT", 0.5)
    monkeypatch.setattr(quick, "TIMED_OUT", set())
    monkeypatch.setattr(ctl, "TIMED_OUT_SOCKETS", set())
    monkeypatch.setattr(sys, "argv", ["indexerd", "-c", str(cfg), "ctl", "search", "falcon"])
    started = time.monotonic()
    code = quick.main()
    took = time.monotonic() - started
    srv.close()
    assert code == 1                              # no index in that state dir: the full path says so
    assert len(accepted) == 1, f"{len(accepted)} connections"
    assert took < 5.0, took


def test_the_fast_path_module_imports_no_typing() -> None:
    """``typing`` (with the ``re``, ``functools`` and ``contextlib`` it imports) cost every
    ``ctl search`` start 5-20 ms for one annotation.  ``-S``: without site, so no development
    checkout's import hook imports them first."""
    repo = str(Path(__file__).resolve().parents[1])
    code = ("import sys; import indexerd.cli.entry; "
            "print(sorted(m for m in ('typing', 're', 'functools', 'contextlib') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONPATH": repo})
    assert p.stdout.strip() == "[]", p.stdout
