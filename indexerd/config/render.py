"""The effective configuration (defaults filled in, secrets masked) as TOML, for ``check-config``.

The writer is ours, not ``tomli-w``: an unset key is shown as a comment (``# key = (unset)``),
an unset optional table as its commented header (``# [store] (unset)``), so that the output lists
every key and table a config may set, and ``tomli-w`` writes no comments (it drops a
None value).  Values are the plain TOML types only, which this writer covers; tests/test_config.py
reads its output back with ``tomllib`` and compares it with the config.
"""

from __future__ import annotations

from typing import Any, get_args, get_type_hints

import msgspec

from indexerd.config.kinds import registered
from indexerd.config.schema import _MOVED_INDEX_KEYS, Config
from indexerd.config.units import Bytes, Seconds
from indexerd.core.secrets import mask_url

def to_toml(cfg: Config) -> str:
    """Render the effective configuration (defaults filled in) as TOML, for ``check-config``."""
    def enc(obj: Any) -> Any:
        if isinstance(obj, Seconds):
            return float(obj)
        if isinstance(obj, Bytes):
            return int(obj)
        raise NotImplementedError(type(obj))

    data = msgspec.to_builtins(cfg, enc_hook=enc)
    data.pop("origin", None)
    for key in _MOVED_INDEX_KEYS:  # old names, moved into [index.whoosh] by the parse: always None here
        data["index"].pop(key, None)
    for name, kind in registered().items():
        mask = kind.mask
        if mask is not None:
            for table in data.get("sources", {}).get(name, []):
                mask(table)
    for table in (data.get("store"), (data.get("index") or {}).get("postgresql")):
        for key in ("url", "read_url"):
            if table and table.get(key):
                table[key] = mask_url(table[key])
    _mark_unset_tables(data, type(cfg))
    return _dump_toml(data)


class _UnsetTable:
    """An optional table (``[store]``, ``[index.postgresql]``) the config does not set: shown as
    its commented header, not as a key ``# store = (unset)`` that reads as one to set."""


_UNSET_TABLE = _UnsetTable()


def _mark_unset_tables(data: dict, struct: type) -> None:
    """Replace in ``data`` (``struct``'s fields as builtins) each None whose field is an
    optional table by :data:`_UNSET_TABLE`, down the tables that are set."""
    hints = get_type_hints(struct)
    for key, value in data.items():
        tables = [t for t in get_args(hints.get(key)) or (hints.get(key),)
                  if isinstance(t, type) and issubclass(t, msgspec.Struct)]
        if not tables:
            continue
        if value is None:
            data[key] = _UNSET_TABLE
        elif isinstance(value, dict):
            _mark_unset_tables(value, tables[0])


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        import json

        return json.dumps(v, ensure_ascii=False)  # JSON string escapes are valid TOML basic-string escapes
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(type(v))


def _dump_toml(data: dict, prefix: str = "") -> str:
    lines: list[str] = []
    tables: list[tuple[str, Any]] = []
    unset: list[str] = []
    for k, v in data.items():
        if v is _UNSET_TABLE:
            unset.append(k)
        elif v is None:
            lines.append(f"# {k} = (unset)")
        elif isinstance(v, dict):
            tables.append((k, v))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            tables.append((k, v))
        else:
            lines.append(f"{k} = {_toml_value(v)}")
    out = "\n".join(lines)
    for k, v in tables:
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out += f"\n\n[{name}]\n" + _dump_toml(v, name + ".").rstrip("\n")
        else:
            for item in v:
                out += f"\n\n[[{name}]]\n" + _dump_toml(item, name + ".").rstrip("\n")
    for k in unset:
        out += f"\n\n# [{prefix}{k}] (unset)"
    return out.strip() + "\n"
