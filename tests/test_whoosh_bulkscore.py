"""Whoosh queries scored in bulk (indexerd/index/whoosh/bulkscore.py, postings read by
postingarrays.py) give what Whoosh's own
collector gives when it scores every match: the same documents, in the same order, with the same
scores to the last bit, on a real index of several segments with deletions -- single words, AND,
OR, NOT, prefixes, exact phrases (in and under a negation), ties between equal documents, a date
filter, every limit -- and a query it cannot evaluate falls back to Whoosh's collector.

The reference is ``TopCollector`` without matcher replacement (``replace=0``; block quality off):
with it on, as ``Searcher.search`` runs it, Whoosh 2.7.5 loses better documents
(:func:`test_whooshs_matcher_replacement_lost_a_better_document`)."""

from __future__ import annotations

import pickle
import random
import struct
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from whoosh import query as wq
from whoosh.collectors import FilterCollector, TopCollector

from indexerd.index.base import IndexDoc
from indexerd.index.whoosh import bulkscore, postingarrays, postingwriter
from indexerd.index.whoosh.bulkscore import Unsupported, count_documents, top_documents
from indexerd.index.whoosh.compile import compile_query
from indexerd.index.whoosh.engine import WhooshIndex
from indexerd.index.whoosh.searching import analysed, date_filter

UTC = timezone.utc
#: a Zipf-like vocabulary: the first words in most documents, the last in few
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "zeta", "theta", "iota",
         "lambda", "rho"]
QUERIES = ["alpha", "beta", "iota", "rho", "alpha beta", "alpha rho", "gamma delta omega",
           "alpha OR beta", "alpha OR rho OR iota", "kappa OR theta", "al*", "s*", "alpha -beta",
           "alpha -rho", "beta -(gamma OR delta)", '"alpha beta"', '"beta alpha"',
           '"alpha alpha"', '"alpha beta gamma"', '"alpha beta" rho', '"alpha beta" OR iota',
           'alpha -"beta gamma"', '"rho nowhere"', "nowhere", "number 7", "title3"]


def doc(i: int, title: str, text: str) -> IndexDoc:
    return IndexDoc(key=f"k{i}", source="ts"[i % 2], url=f"k{i}", path=None, title=title, content=text,
                    last_modified=datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=i % 50),
                    date_source="mtime", media_type=("text/plain", "text/html", "application/pdf")[i % 3],
                    size=len(text))


def text(rng: random.Random, n: int) -> str:
    return " ".join(WORDS[min(int(rng.paretovariate(1.1)) - 1, len(WORDS) - 1)] for _ in range(n))


@pytest.fixture(scope="module")
def ix(tmp_path_factory):
    """An index of 900 documents in 9 segments, a tenth of them rewritten (deletions in the old
    segments), a run of identical documents (equal scores); posting blocks of 16 postings, so a
    common word's list spans several blocks and a query reads only some of them."""
    rng = random.Random(11)
    path: Path = tmp_path_factory.mktemp("bulk")
    with pytest.MonkeyPatch.context() as mp:  # posting lists of several blocks: blocks of 16
        mp.setattr(postingwriter, "BLOCK_FORMAT", postingwriter.BLOCK_FORMAT._replace(postings=16))
        ix = built(path, rng)
    yield ix
    ix.close()


def built(path: Path, rng: random.Random) -> WhooshIndex:
    """The index of :func:`ix` in ``path``."""
    ix = WhooshIndex.open(path, create=True)
    docs = []
    for i in range(900):
        if 400 <= i < 420:
            docs.append(doc(i, "same title", "alpha beta gamma alpha"))
        else:
            docs.append(doc(i, f"title{i % 10} {text(rng, rng.randrange(1, 4))}",
                            f"number {i} " + text(rng, rng.randrange(2, 120))))
    for start in range(0, 900, 100):
        s = ix.session()
        for d in docs[start:start + 100]:
            s.update(d)
        s.commit(merge=False)
    s = ix.session()
    for i in range(0, 900, 10):  # rewritten: the old copies deleted in their segments
        s.update(doc(i, f"title{i % 10} again", "alpha rho " + text(rng, 30)))
    s.commit(merge=False)
    return ix


def whooshs(searcher, q, limit, filt=None) -> list[tuple[float, int]]:
    """Whoosh's best ``limit`` with every match scored (its collector, no matcher replacement)."""
    c = TopCollector(limit, usequality=False, replace=0)
    if filt is not None:
        c = FilterCollector(c, allow=filt)
    searcher.search_with_collector(q, c)
    return [(h.score, h.docnum) for h in c.results()]


