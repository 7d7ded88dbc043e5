"""JSON and JSON Lines -> the text of their strings, keys and numbers (the standard library's
``json``); a document that is not JSON is indexed as its raw text, with the reason.

A JSON document read as raw text is hard to find: its escapes glue words together (``a\\nb``
is one token to an analyzer), text escaped as ``\\u00e9`` cannot be found by its word, and keys
and punctuation crowd the snippets.  What is indexed instead is one line per value, in document
order: ``key: value`` for a string or a number that is an object member (``value`` alone in an
array), ``key`` alone before an object or array that is a member (so a key is searchable too);
strings unescaped, with their own line breaks; numbers as written (``1.50``, ``2e3``);
``true``, ``false``, ``null`` and empty strings give no words of their own (a member's key
stays).  The title is the document's own
top-level ``title`` (else ``name``) string member when it has one; otherwise the caller names
the document as a plain file of that name (:func:`indexerd.extract.titles.plain_text_title`
without its first line: a JSON line is never a title).

- JSON (RFC 8259): one value, or several one after another (concatenated JSON, as API dumps
  are written); anything else in it -- a syntax error, comments, a trailing comma, nesting deeper
  than the parser's recursion limit -- and the whole document is indexed as its raw text, its
  lines tidied as a plain file's.
- JSON Lines (https://jsonlines.org, NDJSON): one value a line; a line that is not JSON is kept
  as its raw text and the others are read.

Either way nothing is lost and the reason is reported (``meta`` ``("fallback", reason)``; the
pipeline logs it).  The text is decoded as plain text is (:func:`~indexerd.extract.decode
.decode_text`: a BOM, else UTF-8, else a guess); a protocol charset is not used (RFC 8259 §8.1:
JSON exchanged between systems is UTF-8, and ``application/json`` defines no ``charset``
parameter, §11).  NUL characters (``\\u0000``) are dropped and lone surrogates (``\\ud800``)
become U+FFFD, which no index can store.

Two halves, as for PDF: :func:`read_json` parses (pure); :func:`extract_json`, called by
:func:`indexerd.extract.extract`, runs it in this process for a document of at most
:data:`IN_PROCESS_MAX_BYTES` and in an extraction worker (:mod:`indexerd.extract.isolation`:
a time and a memory bound) for a larger one: the parser is C and linear in time, but its
objects take several times the document's bytes (``[{},{},...]``: a dict per 3 bytes).

Outside contract relied on: **json** (standard library): ``JSONDecoder.raw_decode`` reads one
value from a position and returns where it ended; it raises ``JSONDecodeError`` (``msg``,
``lineno``, ``colno``) on bad input and ``RecursionError`` on nesting deeper than the
interpreter's recursion limit; ``parse_int``/``parse_float``/``parse_constant`` are handed the
number's text as written.  Imports only the standard library.
"""

from __future__ import annotations

import json
import re
from itertools import repeat
from types import MappingProxyType

from indexerd.core.errors import SkipDocument
from indexerd.extract.decode import decode_text
from indexerd.extract.extracted import (
    DEFAULT_MAX_BYTES,
    LINE_TITLE_MAX_CHARS,
    MEDIA_JSON,
    MEDIA_JSON_LINES,
    Extracted,
)
from indexerd.extract.formats import DocumentText
from indexerd.extract.titles import plain_text_title
from indexerd.extract.whitespace import tidy_lines

IN_PROCESS_MAX_BYTES = 1024 * 1024
"""Documents up to this size (bytes) are parsed in the calling process; larger ones in a worker."""

#: Top-level members that title a document, in order of preference (compared case-insensitively).
TITLE_KEYS = ("title", "name")
#: A fallback reason is cut here (characters).
REASON_MAX_CHARS = 200

_SURROGATE = re.compile("[\ud800-\udfff]")
_WHITESPACE = json.decoder.WHITESPACE  # type: ignore[attr-defined]  # RFC 8259 §2 white space


