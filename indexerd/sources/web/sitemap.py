"""Parse sitemaps (sitemaps.org protocol 0.9): page URLs from ``<urlset>``, child sitemaps from
``<sitemapindex>``.

Hostile input is expected (sitemaps come from the network): gzip is decompressed in bounded
chunks, the XML is parsed incrementally with expat (so memory stays bounded and parsing stops
after ``max_entries``), and any DOCTYPE or ENTITY declaration is refused outright, which rules out
entity-expansion bombs ("billion laughs") and external entities.  Only ``<loc>`` and
``<lastmod>`` are kept, as written; dates are parsed elsewhere.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from xml.parsers import expat

_CHUNK = 256 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
_ROOTS = {"urlset": "url", "sitemapindex": "sitemap"}


@dataclass(frozen=True)
class SitemapEntry:
    """One ``<url>`` or ``<sitemap>`` entry.

    Attributes:
        loc: the ``<loc>`` text as written (entities decoded, surrounding white space stripped),
            not canonicalised.
        lastmod: the ``<lastmod>`` text as written, stripped (any W3C Datetime variant, or junk);
            None when absent or empty.
        changefreq: the ``<changefreq>`` text as written, stripped (``daily`` ...); None when
            absent or empty (``<url>`` entries only).
    """

    loc: str
    lastmod: str | None = None
    changefreq: str | None = None


class _Stop(Exception):
    """Raised inside expat handlers to stop parsing once max_entries entries were read."""


def _chunks(data: bytes, max_bytes: int) -> Iterator[bytes]:
    """Yield the document bytes in chunks, gunzipping when ``data`` starts with the gzip magic.

    Raises ValueError when the (decompressed) document exceeds ``max_bytes`` bytes, or for
    corrupt or truncated gzip data.  Concatenated gzip members are read as one stream.
    """
    if data[:2] != _GZIP_MAGIC:
        if len(data) > max_bytes:
            raise ValueError(f"sitemap larger than {max_bytes} bytes")
        for i in range(0, len(data), _CHUNK):
            yield data[i:i + _CHUNK]
        return
    total = 0
    buf = data
    while buf:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            while not d.eof:
                out = d.decompress(buf, _CHUNK)  # never more than _CHUNK bytes at once
                buf = d.unconsumed_tail
                total += len(out)
                if total > max_bytes:
                    raise ValueError(f"sitemap larger than {max_bytes} bytes (decompressed)")
                if out:
                    yield out
                elif not buf:
                    raise ValueError("not a sitemap: truncated gzip data")
        except zlib.error as e:
            raise ValueError(f"not a sitemap: bad gzip data ({e})") from None
        buf = d.unused_data
        if buf[:2] != _GZIP_MAGIC:  # trailing padding or junk after the last member: ignored
            return


def parse_sitemap(data: bytes, *, max_entries: int = 50_000, max_bytes: int = 50 * 1024 * 1024
                  ) -> tuple[list[SitemapEntry], list[SitemapEntry]]:
    """Parse one sitemap document.

    Args:
        data: the response body, plain XML or gzip (detected by the magic bytes ``1f 8b``, not by
            name or Content-Type).  A leading UTF-8 BOM and white space are allowed.
        max_entries: at most this many entries are returned (the sitemaps.org limit per file is
            50,000); the rest of the document is not parsed.
        max_bytes: the most bytes of XML read (after decompression); the sitemaps.org limit is
            50 MiB uncompressed.

    Returns:
        ``(pages, [])`` for a ``<urlset>``, ``([], sitemaps)`` for a ``<sitemapindex>``, in
        document order.  Entries without a ``<loc>`` (or with an empty one) are skipped.
        Elements are matched by local name in the root's namespace (the sitemaps.org namespace
        or none), so extension elements such as ``<image:loc>`` are ignored.

    Raises:
        ValueError: the data is not a sitemap: not well-formed XML (including truncated), a root
            element other than ``urlset``/``sitemapindex``, a DOCTYPE or ENTITY declaration
            (refused to rule out entity expansion bombs), corrupt gzip, or more than
            ``max_bytes`` bytes of XML (message ``'sitemap larger than ...'``).
    """
    pages: list[SitemapEntry] = []
    children: list[SitemapEntry] = []
    # Element stack of (namespace, local name); text collected for loc/lastmod of an entry.
    stack: list[tuple[str, str]] = []
    state: dict = {"root": None, "ns": "", "loc": None, "lastmod": None, "changefreq": None, "text": None}
    out: list[SitemapEntry] | None = None

    def split(name: str) -> tuple[str, str]:
        ns, _, local = name.rpartition(" ")
        return ns, local

    def start(name: str, attrs) -> None:
        nonlocal out
        ns, local = split(name)
        depth = len(stack)
        stack.append((ns, local))
        if depth == 0:
            if local not in _ROOTS:
                raise ValueError(f"not a sitemap: root element <{local}>, expected <urlset> or <sitemapindex>")
            state["root"], state["ns"] = local, ns
            out = pages if local == "urlset" else children
        elif depth == 1 and ns == state["ns"] and local == _ROOTS[state["root"]]:
            state["loc"] = state["lastmod"] = state["changefreq"] = None
        elif (depth == 2 and ns == state["ns"] and local in ("loc", "lastmod", "changefreq")
              and stack[1] == (state["ns"], _ROOTS[state["root"]])):
            state["text"] = []

    def end(name: str) -> None:
        ns, local = stack.pop()
        depth = len(stack)
        if depth == 2 and state["text"] is not None:
            state[local] = "".join(state["text"]).strip() or None
            state["text"] = None
        elif depth == 1 and ns == state["ns"] and local == _ROOTS[state["root"]]:
            if state["loc"] and out is not None:
                out.append(SitemapEntry(state["loc"], state["lastmod"], state["changefreq"]))
                if len(out) >= max_entries:
                    raise _Stop

    def chars(text: str) -> None:
        if state["text"] is not None:
            state["text"].append(text)

    def refuse_doctype(*_args) -> None:
        raise ValueError("not a sitemap: DOCTYPE declarations are refused (entity expansion risk)")

    def refuse_entity(*_args) -> None:
        raise ValueError("not a sitemap: ENTITY declarations are refused (entity expansion risk)")

    def refuse_external(*_args) -> int:
        raise ValueError("not a sitemap: external entities are refused")

    if max_entries <= 0:
        return [], []
    p = expat.ParserCreate(namespace_separator=" ")
    p.StartElementHandler = start
    p.EndElementHandler = end
    p.CharacterDataHandler = chars
    p.StartDoctypeDeclHandler = refuse_doctype
    p.EntityDeclHandler = refuse_entity
    p.UnparsedEntityDeclHandler = refuse_entity
    p.ExternalEntityRefHandler = refuse_external

    leading = True
    try:
        for chunk in _chunks(bytes(data), max_bytes):
            if leading:  # a BOM or white space before the XML declaration is tolerated
                if chunk.startswith(b"\xef\xbb\xbf"):
                    chunk = chunk[3:]
                chunk = chunk.lstrip(b" \t\r\n")
                if not chunk:
                    continue
                leading = False
            p.Parse(chunk, False)
        if leading:
            raise ValueError("not a sitemap: empty document")
        p.Parse(b"", True)
    except _Stop:
        pass
    except expat.ExpatError as e:
        raise ValueError(f"not a sitemap: not well-formed XML ({e})") from None
    return pages, children
