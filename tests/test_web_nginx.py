"""End-to-end check of the web source (issue 5) against a real nginx on loopback.

The test starts nginx itself (a generated nginx.conf in a temp prefix, ``daemon off;``, listening
on 127.0.0.1 on a free port) and reads what the crawler really did from nginx's access log, one
JSON object per request: end time ($msec), $request_time, method, URI, status, $body_bytes_sent
and the conditional headers the client sent.

The site is a copy of a subset of ``../shared/corpus/python-docs`` (real Sphinx pages: their links
to pages outside the subset, ``_static/`` and ``_sources/`` dangle on purpose, so the crawler meets
404s), else pydoc HTML of ~40 stdlib modules; plus an ``index.html`` (the seed) linking every page,
so every page is reachable.  nginx is required: CI (``.ci/run``) installs it; when it is missing
this test FAILS (it does not skip).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest

from conftest import CLI, FIXED_MTIME, SHARED_CORPUS


SHARED_DOCS = SHARED_CORPUS / "python-docs"
#: A subset of the shared corpus: pages per section (every page of the small sections, a sample of
#: library/), about 150 pages in all.
SECTIONS_WHOLE = ("tutorial", "reference", "faq", "howto")
LIBRARY_EVERY = 4
#: Modules rendered with pydoc when the shared corpus is missing: the first ones go to lib/,
#: the last 10 to more/ (the directory robots.txt later disallows).
PYDOC_MODULES = [
    "json", "json.decoder", "json.encoder", "pathlib", "argparse", "shutil", "textwrap", "sqlite3",
    "http.client", "http.server", "email.utils", "email.message", "urllib.parse", "urllib.request",
    "collections", "functools", "itertools", "heapq", "bisect", "queue", "threading", "subprocess",
    "socket", "selectors", "logging", "csv", "configparser", "difflib", "string", "calendar",
    "datetime", "zipfile", "tarfile", "gzip", "base64", "hashlib", "hmac", "secrets", "uuid", "fractions",
]
DISALLOWED_FALLBACK = "more"
DISALLOWED_SHARED = "faq"
POLITE_DELAY = 0.2
#: $msec and $request_time have millisecond resolution: allow for two roundings.
CLOCK_SLACK = 0.003


# -- nginx (bench/nginxsite.py: the benchmark serves the same way) ---------------------------------
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from nginxsite import Nginx, NginxError  # noqa: E402


@contextmanager
def nginx_serving(root: Path, prefix: Path):
    """nginx serving ``root``; a missing or broken nginx fails the test (never skips: CI has it)."""
    try:
        site = Nginx(root, prefix)
    except NginxError as e:
        pytest.fail(f"{e}: this end-to-end test of the web source needs a real nginx. "
                    "Not skipping on purpose.", pytrace=False)
    with site:
        yield site


# -- the site --------------------------------------------------------------------------------
def _pydoc_pages(dest: Path) -> list[str]:
    import importlib
    import pydoc

    rels = []
    for i, name in enumerate(PYDOC_MODULES):
        sub = "lib" if i < len(PYDOC_MODULES) - 10 else DISALLOWED_FALLBACK
        mod = importlib.import_module(name)
        # What `python -m pydoc -w NAME` writes, into our own directory.
        page = pydoc.html.page(pydoc.describe(mod), pydoc.html.document(mod, name))
        rel = f"{sub}/{name}.html"
        (dest / sub).mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(page, encoding="utf-8")
        rels.append(rel)
    return rels


def _shared_pages(dest: Path, limit: int | None) -> list[str]:
    every = sorted(p.relative_to(SHARED_DOCS).as_posix() for p in SHARED_DOCS.rglob("*.html"))
    rels = [r for r in every if r.split("/")[0] in SECTIONS_WHOLE]
    rels += [r for r in every if r.startswith("library/")][::LIBRARY_EVERY]
    if limit is not None:
        rels = [r for r in every if r.startswith("tutorial/")][:limit]
    for r in rels:
        (dest / r).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SHARED_DOCS / r, dest / r)
    return rels


def build_site(dest: Path, limit: int | None = None) -> tuple[list[str], str]:
    """A real site in ``dest``: pages plus an ``index.html`` linking each; every mtime 2024-01-01.

    Returns (page paths relative to dest, index.html included; the directory robots.txt will
    disallow).  ``limit``: a small site of that many pages (plus the index).
    """
    dest.mkdir(parents=True)
    if SHARED_DOCS.is_dir():
        rels, disallow = _shared_pages(dest, limit), DISALLOWED_SHARED
    else:
        rels, disallow = _pydoc_pages(dest), DISALLOWED_FALLBACK
        if limit is not None:
            for r in rels[limit:]:
                (dest / r).unlink()
            rels = rels[:limit]
    items = "\n".join(f'<li><a href="{quote(r)}">{html.escape(r)}</a></li>' for r in rels)
    (dest / "index.html").write_text(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Every page of the test site</title>"
        f"</head>\n<body><h1>Site map</h1>\n<ul>\n{items}\n</ul>\n</body></html>\n", encoding="utf-8")
    rels = ["index.html", *rels]
    for dirpath, _dirs, files in os.walk(dest):
        for f in [*files, "."]:
            os.utime(os.path.join(dirpath, f), (FIXED_MTIME, FIXED_MTIME))
    return rels, disallow


def write_config(path: Path, state: Path, site: Nginx, *, min_delay: str, workers: int = 4,
                 good_guy_factor: float = 2.0, restrict: list[str] | None = None) -> Path:
    restrict_toml = json.dumps(restrict or [])
    path.write_text(f"""\
