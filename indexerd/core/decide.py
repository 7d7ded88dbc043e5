"""The re-index decision: index, skip or delete one document (a pure function).

Verity Spider's rule is the base: no stored date, or a stored date older than the new one ->
index; stored date the same or newer -> skip; no new date -> index unless the document was
indexed within ``refresh_time``.  Ours on top: a date that came from the fallback (the response
Date or the fetch time) is *no* date, on both sides, because it says when we looked, not when
the document changed; and, unless ``strict_dates`` is set, a known content hash overrules the
date when the two disagree (dynamic pages that always say "now", servers whose Last-Modified
never moves).

Dates are compared at whole-second resolution (the resolution of HTTP-date and of
``dates.format_utc``, in which the state store keeps them), after taking a naive value as UTC,
so a sub-second mtime never looks newer than its stored copy and nothing here can raise
``TypeError`` on naive/aware comparison (CASES B06).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from datetime import datetime, timezone

__all__ = [
    "Action", "NEW", "NO_STORED_DATE", "NEWER_DATE", "NOT_NEWER", "CONTENT_UNCHANGED",
    "CONTENT_CHANGED", "REFRESH_DUE", "RECENTLY_INDEXED", "GONE", "FORCED", "REASONS",
    "StoredFacts", "NewFacts", "DecideSettings", "Decision", "decide",
]

_FALLBACK_SOURCE = "fallback"


class Action(str, enum.Enum):
    """What to do with the document. ``str(Action.INDEX) == "index"``."""

    INDEX = "index"
    SKIP = "skip"
    DELETE = "delete"

    def __str__(self) -> str:
        return self.value


NEW = "new"
NO_STORED_DATE = "no-stored-date"
NEWER_DATE = "newer-date"
NOT_NEWER = "not-newer"
CONTENT_UNCHANGED = "content-unchanged"
CONTENT_CHANGED = "content-changed"
REFRESH_DUE = "refresh-due"
RECENTLY_INDEXED = "recently-indexed"
GONE = "gone"
FORCED = "forced"

#: Reason word -> one-line meaning (for the docs and ``ctl explain``).
REASONS: dict[str, str] = {
    NEW: "no stored record: first time seen",
    NO_STORED_DATE: "the stored record has no real date (none, or only the fallback), the new one has",
    NEWER_DATE: "the new date is later than the stored date (Verity Spider rule)",
    NOT_NEWER: "the stored date is the same or newer (Verity Spider skip)",
    CONTENT_UNCHANGED: "newer date (or no date) but the content hash is identical",
    CONTENT_CHANGED: "same or older date (or no date) but the content hash differs",
    REFRESH_DUE: "no new date and the last index is older than refresh_time",
    RECENTLY_INDEXED: "no new date and indexed within refresh_time",
    GONE: "the document is gone (file removed, HTTP 404/410, SQL action D)",
    FORCED: "re-index requested (ctl reindex)",
}


@dataclass(frozen=True)
class StoredFacts:
    """What the state store holds for the document from its last indexing.

    Attributes:
        last_modified: the stored date (aware UTC; naive is taken as UTC), or None.
        date_source: where it came from (``header``, ``meta:<name>``, ``fallback``, ...); a
            ``fallback`` date counts as no date.  None: unknown (the date counts as real).
        content_hash: hash of the indexed text, or None if not recorded.
        indexed_at: when it was last indexed (aware UTC), or None if unknown.
    """

    last_modified: datetime | None
    date_source: str | None
    content_hash: str | None
    indexed_at: datetime | None


@dataclass(frozen=True)
class NewFacts:
    """What this pass learned about the document.

    Attributes:
        last_modified: the resolved date (aware UTC), or None.
        date_source: ``ResolvedDate.source``; a ``fallback`` date counts as no date.
        content_hash: hash of the new text; None when the body is not in hand (HEAD, 304).
        gone: the document no longer exists (file removed, HTTP 404/410, SQL action D).
        forced: a re-index was requested (``ctl reindex``).
    """

    last_modified: datetime | None
    date_source: str | None
    content_hash: str | None = None
    gone: bool = False
    forced: bool = False


@dataclass(frozen=True)
class DecideSettings:
    """Per-source knobs of the decision.

    Attributes:
        refresh_time_seconds: an undated document (and, under ``strict_dates``, any document
            whose content cannot be compared) is re-indexed once it was last indexed this many
            seconds ago or more (Verity Spider refresh time).  >= 0; default 1 day.
        strict_dates: True: the dates alone decide, content hashes are ignored (pure Verity).

    Raises:
        ValueError: refresh_time_seconds is negative or not finite.
    """

    refresh_time_seconds: float = 86400.0
    strict_dates: bool = False

    def __post_init__(self) -> None:
        if not math.isfinite(self.refresh_time_seconds) or self.refresh_time_seconds < 0:
            raise ValueError("refresh_time_seconds must be a finite number >= 0, got "
                             f"{self.refresh_time_seconds!r}")


@dataclass(frozen=True)
class Decision:
    """The verdict: ``action`` and one ``reason`` word from :data:`REASONS`."""

    action: Action
    reason: str


def _real_date(value: datetime | None, source: str | None) -> datetime | None:
    """The date if it is a real one, aware, truncated to whole seconds; else None."""
    if value is None or source == _FALLBACK_SOURCE:
        return None
    if value.utcoffset() is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.replace(microsecond=0)


def _aware(value: datetime) -> datetime:
    """A naive datetime taken as UTC; an aware one unchanged."""
    return value.replace(tzinfo=timezone.utc) if value.utcoffset() is None else value


def decide(stored: StoredFacts | None, new: NewFacts, now: datetime,
           settings: DecideSettings = DecideSettings()) -> Decision:
    """Decide whether to index, skip or delete one document.

    Rules, first match wins (Verity Spider Last-Modified rule, plus ours):

    1. ``new.gone`` -> DELETE/gone.  2. ``new.forced`` -> INDEX/forced.
    3. no stored record -> INDEX/new.
    4. With a new real date (source not ``fallback``):
       stored has no real date -> INDEX/no-stored-date;
       new > stored -> INDEX/newer-date, but SKIP/content-unchanged when not strict and both
       hashes are known and equal;
       new <= stored -> SKIP/not-newer, but INDEX/content-changed when not strict and both
       hashes are known and differ.
    5. Without one: not strict and both hashes known -> SKIP/content-unchanged if equal,
       INDEX/content-changed if not.  Otherwise SKIP/recently-indexed when ``indexed_at`` is
       less than ``refresh_time_seconds`` from ``now`` (either side, so a clock step back does
       not block forever), else INDEX/refresh-due (also when ``indexed_at`` is unknown).

    Dates compare at whole seconds; naive datetimes are taken as UTC; an empty hash counts as
    unknown.  After SKIP/content-unchanged with a newer date the caller should store the new
    date, or the same comparison repeats on every pass.

    Returns:
        A Decision whose reason is a key of :data:`REASONS`.  Never raises for any
        combination of datetimes (aware in any zone, or naive) and hashes.
    """
    if new.gone:
        return Decision(Action.DELETE, GONE)
    if new.forced:
        return Decision(Action.INDEX, FORCED)
    if stored is None:
        return Decision(Action.INDEX, NEW)

    hashes_known = bool(new.content_hash) and bool(stored.content_hash)
    use_hashes = hashes_known and not settings.strict_dates
    same_content = use_hashes and new.content_hash == stored.content_hash
    new_date = _real_date(new.last_modified, new.date_source)
    stored_date = _real_date(stored.last_modified, stored.date_source)

    if new_date is not None:
        if stored_date is None:
            return Decision(Action.INDEX, NO_STORED_DATE)
        if new_date > stored_date:
            if same_content:
                return Decision(Action.SKIP, CONTENT_UNCHANGED)
            return Decision(Action.INDEX, NEWER_DATE)
        if use_hashes and not same_content:
            return Decision(Action.INDEX, CONTENT_CHANGED)
        return Decision(Action.SKIP, NOT_NEWER)

    if use_hashes:
        if same_content:
            return Decision(Action.SKIP, CONTENT_UNCHANGED)
        return Decision(Action.INDEX, CONTENT_CHANGED)
    if stored.indexed_at is not None:
        age_seconds = (_aware(now) - _aware(stored.indexed_at)).total_seconds()
        if abs(age_seconds) < settings.refresh_time_seconds:
            return Decision(Action.SKIP, RECENTLY_INDEXED)
    return Decision(Action.INDEX, REFRESH_DUE)
