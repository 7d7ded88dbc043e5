"""Finding, reading and decoding the config file: msgspec's errors reworded to name the file, the
key path (``sources.filesystem[0].exclude``, 0-based like TOML tooling) and what was expected;
then the checks msgspec cannot express (:mod:`indexerd.config.checks`)."""

from __future__ import annotations

import difflib
import logging
import os
import re
import typing
from pathlib import Path
from typing import Any

import msgspec

from indexerd.config.checks import check_semantics
from indexerd.config.kinds import file_type, registered
from indexerd.config.schema import Config, ConfigFile, WhooshSettings, _MOVED_INDEX_KEYS
from indexerd.config.units import dec_hook
from indexerd.core.errors import ConfigError

log = logging.getLogger("indexerd.config")

DEFAULT_CONFIG_PATH = "/etc/indexerd/indexerd.toml"


_PATH_RE = re.compile(r"\$\.?")


def _key_path(msg: str) -> tuple[str, str]:
    """Split msgspec's "what - at `$.a.b[0]`" into ("a.b[0]", "what")."""
    what, sep, where = msg.rpartition(" - at `")
    if not sep:
        return "", msg
    path = where.rstrip("`")
    path = _PATH_RE.sub("", path, count=1)
    return path, what


#: a key of a source's table, ``sources.<kind>[N].<key>``
_SOURCE_KEY_RE = re.compile(r"sources\.(\w+)\[\d+\]\.(\w+)$")


def _is_glob_key(path: str) -> bool:
    """Whether the key at ``path`` holds glob patterns, as its kind declares (a filesystem
    source's ``include``/``exclude``)."""
    m = _SOURCE_KEY_RE.search(path)
    kind = registered().get(m.group(1)) if m else None
    return kind is not None and m is not None and m.group(2) in kind.glob_keys


def _synonym(path: str, word: str) -> str | None:
    """The key ``word`` means in the source table at ``path`` (``sources.web[0]``), as its kind
    declares (``url`` for ``seeds``), or None."""
    m = re.fullmatch(r"sources\.(\w+)\[\d+\]", path)
    kind = registered().get(m.group(1)) if m else None
    return kind.key_synonyms.get(word) if kind is not None else None


def _friendly(what: str, path: str = "") -> str:
    what = what.replace("Object contains unknown field", "unknown key")
    items = "strings or glob patterns" if _is_glob_key(path) else "strings"
    what = re.sub(r"Expected `array`, got `(\w+)`", rf"expected a list (of {items}), got \1", what)
    what = re.sub(r"Expected `([^`]+)`, got `(\w+)`", lambda m: f"expected {m.group(1).replace(' | null', '')}, got {m.group(2)}", what)
    what = what.replace("Object missing required field", "missing required key")
    return what


def _keys_at(path: str, file: type) -> list[str]:
    """The keys ``file`` (the decoded file's struct) allows in the table at ``path``
    (``sources.web[0]``), for a "did you mean" on an unknown one; none when the path is not a
    table of the schema."""
    cls: Any = file
    for part in [p for p in re.sub(r"\[\d+\]", "", path).split(".") if p]:
        field = next((f for f in msgspec.structs.fields(cls) if f.encode_name == part), None)
        if field is None:
            return []
        cls = _struct_in(field.type)
        if cls is None:
            return []
    return [f.encode_name for f in msgspec.structs.fields(cls)]


def _struct_in(tp: Any) -> Any:
    """The msgspec Struct class in a field's type (``X``, ``X | None``, ``list[X]``), or None."""
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return tp
    for arg in typing.get_args(tp):
        found = _struct_in(arg)
        if found is not None:
            return found
    return None


