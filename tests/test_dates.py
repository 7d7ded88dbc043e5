"""Tests for indexerd.core.dates (the parser, plausibility), core.timespans (durations, spans), core.metamap
and core.datechain (resolution)."""

from __future__ import annotations

import email.utils
import re
import subprocess
import sys
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexerd.core.datechain import DATE_SOURCE_NAMES, DateEvidence, ResolvedDate, resolve_date, validate_order
from indexerd.core.dates import (
    EPOCH_FLOOR,
    FUTURE_SKEW_SECONDS,
    UTC,
    DateCheck,
    _expand_two_digit_year,
    _ZONE_HOURS,
    check_plausible,
    format_utc,
    parse_date,
)
from indexerd.core.errors import ConfigError, QueryError
from indexerd.core.metamap import DEFAULT_META_MAP, MetaMap, MetaMapEntry
from indexerd.core.timespans import parse_duration, parse_since


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# --- parse_date: right values -------------------------------------------------------------

PARSE_CASES = [
    # RFC 1123 / RFC 850 / asctime (RFC 9110 §5.6.7)
    ("Sun, 06 Nov 1994 08:49:37 GMT", utc(1994, 11, 6, 8, 49, 37)),
    ("Sunday, 06-Nov-94 08:49:37 GMT", utc(1994, 11, 6, 8, 49, 37)),
    ("Saturday, 08-Sep-01 21:46:40 GMT", utc(2001, 9, 8, 21, 46, 40)),  # B01: not 1901
    ("Sun Nov  6 08:49:37 1994", utc(1994, 11, 6, 8, 49, 37)),
    ("Sun Sep  9 01:46:40 2001", utc(2001, 9, 9, 1, 46, 40)),  # B06 poll 2
    ("Sat, 08 Sep 2001 21:46:40 -0000", utc(2001, 9, 8, 21, 46, 40)),  # B06 poll 1
    ("Wed, 21 Jun 2017 11:35:20 +0000", utc(2017, 6, 21, 11, 35, 20)),  # B06 poll 3
    # named zones (B02, Apache SSI format)
    ("Saturday, 08-Sep-2001 21:46:40 EDT", utc(2001, 9, 9, 1, 46, 40)),
    ("Tuesday, 21-Jan-2025 05:01:50 EST", utc(2025, 1, 21, 10, 1, 50)),
    ("Sa, 07 Apr 2001 00:58:08 WEZ", utc(2001, 4, 7, 0, 58, 8)),
    ("Sat, 07 Apr 2001 00:58:08 WEZ", utc(2001, 4, 7, 0, 58, 8)),
    ("Sat, 07 Apr 2001 00:58:08 MEZ", utc(2001, 4, 6, 23, 58, 8)),
    ("Sat, 07 Jul 2001 12:00:00 MESZ", utc(2001, 7, 7, 10, 0, 0)),
    ("Sat, 07 Jul 2001 12:00:00 WESZ", utc(2001, 7, 7, 11, 0, 0)),
    ("Sat, 07 Jul 2001 12:00:00 CEST", utc(2001, 7, 7, 10, 0, 0)),
    ("Sat, 07 Apr 2001 12:00:00 CET", utc(2001, 4, 7, 11, 0, 0)),
    ("Sat, 07 Apr 2001 12:00:00 PST", utc(2001, 4, 7, 20, 0, 0)),
    ("Sat, 07 Jul 2001 12:00:00 PDT", utc(2001, 7, 7, 19, 0, 0)),
    ("Sat, 07 Apr 2001 12:00:00 CST", utc(2001, 4, 7, 18, 0, 0)),
    ("Sat, 07 Jul 2001 12:00:00 CDT", utc(2001, 7, 7, 17, 0, 0)),
    ("Sat, 07 Apr 2001 12:00:00 MST", utc(2001, 4, 7, 19, 0, 0)),
    ("Sat, 07 Jul 2001 12:00:00 MDT", utc(2001, 7, 7, 18, 0, 0)),
    ("Sat, 07 Apr 2001 12:00:00 UT", utc(2001, 4, 7, 12, 0, 0)),
    ("Sat, 07 Apr 2001 12:00:00 UTC", utc(2001, 4, 7, 12, 0, 0)),
    ("Sat, 07 Apr 2001 12:00:00 Z", utc(2001, 4, 7, 12, 0, 0)),
    ("Sat, 07 Apr 2001 12:00:00 +0530", utc(2001, 4, 7, 6, 30, 0)),
    ("Sat, 07 Apr 2001 12:00:00 +05:30", utc(2001, 4, 7, 6, 30, 0)),
    ("Thu, 19 Jul 2018 01:06:14 MSK", utc(2018, 7, 18, 22, 6, 14)),  # B02 second case, +3
    # the missing month/year space
    ("Sat, 07 Apr2001 00:58:08 GMT", utc(2001, 4, 7, 0, 58, 8)),
    # German month abbreviations (de_DE %b), as sent next to WEZ/MEZ
    ("Sa, 12 Mai 2001 10:00:00 MESZ", utc(2001, 5, 12, 8, 0, 0)),
    ("Mi, 03 Okt 2001 10:00:00 MESZ", utc(2001, 10, 3, 8, 0, 0)),
    # ISO 8601 / SQL text
    ("2001-09-08T21:46:40-04:00", utc(2001, 9, 9, 1, 46, 40)),
    ("2001-09-08T21:46:40Z", utc(2001, 9, 8, 21, 46, 40)),
    ("2001-09-08", utc(2001, 9, 8)),
    ("2001-09-08 21:46:40", utc(2001, 9, 8, 21, 46, 40)),
    ("2023-05-01 10:00:00+00", utc(2023, 5, 1, 10, 0, 0)),
    ("2001-09-08 21:46:40 UTC", utc(2001, 9, 8, 21, 46, 40)),
    ("2001-09-08T21:46:40 EDT", utc(2001, 9, 9, 1, 46, 40)),
    # other real forms: Unix date(1), JavaScript Date.toString(), prose dates, comments
    ("Sat Sep  8 21:46:40 EDT 2001", utc(2001, 9, 9, 1, 46, 40)),
    ("Sat Sep 08 2001 21:46:40 GMT-0400 (Eastern Daylight Time)", utc(2001, 9, 9, 1, 46, 40)),
    ("2001-09-08 21:46:40 UTC+3", utc(2001, 9, 8, 18, 46, 40)),  # human sign, not POSIX
    ("September 8, 2001", utc(2001, 9, 8)),
    ("8 Sep 2001 9:46 PM EDT", utc(2001, 9, 9, 1, 46)),
    ("Sat, 07 Apr 2001 00:58:08 +0000 (UTC)", utc(2001, 4, 7, 0, 58, 8)),
    ("  Sun,   06 Nov 1994\t08:49:37 GMT \n", utc(1994, 11, 6, 8, 49, 37)),
    (b"Sun, 06 Nov 1994 08:49:37 GMT", utc(1994, 11, 6, 8, 49, 37)),
    # parsed but implausible: that is check_plausible's business, not the parser's
    ("Thu, 01 Jan 1970 00:00:00 GMT", utc(1970, 1, 1)),
]


