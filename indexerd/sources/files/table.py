"""The ``[[sources.filesystem]]`` table: its keys and defaults, and the checks its types cannot
say (what :mod:`indexerd.sources.registry` declares of the kind to the config)."""

from __future__ import annotations

import os

import msgspec

from indexerd.config.checks import NODE_NAME
from indexerd.config.schema import _Struct
from indexerd.config.units import Bytes, Seconds
from indexerd.core.errors import ConfigError
from indexerd.sources.files.globs import check_glob

#: Editor temp files, VCS folders and bytecode caches, excluded unless a source sets ``exclude``.
DEFAULT_EXCLUDES = (
    ".git/", ".hg/", ".svn/", ".bzr/", "_darcs/", "CVS/", "__pycache__/",
    "*.swp", "*.swx", "*.swo", "*~", ".#*", "4913", "*.tmp", ".~lock.*#", "*.pyc", "*.pyo",
)



class FilesystemSource(_Struct, frozen=True):
    """One ``[[sources.filesystem]]`` table: a local tree, scanned by stat and watched live."""

    name: str
    path: str
    include: list[str] = msgspec.field(default_factory=lambda: ["*"])
    exclude: list[str] = msgspec.field(default_factory=lambda: list(DEFAULT_EXCLUDES))
    follow_symlinks: bool = False
    watch: bool = True
    interval: Seconds = Seconds(3600.0)
    max_size: Bytes | None = None
    meta_map: str | None = None
    date_sources: list[str] | None = None
    refresh_time: Seconds | None = None
    strict_dates: bool | None = None
    node: str | None = None


def check_filesystem_source(src: FilesystemSource, where: str, origin: str) -> None:
    """An absolute root path, glob patterns without surrounding blanks, a node name.

    Raises:
        ConfigError: as ``ORIGIN: WHERE.KEY: what was expected``.
    """
    if not os.path.isabs(os.path.expanduser(src.path)):
        raise ConfigError(f"{origin}: {where}.path: expected an absolute path, got {src.path!r}")
    for key in ("include", "exclude"):
        for i, pat in enumerate(getattr(src, key)):
            if not pat or pat.strip() != pat:
                raise ConfigError(f"{origin}: {where}.{key}: expected a list of glob patterns, "
                                  f"got {pat!r}")
            try:
                check_glob(pat)
            except ValueError as e:
                raise ConfigError(f"{origin}: {where}.{key}[{i}]: bad glob {pat!r}: {e}") from None
    if src.node is not None and not NODE_NAME.fullmatch(src.node):
        raise ConfigError(f"{origin}: {where}.node: expected a node name, got {src.node!r}")


def adhoc_filesystem_source(path: str) -> FilesystemSource:
    """The table of a tree named on the command line (``indexerd index PATH``): ``path`` (a real
    path, as the caller resolved it) as both its root and its name."""
    return FilesystemSource(name=path, path=path)


def filesystem_paths(src: FilesystemSource) -> list[tuple[str, str, str]]:
    """The path a tree source needs: ``[("path", its root, "read")]`` (key, path, need as in
    :attr:`indexerd.sources.registry.Kind.paths`)."""
    return [("path", os.path.expanduser(src.path), "read")]
