"""The conformance suite: every index engine gives the same answers to the same queries.

Each test runs once per engine in the tree (``index_engine``, ``ENGINE_NAMES`` in conftest):

- the text-analysis fixtures (tests/fixtures/text-analysis: CJK, NFD, diacritics, identifiers)
  indexed as one tree through the real indexer; each query of its ``expected.json`` must hit
  exactly the files listed there;
- the shared corpus (real HTML and text, see ../shared/corpus/README.md) indexed the same way:
  the known answers are the top hits, and the whole hit set of every query of bench/queries.txt
  is the same on every engine (ranking may differ);
- malformed queries raise the same :class:`QueryError` message on every engine (the parser's);
  a query of only stop words finds nothing and counts 0, with no error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import ENGINE_NAMES, copy_corpus, engine_toml, one_pass
from indexerd.config import load_config
from indexerd.core.errors import QueryError
from indexerd.index import open_index
from indexerd.index.query import parse

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "text-analysis"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
QUERIES = [q for q in (REPO / "bench" / "queries.txt").read_text(encoding="utf-8").splitlines() if q.strip()]

#: (query, the corpus path that must be the first hit)
TOP_HITS = [
    ("asyncio event loop", "python-docs/library/asyncio-eventloop.html"),
    ("sqlite3", "python-docs/library/sqlite3.html"),
    ('"GNU General Public License"', "text/GPL-3.txt"),
]

#: Queries that find something in the shared corpus and in conftest's fallback corpus alike.
FOUND_IN_ANY_CORPUS = {"python", "license", "function", "asyncio"} | {q for q, _ in TOP_HITS}

MALFORMED = ['foo"', "(a", "a)", '"', "", "   ", "path:tmp", "nosuchfield:x", "size:>abc",
             "last_modified:2024-13", "a AND", "OR b", "NOT", "size:[1 TO", "*", "title:", "-", "a -"]


def build(tmp: Path, tree: Path, engine: str):
    """Index ``tree`` with ``engine`` through the real indexer (one pass); returns the open index."""
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = tmp / "indexerd.toml"
    cfg.write_text(f'state_dir = "{tmp / "state"}"\n{engine_toml(engine, fresh=True)}'
                   f'[[sources.filesystem]]\nname = "tree"\npath = "{tree}"\nwatch = false\n', encoding="utf-8")
    config = load_config(str(cfg))
    counts = one_pass(config)
    assert counts["errors"] == 0, counts
    return open_index(tmp / "state", config.index, create=False)


def rel(hits, root: Path) -> list[str]:
    return [os.path.relpath(h.path, root) for h in hits]


@pytest.fixture(scope="module", params=ENGINE_NAMES)
def fixtures_index(request, tmp_path_factory):
    if request.param == "postgresql":
        request.getfixturevalue("pg_index_server")
    tmp = tmp_path_factory.mktemp(f"conf-fixtures-{request.param}")
    tree = copy_corpus(FIXTURES, tmp / "tree")
    (tree / "expected.json").unlink()
    (tree / "README.md").unlink()
    ix = build(tmp, tree, request.param)
    yield ix, tree
    ix.close()


@pytest.fixture(scope="module")
def corpus_indexes(request, tmp_path_factory, corpus_src):
    """The shared corpus indexed once per engine: ``{engine: (index, tree)}``."""
    if "postgresql" in ENGINE_NAMES:
        request.getfixturevalue("pg_index_server")
    tmp = tmp_path_factory.mktemp("conf-corpus")
    tree = copy_corpus(corpus_src, tmp / "corpus")
    out = {name: (build(tmp / name, tree, name), tree) for name in ENGINE_NAMES}
    yield out
    for ix, _ in out.values():
        ix.close()


@pytest.mark.parametrize("query", sorted(EXPECTED))
def test_text_analysis_fixtures_hit_exactly_the_expected_files(fixtures_index, query) -> None:
    ix, tree = fixtures_index
    got = sorted(os.path.basename(h.path) for h in ix.search(query, limit=100))
    assert got == sorted(EXPECTED[query]), (ix.engine, query)
    assert ix.count(query) == len(EXPECTED[query]), (ix.engine, query)


def test_snippets_highlight_identifiers_cjk_and_folded_words(fixtures_index) -> None:
    ix, _ = fixtures_index
    for query, shown in (("pg_hba", "pg_hba"), ("東京", "東京"), ("cafe", "caf")):
        snippets = " ".join(h.snippet for h in ix.search(query))
        assert shown in snippets, (ix.engine, query, snippets)


@pytest.mark.parametrize("engine", ENGINE_NAMES)
@pytest.mark.parametrize("query, top", TOP_HITS)
def test_real_pages_have_the_same_top_hit(corpus_indexes, engine, query, top) -> None:
    ix, tree = corpus_indexes[engine]
    assert rel(ix.search(query, limit=3), tree)[0] == top, (engine, query)


@pytest.mark.parametrize("query", QUERIES + [q for q, _ in TOP_HITS])
def test_real_pages_same_hit_sets_on_every_engine(corpus_indexes, query) -> None:
    sets = {name: frozenset(rel(ix.search(query, limit=1000), tree)) for name, (ix, tree) in corpus_indexes.items()}
    counts = {name: ix.count(query) for name, (ix, _) in corpus_indexes.items()}
    first = next(iter(sets.values()))
    assert first or query not in FOUND_IN_ANY_CORPUS, query
    if "postgresql" in sets and '"' in query:
        # PostgreSQL keeps no word position past 16383 (README: where it differs): a phrase that
        # only occurs there is not found; every other hit is the same
        long_docs = _past_last_tsvector_position(next(iter(corpus_indexes.values()))[1])
        assert sets["postgresql"] <= first and first - sets["postgresql"] <= long_docs, query
        assert counts.pop("postgresql") == len(sets["postgresql"]), query
        sets["postgresql"] = first
    assert all(s == first for s in sets.values()), {n: sorted(s ^ first)[:10] for n, s in sets.items()}
    assert all(c == len(first) for c in counts.values()), counts


def _past_last_tsvector_position(tree: Path) -> frozenset[str]:
    """The files of ``tree`` (relative paths) whose text has more words than a ``tsvector`` has
    positions (16383)."""
    from indexerd.extract import extract
    from indexerd.index.analysis import analyzer
    from indexerd.index.postgresql.documents import MAX_POSITION

    out = set()
    for path in tree.rglob("*.html"):
        data = path.read_bytes()
        if len(analyzer().analyse(extract(data, "text/html").text).tokens) > MAX_POSITION - 2:
            out.add(os.path.relpath(path, tree))
    return frozenset(out)


@pytest.mark.parametrize("query", MALFORMED)
def test_malformed_queries_give_the_parsers_error_on_every_engine(fixtures_index, query) -> None:
    ix, _ = fixtures_index
    with pytest.raises(QueryError) as parsed:
        parse(query)
    with pytest.raises(QueryError) as searched:
        ix.search(query)
    with pytest.raises(QueryError) as counted:
        ix.count(query)
    assert str(searched.value) == str(counted.value) == str(parsed.value), ix.engine


@pytest.mark.parametrize("query", ["the", "the of and", '"the"', "title:the", "-the"])
def test_stop_words_only_find_nothing_without_error(fixtures_index, query) -> None:
    ix, _ = fixtures_index
    assert ix.search(query) == [] and ix.count(query) == 0


def test_a_negated_word_excludes_the_first_document_of_the_positive_side(tmp_path, index_engine) -> None:
    """Whoosh's AndNotMatcher did not test the first document of its positive side against the
    negative side when the negative side started earlier: ``subprocess -shell`` found the
    genindex-S.html page of the shared corpus, which holds both words."""
    from datetime import datetime, timezone

    from conftest import index_settings
    from indexerd.index import IndexDoc

    ix = open_index(tmp_path, index_settings(index_engine))
    s = ix.session()
    for key, text in (("a", "shell"), ("b", "subprocess shell"), ("c", "subprocess"), ("d", "shell subprocess")):
        s.update(IndexDoc(key=key, source="s", url=key, path=None, title="", content=text,
                          last_modified=datetime(2024, 1, 1, tzinfo=timezone.utc), date_source="mtime",
                          media_type="text/plain", size=1))
    s.commit(merge=False)
    try:
        assert [h.key for h in ix.search("subprocess -shell")] == ["c"]
        assert ix.count("subprocess AND NOT shell") == 1
        assert sorted(h.key for h in ix.search("-subprocess")) == ["a"]
    finally:
        ix.close()


def test_an_unknown_sort_is_the_same_query_error_on_every_engine(fixtures_index) -> None:
    ix, _ = fixtures_index
    with pytest.raises(QueryError, match=r"^unknown sort 'size' \(expected relevance or date\)$"):
        ix.search("cafe", sort="size")


def _fold_config(tmp: Path, tree: Path, engine: str, fold: bool, schema_toml: str):
    cfg = tmp / "indexerd.toml"
    head, table, pg = schema_toml.partition("[index.postgresql]")
    cfg.write_text(f'state_dir = "{tmp / "state"}"\n{head}fold_diacritics = {"true" if fold else "false"}\n'
                   f'{table}{pg}[[sources.filesystem]]\nname = "tree"\npath = "{tree}"\nwatch = false\n',
                   encoding="utf-8")
    return load_config(str(cfg))


_run_pass = one_pass


def test_accents_folded_or_kept_as_configured_and_a_change_rebuilds(tmp_path, index_engine, caplog) -> None:
    """``[index] fold_diacritics`` (default true): ``cafe`` and ``café`` find each other; false
    keeps them apart.  Switching it rebuilds the index from the sources, saying why, and a reader
    without a config (``ctl search`` with no daemon) analyses queries as the index was written."""
    import logging

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "accent.txt").write_text("Le café est chaud\n", encoding="utf-8")
    (tree / "plain.txt").write_text("The cafe opens at nine\n", encoding="utf-8")
    (tree / "decomposed.txt").write_text("Un cafe\u0301 noir\n", encoding="utf-8")   # NFD é
    schema_toml = engine_toml(index_engine, fresh=True)

    def found(config, query: str) -> list[str]:
        ix = open_index(tmp_path / "state", config.index if config is not None else None, create=False)
        try:
            return sorted(Path(h.key).name for h in ix.search(query, limit=10))
        finally:
            ix.close()

    folded = _fold_config(tmp_path, tree, index_engine, True, schema_toml)
    assert _run_pass(folded)["indexed"] == 3
    every = ["accent.txt", "decomposed.txt", "plain.txt"]
    assert found(folded, "cafe") == found(folded, "café") == found(folded, "CAFÉ") == every
    kept = _fold_config(tmp_path, tree, index_engine, False, schema_toml)
    with pytest.raises(Exception, match="accents folded.*accents kept.*fold_diacritics = false"):
        open_index(tmp_path / "state", kept.index, create=False)
    with caplog.at_level(logging.WARNING):
        assert _run_pass(kept)["indexed"] == 3                  # rebuilt from the sources
    assert any("rebuilding the index" in r.getMessage() and "accents kept" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert found(kept, "cafe") == ["plain.txt"]
    assert found(kept, "café") == found(kept, "Cafe\u0301") == ["accent.txt", "decomposed.txt"]
    assert found(None, "cafe") == ["plain.txt"]                 # as the identity says
    assert _run_pass(kept)["indexed"] == 0                      # nothing changed: nothing re-read
    assert _run_pass(folded)["indexed"] == 3                    # and back
    assert found(None, "cafe") == every


# -- snippets from where the query matched (issue 34): every engine, real files, the real indexer
def test_the_snippet_shows_and_marks_where_the_query_matched_on_every_engine(tmp_path, index_engine) -> None:
    """The body has the word past its first 10 KB: the snippet shows it, marked; a query
    ``CVE-2023-48795`` in a list of CVE ids marks that id, not another one's ``CVE``; a word
    stems as the index stems it; a match in the title only, or in a page's navigation, is said."""
    tree = tmp_path / "tree"
    tree.mkdir()
    filler = "".join(f"Line {n}: the build system compiles every package again.\n" for n in range(600))
    (tree / "late.txt").write_text(filler + "Edit pg_hba.conf to let the quokka in.\n" + filler, encoding="utf-8")
    # (200 ids: PostgreSQL keeps at most 256 positions of one word, README: where it differs)
    cves = "".join(f"  * CVE-2023-{n}: a flaw in openssh's channel code.\n" for n in range(40000, 40200))
    (tree / "changelog.txt").write_text("openssh (1:9.6p1-1) unstable\n" + cves
                                        + "  * CVE-2023-48795: the Terrapin prefix truncation attack.\n",
                                        encoding="utf-8")
    (tree / "runner.txt").write_text(filler + "She runs every morning.\n", encoding="utf-8")
    (tree / "wombat.html").write_text("<html><head><title>Wombat care</title></head><body><p>Nothing "
                                      "about that animal here.</p></body></html>", encoding="utf-8")
    (tree / "quoll.html").write_text("<html><head><title>Page</title></head><body><nav>quoll</nav><main><p>"
                                     "Nothing about that animal here.</p></main></body></html>", encoding="utf-8")
    ix = build(tmp_path, tree, index_engine)
    try:
        assert len(filler.encode()) > 10_000
        for query, marked in (("quokka", ["quokka"]), ("pg_hba", ["pg_hba"]), ("pg_hba.conf", ["pg_hba.conf"]),
                              ("CVE-2023-48795", ["CVE-2023-48795"]), ("running", ["runs"]),
                              ('"prefix truncation"', ["prefix truncation"])):
            hits = ix.search(query)
            assert len(hits) == 1, (ix.engine, query, [h.key for h in hits])
            hit = hits[0]
            got = [hit.snippet[a:b] for a, b in hit.marks]
            assert got == marked and hit.snippet_note is None, (ix.engine, query, hit.snippet, got)
        (hit,) = ix.search("CVE-2023-48795")
        assert "Terrapin" in hit.snippet, (ix.engine, hit.snippet)
        (hit,) = ix.search("wombat")
        assert (hit.marks, hit.snippet_note) == ((), "the match is in the title only"), (ix.engine, hit)
        (hit,) = ix.search("quoll")       # in the navigation, which snippets leave out
        assert hit.marks == () and hit.snippet_note.startswith("the match is not in the text kept for snippets")
    finally:
        ix.close()


