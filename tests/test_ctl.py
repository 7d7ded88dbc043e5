"""``indexerd ctl`` end to end (issues 13 and 18): finding the daemon, ``-c`` anywhere, reloads
that fail visibly (status, systemd's STATUS=, ``ctl reload``'s exit code), status fields, help
texts and escaping of document values on the terminal.  The real daemon and CLI in subprocesses
(fixtures from test_daemon.py), a real systemd notify socket (a datagram socket of the test's).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import CLI
from httpsite import site  # noqa: F401
from test_sqlfeed import db, pg_server, sql_daemon  # noqa: F401
from test_daemon import ENV, REPO, DaemonUnderTest, base, cli, daemon, tree, write  # noqa: F401

NOBODY = 65534


# -- 3. -c before or after the command ---------------------------------------------------------
def test_c_is_accepted_before_and_after_ctl_and_its_command(daemon):
    d = daemon
    cfg = str(d.client_cfg)
    for args in (("-c", cfg, "ctl", "status", "--json"), ("ctl", "-c", cfg, "status", "--json"),
                 ("ctl", "status", "--json", "-c", cfg), ("ctl", "status", "-c", cfg, "--json")):
        p = cli(*args)
        assert p.returncode == 0, (args, p.stderr)
        assert json.loads(p.stdout)["pid"] == d.proc.pid, args
    p = cli("-c", cfg, "ctl", "search", "apple", "--json")
    assert p.returncode == 0 and len(json.loads(p.stdout)) == 1, p.stderr


def test_a_config_whose_socket_another_config_s_daemon_holds_is_told_so(daemon, tmp_path):
    """A new user's trial: two configs without control_socket share root's default socket;
    `ctl status -c other.toml` printed the other config's daemon (exit 0) and `ctl crawl` said
    the source was not configured.  A daemon now refuses commands for another state dir: exit 3
    naming both; the one-shot reads still read their own state dir."""
    d = daemon
    other = tmp_path / "other.toml"
    other.write_text(f'state_dir = "{tmp_path / "state"}"\ncontrol_socket = "{d.sock}"\n', encoding="utf-8")
    for args in (("ctl", "status"), ("ctl", "scan", "docs"), ("ctl", "reindex", "--all")):
        p = cli("-c", str(other), *args)
        assert p.returncode == 3, (args, p.returncode, p.stdout, p.stderr)
        assert str(d.base / "state") in p.stderr and "control_socket" in p.stderr, p.stderr
    assert cli("-c", str(d.client_cfg), "ctl", "status").returncode == 0
    p = cli("-c", str(d.client_cfg), "ctl", "reindex", "--source", "nosuch")
    assert p.returncode == 2 and "no source named 'nosuch' (configured: " in p.stderr, p.stderr


# -- 1. + 2. a broken config on disk: ctl still reaches the daemon; the refusal is visible ------
def test_ctl_reaches_the_daemon_while_its_config_is_broken_and_shows_the_refused_reload(daemon):
    d = daemon
    d.write_config({"docs": d.root}, typo=True)
    d.signal(signal.SIGHUP)
    d.poll(d.log, lambda s: "reload refused" in s, 10.0, "'reload refused' in the log")
    p = cli("ctl", "status", "--json", "-c", str(d.cfg))     # the daemon's own, now broken, file
    assert p.returncode == 0, p.stderr
    assert "intervall" in p.stderr and "warning" in p.stderr   # says the file is broken, once
    st = json.loads(p.stdout)
    assert st["pid"] == d.proc.pid
    rl = st["reload"]
    assert rl["ok"] is False and rl["via"] == "signal" and "intervall" in rl["error"], rl
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rl["at"]), rl
    text = cli("ctl", "status", "-c", str(d.cfg))
    assert text.returncode == 0, text.stderr
    assert "RELOAD REFUSED" in text.stdout and "intervall" in text.stdout, text.stdout
    # the readers too: search works on the broken file
    p = cli("ctl", "search", "apple", "--json", "-c", str(d.cfg))
    assert p.returncode == 0 and len(json.loads(p.stdout)) == 1, p.stderr
    # a file that is not TOML (an unterminated string appended): control_socket and state_dir
    # are still recovered from their own top-level lines, so ctl reaches the daemon
    good = d.config_text({"docs": d.root})
    d.cfg.write_text(good + 'extra = "unterminated\n', encoding="utf-8")
    p = cli("ctl", "status", "--json", "-c", str(d.cfg))
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert json.loads(p.stdout)["pid"] == d.proc.pid
    assert "not valid TOML" in p.stderr and "control_socket" in p.stderr, p.stderr
    p = cli("ctl", "search", "apple", "--json", "-c", str(d.cfg))
    assert p.returncode == 0 and len(json.loads(p.stdout)) == 1, p.stderr
    # nothing recoverable: the guessed socket is named, and so is the parse error; no claim that
    # the daemon is not running
    d.cfg.write_text("state_dir = [[[\n", encoding="utf-8")
    p = cli("ctl", "status", "-c", str(d.cfg))
    assert p.returncode == 2 and "not valid TOML" in p.stderr, (p.returncode, p.stderr)
    assert "not running" not in p.stderr and "indexerd.sock" in p.stderr, p.stderr
    assert "did not parse" in p.stderr, p.stderr


def test_ctl_reload_waits_for_the_outcome_and_fails_when_refused(daemon):
    d = daemon
    d.write_config({"docs": d.root}, typo=True)
    p = cli("ctl", "reload", "-c", str(d.cfg))
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "reload refused" in p.stderr and "intervall" in p.stderr, p.stderr
    assert d.status()["reload"]["ok"] is False
    d.write_config({"docs": d.root, "more": d.outside})
    p = cli("ctl", "reload", "-c", str(d.cfg))
    assert p.returncode == 0, p.stderr
    assert "2 sources" in p.stdout
    st = d.status()
    assert st["reload"]["ok"] is True and st["reload"]["error"] is None and st["reload"]["via"] == "ctl"
    assert set(st["sources"]) == {"docs", "more"}          # applied before the command returned
    assert "warning" not in p.stderr, p.stderr


def test_ctl_reload_says_what_waits_for_a_restart(daemon):
    """An [index] change is not applied by a reload: ``ctl reload`` says so, not only the log."""
    d = daemon
    text = d.config_text({"docs": d.root}).replace("[index]\n", "[index]\nfold_diacritics = false\n", 1)
    d.cfg.write_text(text, encoding="utf-8")
    p = cli("ctl", "reload", "-c", str(d.cfg))
    assert p.returncode == 0, p.stderr
    assert p.stdout.endswith(": 1 source\n"), p.stdout  # was "1 sources"
    assert "indexerd: warning: [index] changed: the daemon goes on with the settings it started with" in p.stderr, p.stderr
    # a sysadmin's first week: [http] listen added, "reloaded ... (0 new or changed)", exit 0, and
    # nothing listened; now the reload says it waits for a restart, and so does the status
    text += '\n[http]\nlisten = "127.0.0.1:0"\n'
    d.cfg.write_text(text, encoding="utf-8")
    p = cli("ctl", "reload", "-c", str(d.cfg))
    assert p.returncode == 0, p.stderr
    assert "warning: [index] and [http] changed: the daemon goes on with the settings it started with until " \
           "it is restarted" in p.stderr, p.stderr
    assert d.status()["reload"]["pending_restart"] == ["[index]", "[http]"]
    p = cli("ctl", "status", "-c", str(d.cfg))
    assert "config: [index], [http] changed since the start: applied at the next restart" in p.stdout, p.stdout
    d.cfg.write_text(d.config_text({"docs": d.root}), encoding="utf-8")
    p = cli("ctl", "reload", "-c", str(d.cfg))
    assert p.returncode == 0 and "warning" not in p.stderr, p.stderr  # back as it started
    assert d.status()["reload"]["pending_restart"] == []


def test_unit_reloads_through_ctl_reload():
    """systemctl reload fails when ExecReload= fails (systemd.service(5)): the unit runs the
    waiting `indexerd ctl reload`, not an asynchronous kill -HUP."""
    unit = (REPO / "systemd" / "indexerd.service").read_text(encoding="utf-8")
    lines = [ln for ln in unit.splitlines() if ln.startswith("ExecReload=")]
    assert len(lines) == 1 and re.search(r"indexerd ctl reload\b", lines[0]), lines
    assert "kill" not in lines[0]


class NotifySocket:
    """A real ``$NOTIFY_SOCKET``: collects the daemon's sd_notify datagrams."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(os.fspath(path))
        self.sock.settimeout(0.2)
        self.messages: list[str] = []

    def wait_for(self, pred, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                m = self.sock.recv(65536).decode()
            except TimeoutError:
                continue
            self.messages.append(m)
            if pred(m):
                return m
        pytest.fail(f"no matching notification within {timeout} s; got {self.messages}")

    def close(self) -> None:
        self.sock.close()


def test_the_systemd_status_line_shows_a_running_pass_s_progress():
    """A sysadmin's first week: ``systemctl status`` said "reconciling docs" for a long first pass
    and no count (``ctl status`` had one)."""
    from types import SimpleNamespace

    from indexerd.core.progress import Progress
    from indexerd.daemon.sourcestate import SourceState
    from indexerd.daemon.status import status_line

    tree, site, idle = SourceState(), SourceState(), SourceState()
    tree.running = site.running = True
    tree.progress = Progress("docs", tty=False, unit="files")
    tree.progress.found, tree.progress.done, tree.progress.total = 7473, 1200, 7473
    site.progress = Progress("site", tty=False, unit="pages")
    site.progress.done = 340
    d = SimpleNamespace(states={"docs": tree, "site": site, "notes": idle}, sources={"docs": 1, "site": 2, "notes": 3},
                        reloader=SimpleNamespace(info={"ok": None, "at": None, "error": None}))
    assert status_line(d) == "3 sources, 0 watched, reconciling docs 1200/7473 files, site 340 pages"


def test_refused_sighup_reload_is_in_the_systemd_status_line(tree, monkeypatch):
    d = tree
    ns = NotifySocket(d.base / "notify.sock")
    monkeypatch.setitem(ENV, "NOTIFY_SOCKET", str(ns.path))
    try:
        d.start()
        ns.wait_for(lambda m: "READY=1" in m, 30)
        d.write_config({"docs": d.root}, typo=True)
        d.signal(signal.SIGHUP)
        ns.wait_for(lambda m: "RELOADING=1" in m and "MONOTONIC_USEC=" in m, 10)
        m = ns.wait_for(lambda m: "READY=1" in m, 10)
        assert "STATUS=" in m and "RELOAD REFUSED" in m and "intervall" in m, m
        d.write_config({"docs": d.root})
        d.signal(signal.SIGHUP)
        m = ns.wait_for(lambda m: "READY=1" in m, 10)
        assert "RELOAD REFUSED" not in m, m
    finally:
        if d.proc is not None and d.proc.poll() is None:
            d.stop()
        ns.close()


# -- 8. the system socket is found by default --------------------------------------------------
def test_without_control_socket_the_system_socket_is_tried_after_the_users(tmp_path, monkeypatch):
    """A group member's ctl (no -c, no per-user daemon) finds /run/indexerd/indexerd.sock."""
    from indexerd.cli import locate
    from indexerd.config import Config

    monkeypatch.delenv("RUNTIME_DIRECTORY", raising=False)
    monkeypatch.delenv("STATE_DIRECTORY", raising=False)
    monkeypatch.setattr(locate, "_is_root", lambda: False)
    monkeypatch.setattr("indexerd.config.paths._is_root", lambda: False)
    own = locate.socket_candidates(Config(state_dir=str(tmp_path)))
    assert own == (tmp_path / "indexerd.sock", Path("/run/indexerd/indexerd.sock"))
    assert locate.socket_candidates(Config(control_socket="/x/s.sock")) == (Path("/x/s.sock"),)
    monkeypatch.setenv("RUNTIME_DIRECTORY", "/run/indexerd")
    assert locate.socket_candidates(Config()) == (Path("/run/indexerd/indexerd.sock"),)


def _nobody_can_run_python(cwd: str) -> bool:
    if not shutil.which("setpriv"):
        return False
    p = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                        sys.executable, "-c", "import indexerd.cli.main"], capture_output=True, cwd=cwd, timeout=60)
    return p.returncode == 0


