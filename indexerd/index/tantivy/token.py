"""The tantivy engine's commit token, read from the index's files without importing tantivy.

tantivy writes ``meta.json`` atomically (a temp file renamed into place) at every commit; its
``opstamp`` grows with every operation and every commit, and merges rewrite the file with the
same opstamp.  So the opstamp names a commit: the token is its decimal text.
"""

from __future__ import annotations

import json
from pathlib import Path


def read_token(path: str | Path) -> str | None:
    """The commit token of the tantivy index in directory ``path``, or None when there is no
    readable ``meta.json`` there."""
    try:
        with open(Path(path) / "meta.json", "rb") as f:
            return str(int(json.load(f)["opstamp"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
