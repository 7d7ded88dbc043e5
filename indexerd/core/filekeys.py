"""``file:`` keys, the one name of a local file every layer shares (the store's rows, the index's
documents, the ``dir:`` filter, the reports): path <-> key.

Keys are ``file:`` URIs of the real path as ``pathlib.Path.as_uri()`` writes them: bytes that are
not UTF-8 are percent-encoded, and :func:`key_to_path` maps a key back to the same bytes.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote_from_bytes, unquote_to_bytes

__all__ = ["URI_SAFE", "key_to_path", "path_to_key"]

URI_SAFE = re.compile(r"[A-Za-z0-9_.~/-]*")  # characters quote() leaves alone (safe="/")


def path_to_key(path: str) -> str:
    """Absolute path (str, may hold surrogate escapes) -> ``file:`` URI, as ``Path.as_uri()``."""
    if URI_SAFE.fullmatch(path):  # the common case: nothing to percent-encode (3x faster)
        return "file://" + path
    return "file://" + quote_from_bytes(os.fsencode(path))


def key_to_path(key: str) -> str:
    """``file:`` URI -> path str whose ``os.fsencode`` gives back the original bytes."""
    if not key.startswith("file://"):
        raise ValueError(f"not a file key: {key!r}")
    return os.fsdecode(unquote_to_bytes(key[len("file://"):]))