@pytest.mark.xdist_group("real-service-paths")  # creates or checks /run/indexerd, /var/lib/indexerd
def test_group_member_without_c_reaches_the_daemon_on_the_system_socket(tree):
    """The real case: a non-root user without -c and without a daemon of its own reaches the
    service's /run/indexerd/indexerd.sock (group access, as the unit's RuntimeDirectory gives),
    and ctl search reads the service's /var/lib/indexerd."""
    d = tree
    if os.geteuid() != 0:
        pytest.fail("this test creates /run/indexerd: run the suite as root (the CI does)")
    if not _nobody_can_run_python(str(d.base)):
        pytest.fail("setpriv cannot run the CLI as nobody")
    run, lib = Path("/run/indexerd"), Path("/var/lib/indexerd")
    if run.exists():
        pytest.fail("/run/indexerd exists on this machine: not touching a real service's socket")
    try:
        run.mkdir(mode=0o750)
        os.chown(run, 0, NOBODY)
        d.sock = run / "indexerd.sock"           # as the unit's RuntimeDirectory gives it
        d.client_cfg.write_text(d.config_text({}), encoding="utf-8")
        d.write_config({"docs": d.root})
        d.start()
        os.chown(d.sock, 0, NOBODY)              # the unit's group (indexerd) is nobody's here
        env = {k: v for k, v in ENV.items() if k not in ("XDG_STATE_HOME",)}
        os.chmod(d.base, 0o755)
        (d.base / "home").mkdir()
        os.chown(d.base / "home", NOBODY, NOBODY)
        env["HOME"] = str(d.base / "home")       # nobody's own (empty) home: no per-user daemon
        p = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", f"--groups={NOBODY}",
                            sys.executable, "-m", "indexerd.cli.main", "ctl", "status", "--json"],
                           capture_output=True, text=True, env=env, cwd=str(d.base), timeout=60)
        assert p.returncode == 0, (p.returncode, p.stderr)
        assert json.loads(p.stdout)["pid"] == d.proc.pid
        d.stop()
        p = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", f"--groups={NOBODY}",
                            sys.executable, "-m", "indexerd.cli.main", "ctl", "status"],
                           capture_output=True, text=True, env=env, cwd=str(d.base), timeout=60)
        assert p.returncode == 3 and "/run/indexerd/indexerd.sock" in p.stderr, p.stderr
        assert "indexerd.sock nor on" in p.stderr, p.stderr       # both places are named
        # the readers: without -c, the service's state dir (here a link to the daemon's)
        if lib.exists() or lib.is_symlink():
            pytest.fail("/var/lib/indexerd exists on this machine: not touching a real service's state")
        for dirpath, dirs, files in os.walk(d.base / "state"):
            os.chmod(dirpath, 0o755)
            for f in files:
                os.chmod(os.path.join(dirpath, f), 0o644)
        lib.symlink_to(d.base / "state")
        p = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", f"--groups={NOBODY}",
                            sys.executable, "-m", "indexerd.cli.main", "ctl", "search", "apple", "--json"],
                           capture_output=True, text=True, env=env, cwd=str(d.base), timeout=60)
        assert p.returncode == 0, (p.returncode, p.stderr)
        assert [h["key"] for h in json.loads(p.stdout)] == [d.key(d.root / "a.txt")]
    finally:
        if d.proc is not None and d.proc.poll() is None:
            d.stop()
        shutil.rmtree(run, ignore_errors=True)
        if lib.is_symlink():
            lib.unlink()


