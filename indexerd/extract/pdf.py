"""PDF through pypdf: text by page, the title from /Title or the first line, /ModDate as UTC.

Outside contract relied on: **pypdf 7.1** (https://github.com/py-pdf/pypdf). ``PdfReader`` raises
many exception types on damaged files; all of them become ``SkipDocument("parse-error")``.
``metadata.modification_date`` is aware when the PDF date has a zone. pypdf is imported inside
the function that uses it. Pure and thread-safe.
"""

from __future__ import annotations

import logging
from datetime import timezone
from types import MappingProxyType
from typing import TYPE_CHECKING

from indexerd.core.errors import SkipDocument
from indexerd.extract.extracted import LINE_TITLE_MAX_CHARS, MEDIA_PDF, Extracted, text_document
from indexerd.extract.text import collapse_lines

if TYPE_CHECKING:
    from pypdf import DocumentInformation

# pypdf warns about every damaged font or stream it reads past (lines of 400+ characters, many
# per file): what it could not read shows as the document's verdict, so only its errors are logged
logging.getLogger("pypdf").setLevel(logging.ERROR)


def extract_pdf(data: bytes, *, charset: str | None, base_url: str | None,
                name: str | None) -> Extracted:
    """A PDF -> :class:`Extracted`: the pages' text, one line per text line; the title from
    /Title, else the first line; ``meta`` holds ``"pdf:title"`` and ``"pdf:moddate"``
    (``2023-05-01T10:00:00Z``) when present. ``charset`` and ``base_url`` are unused; ``name``
    goes in error details.

    Raises:
        SkipDocument: ``"parse-error"`` when pypdf cannot read the file, or it is encrypted
            with a password.
    """
    import io

    from pypdf import PdfReader

    label = name or "document"
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise SkipDocument("parse-error", f"{label}: encrypted with a password")
        pages = [page.extract_text() or "" for page in reader.pages]
        info = reader.metadata
    except SkipDocument:
        raise
    except Exception as exc:  # pypdf on a damaged file raises many types; all mean "unreadable"
        raise SkipDocument("parse-error", f"{label}: {type(exc).__name__}: {exc}") from exc
    text = collapse_lines(_scrub("\n".join(pages)))
    meta: dict[str, str] = {}
    pdf_title, moddate = _pdf_info(info)
    if pdf_title:
        meta["pdf:title"] = pdf_title
    if moddate:
        meta["pdf:moddate"] = moddate
    title = pdf_title[:LINE_TITLE_MAX_CHARS] or text.partition("\n")[0][:LINE_TITLE_MAX_CHARS]
    return text_document(title, text, MEDIA_PDF, None, MappingProxyType(meta))


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
