"""The full-text index: the protocols the rest of indexerd uses, and the engines behind them.

Everything outside this package imports from here (or :mod:`indexerd.index.base` and
:mod:`indexerd.index.opening`); each engine
package (``indexerd/index/<engine>/``, one per name in ``ENGINES``) is the only code that imports
its library.

The names below are imported on first use (PEP 562), not with the package: importing
:mod:`indexerd.index.engines` (which registers the engines with the config, before any config is
read) costs ``ctl`` nothing of the index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from indexerd.core.lazyexports import lazy_exports

if TYPE_CHECKING:
    from indexerd.index.base import (
        ANALYSIS_VERSION,
        ENGINES,
        Hit,
        IndexDoc,
        IndexSession,
        SearchIndex,
        index_dir,
        load_engine,
    )
    from indexerd.index.opening import (
        IndexIdentity,
        files_fingerprint,
        on_disk_token,
        open_index,
        read_identity,
        rebuild_reason,
        wanted_identity,
    )

#: each name of the interface -> the module defining it
_HOME = {**dict.fromkeys(("ANALYSIS_VERSION", "ENGINES", "Hit", "IndexDoc", "IndexSession", "SearchIndex",
                          "index_dir", "load_engine"), "indexerd.index.base"),
         **dict.fromkeys(("IndexIdentity", "files_fingerprint", "on_disk_token", "open_index", "read_identity", "rebuild_reason",
                          "wanted_identity"), "indexerd.index.opening")}

__all__ = ["ANALYSIS_VERSION", "ENGINES", "Hit", "IndexDoc", "IndexIdentity", "IndexSession", "SearchIndex",
           "files_fingerprint",
           "index_dir", "load_engine", "on_disk_token", "open_index", "read_identity", "rebuild_reason",
           "wanted_identity"]


__getattr__ = lazy_exports(__name__, _HOME)
