"""The search page in a real headless browser: Debian's ``chromium`` driven by Playwright,
against a real ``indexerd run`` with its HTTP listener (tests/daemonhttp.py).

The browser is required: a machine without ``/usr/bin/chromium`` (``apt-get install
chromium``; .ci/run installs it) or without the ``playwright`` package FAILS here, it does not
skip.  Playwright's own browser downloads are not used.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from daemonhttp import BIRD_DOCS, HOSTILE_TEXT, HOSTILE_TITLE, HttpDaemon, serving, short_base
from httpsite import site as site_fixture

site = site_fixture


REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: the README's screenshot is refreshed when INDEXERD_SCREENSHOT=docs/search-page.png is set
SCREENSHOT_ENV = "INDEXERD_SCREENSHOT"


@pytest.fixture(scope="module")
def daemon():
    with serving(HttpDaemon(short_base())) as d:
        yield d


@pytest.fixture(scope="module")
def browser_context():
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install chromium (.ci/run does)"
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="ixh-chromium-")
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                   args=CHROMIUM_ARGS, viewport={"width": 1000, "height": 900})
        try:
            yield ctx
        finally:
            ctx.close()
            shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser_context):
    pg = browser_context.new_page()
    dialogs: list[str] = []
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pg.dialogs = dialogs
    yield pg
    pg.close()


def _titles(page) -> list[str]:
    return page.locator("#hits li.hit h2.title").all_inner_texts()


def _search(page, daemon, query: str) -> None:
    page.goto(daemon.url + "/")
    page.fill("#q", query)
    page.press("#q", "Enter")
    page.wait_for_selector("#summary, #error")


def test_type_a_query_and_see_the_top_hit(daemon, page):
    _search(page, daemon, "falcon")
    assert _titles(page)[0] == "Peregrine falcon"
    first = page.locator("#hits li.hit").first
    assert first.locator(".path").inner_text() == str(daemon.notes / "falcon.html")
    assert first.locator(".source").inner_text() == "notes"
    assert first.locator(".media-type").inner_text() == "text/html"
    assert first.locator(".date").inner_text() == "2024-03-01T12:00:00Z"
    marks = [m.lower() for m in first.locator(".snippet mark").all_inner_texts()]
    assert marks and set(marks) == {"falcon"}
    summary = page.inner_text("#summary")
    assert re.match(r"^2 hits in \d+\.\d{3} s$", summary), summary
    # a file: key opens nothing in a browser: its title opens the preview, the query passed along
    href = urlsplit(first.locator("h2.title a").get_attribute("href"))
    assert (href.path, parse_qs(href.query)) == \
        ("/doc", {"key": [(daemon.notes / "falcon.html").as_uri()], "q": ["falcon"]})


def test_filters_by_source_media_type_and_date(daemon, page):
    _search(page, daemon, "bird")
    assert page.inner_text("#summary").startswith(f"{BIRD_DOCS} hits")
    page.click("details.filters summary")
    page.select_option("#source", "notes")
    page.click("details.filters button")
    page.wait_for_selector("#summary")
    sources = set(page.locator("#hits .source").all_inner_texts())
    assert sources == {"notes"}
    assert page.inner_text("#summary").startswith(f"{BIRD_DOCS // 2} hits")   # odd i: notes
    page.select_option("#source", "")
    page.select_option("#type", "text/markdown")
    page.click("details.filters button")
    page.wait_for_selector("#summary")
    expected_md = len([i for i in range(BIRD_DOCS) if i % 3 == 0])
    assert page.inner_text("#summary").startswith(f"{expected_md} hits")
    assert set(page.locator("#hits .media-type").all_inner_texts()) == {"text/markdown"}
    page.select_option("#type", "")
    page.fill("#from", "2022-01-01")
    page.fill("#to", "2022-12-31")
    page.click("details.filters button")
    page.wait_for_selector("#summary")
    in_2022 = len([i for i in range(BIRD_DOCS) if 2021 + i % 4 == 2022])
    assert page.inner_text("#summary").startswith(f"{in_2022} hits")
    assert all(d.startswith("2022-") for d in page.locator("#hits .date").all_inner_texts())
    page.fill("#from", "")
    page.fill("#to", "")
    page.select_option("#sort", "date")
    page.click("details.filters button")
    page.wait_for_selector("#summary")
    dates = page.locator("#hits .date").all_inner_texts()
    assert dates == sorted(dates, reverse=True) and dates[0].startswith("2024-")


def test_paging(daemon, page):
    _search(page, daemon, "bird")
    assert f"{BIRD_DOCS} hits" in page.inner_text("#summary") and "page 1 of 3" in page.inner_text("#summary")
    first_page = _titles(page)
    assert len(first_page) == 10
    page.click("#next")
    page.wait_for_selector("#summary")
    assert "page 2 of 3" in page.inner_text("#summary")
    assert page.get_attribute("#hits", "start") == "11"
    second_page = _titles(page)
    assert len(second_page) == 10 and not set(second_page) & set(first_page)
    page.click("nav.pages >> text=3")
    page.wait_for_selector("#summary")
    third = _titles(page)
    assert len(third) == BIRD_DOCS - 20 and page.locator("#next").count() == 0
    assert len(set(first_page + second_page + third)) == BIRD_DOCS
    page.click("#prev")
    page.wait_for_selector("#summary")
    assert _titles(page) == second_page


def test_document_page(daemon, page):
    _search(page, daemon, "falcon")
    page.locator("#hits li.hit").first.locator("a.doc").click()
    page.wait_for_selector("#doc-title")
    assert page.inner_text("#doc-title") == "Peregrine falcon"
    why = page.inner_text("#explanation")
    assert "last-modified 2024-03-01T12:00:00Z came from mtime" in why
    assert "last decision at" in why and "new" in why
    facts = page.inner_text("#facts")
    assert "notes" in facts and "text/html" in facts


def test_a_file_hit_opens_its_text_with_the_matches_marked_and_downloads(daemon, page):
    _search(page, daemon, "falcon")
    page.locator("#hits li.hit").first.locator("h2.title a").click()
    page.wait_for_selector("#preview")
    assert page.inner_text("#doc-title") == "Peregrine falcon"
    text = page.inner_text("#preview")
    assert "The peregrine falcon is the fastest falcon; a falcon stoops at prey." in text
    assert len([line for line in text.splitlines() if line.strip()]) > 1  # its lines kept, not one run
    marks = page.locator("#preview mark").all_inner_texts()
    assert [m.lower() for m in marks] == ["falcon"] * len(re.findall(r"\bfalcon\b", text, re.I))
    assert len(marks) == 6                       # the heading's and the paragraph's five
    assert page.inner_text("#preview-summary").startswith("6 matches of falcon marked")
    with page.expect_download() as info:
        page.click("#download")
    download = info.value
    assert download.suggested_filename == "falcon.html"
    assert Path(download.path()).read_bytes() == (daemon.notes / "falcon.html").read_bytes()


def test_a_download_is_an_attachment_and_only_of_a_tree(daemon):
    hostile = daemon.notes / "hostile.html"       # a stored HTML file with <script>: never our page
    status, headers, body = daemon.get("/raw?" + urlencode({"key": hostile.as_uri()}))
    assert (status, body) == (200, hostile.read_bytes())
    assert headers["Content-Type"] == "text/html"
    assert headers["Content-Disposition"] == "attachment; filename=hostile.html"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    leak = daemon.notes / "leak.txt"              # a symlink out of the tree, made after the start
    leak.symlink_to(daemon.base / "daemon.log")
    try:
        for key in ("file:///etc/passwd", leak.as_uri(), (daemon.base / "indexerd.toml").as_uri(),
                    "https://example.com/", (daemon.notes / "birds").as_uri()):
            status, _, body = daemon.get("/raw?" + urlencode({"key": key}), check=False)
            assert status == 404, (key, status)
            assert b"daemon" not in body.lower() or b"no file of a configured tree" in body
    finally:
        leak.unlink()


def test_only_in_this_folder_narrows_to_a_file_hits_folder(daemon, page):
    _search(page, daemon, "bird")
    first = page.locator("#hits li.hit").first
    folder = str(Path(first.locator(".path").inner_text()).parent)
    first.locator("a.folder").click()
    page.wait_for_selector("#summary")
    assert page.input_value("#q") == f'bird dir:"{folder}"'
    in_folder = sum(1 for p in Path(folder).iterdir() if p.name.startswith("bird-"))
    assert page.inner_text("#summary").startswith(f"{in_folder} hits") and 0 < in_folder < BIRD_DOCS
    paths = page.locator("#hits .path").all_inner_texts()
    assert page.locator("#hits a.folder").count() == 0       # narrowed to it already
    if in_folder > 10:
        page.click("#next")
        page.wait_for_selector("#summary")
        paths += page.locator("#hits .path").all_inner_texts()
    assert len(paths) == in_folder and all(p.startswith(folder + "/") for p in paths)


def test_the_counts_per_media_type_and_source_narrow_the_query(daemon, page):
    """Issue 34: facets beside the hits; clicking one adds its field to the query."""
    _search(page, daemon, "bird")
    facets = page.locator("#facets")
    assert facets.is_visible()
    markdown = len([i for i in range(BIRD_DOCS) if i % 3 == 0])
    types = page.locator("#facet-media_type li").all_inner_texts()
    assert [" ".join(t.split()) for t in types] == [f"text/plain {BIRD_DOCS - markdown}", f"text/markdown {markdown}"]
    sources = page.locator("#facet-source li").all_inner_texts()
    assert [" ".join(t.split()) for t in sources] == [f"papers {BIRD_DOCS - BIRD_DOCS // 2}", f"notes {BIRD_DOCS // 2}"]
    # beside the hits, not above or below them
    f_box, h_box = facets.bounding_box(), page.locator("#hits").bounding_box()
    assert f_box["x"] > h_box["x"] + h_box["width"] - 1 and f_box["y"] < h_box["y"] + h_box["height"]
    page.click('#facet-media_type a[data-value="text/markdown"]')
    page.wait_for_selector("#summary")
    assert page.input_value("#q") == "bird media_type:text/markdown"
    assert page.inner_text("#summary").startswith(f"{markdown} hits")
    assert set(page.locator("#hits .media-type").all_inner_texts()) == {"text/markdown"}
    assert page.locator('#facet-media_type strong[data-value="text/markdown"]').count() == 1  # chosen: no link
    page.click('#facet-source a[data-value="notes"]')
    page.wait_for_selector("#summary")
    assert page.input_value("#q") == "bird media_type:text/markdown source:notes"
    notes_md = len([i for i in range(BIRD_DOCS) if i % 3 == 0 and i % 2])
    assert page.inner_text("#summary").startswith(f"{notes_md} hits")
    assert set(page.locator("#hits .source").all_inner_texts()) == {"notes"}


def test_a_query_that_finds_nothing_suggests_one_and_links_the_query_help(daemon, page):
    """Issue 34: 0 hits -> "did you mean" from the index's own words, and the query help."""
    _search(page, daemon, "peregrne falcn")
    assert page.inner_text("#summary").startswith("0 hits")
    assert page.locator("#facets").count() == 0
    assert page.inner_text("#suggested") == "peregrine falcon"
    assert "(1 hit)" in page.inner_text("#suggestion")
    page.click("#suggested")
    page.wait_for_selector("#summary")
    assert page.input_value("#q") == "peregrine falcon"
    assert _titles(page) == ["Peregrine falcon"]
    _search(page, daemon, "zzyzx")
    assert page.locator("#suggestion").count() == 0
    page.click("#query-help")
    page.wait_for_selector("#help")
    assert "dir:/srv/docs" in page.inner_text("main") and "media_type:text/html" in page.inner_text("main")


