"""The index engines the config knows: each one's ``[index] engine`` name and the check that it
loads, as the index package declares them.

The config does not import the index: :mod:`indexerd.index.engines` registers every engine here
when it is imported (the command line, the daemon and the runtime import it before they read a
config, as they import the registry of source kinds), and
:func:`~indexerd.config.checks.check_semantics` asks :func:`check` about the engine a config
names.  With no engine registered, a config naming the schema's default engine (a dependency of
indexerd) still reads; one naming another is refused, saying what to import.
"""

from __future__ import annotations

from collections.abc import Callable

from indexerd.core.errors import ConfigError

#: name -> ``load()``: raises ConfigError when the engine cannot be used here (its library is
#: not installed: the message names the pip extra); None: nothing to check (a dependency)
_ENGINES: dict[str, Callable[[], object] | None] = {}


def register(name: str, load: Callable[[], object] | None) -> None:
    """Make ``name`` an ``[index] engine`` of the config, checked by calling ``load()`` (again:
    the newer declaration replaces the older)."""
    _ENGINES[name] = load


def unregister(name: str) -> None:
    """Forget the engine ``name`` (a test's, after it); no error if unknown."""
    _ENGINES.pop(name, None)


def registered() -> tuple[str, ...]:
    """The registered engines' names, in the order of registration (the first the default)."""
    return tuple(_ENGINES)


def expected() -> str:
    """The registered names as an error says them: ``'whoosh', 'tantivy' or 'postgresql'``."""
    names = [repr(n) for n in _ENGINES]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def check(name: str, default: str, origin: str) -> None:
    """The engine ``name`` (``[index] engine``) is one indexerd can open here.

    ``default`` is the schema's default engine: accepted when no engine is registered (a program
    that reads a config without the index package).

    Raises:
        ConfigError: ``ORIGIN: index.engine: expected 'whoosh', ... got 'x'`` for an unknown
            engine (with what to import when none is registered), or the engine's own error
            (``index.engine = 'tantivy', but its library is not installed: ...``) after
            ``ORIGIN: ``.
    """
    if not _ENGINES:
        if name == default:
            return
        raise ConfigError(f"{origin}: index.engine: unknown engine {name!r} (no index engine is registered: "
                          f"import indexerd.index.engines first)")
    if name not in _ENGINES:
        raise ConfigError(f"{origin}: index.engine: expected {expected()}, got {name!r}")
    load = _ENGINES[name]
    if load is None:
        return
    try:
        load()
    except ConfigError as e:
        raise ConfigError(f"{origin}: {e}") from None
