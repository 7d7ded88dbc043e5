"""Snippets come from a page's main content; the whole page stays searchable (issue 13)."""

from __future__ import annotations


import pytest

from conftest import SHARED_CORPUS
from indexerd.extract import extract

# DocBook XSL's chunked output (the markup of most generated manuals): the page has no main,
# article or nav element, only its navheader/navfooter tables ("Prev Up Chapter ... Home Next").
DOCBOOK_PAGE = b"""<html><head><meta http-equiv="Content-Type" content="text/html; charset=UTF-8">
<title>Chapter 2. Installation</title><meta name="generator" content="DocBook XSL Stylesheets V1.79.1">
<link rel="home" href="index.html" title="The Manual"><link rel="up" href="index.html" title="The Manual">
<link rel="prev" href="ch01.html" title="Chapter 1. Introduction"><link rel="next" href="ch02s01.html" title="Requirements">
</head><body bgcolor="white" text="black" link="#0000FF" vlink="#840084" alink="#0000FF">
<div class="navheader"><table width="100%" summary="Navigation header"><tr><th colspan="3" align="center">Chapter 2. Installation</th></tr>
<tr><td width="20%" align="left"><a accesskey="p" href="ch01.html">Prev</a>\xc2\xa0</td><th width="60%" align="center">\xc2\xa0</th>
<td width="20%" align="right">\xc2\xa0<a accesskey="n" href="ch02s01.html">Next</a></td></tr></table><hr></div>
<div class="chapter"><div class="titlepage"><div><div><h1 class="title"><a name="install"></a>Chapter 2. Installation</h1></div></div></div>
<div class="toc"><p><b>Table of Contents</b></p><dl class="toc"><dt><span class="section"><a href="ch02s01.html">Requirements</a></span></dt></dl></div>
<p>The daemon installs from a source tree with one command; the quinoa package is optional.</p></div>
<div class="navfooter"><hr><table width="100%" summary="Navigation footer">
<tr><td width="40%" align="left"><a accesskey="p" href="ch01.html">Prev</a>\xc2\xa0</td><td width="20%" align="center">\xc2\xa0</td>
<td width="40%" align="right">\xc2\xa0<a accesskey="n" href="ch02s01.html">Next</a></td></tr>
<tr><td width="40%" align="left" valign="top">Chapter 1. Introduction\xc2\xa0</td><td width="20%" align="center"><a accesskey="h" href="index.html">Home</a></td>
<td width="40%" align="right" valign="top">\xc2\xa0Requirements</td></tr></table></div></body></html>"""


@pytest.mark.parametrize(("html", "main"), [
    (b"<body><nav>Home About</nav><main><p>Main words</p></main><footer>Legal</footer></body>", "Main words"),
    (b"<body><div class=menu>Menu</div><div role=main><p>Role words</p></div></body>", "Role words"),
    (b"<body><div>Menu</div><article><h1>Post</h1><p>Body</p></article></body>", "Post\nBody"),
    (b"<body><header>Site</header><p>Text</p><footer>(c)</footer></body>", "Text"),
    (b"<body><article><header>In article</header><p>A</p></article><article>B</article></body>", None),
    (b"<body><p>Only text</p></body>", None),
])
def test_main_text_rule(html, main):
    assert extract(html, "text/html").main_text == main


def test_docbook_navigation_is_not_main_text():
    ex = extract(DOCBOOK_PAGE, "text/html")
    assert ex.main_text.startswith("Chapter 2. Installation\nTable of Contents")
    assert "Prev" not in ex.main_text and "Home" not in ex.main_text
    assert "Prev" in ex.text                      # still indexed


def _python_docs_page() -> bytes:
    page = SHARED_CORPUS / "python-docs" / "library" / "asyncio-eventloop.html"
    if not page.is_file():
        pytest.skip(f"shared corpus not present ({page})")
    return page.read_bytes()


