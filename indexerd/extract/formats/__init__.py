"""Document formats beyond HTML, text, Markdown and PDF: what they are called and how to tell them.

The families, one module each:

- :mod:`.compressed` -- single compressed files (``.gz``, ``.bz2``, ``.xz``, ``.zst``): the
  inner document is indexed under the file's key, its type taken from the inner name.
- :mod:`.ooxml` -- Office Open XML (``.docx``, ``.xlsx``, ``.pptx``).
- :mod:`.odf` -- OpenDocument (``.odt``, ``.ods``, ``.odp``).
- :mod:`.epub` -- EPUB 2 and 3.
- :mod:`.rtf` -- Rich Text Format.
- :mod:`.mail` -- one message (``.eml``) and mbox mailboxes.
- :mod:`.svg` -- SVG images' titles, descriptions and text labels.
- :mod:`.postscript` -- PostScript and EPS, the text of their pages through Ghostscript.

Every extractor but the decompressor runs in a worker process with a time and memory bound
(:mod:`indexerd.extract.isolation`), as PDF's does (:mod:`indexerd.extract.pdf`); all of them take the document's bytes and a byte budget
(the source's ``max_size``, counted on decompressed bytes) and return a :class:`DocumentText`,
or raise :class:`~indexerd.core.errors.SkipDocument` with ``too-large`` or ``parse-error``.

Importing this module costs only the standard library; each family imports its libraries
when first used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MEDIA_DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
MEDIA_XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
MEDIA_PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
MEDIA_ODT = "application/vnd.oasis.opendocument.text"
MEDIA_ODS = "application/vnd.oasis.opendocument.spreadsheet"
MEDIA_ODP = "application/vnd.oasis.opendocument.presentation"
MEDIA_EPUB = "application/epub+zip"
MEDIA_RTF = "application/rtf"
MEDIA_EML = "message/rfc822"
MEDIA_MBOX = "application/mbox"
MEDIA_GZIP = "application/gzip"
MEDIA_BZIP2 = "application/x-bzip2"
MEDIA_XZ = "application/x-xz"
MEDIA_ZSTD = "application/zstd"
MEDIA_SVG = "image/svg+xml"
MEDIA_POSTSCRIPT = "application/postscript"

#: Parsed in a worker process (:mod:`indexerd.extract.isolation`); PDF is too, though it is not
#: in this family (``indexerd.extract.pdf``, its own meta and sniffing).
ISOLATED_TYPES: frozenset[str] = frozenset({
    MEDIA_DOCX, MEDIA_XLSX, MEDIA_PPTX, MEDIA_ODT, MEDIA_ODS, MEDIA_ODP, MEDIA_EPUB, MEDIA_RTF,
    MEDIA_EML, MEDIA_MBOX, MEDIA_SVG, MEDIA_POSTSCRIPT})
#: Decompressed in process (bounded streaming decompression), then extracted as the inner type.
COMPRESSED_TYPES: frozenset[str] = frozenset({MEDIA_GZIP, MEDIA_BZIP2, MEDIA_XZ, MEDIA_ZSTD})
FORMAT_TYPES: frozenset[str] = ISOLATED_TYPES | COMPRESSED_TYPES

EXTENSION_TYPES: dict[str, str] = {
    ".docx": MEDIA_DOCX, ".docm": MEDIA_DOCX, ".xlsx": MEDIA_XLSX, ".xlsm": MEDIA_XLSX,
    ".pptx": MEDIA_PPTX, ".pptm": MEDIA_PPTX, ".odt": MEDIA_ODT, ".ods": MEDIA_ODS,
    ".odp": MEDIA_ODP, ".epub": MEDIA_EPUB, ".rtf": MEDIA_RTF, ".eml": MEDIA_EML,
    ".mbox": MEDIA_MBOX, ".mbx": MEDIA_MBOX, ".gz": MEDIA_GZIP, ".bz2": MEDIA_BZIP2,
    ".xz": MEDIA_XZ, ".zst": MEDIA_ZSTD, ".svg": MEDIA_SVG, ".ps": MEDIA_POSTSCRIPT,
    ".eps": MEDIA_POSTSCRIPT,
}
DECLARED_TYPES: dict[str, str] = {
    **{t: t for t in FORMAT_TYPES},
    "text/rtf": MEDIA_RTF, "application/x-rtf": MEDIA_RTF, "application/x-gzip": MEDIA_GZIP,
    "application/x-bzip": MEDIA_BZIP2, "application/x-xz": MEDIA_XZ,
    "application/x-zstd": MEDIA_ZSTD, "application/x-mbox": MEDIA_MBOX,
    "application/eps": MEDIA_POSTSCRIPT, "application/x-eps": MEDIA_POSTSCRIPT,
    "image/eps": MEDIA_POSTSCRIPT, "image/x-eps": MEDIA_POSTSCRIPT,
}
#: File names that are mailboxes whatever their extension (mutt, Thunderbird's local folders
#: have none; these are the common ones).
MBOX_NAMES = frozenset({"mbox", "inbox", "sent", "mbox.txt"})

_MAGIC = ((b"\x1f\x8b", MEDIA_GZIP), (b"BZh", MEDIA_BZIP2), (b"\xfd7zXZ\x00", MEDIA_XZ),
          (b"\x28\xb5\x2f\xfd", MEDIA_ZSTD), (b"{\\rtf", MEDIA_RTF), (b"%!PS", MEDIA_POSTSCRIPT))
#: An mbox "From_" line: ``From sender Tue Dec  1 10:00:00 2026`` (asctime date, RFC 4155).
_FROM_LINE = re.compile(rb"From \S+ +[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]?\d \d\d:\d\d(:\d\d)? ")
_ZIP_MIMETYPES = {MEDIA_ODT: MEDIA_ODT, MEDIA_ODS: MEDIA_ODS, MEDIA_ODP: MEDIA_ODP,
                  MEDIA_EPUB: MEDIA_EPUB}


@dataclass(frozen=True, slots=True)
class DocumentText:
    """What a format extractor gives back (crosses the worker boundary as plain values).

    Attributes:
        title: the document's own title (core properties, ``dc:title``, mail ``Subject:``),
            one line; ``""`` when it has none (the caller then takes the first line of text).
        text: visible text, one ``"\\n"`` between paragraphs, cells, slides and messages.
        media_type: one of :data:`FORMAT_TYPES`, or ``application/pdf`` (``indexerd.extract.pdf``).
        date_property: the name of the document's own date field that ``date_value`` came
            from (``dcterms:modified``, ``dc:date``, ``Date``), or ``None``.
        date_value: its raw text as written in the document, or ``None``; the date chain
            parses and checks it (:mod:`indexerd.core.datechain`).
        meta: a few named fields for the log and searches (``author``, ``from``, ``subject``).
    """

    title: str
    text: str
    media_type: str
    date_property: str | None = None
    date_value: str | None = None
    meta: tuple[tuple[str, str], ...] = ()


def extension_of(name: str | None) -> str:
    """The lower-cased extension of the last path segment (``".gz"``, ``".html"``), or ``""``;
    a URL's query and fragment are not part of it."""
    if not name:
        return ""
    if "://" in name:
        name = name.partition("#")[0].partition("?")[0]
    segment = name.replace("\\", "/").rpartition("/")[2]
    dot = segment.rfind(".")
    return segment[dot:].lower() if dot > 0 else ""


