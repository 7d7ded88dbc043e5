"""The meta map: which ``<meta>`` tags may supply a page's Last-Modified (Verity Spider's map file).

:meth:`MetaMap.load` reads the file a source's ``meta_map`` names (the only I/O); the date chain
(:mod:`indexerd.core.datechain`) takes the parsed map as a value.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from indexerd.core.errors import ConfigError

__all__ = ["MetaMapEntry", "MetaMap", "DEFAULT_META_MAP"]


@dataclass(frozen=True)
class MetaMapEntry:
    """One line of the meta map: ``<meta-name> Last-Modified Y|N``.

    Attributes:
        name: lower-cased meta name (``last-modified``, ``article:modified_time``, ...).
        override: True (``Y``): the meta value beats the protocol date even when both exist.
            False (``N``): used only when there is no usable protocol date.
    """

    name: str
    override: bool


_MAP_USAGE = "expected '<meta-name> Last-Modified Y|N'"


@dataclass(frozen=True)
class MetaMap:
    """Which ``<meta>`` tags may supply Last-Modified, in priority order (Verity Spider map file).

    Format: one mapping a line, ``<meta-name> Last-Modified Y|N``; ``#`` starts a comment (whole
    line or trailing); blank lines are ignored; ``Last-Modified``, ``Y`` and ``N`` are
    case-insensitive.  Among several lines the first that yields a usable date wins.
    """

    entries: tuple[MetaMapEntry, ...]

    @classmethod
    def parse(cls, text: str, origin: str = "<string>") -> MetaMap:
        """Parse map-file text.

        Raises:
            ConfigError: ``<origin>:<line>: expected '<meta-name> Last-Modified Y|N', got '...'``.
        """
        entries: list[MetaMapEntry] = []
        for lineno, raw in enumerate(text.splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            if (len(fields) != 3 or fields[1].lower() != "last-modified"
                    or fields[2].upper() not in ("Y", "N")):
                raise ConfigError(f"{origin}:{lineno}: {_MAP_USAGE}, got {raw.strip()!r}")
            entries.append(MetaMapEntry(fields[0].lower(), fields[2].upper() == "Y"))
        return cls(tuple(entries))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> MetaMap:
        """Read and parse a map file (UTF-8, a BOM is ignored).

        Raises:
            ConfigError: the file cannot be read or decoded (message names the file), or a line
                is malformed (message gives ``file:line``).
        """
        name = os.fspath(path)
        try:
            with open(name, encoding="utf-8-sig") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{name}: cannot read the meta map: {exc}") from exc
        return cls.parse(text, origin=str(name))


#: FDSE-like default: ``<meta name="last-modified">`` overrides the protocol date.  It also
#: matches ``<meta http-equiv="last-modified">``: extraction stores http-equiv under its
#: lower-cased name too.
DEFAULT_META_MAP = MetaMap((MetaMapEntry("last-modified", True),))
