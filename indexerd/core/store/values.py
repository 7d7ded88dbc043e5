"""Values as the state store writes them: times as sortable ISO 8601 UTC text, text as valid UTF-8.

Times are stored as ISO 8601 UTC text with a ``Z`` suffix and microseconds, so they sort and
compare as text; they come back as aware UTC datetimes.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TypeVar, overload

_T = TypeVar("_T")

__all__ = ["to_db_time", "from_db_time", "db_text", "prefix_range"]

UTC = timezone.utc


def to_db_time(dt: datetime | None) -> str | None:
    """Aware datetime -> ``'2001-09-09T01:46:40.000000Z'``; None stays None.

    Raises:
        ValueError: for a naive datetime (never store a time without a zone).
    """
    if dt is None:
        return None
    if dt.tzinfo is None:
        raise ValueError("naive datetime given to the state store")
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def from_db_time(s: str | None) -> datetime | None:
    """Inverse of :func:`to_db_time`: aware UTC or None."""
    if not s:
        return None
    return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(UTC)


@overload
def db_text(value: str) -> str: ...
@overload
def db_text(value: _T) -> _T: ...
def db_text(value: object) -> object:
    """``value``, with any lone surrogate (a file name that is not UTF-8, decoded with
    ``surrogateescape``, quoted in a message or title) written as ``\\udcXX`` and any NUL as
    ``\\x00``: both stores hold UTF-8 and PostgreSQL's text holds no NUL, and one such string
    made the whole batch, and the writer thread, fail."""
    if isinstance(value, str):
        if "\x00" in value:
            value = value.replace("\x00", "\\x00")
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def prefix_range(prefix: str) -> tuple[str, str]:
    """``(low, high)`` such that ``low <= s < high`` holds exactly for the strings ``s`` that
    start with ``prefix`` (non-empty), in code-point order (SQLite's, and PostgreSQL's ``"C"``)."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)
