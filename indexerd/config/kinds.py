"""The kinds of source the config knows: each one's ``[[sources.<kind>]]`` table, its checks and
the secrets ``check-config`` masks, as the kind itself declares them.

The config does not know one kind from another: :mod:`indexerd.sources.registry` registers every
kind here when it is imported (the command line, the daemon and the runtime import it before they
read a config), and :func:`~indexerd.config.load.parse_config` decodes ``[sources]`` with the
tables registered then.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import msgspec

from indexerd.config.schema import ConfigFile, Sources


class KindTable(Protocol):
    """What the config needs of one kind of source (:class:`indexerd.sources.registry.Kind`
    satisfies it)."""

    @property
    def name(self) -> str:
        """The table's name: ``[[sources.<name>]]``."""

    @property
    def table(self) -> type:
        """The msgspec struct of one table (frozen, unknown keys forbidden)."""

    @property
    def check(self) -> Callable[[Any, str, str], None]:
        """``check(table, where, origin)``: the checks its type cannot say; raises ConfigError as
        ``ORIGIN: WHERE.KEY: what was expected``."""

    @property
    def mask(self) -> Callable[[dict[str, Any]], None] | None:
        """Hides the secrets of one table, as builtins, in place (for ``check-config``), or
        None: the table holds none."""


    @property
    def glob_keys(self) -> tuple[str, ...]:
        """The keys of its table that hold glob patterns (an error says "strings or glob
        patterns")."""

    @property
    def key_synonyms(self) -> Mapping[str, str]:
        """Words people write for a key of its table that is spelled otherwise (``root`` for
        ``path``): an unknown key among them is answered "did you mean" the key."""


_KINDS: dict[str, KindTable] = {}
_DECODE: dict[tuple[str, ...], type] = {}


def register(kind: KindTable) -> None:
    """Make ``[[sources.<kind.name>]]`` a table of the config (again: the newer declaration
    replaces the older, so a test can declare a kind of its own)."""
    _KINDS[kind.name] = kind
    _DECODE.clear()


def unregister(name: str) -> None:
    """Forget the kind ``name`` (a test's stand-in kind, after the test); no error if unknown."""
    _KINDS.pop(name, None)
    _DECODE.clear()


def registered() -> dict[str, KindTable]:
    """Every registered kind by name, in the order of registration (the order tables are
    checked and sources built in)."""
    return dict(_KINDS)


def file_type() -> type:
    """The struct the TOML file decodes into: :class:`ConfigFile` whose ``[sources]`` has one
    list per registered kind (made once per set of kinds)."""
    key = tuple(_KINDS)
    if key not in _DECODE:
        sources = msgspec.defstruct(
            "Sources", [(k.name, list[k.table], msgspec.field(default_factory=list))  # type: ignore[name-defined]
                        for k in _KINDS.values()],
            bases=(Sources,), frozen=True, kw_only=True, forbid_unknown_fields=True)
        _DECODE[key] = msgspec.defstruct(
            "ConfigFile", [("sources", sources, msgspec.field(default_factory=sources))],
            bases=(ConfigFile,), frozen=True, kw_only=True, forbid_unknown_fields=True)
    return _DECODE[key]
