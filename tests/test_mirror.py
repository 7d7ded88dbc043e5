"""The on-disk mirror: layout, hostile URLs kept inside the root, atomic writes, mtimes, removal."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from indexerd.sources.web.mirror import Mirror
from indexerd.sources.web.urls import canonicalize

UTC = timezone.utc


def inside(root: Path, path: Path) -> bool:
    real_root = os.path.realpath(root)
    return os.path.commonpath([real_root, os.path.realpath(path)]) == real_root


def rel(m: Mirror, url: str) -> str:
    return m.path_for(url).relative_to(m.root).as_posix()


@pytest.mark.parametrize("url, want", [
    ("http://Example.com", "example.com/index.html"),
    ("http://example.com/", "example.com/index.html"),
    ("http://example.com/a/", "example.com/a/index.html"),
    ("http://example.com/index.html", "example.com/%69ndex.html"),
    ("http://example.com/a", "example.com/a%"),
    ("http://example.com/a/b", "example.com/a/b%"),
    ("http://example.com/doc.html", "example.com/doc.html"),
    ("http://example.com/v1.2/x.html", "example.com/v1.2%/x.html"),
    ("https://example.com:443/x.html", "example.com/x.html"),
    ("http://example.com:8080/x.html", "example.com_8080/x.html"),
    ("http://ex_ample.com/x.html", "ex%5Fample.com/x.html"),
    ("http://bücher.de/caf%C3%A9.html", "xn--bcher-kva.de/café.html"),
    ("http://example.com/cal?m=2020-01", "example.com/cal@m=2020-01"),
    ("http://example.com/d/?q=1", "example.com/d/index.html@q=1"),
    ("http://example.com/a?x=1/../..", "example.com/a@x=1%2F..%2F.."),
    ("http://example.com/x@y.html", "example.com/x%40y.html"),
    ("http://example.com/a//b.html", "example.com/a/%/b.html"),
    ("http://example.com/%25ff.html", "example.com/%25ff.html"),
    ("http://example.com/%ff%fe.html", "example.com/%FF%FE.html"),
    ("http://example.com/a;b.html", "example.com/a;b.html"),
    ("http://example.com/a%3bb.html", "example.com/a%3Bb.html"),
    ("http://example.com/a%/b.html", "example.com/a%25/b.html"),
])
def test_layout(tmp_path: Path, url: str, want: str) -> None:
    assert rel(Mirror(tmp_path), url) == want


HOSTILE = [
    "http://example.com/../../etc/passwd",
    "http://example.com/%2e%2e/%2e%2e/x",
    "http://example.com/%2E%2E%2F%2E%2E%2Fx",
    "http://example.com/a/%2F..%2Fb",
    "http://example.com/%00x",
    "http://example.com/\\..\\x",
    "http://example.com/%5C..%5Cx",
    "http://example.com/" + "a" * 5000,
    "http://example.com/" + "%C3%A9" * 300 + ".html",
    "http://example.com/%ff%fe",
    "http://example.com/a?x=1/../..",
    "http://example.com/?/../../../etc/passwd",
    "http://example.com/%0a%0d%09%7f",
]

#: hosts with an empty label: canonicalize refuses them (RFC 1035 §2.3.4), so the mirror never
#: maps them to a path (its methods raise ValueError, as for any URL canonicalize refuses)
REFUSED = ["http://../x", "http://.example.com/x"]


@pytest.mark.parametrize("url", HOSTILE)
def test_hostile_urls_stay_inside_root(tmp_path: Path, url: str) -> None:
    root = tmp_path / "mirror"
    m = Mirror(root)
    p = m.write(url, b"data")
    assert p == m.path_for(url)
    assert inside(root, p)
    assert p.read_bytes() == b"data"
    assert all(len(part.encode("utf-8", "surrogateescape")) <= 200 for part in p.relative_to(root).parts)
    assert sorted(os.listdir(tmp_path)) == ["mirror"]  # nothing written beside the root
    assert m.exists(url)


@pytest.mark.parametrize("url", REFUSED)
def test_urls_canonicalize_refuses_are_refused_and_nothing_is_written(tmp_path: Path, url: str) -> None:
    root = tmp_path / "mirror"
    m = Mirror(root)
    for call in (m.write, m.path_for, m.exists, m.remove):
        args = (url, b"data") if call == m.write else (url,)
        with pytest.raises(ValueError, match="bad host name"):
            call(*args)
    assert not root.exists()


def test_hostile_examples_map_to_exact_names(tmp_path: Path) -> None:
    m = Mirror(tmp_path)
    assert rel(m, "http://example.com/../../etc/passwd") == "example.com/etc/passwd%"
    assert rel(m, "http://example.com/%2e%2e/%2e%2e/x") == "example.com/x%"
    assert rel(m, "http://example.com/a/%2F..%2Fb") == "example.com/a/%2F..%2Fb"
    assert rel(m, "http://example.com/%00x") == "example.com/%00x%"
    assert rel(m, "http://example.com/%ff%fe") == "example.com/%FF%FE%"
    long = rel(m, "http://example.com/" + "a" * 300 + ".html")
    assert long.startswith("example.com/" + "a" * 100) and long.endswith(".html") and "%~" in long
    assert rel(m, "http://example.com/" + "a" * 301 + ".html") != long


def test_file_and_directory_never_clash_in_either_order(tmp_path: Path) -> None:
    m = Mirror(tmp_path)
    for order in (["/a", "/a/b", "/a/", "/a/b/"], ["/a/b/", "/a/", "/a/b", "/a"]):
        host = f"h{len(os.listdir(tmp_path))}.test"
        for path in order:
            m.write(f"http://{host}{path}", path.encode())
        for path in order:
            assert m.path_for(f"http://{host}{path}").read_bytes() == path.encode()
            assert m.exists(f"http://{host}{path}")


def test_write_replaces_atomically_and_leaves_no_temp_files(tmp_path: Path) -> None:
    m = Mirror(tmp_path)
    p = m.write("http://x.test/a.html", b"one")
    p2 = m.write("http://x.test/a.html", b"two")
    assert p == p2 and p.read_bytes() == b"two"
    assert os.listdir(p.parent) == ["a.html"]


def test_mtime_is_set_exactly(tmp_path: Path) -> None:
    m = Mirror(tmp_path)
    t = datetime(2024, 2, 29, 12, 30, 5, tzinfo=UTC)
    p = m.write("http://x.test/a.html", b"x", mtime=t)
    st = p.stat()
    assert st.st_mtime == t.timestamp() == 1709209805.0
    assert st.st_atime == t.timestamp()
    t2 = datetime(2001, 1, 1, 1, 0, 0, 123456, tzinfo=timezone(timedelta(hours=1)))
    p = m.write("http://x.test/b.html", b"x", mtime=t2)
    assert p.stat().st_mtime_ns == 978307200_123456000
    with pytest.raises(ValueError, match="timezone-aware"):
        m.write("http://x.test/c.html", b"x", mtime=datetime(2024, 1, 1))
    assert not m.exists("http://x.test/c.html")


def test_remove_prunes_empty_dirs_up_to_the_host(tmp_path: Path) -> None:
    m = Mirror(tmp_path)
    m.write("http://x.test/a/b/c/d.html", b"1")
    m.write("http://x.test/a/e.html", b"2")
    assert m.remove("http://x.test/a/b/c/d.html") is True
    assert not (tmp_path / "x.test" / "a" / "b").exists()
    assert (tmp_path / "x.test" / "a" / "e.html").read_bytes() == b"2"
    assert m.remove("http://x.test/a/b/c/d.html") is False
    assert m.remove("http://x.test/a/e.html") is True
    assert os.listdir(tmp_path) == ["x.test"] and os.listdir(tmp_path / "x.test") == []
    assert m.remove("http://nowhere.test/x") is False
    assert Mirror(tmp_path / "missing").remove("http://x.test/") is False
    assert Mirror(tmp_path / "missing").exists("http://x.test/") is False


def test_symlink_planted_inside_the_mirror_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "mirror"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.html").write_bytes(b"keep")
    m = Mirror(root)
    m.write("http://x.test/ok.html", b"ok")
    os.symlink(outside, root / "x.test" / "evil")  # a directory 'evil' -> outside
    with pytest.raises(ValueError, match="not a real directory"):
        m.write("http://x.test/evil/keep.html", b"pwned")
    with pytest.raises(ValueError, match="not a real directory"):
        m.remove("http://x.test/evil/keep.html")
    assert m.exists("http://x.test/evil/keep.html") is False
    assert (outside / "keep.html").read_bytes() == b"keep"
    assert sorted(os.listdir(outside)) == ["keep.html"]
    os.symlink(outside, root / "y.test")  # a whole host dir -> outside
    with pytest.raises(ValueError):
        m.write("http://y.test/keep.html", b"pwned")
    assert (outside / "keep.html").read_bytes() == b"keep"
    # a symlink at the file's own name is replaced, never written through
    os.symlink(outside / "keep.html", root / "x.test" / "f.html")
    assert m.exists("http://x.test/f.html") is False
    p = m.write("http://x.test/f.html", b"new")
    assert not p.is_symlink() and p.read_bytes() == b"new"
    assert (outside / "keep.html").read_bytes() == b"keep"


def test_root_may_be_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    m = Mirror(tmp_path / "link")
    m.write("http://x.test/a.html", b"a")
    assert (tmp_path / "real" / "x.test" / "a.html").read_bytes() == b"a"


def test_bad_urls(tmp_path: Path) -> None:
    m = Mirror(tmp_path)
    for url in ("ftp://x.test/a", "http:///a", "http://x.test:99999/"):
        with pytest.raises(ValueError):
            m.path_for(url)
    assert os.listdir(tmp_path) == []


_SEG = st.lists(st.sampled_from(
    ["a", "b", "A", ".", "..", "%2e", "%2E%2e", "%2F", "%5C", "\\", "%00", "%0a", "%ff", "%25", "%",
     "@", "%40", "index.html", "index", ".html", "x.html", "é", "%C3%A9", "~", "%7e", " ", "?", "&", "=",
     "a" * 120, "%ff" * 40, ";", "%3B", "%3b", ":", "#"]), max_size=4).map("".join)
_PATH = st.lists(_SEG, min_size=0, max_size=5).map("/".join)
_QUERY = st.one_of(st.just(""), st.lists(st.sampled_from(["a=1", "b", "x=/../", "%2F", "&", "="]),
                                         max_size=3).map(lambda xs: "?" + "&".join(xs)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_PATH, _QUERY, st.booleans()), min_size=1, max_size=8))
def test_property_inside_root_and_injective(tmp_path: Path, items) -> None:
    m = Mirror(tmp_path / "m")
    seen: dict[Path, str] = {}
    for path, query, slash in items:
        url = canonicalize("http://x.test/" + path + ("/" if slash else "") + query)
        p = m.path_for(url)
        assert inside(tmp_path / "m", p)
        assert all(part not in ("", ".", "..") for part in p.relative_to(m.root).parts)
        assert seen.setdefault(p, url) == url, f"{url} and {seen[p]} share {p}"
    # files and directories never collide: no file path is a prefix of another one
    paths = list(seen)
    for a in paths:
        for b in paths:
            assert a == b or a not in b.parents


def test_property_writes_keep_every_page(tmp_path: Path) -> None:
    """Write a batch of clashing URLs in one mirror and read every page back."""
    m = Mirror(tmp_path)
    urls = ["http://x.test/a", "http://x.test/a/", "http://x.test/a/b", "http://x.test/a.b",
            "http://x.test/a.b/c", "http://x.test/a/index.html", "http://x.test/a%25",
            "http://x.test/a?q=1", "http://x.test/a/?q=1", "http://x.test/a//", "http://x.test/a/%2F",
            "http://x.test/%2E%2E", "http://x.test/a%", "http://x.test/a%40b", "http://x.test/a@b",
            "http://x.test/a;b", "http://x.test/a%3Bb", "http://x.test/a%253Bb"]
    canon = {canonicalize(u) for u in urls}
    for u in sorted(canon):
        m.write(u, u.encode())
    for u in canon:
        assert m.path_for(u).read_bytes() == u.encode()


def test_adjust_extension_keeps_an_html_page_as_a_file_a_browser_opens_as_a_page(tmp_path: Path) -> None:
    """wget's --adjust-extension (on with convert_links): an HTML page whose file name does not
    end in .html/.htm is kept as <name>%.html (a name no URL's plain file has); a page kept
    before under its plain name is replaced; reads, removals and file_for find either name."""
    m = Mirror(tmp_path, adjust_extension=True)
    intro = "http://h/docs/intro"
    m.write(intro, b"old, kept before the upgrade")        # not HTML (or an older mirror): plain name
    assert m.file_for(intro) == tmp_path / "h" / "docs" / "intro%"
    m.write(intro, b"<html>page</html>", html=True)
    assert m.file_for(intro) == tmp_path / "h" / "docs" / "intro%.html"
    assert not (tmp_path / "h" / "docs" / "intro%").exists()
    assert m.read(intro)[0] == b"<html>page</html>" and m.exists(intro)
    for url, name in (("http://h/page.php", "page.php%.html"), ("http://h/cal?m=1", "cal@m=1%.html"),
                      ("http://h/a.html", "a.html"), ("http://h/d/", "d/index.html")):
        m.write(url, b"<p>x</p>", html=True)
        assert m.file_for(url) == tmp_path / "h" / name, url
    m.write("http://h/page.php%25.html", b"another URL")     # its own file, never the adjusted one
    assert m.read("http://h/page.php")[0] == b"<p>x</p>"
    assert m.remove(intro) and m.file_for(intro) is None and not (tmp_path / "h" / "docs").exists()
    plain = Mirror(tmp_path / "plain")                       # off: the html flag changes nothing
    plain.write(intro, b"<html>page</html>", html=True)
    assert plain.file_for(intro) == tmp_path / "plain" / "h" / "docs" / "intro%"
