"""EPUB 2 and 3 -> text of the spine's XHTML documents, title and date.

Read with :mod:`zipfile`: ``META-INF/container.xml`` names the package document (OPF), whose
``<spine>`` gives the reading order of the ``<manifest>`` items; each XHTML item goes through
indexerd's own HTML extraction (:func:`indexerd.extract.extract`), so a book reads as its
pages do.  ebooklib (used by the tests to write books) reads every member into memory on open,
images included; here only the spine's documents are read, each charged to the byte budget.

A manifest ``href`` is resolved against the OPF's folder and must stay inside the archive
(:func:`.bounded.safe_member_name`): ``../../etc/passwd`` is never looked up, and nothing is
ever written to disk.  Date: EPUB 3 ``<meta property="dcterms:modified">``, else the first
``dc:date`` (EPUB 2: publication or modification).
"""

from __future__ import annotations

import logging
import posixpath
from urllib.parse import unquote

from indexerd.core.errors import SkipDocument
from indexerd.extract.formats import MEDIA_EPUB, DocumentText
from indexerd.extract.formats.bounded import Archive, Budget, parse_errors, safe_member_name
from indexerd.extract.formats.xmlstream import NS_DC, child_text, one_line, parse_small

log = logging.getLogger(__name__)

NS_CONTAINER = "urn:oasis:names:tc:opendocument:xmlns:container"
NS_OPF = "http://www.idpf.org/2007/opf"
_XHTML_TYPES = frozenset({"application/xhtml+xml", "text/html", "application/x-dtbook+xml"})
#: Spine items read at most (a real book has tens to a few hundred).
MAX_SPINE_ITEMS = 5000


def extract_epub(data: bytes, media_type: str, label: str, max_bytes: int) -> DocumentText:
    """Extract one EPUB (see the module docstring).

    Raises:
        SkipDocument: ``too-large`` (more than ``max_bytes`` of documents once inflated, or
            more than :data:`MAX_SPINE_ITEMS`) or ``parse-error`` (not a ZIP, no container
            or package document, malformed XML).
    """
    archive = Archive(data, Budget(max_bytes, label))
    for refused in archive.refused:
        log.info("%s: member %r is outside the archive; not read", label, refused)
    with parse_errors(label):
        opf_path = _package_path(archive, label)
        opf = parse_small(archive.read(opf_path))
        base = posixpath.dirname(opf_path)
        manifest = {}
        for item in opf.iter(f"{{{NS_OPF}}}item"):
            manifest[item.get("id")] = (item.get("href") or "", item.get("media-type") or "")
        spine = [ref.get("idref") for ref in opf.iter(f"{{{NS_OPF}}}itemref")]
        if len(spine) > MAX_SPINE_ITEMS:
            raise SkipDocument("too-large", f"{label}: {len(spine)} spine items > {MAX_SPINE_ITEMS}")
        texts = [_document_text(archive, base, manifest.get(idref), label) for idref in spine]
        title = child_text(opf, NS_DC, "title")
        creator = child_text(opf, NS_DC, "creator")
        modified = None
        for meta in opf.iter(f"{{{NS_OPF}}}meta"):
            if meta.get("property") == "dcterms:modified" and (meta.text or "").strip():
                modified = ("dcterms:modified", meta.text.strip())
                break
        if modified is None and (date := child_text(opf, NS_DC, "date")):
            modified = ("dc:date", date)
    text = "\n".join(t for t in texts if t)
    meta_fields = (("author", one_line(creator)),) if creator else ()
    return DocumentText(one_line(title), text, MEDIA_EPUB, modified[0] if modified else None,
                        modified[1] if modified else None, meta_fields)


def _package_path(archive: Archive, label: str) -> str:
    if archive.has("META-INF/container.xml"):
        root = parse_small(archive.read("META-INF/container.xml"))
        for rootfile in root.iter(f"{{{NS_CONTAINER}}}rootfile"):
            path = safe_member_name(unquote(rootfile.get("full-path") or ""))
            if path and archive.has(path):
                return path
    opfs = [n for n in archive.names() if n.lower().endswith(".opf")]
    if not opfs:
        raise SkipDocument("parse-error", f"{label}: no package document (.opf)")
    return opfs[0]


def _document_text(archive: Archive, base: str, item: tuple[str, str] | None, label: str) -> str:
    """The text of one spine item, ``""`` when it is missing, not XHTML or outside the archive."""
    from indexerd.extract import extract

    if item is None:
        return ""
    href, media = item
    if media and media not in _XHTML_TYPES:
        return ""
    path = safe_member_name(posixpath.join(base, unquote(href.partition("#")[0])))
    if path is None or not archive.has(path):
        log.info("%s: spine item %r is missing or outside the archive; not read", label, href)
        return ""
    body = archive.read(path)
    try:
        extracted = extract(body, "text/html", name=path)
    except SkipDocument:  # an empty or binary chapter: the rest of the book still counts
        return ""
    return "\n".join(t for t in (extracted.title, extracted.text) if t)
