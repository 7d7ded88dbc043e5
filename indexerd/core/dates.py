"""Date strings -> aware UTC datetimes; plausibility; the meta map; the date resolution chain.

Everything here is a pure function of its arguments (``MetaMap.load`` is the only I/O, and
``parse_date`` reads the clock only to place a two-digit year).  Every datetime returned is
timezone-aware with ``tzinfo is UTC``; a naive datetime handed *in* is taken to be UTC, so nothing
here ever compares a naive value with an aware one (CASES B06).

Outside contracts relied on:

- ``email.utils.parsedate_to_datetime`` parses RFC 5322 / RFC 9110 dates.  It returns a *naive*
  datetime for ``-0000``, for a missing zone and for any zone name it does not know (``WEZ``,
  ``MSK``), and reads two-digit years with a fixed 1969/1970 split.  So we map zone names to
  numeric offsets and expand two-digit years ourselves before calling it, and call it only on
  strings whose zone is numeric or absent.
- ``datetime.fromisoformat`` (3.11) accepts ISO 8601 dates, ``Z`` and ``+hh[:mm]`` offsets.
- ``dateutil.parser.parse`` is the lenient last resort.  It fills missing fields from a default
  date (today, unless told otherwise), warns and returns a naive datetime for a zone name it does
  not know, and reads ``GMT+3`` with the POSIX (inverted) sign.  We pass a fixed default, guard the
  input (4-digit year, month, day), pass ``tzinfos`` as a callable that refuses unknown zone names,
  and convert ``GMT±hh`` ourselves.  dateutil is imported lazily so the CLI starts fast.

Sources of the rules: RFC 9110 §5.6.7 (HTTP-date, two-digit years), §8.8.2.1 (a Last-Modified
later than the response's Date is wrong), the Verity Spider Last-Modified rule and its meta map
file, and the FDSE crawler's chain (meta tag, then the HTTP header, then the current time).
"""

from __future__ import annotations

import email.utils
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone

from indexerd.core.errors import ConfigError, QueryError

__all__ = [
    "UTC", "EPOCH_FLOOR", "FUTURE_SKEW_SECONDS", "parse_date", "parse_duration", "parse_since",
    "format_utc", "DateCheck", "check_plausible", "MetaMapEntry", "MetaMap", "DEFAULT_META_MAP",
    "DATE_SOURCE_NAMES", "DateEvidence", "ResolvedDate", "resolve_date", "validate_order",
]

UTC = timezone.utc
#: A date at or before this instant is "absent": servers send the epoch (or 0) for "unknown".
EPOCH_FLOOR: datetime = datetime(1970, 1, 2, tzinfo=UTC)
#: How far past the reference time (response Date, else fetch time) a date may be: 1 day.
FUTURE_SKEW_SECONDS = 86400.0

# ---------------------------------------------------------------------------------------------
# parse_date
# ---------------------------------------------------------------------------------------------

#: Zone names we understand, in hours east of UTC.  MSK is +3 (true since 2014-10-26; it was
#: +4 from 2011 to 2014, +3/+4 MSD before).  Ambiguous names outside this table give "no date".
_ZONE_HOURS: dict[str, float] = {
    "GMT": 0, "UT": 0, "UTC": 0, "Z": 0,
    "EST": -5, "EDT": -4, "CST": -6, "CDT": -5, "MST": -7, "MDT": -6, "PST": -8, "PDT": -7,
    "WET": 0, "WEST": 1, "CET": 1, "CEST": 2, "EET": 2, "EEST": 3,
    "WEZ": 0, "WESZ": 1, "MEZ": 1, "MESZ": 2,
    "MSK": 3, "MSD": 4,
}
_UTC_NAMES = frozenset({"GMT", "UT", "UTC", "Z"})

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH_WORDS = frozenset(_MONTHS) | {
    "january", "february", "march", "april", "june", "july", "august", "sept", "september",
    "october", "november", "december",
}
#: de_DE ``%b`` abbreviations that differ from English (servers that send WEZ/MEZ send these).
_GERMAN_MONTHS = {"mär": "Mar", "mrz": "Mar", "mai": "May", "okt": "Oct", "dez": "Dec"}
_DAY_WORDS = frozenset({
    "mon", "tue", "tues", "wed", "thu", "thur", "thurs", "fri", "sat", "sun",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
    "mo", "di", "mi", "do", "fr", "sa", "so",
    "montag", "dienstag", "mittwoch", "donnerstag", "freitag", "samstag", "sonnabend", "sonntag",
})