state_dir = "{state}"
control_socket = "{state}/indexerd.sock"
log_level = "warning"

[[sources.web]]
name = "site"
seeds = ["{site.base}/index.html"]
max_recrawl_interval = "1h"  # adaptive recrawl off: every page is asked at every pass
restrict = {restrict_toml}
workers = {workers}
timeout = "10s"

[sources.web.politeness]
min_delay = "{min_delay}"
good_guy_factor = {good_guy_factor}
""", encoding="utf-8")
    return path


# -- reading the log -------------------------------------------------------------------------
NOT_PAGES = ("/robots.txt", "/sitemap.xml")


def page_hits(entries: list[dict], pages: set[str]) -> list[dict]:
    """Requests for the site's pages (URI paths of the files served), robots/sitemap excluded."""
    return [e for e in entries if e["uri"] in pages and e["uri"] not in NOT_PAGES]


def crawler(entries: list[dict]) -> list[dict]:
    return [e for e in entries if e["ua"].startswith("indexerd")]


def word_of(path: Path) -> str:
    """A distinctive word of the page's title (for a search that must find it)."""
    m = re.search(r"<title>(.*?)</title>", path.read_text(encoding="utf-8", errors="replace"), re.S | re.I)
    words = re.findall(r"[A-Za-z]{5,}", html.unescape(m.group(1)) if m else "")
    common = {"python", "documentation", "module", "index"}
    words = [w for w in words if w.lower() not in common] or words
    assert words, f"no title word in {path}"
    return max(words, key=len).lower()


def index_json(cli: CLI) -> dict:
    """``indexerd index -c CFG --json``: one pass; the summary, which must balance."""
    s = json.loads(cli.run("index", "--json", timeout=120).stdout)
    assert s["seen"] == s["indexed"] + s["unchanged"] + s["skipped"] + s["errors"], s
    return s


def doc_urls(cli: CLI) -> set[str]:
    rows = json.loads(cli.run("ctl", "report", "--dates", "--json").stdout)
    return {r["key"] for r in rows}


def search_urls(cli: CLI, query: str) -> set[str]:
    return {h["url"] for h in cli.search(query, "--limit", "200")}