def test_a_folder_filter_finds_the_files_below_it_on_every_engine(tmp_path, index_engine) -> None:
    """``dir:/some/path`` (issue 34): the files below the folder at any depth, not a sibling
    folder whose name starts the same, not a web page whose URL path looks the same."""
    from datetime import datetime, timezone

    from conftest import index_settings
    from indexerd.index import IndexDoc
    from indexerd.core.filekeys import path_to_key

    docs = {"a": "/srv/docs/a.txt", "b": "/srv/docs/sub/deep/b.txt", "c": "/srv/docs-old/c.txt",
            "d": "/srv/My Docs/d.txt", "e": "https://example.com/srv/docs/e.html", "f": "/srv/docs.txt"}
    ix = open_index(tmp_path, index_settings(index_engine))
    s = ix.session()
    for name, where in docs.items():
        key = where if where.startswith("https:") else path_to_key(where)
        s.update(IndexDoc(key=key, source="s", url=key, path=None if where.startswith("https:") else where,
                          title=name, content=f"falcon {name}", media_type="text/plain", size=1,
                          last_modified=datetime(2024, 1, 1, tzinfo=timezone.utc), date_source="mtime"))
    s.commit(merge=False)

    def found(query: str) -> list[str]:
        hits = sorted(h.title for h in ix.search(query, limit=20))
        assert ix.count(query) == len(hits), (ix.engine, query)
        return hits

    try:
        assert found("falcon dir:/srv/docs") == ["a", "b"]
        assert found("dir:/srv/docs/") == ["a", "b"]                 # a filter alone, slash or not
        assert found("falcon dir:/srv/docs/sub") == ["b"]
        assert found("falcon DIR:/srv/./docs/sub/..//") == ["a", "b"]
        assert found('falcon dir:"/srv/My Docs"') == ["d"]           # quoted: a space, encoded in keys
        assert found("falcon -dir:/srv/docs") == ["c", "d", "e", "f"]
        assert found('falcon dir:(/srv/docs-old OR "/srv/My Docs")') == ["c", "d"]
        assert found("dir:/") == ["a", "b", "c", "d", "f"]            # every file, no web page
        with pytest.raises(QueryError, match=r"dir: takes a folder's absolute path .* at character 5"):
            ix.search("dir:docs")
    finally:
        ix.close()


