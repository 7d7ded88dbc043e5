"""indexerd: an incremental full-text indexer for local trees, web sites and SQL change queues.

Nothing heavy is imported here: the CLI must start fast, so each command imports what it needs.
"""

__version__ = "0.1.0"
