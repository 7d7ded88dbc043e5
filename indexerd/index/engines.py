"""The index engines by their ``[index] engine`` name, registered with the config.

Importing this module registers every engine with :mod:`indexerd.config.engines`, so that the
config checks the engine it names without importing the index (the command line, the daemon and
the runtime import it before they read a config).  It imports nothing of the index itself:
``ctl``'s start stays light.  Each name is a package ``indexerd/index/<name>/`` exporting
``ENGINE`` (:func:`indexerd.index.base.load_engine` loads it); adding an engine is its package, its
name here and its ``[index.<name>]`` table in :mod:`indexerd.config.schema`.
"""

from __future__ import annotations

from collections.abc import Callable

from indexerd.config import engines as config_engines

#: The engines indexerd knows, by their ``[index] engine`` name; the first is the default (a
#: dependency of indexerd: nothing to check).
ENGINES = ("whoosh", "tantivy", "postgresql")


def _loader(name: str) -> Callable[[], object]:
    def load() -> object:
        """:func:`indexerd.index.base.load_engine` of this engine (ConfigError when its library is
        not installed)."""
        from indexerd.index.base import load_engine  # only when a config names the engine

        return load_engine(name)
    return load


for _i, _name in enumerate(ENGINES):
    config_engines.register(_name, None if _i == 0 else _loader(_name))