def _facet_docs(ix) -> None:
    """Five documents in two sources and three media types; one more deleted after a commit."""
    from datetime import datetime, timezone

    from indexerd.index import IndexDoc

    docs = [("a", "docs", "text/html", "Configure the python interpreter", 2023),
            ("b", "docs", "text/plain", "python configuration files", 2024),
            ("c", "mail", "text/plain", "running the python daemon", 2024),
            ("d", "mail", "message/rfc822", "running errands", 2024),
            ("e", "docs", "application/pdf", "pythons and other snakes", 2024)]
    s = ix.session()
    for key, source, media_type, text, year in docs:
        s.update(IndexDoc(key=key, source=source, url=key, path=None, title="", content=text,
                          last_modified=datetime(year, 6, 1, tzinfo=timezone.utc), date_source="mtime",
                          media_type=media_type, size=1))
    s.commit(merge=False)
    s = ix.session()
    s.delete("e")
    s.commit(merge=False)


def test_facets_count_the_matches_per_media_type_and_source_on_every_engine(tmp_path, index_engine) -> None:
    """Issue 34: counts per media type and source beside the hits, counted by the engine, the
    same on every engine; a deleted document is not counted; the date range applies."""
    from datetime import datetime, timezone

    from conftest import index_settings

    ix = open_index(tmp_path, index_settings(index_engine))
    _facet_docs(ix)
    try:
        assert ix.facets("python") == {"media_type": [("text/plain", 2), ("text/html", 1)],
                                       "source": [("docs", 2), ("mail", 1)]}
        assert ix.facets(None) == {"media_type": [("text/plain", 2), ("message/rfc822", 1), ("text/html", 1)],
                                   "source": [("docs", 2), ("mail", 2)]}
        assert ix.facets("running source:mail") == {"media_type": [("message/rfc822", 1), ("text/plain", 1)],
                                                    "source": [("mail", 2)]}
        assert ix.facets("python", since=datetime(2024, 1, 1, tzinfo=timezone.utc)) == {
            "media_type": [("text/plain", 2)], "source": [("docs", 1), ("mail", 1)]}
        assert ix.facets("snakes") == {"media_type": [], "source": []}   # only in the deleted one
        assert ix.facets("the") == {"media_type": [], "source": []}      # nothing to search
        with pytest.raises(QueryError, match="malformed query"):
            ix.facets("(python")
    finally:
        ix.close()


