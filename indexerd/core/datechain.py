"""The date resolution chain: a document's candidate dates -> the one stored, and why.

Pure: :func:`resolve_date` takes the evidence a source gathered (:class:`DateEvidence`) and the
meta map, parses and checks each candidate (:mod:`indexerd.core.dates`) in order, and returns the
first usable one, else the fallback, with a note per candidate looked at.

Sources of the rules: the Verity Spider Last-Modified rule and its meta map file, and the FDSE
crawler's chain (meta tag, then the HTTP header, then the current time); RFC 9110 §8.8.2.1 for
judging a date against the response's Date.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from indexerd.core.dates import DateCheck, check_plausible, format_utc, parse_date, to_utc
from indexerd.core.metamap import DEFAULT_META_MAP, MetaMap, MetaMapEntry

__all__ = ["DATE_SOURCE_NAMES", "DateEvidence", "ResolvedDate", "resolve_date", "validate_order"]

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
    fetched_at = to_utc(evidence.fetched_at) or evidence.fetched_at
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
