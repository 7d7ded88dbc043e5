"""The wiring of one state dir: sources from the config, the store, the index and the pipeline
(:mod:`~indexerd.runtime.indexer`), and the repairs made at a start
(:mod:`~indexerd.runtime.recovery`).  ``indexerd index`` and the daemon both run on it.
"""

from indexerd.index import engines as _engines  # noqa: F401  (registers the index engines with the config)
from indexerd.sources import registry as _registry  # noqa: F401  (registers the kinds of source with the config)
