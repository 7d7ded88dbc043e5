"""The effective configuration (defaults filled in, secrets masked) as TOML, for ``check-config``.

The writer is ours, not ``tomli-w``: an unset key is shown as a comment (``# key = (unset)``) so
that the output lists every key a config may set, and ``tomli-w`` writes no comments (it drops a
None value).  Values are the plain TOML types only, which this writer covers; tests/test_config.py
reads its output back with ``tomllib`` and compares it with the config.
"""

from __future__ import annotations

from typing import Any

import msgspec

from indexerd.core.secrets import mask_url, mask_userinfo
from indexerd.config.schema import _MOVED_INDEX_KEYS, Config
from indexerd.config.units import Bytes, Seconds

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
    for src in data.get("sources", {}).get("sql", []):
        src["url"] = mask_url(src["url"])
    for table in (data.get("store"), (data.get("index") or {}).get("postgresql")):
        for key in ("url", "read_url"):
            if table and table.get(key):
                table[key] = mask_url(table[key])
    for src in data.get("sources", {}).get("web", []):
        src["seeds"] = [mask_userinfo(u) for u in src["seeds"]]
    return _dump_toml(data)


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
    for k, v in data.items():
        if v is None:
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
    return out.strip() + "\n"
