"""URLs for the web crawler: one canonical form and the politeness key.

- :func:`canonicalize` gives every URL one spelling (w3lib's ``canonicalize_url`` plus lower-case
  host, no default port), so the store, the frontier and the mirror agree on identity.
- :func:`host_key` is the per-server politeness slot and robots.txt cache key.
- :func:`path_depth` is the path depth of the Library of Congress Web Archives (LCWA) crawl
  specs (:mod:`indexerd.sources.web.scope` applies them).
- :func:`preferred_key` names the document of two URLs with the same content.

Everything here is pure (no I/O).  Which URLs a source follows is :mod:`indexerd.sources.web.scope`;
crawler traps are :mod:`indexerd.sources.web.traps`.
"""

from __future__ import annotations

import codecs
import re
from urllib.parse import urlsplit

from w3lib.url import canonicalize_url

DEFAULT_PORTS = {"http": 80, "https": 443}

# RFC 3986 reg-name: unreserved / pct-encoded / sub-delims (IPv6 literals are checked by urllib).
_LONE_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_HOST_OK = re.compile(r"\A[a-z0-9\-._~%!$&'()*+,;=]+\Z")


def split_canonical(url: str):
    """Canonicalize ``url`` and return ``(canonical, scheme, userinfo, host, port)``.

    ``host`` is the lower-case host name without IPv6 brackets, ``port`` the explicit port or
    None.  Raises ValueError (naming the URL) for anything :func:`canonicalize` refuses.
    """
    if not isinstance(url, str):
        raise ValueError(f"{url!r}: not a URL string")
    try:
        first = urlsplit(url.strip())
        if first.scheme not in DEFAULT_PORTS:
            raise ValueError(f"{url!r}: scheme must be http or https, got {first.scheme!r}")
        canon = canonicalize_url(url.strip(), keep_fragments=False)
        parts = urlsplit(canon)
        host = parts.hostname
        port = parts.port  # raises ValueError for a bad or out-of-range port
    except ValueError as e:  # UnicodeError (IDNA) is a ValueError too
        msg = str(e)
        raise ValueError(msg if msg.startswith(repr(url)) else f"{url!r}: cannot parse URL: {e}") from None
    except (TypeError, AttributeError, IndexError, KeyError) as e:  # defensive: w3lib/urllib internals
        raise ValueError(f"{url!r}: cannot parse URL: {e}") from None
    if parts.scheme not in DEFAULT_PORTS:
        raise ValueError(f"{url!r}: scheme must be http or https, got {parts.scheme!r}")
    if not host:
        raise ValueError(f"{url!r}: URL has no host")
    if ":" not in host:
        if not _HOST_OK.match(host):
            raise ValueError(f"{url!r}: bad host name {host!r}")
        # RFC 1035 §3.1: a trailing dot only marks the name absolute (seed.test. is seed.test);
        # §2.3.4: no empty label, labels of at most 63 octets, a name of at most 253
        host = host[:-1] if host.endswith(".") else host
        labels = host.split(".")
        if not all(labels) or max(map(len, labels)) > 63 or len(host) > 253:
            raise ValueError(f"{url!r}: bad host name {host!r} (an empty or over-long label)")
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    return canon, parts.scheme, userinfo, host, port


def _query_in_encoding(url: str, encoding: str | None) -> str:
    """``url`` with the non-ASCII characters of its query percent-encoded in ``encoding``.

    The WHATWG URL Standard (basic URL parser, query state): a document's links encode their
    query in the document's encoding (UTF-8 when that is UTF-16 or unknown), and a character the
    encoding cannot represent becomes ``&#N;`` (decimal code point), itself percent-encoded.
    The path and the fragment stay as they are (UTF-8 later, as the standard says).
    """
    if not encoding or url.isascii():
        return url
    try:
        codec = codecs.lookup(encoding).name
    except LookupError:
        return url
    if codec.startswith("utf"):
        return url
    head, mark, query = url.partition("?")
    if not mark or query.isascii():
        return url
    query, hash_mark, fragment = query.partition("#")
    out = []
    for ch in query:
        if ch.isascii():
            out.append(ch)
            continue
        try:
            raw = ch.encode(codec)
        except UnicodeEncodeError:
            raw = f"&#{ord(ch)};".encode("ascii")
        out.append("".join(f"%{b:02X}" for b in raw))
    return f"{head}?{''.join(out)}{hash_mark}{fragment}"


