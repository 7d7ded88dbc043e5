"""The control socket's file: a stale one replaced, a live one refused, its group set, and only
our own removed at a stop.

Outside contract relied on (Linux ``unix(7)``): ``connect()`` on a socket file whose server is
gone fails with ``ECONNREFUSED``; that is how a stale file left by a killed daemon is told from a
live one.  The decision is not atomic; two daemons racing here are kept apart by the state-dir
``flock`` (:mod:`indexerd.core.statedir`), which the daemon takes before it starts its server.
"""

from __future__ import annotations

import grp
import logging
import os
import socket
import stat
from pathlib import Path

from indexerd.core.errors import ConfigError, StateDirLocked

log = logging.getLogger("indexerd.daemon.control")  # the control socket's lines, as before the split

#: connect timeout when testing an existing socket file (seconds)
PROBE_TIMEOUT_SECONDS = 1.0


def remove_stale(path: Path) -> None:
    """Unlink a socket file nobody answers on; refuse a live one or a non-socket.

    Raises:
        ConfigError: the path is not a socket, or cannot be tested or removed.
        StateDirLocked: a live server answers on it (exit code 4).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise ConfigError(f"control socket {path}: {e.strerror}") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise ConfigError(f"control socket {path} exists and is not a socket; "
                          f"refusing to remove it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    probe.settimeout(PROBE_TIMEOUT_SECONDS)
    try:
        probe.connect(os.fspath(path))
    except (ConnectionRefusedError, FileNotFoundError):
        pass                                 # stale (or just gone): replace it
    except TimeoutError:
        raise StateDirLocked(f"control socket {path} is in use by a running indexerd (another "
                             "config's daemon, if its state dir is not this one's: set "
                             "control_socket to run both)") from None
    except OSError as e:
        raise ConfigError(f"control socket {path}: cannot test it: {e.strerror}") from None
    else:
        raise StateDirLocked(f"control socket {path} is in use by a running indexerd (another "
                             "config's daemon, if its state dir is not this one's: set "
                             "control_socket to run both)")
    finally:
        probe.close()
    log.info("removing stale control socket %s", path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise ConfigError(f"control socket {path}: cannot remove the stale file: "
                          f"{e.strerror}") from None

def chgrp(path: Path, group: str | None) -> None:
    """Give the socket file ``group``; nothing when None, when no such group exists or when this
    process may not chgrp to it."""
    if group is None:
        return
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        log.debug("group %s does not exist; control socket keeps its group", group)
        return
    try:
        os.chown(path, -1, gid)
    except PermissionError:
        log.debug("not permitted to chgrp %s to %s", path, group)

def unlink_own(path: Path, inode: tuple[int, int] | None) -> None:
    """Unlink the socket file if it is still the one we bound (``inode``: its ``(st_dev,
    st_ino)``), not a successor's."""
    try:
        st = os.lstat(path)
        if (st.st_dev, st.st_ino) == inode:
            os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        log.warning("cannot remove control socket %s: %s", path, e.strerror)
