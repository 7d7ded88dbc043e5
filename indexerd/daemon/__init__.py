"""The daemon (`indexerd run`): control socket, systemd notify, write access checks."""

from indexerd.index import engines as _engines  # noqa: F401  (registers the index engines with the config)
from indexerd.sources import registry as _registry  # noqa: F401  (registers the kinds of source with the config)
