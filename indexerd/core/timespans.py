"""Durations and spans of time as people write them: ``15m`` in the config, ``--since 7d..1d``.

Pure functions of their arguments.  The config layer turns its duration strings into seconds
through :func:`parse_duration` once; ``ctl search/changed --since`` (and the daemon answering
them) read a span through :func:`parse_since`.  Every datetime returned is aware UTC.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime, time, timedelta

from indexerd.core.dates import UTC, format_utc, to_utc
from indexerd.core.errors import QueryError

__all__ = ["parse_duration", "parse_since"]

_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|d|w)")
_DURATION_FULL = re.compile(r"(?:(?:\d+(?:\.\d*)?|\.\d+)\s*(?:ms|s|m|h|d|w)\s*)+")
_BARE_NUMBER = re.compile(r"\d+(?:\.\d*)?|\.\d+")


def parse_duration(spec: str | int | float) -> float:
    """Turn a config or CLI duration into seconds (float, >= 0).

    Forms: a bare number (seconds), or number+unit parts run together or space-separated:
    ``ms s m h d w`` (case-insensitive; ``m`` is minutes), e.g. ``"15m"``, ``"1h30m"``,
    ``"1.5h"``, ``"500ms"``, ``"2d"``, ``"1w"``.

    Raises:
        ValueError: empty, negative, not finite, or not in these forms; the message quotes the
            input: ``expected a duration like '15m', '1h30m' or '2d', got 'xyz'``.
    """
    expected = f"expected a duration like '15m', '1h30m' or '2d', got {spec!r}"
    if isinstance(spec, bool):
        raise ValueError(expected)
    if isinstance(spec, (int, float)):
        seconds = float(spec)
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"{expected} (must be a finite number of seconds >= 0)")
        return seconds
    if not isinstance(spec, str):
        raise ValueError(expected)
    text = spec.strip().lower()
    if _BARE_NUMBER.fullmatch(text):
        seconds = float(text)
    elif _DURATION_FULL.fullmatch(text):
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(text))
    else:
        raise ValueError(expected)
    if not math.isfinite(seconds):
        raise ValueError(expected)
    return seconds


def _since_bound(text: str, now: datetime, *, is_end: bool) -> datetime:
    """One side of a ``--since`` span: duration ago, ISO date, or ISO datetime (raises ValueError)."""
    if _DURATION_FULL.fullmatch(text.lower()):
        # Only with a unit: a bare "2001" is more likely a year than 2001 seconds, so it is
        # left to the ISO parser, which refuses it.
        return now - timedelta(seconds=parse_duration(text))
    try:
        day = date.fromisoformat(text)
    except ValueError:
        moment = datetime.fromisoformat(text)
        converted = to_utc(moment)
        if converted is None:
            raise ValueError(text) from None
        return converted
    start = datetime.combine(day, time(), tzinfo=UTC)
    return start + timedelta(days=1) if is_end else start


def parse_since(spec: str, now: datetime) -> tuple[datetime | None, datetime | None]:
    """Parse a ``ctl search --since`` / ``ctl changed --since`` span into ``(start, end)``.

    Forms: ``2d`` / ``3h`` / ``90m`` (``now`` minus that, open end); an ISO date or datetime
    (from that instant; without a zone it is UTC); ``FROM..TO`` where each side may be empty,
    a duration (``7d..1d``) or an ISO date/datetime.  The span is half-open:
    ``start <= t < end``.  A date-only TO means the end of that day, i.e. the *exclusive*
    next-day midnight (``..2001-09-08`` -> end ``2001-09-09T00:00:00Z``).

    Args:
        spec: the user's text.
        now: the current time (aware; naive is taken as UTC).

    Returns:
        (start, end), aware UTC; None means unbounded on that side.

    Raises:
        QueryError: the spec is empty, unreadable, ``..`` alone, or its start is not before
            its end; the message quotes the spec.
    """
    now_utc = to_utc(now) or now
    text = spec.strip() if isinstance(spec, str) else ""
    usage = ("expected a duration like '2d', an ISO date like '2001-09-08' or datetime, "
             f"or FROM..TO, got {spec!r}")
    if not text:
        raise QueryError(f"--since: {usage}")
    try:
        if ".." in text:
            left, right = (part.strip() for part in text.split("..", 1))
            if not left and not right:
                raise QueryError(f"--since: '..' gives no bound; {usage}")
            start = _since_bound(left, now_utc, is_end=False) if left else None
            end = _since_bound(right, now_utc, is_end=True) if right else None
        else:
            start, end = _since_bound(text, now_utc, is_end=False), None
    except (ValueError, OverflowError) as exc:
        raise QueryError(f"--since: {usage}") from exc
    if start is not None and end is not None and start >= end:
        raise QueryError(f"--since {spec!r}: the start {format_utc(start)} is not before the end "
                         f"{format_utc(end)}")
    return start, end
