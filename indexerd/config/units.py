"""Durations and sizes as people write them in the config (``"15m"``, ``"20MB"``), turned into
seconds (float) and bytes (int) once, at decoding (:func:`dec_hook`, msgspec's decode hook)."""

from __future__ import annotations

import re
from typing import Any

class Seconds(float):
    """A duration in seconds, written in the config as ``"15m"``, ``"1h30m"``, ``"2d"`` or a number."""


class Bytes(int):
    """A size in bytes, written in the config as ``"20MB"``, ``"512KiB"``, ``"1G"`` or a number."""


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "ki": 1024,
               "m": 1000**2, "mb": 1000**2, "mib": 1024**2, "mi": 1024**2,
               "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "gi": 1024**3,
               "t": 1000**4, "tb": 1000**4, "tib": 1024**4, "ti": 1024**4}


def parse_size(value: str | int) -> int:
    """Parse ``"20MB"`` (decimal), ``"20MiB"`` (binary), ``"512k"`` or a plain number into bytes.

    Raises:
        ValueError: for anything else, or a negative size.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a size like '20MB', got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"expected a non-negative size, got {value}")
        return value
    m = _SIZE_RE.match(str(value))
    unit = (m.group(2) or "").lower() if m else None
    if not m or unit not in _SIZE_UNITS:
        raise ValueError(f"expected a size like '20MB' or '512KiB', got {value!r}")
    return int(float(m.group(1)) * _SIZE_UNITS[unit])


#: The largest duration and size the config accepts: beyond them timers and reads overflow
#: (an interval of 3,000,000 days crashed APScheduler; a size of 10^35 bytes crashed read()).
MAX_SECONDS = 10 * 365 * 86400.0
MAX_BYTES = 10**15


def dec_hook(type_: type, obj: Any) -> Any:
    if type_ is Seconds:
        from indexerd.core.timespans import parse_duration

        if isinstance(obj, bool):
            raise ValueError(f"expected a duration like '15m', got {obj!r}")
        seconds = parse_duration(obj)
        if seconds > MAX_SECONDS:
            raise ValueError(f"expected a duration of at most 10 years, got {obj!r}")
        return Seconds(seconds)
    if type_ is Bytes:
        size = parse_size(obj)
        if size > MAX_BYTES:
            raise ValueError(f"expected a size of at most 1 PB, got {obj!r}")
        return Bytes(size)
    raise NotImplementedError(type_)