# -- the tests -------------------------------------------------------------------------------
@pytest.mark.slow
def test_web_crawl_against_nginx(tmp_path):
    """Issue 5 end to end: first crawl, unchanged re-crawl, edits vs touches, robots.txt."""
    root = tmp_path / "site"
    rels, disallowed_dir = build_site(root)
    pages = {"/" + r for r in rels}
    with nginx_serving(root, tmp_path / "nginx") as site:
        url = {p: site.base + p for p in pages}
        cli = CLI(tmp_path / "state", write_config(tmp_path / "indexerd.toml", tmp_path / "state", site,
                                                   min_delay="0.01s", good_guy_factor=0.0))

        # 1. First crawl: every page fetched (GET, 200) exactly once, and indexed.
        mark = site.mark()
        s1 = index_json(cli)
        log1 = crawler(site.log(mark))
        hits1 = page_hits(log1, pages)
        got = {}
        for e in hits1:
            if e["method"] == "GET" and e["status"] == 200:
                got[e["uri"]] = got.get(e["uri"], 0) + 1
        assert set(got) == pages, f"pages never fetched: {sorted(pages - set(got))[:10]}"
        twice = {u: n for u, n in got.items() if n != 1}
        assert not twice, f"pages fetched with 200 more than once in one pass: {twice}"
        assert not any(e["ims"] or e["inm"] for e in hits1), "first crawl sent validators"
        assert s1["indexed"] == len(pages), s1
        assert s1["errors"] == 0, s1
        assert doc_urls(cli) >= set(url.values())
        assert len(doc_urls(cli)) == len(pages)
        probe = sorted(pages - {"/index.html"})[len(pages) // 3]
        word = word_of(root / probe.lstrip("/"))
        assert url[probe] in search_urls(cli, f"title:{word}"), f"title:{word} does not find {probe}"

        # 2. Nothing changed: every page answered 304, no page body downloaded, nothing re-indexed.
        mark = site.mark()
        s2 = index_json(cli)
        hits2 = page_hits(crawler(site.log(mark)), pages)
        assert {e["uri"] for e in hits2} == pages
        assert len(hits2) == len(pages), "a page was requested twice in one pass"
        not304 = [(e["uri"], e["status"]) for e in hits2 if e["status"] != 304]
        assert not not304, f"unchanged pages not answered 304: {not304[:10]}"
        assert sum(e["body_bytes"] for e in hits2) == 0
        assert all(e["inm"] or e["ims"] for e in hits2), "a re-check without validators"
        assert s2["indexed"] == 0 and s2["unchanged"] == len(pages), s2

        # 3. Edit 3 pages (new words, new mtime and size) and touch 3 others (new mtime only).
        body_pages = sorted(pages - {"/index.html"})
        edited = body_pages[5:8]
        touched = body_pages[-3:]
        tokens = {}
        for i, p in enumerate(edited):
            f = root / p.lstrip("/")
            tok = f"zqxedited{i}word"
            tokens[p] = tok
            text = f.read_text(encoding="utf-8")
            f.write_text(text.replace("</body>", f"<p>{tok} was added here</p></body>", 1)
                         if "</body>" in text else text + f"<p>{tok}</p>", encoding="utf-8")
            os.utime(f, (FIXED_MTIME + 3600, FIXED_MTIME + 3600))
        for p in touched:
            os.utime(root / p.lstrip("/"), (FIXED_MTIME + 7200, FIXED_MTIME + 7200))
        mark = site.mark()
        s3 = index_json(cli)
        hits3 = page_hits(crawler(site.log(mark)), pages)
        by_uri = {e["uri"]: e for e in hits3}
        assert len(hits3) == len(pages)
        for p in edited + touched:  # nginx's validators changed with the mtime: a full 200
            assert by_uri[p]["status"] == 200 and by_uri[p]["body_bytes"] > 0, by_uri[p]
        others = [e for e in hits3 if e["uri"] not in edited + touched]
        assert all(e["status"] == 304 for e in others), [e for e in others if e["status"] != 304][:5]
        assert s3["indexed"] == 3, f"expected exactly the 3 edited pages re-indexed: {s3}"
        assert s3["unchanged"] == len(pages) - 3, s3
        for p, tok in tokens.items():
            assert search_urls(cli, tok) == {url[p]}, f"{tok} (edited into {p}) not found there"
        for p in touched:
            why = json.loads(cli.run("ctl", "explain", url[p], "--json").stdout)
            assert why["reason"] == "content-unchanged", why  # fetched (new validators), same text

        # 4. robots.txt disallows one directory: no request for it, its pages leave the index.
        (root / "robots.txt").write_text(f"User-agent: *\nDisallow: /{disallowed_dir}/\n", encoding="utf-8")
        gone = {p for p in pages if p.startswith(f"/{disallowed_dir}/")}
        assert len(gone) >= 2
        gone_word = word_of(root / sorted(gone)[0].lstrip("/"))
        assert url[sorted(gone)[0]] in search_urls(cli, f"title:{gone_word}")
        mark = site.mark()
        s4 = index_json(cli)
        log4 = crawler(site.log(mark))
        assert any(e["uri"] == "/robots.txt" and e["status"] == 200 for e in log4)
        asked = [e["request_uri"] for e in log4 if e["uri"].startswith(f"/{disallowed_dir}/")]
        assert not asked, f"robots.txt disallows /{disallowed_dir}/ but it was requested: {asked[:5]}"
        assert s4["deleted"] == len(gone), s4
        left = doc_urls(cli)
        assert not {url[p] for p in gone} & left
        assert left == {url[p] for p in pages - gone}
        assert url[sorted(gone)[0]] not in search_urls(cli, f"title:{gone_word}")
        assert s4["indexed"] == 0, s4


@pytest.mark.slow
def test_web_crawl_politeness_against_nginx(tmp_path):
    """With min_delay 0.2 s and 4 workers, nginx never sees two requests closer than 0.2 s."""
    root = tmp_path / "site"
    rels, _ = build_site(root, limit=15)
    with nginx_serving(root, tmp_path / "nginx") as site:
        # Only the site's own pages (the Sphinx pages' dangling links would cost 0.2 s each).
        only = "^" + re.escape(site.base) + "/(" + "|".join(re.escape(quote(r)) for r in rels) + ")$"
        cfg = write_config(tmp_path / "indexerd.toml", tmp_path / "state", site, min_delay=f"{POLITE_DELAY}s",
                           workers=4, restrict=[only])
        cli = CLI(tmp_path / "state", cfg)
        mark = site.mark()
        s = index_json(cli)
        entries = sorted(crawler(site.log(mark)), key=lambda e: e["start"])
        assert s["indexed"] == len(rels), s
        assert len(entries) >= len(rels) + 1  # the pages and at least robots.txt
        # One request in flight at a time, and the delay between the end of one response and the
        # start of the next request (start = $msec - $request_time: $msec is the end time).
        gaps = [(b["start"] - a["msec"], a["uri"], b["uri"]) for a, b in zip(entries, entries[1:])]
        short = [g for g in gaps if g[0] < POLITE_DELAY - CLOCK_SLACK]
        assert not short, f"requests closer than {POLITE_DELAY} s: {short[:5]}"
        starts = [b["start"] - a["start"] for a, b in zip(entries, entries[1:])]
        assert min(starts) >= POLITE_DELAY - CLOCK_SLACK, min(starts)


@pytest.mark.slow
def test_nginx_slash_and_index_html_are_one_document(tmp_path):
    """nginx serves ``index.html`` for ``/`` too (its ``index`` directive): identical bytes under
    two URLs of one host are one document, keyed by the shorter URL, the other its alias."""
    root = tmp_path / "site"
    (root / "docs").mkdir(parents=True)
    (root / "index.html").write_text('<html><head><title>Front</title></head><body><p>capybara front page</p>'
                                     '<a href="index.html">home</a> <a href="docs/">docs</a></body></html>')
    (root / "docs" / "index.html").write_text('<html><head><title>Docs</title></head><body><p>tapir manual</p>'
                                              '<a href="index.html">again</a> <a href="/">up</a></body></html>')
    with nginx_serving(root, tmp_path / "nginx") as site:
        cfg = write_config(tmp_path / "indexerd.toml", tmp_path / "state", site, min_delay="0.01s",
                           good_guy_factor=0.0)
        cfg.write_text(cfg.read_text().replace(f'seeds = ["{site.base}/index.html"]', f'seeds = ["{site.base}/"]'))
        cli = CLI(tmp_path / "state", cfg)
        for _ in range(2):
            s = index_json(cli)
            assert doc_urls(cli) >= {site.base + "/", site.base + "/docs/"}, s
            assert search_urls(cli, "capybara") == {site.base + "/"}
            assert search_urls(cli, "tapir") == {site.base + "/docs/"}
            assert s["skipped"] == 2 and s["errors"] == 0, s
