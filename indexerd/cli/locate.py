"""Where ``indexerd ctl`` finds the daemon's control socket and the state dir.

``ctl`` must reach a running daemon whatever its config file says now: after a refused reload
the daemon keeps running on the old config while the file on disk is broken.  So ``ctl`` reads
only the two keys that locate things (``control_socket``, ``state_dir``):

1. the whole file when it is valid;
2. else, when the file is still TOML, only those two top-level keys (when they are strings);
3. else (not TOML, e.g. an unterminated string) those keys' own ``key = "string"`` lines before
   the first table, each parsed alone;
4. else the defaults; then a socket that does not answer is reported as a guess made because
   the file did not parse (exit 2), never as "not running".

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

from indexerd.config import (Config, ConfigError, find_config_path, load_config, resolve_control_socket,
                     resolve_state_dir)
from indexerd.index import engines as _engines  # noqa: F401  (registers the index engines with the config)
from indexerd.sources import registry as _registry  # noqa: F401  (registers the kinds of source with the config)

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
        guessed: set when the file did not parse and no ``control_socket`` could be read from
            it: the sockets are then defaults, and a silent one does not mean "not running".
    """

    config: Config | None
    sockets: tuple[Path, ...]
    state_dir: Path
    warning: str | None
    guessed: bool = False


_LOCATING_KEYS = ("state_dir", "control_socket")


def _top_level_strings(text: str) -> dict[str, str]:
    """The locating keys of a file that is not valid TOML, each parsed from its own line.

    Only ``key = "string"`` (or ``'literal'``) lines before the first table header are read,
    each line alone with :mod:`tomllib`, so a later broken line (an unterminated string, a
    stray bracket) does not hide them.
    """
    found: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            break                                # a table: no more top-level keys (TOML 1.0)
        if not stripped.startswith(_LOCATING_KEYS):
            continue
        try:
            data = tomllib.loads(line)
        except tomllib.TOMLDecodeError:
            continue
        found.update({k: v for k, v in data.items() if k in _LOCATING_KEYS and isinstance(v, str)})
    return found


def _lenient(path: Path, error: ConfigError) -> tuple[Config, str, bool]:
    """The two locating keys of a config file that does not validate.

    Returns:
        (config with only those keys, the warning, whether the control socket is a guess
        because the file did not parse and names no ``control_socket`` line we could read).
    """
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return Config(), f"{error}; using the default socket and state dir", True
    try:
        data = tomllib.loads(text)
        keys = {k: data[k] for k in _LOCATING_KEYS if isinstance(data.get(k), str)}
        parsed = True
    except (tomllib.TOMLDecodeError, RecursionError):
        keys = _top_level_strings(text)
        parsed = False
    used = " and ".join(keys) or "nothing"
    return Config(**keys), f"{error}; using only {used} from it", not parsed and "control_socket" not in keys


def locate(explicit: str | None) -> Located:
    """Where to find the daemon and the state dir for ``ctl`` (see the module docstring).

    Args:
        explicit: the ``-c`` argument, if any.

    Raises:
        ConfigError: a config file named by ``-c`` or ``$INDEXERD_CONFIG`` does not exist.
    """
    path = find_config_path(explicit)
    warning = None
    guessed = False
    try:
        cfg = valid = load_config(explicit)
    except ConfigError as e:
        if path is None:
            raise
        cfg, warning, guessed = _lenient(path, e)
        valid = None
    return Located(config=valid, sockets=socket_candidates(cfg), state_dir=state_dir_for_readers(cfg),
                   warning=warning, guessed=guessed)


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
