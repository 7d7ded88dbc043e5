"""A count and its noun, in the singular for one: what the CLI, the daemon's log and systemd's
status line say of sources, documents, pages (``1 source``, ``2 sources``, ``0 sources``).

English only, as every message of indexerd is. Pure, thread-safe.
"""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, the noun in the singular only when ``n`` is 1: ``counted(1, "source")``
    is ``"1 source"``, ``counted(0, "source")`` ``"0 sources"``.

    Args:
        n: the count (any int; negative counts take the plural).
        noun: the singular noun.
        plural: the plural when it is not ``noun + "s"`` (``"matches"``); None: ``noun + "s"``.
    """
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