@pytest.mark.parametrize(("text", "expected"), PARSE_CASES)
def test_parse_date_right_values(text: str | bytes, expected: datetime) -> None:
    got = parse_date(text)
    assert got == expected
    assert got is not None and got.tzinfo is UTC


NONE_CASES = [
    "Sat, 07 Apr 2001 00:58:08 XYZ",  # unknown zone: never silently UTC
    "Sat, 07 Apr 2001 00:58:08 xyz",
    "Sat, 07 Apr 2001 00:58:08 BST",  # ambiguous, not in the table
    "2001-09-08 21:46:40 XYZ",
    "Sep 8 2001 12:00 PST8PDT",
    "Mon, 31 Feb 2020 10:00:00 GMT",
    "Sun, 06 Nov 1994 25:49:37 GMT",
    "Sun, 06 Nov 1994 08:49:37 +9999",
    "", "   ", "0", "-1", "garbage", "5", "2001", "12:30", "01.05.2023", "Sep 2001", "Sep 8",
    "2001-09", "Sep 2001 12:00",
    "Mon, 01 Jan 0001 00:00:00 +0500",  # email.utils would read 0001 as 2001
    "9999-12-31T23:59:59-05:00",  # beyond datetime's range in UTC
    "Sun, 06 Nov 1994 08:49:37 GMT" * 20,  # absurdly long
]


@pytest.mark.parametrize("text", NONE_CASES)
def test_parse_date_refuses(text: str) -> None:
    assert parse_date(text) is None


def test_parse_date_none_and_other_types() -> None:
    assert parse_date(None) is None
    assert parse_date(12345) is None  # type: ignore[arg-type]


def test_parse_date_msk_never_read_as_utc() -> None:
    got = parse_date("Thu, 19 Jul 2018 01:06:14 MSK")
    assert got in (utc(2018, 7, 18, 22, 6, 14), None)
    assert got != utc(2018, 7, 19, 1, 6, 14)


def test_parse_date_datetime_inputs() -> None:
    edt = timezone(timedelta(hours=-4))
    aware = parse_date(datetime(2001, 9, 8, 21, 46, 40, tzinfo=edt))
    assert aware == utc(2001, 9, 9, 1, 46, 40) and aware.tzinfo is UTC
    naive = parse_date(datetime(2001, 9, 8, 21, 46, 40))
    assert naive == utc(2001, 9, 8, 21, 46, 40) and naive.tzinfo is UTC
    assert parse_date(date(2001, 9, 8)) == utc(2001, 9, 8)
    # an aware value that cannot be shown in UTC is "no date", not an OverflowError
    assert parse_date(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))) is None


