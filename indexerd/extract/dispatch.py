"""The dispatch of :func:`indexerd.extract.extract`: the media type decided (:mod:`.sniff`), the
bytes handed to the extractor :data:`EXTRACTORS` names for it (or to the isolated formats and
PDF workers)."""

from __future__ import annotations

from collections.abc import Callable

from indexerd.core.errors import SkipDocument
from indexerd.extract.extracted import (
    DEFAULT_MAX_BYTES,
    MEDIA_HTML,
    MEDIA_JSON,
    MEDIA_JSON_LINES,
    MEDIA_MARKDOWN,
    MEDIA_PDF,
    MEDIA_TEXT,
    Extracted,
)
from indexerd.extract.html import extract_html
from indexerd.extract.jsontext import extract_json, extract_json_lines
from indexerd.extract.markdown import extract_markdown
from indexerd.extract.pdf import extract_pdf
from indexerd.extract.sniff import SNIFF_BYTES, classify, parse_content_type
from indexerd.extract.formats import FORMAT_TYPES, extension_of
from indexerd.extract.text import extract_plain_text

__all__ = ["EXTRACTORS", "Extractor", "extract"]

Extractor = Callable[..., Extracted]
"""``(data, *, charset, base_url, name) -> Extracted``; raises only ``SkipDocument``."""

EXTRACTORS: dict[str, Extractor] = {
    MEDIA_HTML: extract_html,
    MEDIA_TEXT: extract_plain_text,
    MEDIA_MARKDOWN: extract_markdown,
    MEDIA_PDF: extract_pdf,
    MEDIA_JSON: extract_json,
    MEDIA_JSON_LINES: extract_json_lines,
}
"""Media type (as :func:`~indexerd.extract.sniff.classify` decides it) -> its extractor."""
#: Extractors that also take the source's size cap, ``max_bytes=``.
SIZED_TYPES = frozenset({MEDIA_PDF, MEDIA_JSON, MEDIA_JSON_LINES})


def extract(
    data: bytes,
    media_type: str | None = None,
    *,
    charset: str | None = None,
    base_url: str | None = None,
    name: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Extracted:
    """Turn one document's bytes into an :class:`Extracted`.

    Args:
        data: the whole document.
        media_type: a media type or HTTP ``Content-Type`` value (parameters allowed; its
            ``charset`` is used when ``charset`` is ``None``). It is checked against the bytes
            as in :func:`guess_media_type`; ``None`` -> guessed from ``name`` and the bytes.
        charset: the protocol's charset (HTTP ``charset`` parameter), or ``None``.
        base_url: the document's URL, for resolving relative links; ``None`` keeps them as
            written.
        name: file name, path or URL, for the extension and for error details.
        max_bytes: the source's size cap, applied to decompressed bytes (compressed files,
            Office/ODF/EPUB parts); the types of :data:`indexerd.extract.formats.FORMAT_TYPES`
            go to :func:`indexerd.extract.formats.hook.extract_format` and PDF to
            :func:`indexerd.extract.pdf.extract_pdf` (a worker process, with ``timeout`` and
            ``too-large`` as further skip reasons; the text of a PDF is bounded by it too), as
            a JSON document over :data:`~indexerd.extract.jsontext.IN_PROCESS_MAX_BYTES` to
            :func:`indexerd.extract.jsontext.extract_json`.

    Raises:
        SkipDocument: ``"empty"`` (0 bytes, whitespace only, or no title and no text, even
            when an HTML page has links; not a page with a refresh target, which is a
            redirect); ``"binary"`` (NUL bytes or many control bytes, also in a ``.html`` or
            when declared ``text/html``); ``"unsupported-type"`` (a type not in
            :data:`INDEXABLE_TYPES`); ``"parse-error"`` (a PDF pypdf cannot read, including
            one encrypted with a password); ``"timeout"`` and ``"too-large"`` as above.
            Nothing else, for any input (but :class:`~indexerd.core.errors.EnvironmentFailure`
            when no worker process can be started).

    Pure and thread-safe; HTML parsing is O(size), and links are resolved once per distinct
    ``href``.
    """
    label = name or "document"
    if not data or data.isspace():
        raise SkipDocument("empty", f"{label}: no content")
    kind, why = classify(name, data[:SNIFF_BYTES], media_type, charset)
    if kind is None:
        if why == "binary":
            raise SkipDocument(why, f"{label}: NUL or control bytes in the first 8 KiB")
        shown = parse_content_type(media_type)[0] or extension_of(name) or "unknown"
        raise SkipDocument(why, f"{label}: {shown} is not indexed")
    charset = charset or parse_content_type(media_type)[1]
    if kind in FORMAT_TYPES:
        from indexerd.extract.formats.hook import extract_format

        result = extract_format(data, kind, name=name, label=label, max_bytes=max_bytes,
                                base_url=base_url)
    elif kind in SIZED_TYPES:
        result = EXTRACTORS[kind](data, charset=charset, base_url=base_url, name=name,
                                  max_bytes=max_bytes)
    else:
        result = EXTRACTORS[kind](data, charset=charset, base_url=base_url, name=name)
    if not (result.title or result.text or result.refresh):
        raise SkipDocument("empty", f"{label}: no title and no text")
    return result