def parse_config(text: str | bytes, origin: str = "<string>") -> Config:
    """Validate TOML text into a :class:`Config`.

    Raises:
        ConfigError: ``"<origin>: <key.path>: <what was expected>"`` for a syntax error, an
            unknown key, a wrong type or value, a duplicate source name or a bad date order.
    """
    data = text.encode() if isinstance(text, str) else text
    file = file_type()
    try:
        raw: ConfigFile = msgspec.toml.decode(data, type=file, dec_hook=dec_hook)
    except msgspec.ValidationError as e:
        path, what = _key_path(str(e))
        # "unknown key `x` - at `$.sources`" -> "sources.x: unknown key"
        m = re.match(r"Object contains unknown field `([^`]+)`", what)
        if m:
            keys = _keys_at(path, file)
            close = [_synonym(path, m.group(1))] if _synonym(path, m.group(1)) in keys else \
                difflib.get_close_matches(m.group(1), keys, n=1, cutoff=0.75)
            path = f"{path}.{m.group(1)}" if path else m.group(1)
            what = f"unknown key (did you mean {close[0]!r}?)" if close else "unknown key"
            if path.startswith("sources.") and not registered():  # a caller's mistake, said plainly
                what += " (no kind of source is registered: import indexerd.sources.registry first)"
        m = re.match(r"Object missing required field `([^`]+)`", what)
        if m:
            path = f"{path}.{m.group(1)}" if path else m.group(1)
            what = "missing required key"
        raise ConfigError(f"{origin}: {path or '(top level)'}: {_friendly(what, path)}") from None
    except msgspec.DecodeError as e:
        raise ConfigError(f"{origin}: not valid TOML: {e}") from None
    except RecursionError:              # arrays or tables nested thousands deep
        raise ConfigError(f"{origin}: not valid TOML: nested too deeply") from None
    cfg = Config(**msgspec.structs.asdict(raw), origin=origin)
    cfg = _move_old_index_keys(cfg, origin)
    check_semantics(cfg, origin)
    return cfg


def _move_old_index_keys(cfg: Config, origin: str) -> Config:
    """Move ``[index] writer_memory``/``merge_idle`` (the names before engine tables) into
    ``[index.whoosh]``, with one warning each.

    Raises:
        ConfigError: the same key is set in both places.
    """
    moved = {k: getattr(cfg.index, k) for k in _MOVED_INDEX_KEYS if getattr(cfg.index, k) is not None}
    if not moved:
        return cfg
    defaults = WhooshSettings()
    for key in moved:
        if getattr(cfg.index.whoosh, key) != getattr(defaults, key):
            raise ConfigError(f"{origin}: index.{key}: set in [index.whoosh] too; keep only "
                              f"index.whoosh.{key}")
        log.warning("%s: index.%s: this key moved to [index.whoosh] (%s); read from [index] for now",
                    origin, key, f"index.whoosh.{key}")
    whoosh = msgspec.structs.replace(cfg.index.whoosh, **moved)
    index = msgspec.structs.replace(cfg.index, whoosh=whoosh, **{k: None for k in moved})
    return msgspec.structs.replace(cfg, index=index)


def find_config_path(explicit: str | None) -> Path | None:
    """Return the config file to read: ``explicit``, else ``$INDEXERD_CONFIG``, else the system path.

    Returns None when nothing was asked for and the system file does not exist (callers that can
    work without a config, like ``indexerd index PATH``, then use the defaults).

    Raises:
        ConfigError: when an explicitly named file (flag or environment) does not exist.
    """
    for name, value in (("-c", explicit), ("INDEXERD_CONFIG", os.environ.get("INDEXERD_CONFIG"))):
        if value:
            p = Path(value).expanduser()
            if not p.is_file():
                raise ConfigError(f"{value}: config file not found (from {name})")
            return p
    p = Path(DEFAULT_CONFIG_PATH)
    return p if p.is_file() else None


def load_config(explicit: str | None = None, *, required: bool = False) -> Config:
    """Find, read and validate the configuration.

    Args:
        explicit: the ``-c`` argument, if any.
        required: raise when no config file is found instead of returning the defaults.

    Raises:
        ConfigError: file missing (when required or named), unreadable, or invalid.
    """
    path = find_config_path(explicit)
    if path is None:
        if required:
            raise ConfigError(f"no config file: pass -c PATH, set INDEXERD_CONFIG, or create {DEFAULT_CONFIG_PATH}")
        return Config()
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config: {e.strerror}") from None
    return parse_config(data, str(path))
