"""The title of a plain-text document: its first line when that reads as a title, else a naming
header field, else the file name (pure functions).

A first line is not a title when it is (each a kind met in real trees):

- a ``#!`` interpreter line (scripts: every one was titled ``#!/bin/bash``);
- a header field ``Key: value`` with a one-word key (RFC 5322 §2.2 header fields, Debian
  control and copyright files (DEP-5), vim mode lines: every Debian copyright file was titled
  ``Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/``);
- an Emacs file-variables line (``-*- mode: text -*-``, the GNU Emacs manual, "Specifying File
  Variables");
- URL-ish: words holding ``://`` or starting with ``www.`` make up half of it or more;
- longer than :data:`TITLE_LINE_MAX_CHARS` (the first line of a paragraph, not a heading);
- mostly punctuation: fewer than half of its non-space characters are letters or digits
  (``=====``, ``/********``, ``-- 42 --``), or no letter at all.

A document that opens with header fields is named by its first ``Title``, ``Subject``,
``Upstream-Name`` or ``Name`` field within the header block (up to the first blank line);
otherwise, and for every other non-title line, by its file name.
"""

from __future__ import annotations

import re

#: A first line longer than this (characters) is a paragraph's, not a title.
TITLE_LINE_MAX_CHARS = 100
#: Lines read for a naming header field.
HEADER_SCAN_LINES = 50

_FIELD = re.compile(r"^([A-Za-z][A-Za-z0-9_.-]*):(?:\s|$)")
_NAMING_FIELDS = ("title", "subject", "upstream-name", "name")


def reads_as_title(line: str) -> bool:
    """True when ``line`` (one line, not stripped) can stand as a document's title (module rule)."""
    s = line.strip()
    if not s or len(s) > TITLE_LINE_MAX_CHARS or s.startswith("#!"):
        return False
    if _FIELD.match(s) or "-*-" in s:
        return False
    urls = sum(len(t) for t in s.split() if "://" in t or t.lower().startswith("www."))
    visible = [c for c in s if not c.isspace()]
    if 2 * urls >= len(visible):
        return False
    wordy = sum(1 for c in visible if c.isalnum())
    return any(c.isalpha() for c in visible) and 2 * wordy >= len(visible)


def plain_text_title(source: str, name: str | None, limit: int) -> str:
    """The title of a plain-text document (module rule), at most ``limit`` characters.

    Args:
        source: the decoded text, line breaks kept (a header block ends at a blank line).
        name: the file name or URL path; its last segment names a document whose first line is
            not a title.  None: no name (``""`` then).
    """
    lines = source.lstrip("\ufeff").splitlines()
    first = next((line for line in lines if line.strip()), "")
    if reads_as_title(first):
        return " ".join(first.split())[:limit]
    if _FIELD.match(first.strip()):
        for line in lines[:HEADER_SCAN_LINES]:
            if not line.strip():
                break
            m = _FIELD.match(line)
            value = line[m.end():].strip() if m else ""
            if m and m.group(1).lower() in _NAMING_FIELDS and value:
                return " ".join(value.split())[:limit]
    if not name:
        return ""
    return name.rstrip("/").rsplit("/", 1)[-1][:limit]