# -- 5. status: the last error, the running pass apart from the last one ------------------------
def test_status_shows_the_last_error_message_of_a_missing_root(daemon):
    d = daemon
    gone = d.base / "gone"
    d.write_config({"docs": d.root, "lost": gone})
    d.signal(signal.SIGHUP)
    st, _ = d.poll(d.status, lambda s: s["sources"].get("lost", {}).get("last_run", {}).get("finished"),
                   15.0, "the pass of 'lost'")
    lost = st["sources"]["lost"]
    assert lost["last_run"]["counts"]["errors"] == 1
    assert "missing" in lost["last_run"]["error"] and str(gone) in lost["last_run"]["error"], lost
    assert "missing" in lost["last_error"]["message"] and lost["last_error"]["at"], lost
    assert st["counters"].get("error.root-missing", 0) >= 1, st["counters"]
    text = d.ctl_ok("status")
    assert re.search(r"last error \(.*\): root .*gone is missing", text), text
    assert "error.root-missing" in text


def test_status_shows_the_running_pass_apart_from_the_last_one(tree, capsys):
    from indexerd.output.terminal import print_status

    d = tree
    d.start()
    try:
        first = d.status()["sources"]["docs"]["last_run"]
        for i in range(3000):
            write(d.root / "bulk" / f"f{i:04}.txt", f"bulkword number{i}\n")
        p = d.ctl("scan", "docs")
        assert p.returncode == 0, p.stderr
        st, _ = d.poll(d.status, lambda s: s["sources"]["docs"]["current_run"] is not None, 30.0,
                       "a running pass", interval=0.02)
        s = st["sources"]["docs"]
        cr, lr = s["current_run"], s["last_run"]
        assert cr["started"] >= lr["finished"] >= lr["started"], s  # never the running start with an old end
        assert lr["started"] <= first["finished"] or lr["started"] == first["started"]
        capsys.readouterr()
        print_status(st)  # what ctl status prints of that answer (a second request may come after the pass)
        text = capsys.readouterr().out
        assert "running since" in text, text
        m = re.search(r"last run (\S+) \.\. (\S+):", text)
        assert m is None or m.group(1) <= m.group(2), text
    finally:
        if d.proc is not None and d.proc.poll() is None:
            d.stop()


def test_sql_progress_counts_rows_not_files(caplog):
    from indexerd.core.progress import Progress
    from indexerd.sources.registry import KINDS

    caplog.set_level("INFO", logger="indexerd.core.progress")
    p = Progress("articles", tty=False, log_every_seconds=0, unit=KINDS["sql"].unit, walk=KINDS["sql"].walk)
    p.tick_walk(2000)
    p.start_work(10)
    text = caplog.text
    assert "articles: loading, 2000 rows read" in text and "2000 rows found, 10 to read" in text, text
    assert "files" not in text, text