def format_of(name: str | None, head: bytes, declared_type: str, *, sniff: bool = True) -> str | None:
    """Which of :data:`FORMAT_TYPES` a document is, or ``None`` when it is none of them.

    Args:
        name: a file name, path or URL (its last segment's extension is used), or ``None``.
        head: the document's first bytes (8 KiB are plenty; ``b""`` when unknown, as for a
            HEAD request).
        declared_type: the lower-cased HTTP media type without parameters (``""`` or a
            generic type such as ``application/octet-stream`` when unknown).
        sniff: look at the bytes when neither the declared type nor the name tells (False for
            names whose extension already says what they are: ``.png``, ``.txt``).

    Order: a declared type of this family; else the extension (``.docx``, ``.gz`` ...; not
    ``.tar.gz`` and the like, archives are not documents) or a
    mailbox file name (``mbox``); else the bytes: compression magic numbers, ``{\\rtf``,
    ``%!PS`` (PostScript's first line, Adobe's Document Structuring Conventions), a ZIP
    whose first member is an ODF or EPUB ``mimetype``, a ZIP with ``[Content_Types].xml``
    and a ``word/``, ``xl/`` or ``ppt/`` member, an mbox ``From_`` line. Never raises.
    """
    if declared_type in DECLARED_TYPES:
        return DECLARED_TYPES[declared_type]
    if declared_type and declared_type not in _GENERIC:
        return None
    extension = extension_of(name)
    found = EXTENSION_TYPES.get(extension)
    if found in COMPRESSED_TYPES and extension_of((name or "")[: -len(extension)]) == ".tar":
        return None  # a tar archive (``x.tar.gz``): not a document
    if found is not None:
        return found
    base = (name or "").replace("\\", "/").rpartition("/")[2].lower()
    if base in MBOX_NAMES and (not head or _FROM_LINE.match(head)):
        return MEDIA_MBOX
    return sniff_bytes(head) if sniff else None


_GENERIC = frozenset({"", "application/octet-stream", "binary/octet-stream", "application/unknown",
                      "*/*", "application/x-unknown", "unknown/unknown", "application/zip",
                      "application/x-zip-compressed"})


def sniff_bytes(head: bytes) -> str | None:
    """The format the leading bytes show (see :func:`format_of`), or ``None``."""
    for magic, media in _MAGIC:
        if head.startswith(magic):
            return media
    if head.startswith(b"PK\x03\x04"):
        # ODF and EPUB: the first member is "mimetype", stored, holding the media type
        if head[30:38] == b"mimetype":
            declared = head[38:38 + 80].split(b"PK", 1)[0].decode("ascii", "replace").strip()
            for media in _ZIP_MIMETYPES:
                if declared.startswith(media):
                    return media
        if b"[Content_Types].xml" in head:
            for marker, media in ((b"word/", MEDIA_DOCX), (b"xl/", MEDIA_XLSX), (b"ppt/", MEDIA_PPTX)):
                if marker in head:
                    return media
        return None
    if _FROM_LINE.match(head) and re.search(rb"\n(From|Date|Subject|Message-ID): ", head[:4096], re.I):
        return MEDIA_MBOX
    return None


def is_zip(data: bytes) -> bool:
    """True when ``data`` starts like a ZIP archive (local file header)."""
    return data.startswith(b"PK\x03\x04")