def test_a_query_that_finds_nothing_gets_a_suggestion_from_the_index_terms(tmp_path, index_engine) -> None:
    """Issue 34: 'did you mean' from the index's own terms, within two edits, shown as a word a
    document holds (not the stem), the rest of the query kept; none when nothing near is held."""
    from conftest import index_settings
    from indexerd.index.analysis import analyzer
    from indexerd.index.suggest import suggest

    ix = open_index(tmp_path, index_settings(index_engine))
    _facet_docs(ix)
    a = analyzer()

    def suggested(query: str) -> str | None:
        found = suggest(ix, query, a)
        if found is not None:
            assert found.hits == ix.count(found.query) > 0
        return None if found is None else found.query

    try:
        near = dict(ix.similar_terms("pyhton"))
        assert list(near) == ["python"] and 3 <= near["python"] <= 4  # a deleted document may count
        assert [t for t, _ in ix.similar_terms("configur")] == ["configur"]
        assert suggested("pyhton") == "python"
        assert suggested("confgure fles") == "configure files"       # a stem shown as its word
        assert suggested("pyhton -daemon") == "python -daemon"
        assert suggested("pyhton source:docs") == "python source:docs"  # field values kept
        assert suggested("runnning daemon") == "running daemon"
        assert suggested("python") is None                            # known words: nothing to say
        assert suggested("zzzzzz") is None                            # nothing near
        assert suggested("snakes") is None                            # only in a deleted document
        assert suggested('"pyhton interpreter"') is None              # phrases are left as typed
    finally:
        ix.close()


