"""A throw-away PostgreSQL server for the tests: a temp dir, a Unix socket, no TCP.

Usage (see ``tests/test_sqlfeed.py``)::

    server = PgServer.start()          # raises PgUnavailable when the binaries are missing
    url = server.create_database("t1") # postgresql+psycopg://postgres@/t1?host=<sockdir>
    ...
    server.stop()                      # stops the server and removes every file

The binaries come from ``/usr/lib/postgresql/<version>/bin`` (the newest version found), else
from ``$PATH``.  PostgreSQL refuses to run as root, so when the tests run as root ``initdb`` and
``pg_ctl`` run as the ``postgres`` user (``runuser -u postgres --``, else ``setpriv``) in a
``tempfile.mkdtemp()`` dir chowned to it.  The dir is short (``/tmp/ixpgXXXXXXXX``): a Unix
socket path may be at most 107 bytes and the socket is ``<dir>/.s.PGSQL.5432``.

Authentication: ``initdb -A trust`` for the superuser ``postgres``; every other role must give
its password (``scram-sha-256``) over the socket, so a test can prove that a configured
password is really sent (:meth:`PgServer.create_role`).

A hot standby of a server (streaming replication, read-only queries; :meth:`PgServer.start_standby`)
is a second server in its own temp dir and socket dir, made by ``pg_basebackup -R`` from the
primary (which has ``wal_level = replica`` and lets ``postgres`` connect for replication over
the socket); :meth:`PgServer.wait_replayed` awaits its replay of the primary's WAL.

Nothing here imports pytest: :func:`pg_or_skip` is the one place that decides between
``pytest.skip`` (locally) and ``pytest.fail`` (in CI, ``$CI`` set: a missing server must never
pass silently).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

START_TIMEOUT = 30          # pg_ctl -w -t
COMMAND_TIMEOUT = 60        # any one subprocess


class PgUnavailable(RuntimeError):
    """No PostgreSQL server binaries (or no way to run them) on this machine."""


def find_bindir() -> Path:
    """The newest ``/usr/lib/postgresql/*/bin`` holding initdb, postgres and pg_ctl, else the
    directory of ``initdb`` on ``$PATH``.

    Raises:
        PgUnavailable: none found.
    """
    def version(p: str) -> tuple:
        m = re.search(r"/postgresql/([\d.]+)/bin$", p)
        return tuple(int(x) for x in m.group(1).split(".")) if m else (0,)

    needed = ("initdb", "pg_ctl", "postgres")
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        if all(os.access(os.path.join(d, n), os.X_OK) for n in needed):
            return Path(d)
    initdb = shutil.which("initdb")
    if initdb and all(shutil.which(n) for n in needed):
        return Path(initdb).parent
    raise PgUnavailable("PostgreSQL server binaries not found (looked in /usr/lib/postgresql/*/bin "
                        "and $PATH for initdb, pg_ctl, postgres); install postgresql (e.g. "
                        "apt-get install postgresql-15)")


