"""The dispatch from :func:`indexerd.extract.extract` to the formats of this package: compressed
files are decompressed here and their inner document extracted again; the others go to a
worker process (:mod:`indexerd.extract.isolation`).  The result is an ordinary
:class:`~indexerd.extract.Extracted` whose ``document_date`` carries the document's own date.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

from indexerd.core.errors import SkipDocument
from indexerd.extract.formats import COMPRESSED_TYPES, DocumentText, format_of
from indexerd.extract.formats.compressed import decompress, inner_name

if TYPE_CHECKING:
    from indexerd.extract import Extracted

#: Titles taken from a first line are cut here (as for plain text).
LINE_TITLE_MAX_CHARS = 200


def extract_format(data: bytes, kind: str, *, name: str | None, label: str, max_bytes: int,
                   base_url: str | None) -> Extracted:
    """Extract a document of one of :data:`indexerd.extract.formats.FORMAT_TYPES`.

    Raises:
        SkipDocument: ``too-large``, ``parse-error``, ``timeout``, ``empty``, and for a
            compressed file whatever its inner document raises; a compressed file inside a
            compressed file is ``unsupported-type`` (a gzip quine would never end); the
            decompression, in this process, has the workers' time bound (``timeout``).
    """
    from indexerd.extract import extract
    from indexerd.extract.isolation import default_pool

    if kind in COMPRESSED_TYPES:
        inner = decompress(data, kind, label, max_bytes,
                           timeout_seconds=default_pool().limits.timeout_seconds)
        inner_file = inner_name(name, kind)
        if format_of(inner_file, inner[:8192], "") in COMPRESSED_TYPES:
            raise SkipDocument("unsupported-type", f"{label}: compressed twice")
        return extract(inner, None, name=inner_file, base_url=base_url, max_bytes=max_bytes)
    if len(data) > max_bytes:
        raise SkipDocument("too-large", f"{label}: {len(data)} bytes > max_size {max_bytes}")
    return to_extracted(default_pool().extract(kind, data, label, max_bytes))


def to_extracted(doc: DocumentText) -> Extracted:
    """A worker's :class:`DocumentText` as an :class:`~indexerd.extract.Extracted` (no links;
    the title falls back to the first line of text)."""
    from indexerd.extract import Extracted

    title = doc.title or doc.text.partition("\n")[0].strip()[:LINE_TITLE_MAX_CHARS]
    meta = {f"document:{key}": value for key, value in doc.meta}
    document_date = (doc.date_property, doc.date_value) if doc.date_property and doc.date_value \
        else None
    if not (title or doc.text):
        raise SkipDocument("empty", "no title and no text")
    return Extracted(title=title, text=doc.text, media_type=doc.media_type, encoding=None,
                     meta=MappingProxyType(meta), links=(), canonical=None,
                     noindex=False, nofollow=False, document_date=document_date)
