"""TOML configuration -> validated, frozen settings.

The file is found as ``-c PATH``, else ``$INDEXERD_CONFIG``, else ``/etc/indexerd/indexerd.toml``.
Validation is done by ``msgspec`` against the typed schema; unknown keys are errors.  Every error
is re-raised as :class:`~indexerd.core.errors.ConfigError` naming the file, the key path
(``sources.filesystem[0].exclude``, 0-based like TOML tooling) and what was expected.

People write durations as strings (``"15m"``, ``"1h30m"``, ``"2d"``) and sizes as ``"20MB"``; the
config layer turns them into seconds (float) and bytes (int) once.  Nothing reads the config at
import time.

Modules: :mod:`~indexerd.config.schema` (the tables and their defaults),
:mod:`~indexerd.config.units` (durations and sizes), :mod:`~indexerd.config.load` (finding,
reading, decoding, error text), :mod:`~indexerd.config.checks` (what types cannot say),
:mod:`~indexerd.config.kinds` (the kinds of source registered, each with its table, checks and
secrets), :mod:`~indexerd.config.engines` (the index engines registered, each with its load
check), :mod:`~indexerd.config.paths` (state dir and control socket), :mod:`~indexerd.config.policy`
(a source's effective settings), :mod:`~indexerd.config.render` (``check-config``
output).  The names below are the package's interface.
"""

from indexerd.config.checks import is_loopback
from indexerd.config.load import DEFAULT_CONFIG_PATH, find_config_path, load_config, parse_config
from indexerd.config.paths import resolve_control_socket, resolve_node_name, resolve_state_dir
from indexerd.config.policy import SourcePolicy, source_policy
from indexerd.config.render import to_toml
from indexerd.config.schema import (
    DEFAULTS_ORIGIN,
    Config,
    ConfigFile,
    ExtractSettings,
    HttpSettings,
    IndexSettings,
    StoreSettings,
    Sources,
    PostgresqlSettings,
    TantivySettings,
    WhooshSettings,
)
from indexerd.config.units import MAX_BYTES, MAX_SECONDS, Bytes, Seconds, parse_size
from indexerd.core.errors import ConfigError

__all__ = [
    "DEFAULT_CONFIG_PATH", "DEFAULTS_ORIGIN", "MAX_BYTES", "MAX_SECONDS", "Bytes",
    "Config", "ConfigError", "ConfigFile", "ExtractSettings", "HttpSettings", "IndexSettings", "StoreSettings",
    "Seconds", "SourcePolicy", "Sources", "PostgresqlSettings", "TantivySettings", "WebAuth",
    "WhooshSettings", "find_config_path", "is_loopback", "load_config",
    "parse_config", "parse_size", "resolve_control_socket", "resolve_node_name", "resolve_state_dir",
    "source_policy", "to_toml",
]
