"""Date strings -> aware UTC datetimes, and whether a date is plausible.

Everything here is a pure function of its arguments (``parse_date`` reads the clock only to place
a two-digit year).  Every datetime returned is timezone-aware with ``tzinfo is UTC``; a naive
datetime handed *in* is taken to be UTC, so nothing here ever compares a naive value with an
aware one (CASES B06).  Which candidate date a document gets is :mod:`indexerd.core.datechain`;
the meta map is :mod:`indexerd.core.metamap`; durations and ``--since`` spans are
:mod:`indexerd.core.timespans`.

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
later than the response's Date is wrong).
"""

from __future__ import annotations

import email.utils
import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone

__all__ = [
    "UTC", "EPOCH_FLOOR", "FUTURE_SKEW_SECONDS", "parse_date", "to_utc", "format_utc",
    "DateCheck", "check_plausible",
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


def to_utc(value: datetime) -> datetime | None:
    """Aware -> converted to UTC; naive -> taken as UTC; None if the conversion overflows.

    Never raises: an aware value near year 1 or 9999 that UTC cannot hold gives None.
    """
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
        parsed: datetime = du_parser.parse(s, default=datetime(2000, 1, 1), tzinfos=_dateutil_tzinfo)
        return parsed
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
        return to_utc(value)
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
    return None if result is None else to_utc(result)




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
    converted = to_utc(value)
    if converted is None:  # pragma: no cover - only for references near year 9999
        return DateCheck(None, "future")
    return DateCheck(converted, "accepted")
