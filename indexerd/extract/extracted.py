"""What extraction yields: the media types indexed, :class:`Extracted`, and the content hash.

Values only: importing this module costs the standard library.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from indexerd.extract.formats import FORMAT_TYPES
from indexerd.extract.whitespace import collapse_lines

MEDIA_HTML = "text/html"
MEDIA_TEXT = "text/plain"
MEDIA_MARKDOWN = "text/markdown"
MEDIA_PDF = "application/pdf"
MEDIA_JSON = "application/json"
MEDIA_JSON_LINES = "application/x-ndjson"
"""JSON Lines (https://jsonlines.org), also called NDJSON; no media type is registered for it,
``application/x-ndjson`` is the one servers send most."""
INDEXABLE_TYPES: frozenset[str] = frozenset({MEDIA_HTML, MEDIA_TEXT, MEDIA_MARKDOWN, MEDIA_PDF,
                                             MEDIA_JSON, MEDIA_JSON_LINES}) | FORMAT_TYPES

DEFAULT_MAX_BYTES = 20 * 1000 * 1000
"""The size cap of extraction when the caller gives none (the config's default ``max_size``);
for compressed files and containers it applies to the decompressed bytes."""

TITLE_MAX_CHARS = 300
"""HTML titles are cut here (an unclosed ``<title>`` swallows the rest of the document)."""

LINE_TITLE_MAX_CHARS = 200
"""Titles taken from a first line (plain text, Markdown, PDF without /Title) are cut here."""


@dataclass(frozen=True, slots=True)
class Extracted:
    """What one document yields for the index and the crawler.

    Attributes:
        title: one line, whitespace collapsed; ``""`` when none was found.
        text: visible text; runs of whitespace collapsed to one space inside a block, one
            ``"\\n"`` between blocks (HTML block elements, non-empty lines of text, PDF lines).
            The HTML ``<title>`` is not repeated in it.
        media_type: one of :data:`INDEXABLE_TYPES`.
        encoding: the Python codec name actually used to decode (``"utf-8"``, ``"cp1252"``,
            ``"utf-16-le"`` ...); ``None`` for PDF.
        meta: read-only; HTML: lower-cased ``<meta name|http-equiv|property>`` -> stripped
            ``content``, first occurrence wins. PDF: ``"pdf:title"`` and ``"pdf:moddate"``
            (ISO 8601 UTC, ``2023-05-01T10:00:00Z``) when present.
        links: HTML only: ``a[href]``, ``area[href]``, ``frame[src]``, ``iframe[src]`` in document
            order, de-duplicated, resolved against ``<base href>`` (itself resolved against
            ``base_url``) else ``base_url``; kept as written when there is no base. ``javascript:``,
            ``mailto:`` and ``data:`` links are dropped. Not canonicalised (the crawler does that).
            A ``<meta http-equiv=refresh>`` target comes last.
        canonical: ``<link rel=canonical href>`` resolved the same way, else ``None``.
        noindex: a ``<meta name=robots|indexerd>`` says ``noindex`` or ``none``.
        nofollow: a ``<meta name=robots|indexerd>`` says ``nofollow`` or ``none``.
        refresh: HTML only: ``<meta http-equiv=refresh>`` naming a URL, as ``(delay in whole
            seconds, URL resolved like the links)`` (:func:`indexerd.extract.parse_refresh`);
            ``None`` when there is none or it only reloads the page.  :attr:`redirect` says
            whether it is a redirect.
        main_text: HTML only: the text of the page's main content, collapsed like ``text`` (a
            part of it): the first ``<main>`` or ``role=main`` element (HTML Living Standard
            §4.4.14; WAI-ARIA 1.2 ``main`` role), else the only ``<article>``, else the body
            without its navigation landmarks (``nav``, ARIA navigation/banner/contentinfo/search,
            a page-level header or footer, DocBook's navheader/navfooter); ``None`` when the
            page has none of these, it is empty, or the page went through the streaming parser.
            Snippets are taken from it; the whole ``text`` stays searchable.
        headings: the section headings, one a line, in document order: an HTML page's
            ``h1``-``h6`` (those of the main content, as ``main_text``, when the page has one;
            the DOM path only; every visible one through the streaming parser), a Markdown
            file's ATX and setext headings; ``None`` for other types or when there is none.
        document_date: the document's own date as ``(property, raw text)`` -- Office core
            ``dcterms:modified``, OpenDocument ``dc:date``, EPUB ``dcterms:modified`` or
            ``dc:date``, mail ``Date``, RTF ``revtim`` (:mod:`indexerd.extract.formats`) -- for
            the date chain's ``document`` source; ``None`` for the other types.
        notes: what the extractor could not read as its format and indexed otherwise, one
            sentence each (a malformed JSON document: ``"not JSON (Expecting ',' delimiter:
            line 3 column 5); indexed as raw text"``); the pipeline logs them.  ``()`` mostly.

    Instances are immutable and safe to share between threads. ``meta`` is left out of
    ``hash()`` (a mapping is not hashable) but not out of ``==``.
    """

    title: str
    text: str
    media_type: str
    encoding: str | None
    meta: Mapping[str, str] = field(hash=False)
    links: tuple[str, ...]
    canonical: str | None
    noindex: bool
    nofollow: bool
    refresh: tuple[int, str] | None = None
    main_text: str | None = None
    document_date: tuple[str, str] | None = None
    headings: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def redirect(self) -> str | None:
        """The refresh target when the page is an HTML-level redirect, else None.

        A redirect is an instant refresh (delay 0: the reader never sees the page, and
        "Redirecting..." stubs carry a line of text) or a refresh on a page without text of its
        own; a page with text and a slower refresh is a document, and its target one more link.
        """
        if self.refresh is None or (self.refresh[0] > 0 and self.text):
            return None
        return self.refresh[1]


def text_document(title: str, text: str, media_type: str, codec: str | None,
                  meta: Mapping[str, str] = MappingProxyType({})) -> Extracted:
    """An :class:`Extracted` without links, canonical or robots flags (text, Markdown, PDF)."""
    return Extracted(title=title, text=text, media_type=media_type, encoding=codec, meta=meta,
                     links=(), canonical=None, noindex=False, nofollow=False)


def content_hash(title: str, text: str) -> str:
    """Return the SHA-256 hex digest (64 lower-case chars) of ``title + "\\x00" + text``, the
    text's white space collapsed (:func:`~indexerd.extract.whitespace.collapse_lines`).

    The re-index decision compares this digest: pass the ``title`` and ``text`` of an
    :class:`Extracted`.  Its lines' layout (indentation, blank lines, a ``<pre>`` block's lines)
    does not count: a document whose words are the same has the same digest, as it had before
    extracted text kept its layout. Because only visible text and
    the title go in, a rotating nonce in a ``<script>``, a session id in a link ``href`` or an
    ad id in an attribute does not change it; one changed visible word does. Never raises
    (lone surrogates are hashed as they are). Thread-safe.
    """
    digest = hashlib.sha256(title.encode("utf-8", "surrogatepass"))
    digest.update(b"\x00")
    digest.update(collapse_lines(text).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()
