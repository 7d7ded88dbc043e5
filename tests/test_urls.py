"""Canonical URLs, host keys, LCWA path depth, crawl scope and crawler-trap guards."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings, strategies as st

from indexerd.sources.web.scope import DepthSpec, Scope
from indexerd.sources.web.traps import QueryVariants, trap_reason
from indexerd.sources.web.urls import canonicalize, host_key, path_depth, preferred_key


@pytest.mark.parametrize("url, want", [
    ("HTTP://Example.COM:80/a/../b/./c?b=2&a=1#frag", "http://example.com/b/c?a=1&b=2"),
    ("https://x.org:443", "https://x.org/"),
    ("https://x.org:443/p", "https://x.org/p"),
    ("http://x.org:443/p", "http://x.org:443/p"),
    ("https://x.org:80/p", "https://x.org:80/p"),
    ("http://x.org:8080/", "http://x.org:8080/"),
    ("http://x.org:080/", "http://x.org/"),
    ("http://x.org:/", "http://x.org/"),
    ("http://bücher.de/", "http://xn--bcher-kva.de/"),
    ("http://x.org/a b?q=a b", "http://x.org/a%20b?q=a+b"),
    ("http://x.org/%7e/%7E", "http://x.org/~/~"),
    ("http://x.org/%2e%2e/x", "http://x.org/x"),
    ("http://x.org/a/../../../b", "http://x.org/b"),
    ("http://x.org/r\u00e9sum\u00e9", "http://x.org/r%C3%A9sum%C3%A9"),
    ("http://x.org/?a&b=&a=1", "http://x.org/?a=&a=1&b="),
    ("http://x.org/?x=1/../..", "http://x.org/?x=1%2F..%2F.."),
    ("http://[::1]:80/x", "http://[::1]/x"),
    ("http://User:Pw@Ex.com:80/", "http://ex.com/"),  # a password in a link never becomes a key
    ("  http://x.org/a  ", "http://x.org/a"),
    ("http://x.org/a%/b%zz?q=%", "http://x.org/a%25/b%25zz?q=%25"),
])
def test_canonicalize(url: str, want: str) -> None:
    assert canonicalize(url) == want
    assert canonicalize(want) == want


@pytest.mark.parametrize("url, words", [
    ("ftp://x.org/", "scheme must be http or https"),
    ("mailto:a@b.org", "scheme must be http or https"),
    ("x.org/a", "scheme must be http or https"),
    ("http:///a", "no host"),
    ("http://x.org:99999/", "cannot parse URL"),
    ("http://x.org:abc/", "cannot parse URL"),
    ("http://[x/", "cannot parse URL"),
    ("http://a b/", "bad host name"),
])
def test_canonicalize_refuses_with_the_url_in_the_message(url: str, words: str) -> None:
    with pytest.raises(ValueError) as ei:
        canonicalize(url)
    assert repr(url) in str(ei.value)
    assert words in str(ei.value)


_URL_BITS = st.lists(st.sampled_from(
    list("/.?#&=%;:@+ ~abAB019é\x00\t[]\\") + ["%2e", "%2E", "%2f", "%7e", "%ff", "..", "%zz", "\u2028"]),
    max_size=20).map("".join)
_PREFIXES = st.sampled_from(["http://", "HTTPS://", "http:", "//", "ftp://", "", "http:///"])
_HOSTS = st.sampled_from(["Example.COM", "bücher.de", "[::1]", "[::FFFF:1.2.3.4]", "x.org.", "a b",
                          "u:p@h", "h:80", "h:443", "h:0", "h:", "", "xn--bcher-kva.de", "ß.de",
                          "例え.テスト", "h:99999", "%41"])


@settings(max_examples=1500, deadline=None)
@given(_PREFIXES, _HOSTS, _URL_BITS)
def test_canonicalize_is_idempotent_and_raises_only_value_error(prefix, host, rest) -> None:
    url = prefix + host + rest
    try:
        c = canonicalize(url)
    except ValueError:
        return
    assert canonicalize(c) == c
    assert c.startswith(("http://", "https://"))
    assert "#" not in c


@settings(max_examples=1500, deadline=None)
@given(st.text())
def test_canonicalize_on_any_text(text: str) -> None:
    for url in (text, "http://x.org/" + text, "http://" + text):
        try:
            c = canonicalize(url)
        except ValueError:
            continue
        assert canonicalize(c) == c


def test_host_key() -> None:
    assert host_key("http://Example.com/a") == "http://example.com:80"
    assert host_key("https://example.com/a?b") == "https://example.com:443"
    assert host_key("http://example.com:8080/") == "http://example.com:8080"
    assert host_key("http://u:p@[::1]/") == "http://[::1]:80"
    with pytest.raises(ValueError):
        host_key("ftp://x.org/")


@pytest.mark.parametrize("url, depth", [
    ("http://x.org/", 1), ("http://x.org", 1), ("http://x.org/any/url/to/data?q", 4),
    ("http://x.org/any/url/to/data/?q", 5), ("http://x.org/a?b=/c/d", 1),
])
def test_path_depth(url: str, depth: int) -> None:
    assert path_depth(url) == depth


@pytest.mark.parametrize("spec, seed, allowed", [
    ("3", 1, {3}),
    (">3", 1, {4, 5, 6, 7, 8, 9}),
    ("<3", 1, {1, 2}),
    ("2-4", 1, {2, 3, 4}),
    ("+2", 3, {3, 4, 5}),
    ("-2", 3, {1, 2, 3}),
    (" 4 ", 9, {4}),
])
def test_depth_spec(spec: str, seed: int, allowed: set[int]) -> None:
    d = DepthSpec.parse(spec)
    assert {n for n in range(0, 10) if d.allows(n, seed)} == allowed
    assert str(d) == spec.strip()
    assert d == DepthSpec.parse(str(d))


@pytest.mark.parametrize("spec", ["", "x", "3-", ">", "<1", "5-3", "++1", "1.5", "٣", "> 3"])
def test_depth_spec_refuses(spec: str) -> None:
    with pytest.raises(ValueError) as ei:
        DepthSpec.parse(spec)
    assert repr(spec) in str(ei.value)


def test_depth_spec_message_lists_the_forms() -> None:
    with pytest.raises(ValueError, match=r"'N-M' \(N to M\)"):
        DepthSpec.parse("deep")


def test_trap_reason_b18_scheme_less_link_resolved_relative() -> None:
    """B18: pages under /de/ link to 'www.example.test/privacy/' (no scheme), so each page's
    link resolves below the page itself and the path grows forever."""
    from urllib.parse import urljoin

    url = "http://www.example.test/de/"
    chain = []
    for _ in range(6):
        url = canonicalize(urljoin(url, "www.example.test/privacy/"))
        chain.append(url)
    assert chain[1] == "http://www.example.test/de/www.example.test/privacy/www.example.test/privacy/"
    # the first URL holding the run twice is refused, so none holding it twice is fetched
    assert [trap_reason(u) for u in chain] == [None, "repeated-path", "repeated-path", "repeated-segment",
                                               "repeated-segment", "repeated-segment"]
    assert trap_reason("http://h/2020/01/01/") is None  # one segment repeated is a date, not a trap
    assert trap_reason("http://h/a/b/a/b/") == "repeated-path"
    assert trap_reason("http://h/a/b/c/a/b/") is None
    # max_hops stops the same chain earlier: the seed is 0 hops, the first link 1 hop.
    scope = Scope(["http://www.example.test/de/"], max_hops=2)
    seed_depth = path_depth("http://www.example.test/de/")
    assert [scope.check(u, hops=i + 1, seed_depth=seed_depth) for i, u in enumerate(chain)] == \
        [None, None, "max-hops", "max-hops", "max-hops", "max-hops"]


def test_trap_reason_other_words() -> None:
    assert trap_reason("http://x.org/" + "a" * 1987) is None  # exactly 2000 characters
    assert trap_reason("http://x.org/" + "a" * 1988) == "url-too-long"
    assert trap_reason("http://x.org/abc", max_length=10) == "url-too-long"
    assert trap_reason("http://x.org/?s=1&s=2&s=3") is None
    assert trap_reason("http://x.org/?s=1&s=2&s=3&s=4") == "repeated-parameter"
    assert trap_reason("http://x.org/?s&s&s&s") == "repeated-parameter"
    assert trap_reason("http://x.org/a/a/a?s=1&s=1", max_segment_repeats=2, max_param_repeats=1) \
        == "repeated-segment"
    assert trap_reason("http://x.org/a//////b") is None  # empty segments do not count


def test_query_variants_calendar() -> None:
    qv = QueryVariants(limit=3)
    months = [f"http://x.org/cal?m=2020-{m:02d}" for m in range(1, 6)]
    assert [qv.admit(u) for u in months] == [True, True, True, False, False]
    assert qv.admit(months[0]) is True  # already admitted
    assert qv.admit("http://x.org/cal") is True  # no query
    assert qv.admit("http://x.org/other?m=2020-04") is True  # another path
    assert qv.admit("https://x.org/cal?m=2020-04") is True  # another scheme
    assert qv.admit("http://y.org/cal?m=2020-04") is True  # another host


def test_query_variants_thread_safe() -> None:
    qv = QueryVariants(limit=50)
    results: list[bool] = []
    lock = threading.Lock()

    def work(k: int) -> None:
        got = [qv.admit(f"http://x.org/cal?k={k}-{i}") for i in range(100)]
        with lock:
            results.extend(got)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 50
    with pytest.raises(ValueError):
        QueryVariants(limit=-1)


def test_scope_domains_and_reasons_in_order() -> None:
    s = Scope(["https://Docs.Example.com/guide/"], restrict=[r"/guide/"], include=[r"\.html$", r"/$"],
              exclude=[r"/private/"], path_depth="+2", max_hops=3)
    sd = path_depth(s.seeds[0])
    assert s.allowed_domains == ("docs.example.com",)
    ok = "https://docs.example.com/guide/a.html"
    assert s.check(ok, hops=1, seed_depth=sd) is None
    assert s.check("HTTPS://sub.DOCS.example.com/guide/a.html", hops=1, seed_depth=sd) is None
    assert s.check("HTTPS://sub.DOCS.example.com:8443/guide/a.html", hops=1, seed_depth=sd) == "off-port"
    assert s.check("mailto:a@docs.example.com", hops=1, seed_depth=sd) == "scheme"
    assert s.check("javascript:void(0)", hops=1, seed_depth=sd) == "scheme"
    assert s.check("http://docs.example.com:99999/", hops=1, seed_depth=sd) == "invalid"
    assert s.check("https://example.com/guide/a.html", hops=1, seed_depth=sd) == "off-site"
    assert s.check("https://evildocs.example.com/guide/a.html", hops=1, seed_depth=sd) == "off-site"
    assert s.check("https://docs.example.com.evil.org/guide/", hops=1, seed_depth=sd) == "off-site"
    assert s.check(ok, hops=4, seed_depth=sd) == "max-hops"
    assert s.check("https://docs.example.com/guide/a/b/c.html", hops=1, seed_depth=sd) is None  # depth 4
    assert s.check("https://docs.example.com/guide/a/b/c/d.html", hops=1, seed_depth=sd) == "path-depth"
    assert s.check("https://docs.example.com/other/a.html", hops=1, seed_depth=sd) == "restrict"
    assert s.check("https://docs.example.com/guide/a.pdf", hops=1, seed_depth=sd) == "include"
    assert s.check("https://docs.example.com/guide/private/", hops=1, seed_depth=sd) == "exclude"
    # regexes see the canonical URL
    assert s.check("https://docs.example.com/guide/x/../b.html#top", hops=1, seed_depth=sd) is None


def test_scope_allowed_domains_rules() -> None:
    s = Scope(["http://a.org/"], allowed_domains=["Example.COM", "bücher.de.", "[::1]"])
    assert s.allowed_domains == ("example.com", "xn--bcher-kva.de", "::1")
    assert s.check("http://www.example.com:8080/", hops=0, seed_depth=1) == "off-port"
    assert s.check("http://www.example.com/", hops=0, seed_depth=1) is None
    assert s.check("http://xn--bcher-kva.de/", hops=0, seed_depth=1) is None
    assert s.check("http://bücher.de./x", hops=0, seed_depth=1) is None
    assert s.check("http://[::1]/", hops=0, seed_depth=1) is None
    assert s.check("http://a.org/", hops=0, seed_depth=1) == "off-site"  # seeds do not add domains


@pytest.mark.parametrize("kwargs, key, bad", [
    ({"exclude": [r"ok", r"(unclosed"]}, "exclude", "(unclosed"),
    ({"include": [r"[z-a]"]}, "include", "[z-a]"),
    ({"restrict": r"*"}, "restrict", "*"),
    ({"path_depth": "deep"}, "path_depth", "deep"),
    ({"max_hops": -1}, "max_hops", "-1"),
    ({"allowed_domains": ["http://x.org/"]}, "allowed_domains", "http://x.org/"),
    ({"allowed_domains": ["x.org:8080"]}, "allowed_domains", "x.org:8080"),
])
def test_scope_errors_name_the_key_and_value(kwargs, key: str, bad: str) -> None:
    with pytest.raises(ValueError) as ei:
        Scope(["http://x.org/"], **kwargs)
    msg = str(ei.value)
    assert msg.startswith(f"{key}: ")
    assert bad in msg


def test_scope_seed_errors() -> None:
    with pytest.raises(ValueError, match=r"^seeds: at least one"):
        Scope([])
    with pytest.raises(ValueError, match=r"^seeds: bad seed URL 'ftp://x.org/'"):
        Scope(["http://x.org/", "ftp://x.org/"])


# -- the query in the document's encoding (WHATWG URL Standard, query state) ------------------------
@pytest.mark.parametrize("url, encoding, expected", [
    ("http://h.test/s?q=été", "cp1252", "http://h.test/s?q=%E9t%E9"),
    ("http://h.test/s?q=%E9t%E9", "cp1252", "http://h.test/s?q=%E9t%E9"),       # written pre-encoded
    ("http://h.test/s?q=%e9t%e9", "cp1252", "http://h.test/s?q=%E9t%E9"),
    ("http://h.test/s?q=été", "windows-1252", "http://h.test/s?q=%E9t%E9"),
    ("http://h.test/s?q=été", "iso-8859-1", "http://h.test/s?q=%E9t%E9"),
    ("http://h.test/s?q=€", "cp1252", "http://h.test/s?q=%80"),
    ("http://h.test/pé/s?q=é", "cp1252", "http://h.test/p%C3%A9/s?q=%E9"),     # the path is UTF-8
    ("http://h.test/s?q=日", "cp1252", "http://h.test/s?q=%26%2326085%3B"),     # not encodable: &#N;
    ("http://h.test/s?q=日本", "shift_jis", "http://h.test/s?q=%93%FA%96%7B"),
    ("http://h.test/s?q=été", "utf-8", "http://h.test/s?q=%C3%A9t%C3%A9"),
    ("http://h.test/s?q=été", "utf-16-le", "http://h.test/s?q=%C3%A9t%C3%A9"),  # UTF-16: UTF-8
    ("http://h.test/s?q=été", None, "http://h.test/s?q=%C3%A9t%C3%A9"),
    ("http://h.test/s?q=été", "no-such-codec", "http://h.test/s?q=%C3%A9t%C3%A9"),
    ("http://h.test/s?b=é&a=x y#frag-é", "cp1252", "http://h.test/s?a=x+y&b=%E9"),
])
def test_canonicalize_encodes_the_query_in_the_document_encoding(url, encoding, expected) -> None:
    assert canonicalize(url, encoding) == expected
    assert canonicalize(expected) == expected  # the key is stable when read back


@pytest.mark.parametrize("url", ["http://..x/", "http://.x/y", "http://a..b:8080/", "http://" + "a" * 64 + ".test/",
                                 "http://" + ".".join(["abcdefgh"] * 29) + "/"])
def test_host_names_with_an_empty_or_over_long_label_are_refused(url):
    with pytest.raises(ValueError, match="label"):
        canonicalize(url)
    assert Scope(["http://seed.test/"]).check(url, hops=0, seed_depth=1) == "invalid"


def test_a_trailing_dot_host_is_the_same_host():
    assert canonicalize("http://Seed.Test./a") == canonicalize("http://seed.test/a") == "http://seed.test/a"
    assert host_key("https://seed.test.:8443/") == "https://seed.test:8443"
    assert Scope(["http://seed.test./"]).check("http://seed.test/x", hops=0, seed_depth=1) is None


def test_preferred_key_is_the_shorter_then_the_first() -> None:
    assert preferred_key("http://h/index.html", "http://h/") == "http://h/"
    assert preferred_key("http://h/", "http://h/index.html") == "http://h/"
    assert preferred_key("http://h/b", "http://h/a") == "http://h/a"


def test_scope_ports_are_part_of_the_site() -> None:
    # issue 18: a redirect to another port of the seed host reached other local services
    s = Scope(["http://127.0.0.1:8080/"])
    assert s.allowed_ports == {8080}
    assert s.check("http://127.0.0.1:8080/a", hops=1, seed_depth=1) is None
    for other in ("http://127.0.0.1/", "http://127.0.0.1:6379/", "https://127.0.0.1:8080/x"):
        assert s.check_site(other) == s.check(other, hops=1, seed_depth=1) == ("off-port" if ":8080" not in other
                                                                              else None)
    web = Scope(["http://example.test/"])
    assert web.allowed_ports == {80, 443}  # a site moving to https stays in scope
    assert web.check("https://example.test/a", hops=1, seed_depth=1) is None
    assert web.check("http://example.test:8443/a", hops=1, seed_depth=1) == "off-port"
    both = Scope(["http://example.test/"], allowed_ports=[80, 8443])
    assert both.check("http://example.test:8443/a", hops=1, seed_depth=1) is None
    assert both.check("https://example.test/a", hops=1, seed_depth=1) == "off-port"
    with pytest.raises(ValueError, match="allowed_ports"):
        Scope(["http://example.test/"], allowed_ports=[0])


def test_the_scope_gate_checks_a_page_a_requisite_and_a_site_file_each_by_its_rules() -> None:
    """Scope.gate (the one gate the scheduler applies when queueing and before fetching): a page
    by scope then traps, a requisite by the requisite scope then traps, a sitemap or robots.txt
    by the site only."""
    scope = Scope(["http://site.example/docs/"], include=["/docs/"], max_hops=2, requisites=True)
    loop = "http://site.example/docs/a/b/a/b/"
    assert scope.gate("http://site.example/docs/x", 1, 1) is None
    assert scope.gate("http://site.example/docs/x", 3, 1) == "max-hops"
    assert scope.gate("http://site.example/blog/x", 1, 1) == "include"
    assert scope.gate(loop, 1, 1) == "repeated-path"
    assert scope.gate("http://site.example/static/a.png", 5, 1, "requisite") is None  # no hops, no include
    assert scope.gate("http://site.example/static/" + "a" * 2000 + ".png", 0, 1, "requisite") == "url-too-long"
    assert scope.gate("http://elsewhere.example/a.png", 0, 1, "requisite") == "off-site"
    assert scope.gate("http://site.example/sitemap.xml", 0, 1, "sitemap") is None  # outside include
    assert scope.gate(loop, 9, 1, "robots") is None  # a site file: no traps, no hops
    assert scope.gate("http://elsewhere.example/sitemap.xml", 0, 1, "sitemap") == "off-site"