@pytest.mark.parametrize(
    ("yy", "current", "expected"),
    [
        (1, 2026, 2001), (94, 2026, 1994), (76, 2026, 2076), (77, 2026, 1977),
        (70, 2026, 2070), (26, 2026, 2026), (0, 2026, 2000),
        (10, 2090, 2110), (41, 2090, 2041), (99, 1999, 1999), (49, 1999, 2049),
        (50, 1999, 1950),
    ],
)
def test_two_digit_year_follows_rfc9110_window(yy: int, current: int, expected: int) -> None:
    got = _expand_two_digit_year(yy, current)
    assert got == expected
    assert got % 100 == yy and current - 49 <= got <= current + 50


def test_two_digit_year_is_relative_to_the_current_year() -> None:
    now = datetime.now(UTC)
    yy = (now.year - 3) % 100
    got = parse_date(f"Monday, 01-Mar-{yy:02d} 10:00:00 GMT")
    assert got == utc(now.year - 3, 3, 1, 10)


def test_importing_dates_does_not_import_dateutil() -> None:
    code = ("import sys, indexerd.core.dates, indexerd.core.datechain, indexerd.core.timespans; "
            "assert 'dateutil' not in sys.modules")
    subprocess.run([sys.executable, "-W", "error", "-c", code], check=True,
                   cwd=Path(__file__).resolve().parent.parent)


# --- parse_date: properties ----------------------------------------------------------------

_SAMPLES = [text for text, _ in PARSE_CASES if isinstance(text, str)] + NONE_CASES


def _assert_utc_or_none(value: datetime | None) -> None:
    if value is not None:
        assert value.tzinfo is UTC
        assert value.utcoffset() == timedelta(0)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80))
def test_parse_date_never_raises_on_text(text: str) -> None:
    _assert_utc_or_none(parse_date(text))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_parse_date_never_raises_on_bytes(raw: bytes) -> None:
    _assert_utc_or_none(parse_date(raw))


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(_SAMPLES), st.integers(0, 60), st.integers(0, 60), st.text(max_size=6))
def test_parse_date_never_raises_on_mangled_real_forms(sample: str, cut: int, at: int,
                                                       noise: str) -> None:
    mangled = sample[:at] + noise + sample[at + cut % 4:]
    _assert_utc_or_none(parse_date(mangled))
    _assert_utc_or_none(parse_date(sample[:cut]))


_DAY_NAMES = ["Sun", "Sunday", "Mo", "Sa", "Donnerstag", ""]
_MONTH_ABBR = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
_WHOLE_SECONDS = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1)).map(
    lambda d: d.replace(microsecond=0, tzinfo=UTC))


@settings(max_examples=300, deadline=None)
@given(_WHOLE_SECONDS, st.sampled_from(sorted(_ZONE_HOURS)), st.sampled_from(_DAY_NAMES),
       st.booleans())
def test_parse_date_round_trips_rfc1123_in_every_named_zone(moment: datetime, zone: str,
                                                            day: str, dash: bool) -> None:
    local = moment.astimezone(timezone(timedelta(hours=_ZONE_HOURS[zone])))
    mon = _MONTH_ABBR[local.month - 1]
    body = (f"{local.day:02d}-{mon}-{local.year}" if dash
            else f"{local.day:02d} {mon} {local.year}")
    prefix = f"{day}, " if day else ""
    text = f"{prefix}{body} {local:%H:%M:%S} {zone}"
    assert parse_date(text) == moment, text


@settings(max_examples=200, deadline=None)
@given(_WHOLE_SECONDS)
def test_parse_date_round_trips_stdlib_and_own_formats(moment: datetime) -> None:
    assert parse_date(email.utils.format_datetime(moment, usegmt=True)) == moment
    assert parse_date(format_utc(moment)) == moment
    assert parse_date(moment.isoformat()) == moment
    asctime = f"{moment:%a} {_MONTH_ABBR[moment.month - 1]} {moment.day:2d} {moment:%H:%M:%S} {moment.year}"
    assert parse_date(asctime) == moment


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 40), st.integers(1, 12), st.integers(1, 28))
def test_parse_date_rfc850_two_digit_year_recent_past(years_ago: int, month: int, day: int) -> None:
    year = datetime.now(UTC).year - years_ago
    text = f"Sunday, {day:02d}-{_MONTH_ABBR[month - 1]}-{year % 100:02d} 08:49:37 GMT"
    assert parse_date(text) == utc(year, month, day, 8, 49, 37)


# --- parse_duration -------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("spec", "seconds"),
    [
        ("15m", 900.0), ("1h30m", 5400.0), ("2d", 172800.0), ("90s", 90.0), ("1.5h", 5400.0),
        ("500ms", 0.5), ("1w", 604800.0), ("90", 90.0), ("2.5", 2.5), ("0", 0.0),
        (" 1h 30m ", 5400.0), ("1H", 3600.0), (30, 30.0), (1.5, 1.5),
    ],
)
def test_parse_duration(spec: str | int | float, seconds: float) -> None:
    assert parse_duration(spec) == seconds


