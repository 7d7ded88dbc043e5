"""Where ``indexerd ctl`` finds the daemon's control socket and the state dir.

``ctl`` must reach a running daemon whatever its config file says now: after a refused reload
the daemon keeps running on the old config while the file on disk is broken.  So ``ctl`` reads
only the two keys that locate things (``control_socket``, ``state_dir``):

1. the whole file when it is valid;
2. else, when the file is still TOML, only those two top-level keys (when they are strings);
3. else the defaults.

A warning naming the file's error is returned for the caller to print.

Socket search order (the first one a daemon answers on wins; every candidate is named when
none answers):

- ``control_socket`` from the config, alone;
- else ``$RUNTIME_DIRECTORY/indexerd.sock`` (under systemd), alone;
- else, for root, ``/run/indexerd/indexerd.sock`` (the unit's ``RuntimeDirectory``);
- else ``<state_dir>/indexerd.sock`` (a daemon run by this user), then the system socket
  ``/run/indexerd/indexerd.sock`` (a member of the ``indexerd`` group talking to the service).

State dir search order for the readers (``search``, ``report``, ``changed``, ``explain``):
``state_dir`` from the config or ``$STATE_DIRECTORY`` alone; else the user's state dir when it
holds a state store, else ``/var/lib/indexerd`` when that holds one, else the user's state dir
(whose absence the caller then reports).  For root, ``/var/lib/indexerd`` alone.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .config import (Config, ConfigError, find_config_path, load_config, resolve_control_socket,
                     resolve_state_dir)

#: the service's runtime and state directories (systemd/indexerd.service)
SYSTEM_SOCKET = Path("/run/indexerd/indexerd.sock")
SYSTEM_STATE_DIR = Path("/var/lib/indexerd")
STORE_FILENAME = "state.sqlite3"


@dataclass(frozen=True)
class Located:
    """Where a ``ctl`` command looks.

    Attributes:
        config: the validated config when the file is valid, else ``None``.
        sockets: candidate control sockets, in search order (at least one).
        state_dir: the state dir the read-only commands open.
        warning: why the config file was not used whole (``None`` when it was).
    """

    config: Config | None
    sockets: tuple[Path, ...]
    state_dir: Path
    warning: str | None


def _lenient(path: Path, error: ConfigError) -> tuple[Config, str]:
    """The two locating keys of a config file that does not validate."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, tomllib.TOMLDecodeError):
        return Config(), f"{error}; using the default socket and state dir"
    keys = {k: data[k] for k in ("state_dir", "control_socket") if isinstance(data.get(k), str)}
    used = " and ".join(keys) or "nothing"
    return Config(**keys), f"{error}; using only {used} from it"


def locate(explicit: str | None) -> Located:
    """Where to find the daemon and the state dir for ``ctl`` (see the module docstring).

    Args:
        explicit: the ``-c`` argument, if any.

    Raises:
        ConfigError: a config file named by ``-c`` or ``$INDEXERD_CONFIG`` does not exist.
    """
    path = find_config_path(explicit)
    warning = None
    try:
        cfg = valid = load_config(explicit)
    except ConfigError as e:
        if path is None:
            raise
        cfg, warning = _lenient(path, e)
        valid = None
    return Located(config=valid, sockets=socket_candidates(cfg), state_dir=state_dir_for_readers(cfg),
                   warning=warning)


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def socket_candidates(cfg: Config) -> tuple[Path, ...]:
    """The control sockets to try, in order (see the module docstring)."""
    first = resolve_control_socket(cfg)
    if cfg.control_socket or os.environ.get("RUNTIME_DIRECTORY") or _is_root() or first == SYSTEM_SOCKET:
        return (first,)
    return (first, SYSTEM_SOCKET)


def state_dir_for_readers(cfg: Config) -> Path:
    """The state dir ``ctl search``/``report``/``changed``/``explain`` open (module docstring)."""
    own = resolve_state_dir(cfg)
    if cfg.state_dir or os.environ.get("STATE_DIRECTORY") or _is_root():
        return own
    for candidate in (own, SYSTEM_STATE_DIR):
        try:
            if (candidate / STORE_FILENAME).exists():
                return candidate
        except PermissionError:
            return candidate     # there, but not readable by this user: the caller says so
    return own
