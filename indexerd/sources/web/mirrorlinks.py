"""The pages and stylesheets a crawl pass kept in its mirror, and their links rewritten for
offline browsing once the pass is done (``convert_links``, as wget's ``-k``): a link to a file
the mirror holds becomes a relative path to it, any other an absolute URL
(:mod:`indexerd.sources.web.convertlinks` rewrites one file).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from indexerd.sources.web.convertlinks import convert_page, convert_stylesheet, relative_path
from indexerd.sources.web.mirror import PassMirror
from indexerd.sources.web.urls import canonicalize

#: how the pipeline records a page skipped as the duplicate of another (its ``detail``)
_DUPLICATE_OF = "same content as "


class KeptForConversion:
    """What one pass kept in its mirror whose links are to be rewritten at its end.

    Args:
        mirror: the pass's mirror (nothing is kept when it has none).
        enabled: the source's ``convert_links``.
        counters: the pass's named counters (``web.mirror.converted``).
    """

    def __init__(self, mirror: PassMirror, enabled: bool, counters: Any) -> None:
        self.mirror = mirror
        self.enabled = enabled and mirror.mirror is not None
        self.counters = counters
        self.kept: list[tuple[str, str | None, bool]] = []  # (url, charset, a stylesheet)

    def keep(self, url: str, charset: str | None, *, stylesheet: bool) -> None:
        """Remember that the mirror kept ``url`` (an HTML page, or a stylesheet) in this pass,
        decoded with ``charset`` (None: as its bytes say)."""
        if self.enabled:
            self.kept.append((url, charset, stylesheet))

    def convert(self, stored: Callable[[str], Any]) -> int:
        """Rewrite the links of every file kept since the last call (each file keeps its time);
        ``stored(key)`` gives a key's document record, to point a link to a duplicate's alias at
        the kept page's file.  Returns how many files changed.  Never raises."""
        mirror = self.mirror.mirror
        pages, self.kept = self.kept, []
        if mirror is None or not pages:
            return 0
        converted = 0
        for url, charset, stylesheet in pages:
            kept = mirror.read(url)
            found = mirror.file_for(url) if kept is not None else None
            if kept is None or found is None:
                continue
            page_file = str(found)

            def local(link: str, displays: bool) -> str | None:
                try:
                    target = canonicalize(link)
                    if not mirror.exists(target):
                        rec = stored(target)
                        detail = (rec.detail or "") if rec is not None and rec.reason == "duplicate" else ""
                        target = detail.removeprefix(_DUPLICATE_OF) if detail.startswith(_DUPLICATE_OF) else ""
                        if not target or not mirror.exists(target):
                            return None
                    there = mirror.file_for(target)
                    return relative_path(page_file, str(there)) if there is not None else None
                except ValueError:
                    return None

            data = (convert_stylesheet if stylesheet else convert_page)(kept[0], charset, url, local)
            if data != kept[0]:
                self.mirror.write(url, data, kept[1], html=not stylesheet)
                converted += 1
        self.counters.inc("web.mirror.converted", converted)
        return converted