@pytest.mark.parametrize("spec", ["", " ", "xyz", "-5", "-5m", "5x", "m", "1h-30m", "1e5",
                                  "inf", "nan", -1, float("nan"), float("inf"), True, None,
                                  "9" * 400 + "w"])
def test_parse_duration_refuses(spec: object) -> None:
    with pytest.raises(ValueError, match="expected a duration like '15m', '1h30m' or '2d'"):
        parse_duration(spec)  # type: ignore[arg-type]


def test_parse_duration_message_quotes_input() -> None:
    with pytest.raises(ValueError) as info:
        parse_duration("xyz")
    assert str(info.value) == "expected a duration like '15m', '1h30m' or '2d', got 'xyz'"


# --- parse_since ----------------------------------------------------------------------------

NOW = utc(2024, 6, 15, 12, 0, 0)


@pytest.mark.parametrize(
    ("spec", "start", "end"),
    [
        ("2d", utc(2024, 6, 13, 12), None),
        ("3h", utc(2024, 6, 15, 9), None),
        ("90m", utc(2024, 6, 15, 10, 30), None),
        ("2001-09-08", utc(2001, 9, 8), None),
        ("2001-09-08T21:46:40", utc(2001, 9, 8, 21, 46, 40), None),  # no zone: UTC
        ("2001-09-08T21:46:40-04:00", utc(2001, 9, 9, 1, 46, 40), None),
        ("2001-09-08T21:46:40Z", utc(2001, 9, 8, 21, 46, 40), None),
        ("2001-09-08..2001-09-10", utc(2001, 9, 8), utc(2001, 9, 11)),  # date TO: exclusive
        ("2001-09-08..2001-09-08", utc(2001, 9, 8), utc(2001, 9, 9)),  # one whole day
        ("..2001-09-08", None, utc(2001, 9, 9)),
        ("2001-09-08..", utc(2001, 9, 8), None),
        ("7d..1d", utc(2024, 6, 8, 12), utc(2024, 6, 14, 12)),
        ("2024-06-01..12h", utc(2024, 6, 1), utc(2024, 6, 15)),
        ("2001-09-08T10:00..2001-09-08T11:30Z", utc(2001, 9, 8, 10), utc(2001, 9, 8, 11, 30)),
        (" 2d ", utc(2024, 6, 13, 12), None),
    ],
)
def test_parse_since(spec: str, start: datetime | None, end: datetime | None) -> None:
    got = parse_since(spec, NOW)
    assert got == (start, end)
    for value in got:
        assert value is None or value.tzinfo is UTC


def test_parse_since_naive_now_is_utc() -> None:
    assert parse_since("1h", datetime(2024, 6, 15, 12)) == (utc(2024, 6, 15, 11), None)


@pytest.mark.parametrize("spec", ["", "  ", "..", "xyz", "2001", "90", "-2d", "2001-13-01",
                                  "2001-09-10..2001-09-08", "1d..2d", "2001-09-08..bogus",
                                  "9" * 400 + "w", "2001-09-08...2001-09-09"])
def test_parse_since_refuses_with_query_error(spec: str) -> None:
    with pytest.raises(QueryError) as info:
        parse_since(spec, NOW)
    assert repr(spec) in str(info.value)


# --- format_utc -----------------------------------------------------------------------------

def test_format_utc() -> None:
    edt = timezone(timedelta(hours=-4))
    assert format_utc(datetime(2001, 9, 8, 21, 46, 40, 999999, tzinfo=edt)) == "2001-09-09T01:46:40Z"
    assert format_utc(datetime(2001, 9, 8, 21, 46, 40)) == "2001-09-08T21:46:40Z"
    assert format_utc(utc(999, 1, 2)) == "0999-01-02T00:00:00Z"
    assert format_utc(None) is None


# --- check_plausible ------------------------------------------------------------------------

REF = utc(2020, 6, 1, 12)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, DateCheck(None, "missing")),
        (utc(1970, 1, 1), DateCheck(None, "epoch-or-earlier")),
        (EPOCH_FLOOR, DateCheck(None, "epoch-or-earlier")),
        (utc(1900, 1, 1), DateCheck(None, "epoch-or-earlier")),
        (EPOCH_FLOOR + timedelta(seconds=1), DateCheck(EPOCH_FLOOR + timedelta(seconds=1), "accepted")),
        (REF, DateCheck(REF, "accepted")),
        (REF + timedelta(seconds=FUTURE_SKEW_SECONDS), DateCheck(REF + timedelta(days=1), "accepted")),
        (REF + timedelta(seconds=FUTURE_SKEW_SECONDS + 1), DateCheck(None, "future")),
        (utc(2099, 1, 1), DateCheck(None, "future")),
    ],
)
def test_check_plausible(value: datetime | None, expected: DateCheck) -> None:
    assert check_plausible(value, REF) == expected


