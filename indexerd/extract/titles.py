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
  (``=====``, ``/********``, ``-- 42 --``), or no letter at all;
- a comment (``//``, ``#``, ``/*``, ``;``, ``--``, ``%``, ``REM``: C, shell and Makefile, INI,
  SQL and Lua, TeX, batch files, and reStructuredText's ``.. `` comments and directives;
  Markdown headings are read by the Markdown extractor);
- an INI / systemd section header (``[Unit]``), PEM armour (``-----BEGIN CERTIFICATE-----``,
  RFC 7468 §2), an assignment (``scale=2``, ``MAIN:=x``, ``__all__ = (...)``), a code line
  (``import``, ``def``, ``class``, ``package``, ``<?xml``), or a string literal (a docstring);
- a sentence that continues on the next line: it ends in ``,`` or ``:`` or a word such as
  ``from``, ``on``, ``of`` (``This package was debianized by X on``).

Source code and configuration files (by extension: :data:`CODE_SUFFIXES`, or named ``Makefile``)
never take their first line: they are named by their file name, except a Python file with a
module docstring (PEP 257), named by the docstring's first sentence when that is short.

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
_COMMENT = re.compile(r"^(?://|#|/\*|;|--\s|--$|%|REM\b|rem\s|\.\.\s)")
_CODE_LINE = re.compile(
    r"""^(?:\[[^\]]+\]$"""                                   # [Unit], [section]
    r"""|-----(?:BEGIN|END) """                                 # PEM armour
    r"""|[A-Za-z_][\w.-]*\s*(?:[:+?!]?=|:=)(?!=)"""            # assignment
    r"""|(?:import|from\s+\S+\s+import|def|class|package|use|require|function)\s"""
    r"""|<\?(?:xml|php)"""
    r"""|[rRuUbBfF]?(?:\"\"\"|\'\'\'|["'`]))"""          # a string literal
)
#: Words a line does not end in when it is a title: the sentence goes on on the next line.
_CONTINUES = frozenset(("from", "on", "of", "by", "to", "in", "for", "with", "at", "and", "or",
                        "the", "a", "an", "is", "was", "are", "that"))
#: File name endings of source code and configuration files (their first line is code).
CODE_SUFFIXES = frozenset((
    ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".go", ".rs", ".js", ".mjs", ".ts", ".java",
    ".py", ".pl", ".pm", ".rb", ".php", ".lua", ".sh", ".bash", ".zsh", ".el", ".sql", ".mk",
    ".bc", ".awk", ".sed", ".tcl", ".ini", ".cfg", ".conf", ".toml", ".yaml", ".yml", ".json",
    ".xml", ".service", ".target", ".socket", ".timer", ".pem", ".crt", ".css", ".cmake", ".m4",
    ".in", ".vim", ".patch", ".diff"))
_CODE_NAMES = frozenset(("makefile", "gnumakefile", "cmakelists.txt", "dockerfile"))
_DOCSTRING = re.compile(r'^[rRuU]?("""|\'\'\')\s*(.*?)(?:\1|\.\s|\.$|\n\s*\n|$)', re.S)
_NAMING_FIELDS = ("title", "subject", "upstream-name", "name")


def reads_as_title(line: str) -> bool:
    """True when ``line`` (one line, not stripped) can stand as a document's title (module rule)."""
    s = line.strip()
    if not s or len(s) > TITLE_LINE_MAX_CHARS or s.startswith("#!"):
        return False
    if _FIELD.match(s) or "-*-" in s or _COMMENT.match(s) or _CODE_LINE.match(s):
        return False
    last = s.split()[-1].lower()
    if s[-1] in ",:" or last in _CONTINUES:
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
    text = source.lstrip("\ufeff")
    lines = text.splitlines()
    first = next((line for line in lines if line.strip()), "")
    base = (name or "").rstrip("/").rsplit("/", 1)[-1]
    suffix = "." + base.rsplit(".", 1)[-1].lower() if "." in base else ""
    if suffix in CODE_SUFFIXES or base.lower() in _CODE_NAMES:
        docstring = _python_docstring(text) if suffix == ".py" else ""
        return docstring[:limit] if docstring else base[:limit]
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
    return base[:limit]


def _python_docstring(text: str) -> str:
    """The first sentence of a Python module's docstring (PEP 257: the summary) when it reads as
    a title (a longer one cut to :data:`TITLE_LINE_MAX_CHARS` at a space), else ``""``; comments
    and blank lines may come before it."""
    body = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    m = _DOCSTRING.match("\n".join(body).lstrip())
    if not m:
        return ""
    summary = " ".join(m.group(2).split()).rstrip(".")
    if len(summary) > TITLE_LINE_MAX_CHARS:  # a long first sentence: its words up to the bound
        summary = summary[:TITLE_LINE_MAX_CHARS + 1].rsplit(" ", 1)[0]
        return summary if any(c.isalpha() for c in summary) else ""
    return summary if reads_as_title(summary) else ""