def test_snippets_from_main_content_end_to_end(cli, tmp_path):
    site = tmp_path / "docs"
    site.mkdir()
    (site / "ch02.html").write_bytes(DOCBOOK_PAGE)
    (site / "asyncio-eventloop.html").write_bytes(_python_docs_page())
    cli.run("index", str(site))
    (hit,) = cli.search("installs")
    assert "daemon installs" in hit["snippet"] and "Prev" not in hit["snippet"], hit["snippet"]
    # the navigation is still searchable; its snippet is then the start of the main content
    (hit,) = cli.search("Prev")
    assert hit["title"] == "Chapter 2. Installation"
    assert hit["snippet"].startswith("Chapter 2. Installation Table of Contents"), hit["snippet"]
    hits = cli.search('"event loop"')
    py = next(h for h in hits if h["path"].endswith("asyncio-eventloop.html"))
    # Sphinx's sidebar table of contents and "Navigation" bar came first in the page's text
    assert not py["snippet"].startswith(("Table of Contents", "Navigation")), py["snippet"]
    # (the passage is the main content's best one for the phrase: issue 34)
    assert "get_running_loop() get_event_loop()" not in py["snippet"], py["snippet"]
    # (new_event_loop holds the phrase too: its parts stand at adjacent positions in the index)
    assert {py["snippet"][a:b].lower().replace("_", " ") for a, b in py["marks"]} == {"event loop"}, py


# -- the passage: what the index matched, chosen from the stored text read as far as the first
#    window holding the whole query (issue 34; issue 31: bounded reads)
from hypothesis import given, settings, strategies as st  # noqa: E402

from indexerd.index.analysis import analyzer  # noqa: E402
from indexerd.index.query import parse  # noqa: E402
from indexerd.index.querytokens import analyse_query  # noqa: E402
from indexerd.index.snippets import (NOTE_NOT_IN_TEXT, NOTE_TITLE_ONLY, SnippetQuery,  # noqa: E402
                                     make_snippet, mark_all)
from indexerd.index.whoosh.searching import stored_text_chunks  # noqa: E402


def _snip(text, query, chars=240, **kw):
    a = analyzer()
    kw.setdefault("budget_seconds", 10.0)  # what is marked, not how fast: a loaded CI machine
    return make_snippet(text, SnippetQuery(analyse_query(parse(query), a), a), chars, **kw)


def _marked(s) -> list[str]:
    return [s.text[a:b] for a, b in s.marks]


CVE_LIST = " ".join(f"CVE-2023-{n} (openssh)." for n in range(40000, 40300)) + \
    " Later: CVE-2023-48795, the Terrapin attack, is fixed."


def test_a_phrase_is_marked_where_its_words_are_adjacent_not_where_one_of_them_stands():
    s = _snip(CVE_LIST, "CVE-2023-48795")
    assert _marked(s) == ["CVE-2023-48795"] and s.note is None
    assert "Terrapin" in s.text


def test_marks_are_whole_tokens_the_index_matched():
    text = "pg_dump and pgsql ran. " * 500 + "Edit pg_hba.conf; he runs, running ponies. The event of the loop."
    assert _marked(_snip(text, "pg_hba")) == ["pg_hba"]          # not pg_dump's pg, not pgsql
    assert _marked(_snip(text, "running")) == ["runs", "running"]  # one stem
    assert _marked(_snip(text, "pony")) == ["ponies"]
    assert _marked(_snip(text, '"event loop"')) == ["event of the loop"]
    assert _marked(_snip(text, "run*")) == ["runs", "running"]


def test_the_passage_holding_most_of_the_query_wins():
    text = "alpha here. " * 100 + "gamma. " * 100 + "beta there. " * 100 + "alpha and beta together. "
    s = _snip(text, "alpha beta")
    assert "alpha and beta together" in s.text and sorted(_marked(s))[:2] == ["alpha", "beta"]