def test_the_index_has_segments_deletions_and_small_segments(ix) -> None:
    with ix._searchers.searcher() as searcher:
        leaves = searcher.leaf_searchers()
        assert len(leaves) >= 9
        assert any(s.reader().has_deletions() for s, _ in leaves)


@pytest.mark.parametrize("query", QUERIES)
def test_documents_order_and_scores_equal_whooshs(ix, query: str) -> None:
    q = compile_query(analysed(query))
    with ix._searchers.searcher() as searcher:
        for limit in (1, 3, 10, 20, 100, 5000):
            expect = whooshs(searcher, q, limit)
            assert top_documents(searcher, q, limit) == expect, (query, limit)
        if query not in ('"rho nowhere"', "nowhere"):
            assert expect, query


def test_whooshs_matcher_replacement_lost_a_better_document(ix) -> None:
    # Whoosh's Searcher.search (TopCollector replacing the matcher every 10 matches) answered
    # this query with k536 (10.339) second, passing over k291 (10.368, title "alpha beta"
    # and both words in its text): its replaced matcher skipped a document that scored more
    # than its heap's least.  Every match scored, k291 is second; so it is here.
    q = compile_query(analysed("alpha beta"))
    with ix._searchers.searcher() as searcher:
        exhaustive = sorted(((h.score, h.docnum) for h in searcher.search(q, limit=None)),
                            key=lambda sd: (-sd[0], sd[1]))[:10]
        assert top_documents(searcher, q, 10) == exhaustive == whooshs(searcher, q, 10)
        keys = [searcher.stored_fields(d)["key"] for _, d in exhaustive]
    assert keys[:2] == ["k443", "k291"]
    assert [h.key for h in ix.search("alpha beta", limit=10)] == keys


def test_ties_keep_document_order(ix) -> None:
    q = compile_query(analysed('same'))  # the title of the run of identical documents
    with ix._searchers.searcher() as searcher:
        got = top_documents(searcher, q, 5)
        assert got == whooshs(searcher, q, 5)
        assert len({s for s, _ in got}) == 1  # the identical documents: one score
        assert [d for _, d in got] == sorted(d for _, d in got)


@pytest.mark.parametrize("query", ["alpha", "alpha beta", '"alpha beta"', "alpha -beta", "s*"])
def test_a_filter_allows_what_whooshs_filter_allows(ix, query: str) -> None:
    q = compile_query(analysed(query))
    filt = date_filter(datetime(2024, 1, 10, tzinfo=UTC), datetime(2024, 1, 20, tzinfo=UTC))
    with ix._searchers.searcher() as searcher:
        allow = searcher._filter_to_comb(filt)
        for limit in (1, 20, 1000):
            assert top_documents(searcher, q, limit, allow=allow) == whooshs(searcher, q, limit, filt)
        none = date_filter(datetime(2030, 1, 1, tzinfo=UTC), None)
        assert top_documents(searcher, q, 20, allow=searcher._filter_to_comb(none)) == []


def test_matchers_it_does_not_know_are_walked_by_whoosh(ix) -> None:
    # a sloppy phrase is Whoosh's SpanNear2: walked where it stands, under a union
    q = wq.Or([wq.Phrase("content", ["alpha", "gamma"], slop=3), wq.Term("title", "again")])
    with ix._searchers.searcher() as searcher:
        assert top_documents(searcher, q, 30) == whooshs(searcher, q, 30)


def test_what_cannot_be_evaluated_goes_to_whooshs_collector(ix) -> None:
    # three sloppy phrases: an ArrayUnionMatcher (segments of at most 5,000 documents) that read
    # ahead in children it cannot walk again
    q = wq.Or([wq.Phrase("content", ["alpha", w], slop=3) for w in ("beta", "gamma", "delta")])
    with ix._searchers.searcher() as searcher:
        with pytest.raises(Unsupported):
            top_documents(searcher, q, 10)
        expect = [h["key"] for h in searcher.search(q, limit=10)]
    assert expect


def test_the_engine_returns_whooshs_hits(ix) -> None:
    for query in ["alpha rho", '"alpha beta"', "alpha -beta", "al*"]:
        q = compile_query(analysed(query))
        with ix._searchers.searcher() as searcher:
            expect = [(searcher.stored_fields(d)["key"], s) for s, d in whooshs(searcher, q, 15)]
        hits = ix.search(query, limit=15)
        assert [(h.key, h.score) for h in hits] == expect, query
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1))


def test_phrases_are_checked_only_as_far_as_needed(ix, monkeypatch) -> None:
    calls = []
    real = bulkscore._Segment._exact_phrase

    def counting(self, m, consumed, within):
        calls.append(len(within) if within is not None else None)
        return real(self, m, consumed, within)

    monkeypatch.setattr(bulkscore._Segment, "_exact_phrase", counting)
    q = compile_query(analysed('"alpha beta"'))
    with ix._searchers.searcher() as searcher:
        assert top_documents(searcher, q, 3) == whooshs(searcher, q, 3)
    assert calls and None not in calls  # never over a whole segment
    assert sum(calls) < 400  # the candidates checked: a batch or two, not every match


