"""PDF through pypdf, in an extraction worker: text by page, the title from /Title or the first
line, /ModDate as UTC.

Two halves: :func:`read_pdf` parses (pypdf), run by :mod:`indexerd.extract.worker` in a worker
process with the time and memory bounds of :mod:`indexerd.extract.isolation` (a 332 KB PDF of
2,000 pages sharing one content stream of 1.65 M tokens costs pypdf ~60 s a page); and
:func:`extract_pdf`, called by :func:`indexerd.extract.extract` in the daemon, sends the bytes
to the worker pool and turns the answer into an :class:`Extracted`.

Outside contract relied on: **pypdf 7.1** (https://github.com/py-pdf/pypdf). ``PdfReader`` raises
many exception types on damaged files; all of them become ``SkipDocument("parse-error")``.
``metadata.modification_date`` is aware when the PDF date has a zone. pypdf is imported inside
the function that uses it (the worker imports it before its memory bound is set).
"""

from __future__ import annotations

import logging
from datetime import timezone
from types import MappingProxyType
from typing import TYPE_CHECKING

from indexerd.core.errors import SkipDocument
from indexerd.extract.extracted import (
    DEFAULT_MAX_BYTES,
    LINE_TITLE_MAX_CHARS,
    MEDIA_PDF,
    Extracted,
    text_document,
)
from indexerd.extract.formats import DocumentText
from indexerd.extract.whitespace import collapse_lines

if TYPE_CHECKING:
    from pypdf import DocumentInformation

# pypdf warns about every damaged font or stream it reads past (lines of 400+ characters, many
# per file): what it could not read shows as the document's verdict, so only its errors are logged
logging.getLogger("pypdf").setLevel(logging.ERROR)


def extract_pdf(data: bytes, *, charset: str | None, base_url: str | None,
                name: str | None, max_bytes: int = DEFAULT_MAX_BYTES) -> Extracted:
    """A PDF -> :class:`Extracted`, parsed in an extraction worker (:func:`read_pdf`): the
    pages' text, one line per text line; the title from /Title, else the first line; ``meta``
    holds ``"pdf:title"`` and ``"pdf:moddate"`` (``2023-05-01T10:00:00Z``) when present, for
    the meta map (``document_date`` stays None). ``charset`` and ``base_url`` are unused;
    ``name`` goes in error details; ``max_bytes`` (the source's ``max_size``) bounds the file
    and its text (UTF-8 bytes).

    Raises:
        SkipDocument: ``"parse-error"`` when pypdf cannot read the file, or it is encrypted
            with a password, or the worker died; ``"too-large"`` (the file or its text over
            ``max_bytes``, or the worker's memory bound); ``"timeout"`` (the workers' time
            bound, 60 s by default).
        EnvironmentFailure: no worker could be started.
    """
    from indexerd.extract.isolation import default_pool

    label = name or "document"
    if len(data) > max_bytes:
        raise SkipDocument("too-large", f"{label}: {len(data)} bytes > max_size {max_bytes}")
    doc = default_pool().extract(MEDIA_PDF, data, label, max_bytes)
    return text_document(doc.title, doc.text, MEDIA_PDF, None, MappingProxyType(dict(doc.meta)))


def read_pdf(data: bytes, media_type: str, label: str, max_bytes: int) -> DocumentText:
    """Parse a PDF (the worker's half of :func:`extract_pdf`; the signature of
    :data:`indexerd.extract.worker.EXTRACTORS`): ``title`` is /Title (cut at
    :data:`LINE_TITLE_MAX_CHARS`) else the first line; ``meta`` the pairs ``("pdf:title", ...)``
    and ``("pdf:moddate", ...)`` present. ``media_type`` is :data:`MEDIA_PDF`. Pure.

    Raises:
        SkipDocument: ``"parse-error"`` (unreadable, or encrypted with a password);
            ``"too-large"`` once the pages' text passes ``max_bytes`` (UTF-8 bytes; the
            pages after are not read).
        MemoryError: from pypdf (the worker's memory bound).
    """
    import io

    from pypdf import PdfReader

    pages: list[str] = []
    left = max_bytes
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise SkipDocument("parse-error", f"{label}: encrypted with a password")
        for page in reader.pages:
            pages.append(_scrub(page.extract_text() or ""))
            left -= len(pages[-1].encode("utf-8")) + 1
            if left < 0:
                raise SkipDocument("too-large", f"{label}: more than max_size {max_bytes} "
                                                "bytes of text")
        info = reader.metadata
    except (SkipDocument, MemoryError):
        raise
    except Exception as exc:  # pypdf on a damaged file raises many types; all mean "unreadable"
        raise SkipDocument("parse-error", f"{label}: {type(exc).__name__}: {exc}") from exc
    text = collapse_lines("\n".join(pages))
    meta: list[tuple[str, str]] = []
    pdf_title, moddate = _pdf_info(info)
    if pdf_title:
        meta.append(("pdf:title", pdf_title))
    if moddate:
        meta.append(("pdf:moddate", moddate))
    title = pdf_title[:LINE_TITLE_MAX_CHARS] or text.partition("\n")[0][:LINE_TITLE_MAX_CHARS]
    return DocumentText(title, text, MEDIA_PDF, meta=tuple(meta))


def _pdf_info(info: DocumentInformation | None) -> tuple[str, str | None]:
    """(/Title with whitespace collapsed or ``""``, /ModDate as ``2023-05-01T10:00:00Z`` or None).

    A naive date (the PDF gave no zone) is taken as UTC. A malformed field is treated as absent.
    """
    if info is None:
        return "", None
    try:
        title = info.title
    except Exception:  # pypdf resolves the field lazily, from a possibly damaged file
        title = None
    title = " ".join(_scrub(title).split()) if isinstance(title, str) else ""
    try:
        moment = info.modification_date  # ValueError "Can not convert date: garbage"
        if moment is not None and moment.tzinfo is not None:
            moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
        moddate = moment.isoformat(timespec="seconds") + "Z" if moment is not None else None
    except Exception:  # as above; also OverflowError for year-1 dates east of UTC
        moddate = None
    return title, moddate


def _scrub(text: str) -> str:
    """Drop NULs and replace lone surrogates, which pypdf can produce from broken font maps."""
    text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text