_MAX_INPUT_CHARS = 120
#: A time with second 60 (a leap second: RFC 9110 §5.6.7, RFC 3339 §5.6, ISO 8601), extended
#: (``23:59:60``) or basic (``T235960``) form; group 1 is what stays, the 60 becomes 59.
_LEAP_SECOND = re.compile(r"((?<![\d:])\d{1,2}:[0-5]\d:|[Tt]\d{2}[0-5]\d)60(?!\d)")
_MONTH_ALT = "|".join(_MONTHS)
_LEADING_WORD = re.compile(r"^([^\W\d_]+)\.?(,\s*|\s+)")
_PAREN_COMMENT = re.compile(r"\s*\([^()]*\)$")
_RFC850_DAY_MON_YEAR = re.compile(rf"^(\d{{1,2}})-({_MONTH_ALT})-(\d{{2}}|\d{{4}})(?=\s|$)", re.I)
_GLUED_MONTH_YEAR = re.compile(rf"\b({_MONTH_ALT})(\d{{4}})\b", re.I)
_GMT_OFFSET = re.compile(r"(?<![A-Za-z])(?:GMT|UTC|UT)\s*([+-])(\d{1,2})(?::?(\d{2}))?(?!\d)", re.I)
_OFFSET_TOKEN = re.compile(r"^([+-])(\d{2}):?(\d{2})?$")
_TWO_DIGIT_YEAR = re.compile(rf"^(\d{{1,2}}) ({_MONTH_ALT}) (\d{{2}}) (?=\d)", re.I)
#: RFC 1123 / RFC 850 / RFC 822 after normalisation: ``06 Nov 1994 08:49:37 +0000`` (zone optional).
_RFC_FORM = re.compile(rf"^\d{{1,2}} (?:{_MONTH_ALT}) \d{{4}} \d{{1,2}}:\d{{2}}(?::\d{{2}})?(?: [+-]\d{{4}})?$", re.I)
#: C asctime(), GMT implied: ``Nov 6 08:49:37 1994`` (day name already dropped).
_ASCTIME_FORM = re.compile(rf"^(?:{_MONTH_ALT}) \d{{1,2}} \d{{1,2}}:\d{{2}}:\d{{2}} \d{{4}}$", re.I)
_YEAR_TOKEN = re.compile(r"(?:^| )(\d{4})(?= |$)")
_FOUR_DIGIT_YEAR = re.compile(r"(?<!\d)\d{4}(?!\d)")
_ISO_YMD = re.compile(r"(?<!\d)\d{4}[-/.]\d{1,2}[-/.]\d{1,2}(?!\d)")
_TIME_OR_OFFSET = re.compile(r"\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?|[+-]\d{2}:?\d{2}")
_DAY_NUMBER = re.compile(r"(?<![\d.])\d{1,2}(?:st|nd|rd|th)?(?![\d.:])", re.I)


class _UnknownZone(ValueError):
    """A zone name dateutil found that we do not map (never read as UTC)."""


def _expand_two_digit_year(yy: int, current_year: int) -> int:
    """Place a two-digit year per RFC 9110 §5.6.7, relative to ``current_year``.

    Returns the year ``Y`` with ``Y % 100 == yy`` and ``current_year - 49 <= Y <=
    current_year + 50``: a year that would be more than 50 years in the future means the most
    recent past year with those digits.  No fixed century split (CASES B01).
    """
    limit = current_year + 50
    return limit - ((limit - yy) % 100)


def _to_utc(value: datetime) -> datetime | None:
    """Aware -> converted to UTC; naive -> taken as UTC; None if the conversion overflows."""
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except (OverflowError, ValueError):
        return None


