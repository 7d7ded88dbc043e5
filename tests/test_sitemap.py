"""Sitemap parsing: urlset, sitemapindex, gzip, and hostile input refused with bounded memory."""

from __future__ import annotations

import gzip
import time
import tracemalloc
import zlib

import pytest

from indexerd.sources.web.sitemap import SitemapEntry, parse_sitemap

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"

URLSET = f"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="{NS}" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
  <url>
    <loc>  https://example.test/a?x=1&amp;y=2 </loc>
    <lastmod>2024-01-02</lastmod>
    <changefreq>weekly</changefreq>
    <image:image><image:loc>https://example.test/img.png</image:loc></image:image>
  </url>
  <url><loc>https://example.test/b</loc><lastmod> 2024-01-02T03:04:05+01:00 </lastmod></url>
  <url><loc>https://example.test/c</loc><lastmod>2024-01-02T03:04Z</lastmod></url>
  <url><loc>https://example.test/d</loc><lastmod>  </lastmod></url>
  <url><loc>https://example.test/e</loc><lastmod>yesterday</lastmod></url>
  <url><lastmod>2024-01-01</lastmod></url>
  <url><loc></loc></url>
  <url><loc>https://example.test/caf\u00e9</loc></url>
</urlset>
""".encode()

WANT_PAGES = [
    SitemapEntry("https://example.test/a?x=1&y=2", "2024-01-02", "weekly"),
    SitemapEntry("https://example.test/b", "2024-01-02T03:04:05+01:00"),
    SitemapEntry("https://example.test/c", "2024-01-02T03:04Z"),
    SitemapEntry("https://example.test/d", None),
    SitemapEntry("https://example.test/e", "yesterday"),
    SitemapEntry("https://example.test/caf\u00e9", None),
]


def test_urlset_with_namespace() -> None:
    assert parse_sitemap(URLSET) == (WANT_PAGES, [])


def test_urlset_without_namespace_bom_and_leading_space() -> None:
    data = b"\xef\xbb\xbf \n\t" + URLSET.replace(f' xmlns="{NS}"'.encode(), b"")
    assert parse_sitemap(data) == (WANT_PAGES, [])


def test_entries_in_another_namespace_are_ignored() -> None:
    data = (f'<urlset xmlns="{NS}" xmlns:o="urn:other"><o:url><loc>https://x.test/1</loc></o:url>'
            f'<url><o:loc>https://x.test/2</o:loc><loc>https://x.test/3</loc></url></urlset>').encode()
    assert parse_sitemap(data) == ([SitemapEntry("https://x.test/3")], [])


def test_sitemapindex() -> None:
    data = f"""<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="{NS}">
  <sitemap><loc>https://example.test/s1.xml.gz</loc><lastmod>2004-10-01T18:23:17+00:00</lastmod></sitemap>
  <sitemap><loc>https://example.test/s2.xml</loc></sitemap>
</sitemapindex>""".encode()
    assert parse_sitemap(data) == ([], [
        SitemapEntry("https://example.test/s1.xml.gz", "2004-10-01T18:23:17+00:00"),
        SitemapEntry("https://example.test/s2.xml", None),
    ])


def test_gzip_and_concatenated_members(tmp_path) -> None:
    path = tmp_path / "sitemap.xml.gz"
    path.write_bytes(gzip.compress(URLSET))
    assert parse_sitemap(path.read_bytes()) == (WANT_PAGES, [])
    half = len(URLSET) // 2
    two = gzip.compress(URLSET[:half]) + gzip.compress(URLSET[half:])
    assert parse_sitemap(two) == (WANT_PAGES, [])


def test_max_entries_stops_early() -> None:
    body = "".join(f"<url><loc>https://x.test/{i}</loc></url>" for i in range(10))
    data = f'<urlset xmlns="{NS}">{body}'.encode() + b"<<< garbage after the limit"
    pages, _ = parse_sitemap(data, max_entries=3)
    assert pages == [SitemapEntry(f"https://x.test/{i}") for i in range(3)]


def test_plain_data_over_max_bytes() -> None:
    with pytest.raises(ValueError, match="sitemap larger than 100 bytes"):
        parse_sitemap(URLSET, max_bytes=100)


def _gzip_stream(prefix: bytes, filler: bytes, total: int) -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [z.compress(prefix)]
    chunk = filler * (1024 * 1024 // len(filler))
    for _ in range(total // len(chunk)):
        out.append(z.compress(chunk))
    out.append(z.flush())
    return b"".join(out)


@pytest.mark.parametrize("prefix, filler", [
    (b"", b"\0"),  # 200 MB of zeros: refused at the first bytes (not XML)
    (f'<urlset xmlns="{NS}">'.encode(), b" "),  # valid-looking: refused at max_bytes
    (f'<urlset xmlns="{NS}"><url><loc>'.encode(), b"a"),  # one endless <loc>
])
def test_gzip_bomb_is_refused_quickly_with_bounded_memory(tmp_path, prefix: bytes, filler: bytes) -> None:
    path = tmp_path / "bomb.xml.gz"
    path.write_bytes(_gzip_stream(prefix, filler, 200 * 1024 * 1024))
    data = path.read_bytes()
    assert len(data) < 1024 * 1024
    tracemalloc.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(ValueError) as ei:
            parse_sitemap(data, max_bytes=8 * 1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.monotonic() - t0 < 10
    if filler == b" ":
        assert str(ei.value) == "sitemap larger than 8388608 bytes (decompressed)"
    # the endless <loc> keeps its text (up to max_bytes); everything else streams
    assert peak < (24 if filler == b"a" else 4) * 1024 * 1024


def test_gzip_bomb_with_default_limit() -> None:
    data = _gzip_stream(f'<urlset xmlns="{NS}">'.encode(), b" ", 200 * 1024 * 1024)
    with pytest.raises(ValueError, match=r"^sitemap larger than 52428800 bytes"):
        parse_sitemap(data)


def test_billion_laughs_refused() -> None:
    lol = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<urlset><url><loc>&lol9;</loc></url></urlset>"""
    with pytest.raises(ValueError, match="DOCTYPE declarations are refused"):
        parse_sitemap(lol)


def test_external_entity_refused() -> None:
    xxe = b"""<?xml version="1.0"?><!DOCTYPE urlset SYSTEM "file:///etc/passwd">
<urlset><url><loc>https://x.test/</loc></url></urlset>"""
    with pytest.raises(ValueError, match="DOCTYPE"):
        parse_sitemap(xxe)


@pytest.mark.parametrize("data, words", [
    (b"<!DOCTYPE html><html><body><p>Not found</p></body></html>", "DOCTYPE"),
    (b"<html><head><title>Sitemap</title></head><body>hi</body></html>", "root element <html>"),
    (b"<html><body><p>unclosed<br></body></html>", "root element <html>"),
    (b"User-agent: *\nDisallow: /\n", "not well-formed XML"),
    (b"", "empty document"),
    (b"   \n", "empty document"),
    (b'<urlset><url><loc>https://x.test/</loc></url>', "not well-formed XML"),  # truncated
    (b"\x1f\x8bnot really gzip", "bad gzip data"),
    (gzip.compress(URLSET)[:-40], "truncated gzip data"),
    (b'<?xml version="1.0"?><rss><channel/></rss>', "root element <rss>"),
])
def test_not_a_sitemap(data: bytes, words: str) -> None:
    with pytest.raises(ValueError) as ei:
        parse_sitemap(data)
    assert str(ei.value).startswith("not a sitemap: ")
    assert words in str(ei.value)