def test_check_plausible_converts_to_utc_and_takes_naive_as_utc() -> None:
    edt = timezone(timedelta(hours=-4))
    got = check_plausible(datetime(2001, 9, 8, 21, 46, 40, tzinfo=edt), REF)
    assert got == DateCheck(utc(2001, 9, 9, 1, 46, 40), "accepted") and got.value.tzinfo is UTC
    assert check_plausible(datetime(2020, 6, 3), datetime(2020, 6, 1)).note == "future"


# --- MetaMap -------------------------------------------------------------------------------

def test_meta_map_parse() -> None:
    text = """
    # whole-line comment
    Last-Modified   Last-Modified Y
    article:modified_time last-modified y   # trailing comment

    DC.Date.Modified LAST-MODIFIED N
    """
    assert MetaMap.parse(text) == MetaMap((
        MetaMapEntry("last-modified", True),
        MetaMapEntry("article:modified_time", True),
        MetaMapEntry("dc.date.modified", False),
    ))
    assert MetaMap.parse("") == MetaMap(())
    assert MetaMap.parse("# only comments\n\n") == MetaMap(())


@pytest.mark.parametrize(
    ("text", "lineno"),
    [
        ("last-modified Last-Modified", 1),
        ("a Last-Modified Y\n\nlast-modified Title Y", 3),
        ("# c\nlast-modified Last-Modified maybe", 2),
        ("last-modified Last-Modified Y extra", 1),
        ("last-modified", 1),
    ],
)
def test_meta_map_parse_errors_name_origin_and_line(text: str, lineno: int) -> None:
    with pytest.raises(ConfigError) as info:
        MetaMap.parse(text, origin="metamap.txt")
    message = str(info.value)
    assert message.startswith(f"metamap.txt:{lineno}: expected '<meta-name> Last-Modified Y|N', got '")
    bad_line = text.splitlines()[lineno - 1].strip()
    assert repr(bad_line) in message


def test_meta_map_load(tmp_path) -> None:
    path = tmp_path / "metamap.txt"
    path.write_text("\ufeffdate Last-Modified N\n", encoding="utf-8")
    assert MetaMap.load(path) == MetaMap((MetaMapEntry("date", False),))
    path.write_text("ok Last-Modified Y\nbad line\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:2: "):
        MetaMap.load(path)


def test_meta_map_load_unreadable_names_file(tmp_path) -> None:
    missing = tmp_path / "nope.txt"
    with pytest.raises(ConfigError, match="nope.txt"):
        MetaMap.load(missing)
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ConfigError, match="binary.txt"):
        MetaMap.load(str(binary))


def test_shipped_meta_map_parses() -> None:
    shipped = Path(__file__).resolve().parent.parent / "etc" / "metamap.txt"
    assert MetaMap.load(shipped) == DEFAULT_META_MAP


# --- resolve_date ----------------------------------------------------------------------------

FETCHED = utc(2020, 6, 1, 12, 0, 5)
Y_LM = MetaMapEntry("last-modified", True)


def test_b02_meta_with_edt() -> None:
    evidence = DateEvidence(fetched_at=FETCHED,
                            meta={"last-modified": "Saturday, 08-Sep-2001 21:46:40 EDT"})
    got = resolve_date(evidence)
    assert got.value == utc(2001, 9, 9, 1, 46, 40)
    assert got.source == "meta:last-modified"
    assert not got.is_fallback
    assert got.notes == ("meta:last-modified: accepted (2001-09-09T01:46:40Z)",)


def test_b02_msk_header_never_off_by_three_hours() -> None:
    got = resolve_date(DateEvidence(fetched_at=utc(2018, 7, 20),
                                    protocol="Thu, 19 Jul 2018 01:06:14 MSK"))
    assert got.value != utc(2018, 7, 19, 1, 6, 14)
    assert (got.value, got.source) in ((utc(2018, 7, 18, 22, 6, 14), "header"),
                                       (utc(2018, 7, 20), "fallback"))


def test_b01_rfc850_header() -> None:
    got = resolve_date(DateEvidence(fetched_at=FETCHED, protocol="Saturday, 08-Sep-01 21:46:40 GMT"))
    assert (got.value, got.source) == (utc(2001, 9, 8, 21, 46, 40), "header")


def test_b03_epoch_header_goes_to_fallback() -> None:
    got = resolve_date(DateEvidence(fetched_at=FETCHED, protocol="Thu, 01 Jan 1970 00:00:00 GMT"))
    assert got.source == "fallback" and got.is_fallback
    assert got.value == FETCHED
    assert got.value != utc(1970, 1, 1)
    assert got.notes == (
        "meta:last-modified: missing",
        "header: epoch-or-earlier (1970-01-01T00:00:00Z)",
        "sitemap: missing",
        "fallback: fetch time (2020-06-01T12:00:05Z)",
    )