def _normalise(text: str) -> str:
    """Collapse spaces, drop comments and day names, rewrite zones to ``+hhmm``, fix RFC 850."""
    s = " ".join(text.split())
    s = _PAREN_COMMENT.sub("", s)  # "+0000 (UTC)", JavaScript's "(Eastern Daylight Time)"
    m = _LEADING_WORD.match(s)
    if m:
        word = m.group(1).lower()
        # Any word ending in a comma ("Sunday,", "Sa,"), or a known day name before a space.
        if word not in _MONTH_WORDS and (m.group(2).startswith(",") or word in _DAY_WORDS):
            s = s[m.end():]
    s = _GMT_OFFSET.sub(
        lambda g: f"{g.group(1)}{int(g.group(2)):02d}{g.group(3) or '00'}", s)
    tokens = []
    for token in s.split(" "):
        upper = token.upper()
        hours = _ZONE_HOURS.get(upper)
        if hours is not None:
            minutes = int(round(hours * 60))
            sign = "-" if minutes < 0 else "+"
            token = f"{sign}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"
        elif token.lower() in _GERMAN_MONTHS:
            token = _GERMAN_MONTHS[token.lower()]
        else:
            om = _OFFSET_TOKEN.match(token)
            if om:
                token = f"{om.group(1)}{om.group(2)}{om.group(3) or '00'}"
        tokens.append(token)
    s = " ".join(tokens)
    s = _RFC850_DAY_MON_YEAR.sub(r"\1 \2 \3", s)
    s = _GLUED_MONTH_YEAR.sub(r"\1 \2", s)
    m = _TWO_DIGIT_YEAR.match(s)
    if m:
        year = _expand_two_digit_year(int(m.group(3)), datetime.now(UTC).year)
        s = f"{m.group(1)} {m.group(2)} {year} {s[m.end():]}"
    return s


def _lenient_guard(s: str) -> bool:
    """True if ``s`` names a 4-digit year, a month and a day, so dateutil invents nothing."""
    if not _FOUR_DIGIT_YEAR.search(s):
        return False
    if _ISO_YMD.search(s):
        return True
    words = {w.lower() for w in re.findall(r"[^\W\d_]+", s)}
    if not words & _MONTH_WORDS:
        return False
    return _DAY_NUMBER.search(_TIME_OR_OFFSET.sub(" ", s)) is not None


def _dateutil_tzinfo(name: str | None, offset: int | None) -> timezone | None:
    """``tzinfos`` callable for dateutil: our zone table, numeric offsets, else refuse."""
    if name is None and offset is None:
        return None  # no zone in the string: the caller reads naive as UTC
    if name is None:
        return timezone(timedelta(seconds=offset or 0))
    upper = name.upper()
    if offset is not None:
        if upper in _UTC_NAMES and offset == 0:
            return UTC
        raise _UnknownZone(name)  # "UTC+3"-like: POSIX sign, ambiguous
    hours = _ZONE_HOURS.get(upper)
    if hours is None:
        raise _UnknownZone(name)
    return timezone(timedelta(hours=hours))


def _parse_lenient(s: str) -> datetime | None:
    """dateutil, guarded; None on any failure (it raises several undocumented types)."""
    if not _lenient_guard(s):
        return None
    from dateutil import parser as du_parser  # lazy: keeps CLI start-up fast

    try:
        return du_parser.parse(s, default=datetime(2000, 1, 1), tzinfos=_dateutil_tzinfo)
    except Exception:  # noqa: BLE001 - ParserError, OverflowError, TypeError, _UnknownZone...
        return None