def test_the_passage_is_the_first_window_holding_the_whole_query_not_a_denser_one_further_on():
    """Issue 31: the text is read no further than the first window that holds every term (plus
    the passage's width); a later window with more repeats of the same terms is not looked for
    (before, the first 16 KiB were scanned whole for it: ~60% of a Whoosh answer's time)."""
    text = "zeta first here, then other words. " + "filler words. " * 150 + "zeta zeta zeta zeta zeta end."
    s = _snip(text, "zeta")
    assert s.text.startswith("zeta first here") and _marked(s) == ["zeta"], s
    # with two terms, the first window holding both: not the one with more of them
    text = "alpha alone. " * 40 + "alpha meets beta here. " + "filler. " * 100 + "alpha beta alpha beta alpha beta."
    s = _snip(text, "alpha beta")
    assert "alpha meets beta here" in s.text and sorted(set(_marked(s))) == ["alpha", "beta"], s


class _Chunks:
    """A stored text's chunks, counting how many were read."""

    def __init__(self, chunks: list[str]) -> None:
        self.chunks, self.read = chunks, 0

    def __iter__(self):
        for c in self.chunks:
            self.read += 1
            yield c


def test_a_long_text_is_read_only_as_far_as_its_passage_needs():
    """Whoosh's stored text is inflated chunk by chunk: a word found near the start costs the
    first chunk, not the whole text (before: every chunk was inflated and joined)."""
    head = "The quokka lives here, on an island. " + "more words " * 700      # ~8 KiB
    chunks = _Chunks([head] + ["other words " * 700] * 30)                        # ~250 KiB after
    s = _snip(chunks, "quokka")
    assert _marked(s) == ["quokka"] and s.text.startswith("The quokka lives")
    assert chunks.read == 1, chunks.read
    # a word in the sixth chunk is still found, the read going at most about twice as far (the
    # stretches scanned double), not through the 20 chunks after it
    far = _Chunks(["other words " * 700] * 5 + ["a quokka at last. " + "more words " * 700] + ["other words " * 700] * 20)
    s = _snip(far, "quokka")
    assert _marked(s) == ["quokka"] and far.read <= 10, far.read
    # nothing of the query: the whole text is read, and the note says the match is elsewhere
    none = _Chunks(["other words " * 700] * 4)
    assert _snip(none, "quokka").note == NOTE_NOT_IN_TEXT and none.read == 4


def test_a_word_the_document_lacks_does_not_keep_the_scan_going():
    """An ``a OR b`` hit holding only ``a``: told that ``b`` is absent (the engine's postings),
    the scan stops after the first passage holding ``a`` (before: the whole text was read, looking
    for a window with ``b`` too); the snippet is the same, and so is a phrase's with ``b``."""
    def text():
        return _Chunks(["The quokka lives here, on an island. " + "more words " * 700]
                       + ["other words " * 700] * 30)

    for query in ("quokka OR wombat", 'quokka OR "wombat island"', "quokka wombat"):
        whole, told = text(), text()
        expect = _snip(whole, query)
        assert _snip(told, query, absent={"wombat"}) == expect and _marked(expect) == ["quokka"]
        assert whole.read == 31 and told.read == 1, (query, whole.read, told.read)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["apple", "Apple", "pear", "apples", "x", "日本語", "pine-apple", "apple.pear",
                                 "pg_hba.conf", " ", "\n", ".", "the", "of", "lorem " * 200]), max_size=400),
       st.sampled_from(["apple", "pear apple", "app*", '"apple pear"', "日本", "apple.pear", "pg_hba"]),
       st.lists(st.integers(1, 3000), max_size=12))
def test_a_text_read_in_chunks_gives_the_snippet_of_the_whole_text(words, query, cuts):
    """Wherever the chunks are cut (inside a word, a phrase's gap, a character run), the snippet
    is the one of the whole text."""
    text = " ".join(words)
    at, chunks = 0, []
    for n in cuts:
        chunks.append(text[at:at + n])
        at += n
    chunks.append(text[at:])
    assert _snip(iter(chunks), query) == _snip(text, query)


def test_no_passage_says_why():
    s = _snip("nothing of it here", "quokka", title="Quokka notes")
    assert (s.note, s.marks, s.text) == (NOTE_TITLE_ONLY, (), "nothing of it here")
    assert _snip("nothing of it here", "quokka", title="x").note == NOTE_NOT_IN_TEXT
    assert _snip("some text", "size:>10").note is None


