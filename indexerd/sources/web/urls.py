"""URLs for the web crawler: one canonical form, the politeness key, crawl scope and trap guards.

- :func:`canonicalize` gives every URL one spelling (w3lib's ``canonicalize_url`` plus lower-case
  host, no default port), so the store, the frontier and the mirror agree on identity.
- :func:`host_key` is the per-server politeness slot and robots.txt cache key.
- :func:`path_depth` and :class:`DepthSpec` are the path-depth rules of the Library of Congress
  Web Archives (LCWA) crawl specs.
- :func:`trap_reason` and :class:`QueryVariants` catch crawler traps: relative links that grow
  the path forever, and query strings that never repeat (calendars, session ids).
- :class:`Scope` decides which discovered URLs a web source follows (LCWA restrict / include /
  exclude, Scrapy's ``allowed_domains``).

Everything here is pure (no I/O); only :class:`QueryVariants` holds state.
"""

from __future__ import annotations

import codecs
import re
import threading
from collections import Counter
from urllib.parse import urlsplit

from w3lib.url import canonicalize_url

DEFAULT_PORTS = {"http": 80, "https": 443}

# RFC 3986 reg-name: unreserved / pct-encoded / sub-delims (IPv6 literals are checked by urllib).
_LONE_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_HOST_OK = re.compile(r"\A[a-z0-9\-._~%!$&'()*+,;=]+\Z")


def _split_canonical(url: str):
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
    canon, scheme, userinfo, host, port = _split_canonical(_query_in_encoding(url, encoding))
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
    _, scheme, _, host, port = _split_canonical(url)
    netloc = f"[{host}]" if ":" in host else host
    return f"{scheme}://{netloc}:{port if port is not None else DEFAULT_PORTS[scheme]}"


def path_depth(url: str) -> int:
    """Return the LCWA path depth of ``url``: the number of ``/`` in its path (query ignored).

    ``'/'`` is 1 (so is an empty path), ``'/any/url/to/data?q'`` is 4, ``'/any/url/to/data/?q'``
    is 5.  Counts the URL as given (pass a canonical URL); never raises for a string.
    """
    return (urlsplit(url).path or "/").count("/")


_DEPTH_FORMS = ("'N' (exactly N)", "'>N' (more than N)", "'<N' (less than N)", "'N-M' (N to M)",
                "'+N' (seed depth to seed depth + N)", "'-N' (seed depth - N to seed depth)")
_DEPTH_RE = re.compile(r"\A(?:([0-9]+)|>([0-9]+)|<([0-9]+)|([0-9]+)-([0-9]+)|\+([0-9]+)|-([0-9]+))\Z")


class DepthSpec:
    """An LCWA path-depth range, absolute or relative to the seed's depth.

    Forms (N, M whole numbers): ``'N'`` exactly N; ``'>N'`` N+1 and deeper; ``'<N'`` 1..N-1;
    ``'N-M'`` N..M (N <= M); ``'+N'`` seed depth .. seed depth + N; ``'-N'`` seed depth - N ..
    seed depth.  Build with :meth:`parse`; ``str(spec)`` gives the text back (stripped).
    Immutable, hashable, compares by text.
    """

    __slots__ = ("_text", "_low", "_high", "_relative")

    def __init__(self, text: str, low: int, high: int | None, relative: bool) -> None:
        self._text = text
        self._low = low  # offsets from the seed depth when relative
        self._high = high  # None: no upper bound
        self._relative = relative

    @classmethod
    def parse(cls, text: str) -> DepthSpec:
        """Parse a depth spec.

        Raises:
            ValueError: the message quotes the spec and lists the accepted forms; also for an
                empty range (``'5-3'``, ``'<1'``).
        """
        t = text.strip() if isinstance(text, str) else ""
        m = _DEPTH_RE.match(t)
        bad = f"bad path depth spec {text!r}: expected one of " + ", ".join(_DEPTH_FORMS)
        if not m:
            raise ValueError(bad)
        exact, more, less, lo, hi, plus, minus = m.groups()
        if exact is not None:
            return cls(t, int(exact), int(exact), False)
        if more is not None:
            return cls(t, int(more) + 1, None, False)
        if less is not None:
            if int(less) < 2:
                raise ValueError(f"bad path depth spec {text!r}: matches no depth (the least depth is 1)")
            return cls(t, 1, int(less) - 1, False)
        if lo is not None:
            if int(lo) > int(hi):
                raise ValueError(f"bad path depth spec {text!r}: empty range ({lo} > {hi})")
            return cls(t, int(lo), int(hi), False)
        if plus is not None:
            return cls(t, 0, int(plus), True)
        return cls(t, -int(minus), 0, True)

    def allows(self, depth: int, seed_depth: int) -> bool:
        """True when path depth ``depth`` is in range (``seed_depth`` is used by ``+N``/``-N`` only)."""
        base = seed_depth if self._relative else 0
        if depth < base + self._low:
            return False
        return self._high is None or depth <= base + self._high

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"DepthSpec.parse({self._text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DepthSpec) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)


