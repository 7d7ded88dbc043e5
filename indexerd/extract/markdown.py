"""Markdown: the title from front matter or the first heading, the text lightly stripped.

Not a Markdown renderer: a few line patterns of CommonMark (https://spec.commonmark.org/) are
enough to find the title and keep the words. Pure functions, thread-safe; importing costs the
standard library and w3lib.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

from indexerd.extract.decode import decode_text
from indexerd.extract.extracted import (
    LINE_TITLE_MAX_CHARS, MEDIA_MARKDOWN, Extracted, text_document,
)
from indexerd.extract.text import one_line
from indexerd.extract.whitespace import tidy_lines


def extract_markdown(data: bytes, *, charset: str | None, base_url: str | None,
                     name: str | None) -> Extracted:
    """Markdown -> :class:`Extracted`: the title is the YAML front matter's ``title:``, else the
    first ATX or setext heading outside code fences, else the first line; the text drops code
    fence lines, reference definitions, heading and quote markers, emphasis and code-span marks,
    and keeps link texts. ``base_url`` and ``name`` are unused. Never raises.
    """
    decoded, codec = decode_text(data, charset)
    title = markdown_title(decoded)
    text = tidy_lines(_markdown_layout(decoded), keep_indent=True)
    doc = text_document(title, text, MEDIA_MARKDOWN, codec)
    headings = markdown_headings(decoded)
    return replace(doc, headings="\n".join(headings)) if headings else doc


def _markdown_layout(source: str) -> str:
    """:func:`strip_markdown` of ``source`` with the layout a reader of the file sees: a code
    fence's lines as written, another line's indentation as written (a nested list, an indented
    code block) and the rest of its white space collapsed; a line the markup stripping left
    indented (``# Title``) starts at its text.  Lines stay where they were (every strip is within
    a line), so :func:`~indexerd.extract.whitespace.collapse_lines` of it is that of the
    collapsed form."""
    fenced = _fenced_lines(source)
    out = []
    for i, (raw, line) in enumerate(zip(source.split("\n"), strip_markdown(source).split("\n"))):
        indent = raw[:len(raw) - len(raw.lstrip(" \t"))] if raw[:1] in (" ", "\t") or i in fenced else ""
        kept = line.lstrip(" \t")
        out.append(indent + (kept.rstrip() if i in fenced else " ".join(kept.split())) if kept.strip() else "")
    return "\n".join(out)


def _fenced_lines(source: str) -> set[int]:
    """The indexes (0-based) of ``source``'s lines inside a code fence, the fence lines not."""
    inside: set[int] = set()
    fence = ""
    for i, line in enumerate(source.split("\n")):
        marker = _MD_FENCE_RE.match(line)
        if fence:
            if marker and marker.group(1)[0] == fence:
                fence = ""
            else:
                inside.add(i)
        elif marker:
            fence = marker.group(1)[0]
    return inside


def markdown_headings(source: str) -> list[str]:
    """Every ATX and setext heading outside code fences (front matter is no heading), each as
    a title line (markup stripped, one line), in order: the :attr:`Extracted.headings` of a
    Markdown file."""
    return [shown for is_heading, shown in _outline(source) if is_heading]


def _front_matter(lines: list[str]) -> tuple[int, str]:
    """``(index of the first line after the YAML front matter (0: none), its title: value as a
    title line, or "")``."""
    if not lines or lines[0].strip() != "---":
        return 0, ""
    end = next((i for i, line in enumerate(lines[1:50], 1) if line.strip() in ("---", "...")), 0)
    for line in lines[1:end]:
        key, _, value = line.partition(":")
        if key.strip().lower() == "title" and value.strip():
            return end + 1, _collapse_title(value.strip().strip("\"'"))
    return (end + 1 if end else 0), ""


def _outline(source: str) -> Iterator[tuple[bool, str]]:
    """The lines of ``source`` outside code fences and front matter as title lines, in order:
    ``(True, text)`` for an ATX or setext heading, ``(False, text)`` for another line that is
    not blank (a setext heading's text line comes first as such, then as the heading)."""
    lines = source.splitlines()
    start, _ = _front_matter(lines)
    fence = previous = ""
    for line in lines[start:]:
        marker = _MD_FENCE_RE.match(line)
        if fence:
            if marker and marker.group(1)[0] == fence:
                fence = ""
            previous = ""
            continue
        if marker:
            fence = marker.group(1)[0]
            previous = ""
            continue
        atx = _MD_ATX_RE.match(line)
        heading = atx.group(1) if atx and atx.group(1) else previous if previous and _MD_SETEXT_RE.match(line) else ""
        if heading and (shown := _collapse_title(heading)):
            yield True, shown
            previous = ""
            continue
        previous = line if line.strip() and not atx else ""
        if previous:
            yield False, _collapse_title(previous)


_MD_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_MD_ATX_RE = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_MD_SETEXT_RE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
_MD_STRIPS = (
    (re.compile(r"^ {0,3}(?:`{3,}|~{3,}).*$", re.M), ""),  # code fence lines
    (re.compile(r"^ {0,3}\[[^\]\n]+\]:[ \t]*\S.*$", re.M), ""),  # reference definitions
    (re.compile(r"!?\[([^\]\n]*)\](?:\([^)\n]*\)|\[[^\]\n]*\])"), r"\1"),  # [text](url) -> text
    (re.compile(r"^ {0,3}(?:#{1,6}(?=[ \t]|$)|(?:=+|-+)[ \t]*$|>[ \t]?)", re.M), ""),
    (re.compile(r"[*`]+|~~"), ""),  # emphasis and code spans
)


def strip_markdown(source: str) -> str:
    """``source`` without the markup :func:`extract_markdown` drops (its lines kept)."""
    for pattern, replacement in _MD_STRIPS:
        source = pattern.sub(replacement, source)
    return source


def markdown_title(source: str) -> str:
    """The front matter's ``title:``, else the first ATX or setext heading outside code fences
    and front matter, else the first line that is not blank there."""
    _, title = _front_matter(source.splitlines())
    if title:
        return title
    first = ""
    for is_heading, shown in _outline(source):
        if is_heading:
            return shown
        first = first or shown
    return first


def _collapse_title(line: str) -> str:
    return one_line(strip_markdown(line), LINE_TITLE_MAX_CHARS)
