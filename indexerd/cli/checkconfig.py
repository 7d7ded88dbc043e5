"""``indexerd check-config``: the config checked as the daemon would use it (sources built, files
and server logins tried), the warnings of what may fail later, then the effective config."""

from __future__ import annotations

import os
import sys
from typing import Any

from indexerd.sources import registry as _registry


def _missing_roots(cfg) -> list[tuple[str, str]]:
    """``(name, path)`` of each configured source whose tree to read (a path its kind declares
    as ``read``: :attr:`~indexerd.sources.registry.Kind.paths`) is not a directory now."""
    return [(table.name, path) for k in _registry.KINDS.values() if k.paths is not None
            for table in getattr(cfg.sources, k.name) for _key, path, need in k.paths(table)
            if need == "read" and not os.path.isdir(path)]


def cmd_check_config(args) -> int:
    """``indexerd check-config``: load and check the config as the daemon would (its sources
    built, server logins tried), print warnings, then the effective config; 0 when valid.

    Raises:
        ConfigError: the config is invalid (the caller prints it and exits 2).
    """
    from indexerd.config import load_config, resolve_control_socket, resolve_state_dir, to_toml
    from indexerd.sources.registry import build_sources

    cfg = load_config(getattr(args, "config", None), required=True)
    build_sources(cfg, check_files=True)  # meta maps, SQL passwords and SQLite files too
    _check_server_passwords(cfg)
    for name, path in _missing_roots(cfg):  # not an error: a disk may be mounted later
        print(f"indexerd: warning: source {name}: path {path} does not exist (or is not a "
              f"directory) now; its passes will report an error and delete nothing", file=sys.stderr)
    from indexerd.daemon.writeaccess import read_warnings, unit_warnings, write_warnings

    unit = unit_warnings(cfg, args.user) if args.user else []
    for msg in read_warnings(cfg, args.user) + write_warnings(cfg, args.user) + unit:
        print(f"indexerd: warning: {msg}", file=sys.stderr)
    print(f"# {cfg.origin}: OK")
    print(f"# effective state_dir = {resolve_state_dir(cfg)}")
    print(f"# effective control_socket = {resolve_control_socket(cfg)}")
    print(to_toml(cfg), end="")
    return 0


def _check_server_passwords(cfg) -> None:
    """The passwords of the PostgreSQL state store and index the config names can be read now
    (their variable is set, their file readable), as a SQL source's are, and the servers
    accept the login (:func:`_check_login`).

    Raises:
        ConfigError: naming the table and the variable or file.
    """
    from indexerd.core.store import store_address

    addresses: list[tuple[str, Any]] = []  # (table, a PgStoreAddress or a PgTarget)
    address = store_address(cfg)
    if address is not None:
        addresses.append(("[store]", address))
    pg = getattr(cfg.index, "postgresql", None)
    if cfg.index.engine == "postgresql" and pg is not None:
        from indexerd.index.postgresql.connect import PgTarget

        addresses.append(("[index.postgresql]", PgTarget.from_settings(pg)))
    for table, addr in addresses:
        addr.connect_kwargs()  # ConfigError: the password cannot be read
        _check_login(table, addr)


#: What a server says when it refuses a login the config gives (libpq's messages): the config
#: is wrong, not the server down.
_LOGIN_REFUSED = ("password authentication failed", "no password supplied", "does not exist",
                  "no pg_hba.conf entry", "authentication failed")


def _check_login(table: str, address) -> None:
    """Log in to the server ``address`` names, once: a refused login (a wrong password, role
    or database) is a config error; a server that does not answer now only a warning (it may
    be started later, as a disk may be mounted later).

    Raises:
        ConfigError: naming the table and the server's answer.
    """
    from indexerd.core.errors import ConfigError, IndexerdError

    try:
        address.connect(autocommit=True).close()
    except IndexerdError as e:
        if any(s in str(e) for s in _LOGIN_REFUSED):
            raise ConfigError(f"{table}: {e}") from None
        print(f"indexerd: warning: {table}: {e}; the daemon retries until it answers", file=sys.stderr)