def test_b04_future_header_then_real_one() -> None:
    poll1 = resolve_date(DateEvidence(fetched_at=FETCHED,
                                      server_date="Mon, 01 Jun 2020 12:00:00 GMT",
                                      protocol="Thu, 01 Jan 2099 00:00:00 GMT"))
    assert (poll1.value, poll1.source) == (utc(2020, 6, 1, 12), "fallback")
    assert "header: future (2099-01-01T00:00:00Z)" in poll1.notes
    assert poll1.notes[-1] == "fallback: server date (2020-06-01T12:00:00Z)"
    poll2 = resolve_date(DateEvidence(fetched_at=utc(2020, 6, 2, 12, 0, 3),
                                      server_date="Tue, 02 Jun 2020 12:00:00 GMT",
                                      protocol="Tue, 02 Jun 2020 08:00:00 GMT"))
    assert (poll2.value, poll2.source) == (utc(2020, 6, 2, 8), "header")


def test_future_is_judged_against_plausible_server_date() -> None:
    # Last-Modified 1.5 days after the server's Date but before our clock: still future.
    got = resolve_date(DateEvidence(fetched_at=utc(2020, 6, 10),
                                    server_date="Mon, 01 Jun 2020 12:00:00 GMT",
                                    protocol="Wed, 03 Jun 2020 00:00:00 GMT"))
    assert got.source == "fallback" and got.value == utc(2020, 6, 1, 12)


@pytest.mark.parametrize("server_date", ["Thu, 01 Jan 2099 00:00:00 GMT", "garbage",
                                         "Thu, 01 Jan 1970 00:00:00 GMT", ""])
def test_implausible_server_date_is_ignored(server_date: str) -> None:
    got = resolve_date(DateEvidence(fetched_at=FETCHED, server_date=server_date,
                                    protocol="Thu, 01 Jan 2099 00:00:00 GMT"))
    assert (got.value, got.source) == (FETCHED, "fallback")
    assert got.notes[-1] == "fallback: fetch time (2020-06-01T12:00:05Z)"
    got = resolve_date(DateEvidence(fetched_at=FETCHED, server_date=server_date,
                                    protocol="Sat, 30 May 2020 00:00:00 GMT"))
    assert (got.value, got.source) == (utc(2020, 5, 30), "header")


def test_flag_y_overrides_protocol_date() -> None:
    evidence = DateEvidence(fetched_at=FETCHED, meta={"dc.date.modified": "2019-01-02"},
                            protocol="Sat, 30 May 2020 00:00:00 GMT")
    got = resolve_date(evidence, MetaMap((MetaMapEntry("dc.date.modified", True),)))
    assert (got.value, got.source) == (utc(2019, 1, 2), "meta:dc.date.modified")


def test_flag_n_used_only_without_usable_protocol_date() -> None:
    meta_map = MetaMap((MetaMapEntry("dc.date.modified", False),))
    meta = {"dc.date.modified": "2019-01-02"}
    with_header = resolve_date(DateEvidence(fetched_at=FETCHED, meta=meta,
                                            protocol="Sat, 30 May 2020 00:00:00 GMT"), meta_map)
    assert (with_header.value, with_header.source) == (utc(2020, 5, 30), "header")
    without = resolve_date(DateEvidence(fetched_at=FETCHED, meta=meta), meta_map)
    assert (without.value, without.source) == (utc(2019, 1, 2), "meta:dc.date.modified")
    bad_header = resolve_date(DateEvidence(fetched_at=FETCHED, meta=meta, protocol="garbage"),
                              meta_map)
    assert bad_header.source == "meta:dc.date.modified"
    assert bad_header.notes == ("header: unparseable ('garbage')",
                                "meta:dc.date.modified: accepted (2019-01-02T00:00:00Z)")


def test_several_lines_first_usable_wins() -> None:
    meta_map = MetaMap.parse("""
        article:modified_time Last-Modified Y
        last-modified Last-Modified Y
        dc.date.modified Last-Modified N
        date Last-Modified N
    """)
    meta = {"article:modified_time": "2099-05-05T00:00:00Z",  # future: falls through
            "last-modified": "2019-03-04T05:06:07+02:00",
            "date": "2018-01-01"}
    got = resolve_date(DateEvidence(fetched_at=FETCHED, meta=meta,
                                    protocol="Sat, 30 May 2020 00:00:00 GMT"), meta_map)
    assert (got.value, got.source) == (utc(2019, 3, 4, 3, 6, 7), "meta:last-modified")
    assert got.notes == ("meta:article:modified_time: future (2099-05-05T00:00:00Z)",
                         "meta:last-modified: accepted (2019-03-04T03:06:07Z)")
    # Without the Y values and without a protocol date: the first N that is present wins.
    meta2 = {"date": "2018-01-01", "article:modified_time": "junk"}
    got2 = resolve_date(DateEvidence(fetched_at=FETCHED, meta=meta2), meta_map)
    assert (got2.value, got2.source) == (utc(2018, 1, 1), "meta:date")
    assert got2.notes == ("meta:article:modified_time: unparseable ('junk')",
                          "meta:last-modified: missing",
                          "header: missing",
                          "meta:dc.date.modified: missing",
                          "meta:date: accepted (2018-01-01T00:00:00Z)")


