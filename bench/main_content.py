"""Snippet source on real pages: indexerd's main-content rule against boilerplate-removal libraries.

    .venv/bin/python bench/main_content.py [PAGES_DIR]     (default ../shared/corpus/python-docs)

For each HTML page with an ``<h1>``: does the text the snippet is taken from start with that
heading (the page's own content), or with navigation?  And the CPU seconds for all pages.
jusText, readability-lxml and trafilatura are measured when importable (they are not
dependencies: install them into a scratch venv).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from selectolax.lexbor import LexborHTMLParser

from indexerd.extract import extract


def heading(data: bytes) -> str | None:
    node = LexborHTMLParser(data).css_first("h1")
    return " ".join(node.text().replace("\u00b6", "").split()) if node else None


def starts_with(text: str, head: str) -> bool:
    return " ".join(text.replace("\u00b6", "").split()).startswith(head[:30])


def candidates():
    yield "indexerd whole text", lambda d: extract(d, "text/html").text
    yield "indexerd main_text", lambda d: (lambda e: e.main_text if e.main_text is not None else e.text)(
        extract(d, "text/html"))
    try:
        import justext
        yield "jusText", lambda d: "\n".join(p.text for p in justext.justext(d, justext.get_stoplist("English"))
                                              if not p.is_boilerplate)
    except ImportError:
        pass
    try:
        import lxml.html
        from readability import Document
        yield "readability-lxml", lambda d: lxml.html.fromstring(Document(d).summary()).text_content()
    except ImportError:
        pass
    try:
        import trafilatura
        yield "trafilatura", lambda d: trafilatura.extract(d.decode("utf-8", "replace")) or ""
    except ImportError:
        pass


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared/corpus/python-docs")
    pages = [(p, p.read_bytes()) for p in sorted(root.rglob("*.html"))]
    heads = {p: heading(d) for p, d in pages}
    for name, fn in candidates():
        t0 = time.process_time()
        texts = [(p, fn(d)) for p, d in pages]
        cpu = time.process_time() - t0
        ok = sum(starts_with(t, heads[p]) for p, t in texts if heads[p])
        n = sum(1 for p in heads if heads[p])
        empty = sum(1 for _, t in texts if not t.strip())
        print(f"{name:22} {cpu:6.1f} s CPU for {len(pages)} pages; starts with its <h1>: {ok}/{n}; empty {empty}")


if __name__ == "__main__":
    main()