def parse_date(value: str | bytes | datetime | None) -> datetime | None:
    """Parse any date we meet (HTTP header, ``<meta>`` content, sitemap ``<lastmod>``, SQL text).

    Accepts RFC 1123 (``Sun, 06 Nov 1994 08:49:37 GMT``), RFC 850 (``Sunday, 06-Nov-94 ...``),
    asctime (``Sun Nov  6 08:49:37 1994``, GMT implied), the same with numeric offsets or the
    zone names in ``_ZONE_HOURS`` (GMT UT UTC Z, EST/EDT CST/CDT MST/MDT PST/PDT, CET/CEST,
    WEZ/WESZ, MEZ/MESZ, MSK=+3, ...), ISO 8601, and other strings dateutil reads when they carry
    a 4-digit year, a month (a name, or numeric in y-m-d order) and a day.  A leading day name
    (English or German) is ignored, never validated.

    A leap second (second 60, which RFC 9110 §5.6.7, RFC 3339 §5.6 and ISO 8601 allow:
    ``Sat, 31 Dec 2016 23:59:60 GMT``, ``2016-12-31T23:59:60Z``) is read as second 59 of the same
    minute, in every form above (a fraction is kept): ``23:59:59`` of that day in UTC.  Python's
    datetime has no second 60, and the second before keeps the order of dates within a day.
    Second 61 and minute 60 are refused.

    Args:
        value: the text (bytes are decoded as UTF-8 with replacement), or a datetime (aware:
            converted to UTC; naive: taken as UTC), or a ``date`` (midnight UTC), or None.

    Returns:
        An aware datetime with ``tzinfo is UTC``, or None when the value is absent, is not a
        date we can read exactly, or names a zone we do not know (never silently UTC).  A
        string with no zone at all is UTC (RFC 9110 §5.6.7: HTTP dates are GMT).  Two-digit
        years follow RFC 9110 §5.6.7 relative to the current year (CASES B01).  No plausibility
        check is made here (see :func:`check_plausible`).

    Never raises, whatever the input.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        return _to_utc(value)
    if isinstance(value, date):
        return datetime.combine(value, time(), tzinfo=UTC)
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", errors="replace")
    if not isinstance(value, str):
        return None
    if len(value) > 4 * _MAX_INPUT_CHARS:
        return None
    s = _normalise(value)
    if not s or len(s) > _MAX_INPUT_CHARS:
        return None
    s = _LEAP_SECOND.sub(r"\g<1>59", s)  # Python's datetime has no second 60
    result: datetime | None = None
    if _RFC_FORM.match(s) or _ASCTIME_FORM.match(s):
        # Zone is numeric or absent here, so a naive result means -0000 or none: UTC.
        try:
            result = email.utils.parsedate_to_datetime(s)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None  # right shape, impossible values (31 Feb, hour 25)
        # email.utils applies its two-digit rule to the *value*: "0001" comes back as 2001.
        if result.year != int(_YEAR_TOKEN.findall(s)[0]):
            return None
    else:
        try:
            result = datetime.fromisoformat(s)
        except ValueError:
            result = _parse_lenient(s)
    return None if result is None else _to_utc(result)


# ---------------------------------------------------------------------------------------------
# Durations, spans, formatting
# ---------------------------------------------------------------------------------------------

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
        converted = _to_utc(moment)
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
    now_utc = _to_utc(now) or now
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


def format_utc(dt: datetime | None) -> str | None:
    """ISO 8601 in UTC with whole seconds (truncated) and a ``Z``: ``2001-09-09T01:46:40Z``.

    None -> None.  A naive datetime is taken as UTC.  Raises OverflowError only if an aware
    value cannot be expressed in UTC (years 1 / 9999 with an offset).
    """
    if dt is None:
        return None
    u = dt.replace(tzinfo=UTC) if dt.utcoffset() is None else dt.astimezone(UTC)
    return (f"{u.year:04d}-{u.month:02d}-{u.day:02d}"
            f"T{u.hour:02d}:{u.minute:02d}:{u.second:02d}Z")


# ---------------------------------------------------------------------------------------------
# Plausibility
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DateCheck:
    """The verdict on one candidate date.

    Attributes:
        value: the date (aware UTC) if accepted, else None.
        note: one fixed word: ``accepted``, ``missing`` (no value), ``unparseable``,
            ``epoch-or-earlier`` (at or before :data:`EPOCH_FLOOR`), ``future`` (later than the
            reference by more than :data:`FUTURE_SKEW_SECONDS`).
    """

    value: datetime | None
    note: str


def check_plausible(value: datetime | None, reference: datetime) -> DateCheck:
    """Accept a date only if it is after 1970-01-02 and not more than a day past ``reference``.

    ``reference`` is the response's Date header when that is itself plausible, else the fetch
    time (RFC 9110 §8.8.2.1: an origin server must not send a Last-Modified later than its
    Date; CASES B03 epoch dates, B04 dates in 2099).  Naive inputs are taken as UTC.  Never
    raises.

    Returns:
        DateCheck with the value converted to UTC and note ``accepted``; or value None and note
        ``missing`` (value None), ``epoch-or-earlier`` or ``future``.
    """
    if value is None:
        return DateCheck(None, "missing")
    if value.utcoffset() is None:
        value = value.replace(tzinfo=UTC)
    if reference.utcoffset() is None:
        reference = reference.replace(tzinfo=UTC)
    if value <= EPOCH_FLOOR:
        return DateCheck(None, "epoch-or-earlier")
    if (value - reference).total_seconds() > FUTURE_SKEW_SECONDS:
        return DateCheck(None, "future")
    converted = _to_utc(value)
    if converted is None:  # pragma: no cover - only for references near year 9999
        return DateCheck(None, "future")
    return DateCheck(converted, "accepted")


# ---------------------------------------------------------------------------------------------
# Meta map (Verity Spider's map file)
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MetaMapEntry:
    """One line of the meta map: ``<meta-name> Last-Modified Y|N``.

    Attributes:
        name: lower-cased meta name (``last-modified``, ``article:modified_time``, ...).
        override: True (``Y``): the meta value beats the protocol date even when both exist.
            False (``N``): used only when there is no usable protocol date.
    """

    name: str
    override: bool


_MAP_USAGE = "expected '<meta-name> Last-Modified Y|N'"


@dataclass(frozen=True)
class MetaMap:
    """Which ``<meta>`` tags may supply Last-Modified, in priority order (Verity Spider map file).

    Format: one mapping a line, ``<meta-name> Last-Modified Y|N``; ``#`` starts a comment (whole
    line or trailing); blank lines are ignored; ``Last-Modified``, ``Y`` and ``N`` are
    case-insensitive.  Among several lines the first that yields a usable date wins.
    """

    entries: tuple[MetaMapEntry, ...]

    @classmethod
    def parse(cls, text: str, origin: str = "<string>") -> MetaMap:
        """Parse map-file text.

        Raises:
            ConfigError: ``<origin>:<line>: expected '<meta-name> Last-Modified Y|N', got '...'``.
        """
        entries: list[MetaMapEntry] = []
        for lineno, raw in enumerate(text.splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            if (len(fields) != 3 or fields[1].lower() != "last-modified"
                    or fields[2].upper() not in ("Y", "N")):
                raise ConfigError(f"{origin}:{lineno}: {_MAP_USAGE}, got {raw.strip()!r}")
            entries.append(MetaMapEntry(fields[0].lower(), fields[2].upper() == "Y"))
        return cls(tuple(entries))

    @classmethod
    def load(cls, path: str | os.PathLike) -> MetaMap:
        """Read and parse a map file (UTF-8, a BOM is ignored).

        Raises:
            ConfigError: the file cannot be read or decoded (message names the file), or a line
                is malformed (message gives ``file:line``).
        """
        name = os.fspath(path)
        try:
            with open(name, encoding="utf-8-sig") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{name}: cannot read the meta map: {exc}") from exc
        return cls.parse(text, origin=str(name))


#: FDSE-like default: ``<meta name="last-modified">`` overrides the protocol date.  It also
#: matches ``<meta http-equiv="last-modified">``: extraction stores http-equiv under its
#: lower-cased name too.
DEFAULT_META_MAP = MetaMap((MetaMapEntry("last-modified", True),))

# ---------------------------------------------------------------------------------------------
# The resolution chain
# ---------------------------------------------------------------------------------------------

#: Names valid in a source's ``date_sources`` order.  header/mtime/column/protocol all name the
#: protocol slot (whichever kind the source supplies).
DATE_SOURCE_NAMES = ("meta", "document", "header", "mtime", "column", "protocol", "sitemap",
                     "fallback")
_PROTOCOL_SLOT_NAMES = frozenset({"header", "mtime", "column", "protocol"})
_PROTOCOL_KINDS = ("header", "mtime", "column")


@dataclass(frozen=True)
class DateEvidence:
    """Everything a source knows about one document's date, before resolution.

    Attributes:
        fetched_at: when we read/fetched the document (aware UTC; naive is taken as UTC).
        meta: lower-cased meta name -> content, from extraction.
        protocol: the HTTP Last-Modified header text, a file's mtime (aware datetime) or a SQL
            column value (text or datetime); None if there is none.
        protocol_kind: ``header`` | ``mtime`` | ``column``; the stored source name if it wins.
        sitemap: the sitemap ``<lastmod>`` (text or datetime), if any.
        server_date: the HTTP response's Date header, if any.
        document: the document's own date as ``(property, raw text)``: Office core
            ``dcterms:modified``, OpenDocument ``dc:date``, EPUB ``dcterms:modified``/``dc:date``,
            mail ``Date``, RTF ``revtim`` (``Extracted.document_date``); None if it has none.

    Raises:
        ValueError: protocol_kind is not one of the three kinds.
    """

    fetched_at: datetime
    meta: Mapping[str, str] = field(default_factory=dict)
    protocol: str | datetime | None = None
    protocol_kind: str = "header"
    sitemap: str | datetime | None = None
    server_date: str | datetime | None = None
    document: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if self.protocol_kind not in _PROTOCOL_KINDS:
            raise ValueError(f"protocol_kind must be one of {_PROTOCOL_KINDS}, "
                             f"got {self.protocol_kind!r}")


@dataclass(frozen=True)
class ResolvedDate:
    """The date stored and indexed for a document, and where it came from.

    Attributes:
        value: aware UTC, whole seconds (truncated, like :func:`format_utc`); always set.
        source: ``meta:<name>`` | ``document:<property>`` (``document:dcterms:modified``) |
            ``header`` | ``mtime`` | ``column`` | ``sitemap`` |
            ``fallback`` (the response Date or the fetch time: when we looked, not when it
            changed; the decision treats it as no date).
        notes: one per candidate looked at, in order: ``"<slot>: <note>"`` with the note word
            from :class:`DateCheck` and the value or raw text in parentheses, e.g.
            ``"header: future (2099-01-01T00:00:00Z)"``, ``"meta:last-modified: missing"``.
    """

    value: datetime
    source: str
    notes: tuple[str, ...]

    @property
    def is_fallback(self) -> bool:
        """True when no real date was found and the value is the server date or fetch time."""
        return self.source == "fallback"


def validate_order(order: Sequence[str]) -> tuple[str, ...]:
    """Check a ``date_sources`` list and return the effective order.

    Names (case-insensitive) are those of :data:`DATE_SOURCE_NAMES`; header/mtime/column/protocol
    all name the one protocol slot, so only one of them may appear; each slot appears once;
    ``fallback`` may only be last (it always succeeds) and is appended when omitted.

    Returns:
        The lower-cased names, ending with ``"fallback"``.

    Raises:
        ValueError: not a list of strings, empty, an unknown name, a repeated slot, or a name
            after ``fallback``; the message quotes the bad entry.
    """
    if isinstance(order, (str, bytes)) or not isinstance(order, Sequence):
        raise ValueError(f"date sources must be a list of names, got {order!r}")
    if not order:
        raise ValueError(f"date sources must name at least one of {', '.join(DATE_SOURCE_NAMES)}")
    names: list[str] = []
    seen: dict[str, str] = {}
    for entry in order:
        if not isinstance(entry, str) or entry.strip().lower() not in DATE_SOURCE_NAMES:
            raise ValueError(f"unknown date source {entry!r}; expected one of "
                             f"{', '.join(DATE_SOURCE_NAMES)}")
        name = entry.strip().lower()
        slot = "protocol" if name in _PROTOCOL_SLOT_NAMES else name
        if "fallback" in seen:
            raise ValueError(f"date source {entry!r} comes after 'fallback', which always "
                             "succeeds, so it would never be used")
        if slot in seen:
            raise ValueError(f"date source {entry!r} repeats the {slot} slot already named "
                             f"by {seen[slot]!r}")
        seen[slot] = entry
        names.append(name)
    if names[-1] != "fallback":
        names.append("fallback")
    return tuple(names)


def _shown(raw: object) -> str:
    """Short repr of a raw candidate for a note."""
    text = repr(raw)
    return text if len(text) <= 60 else text[:57] + "..."


def _examine(raw: str | datetime | None, reference: datetime) -> tuple[DateCheck, str]:
    """Parse and check one raw candidate; returns the check and the note's detail."""
    if raw is None or (isinstance(raw, (str, bytes)) and not raw.strip()):
        return DateCheck(None, "missing"), ""
    parsed = parse_date(raw)
    if parsed is None:
        return DateCheck(None, "unparseable"), f" ({_shown(raw)})"
    check = check_plausible(parsed, reference)
    return check, f" ({format_utc(parsed)})"