def test_a_rebuild_in_progress_is_said_on_the_page(page, site):
    """Issue 34: while the index is rebuilt (another text analysis), the page says the answer
    is partial, with the pass's progress, and shows what is indexed so far; once the pass
    ends the notice is gone."""
    from test_partial_answers import HeldCrawl

    base = Path(tempfile.mkdtemp(prefix="ixr"))
    crawl = HeldCrawl(base, site)
    try:
        crawl.gate.set()
        crawl.start()
        crawl.await_pass_end()
        crawl.stop()
        crawl.gate.clear()
        crawl.site.log.clear()
        crawl.write_config("fold_diacritics = false")   # another text analysis: the index is rebuilt
        crawl.start()
        crawl.await_held()
        url = f"http://127.0.0.1:{crawl.port}/"
        page.goto(url)
        page.fill("#q", "kestrel")
        page.press("#q", "Enter")
        page.wait_for_selector("#summary")
        notice = page.inner_text("#partial")
        assert notice.startswith("The index is incomplete (rebuilding from the sources") and "site" in notice, notice
        assert _titles(page) == ["Start"]
        page.goto(url + "?q=osprey")                      # not indexed yet: none, and said why
        assert page.inner_text("#summary").startswith("0 hits") and page.locator("#partial").count() == 1
        crawl.gate.set()
        crawl.await_pass_end()
        page.goto(url + "?q=osprey")
        assert page.locator("#partial").count() == 0 and _titles(page) == ["Held"]
    finally:
        crawl.gate.set()
        crawl.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_malformed_query_says_so(daemon, page):
    _search(page, daemon, '"unbalanced')
    assert "unbalanced double quote" in page.inner_text("#error")
    assert page.input_value("#q") == '"unbalanced'


