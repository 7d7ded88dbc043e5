"""White space in extracted text: what every format keeps of a document's layout.

The text an extractor gives is what the index stores for snippets and the document preview, so
it keeps the lines a reader sees: a plain text file's indentation and paragraph breaks
(:func:`tidy_lines`), an HTML ``<pre>`` block's lines (:func:`keep_layout` before the page's
white space is collapsed, :func:`restore_layout` after).  The re-index decision must not see
any of this: :func:`collapse_lines` is the one form a content hash is taken of
(:func:`indexerd.extract.extracted.content_hash`), the same for a text as for its tidied lines.

Pure functions, thread-safe, standard library only.
"""

from __future__ import annotations

COLLAPSE_CHUNK_CHARS = 256 * 1024
""":func:`collapse_lines` works on pieces of about this many characters."""

#: a ``<pre>`` block's newlines, spaces and tabs as characters that are not white space (and are
#: no text: C0 controls a page does not show), so that collapsing the page's white space keeps
#: them; a carriage return goes (HTML reads CR LF as LF)
_KEEP = str.maketrans({"\n": "\x01", " ": "\x02", "\t": "\x03", "\r": None})
_BACK = str.maketrans({"\x01": "\n", "\x02": " ", "\x03": "\t"})
_KEPT = "\x01\x02\x03"


def collapse_lines(text: str, separator: str = "\n") -> str:
    """Collapse whitespace inside each ``separator``-delimited piece; drop empty pieces; join
    with newlines.

    A text longer than :data:`COLLAPSE_CHUNK_CHARS` is done in chunks cut at a separator, so the
    list of pieces never holds more than one chunk; the result is the same as in one piece.
    """
    def collapse(chunk: str) -> str:
        return "\n".join(filter(None, [" ".join(piece.split()) for piece in chunk.split(separator)]))

    if len(text) <= COLLAPSE_CHUNK_CHARS:
        return collapse(text)
    parts = []
    start = 0
    while start <= len(text):
        end = text.find(separator, start + COLLAPSE_CHUNK_CHARS)
        if end == -1:
            end = len(text)
        if part := collapse(text[start:end]):
            parts.append(part)
        start = end + 1
    return "\n".join(parts)


def tidy_lines(text: str, *, keep_indent: bool = True) -> str:
    """``text``'s lines as a reader sees them: trailing white space dropped, indentation and
    white space inside a line kept (``keep_indent`` False: each line's white space collapsed,
    for a text whose markup was stripped), a run of blank lines made one, none at the start or
    end.  :func:`collapse_lines` of the result equals :func:`collapse_lines` of ``text``."""
    out: list[str] = []
    blank = True  # no blank line first
    for line in text.split("\n"):
        line = line.rstrip() if keep_indent else " ".join(line.split())
        if line:
            out.append(line)
            blank = False
        elif not blank:
            out.append("")
            blank = True
    if out and not out[-1]:
        out.pop()
    return "\n".join(out)


def keep_layout(text: str) -> str:
    """A ``<pre>`` block's text with its newlines, spaces and tabs made characters that
    :func:`collapse_lines` keeps; :func:`restore_layout` turns them back."""
    return text.translate(_KEEP)


def restore_layout(text: str) -> str:
    """:func:`collapse_lines` output with each ``<pre>`` block's layout back
    (:func:`keep_layout`): its lines, blank lines and indentation; a block's leading and
    trailing newlines and trailing spaces go (browsers skip the newline after ``<pre>``)."""
    if not any(c in text for c in _KEPT):
        return text
    lines = []
    for line in text.split("\n"):
        if any(c in line for c in _KEPT):
            line = line.strip("\x01").rstrip(_KEPT).translate(_BACK)
            line = "\n".join(part.rstrip() for part in line.split("\n"))
        lines.append(line)
    return "\n".join(lines)
