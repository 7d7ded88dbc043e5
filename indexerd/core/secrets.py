"""Passwords named by the config (``password_env``, an environment variable, or ``password_file``)
and the masking of passwords in URLs for messages and ``check-config``.

The one place that reads them (the SQL sources and the PostgreSQL index engine use it); a value
read here is handed to the driver and never logged, shown or written anywhere.
"""

from __future__ import annotations

import os
import re

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


#: a ``password`` query parameter (libpq's connection keyword, and SQLAlchemy's drivers')
_PASSWORD_PARAM = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def mask_url(url: str) -> str:
    """The URL with any password replaced by ``***`` (for messages and ``check-config``): the
    one in its user info and a ``password=`` query parameter (libpq's keyword, see PostgreSQL's
    "Connection URIs").

    Parsed by SQLAlchemy's own URL parser, so a password holding ``/``, ``?`` or ``#`` is masked
    whole; an unparseable URL keeps only its scheme.
    """
    try:
        from sqlalchemy.engine import make_url

        u = make_url(url)
        shown = u.render_as_string(hide_password=True) if u.password is not None else url
    except Exception:
        scheme = url.split("://", 1)[0] if "://" in url else "?"
        return f"{scheme}://***"
    return _PASSWORD_PARAM.sub(r"\1***", shown)


def mask_userinfo(url: str) -> str:
    """An http(s) URL with the password of its user info (``user:pw@``) replaced by ``***``,
    for ``check-config`` and messages; other URLs come back unchanged."""
    head, sep, rest = url.partition("://")
    netloc = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    if not sep or "@" not in netloc:
        return url
    userinfo, _, hostport = netloc.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    return f"{head}://{user}{':***' if colon else ''}@{hostport}{rest[len(netloc):]}"
