"""What the search page shows: the form read from the URL, each hit as the page shows it, the
snippet with the query's words marked, and which pages to link.

Pure functions of their arguments (no I/O), so they are tested without a server.  Every value
that comes from a document is escaped here or by the templates' autoescaping: the only markup
built in Python is :func:`highlight`'s ``<mark>``, around text it escaped itself.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from urllib.parse import urlsplit

from markupsafe import Markup, escape

from indexerd.core.errors import ConfigError
from indexerd.sources.registry import key_file

UTC = timezone.utc
#: hits per page on the search page
PAGE_SIZE = 10
#: the query box's longest accepted text, in characters
MAX_QUERY_CHARS = 1000


@dataclass(frozen=True)
class SearchForm:
    """The search page's fields as read from the query string (``q``, ``source``, ``type``,
    ``from``, ``to`` as ``YYYY-MM-DD``, ``sort``, ``page`` counted from 1)."""

    q: str = ""
    sources: tuple[str, ...] = ()
    media_types: tuple[str, ...] = ()
    date_from: str = ""
    date_to: str = ""
    sort: str = "relevance"
    page: int = 1

    @property
    def has_filters(self) -> bool:
        return bool(self.sources or self.media_types or self.date_from or self.date_to
                    or self.sort != "relevance")

    def since(self) -> datetime | None:
        """``from`` as the start of that day, aware UTC."""
        return _day(self.date_from, "from")

    def until(self) -> datetime | None:
        """``to`` as the end of that day (exclusive: the next day's start), aware UTC."""
        d = _day(self.date_to, "to")
        if d is None or d.date() == date.max:
            return None  # to the end of the calendar: no upper bound
        return d + timedelta(days=1)

    def params(self, **change) -> list[tuple[str, str]]:
        """The query string of this form with ``change`` applied (for paging links)."""
        f = {**self.__dict__, **change}
        out = [("q", f["q"])]
        out += [("source", s) for s in f["sources"]] + [("type", t) for t in f["media_types"]]
        out += [(k, f[a]) for k, a in (("from", "date_from"), ("to", "date_to")) if f[a]]
        if f["sort"] != "relevance":
            out.append(("sort", f["sort"]))
        if f["page"] != 1:
            out.append(("page", str(f["page"])))
        return out


def _day(text: str, name: str) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.combine(date.fromisoformat(text), time(0), UTC)
    except ValueError:
        raise ConfigError(f"{name}: a date is YYYY-MM-DD, got {text!r}") from None


def read_form(args) -> SearchForm:
    """The form from a multi-dict of URL arguments (werkzeug's ``request.args``).

    Raises:
        ConfigError: a field is malformed (the page shows the message; the API answers 400).
    """
    q = args.get("q", "")
    if len(q) > MAX_QUERY_CHARS:
        raise ConfigError(f"the query is {len(q)} characters long; at most {MAX_QUERY_CHARS}")
    page_text = args.get("page", "1") or "1"
    try:
        page = int(page_text)
    except ValueError:
        raise ConfigError(f"page must be a number, got {page_text!r}") from None
    if page < 1:
        raise ConfigError(f"page must be 1 or more, got {page}")
    sort = args.get("sort", "relevance") or "relevance"
    form = SearchForm(q=q.strip(), sources=tuple(s for s in args.getlist("source") if s),
                      media_types=tuple(t for t in args.getlist("type") if t),
                      date_from=args.get("from", ""), date_to=args.get("to", ""), sort=sort, page=page)
    form.since(), form.until()  # check the dates now
    return form


def highlight(snippet: str, marks) -> Markup:
    """``snippet`` escaped, with each ``(start, end)`` of ``marks`` (character offsets of what
    matched, ascending, as :class:`indexerd.index.Hit` gives them) in ``<mark>``."""
    if not snippet:
        return Markup("")
    out, last = [], 0
    for start, end in marks:
        start, end = max(start, last), min(end, len(snippet))
        if start >= end:
            continue
        out.append(escape(snippet[last:start]))
        out.append(Markup("<mark>") + escape(snippet[start:end]) + Markup("</mark>"))
        last = end
    out.append(escape(snippet[last:]))
    return Markup("").join(out)


#: a media type as the download's Content-Type may carry it (type/subtype, parameters dropped)
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*")


def download_type(media_type: str | None) -> str:
    """The Content-Type of a download: the stored media type when it is one, else
    ``application/octet-stream``."""
    mt = (media_type or "").split(";")[0].strip()
    return mt if _MEDIA_TYPE.fullmatch(mt) else "application/octet-stream"


def download_name(filename: str) -> str:
    """A file name a Content-Disposition may carry: undecodable bytes as U+FFFD, control
    characters and path separators as ``_``."""
    name = os.fsencode(filename).decode("utf-8", "replace")
    return "".join("_" if ord(c) < 32 or c in '/\\\x7f' else c for c in name) or "download"


@dataclass(frozen=True)
class PreviewView:
    """A document preview as the page shows it: ``text`` safe markup (marks in ``<mark>``),
    how many matches are marked, and why none is (or None)."""

    text: Markup
    marked: int
    note: str | None
    query_error: str | None


def preview_view(preview) -> PreviewView:
    """A :class:`indexerd.daemon.preview.Preview` for the page."""
    return PreviewView(highlight(preview.text, preview.marks), len(preview.marks), preview.note,
                       preview.query_error)


def web_url(key: str) -> str | None:
    """The key when a browser can follow it (an http or https URL), else None: a ``file:`` key
    opens nothing from a web page, and a ``sql:`` key is no address."""
    try:
        parts = urlsplit(key)
    except ValueError:
        return None
    return key if parts.scheme in ("http", "https") and parts.netloc else None


def file_path(key: str, path: str | None) -> str | None:
    """The path to show for a file's hit: the stored path, else the local file the key is
    (:func:`indexerd.sources.registry.key_file`; bytes that are no UTF-8 shown as U+FFFD), else
    None (a key of a kind whose keys are no files, or a malformed one)."""
    if path:
        return path
    try:
        found = key_file(key)
    except ValueError:
        return None
    return os.fsencode(found).decode("utf-8", "replace") if found is not None else None


def raw_file(key: str) -> bool:
    """Whether the document ``key`` is a local file the page may offer to download (a key of a
    kind whose keys are files: :func:`indexerd.sources.registry.key_file`)."""
    try:
        return key_file(key) is not None
    except ValueError:
        return False


def folder_query(q: str, path: str | None) -> str | None:
    """``q`` narrowed to the folder holding the file ``path`` (``q dir:"/srv/docs"``), for the
    hit's "only in this folder" link; None when there is no path, when the folder cannot be
    written in a query or a URL (a ``"`` or undecodable bytes in it), or when ``q`` already
    narrows to it."""
    if not path or not path.startswith("/"):
        return None
    folder = posixpath.dirname(path)
    try:
        folder.encode("utf-8")
    except UnicodeEncodeError:
        return None
    term = f'dir:"{folder}"'
    if '"' in folder or term in q:
        return None
    return f"{q} {term}"


@dataclass(frozen=True)
class HitView:
    """One hit as the page shows it; ``snippet`` is safe markup, everything else plain text."""

    rank: int
    key: str
    url: str
    web_url: str | None
    path: str | None
    title: str
    date: str | None
    date_source: str | None
    source: str
    media_type: str | None
    snippet: Markup
    snippet_note: str | None = None
    also_at: tuple[str, ...] = ()


def hit_view(hit, format_utc) -> HitView:
    """A :class:`indexerd.index.Hit` for the page."""
    return HitView(rank=hit.rank, key=hit.key, url=hit.url, web_url=web_url(hit.url),
                   path=file_path(hit.key, hit.path), title=hit.title, date=format_utc(hit.last_modified),
                   date_source=hit.date_source, source=hit.source, media_type=hit.media_type,
                   snippet=highlight(hit.snippet, hit.marks), snippet_note=hit.snippet_note,
                   also_at=tuple(file_path(k, None) or k for k in hit.also_at))


def page_numbers(current: int, pages: int, around: int = 3) -> list[int]:
    """The page numbers to link: the first, the last and ``around`` either side of ``current``."""
    keep = {1, pages} | set(range(max(1, current - around), min(pages, current + around) + 1))
    return sorted(keep)


#: a keyword value written bare in a query (anything else is quoted)
_BARE_VALUE = re.compile(r"[A-Za-z0-9_.+/-]+")
#: how the page names each facet field
FACET_LABELS = {"media_type": "Media type", "source": "Source"}


def facet_term(name: str, value: str) -> str | None:
    """The query term that narrows to ``value`` of the field ``name`` (``media_type:text/html``,
    ``source:"my docs"``); None when the value cannot be written in a query (a ``"`` in it)."""
    if _BARE_VALUE.fullmatch(value):
        return f"{name}:{value}"
    if '"' in value or not value:
        return None
    return f'{name}:"{value}"'


@dataclass(frozen=True)
class FacetValue:
    """One value of a facet as the page shows it: ``query`` the search narrowed to it (None:
    the query is already narrowed to it, or it cannot be written in a query)."""

    value: str
    count: int
    query: str | None
    active: bool


@dataclass(frozen=True)
class FacetView:
    """One facet field (``name``, ``label``) and its values, most documents first."""

    name: str
    label: str
    values: tuple[FacetValue, ...]


def facet_views(q: str, facets: dict[str, list[tuple[str, int]]] | None) -> list[FacetView]:
    """The facets of a result for the page: per field, each value with the query narrowed to
    it (``q`` and the field's term, :func:`facet_term`); a field with one value only is shown
    when the query already narrows to it.  ``[]`` without facets."""
    out = []
    for name, values in (facets or {}).items():
        views = []
        for value, count in values:
            term = facet_term(name, value)
            active = term is not None and term in q
            narrowed = None if term is None or active else f"{q} {term}"
            views.append(FacetValue(value, count, narrowed, active))
        if len(views) > 1 or any(v.active for v in views):
            out.append(FacetView(name, FACET_LABELS.get(name, name), tuple(views)))
    return out
