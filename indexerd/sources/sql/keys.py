"""A SQL row's document key, ``sql:<source>/<id>``: made from a row, and read back as the source
it names (``ctl reindex sql:articles/42`` finds the source ``articles`` by it)."""

from __future__ import annotations

from typing import Any

from indexerd.core.errors import ConfigError

#: what every SQL key starts with
SCHEME = "sql:"


def key_for(source: str, row_id: Any) -> str:
    """``sql:<source>/<id>`` of the row ``row_id`` of the source named ``source``."""
    return f"{SCHEME}{source}/{row_id}"


def source_of_key(key: str) -> str:
    """The source a ``sql:<source>/<id>`` key names.

    Raises:
        ConfigError: the name or the id is empty (``sql:x``, ``sql:/1``).
    """
    name, sep, row_id = key[len(SCHEME):].partition("/")
    if not (name and sep and row_id):
        raise ConfigError(f"{key}: a SQL key is sql:<source>/<id>")
    return name
