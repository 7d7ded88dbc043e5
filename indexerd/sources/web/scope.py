"""Crawl scope: which discovered URLs a web source follows.

- :class:`DepthSpec` is the path-depth rule of the Library of Congress Web Archives (LCWA) crawl
  specs (``N``, ``>N``, ``<N``, ``N-M``, ``+N``, ``-N``).
- :class:`Scope` combines the seeds' hosts, ``allowed_domains`` (Scrapy's setting of that name),
  ports, the hop limit, the depth spec and the LCWA restrict / include / exclude regexes.

Pure (no I/O).
"""

from __future__ import annotations

import hashlib
import json
import re
from urllib.parse import urlsplit

from indexerd.sources.web.traps import trap_reason
from indexerd.sources.web.urls import DEFAULT_PORTS, canonicalize, host_key, path_depth, split_canonical

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
        _, _, _, host, _ = split_canonical(f"http://{e}/")
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
                 path_depth: str | None = None, max_hops: int | None = None,
                 requisite_domains=(), requisites: bool = False) -> None:
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
            doms = [(urlsplit(s).hostname or "").rstrip(".") for s in self.seeds]
        else:
            doms = [_domain(d) for d in _as_tuple(allowed_domains)]
        self.allowed_domains: tuple[str, ...] = tuple(dict.fromkeys(doms))
        #: page requisites are kept (a mirror with ``page_requisites``)
        self.requisites = bool(requisites)
        try:
            self.requisite_domains: tuple[str, ...] = tuple(dict.fromkeys(
                _domain(d) for d in _as_tuple(requisite_domains)))
        except ValueError as e:
            raise ValueError("requisite_domains" + str(e).removeprefix("allowed_domains")) from None
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

    def fingerprint(self) -> str:
        """A digest (hex) of every setting :meth:`check` depends on: two scopes with the same
        fingerprint keep and drop the same URLs (a new pass re-checks the URLs it knows only
        when it changed)."""
        facts = {"seeds": self.seeds, "domains": self.allowed_domains, "ports": sorted(self.allowed_ports),
                 "restrict": [r.pattern for r in self.restrict], "include": [r.pattern for r in self.include],
                 "exclude": [r.pattern for r in self.exclude],
                 "path_depth": self.path_depth._text if self.path_depth is not None else None,
                 "max_hops": self.max_hops}
        if self.requisites:
            facts["requisites"] = True
            facts["requisite_domains"] = self.requisite_domains
        return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:32]

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

    def check_requisite(self, url: str) -> str | None:
        """Is ``url`` a page requisite this source may fetch?  None, or ``'scheme'``,
        ``'invalid'``, ``'off-site'`` (a host neither allowed nor in
        :attr:`requisite_domains`).  Hops, depth and the regexes do not apply: a page kept in
        the mirror needs its stylesheets and images wherever its path is (wget's
        ``--page-requisites``)."""
        if not self.requisites:
            return "no-requisites"
        reason, canon = self._site(url)
        if reason == "off-site" and self.requisite_domains:
            h = (urlsplit(canon).hostname or "").rstrip(".")
            if any(h == d or h.endswith("." + d) for d in self.requisite_domains):
                return None
        return reason if reason != "off-port" else None

    def gate(self, url: str, hops: int, seed_depth: int, kind: str = "page") -> str | None:
        """The one scope gate of a crawl, applied when a URL is queued and again before it is
        fetched: None, or why ``url`` of ``kind`` (``page``, ``requisite``, or what is not a
        page: ``sitemap``, ``robots``) is not crawled: :meth:`check` then
        :func:`~indexerd.sources.web.traps.trap_reason` for a page, :meth:`check_requisite`
        then the traps for a requisite, :meth:`check_site` for the rest."""
        if kind == "requisite":
            return self.check_requisite(url) or trap_reason(url)
        if kind != "page":
            return self.check_site(url)
        return self.check(url, hops=hops, seed_depth=seed_depth) or trap_reason(url)

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