def test_a_preview_marks_every_match_of_the_whole_text_as_snippets_mark_them():
    a = analyzer()

    def marked(text, query, **kw):
        s = mark_all(text, SnippetQuery(analyse_query(parse(query), a), a), **kw)
        assert s.text == text                                    # the text whole, as it is
        return [text[x:y] for x, y in s.marks], s.note

    far = "x " * 16 * 1024                                       # past a snippet's first reads
    text = "Edit pg_hba.conf, not pg_dump. " + far + "Then pg_hba again; the event of the loop."
    assert marked(text, "pg_hba") == (["pg_hba", "pg_hba"], None)   # both, the far one too
    assert marked(text, '"event loop" edit') == (["Edit", "event of the loop"], None)
    assert marked(text, "loop -event") == (["loop"], None)
    assert marked("nothing here", "quokka", title="Quokka") == ([], NOTE_TITLE_ONLY)
    assert mark_all("text", None).marks == ()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["apple", "Apple", "pear", "apples", "x", "éa", "Ápple", "a\u0301pple",
                                 "日本語", "pine-apple", "apple.pear", " ", "\n", "  ", ".", "appleapple"]),
                max_size=300),
       st.sampled_from(["apple", "pear apple", "app*", '"apple pear"', "日本", "apple.pear"]),
       st.sampled_from([8, 40, 240]))
def test_every_mark_is_a_matched_token_and_lies_in_the_text(words, query, chars):
    s = _snip(" ".join(words), query, chars)
    assert all(0 <= a < b <= len(s.text) for a, b in s.marks)
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(s.marks, s.marks[1:]))
    assert s.text == " ".join(s.text.split())
    for m in _marked(s):
        assert analyzer().analyse(m).tokens or analyzer().analyse(m).ids, (query, m)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=50_000) | st.text(max_size=30_000).map(lambda t: t.encode("utf-8")))
def test_stored_text_inflated_in_chunks_is_the_whole_text(raw):
    import zlib

    assert "".join(stored_text_chunks(zlib.compress(raw))) == raw.decode("utf-8", "replace")


def test_stored_text_chunks_cut_inside_a_character():
    import zlib

    raw = ("é" * 20_000).encode("utf-8") + b"\xff" + "日本".encode("utf-8")[:-1]
    assert "".join(stored_text_chunks(zlib.compress(raw))) == raw.decode("utf-8", "replace")


def test_the_whole_text_asked_for_keeps_its_lines_a_snippet_does_not():
    """A document's preview asks for the whole text kept (SNIPPET_TEXT_CAP_BYTES): its lines
    come back as stored (a list, code, a poem stay readable); a snippet is one line."""
    from indexerd.index.base import SNIPPET_TEXT_CAP_BYTES
    from indexerd.index.snippets import make_snippet

    stored = "Title line\nfirst item\nsecond item\nindented code()"
    assert make_snippet(stored, None, SNIPPET_TEXT_CAP_BYTES).text == stored
    assert make_snippet(stored, None, 240).text == "Title line first item second item indented code()"
    marked = mark_all(make_snippet(stored, None, SNIPPET_TEXT_CAP_BYTES).text,
                      SnippetQuery(analyse_query(parse("item"), analyzer()), analyzer()))
    assert [marked.text[a:b] for a, b in marked.marks] == ["item", "item"] and "\n" in marked.text


@pytest.mark.parametrize("chars", [40, 60, 90])
def test_a_snippet_never_starts_or_ends_inside_a_word(chars) -> None:
    # a trial (asyncio's runners.py for `event loop`): "ancel_all_tasks(loop) loop.run_until_..."
    # -- the window's start fell inside an identifier with no space before the match
    text = ("lorem ipsum dolor " * 30 + "_cancel_all_pending_tasks(loop)\n"
            "loop.run_until_complete(loop.shutdown()) " + "sit amet " * 30)
    s = _snip(text, "loop", chars=chars)
    assert "loop" in _marked(s)
    first, last = s.text.split()[0], s.text.split()[-1]
    assert first in text.split() or text.split()[0] == first, s.text
    assert last in text.split(), s.text