def test_meta_lookup_is_case_insensitive_and_empty_is_missing() -> None:
    got = resolve_date(DateEvidence(fetched_at=FETCHED, meta={"Last-Modified": "  "},
                                    protocol="Sat, 30 May 2020 00:00:00 GMT"))
    assert got.source == "header"
    assert got.notes[0] == "meta:last-modified: missing"


def test_mtime_source_as_datetime() -> None:
    mtime = datetime(2020, 5, 1, 10, 0, 0, 750000, tzinfo=timezone(timedelta(hours=2)))
    got = resolve_date(DateEvidence(fetched_at=FETCHED, protocol=mtime, protocol_kind="mtime"))
    assert (got.value, got.source) == (utc(2020, 5, 1, 8), "mtime")  # whole seconds
    assert got.value.tzinfo is UTC
    epoch = resolve_date(DateEvidence(fetched_at=FETCHED, protocol=utc(1970, 1, 1),
                                      protocol_kind="mtime"))
    assert epoch.source == "fallback"


@pytest.mark.parametrize("value", ["2020-05-01 08:00:00", datetime(2020, 5, 1, 8),
                                   utc(2020, 5, 1, 8), "2020-05-01T10:00:00+02:00"])
def test_column_source_string_and_datetime(value: str | datetime) -> None:
    got = resolve_date(DateEvidence(fetched_at=FETCHED, protocol=value, protocol_kind="column"),
                       MetaMap(()))
    assert (got.value, got.source) == (utc(2020, 5, 1, 8), "column")
    assert got.notes == ("column: accepted (2020-05-01T08:00:00Z)",)


def test_sitemap_source() -> None:
    got = resolve_date(DateEvidence(fetched_at=FETCHED, sitemap="2020-04-01T10:00:00+00:00"))
    assert (got.value, got.source) == (utc(2020, 4, 1, 10), "sitemap")
    got = resolve_date(DateEvidence(fetched_at=FETCHED, sitemap=utc(2020, 4, 1),
                                    protocol="Sat, 30 May 2020 00:00:00 GMT"))
    assert got.source == "header"  # protocol before sitemap by default
    got = resolve_date(DateEvidence(fetched_at=FETCHED, sitemap="2099-01-01"))
    assert got.source == "fallback"
    assert "sitemap: future (2099-01-01T00:00:00Z)" in got.notes


def test_custom_order() -> None:
    evidence = DateEvidence(fetched_at=FETCHED, meta={"last-modified": "2019-01-01",
                                                      "date": "2018-01-01"},
                            protocol="Sat, 30 May 2020 00:00:00 GMT", sitemap="2017-01-01")
    meta_map = MetaMap((MetaMapEntry("date", False), Y_LM))
    assert resolve_date(evidence, meta_map).source == "meta:last-modified"
    header_first = resolve_date(evidence, meta_map, ["header", "meta", "fallback"])
    assert header_first.source == "header"
    # The meta slot tries all entries in map order whatever their flag.
    meta_first = resolve_date(evidence, meta_map, ["meta", "header"])
    assert (meta_first.value, meta_first.source) == (utc(2018, 1, 1), "meta:date")
    sitemap_only = resolve_date(evidence, meta_map, ["sitemap"])
    assert (sitemap_only.value, sitemap_only.source) == (utc(2017, 1, 1), "sitemap")
    fallback_only = resolve_date(evidence, meta_map, ["fallback"])
    assert (fallback_only.value, fallback_only.source) == (FETCHED, "fallback")
    assert fallback_only.notes == ("fallback: fetch time (2020-06-01T12:00:05Z)",)
    # "mtime" names the protocol slot; the stored source is the evidence's kind.
    assert resolve_date(evidence, meta_map, ["mtime"]).source == "header"
    with pytest.raises(ValueError, match="'bogus'"):
        resolve_date(evidence, meta_map, ["bogus"])


def test_fallback_truncates_and_naive_fetched_at_is_utc() -> None:
    got = resolve_date(DateEvidence(fetched_at=datetime(2020, 6, 1, 12, 0, 5, 123456)))
    assert got.value == utc(2020, 6, 1, 12, 0, 5) and got.value.tzinfo is UTC
    assert got.source == "fallback"


def test_resolved_date_is_fallback_property() -> None:
    assert ResolvedDate(FETCHED, "fallback", ()).is_fallback
    assert not ResolvedDate(FETCHED, "header", ()).is_fallback


