"""Read-only reports from the state store: dates (Verity's ``vsdb -date``), changed in a span
(LCWA's query by time), and ``explain`` for one document.  They open the store read-only, so
they work while the daemon runs and while it is stopped.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Iterator

from indexerd.core.dates import format_utc
from indexerd.core.timespans import parse_since
from indexerd.core.decide import REASONS
from indexerd.core.filekeys import path_to_key
from indexerd.core.store import DocumentRecord, StateStore, from_db_time

UTC = timezone.utc


def record_to_json(rec: DocumentRecord) -> dict:
    """A record as JSON-ready values (times as ISO 8601 UTC with ``Z``)."""
    out = {}
    for k, v in rec.__dict__.items():
        out[k] = format_utc(v) if isinstance(v, datetime) else v
    from indexerd.sources.registry import key_file  # not at import: ctl's start stays light

    path = key_file(rec.key)
    if path is not None:
        out["path"] = path
    return out


def date_report(store: StateStore, source: str | None = None) -> Iterator[dict]:
    """Every document: key, last_modified, date_source, indexed_at, status (ordered by key)."""
    for rec in store.iter_records(source=source):
        yield {"key": rec.key, "last_modified": format_utc(rec.last_modified),
               "date_source": rec.date_source, "indexed_at": format_utc(rec.indexed_at),
               "status": rec.status, "source": rec.source}


def skipped_report(store: StateStore, source: str | None = None) -> Iterator[dict]:
    """Every document not in the index for a reason of its own: status ``skipped`` or
    ``error``, with its reason word (``binary``, ``unsupported-type``, ``too-large``,
    ``parse-error``, ``timeout``, ``container`` ...), the detail, and when it was decided
    (ordered by key).  A skipped file is read again only when its stat changes."""
    for rec in store.iter_records(source=source):
        if rec.status not in ("skipped", "error"):
            continue
        yield {"key": rec.key, "status": rec.status, "reason": rec.reason, "detail": rec.detail,
               "decided_at": format_utc(rec.decided_at), "source": rec.source}


def changed(store: StateStore, spec: str, now: datetime | None = None) -> Iterator[dict]:
    """Documents whose last-modified falls in the span ``spec`` (see :func:`timespans.parse_since`),
    newest first.

    Raises:
        QueryError: the span cannot be parsed.
    """
    start, end = parse_since(spec, now or datetime.now(UTC))
    for rec in store.iter_records(lm_from=start, lm_to=end, order="last_modified"):
        if rec.last_modified is None:
            continue
        yield {"key": rec.key, "last_modified": format_utc(rec.last_modified),
               "date_source": rec.date_source, "title": rec.title, "source": rec.source}


def normalise_key(arg: str) -> str:
    """A key as typed -> the stored key, as its kind declares
    (:func:`~indexerd.sources.registry.canonical_key`: an http(s) URL canonicalised, the fragment
    dropped, host lower-cased, default port removed ...; kept as typed when it cannot be parsed;
    a ``file:`` or ``sql:`` key as is); a file path (relative or absolute) as its ``file:`` URI."""
    from indexerd.sources.registry import canonical_key, is_key

    if is_key(arg):
        return canonical_key(arg)
    return path_to_key(os.path.realpath(arg))


def explain(store: StateStore, key: str) -> dict | None:
    """The stored record for ``key`` plus plain-language lines on its date and last decision."""
    rec = store.get(normalise_key(key))
    if rec is None:
        return None
    out = record_to_json(rec)
    why = []
    if rec.date_source:
        why.append(f"last-modified {format_utc(rec.last_modified)} came from {rec.date_source}"
                   + (" (the fallback: no usable date in the document or protocol)"
                      if rec.date_source == "fallback" else ""))
    if rec.date_notes:
        why.append(f"date candidates: {rec.date_notes}")
    if rec.reason:
        meaning = REASONS.get(rec.reason)
        why.append(f"last decision at {format_utc(rec.decided_at)}: {rec.reason}"
                   + (f" ({meaning})" if meaning else "") + (f" — {rec.detail}" if rec.detail else ""))
    row = store.crawl_row(rec.source, rec.key)  # only a crawled page has one
    if row is not None and row["due_at"]:
        due = format_utc(from_db_time(row["due_at"]))
        out["recrawl"] = {"interval_seconds": row["recrawl_seconds"], "due_at": due, "reason": row["due_reason"]}
        why.append(f"next recrawl due {due} (every {_duration(row['recrawl_seconds'])}): {row['due_reason']}")
    out["explanation"] = why
    return out


def _duration(seconds: float | None) -> str:
    """``90061`` -> ``'1d 1h 1m'`` (whole minutes; at least ``'0m'``)."""
    minutes = int((seconds or 0) // 60)
    days, minutes = divmod(minutes, 1440)
    hours, minutes = divmod(minutes, 60)
    return " ".join(f"{n}{u}" for n, u in ((days, "d"), (hours, "h"), (minutes, "m")) if n) or "0m"
