"""What the pipeline hands back for one document: its :class:`Verdict`, the fixed word behind it,
and a page's links (:class:`PageLinks`) for the crawler.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Protocol, Sequence

__all__ = ["Verdict", "PageLinks", "Outcome"]


class Verdict(str, Enum):
    """What happened to one document in a pass (a ``str``: ``Verdict.INDEXED == "indexed"``).

    The first four are the document verdicts, one per document met; ``DELETED`` counts a
    document removed because it is gone; ``REDIRECT`` (an HTML-level redirect the source
    follows) is not a document and counts nothing.
    """

    INDEXED = "indexed"
    UNCHANGED = "unchanged"
    SKIPPED = "skipped"
    ERRORS = "errors"
    DELETED = "deleted"
    REDIRECT = "redirect"


class ExtractedLinks(Protocol):
    """What :meth:`PageLinks.of` reads of an extracted page (:class:`indexerd.extract.Extracted`)."""

    @property
    def links(self) -> Sequence[str]: ...
    @property
    def canonical(self) -> str | None: ...
    @property
    def redirect(self) -> str | None: ...
    @property
    def nofollow(self) -> bool: ...
    @property
    def encoding(self) -> str | None: ...
    @property
    def media_type(self) -> str: ...


@dataclass(frozen=True)
class PageLinks:
    """What a crawler needs from an extracted page: its outlinks (resolved, not canonicalised),
    ``rel=canonical``, an HTML-level redirect target, whether links may be followed, the
    codec the page was decoded with (for percent-encoding non-ASCII link text), and the media
    type extraction read it as (``text/html`` for a page served as ``application/octet-stream``
    and sniffed as HTML: what its mirrored copy is)."""

    links: tuple[str, ...] = ()
    canonical: str | None = None
    redirect: str | None = None
    nofollow: bool = False
    encoding: str | None = None
    media_type: str | None = None

    @classmethod
    def of(cls, ex: ExtractedLinks) -> "PageLinks":
        """The links of an :class:`~indexerd.extract.Extracted`."""
        return cls(tuple(ex.links), ex.canonical, ex.redirect, ex.nofollow, ex.encoding, ex.media_type)


@dataclass(frozen=True)
class Outcome:
    """What happened to one document: ``verdict`` (a :class:`Verdict`); ``reason`` the fixed
    word behind it; ``links`` the page's links when it was extracted (None otherwise); ``key``
    the key it was decided under (a ``rel=canonical`` may change it)."""

    verdict: Verdict
    reason: str
    links: PageLinks | None = None
    key: str | None = None
    last_modified: datetime | None = None
    content_hash: str | None = None
