"""A source's effective settings: its overrides over the top-level defaults."""

from __future__ import annotations

from dataclasses import dataclass

from typing import Any

from indexerd.config.schema import Config

@dataclass(frozen=True)
class SourcePolicy:
    """The effective per-source settings after applying top-level defaults (seconds, bytes)."""

    max_size_bytes: int
    refresh_time_seconds: float
    strict_dates: bool
    meta_map_path: str | None
    date_sources: tuple[str, ...] | None


def source_policy(cfg: Config, src: Any) -> SourcePolicy:
    """Merge a source's optional overrides with the top-level defaults; ``src`` is one
    ``[[sources.<kind>]]`` table, with ``refresh_time``, ``strict_dates`` and ``date_sources``
    (and ``max_size``, ``meta_map`` if the kind has them)."""
    max_size = getattr(src, "max_size", None)
    return SourcePolicy(
        max_size_bytes=int(max_size if max_size is not None else cfg.max_size),
        refresh_time_seconds=float(src.refresh_time if src.refresh_time is not None else cfg.refresh_time),
        strict_dates=bool(src.strict_dates if src.strict_dates is not None else cfg.strict_dates),
        meta_map_path=getattr(src, "meta_map", None) or cfg.meta_map,
        date_sources=tuple(src.date_sources) if src.date_sources is not None else None,
    )
