"""The search page's downloads open only files a configured tree reads, as it reads them
(indexerd/sources/files/originals.py; issue 34): real trees, real symlinks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from indexerd.config import parse_config
from indexerd.sources import registry
from indexerd.core.filekeys import path_to_key
from indexerd.sources.files.originals import open_original


@pytest.fixture
def layout(tmp_path: Path):
    """``tree`` (configured, ``*.log`` excluded) and ``outside`` (not), with symlinks out."""
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    (tree / "sub").mkdir(parents=True)
    outside.mkdir()
    (tree / "note.txt").write_bytes(b"inside\n")
    (tree / "sub" / "deep.txt").write_bytes(b"deep\n")
    (tree / "debug.log").write_bytes(b"excluded\n")
    (outside / "secret.txt").write_bytes(b"secret\n")
    (tree / "leak.txt").symlink_to(outside / "secret.txt")     # a file symlink out
    (tree / "away").symlink_to(outside)                         # a directory symlink out
    cfg = parse_config(f"""
state_dir = "{tmp_path / 'state'}"
[[sources.filesystem]]
name = "t"
path = "{tree}"
exclude = ["*.log"]
""", "/etc/test/indexerd.toml")
    return tree.resolve(), outside.resolve(), list(registry.build_sources(cfg).values())


def _read(key: str, sources) -> bytes | None:
    orig = open_original(key, sources)
    if orig is None:
        return None
    with os.fdopen(orig.fd, "rb") as fh:
        data = fh.read()
    assert orig.size_bytes == len(data)
    return data


def test_a_file_of_a_tree_opens_and_nothing_else_does(layout):
    tree, outside, sources = layout
    assert _read(path_to_key(str(tree / "note.txt")), sources) == b"inside\n"
    assert _read(path_to_key(str(tree / "sub" / "deep.txt")), sources) == b"deep\n"
    assert open_original(path_to_key(str(tree / "note.txt")), sources).filename == "note.txt"
    refused = {
        "outside every tree": path_to_key(str(outside / "secret.txt")),
        "a file symlink out": path_to_key(str(tree / "leak.txt")),
        "a directory symlink out": path_to_key(str(tree / "away" / "secret.txt")),
        "'..' out of the root": "file://" + str(tree) + "/../outside/secret.txt",
        "excluded by the tree's rules": path_to_key(str(tree / "debug.log")),
        "a directory": path_to_key(str(tree / "sub")),
        "the root": path_to_key(str(tree)),
        "gone": path_to_key(str(tree / "missing.txt")),
        "a web key": "https://example.com/note.txt",
        "a NUL byte": "file://" + str(tree) + "/note.txt%00x",
    }
    assert {why: open_original(key, sources) for why, key in refused.items()} == \
        {why: None for why in refused}