class _Number(str):
    """A number's text as written (``1.50``, ``2e3``): a word of the text, never a title."""

    __slots__ = ()


def _no_constant(text: str) -> None:
    """``NaN``, ``Infinity``, ``-Infinity`` (accepted by Python, not JSON): no words."""
    return None


_DECODER = json.JSONDecoder(parse_int=_Number, parse_float=_Number, parse_constant=_no_constant)


def extract_json(data: bytes, *, charset: str | None = None, base_url: str | None = None,
                 name: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
                 media_type: str = MEDIA_JSON) -> Extracted:
    """A JSON or JSON Lines document -> :class:`Extracted` (see the module docstring).

    Args:
        data: the whole document.
        charset: unused (module docstring); ``base_url`` is unused too (no links).
        name: file name or URL: the title when the document has no ``title``/``name`` member,
            and for error details.
        max_bytes: the source's size cap (bytes).
        media_type: :data:`MEDIA_JSON` or :data:`MEDIA_JSON_LINES`.

    ``notes`` of the result holds the fallback reason when (part of) the document was indexed
    as raw text.

    Raises:
        SkipDocument: ``too-large`` (over ``max_bytes``, or a worker's memory bound);
            ``empty`` (no key, string or number, and no title); from a worker ``timeout`` or
            ``parse-error`` (it died).
        EnvironmentFailure: no worker could be started.
    """
    label = name or "document"
    if len(data) > max_bytes:
        raise SkipDocument("too-large", f"{label}: {len(data)} bytes > max_size {max_bytes}")
    if len(data) <= IN_PROCESS_MAX_BYTES:
        doc = read_json(data, media_type, label, max_bytes)
    else:
        from indexerd.extract.isolation import default_pool

        doc = default_pool().extract(media_type, data, label, max_bytes)
    if not (doc.title or doc.text):
        raise SkipDocument("empty", f"{label}: no keys, strings or numbers")
    meta = dict(doc.meta)
    title = doc.title or plain_text_title("", name, LINE_TITLE_MAX_CHARS)
    fallback = meta.pop("fallback", None)
    return Extracted(title=title, text=doc.text, media_type=doc.media_type,
                     encoding=meta.pop("codec", None), meta=MappingProxyType({}), links=(),
                     canonical=None, noindex=False, nofollow=False,
                     notes=(fallback,) if fallback else ())


