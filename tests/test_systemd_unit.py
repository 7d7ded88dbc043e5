"""The systemd unit (systemd/indexerd.service) against the daemon it starts."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[1]
UNIT = REPO / "systemd" / "indexerd.service"


def unit_settings(path: Path = UNIT) -> dict[str, list[str]]:
    """``Key`` -> every value it is given in the unit (systemd.syntax(7): later lines add)."""
    out: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        out.setdefault(key.strip(), []).append(value.strip())
    return out


def test_a_bad_config_is_not_restarted(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('state_dir = "%s"\nlog_levle = "info"\n' % (tmp_path / "state"))
    p = subprocess.run([sys.executable, "-m", "indexerd.cli.main", "run", "-c", str(bad)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "log_levle" in p.stderr, (p.returncode, p.stderr)
    settings = unit_settings()
    assert settings["Restart"] == ["on-failure"]
    prevented = " ".join(settings.get("RestartPreventExitStatus", [])).split()
    assert str(p.returncode) in prevented      # no restart loop up to the start limit
    assert "4" not in prevented                # another instance holding the state dir: retried


# -- hardening: the exposure score, and a real daemon session inside the syscall filter --------
def _tool(name: str) -> str:
    """The path of a required tool; a missing one fails the test (.ci/run installs them)."""
    import shutil

    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")
    if path is None:
        pytest.fail(f"{name} is not installed (Debian package {TOOLS[name]}; .ci/run installs it)",
                    pytrace=False)
    return path


TOOLS = {"systemd-analyze": "systemd", "strace": "strace"}


def test_unit_exposure_is_at_most_3():
    p = subprocess.run([_tool("systemd-analyze"), "security", "--offline=true", "--no-pager", str(UNIT)],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", p.stdout)
    assert m, (p.returncode, p.stdout[-2000:], p.stderr)
    assert float(m.group(1)) <= 3.0, p.stdout


def test_unit_lets_the_listener_tell_which_local_user_asks():
    """The HTTP listener refuses local users by the kernel's socket table (/proc/net/tcp);
    ProcSubset=pid would hide it and every request would be refused."""
    from indexerd.daemon.http.peer import TCP_TABLES

    unit = UNIT.read_text(encoding="utf-8")
    assert not re.search(r"^ProcSubset=pid", unit, re.M)
    assert all(t.startswith("/proc/net/") for t in TCP_TABLES)


def _syscall_set(spec: str, analyze: str, seen: set[str] | None = None) -> set[str]:
    """The system calls of ``@group`` or a call name, by systemd-analyze syscall-filter (recursive)."""
    if not spec.startswith("@"):
        return {spec}
    seen = set() if seen is None else seen
    if spec in seen:
        return set()
    seen.add(spec)
    p = subprocess.run([analyze, "syscall-filter", "--no-pager", spec], capture_output=True, text=True,
                       timeout=60, check=True)
    out: set[str] = set()
    for line in p.stdout.splitlines()[1:]:
        item = line.strip()
        if item and not item.startswith("#"):
            out |= _syscall_set(item, analyze, seen)
    return out


def unit_allowed_syscalls() -> set[str]:
    """The allow list the unit's ``SystemCallFilter=`` lines make (systemd.exec(5): a ``~`` line denies)."""
    analyze = _tool("systemd-analyze")
    allowed: set[str] = set()
    for value in unit_settings()["SystemCallFilter"]:
        deny = value.startswith("~")
        names = set().union(*(_syscall_set(s, analyze) for s in value.lstrip("~").split()))
        allowed = allowed - names if deny else allowed | names
    return allowed


_CALL = re.compile(r"^\d+\s+(?:<\.\.\. (\w+) resumed>|(\w+)\()")
_PROT = re.compile(r"^\d+\s+(mmap|mprotect|pkey_mprotect)\((.*)")


