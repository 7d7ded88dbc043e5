"""Per-pass guards against URL spaces without end that :func:`indexerd.sources.web.urls.trap_reason` cannot
see on one URL: numbered paths and path parameters.

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

__all__ = ["PatternGuard"]

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
