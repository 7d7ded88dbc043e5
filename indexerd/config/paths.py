"""Where the state dir and the control socket are, so that the daemon and every ``ctl`` call
agree (systemd's ``$STATE_DIRECTORY``/``$RUNTIME_DIRECTORY``, root's system paths, else the
user's)."""

from __future__ import annotations

import os
from pathlib import Path

from indexerd.config.schema import DEFAULTS_ORIGIN, Config

def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def resolve_state_dir(cfg: Config) -> Path:
    """Where the state store and the index live.

    ``state_dir`` from the config; else systemd's ``$STATE_DIRECTORY`` (first entry); else
    ``/var/lib/indexerd`` for root with a config file; else the user's state dir
    (``$XDG_STATE_HOME/indexerd``, ``~/.local/state/indexerd``).  Without a config file (the
    demo, ``indexerd index PATH``) root gets its own user state dir too: ``/var/lib/indexerd``
    is the service's, whose daemon would never remove documents of paths it was not given.
    """
    if cfg.state_dir:
        return Path(cfg.state_dir).expanduser()
    env = os.environ.get("STATE_DIRECTORY")
    if env:
        return Path(env.split(":")[0])
    if _is_root() and cfg.origin != DEFAULTS_ORIGIN:
        return Path("/var/lib/indexerd")
    from platformdirs import user_state_dir

    return Path(user_state_dir("indexerd", appauthor=False))


def resolve_node_name(cfg: Config) -> str:
    """This node's name in a cluster: ``node`` from the config, else the machine's host name
    (its first label, as ``hostname -s`` prints it)."""
    if cfg.node:
        return cfg.node
    import socket

    return socket.gethostname().split(".")[0] or "indexerd"


def resolve_control_socket(cfg: Config) -> Path:
    """Where the daemon's control socket lives.

    ``control_socket`` from the config; else ``$RUNTIME_DIRECTORY/indexerd.sock``; else
    ``/run/indexerd/indexerd.sock`` for root; else ``<state_dir>/indexerd.sock``.
    """
    if cfg.control_socket:
        return Path(cfg.control_socket).expanduser()
    env = os.environ.get("RUNTIME_DIRECTORY")
    if env:
        return Path(env.split(":")[0]) / "indexerd.sock"
    if _is_root():
        return Path("/run/indexerd/indexerd.sock")
    return resolve_state_dir(cfg) / "indexerd.sock"
