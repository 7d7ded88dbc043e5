"""The paths indexerd must write (or read), and whether it can: ``check-config`` and the daemon's start warn.

What indexerd writes: its state dir (store, index, lock, socket) and what each source's kind
declares (:attr:`~indexerd.sources.registry.Kind.paths`): a web source's ``mirror_dir``, a
SQLite queue database whose ``pre_update_sql``/``post_update_sql`` mark rows (SQLite also
creates ``-journal``/``-wal`` files beside the database, so its directory must be writable too:
sqlite.org/tempfiles.html).  What the kinds declare as read only, the trees of the filesystem
sources, must be readable, and every directory above them searchable (``x``).

Outside contract relied on: ``access(2)`` answers for the real uid and also fails with
``EROFS`` on a read-only mount, which is what systemd's ``ProtectSystem=strict`` makes of every
path not in ``ReadWritePaths=``/``StateDirectory=`` (``systemd.exec(5)``); ``statvfs(3)``'s
``ST_RDONLY`` tells that case from a permission problem.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass

from indexerd.config import Config, resolve_state_dir
from indexerd.core.errors import ConfigError
from indexerd.sources.registry import source_paths


#: the shipped unit's ``StateDirectory=indexerd``: systemd creates it, owned by ``User=``, at start
UNIT_STATE_DIRECTORY = "/var/lib/indexerd"


@dataclass(frozen=True)
class PathNeed:
    """One path indexerd must be able to write.

    ``key`` is the config key that names it (``state_dir``, ``sources.web[0].mirror_dir``,
    ``sources.sql[1].url``); ``kind`` is ``"dir"`` (created if missing), ``"sqlite"`` (an
    existing database file, written in place, with its journal beside it), ``"read"`` (a tree
    that is only read: :func:`read_warnings`) or ``"exec"`` (a program the service runs:
    :func:`unit_warnings`).
    """

    key: str
    path: str
    kind: str


def paths_to_write(cfg: Config) -> list[PathNeed]:
    """Every path the configured sources and the state store write, in config order."""
    return [PathNeed("state_dir", str(resolve_state_dir(cfg)), "dir"),
            *(PathNeed(*need) for need in source_paths(cfg) if need[2] in ("dir", "sqlite"))]


def _probe(path: str, kind: str) -> str | None:
    """Why the current process cannot write ``path`` (``kind`` as in :class:`PathNeed`); None if it can.

    """
    def why(p: str) -> str | None:
        if os.access(p, os.W_OK | os.X_OK if os.path.isdir(p) else os.W_OK):
            return None
        try:
            if os.statvfs(p).f_flag & os.ST_RDONLY:
                return f"{p} is on a read-only file system"
            st = os.stat(p)
        except OSError as e:
            return f"{p}: {e.strerror}"
        return f"no write permission on {p} (owner uid {st.st_uid}, gid {st.st_gid}, mode {stat.filemode(st.st_mode)})"

    if kind == "exec":                                  # the interpreter the unit runs
        parts = os.path.abspath(path).split(os.sep)
        for i in range(2, len(parts)):
            d = os.sep.join(parts[:i])
            if os.path.isdir(d) and not os.access(d, os.X_OK):
                return f"no search (x) permission on {d} (mode {stat.filemode(os.stat(d).st_mode)})"
        if not os.access(path, os.X_OK):
            return f"no execute permission on {path}"
        return None
    if kind == "read":                                  # a tree to index: every ancestor searchable
        parts = os.path.abspath(path).split(os.sep)
        for i in range(2, len(parts) + 1):
            d = os.sep.join(parts[:i])
            try:
                st = os.stat(d)
            except OSError:
                return None                             # a missing root has its own warning
            if d != path and not os.access(d, os.X_OK):
                return f"no search (x) permission on {d} (mode {stat.filemode(st.st_mode)})"
        if not os.access(path, os.R_OK | os.X_OK if os.path.isdir(path) else os.R_OK):
            return f"no read permission on {path} (mode {stat.filemode(os.stat(path).st_mode)})"
        return None
    if kind == "sqlite":
        if not os.path.exists(path):
            return f"{path} does not exist"
        return why(path) or why(os.path.dirname(path) or ".")
    p = path
    while not os.path.exists(p):                        # created on first use: the parent must allow it
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    if not os.path.isdir(p):
        return f"{p} is not a directory"
    return why(p)


def denied(paths: list[PathNeed], user: str | None = None) -> list[tuple[PathNeed, str]]:
    """The paths that cannot be written, with why, checked as ``user`` (default: this process).

    Another user's check runs in a forked child with that user's uid, gid and groups, so ACLs
    (``setfacl``) and group access count as they would for the service.

    Raises:
        ConfigError: ``user`` is unknown, or switching to it is not allowed (not root).
    """
    if user is None:
        return [(p, why) for p in paths if (why := _probe(p.path, p.kind))]
    import pwd

    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        raise ConfigError(f"--user {user}: no such user") from None
    if os.geteuid() != 0 and pw.pw_uid != os.geteuid():
        raise ConfigError(f"--user {user}: only root can check as another user")
    groups = os.getgrouplist(pw.pw_name, pw.pw_gid)
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:                                        # child: become the user, probe, report
        code = 1
        try:
            os.close(rfd)
            os.setgroups(groups)
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
            with os.fdopen(wfd, "w") as out:
                json.dump([_probe(p.path, p.kind) for p in paths], out)
            code = 0
        finally:
            os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd) as inp:
        data = inp.read()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0 or not data:
        raise ConfigError(f"--user {user}: the check could not run as that user")
    return [(wp, why) for wp, why in zip(paths, json.loads(data)) if why]


def read_warnings(cfg: Config, user: str | None = None) -> list[str]:
    """One message per configured tree that ``user`` cannot read, naming key, path and fix.

    A home directory of mode 0700 (Debian's default since adduser 3.130) stops a service user
    at its door: it needs search (x) access on each directory above the tree and read access
    in the tree, by an ACL or a group.

    Raises:
        ConfigError: as :func:`denied`.
    """
    who = user or "this user"
    paths = [PathNeed(*need) for need in source_paths(cfg) if need[2] == "read"]
    return [f"{wp.key}: {wp.path} is not readable by {'user ' + who if user else who}: {why}; e.g. "
            f"`setfacl -m u:{who}:x` on each directory above it and `setfacl -R -m u:{who}:rX,d:u:{who}:rX "
            f"{wp.path}` (or group access)"
            for wp, why in denied(paths, user)]


def write_warnings(cfg: Config, user: str | None = None) -> list[str]:
    """One message per path indexerd must write and cannot (as ``user``), naming key, path and fix.

    Raises:
        ConfigError: as :func:`denied`.
    """
    who = f"user {user}" if user else "this user"
    paths = [p for p in paths_to_write(cfg)
             if not (p.key == "state_dir" and p.path == UNIT_STATE_DIRECTORY and not os.path.exists(p.path))]
    out = []
    for wp, why in denied(paths, user):
        target = os.path.dirname(wp.path) if wp.kind == "sqlite" else wp.path
        fix = (f"under systemd (ProtectSystem=strict) add `ReadWritePaths={target}` to the unit"
               if "read-only file system" in why else "give the service's user write access")
        if wp.kind == "sqlite":
            fix += " (the database and its directory: SQLite writes its journal beside it)"
        out.append(f"{wp.key}: {wp.path} is not writable by {who}: {why}; {fix}")
    return out


#: Directories the unit (systemd/indexerd.service, ``PrivateTmp=yes``) replaces with an empty
#: private directory of the service's own.
PRIVATE_TMP_DIRS = ("/tmp", "/var/tmp")


def unit_warnings(cfg: Config, user: str, interpreter: str | None = None) -> list[str]:
    """What the systemd unit (``systemd/indexerd.service``) would break for the service run as
    ``user``: a tree under ``/tmp`` or ``/var/tmp`` (the unit's ``PrivateTmp=yes`` shows the
    service an empty private directory there), and an interpreter ``user`` cannot execute (a
    venv made from a Python under a private home: the unit fails at start, status 203/EXEC).
    ``interpreter``: the Python the unit runs (default: this one's, ``sys.executable``).

    Raises:
        ConfigError: as :func:`denied`.
    """
    import sys

    out = []
    trees = [(key, path) for key, path, need in source_paths(cfg) if need in ("read", "dir")]
    for key, path in trees:
        real = os.path.realpath(path)
        tmp = next((d for d in PRIVATE_TMP_DIRS if real == d or real.startswith(d + os.sep)), None)
        if tmp is not None:
            out.append(f"{key}: {path} is under {tmp}, which the service sees as an empty private directory "
                       f"of its own (PrivateTmp=yes in the unit): move it elsewhere, or drop PrivateTmp from "
                       f"a unit override")
    exe = os.path.realpath(interpreter or sys.executable)
    for _need, why in denied([PathNeed("interpreter", exe, "exec")], user):
        out.append(f"the Python interpreter {exe} is not executable by user {user}: {why}; the service would "
                   f"not start: build the venv from the system's Python (`/usr/bin/python3 -m venv /opt/indexerd`)")
    return out

