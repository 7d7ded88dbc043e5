"""Document bytes + media type -> title, visible text, meta tags and links (pure functions).

The public entry is :func:`extract`, which returns an :class:`Extracted`. It decides the media
type (:mod:`.sniff`), then hands the bytes to the extractor :data:`EXTRACTORS` names for that
type; each extractor decodes (:mod:`.decode`) and parses its format:

- :mod:`.html` -- HTML through lexbor's DOM; large pages through :mod:`.htmlstream`, a
  streaming parser; what both share is in :mod:`.htmlpage`; :mod:`.maincontent` finds the
  main content, :mod:`.titles` titles plain text.
- :mod:`.text` -- plain text; :mod:`.markdown` -- Markdown; :mod:`.jsontext` -- JSON and
  JSON Lines (the standard library's ``json``: strings, keys and numbers; a large document in
  a worker process); :mod:`.pdf` -- PDF (pypdf, parsed
  in a worker process with a time and memory bound, :mod:`.isolation`, as the formats of
  :mod:`.formats` but compressed files are).

Everything here takes values and returns values: no file, network or clock access, no logging,
no module state besides constant tables and two memo caches (charset labels, lexbor tag ids,
both behind ``functools.lru_cache``); PDF, large JSON and the formats of :mod:`.formats` are the exception,
sent to the worker processes of :mod:`.isolation` (the same answer for the same bytes). Every public function is safe to call from any number of
threads at once. selectolax, pypdf and charset_normalizer are imported inside the functions
that use them.  The names below are imported on first use (PEP 562), not with the package: a
process that only configures :mod:`.isolation` or reads a constant (an ``indexerd index`` where
nothing changed) loads no extractor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from indexerd.core.lazyexports import lazy_exports

if TYPE_CHECKING:
    from indexerd.extract.decode import decode_text
    from indexerd.extract.dispatch import EXTRACTORS, Extractor, extract
    from indexerd.extract.extracted import (
        DEFAULT_MAX_BYTES,
        INDEXABLE_TYPES,
        MEDIA_HTML,
        MEDIA_JSON,
        MEDIA_JSON_LINES,
        MEDIA_MARKDOWN,
        MEDIA_PDF,
        MEDIA_TEXT,
        Extracted,
        content_hash,
    )
    from indexerd.extract.htmlpage import parse_refresh
    from indexerd.extract.sniff import guess_media_type

#: each name of the interface -> the module defining it
_HOME = {**dict.fromkeys(("EXTRACTORS", "Extractor", "extract"), "indexerd.extract.dispatch"),
         **dict.fromkeys(("DEFAULT_MAX_BYTES", "INDEXABLE_TYPES", "MEDIA_HTML", "MEDIA_JSON", "MEDIA_JSON_LINES",
                          "MEDIA_MARKDOWN", "MEDIA_PDF", "MEDIA_TEXT", "Extracted", "content_hash"),
                         "indexerd.extract.extracted"),
         "decode_text": "indexerd.extract.decode", "parse_refresh": "indexerd.extract.htmlpage",
         "guess_media_type": "indexerd.extract.sniff"}

__all__ = [
    "DEFAULT_MAX_BYTES", "EXTRACTORS", "INDEXABLE_TYPES", "MEDIA_HTML", "MEDIA_JSON", "MEDIA_JSON_LINES",
    "MEDIA_MARKDOWN", "MEDIA_PDF",
    "MEDIA_TEXT", "Extracted", "Extractor", "content_hash", "decode_text", "extract", "guess_media_type",
    "parse_refresh",
]


__getattr__ = lazy_exports(__name__, _HOME)
