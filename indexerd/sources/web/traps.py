"""Crawler traps: URL spaces without end.

On one URL, :func:`trap_reason` catches relative links that grow the path forever and repeated
query parameters.  Per pass, :class:`QueryVariants` bounds the query strings of one path
(calendars, session ids) and :class:`PatternGuard` what one URL cannot show:

- **Numbered paths** (``/page/1`` .. ``/page/99999``, ``/2024/01/02/``, a calendar in the path):
  URLs whose paths differ only in their runs of digits are one *pattern*; a pass admits at most
  ``max_numbered`` URLs per pattern (Heritrix's and Nutch's "same URL but a number" heuristics
  bound them the same way).
- **Path parameters** (``/a;jsessionid=1``, ``/a;v=2``: RFC 3986 §3.3 ``;`` parameters, where
  servlet containers put session ids): the parameters of a path count as variants of it, like a
  query string, and a pass admits at most ``max_variants`` per path (the source's
  ``max_query_variants``).

Pure bookkeeping, no I/O.  Make one instance per pass.  Memory: one counter per pattern (at
most :data:`MAX_PATTERNS`) and at most ``max_variants`` parameter strings per distinct path.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from urllib.parse import urlsplit

__all__ = ["PatternGuard", "QueryVariants", "trap_reason"]

_DIGITS = re.compile(r"[0-9]+")
#: Numbered-path patterns counted per pass; a pattern first met beyond this many is not counted.
MAX_PATTERNS = 100_000


class PatternGuard:
    """Admits the URLs of one pass, numbered paths and path parameters bounded (module doc).

    Args:
        max_numbered: URLs admitted per numbered-path pattern (>= 1).
        max_variants: path-parameter variants admitted per path (>= 1).

    Thread-safe.  Raises ValueError for a bound below 1.
    """

    def __init__(self, max_numbered: int, max_variants: int) -> None:
        if max_numbered < 1 or max_variants < 1:
            raise ValueError(f"bounds must be >= 1, got {max_numbered!r}, {max_variants!r}")
        self.max_numbered = max_numbered
        self.max_variants = max_variants
        self._numbered: Counter[tuple[str, str]] = Counter()
        self._params: dict[tuple[str, str], set[str]] = {}
        self._lock = threading.Lock()

    def admit(self, url: str) -> str | None:
        """None when ``url`` (canonical, not seen before in this pass) may be queued, and then
        counts it; else ``'path-parameters'`` or ``'numbered-path'``."""
        parts = urlsplit(url)
        path = parts.path
        with self._lock:
            if ";" in path:
                bare = re.sub(r";[^/]*", "", path)
                params = path  # the whole path with its parameters is the variant
                seen = self._params.setdefault((parts.netloc, bare), set())
                if params not in seen:
                    if len(seen) >= self.max_variants:
                        return "path-parameters"
                    seen.add(params)
                path = bare
            if _DIGITS.search(path):
                key = (parts.netloc, _DIGITS.sub("#", path))
                n = self._numbered.get(key)
                if n is not None and n >= self.max_numbered:
                    return "numbered-path"
                if n is not None or len(self._numbered) < MAX_PATTERNS:
                    self._numbered[key] = (n or 0) + 1
        return None


def trap_reason(url: str, *, max_length: int = 2000, max_segment_repeats: int = 3,
                max_param_repeats: int = 3) -> str | None:
    """Crawler-trap heuristics on one URL (as given; pass it canonical).

    Returns None when the URL looks fine, else one fixed reason word, checked in this order:

    - ``'url-too-long'``: ``len(url) > max_length`` characters;
    - ``'repeated-segment'``: some non-empty path segment occurs more than
      ``max_segment_repeats`` times (``/de/www.example.test/privacy/www.example.test/privacy/...``,
      made by a scheme-less link resolved relative to each page);
    - ``'repeated-path'``: the path ends with a run of two or more segments written twice in a
      row (``/de/www.example.test/privacy/www.example.test/privacy/``): the first step of that
      same loop, caught before any URL holding the run twice is fetched.  A single
      segment repeated (``/2020/01/01/``) is not a trap;
    - ``'repeated-parameter'``: one query parameter name occurs more than ``max_param_repeats``
      times (``?s=1&s=1&s=1&s=1``).

    Segments and names are compared as written (case-sensitive, not percent-decoded).
    """
    if len(url) > max_length:
        return "url-too-long"
    parts = urlsplit(url)
    path_segs = [s for s in parts.path.split("/") if s]
    segs = Counter(path_segs)
    if segs and max(segs.values()) > max_segment_repeats:
        return "repeated-segment"
    n = len(path_segs)
    for k in range(2, n // 2 + 1):
        if path_segs[n - k:] == path_segs[n - 2 * k:n - k]:
            return "repeated-path"
    if parts.query:
        names = Counter(p.partition("=")[0] for p in parts.query.split("&") if p)
        if names and max(names.values()) > max_param_repeats:
            return "repeated-parameter"
    return None


class QueryVariants:
    """Per-pass guard against query strings growing without bound (calendars, session ids).

    At most ``limit`` distinct query strings are admitted per scheme + host + path; make a new
    instance for each crawl pass.  URLs are compared as given, so pass canonical URLs (then
    ``?b=1&a=2`` and ``?a=2&b=1`` are one variant).  Thread-safe.  Memory: at most ``limit``
    query strings per distinct path seen.

    Raises ValueError for a negative ``limit``.
    """

    def __init__(self, limit: int = 100) -> None:
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        self.limit = limit
        self._seen: dict[tuple[str, str, str], set[str]] = {}
        self._lock = threading.Lock()

    def admit(self, url: str) -> bool:
        """True if ``url`` may be crawled: it has no query, its query was admitted before, or
        fewer than ``limit`` queries were admitted for its path; the query is then recorded."""
        parts = urlsplit(url)
        if not parts.query:
            return True
        key = (parts.scheme, parts.netloc, parts.path or "/")
        with self._lock:
            seen = self._seen.setdefault(key, set())
            if parts.query in seen:
                return True
            if len(seen) >= self.limit:
                return False
            seen.add(parts.query)
            return True
