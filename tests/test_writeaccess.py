"""Paths indexerd must write (state dir, mirror_dir, a SQLite queue it marks) and cannot:
check-config and the daemon's start name each, its key and the fix.

The read-only case is the one systemd's ProtectSystem=strict makes; it is made here the way
systemd makes it, by a read-only bind mount in a private mount namespace (``unshare -m``, root).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ENV = {k: v for k, v in os.environ.items()
       if k not in ("INDEXERD_CONFIG", "STATE_DIRECTORY", "RUNTIME_DIRECTORY", "NOTIFY_SOCKET",
                    "WATCHDOG_USEC", "JOURNAL_STREAM")}
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces and other users need root (CI runs as root)")


def _setup(base: Path) -> tuple[Path, Path]:
    """``base/ro`` holds a mirror dir and a SQLite queue with post_update_sql; returns (config, ro)."""
    ro = base / "ro"
    (ro / "mirror").mkdir(parents=True)
    db = ro / "queue.db"
    with sqlite3.connect(db) as c:
        c.execute("create table docs (id integer primary key, body text)")
        c.execute("create table q (seq integer primary key, id integer, action text, status text)")
    cfg = base / "indexerd.toml"
    cfg.write_text(f'''state_dir = "{base / 'state'}"
control_socket = "{base / 'ctl.sock'}"
[[sources.web]]
name = "site"
seeds = ["http://127.0.0.1:9/"]
interval = "1h"
mirror_dir = "{ro / 'mirror'}"
[[sources.sql]]
name = "queue"
url = "sqlite:///{db}"
interval = "1h"
full_sql = "select id, body from docs"
incremental_sql = "select q.seq, q.id, q.action, d.body from q left join docs d on d.id = q.id where q.status = 'I'"
pre_update_sql = "update q set status = 'I' where status = 'W'"
post_update_sql = "update q set status = 'C' where seq = {{sequenceId}}"
text_columns = ["body"]
''')
    return cfg, ro


def _in_read_only(ro: Path, *cmd: str) -> list[str]:
    """``cmd`` in a private mount namespace where ``ro`` is a read-only bind mount."""
    script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
    return ["unshare", "-m", "sh", "-c", script, "sh", str(ro), *cmd]


@pytest.fixture
def base():
    d = Path(tempfile.mkdtemp(prefix="ixw"))
    os.chmod(d, 0o755)
    yield d
    subprocess.run(["rm", "-rf", str(d)], check=False)


@root_only
def test_check_config_names_read_only_mirror_and_sqlite_queue(base):
    cfg, ro = _setup(base)
    ok = subprocess.run([sys.executable, "-m", "indexerd.cli.main", "check-config", "-c", str(cfg)],
                        capture_output=True, text=True, env=ENV, timeout=120)
    assert ok.returncode == 0 and "warning" not in ok.stderr, ok.stderr
    p = subprocess.run(_in_read_only(ro, sys.executable, "-m", "indexerd.cli.main", "check-config", "-c", str(cfg)),
                       capture_output=True, text=True, env=ENV, timeout=120)
    assert p.returncode == 0, p.stderr                   # a warning, not a refusal
    warnings = [line for line in p.stderr.splitlines() if line.startswith("indexerd: warning:")]
    assert len(warnings) == 2, p.stderr
    queue, mirror = warnings                             # kinds in the registry's order: sql, then web
    assert f"sources.web[0].mirror_dir: {ro / 'mirror'} is not writable" in mirror
    assert "read-only file system" in mirror and f"ReadWritePaths={ro / 'mirror'}" in mirror
    assert f"sources.sql[0].url: {ro / 'queue.db'} is not writable" in queue
    assert f"ReadWritePaths={ro}`" in queue                # the directory: SQLite's journal goes there


@root_only
def test_daemon_start_warns_once_per_unwritable_path(base):
    cfg, ro = _setup(base)
    log = base / "daemon.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(_in_read_only(ro, sys.executable, "-m", "indexerd.cli.main", "run", "-c", str(cfg),
                                              "--log-level", "info"),
                                stdout=fh, stderr=subprocess.STDOUT, env=ENV)
    try:
        deadline = time.monotonic() + 60
        while "ready" not in log.read_text() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        text = log.read_text()
        assert "ready" in text, text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    lines = [line for line in text.splitlines() if "is not writable" in line]
    assert len(lines) == 2 and "WARNING" in lines[0], text
    assert "sources.sql[0].url" in lines[0] and "mirror_dir" in lines[1]


@root_only
def test_check_config_as_the_service_user(base):
    """--user: the service user's own access (owner, group, mode), not root's."""
    cfg, ro = _setup(base)
    def run() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "indexerd.cli.main", "check-config", "-c", str(cfg),
                               "--user", "nobody"], capture_output=True, text=True, env=ENV, timeout=120)
    p = run()
    assert p.returncode == 0
    keys = [line.split(":")[2].strip() for line in p.stderr.splitlines() if "is not writable by user nobody" in line]
    assert keys == ["state_dir", "sources.sql[0].url", "sources.web[0].mirror_dir"], p.stderr
    # give group nogroup (nobody's) write access, the way an admin would: then nothing to say
    gid = int(subprocess.run(["id", "-g", "nobody"], capture_output=True, text=True).stdout)
    for path in (base, ro, ro / "mirror", ro / "queue.db"):
        os.chown(path, -1, gid)
        os.chmod(path, 0o770 if path.is_dir() else 0o660)
    os.chmod(base, 0o775)
    p = run()
    assert p.returncode == 0 and "not writable" not in p.stderr, p.stderr
    bad = subprocess.run([sys.executable, "-m", "indexerd.cli.main", "check-config", "-c", str(cfg), "--user",
                          "no-such-user-x"], capture_output=True, text=True, env=ENV, timeout=120)
    assert bad.returncode == 2 and "no such user" in bad.stderr


@root_only
def test_tree_in_a_0700_home_is_reported_for_the_service_user(base):
    """Debian's homes are 0700: the service user is stopped at the home, whatever ProtectHome says."""
    home = base / "home" / "alice"
    notes = home / "notes"
    notes.mkdir(parents=True)
    (notes / "todo.txt").write_text("buy milk\n")
    os.chmod(base / "home", 0o755)
    os.chmod(home, 0o700)
    cfg = base / "indexerd.toml"
    cfg.write_text(f'state_dir = "{base / "state"}"\n[[sources.filesystem]]\nname = "notes"\npath = "{notes}"\n')
    cmd = [sys.executable, "-m", "indexerd.cli.main", "check-config", "-c", str(cfg), "--user", "nobody"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=120)
    assert p.returncode == 0, p.stderr
    line = next(x for x in p.stderr.splitlines() if "sources.filesystem[0].path" in x)
    assert f"{notes} is not readable by user nobody: no search (x) permission on {home}" in line
    assert "setfacl -m u:nobody:x" in line
    # group access instead of an ACL: x on the home for the group, r on the tree
    gid = int(subprocess.run(["id", "-g", "nobody"], capture_output=True, text=True).stdout)
    os.chown(home, -1, gid)
    os.chmod(home, 0o710)
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=120)
    assert "sources.filesystem[0].path: " + str(notes) + " is not readable" not in p.stderr, p.stderr