# -- 5. messages and help texts ----------------------------------------------------------------
def test_search_by_a_user_who_cannot_read_the_state_dir_is_told_so(tmp_path):
    os.chmod(tmp_path, 0o755)
    if os.geteuid() == 0 and not _nobody_can_run_python(str(tmp_path)):
        pytest.fail("running as root and setpriv cannot run the CLI as nobody")
    state = tmp_path / "state"
    c = CLI(state)
    (tmp_path / "t").mkdir()
    write(tmp_path / "t" / "a.txt", "permword\n")
    c.index(str(tmp_path / "t"))
    os.chmod(state, 0o700)
    prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if os.geteuid() == 0 else []
    for args in (("search", "permword"), ("report", "--dates"), ("explain", str(tmp_path / "t" / "a.txt"))):
        p = subprocess.run([*prefix, sys.executable, "-m", "indexerd.cli.main", "ctl", *args], capture_output=True,
                           text=True, env=c.env, cwd=str(tmp_path), timeout=60)
        assert p.returncode == 1, (args, p.returncode, p.stderr)
        assert "permission denied" in p.stderr and str(state) in p.stderr, p.stderr
        assert "rebuild" not in p.stderr, p.stderr


def test_help_texts():
    top = cli("--help").stdout
    assert "web sites" in top and "SQL" in top
    ctl = cli("ctl", "--help").stdout
    assert "crawl" in ctl and "web site" in ctl
    assert "indexerd ctl crawl intranet" in cli("ctl", "crawl", "--help").stdout
    assert "indexerd ctl poll articles" in cli("ctl", "poll", "--help").stdout
    assert "--dates" in cli("ctl", "report", "--help").stdout.split("options:")[0]
    status = cli("ctl", "status", "--help").stdout
    assert re.search(r"--json\s+\S", status), status       # the flag has a help text
    p = cli("ctl", "report")
    assert p.returncode == 2 and "--dates" in p.stderr and "--skipped" in p.stderr, p.stderr