def canonicalize(url: str, encoding: str | None = None) -> str:
    """Return the one canonical spelling of an http(s) URL.

    ``encoding``: the codec of the document the URL was written in (``Extracted.encoding``);
    a non-ASCII query is percent-encoded in it (WHATWG URL Standard: ``s?q=été`` on a
    windows-1252 page is ``s?q=%E9t%E9``, the same key as a link written that way), a character
    it cannot encode as ``%26%23N%3B`` (``&#N;``).  None, an unknown codec or a UTF: UTF-8.

    Rules: ``w3lib.url.canonicalize_url(url, keep_fragments=False)`` (RFC 3986 section 5.2.4 dot
    segments resolved, also when percent-encoded; percent-encoding normalised: unreserved
    characters decoded, ``%xx`` upper-cased, non-ASCII and spaces encoded as UTF-8 ``%XX``;
    query parameters sorted by name then value, blank values kept as ``a=``; fragment dropped;
    IDNA host), then: scheme and host lower-case, the default port dropped (``:80`` for http,
    ``:443`` for https), an empty path made ``/``, a ``%``
    that starts no ``%XX`` escape in the path written ``%25`` (w3lib does so in the query
    only), a trailing dot of the host name dropped (``seed.test.`` is ``seed.test``).
    User info (``user:pw@``) is dropped: a password written into a link must not become
    a document key, be shown in search results or be sent (credentials come from the config's
    ``auth`` only).
    Idempotent: ``canonicalize(canonicalize(u)) == canonicalize(u)``.

    Example: ``'HTTP://Example.COM:80/a/../b/./c?b=2&a=1#frag'`` -> ``'http://example.com/b/c?a=1&b=2'``.

    Raises:
        ValueError: (only this) the message names the URL: a scheme other than http/https, no
            host, a host name with an empty or over-long label (``http://..x/``), or a URL that
            cannot be parsed (bad or out-of-range port, bad IDNA host).
    """
    canon, scheme, userinfo, host, port = split_canonical(_query_in_encoding(url, encoding))
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != DEFAULT_PORTS[scheme]:
        netloc = f"{netloc}:{port}"
    rest = urlsplit(canon)
    # w3lib keeps a '%' that starts no escape ('/a%'); it means the same as '%25' (as w3lib
    # already does in the query), so spell it that way.
    path = _LONE_PERCENT.sub("%25", rest.path) or "/"
    out = f"{scheme}://{netloc}{path}"
    if rest.query:
        out += "?" + rest.query
    return out


def preferred_key(a: str, b: str) -> str:
    """Of two canonical URLs of one host serving the same content, the one that names the
    document: the shorter, then the first in code-point order (so ``/`` beats ``/index.html``,
    whichever was crawled first).  A ``rel=canonical`` has already chosen the key before this.
    """
    return min(a, b, key=lambda u: (len(u), u))


def host_key(url: str) -> str:
    """Return ``'scheme://host:port'`` with the port always explicit.

    The politeness slot and robots.txt cache key: ``'http://Example.com/a'`` ->
    ``'http://example.com:80'``; an IPv6 host keeps its brackets (``'http://[::1]:80'``).  User
    info is dropped.  Raises ValueError as :func:`canonicalize` does.
    """
    _, scheme, _, host, port = split_canonical(url)
    netloc = f"[{host}]" if ":" in host else host
    return f"{scheme}://{netloc}:{port if port is not None else DEFAULT_PORTS[scheme]}"


def path_depth(url: str) -> int:
    """Return the LCWA path depth of ``url``: the number of ``/`` in its path (query ignored).

    ``'/'`` is 1 (so is an empty path), ``'/any/url/to/data?q'`` is 4, ``'/any/url/to/data/?q'``
    is 5.  Counts the URL as given (pass a canonical URL); never raises for a string.
    """
    return (urlsplit(url).path or "/").count("/")