def extract_json_lines(data: bytes, *, charset: str | None = None, base_url: str | None = None,
                       name: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> Extracted:
    """:func:`extract_json` for a JSON Lines document (same arguments and errors)."""
    return extract_json(data, charset=charset, base_url=base_url, name=name, max_bytes=max_bytes,
                        media_type=MEDIA_JSON_LINES)


def read_json(data: bytes, media_type: str, label: str, max_bytes: int) -> DocumentText:
    """Parse a JSON or JSON Lines document (the signature of
    :data:`indexerd.extract.worker.EXTRACTORS`; module docstring for what is read).

    Returns a :class:`DocumentText` whose ``title`` is the top-level ``title``/``name`` string
    (one line, cut at :data:`LINE_TITLE_MAX_CHARS`) or ``""``, and whose ``meta`` holds
    ``("codec", Python codec name)`` and, when raw text was kept, ``("fallback", reason)``.
    Pure; O(size) time; memory a few times the document's size.

    Raises:
        SkipDocument: ``too-large`` (``data`` over ``max_bytes``).
        MemoryError: from the parser (the worker's memory bound).
    """
    if len(data) > max_bytes:
        raise SkipDocument("too-large", f"{label}: {len(data)} bytes > max_size {max_bytes}")
    source, codec = decode_text(data, None)
    source = source.lstrip("\ufeff")
    if media_type == MEDIA_JSON_LINES:
        lines, fallback = _lines_of_records(source)
        title = ""
    else:
        lines, fallback, title = _lines_of_document(source)
    meta = [("codec", codec)] + ([("fallback", fallback)] if fallback else [])
    return DocumentText(_scrub(title), tidy_lines(_scrub("\n".join(lines))), media_type,
                        meta=tuple(meta))


def _lines_of_document(source: str) -> tuple[list[str], str | None, str]:
    """A JSON document's lines, the fallback reason (``None`` when it was all JSON), its title."""
    values = []
    end = _WHITESPACE.match(source, 0).end()
    try:
        while end < len(source):
            value, end = _DECODER.raw_decode(source, end)
            values.append(value)
            end = _WHITESPACE.match(source, end).end()
    except json.JSONDecodeError as exc:
        return [source], _reason(exc), ""
    except RecursionError:
        return [source], "nested deeper than the JSON parser's limit; indexed as raw text", ""
    out: list[str] = []
    for value in values:
        _append_lines(value, out)
    return out, None, _own_title(values[0]) if values else ""


def _lines_of_record_line(line: str, out: list[str]) -> str | None:
    """Append one JSON Lines line's lines to ``out``; the parser's message when it is not JSON
    (then the line itself is appended)."""
    try:
        value = _DECODER.decode(line)
    except json.JSONDecodeError as exc:
        out.append(line)
        return f"{exc.msg}: column {exc.colno}"
    except RecursionError:
        out.append(line)
        return "nested deeper than the JSON parser's limit"
    _append_lines(value, out)
    return None


def _lines_of_records(source: str) -> tuple[list[str], str | None]:
    """A JSON Lines document's lines and the fallback reason (``None`` when every line is JSON)."""
    out: list[str] = []
    bad = 0
    first = ""
    records = 0
    for number, line in enumerate(source.split("\n"), 1):
        if not line.strip():
            continue
        records += 1
        why = _lines_of_record_line(line, out)
        if why is not None:
            bad += 1
            first = first or f"line {number}: {why}"
    if not bad:
        return out, None
    return out, _cut(f"{bad} of {records} lines are not JSON (first: {first}); those indexed "
                     "as raw text")


def _append_lines(value: object, out: list[str]) -> None:
    """Append the lines of ``value`` (parsed with numbers as text) to ``out``, in document order.

    Iterative, not recursive: a document nested as deep as the parser allows costs one iterator
    per level, never the interpreter's stack."""
    stack = [iter(((None, value),))]
    while stack:
        for key, item in stack[-1]:
            if isinstance(item, str):
                if key and item:
                    out.append(f"{key}: {item}")
                elif key or item:
                    out.append(key or item)
            elif isinstance(item, dict):
                if key:
                    out.append(key)
                stack.append(iter(item.items()))
                break
            elif isinstance(item, list):
                if key:
                    out.append(key)
                stack.append(zip(repeat(None), item))
                break
            elif key:  # true, false, null: the key is still a word
                out.append(key)
        else:
            stack.pop()


def _own_title(value: object) -> str:
    """The top-level ``title`` (else ``name``) string member of a document's first value, one
    line, or ``""``."""
    if not isinstance(value, dict):
        return ""
    found = {key.lower(): item for key, item in value.items()
             if key.lower() in TITLE_KEYS and type(item) is str and item.strip()}
    for key in TITLE_KEYS:
        if key in found:
            return " ".join(found[key].split())[:LINE_TITLE_MAX_CHARS]
    return ""


def _reason(exc: json.JSONDecodeError) -> str:
    return _cut(f"not JSON ({exc.msg}: line {exc.lineno} column {exc.colno}); indexed as raw text")


def _cut(text: str) -> str:
    return text if len(text) <= REASON_MAX_CHARS else text[:REASON_MAX_CHARS - 3] + "..."


def _scrub(text: str) -> str:
    """Drop NULs and make lone surrogates U+FFFD: the parser unescapes ``"\\u0000"`` and
    ``"\\ud800"`` (a surrogate without its pair) to them."""
    text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # the parser joins a pair, so every surrogate left is alone
        text = _SURROGATE.sub("\ufffd", text)
    return text