def test_a_suggestion_costs_a_bounded_number_of_term_lookups_however_long_the_query(tmp_path, index_engine) -> None:
    """A new user's trial: a 5,000-word query of words the index lacks held the Whoosh daemon's
    only query worker for 37 s after its caller had timed out (every other search meanwhile:
    "no query worker was free"), nearly all of it 'did you mean' looking up terms near each
    word.  The words looked at and the words looked up are bounded; past either bound there is
    no suggestion (a query with that many unknown words is not a typo)."""
    from conftest import index_settings
    from indexerd.index.analysis import analyzer
    from indexerd.index.suggest import MAX_LOOKED_UP, MAX_WORDS, suggest

    class Counting:
        def __init__(self, ix) -> None:
            self.ix, self.lookups, self.counts = ix, 0, 0

        def similar_terms(self, *a, **k):
            self.lookups += 1
            return self.ix.similar_terms(*a, **k)

        def count(self, *a, **k):
            self.counts += 1
            return self.ix.count(*a, **k)

        def __getattr__(self, name):
            return getattr(self.ix, name)

    ix = open_index(tmp_path, index_settings(index_engine))
    _facet_docs(ix)
    a = analyzer()
    try:
        unknown = [f"pyhton{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(60)]
        for words in (unknown[:MAX_LOOKED_UP + 1], unknown, ["python"] * (MAX_WORDS + 1) + ["pyhton"]):
            c = Counting(ix)
            assert suggest(c, " ".join(words), a) is None
            assert c.lookups <= 2 * MAX_LOOKED_UP and c.counts <= MAX_WORDS + 1, (len(words), c.lookups, c.counts)
        c = Counting(ix)
        found = suggest(c, " ".join(["pyhton"] * MAX_LOOKED_UP), a)  # within the bounds: as before
        assert found is not None and found.query.split()[0] == "python", found
    finally:
        ix.close()


def test_a_word_in_a_heading_ranks_above_the_same_word_in_the_text_on_every_engine(tmp_path, index_engine) -> None:
    """Issue 34 (ranking): the section headings are a part of the content indexed again, boosted
    between the title and the text: a page whose heading names the words ranks above pages that
    only mention them as often, and the headings change no match set."""
    from datetime import datetime, timezone

    from conftest import index_settings
    from indexerd.index import IndexDoc

    body = "Some words about loops. " * 5
    docs = {"plain": ("range function statements " * 3 + body, ""),
            "headed": ("The range function. for statements. " + "range function statements " * 2 + body,
                       "The range() Function\nfor Statements"),
            "other": ("unrelated text about snakes " + body, "Snakes")}
    ix = open_index(tmp_path, index_settings(index_engine))
    s = ix.session()
    for key, (content, headings) in docs.items():
        s.update(IndexDoc(key=key, source="s", url=key, path=None, title="Chapter", content=content,
                          headings=headings, last_modified=datetime(2024, 1, 1, tzinfo=timezone.utc),
                          date_source="mtime", media_type="text/plain", size=1))
    s.commit(merge=False)
    try:
        assert [h.key for h in ix.search("range function statements")] == ["headed", "plain"]
        assert [h.key for h in ix.search('"range function"')] == ["headed", "plain"]
        assert ix.count("snakes") == 1 and ix.count("range") == 2
        assert [h.key for h in ix.search("content:snakes")] == ["other"]
        with pytest.raises(QueryError, match="no field 'headings'"):
            ix.search("headings:range")
    finally:
        ix.close()


def test_snippets_are_made_only_for_the_keys_the_caller_chooses_on_every_engine(tmp_path, index_engine) -> None:
    """A collapsed page shows fewer hits than it reads: the engine asks which hits get a snippet
    (``snippets_for``, given every hit's key in rank order) and makes only those."""
    from conftest import index_settings

    ix = open_index(tmp_path, index_settings(index_engine))
    _facet_docs(ix)
    try:
        every = ix.search("python OR running", limit=10)
        asked: list[list[str]] = []

        def first_and_last(keys: list[str]) -> set[str]:
            asked.append(list(keys))
            return {keys[0], keys[-1]}

        some = ix.search("python OR running", limit=10, snippets_for=first_and_last)
        assert asked == [[h.key for h in every]] and len(every) == 4
        assert [(h.key, h.rank) for h in some] == [(h.key, h.rank) for h in every]
        assert [h.snippet for h in some] == [every[0].snippet, "", "", every[-1].snippet]
        assert every[0].snippet and every[-1].snippet and every[0].marks
        assert [(h.marks, h.snippet_note) for h in some[1:3]] == [((), None), ((), None)]
        # the others by key: the chosen hits whole, every hit's key, source and rank
        light = ix.search("python OR running", limit=10, snippets_for=first_and_last, others_keys_only=True)
        assert [light[0], light[-1]] == [some[0], some[-1]]
        assert [(h.key, h.source, h.rank, h.snippet) for h in light] == [(h.key, h.source, h.rank, h.snippet) for h in some]
        if index_engine == "whoosh":  # read from the columns: no stored field of the others
            assert [(h.media_type, h.last_modified) for h in light[1:3]] == [(None, None)] * 2
            assert all(h.media_type and h.last_modified for h in some)
    finally:
        ix.close()