def _as_postgres_prefix() -> list[str]:
    """The command prefix that runs a program as the ``postgres`` user (empty when not root)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return []
    import pwd

    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise PgUnavailable("running as root and there is no 'postgres' user to run the server as") from None
    if shutil.which("runuser"):
        return ["runuser", "-u", "postgres", "--"]
    if shutil.which("setpriv"):
        pw = pwd.getpwnam("postgres")
        return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups"]
    raise PgUnavailable("running as root and neither runuser nor setpriv is available to drop to 'postgres'")


class PgServer:
    """One running server.  Build it with :meth:`start`; always call :meth:`stop`."""

    def __init__(self, bindir: Path, base: Path, prefix: list[str]) -> None:
        self.bindir = bindir
        self.base = base            # the temp dir: data/, the socket, the log
        self.data = base / "data"
        self.sockdir = base         # short: the socket is <base>/.s.PGSQL.5432
        self.log = base / "server.log"
        self.prefix = prefix
        self.running = False
        self._dbs = 0

    # -- lifecycle ------------------------------------------------------------------------
    @classmethod
    def start(cls) -> "PgServer":
        """initdb + pg_ctl start in a fresh temp dir.

        Raises:
            PgUnavailable: binaries or the postgres user are missing.
            RuntimeError: initdb or start failed (the message holds the server log's tail).
        """
        bindir = find_bindir()
        prefix = _as_postgres_prefix()
        base = Path(tempfile.mkdtemp(prefix="ixpg"))
        if len(str(base / ".s.PGSQL.5432")) > 107:
            shutil.rmtree(base, ignore_errors=True)
            raise PgUnavailable(f"temp dir {base} is too long for a Unix socket path; set TMPDIR=/tmp")
        server = cls(bindir, base, prefix)
        try:
            if prefix:
                import pwd

                pw = pwd.getpwnam("postgres")
                os.chown(base, pw.pw_uid, pw.pw_gid)
            os.chmod(base, 0o700)
            server._run("initdb", "-D", str(server.data), "-A", "trust", "-U", "postgres",
                        "--no-sync", "-E", "UTF8", "--locale=C")
            server._configure()
            server._run("pg_ctl", "-D", str(server.data), "-l", str(server.log), "-w",
                        "-t", str(START_TIMEOUT),
                        "-o", f"-k {server.sockdir} -c listen_addresses=''", "start",
                        timeout=START_TIMEOUT + 15)
            server.running = True
        except BaseException:
            server.stop()
            raise
        return server

    def _configure(self) -> None:
        """No TCP, no fsync; password auth for every role but the superuser."""
        conf = self.data / "postgresql.conf"
        with open(conf, "a", encoding="utf-8") as f:
            f.write("\n# tests/pg.py\nlisten_addresses = ''\nfsync = off\nsynchronous_commit = off\n"
                    "full_page_writes = off\nmax_connections = 100\n"
                    "password_encryption = 'scram-sha-256'\n"
                    "wal_level = replica\nmax_wal_senders = 4\nhot_standby = on\n")
        (self.data / "pg_hba.conf").write_text(
            "# tests/pg.py: the superuser is trusted (also for streaming replication), every other\n"
            "# role needs its password\n"
            "local all postgres trust\n"
            "local replication postgres trust\n"
            "local all all scram-sha-256\n", encoding="utf-8")
        if self.prefix:
            import pwd

            pw = pwd.getpwnam("postgres")
            os.chown(self.data / "pg_hba.conf", pw.pw_uid, pw.pw_gid)

    def start_standby(self) -> "PgServer":
        """A hot standby of this server: ``pg_basebackup -R`` (streaming the WAL, a fast
        checkpoint) into a fresh temp dir, started on a socket dir of its own; it answers
        read-only queries and replays what this server writes.  This server's commits become
        synchronous (``synchronous_commit = on``: what a commit wrote is in the WAL the standby
        is sent when it returns).  Always call the standby's :meth:`stop`.

        Raises:
            RuntimeError: the base backup or the start failed (the message holds the log's tail).
        """
        # a commit returns once its WAL is written, so the WAL position read after it
        # (:meth:`wal_lsn`) covers it (with synchronous_commit = off it may still be in memory)
        self.admin("ALTER SYSTEM SET synchronous_commit = on")
        self.admin("SELECT pg_reload_conf()")
        base = Path(tempfile.mkdtemp(prefix="ixpg"))
        standby = PgServer(self.bindir, base, self.prefix)
        try:
            if self.prefix:
                import pwd

                pw = pwd.getpwnam("postgres")
                os.chown(base, pw.pw_uid, pw.pw_gid)
            os.chmod(base, 0o700)
            standby._run("pg_basebackup", "-h", str(self.sockdir), "-U", "postgres", "-D", str(standby.data),
                         "-R", "-X", "stream", "-c", "fast", "--no-sync")
            with open(standby.data / "postgresql.conf", "a", encoding="utf-8") as f:
                f.write("\n# tests/pg.py: a hot standby\nhot_standby = on\n")
            standby._run("pg_ctl", "-D", str(standby.data), "-l", str(standby.log), "-w",
                         "-t", str(START_TIMEOUT),
                         "-o", f"-k {standby.sockdir} -c listen_addresses=''", "start",
                         timeout=START_TIMEOUT + 15)
            standby.running = True
            standby.wait_ready()
        except BaseException:
            standby.stop()
            raise
        return standby

    def wal_lsn(self) -> str:
        """This (primary) server's current WAL write position (``pg_current_wal_lsn()``)."""
        return str(self.admin("SELECT pg_current_wal_lsn()::text")[0][0])

    def wait_replayed(self, lsn: str, timeout: float = 30.0, *, received_only: bool = False) -> None:
        """Until this standby has replayed (``received_only``: received) the primary's WAL up
        to ``lsn`` (:meth:`wal_lsn`).

        Raises:
            TimeoutError: not within ``timeout`` seconds.
        """
        fn = "pg_last_wal_receive_lsn()" if received_only else "pg_last_wal_replay_lsn()"
        deadline = time.monotonic() + timeout
        while True:
            (done,), = self.admin(f"SELECT coalesce({fn} >= %s::pg_lsn, false)", (lsn,))
            if done:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the standby did not {'receive' if received_only else 'replay'} "
                                   f"the WAL up to {lsn} within {timeout:g} s")
            time.sleep(0.02)

    def restart(self) -> None:
        """Restart the server (fast): every connection ends, as at a database server's reboot."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-m", "fast", "-w",
                  "-t", str(START_TIMEOUT), "-o", f"-k {self.sockdir} -c listen_addresses=''", "restart",
                  timeout=START_TIMEOUT + 30)

    def stop(self) -> None:
        """Stop the server (fast, then immediate) and remove the temp dir; safe twice."""
        if self.running:
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "20", "stop",
                          timeout=30)
            except Exception:
                try:
                    self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "10",
                              "stop", timeout=20)
                except Exception:
                    pass
            self.running = False
        shutil.rmtree(self.base, ignore_errors=True)

    def _run(self, prog: str, *args: str, timeout: float = COMMAND_TIMEOUT) -> str:
        cmd = [*self.prefix, str(self.bindir / prog), *args]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                           cwd=self.base, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            tail = ""
            if self.log.exists():
                tail = "\n--- server log ---\n" + self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}\nstdout: {p.stdout}\n"
                               f"stderr: {p.stderr}{tail}")
        return p.stdout

    # -- databases and roles --------------------------------------------------------------
    def url(self, dbname: str = "postgres", user: str = "postgres", password: str | None = None) -> str:
        """A SQLAlchemy URL for ``dbname`` over the socket (the password only if given)."""
        auth = user if password is None else f"{user}:{password}"
        return f"postgresql+psycopg://{auth}@/{dbname}?host={self.sockdir}"

    def admin(self, sql: str, params: tuple = (), dbname: str = "postgres") -> list[tuple]:
        """Run one statement as the superuser with autocommit; return its rows (if any)."""
        import psycopg

        with psycopg.connect(host=str(self.sockdir), user="postgres", dbname=dbname,
                             autocommit=True, connect_timeout=10) as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def create_database(self, name: str | None = None) -> str:
        """A new empty database (named ``name``, else ``t<N>``); returns its URL."""
        if name is None:
            self._dbs += 1
            name = f"t{self._dbs}"
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            raise ValueError(f"database name must be a plain identifier, got {name!r}")
        self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        self.admin(f"CREATE DATABASE {name}")
        return self.url(name)

    def create_role(self, name: str, password: str, dbname: str) -> None:
        """A login role that must authenticate with ``password`` and owns ``dbname``'s tables
        (granted everything on the public schema)."""
        from psycopg import sql

        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            raise ValueError(f"role name must be a plain identifier, got {name!r}")
        import psycopg

        with psycopg.connect(host=str(self.sockdir), user="postgres", dbname=dbname,
                             autocommit=True, connect_timeout=10) as conn:
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
            verb = "ALTER" if exists else "CREATE"
            conn.execute(sql.SQL(verb + " ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(name), sql.Literal(password)))
            conn.execute(sql.SQL("GRANT ALL ON SCHEMA public TO {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("GRANT ALL ON ALL TABLES IN SCHEMA public TO {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {}").format(sql.Identifier(name)))

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Until a superuser connection succeeds (pg_ctl -w already waits; this is a guard)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.admin("SELECT 1")
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


def pg_or_skip(pytest_module) -> PgServer:
    """Start a server, or skip (locally) / fail (in CI, ``$CI`` set) with the reason."""
    try:
        server = PgServer.start()
    except PgUnavailable as e:
        if os.environ.get("CI"):
            pytest_module.fail(f"PostgreSQL is required in CI ($CI is set) but unavailable: {e}",
                               pytrace=False)
        pytest_module.skip(f"PostgreSQL tests skipped: {e}")
    server.wait_ready()
    return server
