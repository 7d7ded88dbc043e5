"""The tantivy engine's word pairs (``content_pairs``, indexerd/index/tantivy/pairs.py): the pair
terms of a token list, the phrase's weight given to its pair, a content phrase answered through
its pairs (same documents, scores and order as the positional phrase), and an index of the format
before the pairs rebuilt by the next pass.  Real tantivy indexes in temp dirs."""

from __future__ import annotations

import logging
import math
from datetime import datetime, timezone
from pathlib import Path

import pytest
import tantivy
from conftest import one_pass

from indexerd.core.errors import IndexUnavailable
from indexerd.index import IndexDoc, IndexIdentity, open_index, opening, read_identity
from indexerd.index.analysis import analyzer
from indexerd.index.tantivy import ENGINE, FORMAT_VERSION
from indexerd.index.tantivy.compile import compile_query
from indexerd.index.tantivy.offload import analyse_texts
from indexerd.index.tantivy.pairs import (PAIR_JOIN, PAIR_PAD, bm25_idf, field_terms, pair_boost, pair_terms,
                                          phrase_pairs)
from indexerd.index.tantivy.schema import to_document

UTC = timezone.utc


def doc(key: str, content: str, title: str = "") -> IndexDoc:
    return IndexDoc(key=key, source="docs", url=key, path=None, title=title, content=content,
                    last_modified=datetime(2024, 1, 5, tzinfo=UTC), date_source="mtime",
                    media_type="text/plain", size=len(content))


@pytest.fixture
def ix(tmp_path: Path):
    index = ENGINE.open(tmp_path / "index", None, create=True)
    yield index
    index.close()


def positional(ix, query: str, limit: int = 50) -> list[tuple[str, float]]:
    """``(key, score)`` of ``query`` compiled with every phrase as tantivy's positional phrase
    (the engine before the pairs)."""
    from indexerd.index.tantivy import compile as C

    saved = C.phrase
    C.phrase = lambda schema, field, tokens, stats=None: tantivy.Query.phrase_query(schema, field, list(tokens))
    try:
        return [(h.key, h.score) for h in ix.search(query, limit=limit)]
    finally:
        C.phrase = saved


# -- pure --------------------------------------------------------------------------------------
def test_pair_terms_are_the_neighbouring_tokens_in_order_repeats_kept() -> None:
    assert pair_terms(["difo", "masuf", "difo", "masuf"]) == ["difo.masuf", "masuf.difo", "difo.masuf"]
    assert pair_terms(["one"]) == [] and pair_terms([]) == []
    assert phrase_pairs(("difo", "masuf", "difo", "masuf")) == ["difo.masuf", "masuf.difo"]


def test_the_pairs_field_holds_as_many_terms_as_the_content() -> None:
    assert field_terms(["difo", "masuf", "difo"]) == ["difo.masuf", "masuf.difo", PAIR_PAD]
    assert field_terms(["one"]) == [PAIR_PAD] and field_terms([]) == []
    assert PAIR_PAD not in phrase_pairs(("a", "b", "c"))  # no phrase asks for the pad


def test_no_token_holds_the_pair_joiner_so_a_pair_term_names_one_pair() -> None:
    a = analyzer()
    text = ("Edit pg_hba.conf and www.example.com v1.2.3 3.14 snake_case_name trailing_ dots... "
            "東京都に住んでいます café Straße x.y.z")
    tokens = a.analyse(text).tokens
    assert tokens and not [t for t in tokens if PAIR_JOIN in t], tokens


def test_the_pair_boost_gives_the_pair_the_phrases_idf() -> None:
    n = 1000
    assert bm25_idf(0, n) == pytest.approx(math.log(1 + 1000.5 / 0.5))
    assert bm25_idf(n, n) == pytest.approx(math.log(1 + 0.5 / 1000.5)) and bm25_idf(n + 5, n) == bm25_idf(n, n)
    # two common words (990 and 900 documents), their pair in 700: the phrase's idf is the sum
    boost = pair_boost([990, 900], 700, n)
    assert boost * bm25_idf(700, n) == pytest.approx(bm25_idf(990, n) + bm25_idf(900, n))
    assert 0 < boost < 1  # common words, rarer pair: the pair alone would weigh more
    assert pair_boost([3, 3], 3, n) > 1  # rare words: the phrase weighed twice one word
    assert pair_boost([0, 0], 0, 0) > 0  # an empty index: no division by zero


def test_the_analysis_gives_the_content_pairs_beside_the_content_tokens() -> None:
    (title, content, ids, headings, pairs), = analyse_texts([("Falcon", "The peregrine falcon hunts", "")], True)
    assert content == "peregrin falcon hunt"
    assert pairs == "peregrin.falcon falcon.hunt ."
    assert analyse_texts([("", "alone", "")], True)[0][4] == "."  # one token: the pad alone
    assert analyse_texts([("title", "", "")], True)[0][4] == ""  # no content: no term