def trap_reason(url: str, *, max_length: int = 2000, max_segment_repeats: int = 3,
                max_param_repeats: int = 3) -> str | None:
    """Crawler-trap heuristics on one URL (as given; pass it canonical).

    Returns None when the URL looks fine, else one fixed reason word, checked in this order:

    - ``'url-too-long'``: ``len(url) > max_length`` characters;
    - ``'repeated-segment'``: some non-empty path segment occurs more than
      ``max_segment_repeats`` times (``/de/www.example.test/privacy/www.example.test/privacy/...``,
      made by a scheme-less link resolved relative to each page);
    - ``'repeated-path'``: the path ends with a run of two or more segments written twice in a
      row (``/de/www.example.test/privacy/www.example.test/privacy/``): the first step of that
      same loop, caught before any URL holding the run twice is fetched (CASES B18).  A single
      segment repeated (``/2020/01/01/``) is not a trap;
    - ``'repeated-parameter'``: one query parameter name occurs more than ``max_param_repeats``
      times (``?s=1&s=1&s=1&s=1``).

    Segments and names are compared as written (case-sensitive, not percent-decoded).
    """
    if len(url) > max_length:
        return "url-too-long"
    parts = urlsplit(url)
    path_segs = [s for s in parts.path.split("/") if s]
    segs = Counter(path_segs)
    if segs and max(segs.values()) > max_segment_repeats:
        return "repeated-segment"
    n = len(path_segs)
    for k in range(2, n // 2 + 1):
        if path_segs[n - k:] == path_segs[n - 2 * k:n - k]:
            return "repeated-path"
    if parts.query:
        names = Counter(p.partition("=")[0] for p in parts.query.split("&") if p)
        if names and max(names.values()) > max_param_repeats:
            return "repeated-parameter"
    return None


class QueryVariants:
    """Per-pass guard against query strings growing without bound (calendars, session ids).

    At most ``limit`` distinct query strings are admitted per scheme + host + path; make a new
    instance for each crawl pass.  URLs are compared as given, so pass canonical URLs (then
    ``?b=1&a=2`` and ``?a=2&b=1`` are one variant).  Thread-safe.  Memory: at most ``limit``
    query strings per distinct path seen.

    Raises ValueError for a negative ``limit``.
    """

    def __init__(self, limit: int = 100) -> None:
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        self.limit = limit
        self._seen: dict[tuple[str, str, str], set[str]] = {}
        self._lock = threading.Lock()

    def admit(self, url: str) -> bool:
        """True if ``url`` may be crawled: it has no query, its query was admitted before, or
        fewer than ``limit`` queries were admitted for its path; the query is then recorded."""
        parts = urlsplit(url)
        if not parts.query:
            return True
        key = (parts.scheme, parts.netloc, parts.path or "/")
        with self._lock:
            seen = self._seen.setdefault(key, set())
            if parts.query in seen:
                return True
            if len(seen) >= self.limit:
                return False
            seen.add(parts.query)
            return True


def _as_tuple(value) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def _compile_all(key: str, patterns) -> tuple[re.Pattern[str], ...]:
    out = []
    for p in _as_tuple(patterns):
        if not isinstance(p, str):
            raise ValueError(f"{key}: expected a regular expression string, got {p!r}")
        try:
            out.append(re.compile(p))
        except re.error as e:
            raise ValueError(f"{key}: bad regular expression {p!r}: {e}") from None
    return tuple(out)


def _domain(entry: object) -> str:
    """An allowed_domains entry -> the canonical host name (IDNA, lower-case, no trailing dot)."""
    if not isinstance(entry, str) or not entry.strip():
        raise ValueError(f"allowed_domains: expected a domain name like 'example.com', got {entry!r}")
    e = entry.strip()
    bracketed = e.startswith("[") and e.endswith("]")
    if any(c in e for c in "/@?#") or any(c.isspace() for c in e) or (":" in e and not bracketed):
        raise ValueError(f"allowed_domains: expected a domain name like 'example.com' (no scheme, "
                         f"port or path), got {entry!r}")
    try:
        _, _, _, host, _ = _split_canonical(f"http://{e}/")
    except ValueError:
        raise ValueError(f"allowed_domains: not a valid domain name: {entry!r}") from None
    return host.rstrip(".")


class Scope:
    """Which discovered URLs a web source follows.

    Rules from the LCWA crawl specs (restrict / include / exclude, path depth, hops) and Scrapy's
    ``OffsiteMiddleware`` (``allowed_domains``).

    Args:
        seeds: the source's start URLs (at least one); canonicalised.
        allowed_domains: host names; default the seeds' hosts.  A URL's host is allowed when it
            equals an entry or is a subdomain of one (Scrapy's rule; the port is ignored; IDNA
            and case are normalised, a trailing dot ignored).  Entries must be bare names (no
            scheme, port or path).
        allowed_ports: the ports a URL of an allowed host may use.  None (the default): the
            seeds' ports, where 80 and 443 go together (a site moving to https stays in scope)
            -- so a redirect or link to another port of the seed host, another service, is
            ``'off-port'``.  An explicit list allows those ports only (80/443 not implied).
        restrict: regexes that must *all* match (``re.search`` on the canonical URL).
        include: regexes of which at least one must match (empty: all URLs).
        exclude: regexes of which none may match.
        path_depth: a :class:`DepthSpec` text, or None for any depth.
        max_hops: the most links followed from a seed (seed = 0 hops), or None for no limit.

    Raises:
        ValueError: at construction, message ``'<key>: <what is wrong, quoting the value>'`` with
            key one of ``seeds``, ``allowed_domains``, ``allowed_ports``, ``restrict``,
            ``include``, ``exclude``, ``path_depth``, ``max_hops``, so the config layer can prefix ``sources.web[0].``.
    """

    def __init__(self, seeds: list[str], *, allowed_domains: list[str] | None = None,
                 allowed_ports: list[int] | None = None, restrict=(), include=(), exclude=(),
                 path_depth: str | None = None, max_hops: int | None = None) -> None:
        seeds_t = _as_tuple(seeds)
        if not seeds_t:
            raise ValueError("seeds: at least one seed URL is required")
        canon = []
        for s in seeds_t:
            try:
                canon.append(canonicalize(s))
            except ValueError as e:
                raise ValueError(f"seeds: bad seed URL {s!r}: {e}") from None
        self.seeds: tuple[str, ...] = tuple(canon)
        if allowed_domains is None:
            doms = [urlsplit(s).hostname.rstrip(".") for s in self.seeds]
        else:
            doms = [_domain(d) for d in _as_tuple(allowed_domains)]
        self.allowed_domains: tuple[str, ...] = tuple(dict.fromkeys(doms))
        if allowed_ports is None:
            ports = {int(host_key(s).rpartition(":")[2]) for s in self.seeds}
            if ports & {80, 443}:
                ports |= {80, 443}
        else:
            ports = set()
            for p in _as_tuple(allowed_ports) if not isinstance(allowed_ports, int) else (allowed_ports,):
                if isinstance(p, bool) or not isinstance(p, int) or not 0 < p < 65536:
                    raise ValueError(f"allowed_ports: expected port numbers 1-65535, got {p!r}")
                ports.add(p)
        self.allowed_ports: frozenset[int] = frozenset(ports)
        self.restrict = _compile_all("restrict", restrict)
        self.include = _compile_all("include", include)
        self.exclude = _compile_all("exclude", exclude)
        try:
            self.path_depth = DepthSpec.parse(path_depth) if path_depth is not None else None
        except ValueError as e:
            raise ValueError(f"path_depth: {e}") from None
        if max_hops is not None and (isinstance(max_hops, bool) or not isinstance(max_hops, int)
                                     or max_hops < 0):
            raise ValueError(f"max_hops: expected a whole number >= 0, got {max_hops!r}")
        self.max_hops = max_hops

    def host_allowed(self, host: str) -> bool:
        """True when ``host`` (lower-case, IDNA) equals an allowed domain or is a subdomain of one."""
        h = host.rstrip(".")
        return any(h == d or h.endswith("." + d) for d in self.allowed_domains)

    def check(self, url: str, *, hops: int, seed_depth: int) -> str | None:
        """Return None when ``url`` is in scope, else the first failing reason word.

        Checked in this order: ``'scheme'`` (not http/https), ``'invalid'`` (http(s) but not
        parseable: no host, bad port), ``'off-site'``, ``'max-hops'`` (``hops > max_hops``),
        ``'path-depth'`` (:func:`path_depth` of the canonical URL against the spec, with
        ``seed_depth`` the depth of the seed it was reached from), ``'restrict'``, ``'include'``,
        ``'exclude'``; the first four are :meth:`check_site`.  Never raises for a string URL.
        """
        reason, canon = self._site(url)
        if reason is not None:
            return reason
        if self.max_hops is not None and hops > self.max_hops:
            return "max-hops"
        if self.path_depth is not None and not self.path_depth.allows(path_depth(canon), seed_depth):
            return "path-depth"
        if not all(r.search(canon) for r in self.restrict):
            return "restrict"
        if self.include and not any(r.search(canon) for r in self.include):
            return "include"
        if any(r.search(canon) for r in self.exclude):
            return "exclude"
        return None

    def check_site(self, url: str) -> str | None:
        """Is ``url`` on the crawled site at all?  None, or ``'scheme'``, ``'invalid'``,
        ``'off-site'`` (host not allowed), ``'off-port'`` (port not in :attr:`allowed_ports`).
        The check for what is not a page (robots.txt and sitemap files, and their redirects).
        """
        return self._site(url)[0]

    def _site(self, url: str) -> tuple[str | None, str]:
        try:
            scheme = urlsplit(url.strip()).scheme
        except ValueError:
            return "invalid", url
        if scheme not in DEFAULT_PORTS:
            return "scheme", url
        try:
            canon = canonicalize(url)
        except ValueError:
            return "invalid", url
        parts = urlsplit(canon)
        if not self.host_allowed(parts.hostname or ""):
            return "off-site", canon
        if (parts.port or DEFAULT_PORTS[parts.scheme]) not in self.allowed_ports:
            return "off-port", canon
        return None, canon