@root_only
def test_check_config_as_the_service_user_names_what_the_unit_would_break(base):
    """A sysadmin's first week: a tree under /tmp passed ``check-config --user`` although the
    unit's PrivateTmp=yes shows the service an empty directory there; an interpreter the
    service user cannot run (a venv made from a Python in root's home) passed too."""
    from indexerd.config import parse_config
    from indexerd.daemon.writeaccess import unit_warnings

    tree = base / "tree"  # base is under /tmp
    tree.mkdir()
    kept = Path("/var/tmp") / base.name
    cfg = parse_config(f'state_dir = "{base / "state"}"\n[[sources.filesystem]]\nname = "t"\npath = "{tree}"\n'
                       f'[[sources.filesystem]]\nname = "v"\npath = "{kept}"\n'
                       f'[[sources.filesystem]]\nname = "srv"\npath = "/srv/docs"\n', "<test>")
    private = base / "private"
    private.mkdir(mode=0o700)
    python = private / "python3"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    out = unit_warnings(cfg, "nobody", interpreter=str(python))
    assert [m.split(":")[0] for m in out] == ["sources.filesystem[0].path", "sources.filesystem[1].path",
                                             f"the Python interpreter {python} is not executable by user nobody"]
    assert "PrivateTmp=yes" in out[0] and f"is under {os.path.realpath('/tmp')}" in out[0]
    assert f"no search (x) permission on {private}" in out[2] and "/usr/bin/python3 -m venv" in out[2]
    private.chmod(0o755)
    assert len(unit_warnings(cfg, "nobody", interpreter=str(python))) == 2  # runnable now
    cmd = [sys.executable, "-m", "indexerd.cli.main", "check-config", "-c", "/dev/stdin", "--user", "nobody"]
    cfgfile = base / "c.toml"
    cfgfile.write_text(f'state_dir = "{base / "state"}"\n[[sources.filesystem]]\nname = "t"\npath = "{tree}"\n')
    cmd[5] = str(cfgfile)
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=120)
    assert p.returncode == 0 and "PrivateTmp=yes" in p.stderr, p.stderr