def test_bad_protocol_kind() -> None:
    with pytest.raises(ValueError, match="protocol_kind"):
        DateEvidence(fetched_at=FETCHED, protocol_kind="etag")


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["last-modified", "date", "x"]), st.text(max_size=40)),
       st.one_of(st.none(), st.text(max_size=40), st.datetimes(timezones=st.just(UTC))),
       st.one_of(st.none(), st.text(max_size=40)),
       st.one_of(st.none(), st.text(max_size=40)))
def test_resolve_date_always_gives_a_plausible_utc_value(meta, protocol, sitemap, server) -> None:
    evidence = DateEvidence(fetched_at=FETCHED, meta=meta, protocol=protocol, sitemap=sitemap,
                            server_date=server)
    got = resolve_date(evidence, MetaMap((Y_LM, MetaMapEntry("date", False))))
    assert got.value.tzinfo is UTC and got.value.microsecond == 0
    # A plausible server Date may be up to a day after fetched_at, and a candidate up to a
    # day after that reference.
    assert EPOCH_FLOOR < got.value <= FETCHED + timedelta(seconds=2 * FUTURE_SKEW_SECONDS)
    assert got.notes


# --- validate_order -------------------------------------------------------------------------

def test_validate_order() -> None:
    assert validate_order(["header", "meta", "fallback"]) == ("header", "meta", "fallback")
    assert validate_order(["Meta", " mtime "]) == ("meta", "mtime", "fallback")
    assert validate_order(("fallback",)) == ("fallback",)
    for name in DATE_SOURCE_NAMES:
        assert validate_order([name])[-1] == "fallback"


@pytest.mark.parametrize(
    ("order", "named"),
    [
        (["meta", "etag"], "'etag'"),
        (["header", "mtime"], "'mtime'"),
        (["meta", "meta"], "'meta'"),
        (["fallback", "header"], "'header'"),
        ([], "at least one"),
        ("meta", "'meta'"),
        ([3], "3"),
    ],
)
def test_validate_order_errors_name_the_entry(order: object, named: str) -> None:
    with pytest.raises(ValueError) as info:
        validate_order(order)  # type: ignore[arg-type]
    assert named in str(info.value)


# --- leap seconds (RFC 9110 §5.6.7 and ISO 8601 allow second 60) ------------------------------
LEAP = datetime(2016, 12, 31, 23, 59, 59, tzinfo=UTC)


@pytest.mark.parametrize("text, expected", [
    ("Sat, 31 Dec 2016 23:59:60 GMT", LEAP),                   # RFC 1123 (HTTP)
    ("Saturday, 31-Dec-16 23:59:60 GMT", LEAP),                # RFC 850
    ("Sat Dec 31 23:59:60 2016", LEAP),                        # asctime
    ("31 Dec 2016 23:59:60 +0000", LEAP),                      # RFC 5322 without a day name
    ("Sun, 01 Jan 2017 00:59:60 +0100", LEAP),                 # the leap second seen in CET
    ("2016-12-31T23:59:60Z", LEAP),                            # ISO 8601 / W3C Datetime
    ("2016-12-31T23:59:60+00:00", LEAP),
    ("2016-12-31 23:59:60", LEAP),                             # SQL text, no zone
    ("2017-01-01T00:59:60+01:00", LEAP),
    ("20161231T235960Z", LEAP),                                # ISO 8601 basic format
    ("2016-12-31T23:59:60.250Z", LEAP.replace(microsecond=250000)),
    ("December 31, 2016 23:59:60 UTC", LEAP),                  # the lenient path (dateutil)
    ("2015-06-30T23:59:60Z", datetime(2015, 6, 30, 23, 59, 59, tzinfo=UTC)),
])
def test_parse_date_leap_second_is_the_last_second_of_its_minute(text: str, expected: datetime) -> None:
    assert parse_date(text) == expected


@pytest.mark.parametrize("text", ["Sat, 31 Dec 2016 23:59:61 GMT", "2016-12-31T23:60:00Z",
                                  "2016-12-31T23:59:600Z", "2016-12-31T24:59:60Z"])
def test_parse_date_second_61_and_minute_60_still_refused(text: str) -> None:
    assert parse_date(text) is None


@pytest.mark.parametrize("slot, evidence", [
    ("header", dict(protocol="Sat, 31 Dec 2016 23:59:60 GMT")),
    ("meta:last-modified", dict(meta={"last-modified": "2016-12-31T23:59:60Z"})),
    ("sitemap", dict(sitemap="2016-12-31T23:59:60Z")),
])
def test_resolve_date_takes_a_leap_second_from_every_slot(slot: str, evidence: dict) -> None:
    got = resolve_date(DateEvidence(fetched_at=datetime(2024, 1, 1, tzinfo=UTC), **evidence))
    assert (got.source, got.value) == (slot, LEAP), got.notes
