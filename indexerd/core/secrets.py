"""Passwords named by the config: ``password_env`` (an environment variable) or ``password_file``.

The one place that reads them (the SQL sources and the PostgreSQL index engine use it); a value
read here is handed to the driver and never logged, shown or written anywhere.
"""

from __future__ import annotations

import os

from indexerd.core.errors import ConfigError


def read_password(owner: str, password_env: str | None, password_file: str | None) -> str | None:
    """The password named by ``password_env`` or ``password_file`` (the file's text without its
    trailing line breaks), or None when neither is set.

    ``owner`` starts each message (``source app``, ``index.postgresql``).

    Raises:
        ConfigError: the variable is unset or the file unreadable (names which, never a value).
    """
    if password_env:
        value = os.environ.get(password_env)
        if value is None:
            raise ConfigError(f"{owner}: environment variable {password_env} is not set")
        return value
    if password_file:
        try:
            with open(password_file, encoding="utf-8") as fh:
                return fh.read().strip("\r\n")
        except OSError as e:
            raise ConfigError(f"{owner}: cannot read password_file {password_file}: {e.strerror}") from None
    return None
