"""What a Whoosh index directory holds, from its file names alone (no Whoosh import): whether
there is an index, and its newest committed generation (the engine's commit token)."""

from __future__ import annotations

import os
from pathlib import Path


def holds_index_files(path: Path) -> bool:
    """True when ``path`` holds a TOC (``_MAIN_<gen>.toc``) or segment file (``MAIN_<id>.*``) of
    Whoosh's ``MAIN`` index; the lock file alone does not count."""
    try:
        return any(name.startswith(("_MAIN_", "MAIN_")) and name != "MAIN_WRITELOCK"
                   for name in os.listdir(path))
    except (FileNotFoundError, NotADirectoryError):
        return False


def on_disk_generation(path: Path) -> int | None:
    """The newest committed generation in index directory ``path`` from file names alone (no
    Whoosh import), or None when there is no index."""
    best = None
    try:
        for name in os.listdir(path):
            if name.startswith("_MAIN_") and name.endswith(".toc"):
                try:
                    gen = int(name[6:-4])
                except ValueError:
                    continue
                best = gen if best is None or gen > best else best
    except OSError:
        return None
    return best

