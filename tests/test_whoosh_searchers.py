"""Warm Whoosh searchers (indexerd/index/whoosh/searchers.py): a searcher kept between queries
answers exactly what a new one would, after deletes, merges and re-adds."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from whoosh import fields, index as windex
from whoosh.qparser import QueryParser

from indexerd.index.base import IndexDoc
from indexerd.index.whoosh.engine import WhooshIndex
from indexerd.index.whoosh.searchers import SearcherPool

UTC = timezone.utc


def doc(key: str, text: str) -> IndexDoc:
    return IndexDoc(key=key, source="s", url=key, path=None, title=key, content=text,
                    last_modified=datetime(2024, 1, 1, tzinfo=UTC), date_source="mtime",
                    media_type="text/plain", size=len(text))


def keys(ix: WhooshIndex, q: str) -> list[str]:
    return sorted(h.key for h in ix.search(q, limit=100))


def test_stock_refresh_keeps_deleted_and_merged_documents(tmp_path: Path):
    """Why the pool does not use ``Searcher.refresh()``: on the pinned Whoosh it answers with a
    segment's old deletions and with segments a merge removed."""
    schema = fields.Schema(k=fields.ID(stored=True, unique=True), t=fields.TEXT)
    ix = windex.create_in(str(tmp_path), schema)
    for i in range(3):
        w = ix.writer()
        w.add_document(k=f"d{i}", t="apple")
        w.commit(merge=False)
    q = QueryParser("t", schema).parse("apple")
    s = ix.searcher()
    w = ix.writer()
    w.delete_by_term("k", "d0")
    w.commit(merge=False)
    s = s.refresh()
    with ix.searcher() as fresh:
        assert fresh.doc_count() == 2
    assert s.doc_count() == 3                     # the deletion is not seen
    w = ix.writer()
    w.add_document(k="d9", t="apple")
    w.commit(optimize=True)
    s = s.refresh()
    with ix.searcher() as fresh:
        assert len(fresh.search(q)) == 3
    assert len(s.search(q)) == 6                  # merged-away segments came back
    s.close()


def test_a_kept_searcher_sees_every_commit(tmp_path: Path):
    ix = WhooshIndex.open(tmp_path / "index")
    try:
        for key in ("a", "b", "c"):
            s = ix.session()
            s.update(doc(key, f"apple {key}"))
            s.commit(merge=False)
        assert keys(ix, "apple") == ["a", "b", "c"]
        assert keys(ix, "apple") == ["a", "b", "c"]          # the kept searcher, unchanged index
        s = ix.session()
        s.delete("a")
        s.commit(merge=False)
        assert keys(ix, "apple") == ["b", "c"]               # a deletion in an old segment
        assert ix.count("apple") == 2
        before = ix.segment_count()
        s = ix.session()
        s.update(doc("b", "pear b"))
        s.commit(merge=True)                                 # a merge rewrites the segments
        assert ix.segment_count() < before + 1               # segments were merged away
        assert keys(ix, "apple") == ["c"]
        assert keys(ix, "pear") == ["b"]
    finally:
        ix.close()


def _raw_index(tmp_path: Path):
    schema = fields.Schema(k=fields.ID(stored=True, unique=True), t=fields.TEXT)
    ix = windex.create_in(str(tmp_path), schema)
    w = ix.writer()
    w.add_document(k="a", t="apple")
    w.commit()
    return ix


def test_a_commit_closes_idle_searchers_left_behind(tmp_path: Path):
    """After a commit no idle searcher holds an old generation (the files of removed segments are
    closed at the commit, not at the next query); one still current is kept and lent again."""
    ix = _raw_index(tmp_path)
    pool = SearcherPool(ix)
    with pool.searcher() as first:
        pass
    pool.close_stale()                                   # nothing committed: kept
    with pool.searcher() as again:
        assert again is first and not first.is_closed
    w = ix.writer()
    w.add_document(k="b", t="apple")
    w.commit(optimize=True)
    pool.close_stale()                                   # as WhooshSession.commit calls it
    assert first.is_closed
    with pool.searcher() as fresh:
        assert fresh is not first and fresh.doc_count() == 2
    pool.close()
    assert fresh.is_closed


def test_a_searcher_that_failed_is_not_kept(tmp_path: Path):
    pool = SearcherPool(_raw_index(tmp_path))
    with pytest.raises(OSError):
        with pool.searcher() as lent:
            raise OSError("the query failed")
    assert lent.is_closed
    with pool.searcher() as next_one:
        assert next_one is not lent and next_one.doc_count() == 1
    pool.close()


def test_prefixes_matching_too_many_words_are_refused_before_the_search(tmp_path: Path):
    """The attack run: ``a* OR b* ... OR 9*`` (143 characters) kept Whoosh's one query worker
    44 s on a real tree, long after its caller's timeout.  Prefixes that match more than
    MAX_PREFIX_TERMS words of the index are refused before the search (exit 2, HTTP 400)."""
    import time

    from indexerd.core.errors import QueryError
    from indexerd.index.whoosh.searching import MAX_PREFIX_TERMS

    ix = WhooshIndex.open(tmp_path / "index")
    try:
        s = ix.session()
        words = [f"{c}{i:05d}w" for c in "abcdefghij" for i in range(MAX_PREFIX_TERMS // 5)]
        for n in range(0, len(words), 200):
            s.update(doc(f"d{n}", " ".join(words[n:n + 200])))
        s.commit(merge=False)
        runaway = " OR ".join(f"{c}*" for c in "abcdefghij")
        t0 = time.monotonic()
        with pytest.raises(QueryError, match=f"match more than {MAX_PREFIX_TERMS} words"):
            ix.search(runaway, limit=10)
        with pytest.raises(QueryError, match=f"match more than {MAX_PREFIX_TERMS} words"):
            ix.count(runaway)
        assert time.monotonic() - t0 < 5
        assert len(ix.search("a0001* OR b0000*", limit=100)) > 0  # a few hundred words: answered
    finally:
        ix.close()


def test_a_searcher_sums_a_fields_length_over_its_segments_once(tmp_path: Path):
    """BM25F asks the top searcher for a field's average length for every term in every segment;
    Whoosh sums it over every segment each time (terms x segments^2 reads: 13% of a query on a
    daemon-built index of 58 segments).  A pool's searcher sums it once, and scores the same."""
    from whoosh.reading import SegmentReader

    schema = fields.Schema(k=fields.ID(stored=True, unique=True), t=fields.TEXT)
    ix = windex.create_in(str(tmp_path), schema)
    for i in range(6):
        w = ix.writer()
        w.add_document(k=f"d{i}", t="apple pear " + "plum " * i)
        w.commit(merge=False)
    q = QueryParser("t", schema).parse("apple OR pear OR plum")
    with ix.searcher() as stock:
        expected = [(h["k"], h.score) for h in stock.search(q, limit=None)]
    pool = SearcherPool(ix)
    summed = []
    real = SegmentReader.field_length
    SegmentReader.field_length = lambda self, name: summed.append(name) or real(self, name)
    try:
        with pool.searcher() as s:
            got = [(h["k"], h.score) for h in s.search(q, limit=None)]
            assert s.avg_field_length("t") == pytest.approx(sum(2 + i for i in range(6)) / 6)
            assert s.avg_field_length("k", 7) == 7          # not scorable: the default
    finally:
        SegmentReader.field_length = real
        pool.close()
    assert got == expected
    assert summed == ["t"] * 6, summed                     # each segment's length read once