@pytest.mark.parametrize("query", QUERIES)
def test_counts_equal_whooshs(ix, query: str) -> None:
    q = compile_query(analysed(query))
    filt = date_filter(datetime(2024, 1, 10, tzinfo=UTC), datetime(2024, 1, 20, tzinfo=UTC))
    with ix._searchers.searcher() as searcher:
        whole = searcher.search(q, limit=None, scored=False).scored_length()
        assert count_documents(searcher, q) == whole
        some = searcher.search(q, limit=None, scored=False, filter=filt).scored_length()
        assert count_documents(searcher, q, allow=searcher._filter_to_comb(filt)) == some
    assert ix.count(query) == whole


def test_positions_read_as_arrays_equal_the_unpickled_ones() -> None:
    # values as Whoosh's Positions format writes them: one position, runs of small deltas,
    # deltas of 256 and more (other opcodes), lists past pickle's 1,000-item batches, a value
    # whose pickle lost its STOP byte
    rng = random.Random(3)
    values = []
    for _ in range(2000):
        n = rng.choice([1, 1, 2, 3, 10, 200, 999, 1000, 1001, 1500])
        deltas = [rng.choice([0, 255, 256, 300, 70000, 2**31 - 5]) if rng.random() < 0.05 else rng.randrange(1, 256)
                  for _ in range(n)]
        v = struct.pack("!I", n) + pickle.dumps(deltas, 2)
        values.append(v[:-1] if rng.random() < 0.02 else v)
    lens, flat = postingarrays._position_deltas_of(values)
    expect = [postingarrays._position_deltas(v) for v in values]
    assert lens.tolist() == [len(e) for e in expect]
    assert flat.tolist() == [d for e in expect for d in e]


@pytest.mark.parametrize("query", QUERIES)
def test_facets_counted_in_bulk_equal_whooshs_grouped_facets(ix, query) -> None:
    """A broad query's facets took 2.2 s on 100,000 documents through Whoosh's grouped facets
    (each match filed in Python): counted in bulk, the same counts, with a date filter too."""
    from whoosh import sorting

    from indexerd.index.whoosh.bulkfacets import facet_counts

    q = compile_query(analysed(query, True))
    if q is None:
        return
    filt = date_filter(datetime(2024, 1, 10, tzinfo=UTC), datetime(2024, 2, 1, tzinfo=UTC))
    for f in (None, filt):
        groups = sorting.Facets()
        for name in ("media_type", "source"):
            groups.add_field(name, maptype=sorting.Count)
        with ix._searchers.searcher() as searcher:
            want = searcher.search(q, limit=1, scored=False, groupedby=groups, filter=f)
            got = facet_counts(searcher, q, ("media_type", "source"), allow=searcher._filter_to_comb(f))
            for name in ("media_type", "source"):
                expected = {(v if isinstance(v, str) else v.decode()): n for v, n in want.groups(name).items() if n}
                assert got[name] == expected, (query, name, f)


def test_an_index_pass_that_never_searches_does_not_import_numpy(tmp_path) -> None:
    """numpy (about a tenth of a second to import) is the bulk scorer's: opening a Whoosh index
    installs indexerd's patches, which once imported it for one class; an unchanged `indexerd
    index` of a tree must not pay for it."""
    import subprocess
    import sys

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.txt").write_text("alpha beta\n", encoding="utf-8")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\ncontrol_socket = "{tmp_path / "s.sock"}"\n'
                   f'[index]\nengine = "whoosh"\n[[sources.filesystem]]\nname = "t"\npath = "{tree}"\n',
                   encoding="utf-8")
    code = ("import sys; from indexerd.cli.main import main; rc = main(['index', '-c', sys.argv[1]]); "
            "print(rc, 'numpy' in sys.modules)")
    for _ in range(2):  # the first pass and an unchanged one
        p = subprocess.run([sys.executable, "-c", code, str(cfg)], capture_output=True, text=True, timeout=120)
        assert p.stdout.split()[-2:] == ["0", "False"], (p.stdout, p.stderr)


@pytest.mark.parametrize("query", QUERIES)
def test_count_and_facets_together_equal_each_alone(ix, query) -> None:
    since, until = datetime(2024, 1, 10, tzinfo=UTC), datetime(2024, 2, 1, tzinfo=UTC)
    for kw in ({}, {"since": since, "until": until}):
        assert ix.count_and_facets(query, **kw) == (ix.count(query, **kw), ix.facets(query, **kw)), (query, kw)


