"""A mirrored site opens offline (issue 33): real nginx serves a site with a stylesheet that
@imports another and draws a background image, images, an ``<object>`` SVG and a script;
``indexerd index`` mirrors it; headless Chromium (Debian's, driven by Playwright) opens the
mirror's copy from the file system.  Every request the browser makes stays on ``file:``, none
fails, every image is decoded and both stylesheets apply.

nginx and Chromium are required: .ci/run installs both; a machine without them FAILS here.
"""

from __future__ import annotations

import shutil
import struct
import sys
import tempfile
import zlib
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from conftest import CLI

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from nginxsite import Nginx, NginxError  # noqa: E402


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--allow-file-access-from-files"]


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A real PNG of one colour (8-bit RGB)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def build_site(root: Path, base: str = "") -> None:
    """The site; ``base``: written before every link of the first page ("" for relative
    links, "/" for root-relative ones, which only convert_links makes work offline)."""
    files = {
        "index.html": ('<!doctype html><html><head><title>Offline</title>'
                       f'<link rel="stylesheet" href="{base}css/site.css"><script src="{base}js/app.js"></script>'
                       '</head><body><h1 id="h">offlineword</h1>'
                       f'<img id="a" src="{base}img/a.png" alt="a">'
                       f'<img id="b" src="{base}img/b.png" srcset="{base}img/b2.png 2x" alt="b">'
                       f'<object id="fig" type="image/svg+xml" data="{base}img/fig.svg"></object>'
                       f'<p class="bg">background</p><a id="next" href="{base}page.html#part">next</a>'
                       '<a id="out" href="https://example.org/x">away</a>'
                       f'<a id="missing" href="{base}nowhere/">gone</a></body></html>'),
        "page.html": ('<!doctype html><html><head><title>Page</title><link rel="stylesheet" href="css/site.css">'
                      '</head><body><p>secondpage</p><img src="img/a.png"></body></html>'),
        # root-relative in the stylesheet too when the page's links are: convert_links rewrites CSS
        "css/site.css": (f'@import "{"/css/" if base else ""}more.css";\nh1 {{ color: rgb(1, 2, 3); }}\n'
                         f'.bg {{ background-image: url("{base + "img" if base else "../img"}/bg.png"); height: 20px; }}\n'),
        "css/more.css": "p { color: rgb(4, 5, 6); }\n",
        "js/app.js": "document.documentElement.dataset.js = 'ran';\n",
        "img/fig.svg": ('<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40">'
                        '<rect width="40" height="40" fill="#0a0"/></svg>'),
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    for rel, colour in (("img/a.png", (200, 0, 0)), ("img/b.png", (0, 0, 200)),
                        ("img/b2.png", (0, 0, 100)), ("img/bg.png", (0, 200, 0))):
        (root / rel).write_bytes(png(8, 8, colour))


@pytest.mark.parametrize("links, convert", [("", False), ("/", True)], ids=["relative", "convert_links"])
def test_a_mirrored_site_opens_offline_with_its_styles_images_and_objects(tmp_path, links, convert):
    """Relative links work offline as kept; root-relative ones once convert_links rewrote them
    (the page link keeps its fragment, a link off the site stays absolute)."""
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install chromium (.ci/run does)"
    from playwright.sync_api import sync_playwright

    from indexerd.sources.web.mirror import Mirror

    root, mirror_dir, state = tmp_path / "site", tmp_path / "mirror", tmp_path / "state"
    build_site(root, links)
    try:
        site = Nginx(root, tmp_path / "nginx")
    except NginxError as e:
        pytest.fail(f"{e}: this test needs a real nginx (.ci/run installs it). Not skipping.", pytrace=False)
    with site:
        config = tmp_path / "indexerd.toml"
        config.write_text(f"""\
state_dir = "{state}"
control_socket = "{state}/indexerd.sock"
log_level = "warning"

[[sources.web]]
name = "site"
seeds = ["{site.base}/index.html"]
mirror_dir = "{mirror_dir}"
convert_links = {"true" if convert else "false"}

[sources.web.politeness]
min_delay = "0s"
""", encoding="utf-8")
        cli = CLI(state, config)
        summary = cli.index()
        assert summary["indexed"] == 2, summary
        entry = Mirror(mirror_dir).path_for(f"{site.base}/index.html")
        base = site.base
    assert entry.is_file()
    for rel in ("css/more.css", "js/app.js", "img/a.png", "img/b.png", "img/b2.png", "img/bg.png", "img/fig.svg"):
        assert (entry.parent / rel).read_bytes() == (root / rel).read_bytes(), rel
    sheet = (entry.parent / "css/site.css").read_text(encoding="utf-8")
    if convert:  # the stylesheet's root-relative URLs rewritten relative to it, the rest as served
        assert sheet == (root / "css/site.css").read_text(encoding="utf-8").replace(
            '"/css/more.css"', '"more.css"').replace('"/img/bg.png"', '"../img/bg.png"'), sheet
    else:
        assert sheet == (root / "css/site.css").read_text(encoding="utf-8")
    assert [h["url"] for h in cli.search("offlineword")] == [f"{base}/index.html"]
    if convert:  # the copy is rewritten, the index holds the server's page
        copy = entry.read_text(encoding="utf-8")
        assert 'href="css/site.css"' in copy and 'href="page.html#part"' in copy, copy
        # a link to what the pass did not keep (a 404) is absolute again
        assert 'href="https://example.org/x"' in copy and f'href="{base}/nowhere/"' in copy, copy
    else:
        assert entry.read_bytes() == (root / "index.html").read_bytes()

    profile = tempfile.mkdtemp(prefix="ixh-chromium-")
    requests: list[str] = []
    failed: list[str] = []
    try:
        with sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                       args=CHROMIUM_ARGS)
            try:
                page = ctx.new_page()
                page.on("request", lambda r: requests.append(r.url))
                page.on("requestfailed", lambda r: failed.append(r.url))
                page.goto(entry.as_uri(), wait_until="load")
                page.wait_for_load_state("networkidle")
                loaded = page.evaluate("""() => [...document.images].map(i => [i.id, i.complete && i.naturalWidth > 0])""")
                h1 = page.evaluate("getComputedStyle(document.getElementById('h')).color")
                p_colour = page.evaluate("getComputedStyle(document.querySelector('p')).color")
                bg = page.evaluate("getComputedStyle(document.querySelector('.bg')).backgroundImage")
                svg = page.evaluate("""() => { const o = document.getElementById('fig');
                    return !!(o.contentDocument && o.contentDocument.querySelector('rect')); }""")
                js = page.evaluate("document.documentElement.dataset.js || ''")
                hrefs = page.evaluate("""() => Object.fromEntries([...document.links].map(a => [a.id, a.href]))""")
                page.click("#next")
                page.wait_for_load_state("load")
                second = (page.url, page.evaluate("document.title"))
            finally:
                ctx.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert requests and all(u.startswith("file://") for u in requests), requests
    assert failed == [], failed
    assert loaded == [["a", True], ["b", True]], loaded
    assert (h1, p_colour) == ("rgb(1, 2, 3)", "rgb(4, 5, 6)")
    assert "bg.png" in bg and any(u.endswith("/img/bg.png") for u in requests), (bg, requests)
    assert svg is True and js == "ran"
    assert hrefs["next"] == (entry.parent / "page.html").as_uri() + "#part", hrefs
    assert Path(unquote(urlsplit(hrefs["next"]).path)).is_file()
    assert second == (hrefs["next"], "Page")
    assert hrefs["out"] == "https://example.org/x"
