"""The tantivy engine's schema: its fields, the tokenizer it registers, and the conversion of an
:class:`~indexerd.index.IndexDoc` to a tantivy document and of a stored document back to a hit.

Fields (the names the query compiler uses):

- ``key`` and ``source``: one raw term each (no tokenizing), stored, fast (columnar); ``key`` is
  the unique document key, deleted and replaced by term;
- ``title`` and ``content``: the engine-neutral analyzer's tokens (:mod:`indexerd.index.analysis`)
  joined by single spaces and split again by tantivy's whitespace tokenizer, so a token's
  position is its index in the analyzer's list (phrases work as on every engine); not stored;
- ``content_pairs``: each two neighbouring content tokens as one term (:mod:`.pairs`), with
  frequencies, without positions: a phrase query's candidates (:mod:`.compile`);
- ``headings``: the analyzer's tokens of the section headings (boosted at query time), with
  positions, not stored;
- ``ids``: the whole identifiers of title and content (``pg_hba.conf``), whitespace-joined,
  without positions (a query word that is an identifier matches here or as a phrase of its parts);
- ``media_type`` and ``date_source``: raw terms, stored;
- ``last_modified``: a date (aware UTC in and out; tantivy keeps UTC), stored, indexed, fast
  (date sort and the since/until filter); ``size``: bytes, unsigned, stored, indexed, fast;
- ``title_s`` and ``path_s``: the title as shown and the file path as bytes (UTF-8 with surrogate
  escapes, so a file name that is not UTF-8 comes back as it went in), stored only;
- ``text``: the text snippets are cut from, UTF-8 capped at :data:`SNIPPET_TEXT_CAP_BYTES`, stored
  only; tantivy's document store compresses it (in its indexing thread, off the GIL: compressing
  it here cost more than the rest of the engine, see bench/RESULTS.md).

Changing any of this changes the on-disk format: bump
:data:`~indexerd.index.tantivy.FORMAT_VERSION` (an index written with another format is rebuilt
from the sources).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import tantivy


UTC = timezone.utc

#: Bytes of UTF-8 kept for snippets per document (as the Whoosh engine).
SNIPPET_TEXT_CAP_BYTES = 256 * 1024
#: The name the whitespace tokenizer is registered under (registered at every open: tantivy
#: persists only the name in the schema).
TOKENIZER = "indexerd_ws"
#: Fields a query may name and how they are indexed.
TEXT_FIELDS = ("title", "content")
RAW_FIELDS = ("key", "source", "media_type")


def build_schema() -> tantivy.Schema:
    """The schema of a new index (see the module docstring)."""
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("key", stored=True, fast=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("source", stored=True, fast=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("title", tokenizer_name=TOKENIZER, index_option="position")
    sb.add_text_field("content", tokenizer_name=TOKENIZER, index_option="position")
    sb.add_text_field("ids", tokenizer_name=TOKENIZER, index_option="freq")
    sb.add_text_field("content_pairs", tokenizer_name=TOKENIZER, index_option="freq")
    sb.add_text_field("headings", tokenizer_name=TOKENIZER, index_option="position")
    sb.add_text_field("media_type", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("date_source", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_date_field("last_modified", stored=True, indexed=True, fast=True)
    sb.add_unsigned_field("size", stored=True, indexed=True, fast=True)
    sb.add_bytes_field("title_s", stored=True)
    sb.add_bytes_field("path_s", stored=True)
    sb.add_bytes_field("text", stored=True)
    return sb.build()


def register_tokenizer(ix: tantivy.Index) -> None:
    """Register the whitespace tokenizer the text fields name (needed after every open)."""
    ix.register_tokenizer(TOKENIZER, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())


def _to_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _from_bytes(data: bytes | None) -> str:
    return data.decode("utf-8", "surrogateescape") if data else ""


def to_document(doc, analysed: tuple[str, str, str, str, str]) -> tantivy.Document:
    """The tantivy document of ``doc`` (an :class:`~indexerd.index.IndexDoc`) whose title,
    content and headings were analysed into ``analysed`` (title tokens, content tokens,
    identifiers, headings tokens, content pairs: each joined by single spaces;
    :func:`~indexerd.index.tantivy.offload.analyse_texts`).
    ``last_modified`` must be aware (it is converted to UTC); a ``size`` below 0 is stored as 0.
    """
    title_tokens, content_tokens, ids, heading_tokens, content_pairs = analysed
    shown = doc.content if doc.snippet_text is None else doc.snippet_text
    d = tantivy.Document()
    d.add_text("key", doc.key)
    d.add_text("source", doc.source)
    d.add_text("title", title_tokens)
    d.add_text("content", content_tokens)
    if ids:
        d.add_text("ids", ids)
    if heading_tokens:
        d.add_text("headings", heading_tokens)
    if content_pairs:
        d.add_text("content_pairs", content_pairs)
    d.add_text("media_type", doc.media_type or "")
    d.add_text("date_source", doc.date_source or "")
    d.add_date("last_modified", doc.last_modified.astimezone(UTC))
    d.add_unsigned("size", max(0, int(doc.size)))
    d.add_bytes("title_s", _to_bytes(doc.title))
    if doc.path is not None:
        d.add_bytes("path_s", _to_bytes(doc.path))
    d.add_bytes("text", shown.encode("utf-8", "replace")[:SNIPPET_TEXT_CAP_BYTES])
    return d


def queued_bytes(doc, analysed: tuple[str, str, str, str, str]) -> int:
    """About how many bytes :func:`to_document`'s document of ``doc`` holds (its texts' UTF-8
    lengths, the stored text at most ``SNIPPET_TEXT_CAP_BYTES``; counted as code points)."""
    shown = doc.content if doc.snippet_text is None else doc.snippet_text
    return (sum(map(len, analysed)) + min(len(shown), SNIPPET_TEXT_CAP_BYTES) + len(doc.key)
            + len(doc.title) + len(doc.path or "") + 64)


def stored_fields(d: tantivy.Document) -> dict[str, Any]:
    """The stored fields of a document as plain values: ``key``, ``source``, ``title``, ``path``
    (None when the document has none), ``last_modified`` (aware UTC), ``date_source``,
    ``media_type``, ``size`` and ``text`` (the snippet text)."""
    f = d.to_dict()

    def first(name: str, default=None):
        values = f.get(name)
        return values[0] if values else default

    lm = first("last_modified")
    if isinstance(lm, datetime):
        lm = lm.replace(tzinfo=UTC) if lm.tzinfo is None else lm.astimezone(UTC)
    text = first("text")
    path = first("path_s")
    return {
        "key": first("key", ""),
        "source": first("source", ""),
        "title": _from_bytes(first("title_s")),
        "path": None if path is None else _from_bytes(path),
        "last_modified": lm,
        "date_source": first("date_source") or None,
        "media_type": first("media_type") or None,
        "size": first("size", 0),
        "text": text.decode("utf-8", "replace") if text else "",
    }
