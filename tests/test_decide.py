"""Tests for indexerd.core.decide: every reason, strict dates, and CASES B03/B04/B06 as sequences."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexerd.core import decide as d
from indexerd.core.datechain import DateEvidence, resolve_date
from indexerd.core.decide import (
    REASONS,
    Action,
    Decision,
    DecideSettings,
    NewFacts,
    StoredFacts,
    decide,
)

UTC = timezone.utc
NOW = datetime(2024, 6, 15, 12, 0, 0, tzinfo=UTC)
T1 = datetime(2024, 6, 1, tzinfo=UTC)
T2 = datetime(2024, 6, 2, tzinfo=UTC)
LAX = DecideSettings()
STRICT = DecideSettings(strict_dates=True)


def stored(last_modified=T1, source="header", content_hash="h1", indexed_at=NOW - timedelta(days=3)):
    return StoredFacts(last_modified, source, content_hash, indexed_at)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_reason_constants_and_table() -> None:
    words = {d.NEW, d.NO_STORED_DATE, d.NEWER_DATE, d.NOT_NEWER, d.CONTENT_UNCHANGED,
             d.CONTENT_CHANGED, d.REFRESH_DUE, d.RECENTLY_INDEXED, d.GONE, d.FORCED}
    assert set(REASONS) == words
    assert d.NOT_NEWER == "not-newer" and d.NO_STORED_DATE == "no-stored-date"
    assert all(REASONS[w] and "\n" not in REASONS[w] for w in words)


def test_action_is_a_str() -> None:
    assert Action.INDEX == "index" and Action("skip") is Action.SKIP
    assert str(Action.DELETE) == "delete" and f"{Action.INDEX}" == "index"


# --- each reason, right values --------------------------------------------------------------

@pytest.mark.parametrize(
    ("old", "new", "cfg", "expected"),
    [
        # gone and forced come first, whatever else is true
        (stored(), NewFacts(T2, "header", "h2", gone=True, forced=True), LAX,
         Decision(Action.DELETE, "gone")),
        (None, NewFacts(None, None, gone=True), LAX, Decision(Action.DELETE, "gone")),
        (stored(), NewFacts(T1, "header", "h1", forced=True), STRICT, Decision(Action.INDEX, "forced")),
        # no stored record
        (None, NewFacts(T1, "header", "h1"), LAX, Decision(Action.INDEX, "new")),
        (None, NewFacts(None, None), STRICT, Decision(Action.INDEX, "new")),
        # new real date, stored has none (or only the fallback)
        (stored(last_modified=None), NewFacts(T1, "header", "h1"), LAX,
         Decision(Action.INDEX, "no-stored-date")),
        (stored(source="fallback"), NewFacts(T1, "header", "h1"), LAX,
         Decision(Action.INDEX, "no-stored-date")),
        # newer date
        (stored(), NewFacts(T2, "header", "h2"), LAX, Decision(Action.INDEX, "newer-date")),
        (stored(), NewFacts(T2, "meta:last-modified", None), LAX, Decision(Action.INDEX, "newer-date")),
        (stored(content_hash=None), NewFacts(T2, "header", "h1"), LAX,
         Decision(Action.INDEX, "newer-date")),
        (stored(), NewFacts(T2, "header", "h1"), STRICT, Decision(Action.INDEX, "newer-date")),
        (stored(), NewFacts(T2, "header", "h1"), LAX, Decision(Action.SKIP, "content-unchanged")),
        # same or older date
        (stored(), NewFacts(T1, "header", "h1"), LAX, Decision(Action.SKIP, "not-newer")),
        (stored(), NewFacts(T1 - timedelta(days=1), "mtime", None), LAX,
         Decision(Action.SKIP, "not-newer")),
        (stored(), NewFacts(T1, "header", "h2"), STRICT, Decision(Action.SKIP, "not-newer")),
        (stored(), NewFacts(T1, "header", "h2"), LAX, Decision(Action.INDEX, "content-changed")),
        (stored(), NewFacts(T1 - timedelta(days=9), "header", "h2"), LAX,
         Decision(Action.INDEX, "content-changed")),
        # no new date, hashes decide when allowed
        (stored(), NewFacts(None, None, "h1"), LAX, Decision(Action.SKIP, "content-unchanged")),
        (stored(), NewFacts(NOW, "fallback", "h1"), LAX, Decision(Action.SKIP, "content-unchanged")),
        (stored(), NewFacts(None, None, "h2"), LAX, Decision(Action.INDEX, "content-changed")),
        # no new date, no comparable hash (or strict): refresh time decides
        (stored(), NewFacts(None, None, None), LAX, Decision(Action.INDEX, "refresh-due")),
        (stored(indexed_at=NOW - timedelta(hours=1)), NewFacts(None, None, None), LAX,
         Decision(Action.SKIP, "recently-indexed")),
        (stored(indexed_at=NOW - timedelta(hours=1)), NewFacts(NOW, "fallback", "h2"), STRICT,
         Decision(Action.SKIP, "recently-indexed")),
        (stored(indexed_at=NOW - timedelta(days=2)), NewFacts(NOW, "fallback", "h1"), STRICT,
         Decision(Action.INDEX, "refresh-due")),
        (stored(indexed_at=None), NewFacts(None, None, None), LAX, Decision(Action.INDEX, "refresh-due")),
        (stored(content_hash=None, indexed_at=NOW), NewFacts(None, None, "h1"), LAX,
         Decision(Action.SKIP, "recently-indexed")),
        (stored(content_hash="", indexed_at=NOW - timedelta(days=5)), NewFacts(None, None, ""), LAX,
         Decision(Action.INDEX, "refresh-due")),
    ],
)
def test_decide_right_values(old, new, cfg, expected) -> None:
    assert decide(old, new, NOW, cfg) == expected


def test_refresh_time_boundary() -> None:
    cfg = DecideSettings(refresh_time_seconds=3600.0)
    undated = NewFacts(None, None)
    just_inside = stored(indexed_at=NOW - timedelta(seconds=3599))
    at_limit = stored(indexed_at=NOW - timedelta(seconds=3600))
    assert decide(just_inside, undated, NOW, cfg).reason == "recently-indexed"
    assert decide(at_limit, undated, NOW, cfg).reason == "refresh-due"
    assert decide(just_inside, undated, NOW, DecideSettings(refresh_time_seconds=0)).reason == "refresh-due"
    # indexed "in the future" (clock stepped back): within the window still counts as recent,
    # far beyond it does not block re-indexing forever
    assert decide(stored(indexed_at=NOW + timedelta(minutes=5)), undated, NOW, cfg).reason == "recently-indexed"
    assert decide(stored(indexed_at=NOW + timedelta(days=400)), undated, NOW, cfg).reason == "refresh-due"


def test_dates_compare_at_whole_seconds_and_across_zones() -> None:
    cest = timezone(timedelta(hours=2))
    old = stored(last_modified=datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC), content_hash=None)
    same_instant = datetime(2024, 6, 1, 14, 0, 0, 900000, tzinfo=cest)  # sub-second mtime
    assert decide(old, NewFacts(same_instant, "mtime"), NOW) == Decision(Action.SKIP, "not-newer")
    later = datetime(2024, 6, 1, 14, 0, 1, tzinfo=cest)
    assert decide(old, NewFacts(later, "mtime"), NOW) == Decision(Action.INDEX, "newer-date")


def test_naive_values_are_utc_and_never_raise_type_error() -> None:
    naive_old = stored(last_modified=datetime(2024, 6, 1), indexed_at=datetime(2024, 6, 15, 11))
    assert decide(naive_old, NewFacts(T2, "header", None), NOW).reason == "newer-date"
    assert decide(naive_old, NewFacts(T1, "header", None), NOW).reason == "not-newer"
    assert decide(naive_old, NewFacts(None, None), datetime(2024, 6, 15, 12)).reason == "recently-indexed"
    assert decide(stored(), NewFacts(datetime(2024, 6, 2), "header", None), NOW).reason == "newer-date"


def test_settings_validation() -> None:
    with pytest.raises(ValueError, match="refresh_time_seconds"):
        DecideSettings(refresh_time_seconds=-1)
    with pytest.raises(ValueError, match="refresh_time_seconds"):
        DecideSettings(refresh_time_seconds=float("nan"))


# --- CASES as decision sequences ------------------------------------------------------------

def poll(prior: StoredFacts | None, *, fetched_at: datetime, body: str | None,
         last_modified: str | None = None, server_date: str | None = None,
         cfg: DecideSettings = LAX) -> tuple[Decision, StoredFacts | None]:
    """One poll: resolve the date, decide, and store what an indexing run would store."""
    resolved = resolve_date(DateEvidence(fetched_at=fetched_at, protocol=last_modified,
                                         server_date=server_date))
    content_hash = sha(body) if body is not None else None
    decision = decide(prior, NewFacts(resolved.value, resolved.source, content_hash),
                      fetched_at, cfg)
    if decision.action is Action.INDEX:
        return decision, StoredFacts(resolved.value, resolved.source, content_hash, fetched_at)
    return decision, prior


@pytest.mark.parametrize("cfg", [LAX, STRICT])
def test_b03_epoch_last_modified(cfg: DecideSettings) -> None:
    epoch = "Thu, 01 Jan 1970 00:00:00 GMT"
    t1 = datetime(2020, 5, 5, 10, tzinfo=UTC)
    first, record = poll(None, fetched_at=t1, body="version one", last_modified=epoch, cfg=cfg)
    assert first == Decision(Action.INDEX, "new")
    assert record.last_modified == t1 and record.date_source == "fallback"
    assert record.last_modified != datetime(1970, 1, 1, tzinfo=UTC)
    t2 = t1 + timedelta(hours=2)
    second, record2 = poll(record, fetched_at=t2, body="version two", last_modified=epoch, cfg=cfg)
    if cfg.strict_dates:
        # dates alone decide: no real date on either side, so the refresh time does
        assert second == Decision(Action.SKIP, "recently-indexed")
        third, _ = poll(record, fetched_at=t1 + timedelta(days=2), body="version two",
                        last_modified=epoch, cfg=cfg)
        assert third == Decision(Action.INDEX, "refresh-due")
    else:
        assert second == Decision(Action.INDEX, "content-changed")
        assert record2.content_hash == sha("version two")
        again, _ = poll(record2, fetched_at=t2 + timedelta(days=3), body="version two",
                        last_modified=epoch, cfg=cfg)
        assert again == Decision(Action.SKIP, "content-unchanged")


@pytest.mark.parametrize("cfg", [LAX, STRICT])
def test_b04_future_last_modified(cfg: DecideSettings) -> None:
    first, record = poll(None, fetched_at=datetime(2020, 6, 1, 12, 0, 1, tzinfo=UTC),
                         body="old text", server_date="Mon, 01 Jun 2020 12:00:00 GMT",
                         last_modified="Thu, 01 Jan 2099 00:00:00 GMT", cfg=cfg)
    assert first == Decision(Action.INDEX, "new")
    assert (record.last_modified, record.date_source) == (datetime(2020, 6, 1, 12, tzinfo=UTC),
                                                          "fallback")
    second, record2 = poll(record, fetched_at=datetime(2020, 6, 2, 12, 0, 1, tzinfo=UTC),
                           body="new text", server_date="Tue, 02 Jun 2020 12:00:00 GMT",
                           last_modified="Tue, 02 Jun 2020 08:00:00 GMT", cfg=cfg)
    # Re-indexed: the stored value was only the fallback, so the real 08:00 date wins.
    assert second == Decision(Action.INDEX, "no-stored-date")
    assert (record2.last_modified, record2.date_source) == (datetime(2020, 6, 2, 8, tzinfo=UTC),
                                                            "header")


@pytest.mark.parametrize("cfg", [LAX, STRICT])
@pytest.mark.parametrize("with_body", [True, False])
def test_b06_mixed_zone_forms(cfg: DecideSettings, with_body: bool) -> None:
    headers = ["Sat, 08 Sep 2001 21:46:40 -0000", "Sun Sep  9 01:46:40 2001",
               "Wed, 21 Jun 2017 11:35:20 +0000", "Wed, 21 Jun 2017 11:35:20 +0000"]
    bodies = ["one", "two", "three", "three"]
    expected = [Decision(Action.INDEX, "new"), Decision(Action.INDEX, "newer-date"),
                Decision(Action.INDEX, "newer-date"), Decision(Action.SKIP, "not-newer")]
    dates = [datetime(2001, 9, 8, 21, 46, 40, tzinfo=UTC), datetime(2001, 9, 9, 1, 46, 40, tzinfo=UTC),
             datetime(2017, 6, 21, 11, 35, 20, tzinfo=UTC), datetime(2017, 6, 21, 11, 35, 20, tzinfo=UTC)]
    record = None
    fetched = datetime(2024, 1, 1, tzinfo=UTC)
    for header, body, want, date in zip(headers, bodies, expected, dates):
        fetched += timedelta(hours=1)
        got, record = poll(record, fetched_at=fetched, body=body if with_body else None,
                           last_modified=header, cfg=cfg)
        assert got == want, header
        assert record.last_modified == date and record.last_modified.tzinfo is UTC
        assert record.date_source == "header"


# --- properties -------------------------------------------------------------------------------

_FIXED_ZONES = st.builds(lambda minutes: timezone(timedelta(minutes=minutes)),
                         st.integers(-23 * 60 - 59, 23 * 60 + 59))
_AWARE = st.one_of(st.datetimes(timezones=st.timezones()), st.datetimes(timezones=_FIXED_ZONES),
                   st.datetimes(timezones=st.just(UTC)))
_SOURCES = st.sampled_from([None, "header", "mtime", "column", "sitemap", "fallback",
                            "meta:last-modified"])
_HASHES = st.one_of(st.none(), st.sampled_from(["", "a", "b"]), st.text(max_size=8))


@settings(max_examples=500, deadline=None)
@given(
    stored_facts=st.one_of(st.none(), st.builds(StoredFacts, st.one_of(st.none(), _AWARE), _SOURCES,
                                                _HASHES, st.one_of(st.none(), _AWARE))),
    new_facts=st.builds(NewFacts, st.one_of(st.none(), _AWARE), _SOURCES, _HASHES,
                        st.booleans(), st.booleans()),
    now=_AWARE,
    cfg=st.builds(DecideSettings, st.floats(0, 1e9, allow_nan=False), st.booleans()),
)
def test_decide_never_raises_and_gives_a_known_reason(stored_facts, new_facts, now, cfg) -> None:
    got = decide(stored_facts, new_facts, now, cfg)
    assert isinstance(got.action, Action)
    assert got.reason in REASONS
    if new_facts.gone:
        assert got == Decision(Action.DELETE, "gone")
    elif got.action is Action.DELETE:
        pytest.fail("only gone documents are deleted")


@settings(max_examples=300, deadline=None)
@given(_AWARE, _AWARE, st.sampled_from(["a", "b", None]), st.sampled_from(["a", "b", None]))
def test_decide_skip_means_dates_not_newer_or_same_content(old_date, new_date, old_hash, new_hash) -> None:
    old = StoredFacts(old_date, "header", old_hash, NOW - timedelta(days=30))
    got = decide(old, NewFacts(new_date, "header", new_hash), NOW, STRICT)
    # Strict Verity rule: index exactly when the new date is later (at whole seconds).
    newer = new_date.replace(microsecond=0) > old_date.replace(microsecond=0)
    assert got.action is (Action.INDEX if newer else Action.SKIP)
