"""A source's effective settings (its overrides over the top-level defaults) and the masking of
secrets in URLs for messages and ``check-config``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from indexerd.config.schema import Config, FilesystemSource, SqlSource, WebSource

@dataclass(frozen=True)
class SourcePolicy:
    """The effective per-source settings after applying top-level defaults (seconds, bytes)."""

    max_size_bytes: int
    refresh_time_seconds: float
    strict_dates: bool
    meta_map_path: str | None
    date_sources: tuple[str, ...] | None


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


def source_policy(cfg: Config, src: FilesystemSource | SqlSource | WebSource) -> SourcePolicy:
    """Merge a source's optional overrides with the top-level defaults."""
    max_size = getattr(src, "max_size", None)
    return SourcePolicy(
        max_size_bytes=int(max_size if max_size is not None else cfg.max_size),
        refresh_time_seconds=float(src.refresh_time if src.refresh_time is not None else cfg.refresh_time),
        strict_dates=bool(src.strict_dates if src.strict_dates is not None else cfg.strict_dates),
        meta_map_path=getattr(src, "meta_map", None) or cfg.meta_map,
        date_sources=tuple(src.date_sources) if src.date_sources is not None else None,
    )
