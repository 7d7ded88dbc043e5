"""The daemon (`indexerd run`): control socket, systemd notify, write access checks."""

from indexerd.sources import registry as _registry  # noqa: F401  (registers the kinds of source with the config)