def test_an_exact_phrase_is_checked_once_for_its_count_and_its_facets(ix, monkeypatch) -> None:
    """The page's count and facets each evaluated an exact phrase's matches on Whoosh (about
    1.1 s of a 50,000-document page): together, each segment's candidates are checked once."""
    calls: list[int] = []
    real = bulkscore._Segment._exact_phrase

    def counting(self, m, consumed, within):
        calls.append(id(self))
        return real(self, m, consumed, within)

    monkeypatch.setattr(bulkscore._Segment, "_exact_phrase", counting)
    total, facets = ix.count_and_facets('"alpha beta"')
    assert total == sum(n for _, n in facets["source"]) > 20
    together = len(calls)      # once per segment and field the phrase may be in
    assert together > 0
    calls.clear()
    ix.count('"alpha beta"')
    ix.facets('"alpha beta"')
    assert len(calls) == 2 * together   # what the page paid before


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 5000), max_size=300), max_size=4))
def test_sorted_unique_is_numpys_unique(parts):
    """The union of posting lists (increasing runs, one after another) by a sort, as
    ``np.unique`` gives it (which hashes first on numpy 2.x: 15-30x slower)."""
    import numpy as np

    from indexerd.index.whoosh.postingarrays import sorted_unique

    runs = [np.array(sorted(set(p)), dtype=np.int64) for p in parts]
    values = np.concatenate(runs) if runs else np.zeros(0, dtype=np.int64)
    got = sorted_unique(values)
    assert got.dtype == np.int64 and got.tolist() == np.unique(values).tolist()
    assert sorted_unique(values[::-1]).tolist() == np.unique(values).tolist()   # any order


@pytest.mark.parametrize("query", ["alpha OR rho", "iota OR kappa OR nowhere", "alpha rho", '"alpha beta" OR theta',
                                   "title3 OR lambda", "alpha -beta"])
def test_words_a_best_document_lacks_are_its_texts(ix, query: str) -> None:
    """``words_absent`` names, for each best document, exactly the query's words its stored text
    (here its whole content) does not hold, read from the postings the scoring read."""
    import zlib

    from indexerd.index.analysis import analyzer
    from indexerd.index.snippets import SnippetQuery
    from indexerd.index.whoosh.wordsheld import words_absent

    tree = analysed(query)
    sq = SnippetQuery(tree, analyzer())
    words = sq.terms.union(*sq.phrases)
    with ix._searchers.searcher() as searcher:
        kept: list = []
        best = top_documents(searcher, compile_query(tree), 40, kept=kept)
        got = words_absent(kept, [d for _s, d in best], words)
        assert len(got) == len(best) > 10
        for _s, d in best:
            text = zlib.decompress(searcher.stored_fields(d)["text_z"]).decode()
            assert got[d] == {w for w in words if w not in set(analyzer().tokens(text))}, (query, d)
    if query == "iota OR kappa OR nowhere":
        assert any(got.values())  # some best documents lack a word of the query


def test_a_segment_reader_remembers_its_term_infos(ix, monkeypatch) -> None:
    """A term's matcher looked it up three times in each segment (``in``, the postings, the
    scorer's block statistics); the patched terms reader answers from a dict after the first
    (the same term info as a fresh lookup's), remembers a missing term too, and keeps at most
    ``TERM_INFOS_KEPT`` of them."""
    from whoosh.codec.whoosh3 import W3TermInfo
    from whoosh.reading import TermNotFound

    from indexerd.index.whoosh import patches

    monkeypatch.setattr(patches, "TERM_INFOS_KEPT", 3)
    with ix._searchers.searcher() as searcher:
        terms = searcher.leaf_searchers()[0][0].reader()._terms
        terms.__dict__.pop("_indexerd_infos", None)
        info = terms.term_info("content", b"alpha")
        assert terms.term_info("content", b"alpha") is info and ("content", b"alpha") in terms
        fresh = W3TermInfo.from_bytes(terms._tindex[terms._keycoder("content", b"alpha")])
        assert (info.doc_frequency(), info.weight(), info.max_weight()) == \
            (fresh.doc_frequency(), fresh.weight(), fresh.max_weight())
        for _ in range(2):
            assert ("content", b"nowhere") not in terms
            with pytest.raises(TermNotFound):
                terms.term_info("content", b"nowhere")
        terms.term_info("content", b"beta")
        terms.term_info("content", b"gamma")                 # a fourth: looked up, not kept
        assert set(terms._indexerd_infos) == {("content", b"alpha"), ("content", b"nowhere"),
                                              ("content", b"beta")}