def resolve_date(evidence: DateEvidence, meta_map: MetaMap = DEFAULT_META_MAP,
                 order: Sequence[str] | None = None) -> ResolvedDate:
    """Pick the document's date: the first usable candidate in order, else the fallback.

    Default order (``order`` None; Verity Spider map file + FDSE chain): meta entries flagged
    Y (map order), the document's own date (``document``: what its format records as last
    modified, like a Y meta tag), the protocol date (HTTP Last-Modified, file mtime or SQL
    column), meta entries flagged N, the sitemap ``<lastmod>``, the fallback.  With an explicit ``order``
    (see :func:`validate_order`) the slots come in that order; its ``meta`` slot tries every
    map entry in map order whatever its flag.  A map entry absent from the document is skipped
    (note ``missing``).

    Usable = parses (:func:`parse_date`) and passes :func:`check_plausible` against the
    reference: the response's ``server_date`` if it parses and is itself plausible against
    ``fetched_at`` (after 1970-01-02, not more than a day after ``fetched_at``), else
    ``fetched_at``.  The fallback value is that plausible server date, else ``fetched_at``
    (FDSE: "then the current time"); never 1970 or a future date (CASES B03, B04).

    Returns:
        ResolvedDate, value truncated to whole seconds.

    Raises:
        ValueError: ``order`` is invalid (see :func:`validate_order`).
    """
    fetched_at = _to_utc(evidence.fetched_at) or evidence.fetched_at
    notes: list[str] = []
    reference, reference_kind = fetched_at, "fetch time"
    if evidence.server_date is not None:
        server_check, detail = _examine(evidence.server_date, fetched_at)
        notes.append(f"server-date: {server_check.note}{detail}")
        if server_check.value is not None:
            reference, reference_kind = server_check.value, "server date"

    meta = {str(k).lower(): v for k, v in evidence.meta.items()}
    meta_y = [e for e in meta_map.entries if e.override]
    meta_n = [e for e in meta_map.entries if not e.override]
    protocol = [(evidence.protocol_kind, evidence.protocol)]
    sitemap = [("sitemap", evidence.sitemap)]
    document = ([(f"document:{evidence.document[0]}", evidence.document[1])]
                if evidence.document is not None else [("document", None)])

    def metas(entries: list[MetaMapEntry]) -> list[tuple[str, str | None]]:
        return [(f"meta:{e.name}", meta.get(e.name)) for e in entries]

    if order is None:
        candidates = metas(meta_y) + (document if evidence.document is not None else []) \
            + protocol + metas(meta_n) + sitemap
    else:
        candidates = []
        for name in validate_order(order):
            if name == "meta":
                candidates += metas(list(meta_map.entries))
            elif name in _PROTOCOL_SLOT_NAMES:
                candidates += protocol
            elif name == "sitemap":
                candidates += sitemap
            elif name == "document":
                candidates += document

    for label, raw in candidates:
        check, detail = _examine(raw, reference)
        notes.append(f"{label}: {check.note}{detail}")
        if check.value is not None:
            return ResolvedDate(check.value.replace(microsecond=0), label, tuple(notes))
    value = reference.replace(microsecond=0)
    notes.append(f"fallback: {reference_kind} ({format_utc(value)})")
    return ResolvedDate(value, "fallback", tuple(notes))