def _traced_calls(trace: Path) -> tuple[set[str], list[str]]:
    """(every system call name in an ``strace -f`` log, calls MemoryDenyWriteExecute= refuses)."""
    names, wx = set(), []
    with open(trace, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            m = _CALL.match(line)
            if m:
                names.add(m.group(1) or m.group(2))
            m = _PROT.match(line)
            if m and "PROT_EXEC" in m.group(2):
                # systemd.exec(5): mmap with write+exec, mprotect/pkey_mprotect adding exec
                if m.group(1) != "mmap" or "PROT_WRITE" in m.group(2):
                    wx.append(line.strip())
    return names, wx


def test_daemon_session_stays_inside_the_units_syscall_filter(tmp_path):
    """Tree (text, HTML, PDF) + loopback site + SQLite and PostgreSQL queues: start, edit, search,
    crawl, poll, reload, stop, traced by strace (every library the daemon loads is exercised)."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.txt").write_text("apple original\n")
    (tree / "b.html").write_text("<html><head><title>B page</title></head><body><main>banana</main></body></html>")
    import pypdf                                        # loads pypdf's parser in the daemon too

    writer = pypdf.PdfWriter()
    writer.add_blank_page(width=200, height=200)
    writer.add_metadata({"/Title": "Grape sheet"})
    with open(tree / "c.pdf", "wb") as fh:
        writer.write(fh)
    db = tmp_path / "app.db"
    con = sqlite3.connect(db)
    con.executescript((REPO / "etc" / "sql-queue-sqlite.sql").read_text())
    con.execute("INSERT INTO articles (id, title, body, updated) VALUES (1, 'Cherry', 'cherry text', "
                "'2024-01-01T00:00:00Z')")
    con.commit()
    sql = (REPO / "etc" / "sql-sqlite.toml").read_text()
    sql = sql[sql.index("[[sources.sql]]"):].replace("sqlite:////var/lib/app/app.db", f"sqlite:///{db}")
    from pg import PgServer

    pg = PgServer.start()               # PgUnavailable fails the test: psycopg is checked too
    try:
        pg.wait_ready()
        pg_url = pg.create_database("trace")
        pg.admin((REPO / "etc" / "sql-queue-postgresql.sql").read_text(), dbname="trace")
        pg.admin("INSERT INTO articles (id, title, body, updated) VALUES (7, 'Fig', 'feijoa text', now())",
                 dbname="trace")
        pg_sql = (REPO / "etc" / "sql-postgresql.toml").read_text()
        pg_sql = pg_sql[pg_sql.index("[[sources.sql]]"):].replace('name = "articles"', 'name = "pgarticles"')
        pg_sql = re.sub(r'(?m)^url = .*$', f'url = "{pg_url}"', pg_sql)
        pg_sql = re.sub(r'(?m)^password_env = .*$', "", pg_sql)
        _session(tmp_path, tree, db, con, sql + "\n" + pg_sql)
    finally:
        pg.stop()


def _session(tmp_path: Path, tree: Path, db: Path, con: sqlite3.Connection, sql: str) -> None:
    from httpsite import Site

    allowed = unit_allowed_syscalls()
    assert {"read", "openat", "inotify_add_watch"} <= allowed and "reboot" not in allowed
    strace = _tool("strace")
    with Site() as site:
        site.static("/", b"<html><title>Home</title><body><a href='/d.html'>d</a> damson</body></html>",
                    last_modified="Sat, 08 Sep 2001 21:46:40 GMT", headers={"Content-Type": "text/html"})
        site.static("/d.html", b"<html><title>D</title><body>durian</body></html>",
                    last_modified="Sat, 08 Sep 2001 21:46:40 GMT", headers={"Content-Type": "text/html"})
        site.add("/robots.txt", body=b"User-agent: *\nAllow: /\n", headers={"Content-Type": "text/plain"})
        cfg = tmp_path / "indexerd.toml"
        def write_config(interval: str) -> None:
            cfg.write_text(f'''state_dir = "{tmp_path / 'state'}"
control_socket = "{tmp_path / 'ctl.sock'}"
[[sources.filesystem]]
name = "docs"
path = "{tree}"
interval = "{interval}"
[[sources.web]]
name = "site"
seeds = ["{site.url('/')}"]
interval = "1h"
mirror_dir = "{tmp_path / 'mirror'}"
[sources.web.politeness]
min_delay = "0s"
''' + sql)
        write_config("1h")
        trace = tmp_path / "strace.log"
        trace_reload = tmp_path / "strace-reload.log"
        env = {k: v for k, v in os.environ.items() if k not in ("INDEXERD_CONFIG", "STATE_DIRECTORY",
                                                                 "RUNTIME_DIRECTORY", "NOTIFY_SOCKET")}
        log = tmp_path / "daemon.log"
        with open(log, "wb") as fh:
            proc = subprocess.Popen([strace, "-f", "-qq", "-o", str(trace), sys.executable, "-m", "indexerd.cli.main",
                                     "run", "-c", str(cfg), "--log-level", "info"],
                                    stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=REPO)

        def ctl(*args: str) -> str:
            p = subprocess.run([sys.executable, "-m", "indexerd.cli.main", "ctl", *args, "-c", str(cfg)],
                               capture_output=True, text=True, env=env, timeout=300)
            assert p.returncode == 0, (args, p.stdout, p.stderr, log.read_text()[-3000:])
            return p.stdout

        def until(what: str, ok, timeout: float = 180.0):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                assert proc.poll() is None, log.read_text()[-3000:]
                try:
                    if ok():
                        return
                except AssertionError:
                    pass
                time.sleep(0.3)
            pytest.fail(f"{what}: not within {timeout} s\n{log.read_text()[-3000:]}", pytrace=False)

        try:
            until("daemon ready", lambda: "ready" in log.read_text())
            ctl("scan", "docs", "--wait")
            ctl("crawl", "site", "--wait")
            con.execute("INSERT INTO articles (id, title, body, updated) VALUES (2, 'Elder', 'elderberry', "
                        "'2024-01-02T00:00:00Z')")
            con.commit()
            ctl("poll", "articles", "--wait")
            (tree / "a.txt").write_text("apple edited fig\n")
            until("live edit searchable", lambda: "a.txt" in ctl("search", "fig", "--json"))
            ctl("poll", "pgarticles", "--wait")
            for word in ("banana", "durian", "elderberry", "cherry", "grape", "feijoa"):
                assert json.loads(ctl("search", word, "--json")), word
            write_config("2h")
            # `systemctl reload` as the unit does it: its ExecReload= command, under the same filter
            cmd = unit_settings()["ExecReload"][0].lstrip("-+@!:").split()
            assert cmd[0].endswith("/indexerd"), cmd
            cmd = [str(cfg) if a == "/etc/indexerd/indexerd.toml" else a for a in cmd[1:]]
            p = subprocess.run([strace, "-f", "-qq", "-o", str(trace_reload), sys.executable, "-m",
                                "indexerd.cli.main", *cmd], capture_output=True, text=True, env=env, timeout=300)
            assert p.returncode == 0, (cmd, p.stdout, p.stderr)
            until("reload", lambda: "reloaded" in log.read_text())
            daemon_pid = json.loads(ctl("status", "--json"))["pid"]   # strace's child
            os.kill(daemon_pid, signal.SIGHUP)                      # kill -HUP works as well
            until("second reload", lambda: log.read_text().count("reloaded") >= 2)
            ctl("status")
        finally:
            try:
                os.kill(json.loads(ctl("status", "--json"))["pid"], signal.SIGTERM)
            except (AssertionError, ProcessLookupError, ValueError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)
            con.close()
    assert proc.returncode == 0, log.read_text()[-3000:]
    assert (tmp_path / "mirror").is_dir()
    for path, what, used in ((trace, "the daemon", {"inotify_add_watch", "connect", "pwrite64", "execve"}),
                             (trace_reload, "ExecReload=", {"connect", "execve"})):
        names, wx = _traced_calls(path)
        assert used <= names, (what, sorted(names))                 # it traced the work
        outside = sorted(names - allowed)
        assert not outside, f"{what}: system calls outside the unit's SystemCallFilter: {outside}"
        assert not wx, f"{what}: MemoryDenyWriteExecute= would refuse: {wx[:5]}"
