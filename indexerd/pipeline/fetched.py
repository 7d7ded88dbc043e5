"""What a source hands the pipeline: a document's bytes and protocol facts (:class:`Fetched`), and
its source's settings that the pipeline applies (:class:`Policy`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from indexerd.core import decide as decide_mod
from indexerd.core.metamap import MetaMap
from indexerd.extract import DEFAULT_MAX_BYTES

__all__ = ["Fetched", "Policy"]


@dataclass(frozen=True)
class Fetched:
    """A document's bytes and the facts its source learned while reading or fetching it.

    ``protocol_date`` is the HTTP ``Last-Modified`` string, the file's mtime (aware UTC) or a
    SQL column value; ``protocol_kind`` names it (``header``, ``mtime``, ``column``).
    ``fetched_at`` is aware UTC.  ``size`` is in bytes; ``mtime_ns``, ``ctime_ns`` and ``ino``
    are for files only (the stat the next scan compares with; ``ctime_ns`` 0: not to be trusted).
    """

    key: str
    source: str
    url: str
    data: bytes
    fetched_at: datetime
    path: str | None = None
    name: str | None = None
    declared_type: str | None = None
    charset: str | None = None
    base_url: str | None = None
    protocol_date: str | datetime | None = None
    protocol_kind: str = "header"
    server_date: str | None = None
    sitemap_date: str | datetime | None = None
    size: int = 0
    mtime_ns: int | None = None
    ctime_ns: int | None = None
    ino: int | None = None
    etag: str | None = None
    last_modified_header: str | None = None
    title: str | None = None  # the source's own title (a SQL column); overrides extraction's


@dataclass(frozen=True)
class Policy:
    """What the pipeline needs to know about the source a document came from."""

    meta_map: MetaMap
    date_order: tuple[str, ...] | None = None
    settings: decide_mod.DecideSettings = field(default_factory=decide_mod.DecideSettings)
    #: the source's ``max_size``: also the cap on decompressed bytes (compressed files, Office
    #: and ODF parts)
    max_bytes: int = DEFAULT_MAX_BYTES