def test_hostile_document_runs_nothing(daemon, page):
    _search(page, daemon, "kestrel")
    titles = _titles(page)
    assert HOSTILE_TITLE in titles                             # shown as text, whole
    snippets = page.locator("#hits .snippet").all_inner_texts()
    assert any("<script>" in s and "onerror=" in s for s in snippets)
    assert page.locator("#hits img").count() == 0 and page.locator("#hits script").count() == 0
    page.locator("#hits li.hit", has_text=HOSTILE_TITLE).first.locator("a.doc").click()
    page.wait_for_selector("#doc-title")
    assert page.inner_text("#doc-title") == HOSTILE_TITLE
    assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
    assert page.evaluate("window.__pwned === undefined")
    assert page.dialogs == []
    assert HOSTILE_TEXT.split()[0] == "kestrel"


def test_usable_on_a_phone_and_screenshot(daemon, browser_context, tmp_path):
    pg = browser_context.new_page()
    pg.set_viewport_size({"width": 390, "height": 844})
    try:
        _search(pg, daemon, "falcon")
        width = pg.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page scrolls sideways on a phone ({width} px)"
    finally:
        pg.close()
    pg = browser_context.new_page()
    pg.set_viewport_size({"width": 1000, "height": 760})
    try:
        _search(pg, daemon, "bird song")
        shot = Path(os.environ.get(SCREENSHOT_ENV) or tmp_path / "search-page.png")
        shot.parent.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(shot))
        assert shot.stat().st_size > 10_000
    finally:
        pg.close()
