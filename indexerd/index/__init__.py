"""The full-text index: the protocols the rest of indexerd uses, and the engines behind them.

Everything outside this package imports from here (or :mod:`indexerd.index.base` and
:mod:`indexerd.index.opening`); each engine
package (``indexerd/index/<engine>/``, one per name in ``ENGINES``) is the only code that imports
its library.
"""

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
    on_disk_token,
    open_index,
    read_identity,
    rebuild_reason,
    wanted_identity,
)

__all__ = ["ANALYSIS_VERSION", "ENGINES", "Hit", "IndexDoc", "IndexIdentity", "IndexSession", "SearchIndex",
           "index_dir", "load_engine", "on_disk_token", "open_index", "read_identity", "rebuild_reason",
           "wanted_identity"]
