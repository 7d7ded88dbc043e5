"""A package's public names imported on first use (PEP 562's module ``__getattr__``), so that
importing the package costs nothing of the modules behind them: ``indexerd.index`` and
``indexerd.extract`` export this way."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, home: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a name of ``home`` (name -> the module
    defining it) is imported from its module at its first use and kept in the package.

    Raises (from the returned function):
        AttributeError: a name ``home`` does not hold (``from package import submodule`` then
            imports the submodule, as Python does for any package).
    """
    def __getattr__(name: str) -> Any:
        where = home.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
