"""What both HTML parsers share: which tags matter, and how their findings become an Extracted.

The lexbor DOM walk (:mod:`indexerd.extract.html`) and the streaming parser
(:mod:`indexerd.extract.htmlstream`) read the same tag kinds (:data:`TAG_KINDS`) and hand what
they found to :func:`html_document`, so both give the same fields from the same page. Pure
functions, thread-safe; importing costs the standard library.
"""

from __future__ import annotations

from types import MappingProxyType
from urllib.parse import urljoin

from indexerd.extract.extracted import MEDIA_HTML, Extracted

# What each tag contributes. Block-level and word-breaking elements break words (the DOM walk puts
# a "\x00" text node before and after them and splits lexbor's text() on it); hidden ones are
# left out of the text.
BLOCK, H1, HIDDEN, HREF, SRC, IFRAME, TITLE, META, BASE, LINK = range(10)
TAG_KINDS = {
    **dict.fromkeys(
        "address article aside blockquote br button caption center dd details dialog dir div dl"
        " dt fieldset figcaption figure footer form h2 h3 h4 h5 h6 header hgroup hr input legend"
        " li main menu nav ol optgroup option p pre section select summary table tbody td"
        " textarea tfoot th thead tr ul video audio canvas img".split(),
        BLOCK,
    ),
    # Not shown: scripts, styles, inert templates, SVG drawings, and what the parser keeps as
    # raw text for browsers without a feature (noembed, noframes; iframe below).
    **dict.fromkeys("script style noscript template svg noembed noframes".split(), HIDDEN),
    "h1": H1, "a": HREF, "area": HREF, "frame": SRC, "iframe": IFRAME,
    "title": TITLE, "meta": META, "base": BASE, "link": LINK,
}
_DROPPED_SCHEMES = ("javascript:", "mailto:", "data:")
URL_SPACE = " \t\n\r\x0c"
_ASCII_SPACE = "\t\n\x0c\r "


def parse_refresh(content: str) -> tuple[int, str] | None:
    """Read a ``<meta http-equiv=refresh>`` ``content`` (or an HTTP ``Refresh`` header) value.

    The HTML Living Standard's "shared declarative refresh steps": a delay in whole seconds (a
    fraction is ignored), then ``;`` / ``,`` / whitespace, then the URL, with or without a
    ``url=`` label (any case, spaces around ``=``), optionally in single or double quotes (cut at
    the closing quote).  Returns ``(delay_seconds, url_as_written)`` or None: no delay, junk after
    it, or no URL (a reload of the page itself).  Never raises.

    w3lib's ``get_meta_refresh`` is not used: its pattern misses the label-less form
    (``0; /docs/``), a comma, spaces around ``=`` and ``.5``, all of which browsers follow.
    """
    s, i, n = content, 0, len(content)

    def skip_space(i: int) -> int:
        while i < n and s[i] in _ASCII_SPACE:
            i += 1
        return i

    i = skip_space(i)
    start = i
    while i < n and s[i].isascii() and s[i].isdigit():
        i += 1
    if i == start and not (i < n and s[i] == "."):
        return None
    delay = int(s[start:i] or 0)
    while i < n and s[i].isascii() and (s[i].isdigit() or s[i] == "."):
        i += 1
    if i < n:
        if s[i] not in ";," + _ASCII_SPACE:
            return None
        i = skip_space(i)
        if i < n and s[i] in ";,":
            i = skip_space(i + 1)
    url = s[i:]
    if s[i:i + 3].lower() == "url":
        j = skip_space(i + 3)
        if j < n and s[j] == "=":
            i = skip_space(j + 1)
            url = s[i:]
    if i < n and s[i] in "'\"":
        url = s[i + 1:].partition(s[i])[0]
    url = url.strip(URL_SPACE)
    return (delay, url) if url else None


def html_document(title: str, body_text: str, codec: str | None, meta: dict[str, str],
                  robots: list[str], hrefs: list[str], base_href: str | None,
                  canonical: str | None, base_url: str | None) -> Extracted:
    """The :class:`Extracted` of an HTML page from what a parser collected: links resolved
    against ``<base href>`` (itself resolved against ``base_url``), robots tokens read, the
    refresh target appended to ``hrefs``. ``title`` and ``body_text`` are already collapsed."""
    base = base_url
    if base_href and (base_href := base_href.strip(URL_SPACE)):
        try:
            base = urljoin(base_url, base_href) if base_url else base_href
        except ValueError:
            pass
    tokens = {t for value in robots for t in value.lower().replace(",", " ").split()}
    refresh = parse_refresh(meta["refresh"]) if "refresh" in meta else None
    if refresh is not None:
        target = resolve_links([refresh[1]], base)
        refresh = (refresh[0], target[0]) if target else None
        if target:
            hrefs.append(target[0])
    return Extracted(
        title=title,
        text=body_text,
        media_type=MEDIA_HTML,
        encoding=codec,
        meta=MappingProxyType(meta),
        links=resolve_links(hrefs, base),
        canonical=(resolve_links([canonical], base) or (None,))[0] if canonical else None,
        noindex=bool(tokens & {"noindex", "none"}),
        nofollow=bool(tokens & {"nofollow", "none"}),
        refresh=refresh,
    )


def add_meta(attributes: dict[str, str | None], meta: dict[str, str], robots: list[str]) -> None:
    """Record one ``<meta>`` element's attributes: ``name``, ``http-equiv`` and ``property``
    (lower-cased) -> stripped ``content`` into ``meta`` (first wins); a ``robots`` or
    ``indexerd`` name's content also onto ``robots``. Without ``content`` nothing is recorded."""
    content = attributes.get("content")
    if content is None:
        return
    content = content.strip()
    for attribute in ("name", "http-equiv", "property"):
        key = (attributes.get(attribute) or "").strip().lower()
        if key:
            meta.setdefault(key, content)
            if attribute == "name" and key in ("robots", "indexerd"):
                robots.append(content)


def resolve_links(raw: list[str], base: str | None) -> tuple[str, ...]:
    """Resolve each distinct href against ``base``; drop empty and javascript:/mailto:/data:.

    ``urljoin`` (about 5 us a call) dominates link-heavy pages, so it runs once per distinct
    part before ``#``: ``page.html#a`` and ``page.html#b`` share one call, and ``#a`` needs none.
    """
    resolved: dict[str, None] = {}
    joined: dict[str, str | None] = {}
    page = base.partition("#")[0] if base is not None else ""
    for href in dict.fromkeys(raw):
        href = href.strip(URL_SPACE)
        if "\t" in href or "\n" in href or "\r" in href:  # the URL parser removes these
            href = href.replace("\t", "").replace("\n", "").replace("\r", "")
        if not href or href[:11].lower().startswith(_DROPPED_SCHEMES):
            continue
        if base is not None and not href.startswith(("http://", "https://")):
            target, hash_mark, fragment = href.partition("#")
            if target not in joined:
                try:
                    joined[target] = urljoin(base, target) if target else page
                except ValueError:  # e.g. an invalid IPv6 host: not a link we can follow
                    joined[target] = None
            url = joined[target]
            if url is None:
                continue
            href = url + hash_mark + fragment
        resolved[href] = None
    return tuple(resolved)
