"""An :class:`~indexerd.index.IndexDoc` -> the row of the PostgreSQL engine's ``documents`` table.

The ``tsv`` column is built here, from the tokens of the shared analyzer
(:mod:`indexerd.index.analysis`), and handed to PostgreSQL as a ``tsvector`` literal: the literal's
lexemes are taken as they are (no parser, no dictionary, no text search configuration), so NFC,
case folding, CJK bigrams, identifiers, diacritic folding and Porter stems are exactly those of
the embedded engines.  PostgreSQL's own ``to_tsvector`` would split ``pg_hba.conf`` and CJK text
its own way and stem with its own dictionaries: queries would find other documents than on
the embedded engines (bench/RESULTS.md has the measurement).

Layout of one ``tsv`` (positions count from 1; a weight per position):

- the title's tokens at positions ``1..T``, weight ``A``;
- the content's tokens from ``T + 2`` on, weight ``B`` (the gap keeps a phrase from running
  from the title into the content);
- each whole identifier (the ``ids`` field) after the content, one position apart from
  everything, weight ``C`` (identifiers hold ``.`` or ``_``, so no text token equals one);
- the section headings' tokens (the ``headings`` field, a part of the content indexed again to
  rank) after the identifiers, weight ``D``.

Limits of ``tsvector`` (PostgreSQL 15, ``src/include/tsearch/ts_type.h``), applied here so that
a big document is indexed rather than refused: a position from :data:`MAX_POSITION` - 1 on is stored
as :data:`MAX_POSITION`, so that one stays empty (words past it are found,
phrases past it or across it are not); a lexeme keeps at
most :data:`MAX_POSITIONS_PER_LEXEME` positions (the first ones, title first); a token longer
than :data:`MAX_LEXEME_BYTES` is dropped (PostgreSQL refuses it; the embedded engines keep it),
an empty one too, without taking a position (as the embedded engines drop it);
once the literal reaches :data:`TSVECTOR_BUDGET_BYTES` later *new* lexemes are dropped
(PostgreSQL refuses a tsvector over 1 MB).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import timezone
from typing import NamedTuple

from indexerd.index.base import SNIPPET_TEXT_CAP_BYTES

UTC = timezone.utc

#: The largest position a ``tsvector`` stores (``MAXENTRYPOS - 1``).
MAX_POSITION = 16383
#: Positions kept per lexeme (``MAXNUMPOS``).
MAX_POSITIONS_PER_LEXEME = 256
#: Bytes of UTF-8 a lexeme may have (``MAXSTRLEN`` is 2047, exclusive).
MAX_LEXEME_BYTES = 2046
#: Bytes of the binary ``tsvector`` (``MAXSTRPOS`` is 1 MB) this engine stays under.
TSVECTOR_BUDGET_BYTES = 1_000_000


def key_hash(key: str) -> bytes:
    """The 32-byte SHA-256 of ``key`` (UTF-8, surrogate escapes kept): the primary key (a key
    may be longer than a B-tree entry may be, about 2.7 kB)."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).digest()


def to_bytes(text: str) -> bytes:
    """``text`` as UTF-8, surrogate escapes (undecodable file names) kept as their bytes."""
    return text.encode("utf-8", "surrogateescape")


def from_bytes(data: bytes | memoryview | None) -> str:
    """The inverse of :func:`to_bytes` (None and empty give ``""``)."""
    return bytes(data).decode("utf-8", "surrogateescape") if data else ""


def quote_lexeme(token: str) -> str:
    """``token`` as a quoted lexeme of the ``tsvector``/``tsquery`` input syntax."""
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


class Tsv(NamedTuple):
    """A built ``tsvector`` literal and whether a limit cut something (module docstring)."""

    literal: str
    truncated: bool


def build_tsvector(title_tokens: list[str], content_tokens: list[str], ids: list[str],
                   heading_tokens: Sequence[str] = ()) -> Tsv:
    """The ``tsv`` literal of analysed title, content and heading tokens and whole identifiers
    (the layout and limits of the module docstring)."""
    entries: dict[str, list[str]] = {}
    budget = TSVECTOR_BUDGET_BYTES
    truncated = False
    used = 8

    def add(tokens, first: int, weight: str, step: int = 1) -> int:
        nonlocal used, truncated
        pos = first
        for tok in tokens:
            if not tok:  # Porter stems an identifier's part "s" to "": the embedded engines drop it too
                continue
            # MAX_POSITION - 1 stays free: no word before the clamped ones is next to them
            p = pos if pos < MAX_POSITION - 1 else MAX_POSITION
            pos += step
            plist = entries.get(tok)
            if plist is None:
                n = len(tok.encode("utf-8")) if not tok.isascii() else len(tok)
                if n > MAX_LEXEME_BYTES or used + n + 10 > budget:
                    truncated = True
                    continue
                used += n + 10
                entries[tok] = [f"{p}{weight}"]
                continue
            if len(plist) >= MAX_POSITIONS_PER_LEXEME:
                truncated = truncated or p < MAX_POSITION
                continue
            if p == MAX_POSITION and plist[-1].startswith(f"{MAX_POSITION}"):
                continue
            used += 2
            plist.append(f"{p}{weight}")
        return pos

    after_title = add(title_tokens, 1, "A")
    after_content = add(content_tokens, after_title + 1, "B")
    after_ids = add(ids, after_content + 1, "C", step=2)
    add(heading_tokens, after_ids + 1, "D")
    literal = " ".join(f"{quote_lexeme(t)}:{','.join(ps)}" for t, ps in entries.items())
    return Tsv(literal, truncated)


def snippet_text(doc) -> bytes:
    """What snippets are cut from: the document's snippet text (else its content) as UTF-8,
    capped at :data:`~indexerd.index.base.SNIPPET_TEXT_CAP_BYTES` (a character cut at the cap is
    mended on reading)."""
    shown = doc.content if doc.snippet_text is None else doc.snippet_text
    return shown.encode("utf-8", "replace")[:SNIPPET_TEXT_CAP_BYTES]


def row(doc, analysed) -> tuple:
    """The ``documents`` row of ``doc`` (an :class:`~indexerd.index.IndexDoc`) whose title,
    content and headings the analyzer gave as ``analysed`` (``(title Analysed, content Analysed,
    heading tokens)``), in the
    column order of :data:`~.schema.ROW_COLUMNS`; and whether :func:`build_tsvector` cut it."""
    t, c, h = analysed
    tsv = build_tsvector(t.tokens, c.tokens, t.ids + c.ids, h)
    lm = doc.last_modified.astimezone(UTC)
    values = (key_hash(doc.key), doc.key, doc.source, to_bytes(doc.title),
              None if doc.path is None else to_bytes(doc.path), doc.media_type or "",
              doc.date_source or "", lm, max(0, int(doc.size)), tsv.literal, snippet_text(doc))
    return values, tsv.truncated
