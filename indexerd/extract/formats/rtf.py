"""Rich Text Format -> text (striprtf), title and revision date from the ``\\info`` group.

Outside contract relied on: ``striprtf.striprtf.rtf_to_text(str, encoding, errors)`` takes the
RTF source as ``str`` (RTF is 7-bit: the bytes are read as latin-1, which maps each byte to
one character), honours ``\\ansicpg`` and the font charsets for ``\\'xx`` escapes, drops
``\\pict`` groups and the ignorable ``{\\*...}`` destinations.  It is a pure-Python
regex tokenizer: linear in the input, and run in the worker process like every format.

The ``{\\info ...}`` group gives ``{\\title ...}`` and ``{\\revtim\\yrN\\moN\\dyN\\hrN\\minN}``
(RTF 1.9.1 spec, "Information Group": the time of the last revision; the date chain takes it
as written, in UTC since RTF carries no zone).
"""

from __future__ import annotations

import re

from indexerd.core.errors import SkipDocument
from indexerd.extract.formats import MEDIA_RTF, DocumentText
from indexerd.extract.formats.bounded import parse_errors
from indexerd.extract.formats.xmlstream import one_line

_TITLE = re.compile(rb"\{\\title\s?([^{}]{0,2000})\}")
_REVTIM = re.compile(rb"\{\\revtim((?:\\(?:yr|mo|dy|hr|min|sec)-?\d{1,4}\s?){1,6})\}")
_PART = re.compile(rb"\\(yr|mo|dy|hr|min|sec)(-?\d{1,4})")


def extract_rtf(data: bytes, media_type: str, label: str, max_bytes: int) -> DocumentText:
    """Extract one RTF document.

    Raises:
        SkipDocument: ``parse-error`` when it does not start with ``{\\rtf`` or striprtf fails;
            ``too-large`` when it is over ``max_bytes``.
    """
    if len(data) > max_bytes:
        raise SkipDocument("too-large", f"{label}: {len(data)} bytes > max_size {max_bytes}")
    if not data.lstrip()[:5] == b"{\\rtf":
        raise SkipDocument("parse-error", f"{label}: does not start with {{\\rtf")
    from striprtf.striprtf import rtf_to_text

    with parse_errors(label):
        text = rtf_to_text(data.decode("latin-1"), errors="replace")
    lines = [" ".join(line.split()) for line in text.splitlines()]
    match = _TITLE.search(data[:65536])
    title = one_line(rtf_to_text("{\\rtf1 " + match.group(1).decode("latin-1") + "}", errors="replace")) \
        if match else ""
    return DocumentText(title, "\n".join(line for line in lines if line), MEDIA_RTF,
                        *_revision_time(data))


def _revision_time(data: bytes) -> tuple[str | None, str | None]:
    """``("revtim", "2024-01-02T10:05:00Z")`` from the info group, or ``(None, None)``."""
    match = _REVTIM.search(data[:65536])
    if not match:
        return None, None
    parts = {k.decode(): int(v) for k, v in _PART.findall(match.group(1))}
    if "yr" not in parts:
        return None, None
    value = (f"{parts['yr']:04d}-{parts.get('mo', 1):02d}-{parts.get('dy', 1):02d}"
             f"T{parts.get('hr', 0):02d}:{parts.get('min', 0):02d}:{parts.get('sec', 0):02d}Z")
    return "revtim", value