# -- the engine ----------------------------------------------------------------------------------
def test_a_two_word_content_phrase_is_answered_by_its_pair_term(ix) -> None:
    """The input of issue 31's p95: a phrase of two words.  A document whose content holds the
    two words side by side but whose ``content_pairs`` lacks the pair (written by hand here) is
    not found: the positions are not read."""
    s = ix.session()
    s.update(doc("k:indexed", "the peregrine falcon hunts"))
    s.commit(merge=False)
    w = ix._ix.writer(heap_size=15_000_000, num_threads=1)
    w.add_document(to_document(doc("k:no-pairs", "peregrine falcon"), ("", "peregrin falcon", "", "", "")))
    w.commit()
    w.wait_merging_threads()
    del w
    assert sorted(h.key for h in ix.search("peregrine falcon")) == ["k:indexed", "k:no-pairs"]
    assert [h.key for h in ix.search('"peregrine falcon"')] == ["k:indexed"]
    assert ix.count('"peregrine falcon"') == 1
    q = repr(compile_query(ix._analysed('"peregrine falcon"'), ix.schema))
    assert '"peregrin.falcon"' in q and q.count("PhraseQuery") == 2, q  # title, headings: positional


CORPUS = {
    "k:a": "peregrine falcon over the river; a falcon peregrine too",
    "k:b": "falcon peregrine falcon peregrine falcon",                  # "peregrine falcon" once
    "k:c": "the peregrine of the falcon",                               # stop words between: a phrase
    "k:d": "peregrine hunts, falcon dives, peregrine falcon peregrine falcon",
    "k:e": "river falcon peregrine",
    "k:f": "east west north south, east west",
    "k:g": "east west, west north",                                     # pairs of "east west north" apart
    "k:h": "東京都に住んでいます falcon",
    "k:i": "Edit pg_hba.conf, then reload pg hba conf",
    "k:j": "falcon falcon falcon peregrine",
}
PHRASES = ['"peregrine falcon"', '"falcon peregrine"', '"east west north"', '"west north"',
           '"east west north south"', '"falcon falcon"', '"東京都"', "pg_hba.conf", '"pg hba"',
           '"peregrine falcon" OR river', '"peregrine falcon" -river', 'title:"peregrine falcon"',
           '"peregrine falcon" river', '"river falcon peregrine"', '"falcon river"']


@pytest.mark.parametrize("query", PHRASES)
def test_content_phrases_through_the_pairs_find_and_score_as_the_positional_phrase(ix, query) -> None:
    s = ix.session()
    for key, text in CORPUS.items():
        s.update(doc(key, text, title="peregrine falcon notes" if key == "k:e" else ""))
    s.commit(merge=False)
    want = positional(ix, query)
    got = [(h.key, h.score) for h in ix.search(query, limit=50)]
    assert bool(want) == (query != '"falcon river"'), query  # the words, never side by side: none
    assert sorted(k for k, _ in got) == sorted(k for k, _ in want)
    # the same weight and length normalisation: the same scores (float32 rounding apart), so the
    # same order, even on these documents of 3-9 tokens
    scores = dict(want)
    for key, score in got:
        assert score == pytest.approx(scores[key], rel=1e-5), (query, key, score, scores[key])
    assert [k for k, _ in got] == [k for k, _ in want]
    assert ix.count(query) == len(want)


def test_a_longer_phrase_whose_pairs_occur_apart_is_not_found(ix) -> None:
    s = ix.session()
    s.update(doc("k:apart", "east west, then west north"))
    s.update(doc("k:phrase", "east west north"))
    s.commit(merge=False)
    assert [h.key for h in ix.search('"east west north"')] == ["k:phrase"]
    assert sorted(h.key for h in ix.search('"east west"')) == ["k:apart", "k:phrase"]


def test_an_index_of_the_format_before_the_pairs_is_rebuilt_by_the_next_pass(tmp_path, caplog) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "falcon.txt").write_text("The peregrine falcon hunts over the river\n", encoding="utf-8")
    (tree / "river.txt").write_text("A falcon over the peregrine river\n", encoding="utf-8")
    cfg_path = tmp_path / "indexerd.toml"
    cfg_path.write_text(f'state_dir = "{tmp_path / "state"}"\n[index]\nengine = "tantivy"\n'
                        f'[[sources.filesystem]]\nname = "tree"\npath = "{tree}"\nwatch = false\n',
                        encoding="utf-8")
    from indexerd.config import load_config

    cfg = load_config(str(cfg_path))
    assert one_pass(cfg)["indexed"] == 2
    state = tmp_path / "state"
    assert read_identity(state) == IndexIdentity("tantivy", opening.ANALYSIS_VERSION, FORMAT_VERSION)
    assert FORMAT_VERSION == 3
    opening.write_identity(state, IndexIdentity("tantivy", opening.ANALYSIS_VERSION, 2))
    with pytest.raises(IndexUnavailable, match="tantivy format 2, this indexerd writes format 3"):
        open_index(state, cfg.index, create=False)
    with caplog.at_level(logging.WARNING):
        assert one_pass(cfg)["indexed"] == 2  # every file read again
    assert any("rebuilding the index" in r.getMessage() and "format 2" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert read_identity(state).format == 3
    ix = open_index(state, cfg.index, create=False)
    try:
        assert [Path(h.key).name for h in ix.search('"peregrine falcon"')] == ["falcon.txt"]
    finally:
        ix.close()
    assert one_pass(cfg)["indexed"] == 0