def test_a_query_starting_with_a_dash_is_told_how_to_write_it(tmp_path):
    """A new user's trial: `ctl search -draft -c CFG` said only "the following arguments are
    required: query", and `ctl search -- -draft -c CFG` "unrecognized arguments: -c CFG";
    both now say that the query goes after `--` and the options before it."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\ncontrol_socket = "{tmp_path / "s.sock"}"\n')
    for args in (("ctl", "search", "-draft", "-c", str(cfg)), ("ctl", "search", "--", "-draft", "-c", str(cfg))):
        p = cli(*args)
        assert p.returncode == 2, (args, p)
        assert "indexerd ctl search -c CONFIG -- '-draft'" in p.stderr, (args, p.stderr)
    p = cli("ctl", "search", "-c", str(cfg), "--", "-draft")  # the query reaches the (absent) index
    assert p.returncode == 1 and "no index yet" in p.stderr, p


def test_an_unknown_option_is_reported_with_its_command_s_usage():
    """A new user's trial: `ctl scan NAME --all` printed the top level's usage (`indexerd [-h]
    ... COMMAND ...`), which says nothing about scan; now the command's own usage, and where
    --all belongs."""
    p = cli("ctl", "scan", "docs", "--all")
    assert p.returncode == 2, p
    assert p.stderr.startswith("usage: indexerd ctl scan"), p.stderr
    assert "unrecognized arguments: --all" in p.stderr and "ctl crawl" in p.stderr, p.stderr
    p = cli("index", "--bogus")
    assert p.returncode == 2 and p.stderr.startswith("usage: indexerd index"), p.stderr


def test_help_says_what_the_code_does_for_log_levels_and_the_socket_search_order():
    """`run --help` claimed `warning (default)` (run uses the config's log_level, default info)
    and left out critical; `ctl --help` left out root's /run/indexerd/indexerd.sock."""
    run = " ".join(cli("run", "--help").stdout.split())
    assert "critical" in run and "warning (default)" not in run, run
    assert "log_level" in run and "info" in run, run
    p = cli("run", "--log-level", "loud", "-c", "/nonexistent.toml")
    assert p.returncode == 2 and "critical" in p.stderr, p.stderr
    order = (r"\$RUNTIME_DIRECTORY/indexerd\.sock.*for root /run/indexerd/indexerd\.sock.*"
             r"for other users <state_dir>/indexerd\.sock.*then .*?/run/indexerd/indexerd\.sock")
    ctl = " ".join(cli("ctl", "--help").stdout.split())
    assert re.search(order, ctl), ctl
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").replace("`", "").split())
    assert re.search(order, readme)


def test_seeds_type_error_does_not_mention_glob_patterns(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[[sources.web]]\nname = "w"\nseeds = "http://x.test/"\n', encoding="utf-8")
    p = cli("check-config", "-c", str(cfg))
    assert p.returncode == 2 and "sources.web[0].seeds" in p.stderr, p.stderr
    assert "glob" not in p.stderr and "list" in p.stderr, p.stderr


def test_refused_second_daemon_does_not_log_stopped_cleanly(daemon):
    d = daemon
    p = cli("run", "-c", str(d.cfg), "--log-level", "info", timeout=30)     # same state dir
    assert p.returncode == 4, p.stderr
    assert "stopped cleanly" not in p.stderr, p.stderr
    other = d.base / "other.toml"                                        # same socket only
    other.write_text(d.cfg.read_text().replace(str(d.base / "state"), str(d.base / "state2")))
    p = cli("run", "-c", str(other), "--log-level", "info", timeout=30)
    assert p.returncode == 4 and "in use" in p.stderr, p.stderr
    assert "stopped cleanly" not in p.stderr, p.stderr
    assert "refused" in p.stderr.splitlines()[-1] or "in use" in p.stderr.splitlines()[-1], p.stderr


# -- 6. terminal escapes -----------------------------------------------------------------------
EVIL = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e"


def test_document_values_are_escaped_on_the_terminal(tmp_path):
    c = CLI(tmp_path / "state")
    t = tmp_path / "t"
    t.mkdir()
    (t / "page.html").write_text(f"<html><head><title>evil {EVIL} title</title></head>"
                                 f"<body><p>escapeword {EVIL} body</p></body></html>", encoding="utf-8")
    (t / f"name{EVIL}.txt").write_text("escapeword plain\nsecond line\n", encoding="utf-8")
    c.index(str(t))
    outputs = [c.run("ctl", "search", "escapeword").stdout,
               c.run("ctl", "explain", str(t / "page.html")).stdout,
               c.run("ctl", "explain", str(t / f"name{EVIL}.txt")).stdout,
               c.run("ctl", "report", "--dates").stdout,
               c.run("ctl", "changed", "--since", "2d").stdout]
    for out in outputs:
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", out), repr(out)
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202e" in outputs[0], outputs[0]
    assert "name\\x1b]0;pwned" in outputs[2] or "name\\x1b]0;pwned" in outputs[0]
    # JSON keeps the exact value (escaped by JSON itself)
    hits = c.search("escapeword")
    assert any(EVIL in (h["title"] or "") for h in hits), hits
    p = c.run("ctl", "explain", str(t / f"nosuch{EVIL}"), check=False)
    assert p.returncode == 1 and "\x1b" not in p.stderr and "\\x1b" in p.stderr, p.stderr


# -- 5. explain after a 304: the reason and its time belong together ----------------------------
def test_explain_after_a_304_pairs_the_reason_with_its_own_time(tmp_path, site, monkeypatch):
    from test_web import LM, Crawl, html

    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    site.static("/", html("Home", "threeohfour"), last_modified=LM, etag='"v1"')
    crawl = Crawl(tmp_path, site)
    assert crawl.run()["indexed"] == 1
    first = crawl.doc("/")
    time.sleep(1.1)                              # times are stored to the second
    assert crawl.run()["unchanged"] == 1
    assert [h.status for h in site.hits("/")][-1] == 304
    second = crawl.doc("/")
    assert second["reason"] == "not-modified"
    assert second["decided_at"] == second["checked_at"] != first["decided_at"], (first, second)
    c = CLI(crawl.state)
    out = json.loads(c.run("ctl", "explain", site.url("/"), "--json").stdout)
    line = [ln for ln in out["explanation"] if ln.startswith("last decision")][0]
    assert f"at {out['decided_at']}: not-modified" in line and out["decided_at"] == out["checked_at"], out
    # the text form prints no Python dict (the recrawl schedule was `{'interval_seconds': ...}`)
    text = c.run("ctl", "explain", site.url("/")).stdout
    recrawl = [ln for ln in text.splitlines() if ln.startswith("recrawl ")]
    assert recrawl and "{" not in text and "'" not in recrawl[0], text
    assert f"due_at {out['recrawl']['due_at']}" in recrawl[0], text


# -- 4. the ctl verbs for SQL rows (SQLite and PostgreSQL) --------------------------------------
def test_reindex_forget_explain_of_a_sql_row(sql_daemon):
    from test_sqlfeed import SOURCE, load_base

    d = sql_daemon
    load_base(d.feed)
    d.start()
    k2 = f"sql:{SOURCE}/2"
    # the row changes behind the queue's back (no trigger row): only a re-read can see it
    d.feed.db.exec("UPDATE articles SET body = 'reread okapi' WHERE id = 2")
    d.feed.db.exec("DELETE FROM queue WHERE status = 'W'")
    p = d.ctl("reindex", k2)
    assert p.returncode == 0, (p.stderr, d.log())
    assert json.loads(p.stdout)["indexed"] == 1, p.stdout
    assert d.feed.keys("okapi") == [k2]
    # forget: gone now; back at the next poll although the row did not change
    p = d.ctl("forget", k2)
    assert p.returncode == 0 and k2 in p.stdout, p.stderr
    assert d.feed.keys("okapi") == [] and d.feed.explain(k2) is None
    p = d.ctl("poll", SOURCE, "--wait")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["indexed"] == 1, p.stdout
    assert d.feed.keys("okapi") == [k2]
    # unknown keys: one exit code for explain, forget and reindex
    for verb in ("explain", "forget", "reindex"):
        p = d.ctl(verb, f"sql:{SOURCE}/999")
        assert p.returncode == 1 and "not known" in p.stderr, (verb, p.returncode, p.stderr)
    p = d.ctl("reindex", "sql:nosuch/1")
    assert p.returncode == 2 and "nosuch" in p.stderr, p.stderr
    # a row deleted behind the queue's back: reindex deletes its document
    d.feed.db.exec("DELETE FROM articles WHERE id = 4")
    d.feed.db.exec("DELETE FROM queue WHERE status = 'W'")
    p = d.ctl("reindex", f"sql:{SOURCE}/4")
    assert p.returncode == 0 and json.loads(p.stdout)["deleted"] == 1, (p.stdout, p.stderr)
    assert d.feed.keys("pangolin") == []


# -- 4. the ctl verbs for web pages -------------------------------------------------------------
def test_reindex_forget_explain_of_a_web_page(tree, site, monkeypatch):
    from test_web import LM, html, web_config

    monkeypatch.setitem(ENV, "NO_PROXY", "127.0.0.1,localhost")
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delitem(ENV, name, raising=False)
    d = tree
    site.add("/robots.txt", body=b"User-agent: *\nDisallow: /private/\n", headers={"Content-Type": "text/plain"})
    site.static("/", html("Home", "homeword", links=["/a.html", "/b.html"]), last_modified=LM, etag='"h1"')
    site.static("/a.html", html("A", "firstversion"), last_modified=LM, etag='"a1"')
    site.static("/b.html", html("B", "bravoword"), last_modified=LM, etag='"b1"')
    site.static("/private/x.html", html("X", "secretword"), last_modified=LM, etag='"x1"')
    text = web_config([site.url("/")], state_dir=d.base / "state", name="intranet", interval="1h")
    d.cfg.write_text(f'control_socket = "{d.sock}"\n' + text, encoding="utf-8")
    d.start(sources=("intranet",))
    try:
        assert {h["key"] for h in d.search("homeword OR firstversion OR bravoword")} == \
            {site.url("/"), site.url("/a.html"), site.url("/b.html")}
        before = len(site.log)
        site.static("/a.html", html("A", "secondversion"), last_modified=LM, etag='"a1"')  # same validators
        p = d.ctl("reindex", site.url("/a.html") + "#section-2")
        assert p.returncode == 0, (p.stderr, d.log_tail())
        assert json.loads(p.stdout)["indexed"] == 1, p.stdout
        new = site.log[before:]
        assert [h.path for h in new] == ["/a.html"], [h.path for h in new]   # no crawl of the site
        assert new[0].header("If-None-Match") is None and new[0].header("If-Modified-Since") is None
        assert [h["key"] for h in d.search("secondversion")] == [site.url("/a.html")]
        # robots.txt is obeyed: nothing is requested
        p = d.ctl("reindex", site.url("/private/x.html"))
        assert p.returncode == 0 and json.loads(p.stdout)["skipped"] == 1, (p.stdout, p.stderr)
        assert site.hits("/private/x.html") == []
        # forget (with a fragment): gone now, back at the next crawl
        p = d.ctl("forget", site.url("/b.html") + "#top")
        assert p.returncode == 0 and site.url("/b.html") in p.stdout, p.stderr
        assert d.search("bravoword") == []
        assert d.ctl("explain", site.url("/b.html") + "#top").returncode == 1
        p = d.ctl("crawl", "intranet", "--wait")
        assert p.returncode == 0, p.stderr
        assert [h["key"] for h in d.search("bravoword")] == [site.url("/b.html")]
        ex = json.loads(d.ctl_ok("explain", site.url("/b.html") + "#x", "--json"))
        assert ex["key"] == site.url("/b.html")
        # unknown and out-of-scope keys
        for verb in ("explain", "forget"):
            p = d.ctl(verb, site.url("/never.html"))
            assert p.returncode == 1 and "not known" in p.stderr, (verb, p.stderr)
        p = d.ctl("reindex", "http://elsewhere.invalid/page.html")
        assert p.returncode == 2 and "not inside" in p.stderr, p.stderr
    finally:
        d.stop()


def _web_env(monkeypatch):
    monkeypatch.setitem(ENV, "NO_PROXY", "127.0.0.1,localhost")
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delitem(ENV, name, raising=False)


def test_forgotten_page_comes_back_at_the_next_crawl_with_adaptive_recrawl(tree, site, monkeypatch):
    """Fix round: with adaptive recrawl on, a forgotten page kept its crawl row's next-due time
    (1 h to 7 d away), so the next crawl did not ask it and it stayed out of the index."""
    from test_web import LM, html, web_config

    _web_env(monkeypatch)
    d = tree
    site.static("/", html("Home", "homeword", links=["/b.html"]), last_modified=LM, etag='"h1"')
    site.static("/b.html", html("B", "bravoword"), last_modified=LM, etag='"b1"')
    text = web_config([site.url("/")], state_dir=d.base / "state", name="intranet", interval="1h",
                      max_recrawl_interval="7d")
    d.cfg.write_text(f'control_socket = "{d.sock}"\n' + text, encoding="utf-8")
    d.start(sources=("intranet",))
    try:
        assert [h["key"] for h in d.search("bravoword")] == [site.url("/b.html")]
        due = json.loads(d.ctl_ok("explain", site.url("/b.html"), "--json"))
        p = d.ctl("forget", site.url("/b.html"))
        assert p.returncode == 0, p.stderr
        assert d.search("bravoword") == []
        before = len(site.log)
        p = d.ctl("crawl", "intranet", "--wait")
        assert p.returncode == 0, p.stderr
        assert "/b.html" in [h.path for h in site.log[before:]], (due, [h.path for h in site.log[before:]])
        assert [h["key"] for h in d.search("bravoword")] == [site.url("/b.html")]
    finally:
        d.stop()


def test_crawl_all_asks_every_known_page_now_with_its_validators(tree, site, monkeypatch):
    """Issue 33: after an edit, adaptive recrawl may wait days to ask a page again; ``ctl crawl
    NAME --all`` asks every known page now, conditionally (304 for the unchanged ones), and the
    next plain crawl is back to what is due."""
    from test_web import LM, html, web_config

    _web_env(monkeypatch)
    d = tree
    pages = [f"/p{i}.html" for i in range(5)]
    site.static("/", html("Home", "homeword", links=pages), last_modified=LM, etag='"h1"')
    for i, path in enumerate(pages):
        site.static(path, html(f"P{i}", f"firstword{i}"), last_modified=LM, etag=f'"p{i}-1"')
    text = web_config([site.url("/")], state_dir=d.base / "state", name="intranet", interval="1h",
                      max_recrawl_interval="30d")
    d.cfg.write_text(f'control_socket = "{d.sock}"\n' + text, encoding="utf-8")
    d.start(sources=("intranet",))
    try:
        assert len(d.search("firstword0 OR firstword1 OR firstword2 OR firstword3 OR firstword4")) == 5
        for i in (1, 3):  # two pages edited, with new validators
            site.static(pages[i], html(f"P{i}", f"secondword{i}"), last_modified=LM, etag=f'"p{i}-2"')
        before = len(site.log)
        assert d.ctl("crawl", "intranet", "--wait").returncode == 0
        assert [h.path for h in site.log[before:] if h.path in pages] == []  # not due for an hour
        before = len(site.log)
        p = d.ctl("crawl", "intranet", "--all", "--wait")
        assert p.returncode == 0, p.stderr
        counts = json.loads(p.stdout)
        asked = {h.path: h for h in site.log[before:] if h.path in pages}
        assert sorted(asked) == pages, [h.path for h in site.log[before:]]
        assert all(h.header("If-None-Match") for h in asked.values())  # conditional, every one
        assert counts["indexed"] == 2 and counts["unchanged"] >= 3, counts
        assert {h["key"] for h in d.search("secondword1 OR secondword3")} == {site.url(pages[1]), site.url(pages[3])}
        before = len(site.log)
        assert d.ctl("crawl", "intranet", "--wait").returncode == 0
        assert [h.path for h in site.log[before:] if h.path in pages] == []  # the schedule again
        assert "--all" in cli("ctl", "crawl", "--help").stdout
        assert d.ctl("scan", "intranet", "--all").returncode == 2  # crawl only
    finally:
        d.stop()


def test_a_dead_site_fails_every_crawl_while_its_robots_verdict_is_cached(tree, monkeypatch):
    """Fix round: the second ``ctl crawl --wait`` of a dead site within the robots.txt
    'unreachable' cache time (5 min) said errors 0, exit 0: the cached verdict skipped every URL
    without failing the pass."""
    from test_web import web_config

    _web_env(monkeypatch)
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = tree
    text = web_config([f"http://127.0.0.1:{port}/"], state_dir=d.base / "state", name="dead", interval="1h")
    d.cfg.write_text(f'control_socket = "{d.sock}"\n' + text, encoding="utf-8")
    d.start(sources=("dead",))
    try:
        for attempt in range(2):
            p = d.ctl("crawl", "dead", "--wait")
            assert p.returncode == 1, (attempt, p.returncode, p.stdout, p.stderr)
            assert "no seed host answered" in p.stderr, (attempt, p.stderr)
            st = d.status()["sources"]["dead"]
            assert st["last_run"]["error"] and "no seed host answered" in st["last_run"]["error"], st
            assert st["last_run"]["counts"]["errors"] >= 1, st
    finally:
        d.stop()


def test_an_interrupted_forced_crawl_says_so_and_resumes_forced(tree, site, monkeypatch):
    """Fix round: SIGTERM during ``ctl reindex --source NAME`` answered rc 0 with counts, and the
    pass resumed after the restart was an ordinary one (conditional GETs: nothing re-indexed)."""
    from test_web import LM, html, web_config

    _web_env(monkeypatch)
    d = tree
    pages = [f"/p{i}.html" for i in range(40)]
    site.static("/", html("Home", "homeword", links=pages), last_modified=LM, etag='"h"')
    for i, path in enumerate(pages):
        site.static(path, html(f"P{i}", f"pageword{i}"), last_modified=LM, etag=f'"p{i}"')
    text = web_config([site.url("/")], state_dir=d.base / "state", name="intranet", interval="1h",
                      politeness={"min_delay": "0.1s", "good_guy_factor": 0.1, "max_backoff": "0.1s"})
    d.cfg.write_text(f'control_socket = "{d.sock}"\n' + text, encoding="utf-8")
    d.start(sources=("intranet",))
    client = None
    try:
        assert len(d.search("homeword")) == 1
        before = len(site.log)
        client = subprocess.Popen([sys.executable, "-m", "indexerd.cli.main", "ctl", "reindex", "--source",
                                   "intranet", "-c", str(d.client_cfg)], env=ENV, cwd=REPO,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        d.poll(lambda: len(site.log) - before, lambda n: n >= 5, 60, "the forced crawl started")
        d.stop()
        out, err = client.communicate(timeout=60)
        assert client.returncode != 0, (client.returncode, out, err)
        assert "interrupted" in err, err
        asked = {h.path for h in site.log[before:]}
        assert len(asked - {"/", "/robots.txt"}) < len(pages), "the pass was not interrupted"
        restart = len(site.log)
        d.start(sources=("intranet",))
        d.settle(timeout=60)
        resumed = [h for h in site.log[restart:] if h.path in pages]
        assert {h.path for h in resumed} == set(pages) - asked, sorted(h.path for h in resumed)
        conditional = [h.path for h in resumed if h.header("If-None-Match") or h.header("If-Modified-Since")]
        assert conditional == [], conditional   # the resumed pass is still forced
    finally:
        if client is not None and client.poll() is None:
            client.kill()
        if d.alive():
            d.stop()


@pytest.mark.slow
@pytest.mark.parametrize("request_args", [("crawl", "intranet", "--all", "--wait"),
                                          ("reindex", "--source", "intranet")])
def test_a_request_a_running_pass_does_not_cover_gets_a_pass_of_its_own(tree, site, monkeypatch, request_args):
    """A new user's trial: ``ctl crawl NAME --all --wait`` sent while a plain pass ran replied
    with that pass's counts the moment it ended, before the ``--all`` pass it asked for had
    asked anything; ``ctl reindex --source NAME`` behind a pass running over 30 s was worse: the
    pass queued for it ran unforced (conditional GETs, nothing re-indexed) and the reply was the
    running pass's counts.  Either request waits for a pass begun after it, of its kind."""
    import threading

    from test_web import LM, html, web_config

    _web_env(monkeypatch)
    d = tree
    pages = [f"/p{i}.html" for i in range(4)]
    hold, release = threading.Event(), threading.Event()

    def home(req):  # the seed: held while ``hold`` is set, so the pass asking it keeps running
        if hold.is_set():
            release.wait(120)
        return 200, {"Content-Type": "text/html; charset=utf-8", "Last-Modified": LM, "ETag": '"h"'}, \
            html("Home", "homeword", links=pages)

    site.add("/", handler=home)
    for i, path in enumerate(pages):
        site.static(path, html(f"P{i}", f"pageword{i}"), last_modified=LM, etag=f'"p{i}"')
    text = web_config([site.url("/")], state_dir=d.base / "state", name="intranet", interval="1h",
                      timeout="150s")
    d.cfg.write_text(f'control_socket = "{d.sock}"\n' + text, encoding="utf-8")
    d.start(sources=("intranet",))
    client = None
    try:
        assert len(d.search("pageword0")) == 1
        hold.set()
        before = len(site.log)
        assert d.ctl("crawl", "intranet").returncode == 0  # a plain pass, held at the seed
        d.poll(lambda: [h for h in site.log[before:] if h.path == "/" and h.completed is None], bool, 60,
               "the running pass held at the seed")
        queued = d.log().count("a pass is already running; another will follow it")
        client = subprocess.Popen([sys.executable, "-m", "indexerd.cli.main", "ctl", *request_args,
                                   "-c", str(d.client_cfg)], env=ENV, cwd=REPO,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        d.poll(lambda: d.log().count("a pass is already running; another will follow it"),
               lambda n: n > queued, 60, "the request queued behind the running pass")
        asked_before = {h.path for h in site.log[before:]}
        mark = len(site.log)
        release.set()
        out, err = client.communicate(timeout=120)
        after = site.log[mark:]  # what was asked by the time the reply came
        assert client.returncode == 0, (client.returncode, out, err)
        counts = json.loads(out)
        counts = counts.get("counts", counts)
        for path in pages:
            # the running pass asks what it had not asked yet; the request's own pass asks every page
            want = 1 if path in asked_before else 2
            got = [h for h in after if h.path == path and h.completed is not None]
            assert len(got) >= want, (path, want, [h.path for h in after], counts, d.log_tail(40))
        if request_args[0] == "reindex":  # forced: every page asked without validators, re-indexed
            last = {h.path: h for h in after if h.path in pages}
            assert not [p for p, h in last.items() if h.header("If-None-Match") or h.header("If-Modified-Since")]
            assert counts["indexed"] >= len(pages), counts
    finally:
        release.set()
        if client is not None and client.poll() is None:
            client.kill()
        if d.alive():
            d.stop()


def test_forgotten_sql_row_of_a_source_without_a_queue_comes_back_once(sql_daemon):
    """Without incremental_sql every pass is a full load: it brings the row back, and the
    forgotten id is not read a second time (seen counts each row once)."""
    from test_sqlfeed import BASE_ROWS, SOURCE, load_base

    d = sql_daemon
    d.feed.write_config(incremental_sql=None, pre_update_sql=None, post_update_sql=None)
    load_base(d.feed)
    d.start()
    p = d.ctl("forget", f"sql:{SOURCE}/3")
    assert p.returncode == 0, p.stderr
    assert d.feed.keys("narwhal") == []
    p = d.ctl("poll", SOURCE, "--wait")
    assert p.returncode == 0, p.stderr
    counts = json.loads(p.stdout)
    assert counts["seen"] == len(BASE_ROWS) and counts["indexed"] == 1, counts
    assert d.feed.keys("narwhal") == [f"sql:{SOURCE}/3"]


# -- 7. the real daemon's control socket under slow and hostile clients -------------------------
def test_daemon_answers_status_with_40_silent_clients_and_a_deeply_nested_request(daemon):
    d = daemon
    clients = []
    try:
        for i in range(40):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(os.fspath(d.sock))
            if i % 2:
                s.sendall(b'{"cmd": "sta')           # half of them drip a request that never ends
            clients.append(s)
        t0 = time.monotonic()
        st = d.status()
        assert st["pid"] == d.proc.pid and time.monotonic() - t0 < 10
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(20)
            s.connect(os.fspath(d.sock))
            s.sendall(b'{"cmd": "status", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
        r = json.loads(reply)
        assert r["ok"] is False and r["exit_code"] == 2 and "nested" in r["error"], r
    finally:
        for s in clients:
            s.close()
    d.assert_alive()
    assert d.status()["pid"] == d.proc.pid


def test_log_lines_escape_control_characters_from_file_names(tmp_path):
    """Log lines go to a terminal too (``indexerd index`` run by hand): a file name's escape
    sequence is shown escaped, not sent; a traceback keeps its line breaks."""
    c = CLI(tmp_path / "state")
    t = tmp_path / "t"
    t.mkdir()
    (t / f"empty{EVIL}.txt").write_bytes(b"")
    p = c.run("index", "--log-level", "debug", str(t))  # a skip is a debug line
    line = [ln for ln in p.stderr.splitlines() if "skipped empty" in ln]
    assert line and "\\x1b]0;pwned\\x07" in line[0], p.stderr
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", p.stderr), repr(p.stderr)


def test_search_sort_date_gives_newest_first_with_and_without_the_daemon(tree):
    """``ctl search --sort date``: newest ``last_modified`` first, through the daemon and from
    the state dir alike; an unknown order is a usage error (exit 2)."""
    d = tree
    for name, when in (("a.txt", 1_700_000_000), ("notes.txt", 1_710_000_000), ("bar/abc.txt", 1_690_000_000)):
        write(d.root / name, f"sortword in {name}\n")    # not identical: identical ones are one hit
        os.utime(d.root / name, (when, when))
    query = ("ctl", "search", "sortword", "--json", "--sort", "date", "-c", str(d.cfg))
    newest_first = ["notes.txt", "a.txt", "abc.txt"]
    d.start()
    try:
        d.poll(lambda: cli(*query).stdout, lambda out: len(json.loads(out or "[]")) == 3, 20.0,
               "three hits for sortword")
        up = json.loads(cli(*query).stdout)
        assert [h["path"].rsplit("/", 1)[-1] for h in up] == newest_first, up
        p = cli("ctl", "search", "sortword", "--sort", "newest", "-c", str(d.cfg))
        assert p.returncode == 2 and "--sort" in p.stderr, p.stderr
    finally:
        d.stop()
    down = json.loads(cli(*query).stdout)
    assert [h["path"].rsplit("/", 1)[-1] for h in down] == newest_first, down


def test_status_of_an_index_not_readable_now_says_so(capsys) -> None:
    # a trial: during a database outage `ctl status` printed "index (postgresql): None documents"
    from indexerd.output.terminal import print_status

    doc = {"pid": 1, "uptime_seconds": 5, "state_dir": "/s", "change_queue": 0, "sources": {},
           "writer": {"queue": 0, "last_commit": None, "last_error": None},
           "index": {"engine": "postgresql", "documents": None, "size_bytes": None, "segments": None,
                     "error": "PostgreSQL index: the server does not answer"}}
    print_status(doc)
    out = capsys.readouterr().out
    assert "index (postgresql): not readable now; last commit -" in out
    assert "index error: PostgreSQL index: the server does not answer" in out and "None" not in out
    doc["index"] = {"documents": None, "size_bytes": None, "segments": None}
    print_status(doc)
    assert "index: not open yet;" in capsys.readouterr().out


def test_one_of_a_thing_is_counted_in_the_singular(capsys) -> None:
    """A new user's trial: ``ctl reload`` said "1 sources"; so did systemd's status line, and
    ``ctl status`` "1 documents, 1 segments" and a crawl's "1 pages fetched"."""
    from types import SimpleNamespace

    from indexerd.core.plurals import counted
    from indexerd.daemon.sourcestate import SourceState
    from indexerd.daemon.status import status_line
    from indexerd.output.terminal import _progress_line, print_status

    assert [counted(n, "source") for n in (0, 1, 2)] == ["0 sources", "1 source", "2 sources"]
    assert counted(1, "match", "matches") == "1 match" and counted(3, "match", "matches") == "3 matches"
    d = SimpleNamespace(states={"docs": SourceState()}, sources={"docs": 1},
                        reloader=SimpleNamespace(info={"ok": None, "at": None, "error": None}))
    assert status_line(d) == "1 source, 0 watched"
    assert _progress_line({"unit": "pages", "done": 1, "total": 2}) == "1 page fetched, 1 queued"
    assert _progress_line({"unit": "rows", "found": 1, "done": 1, "total": 1}) == "1 row read, 1 of 1 indexed"
    assert _progress_line({"unit": "files", "found": 1, "done": 0, "total": 1}) == "0/1 read, 1 file found"
    print_status({"pid": 1, "uptime_seconds": 5, "state_dir": "/s", "change_queue": 0, "sources": {},
                  "writer": {"queue": 0, "last_commit": None, "last_error": None},
                  "index": {"engine": "whoosh", "documents": 1, "size_bytes": 2000, "segments": 1}})
    assert "index (whoosh): 1 document, 1 segment, 0.0 MB;" in capsys.readouterr().out
