"""The fused analyzer must give exactly Whoosh's StemmingAnalyzer tokens and positions."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings, strategies as st
from whoosh.analysis import StemmingAnalyzer

from indexerd.index.whoosh.analysis import FusedStemmingAnalyzer

REF = StemmingAnalyzer()
FUSED = FusedStemmingAnalyzer()


def toks(ana, text, **kw):
    return [(t.text, t.pos, t.startchar, t.endchar) for t in ana(text, positions=True, chars=True, **kw)]


def test_same_tokens_on_real_text() -> None:
    import email.message
    text = Path(email.message.__file__).read_text(encoding="utf-8")
    text += " Grüße İstanbul tls_* a.b.c x I the THE Running runs ran 3.14 v4l2_cid"
    assert toks(FUSED, text) == toks(REF, text)
    assert len(toks(FUSED, text)) > 1000


def test_query_mode_and_stops_kept() -> None:
    text = "the event loop is running"
    assert toks(FUSED, text, mode="query") == toks(REF, text, mode="query")
    a = [(t.text, t.stopped) for t in FUSED(text, removestops=False)]
    b = [(t.text, t.stopped) for t in REF(text, removestops=False)]
    assert a == b


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_same_tokens_on_any_text(text) -> None:
    assert toks(FUSED, text) == toks(REF, text)


def test_schema_round_trip(tmp_path) -> None:
    """The analyzer is pickled into the index schema and comes back usable."""
    import pickle
    assert pickle.loads(pickle.dumps(FUSED)) == FUSED


# -- FusedPositions: the posting format with the analyzer inline ---------------------------------

from whoosh.formats import Positions  # noqa: E402

from indexerd.index.whoosh.analysis import FusedPositions  # noqa: E402


def postings(fmt, text, ana=FUSED):
    return list(fmt.word_values(text, ana, mode="index"))


def test_fused_positions_same_postings_on_real_text() -> None:
    import email.message
    text = Path(email.message.__file__).read_text(encoding="utf-8") * 3
    text += " Grüße İstanbul tls_* a.b.c x I the THE Running runs ran 3.14 v4l2_cid"
    for boost in (1.0, 3.0):
        got = postings(FusedPositions(field_boost=boost), text)
        assert got == postings(Positions(field_boost=boost), text)
        assert len(got) > 500
        assert all(isinstance(w, float) for _t, _f, w, _v in got)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_fused_positions_same_postings_on_any_text(text) -> None:
    assert postings(FusedPositions(), text) == postings(Positions(), text)


def test_fused_positions_other_analyzers_and_values_go_through_whoosh() -> None:
    text = "The running dogs ran"
    assert postings(FusedPositions(), text, REF) == postings(Positions(), text, REF)
    assert postings(FusedPositions(), ["already", "split"]) == postings(Positions(), ["already", "split"])


def test_fused_positions_keep_memory_per_word_small() -> None:
    """A 1.2M-word text: the positions of its terms take ~4 bytes per word, not ~37 (list of
    ints): the peak of tracemalloc while indexing stays under 16 MB."""
    import tracemalloc

    words = [f"w{i % 5000}" for i in range(1_200_000)]
    text = " ".join(words)
    tracemalloc.start()
    try:
        n = sum(1 for _ in FusedPositions().word_values(text, FUSED, mode="index"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n == 5000
    assert peak < 16 * 1024 * 1024, peak


def test_index_made_before_fused_positions_is_upgraded_at_its_next_commit(tmp_path) -> None:
    """An index whose schema still names Whoosh's Positions keeps its documents searchable, and
    its next commit records FusedPositions."""
    from datetime import datetime, timezone

    from whoosh import index as windex

    from indexerd.index import IndexDoc, WhooshIndex, _schema

    old = _schema()
    for name in ("title", "content"):
        old[name].format = Positions(field_boost=old[name].format.field_boost)
    (tmp_path / "index").mkdir()
    ix = windex.create_in(str(tmp_path / "index"), old)
    w = ix.writer()
    w.add_document(key="k1", source="s", content="old running text", title="old")
    w.commit()
    assert type(windex.open_dir(str(tmp_path / "index")).schema["content"].format) is Positions

    wix = WhooshIndex.open(tmp_path)
    s = wix.session()
    s.update(IndexDoc(key="k2", source="s", url="k2", path=None, title="new", content="new running texts",
                      last_modified=datetime(2026, 1, 1, tzinfo=timezone.utc), date_source="mtime",
                      media_type="text/plain", size=3))
    s.commit(merge=True)
    schema = windex.open_dir(str(tmp_path / "index")).schema
    assert type(schema["content"].format) is FusedPositions
    assert schema["title"].format.field_boost == 3.0
    assert sorted(h.key for h in wix.search("running")) == ["k1", "k2"]
    assert sorted(h.key for h in wix.search('"running text"')) == ["k1", "k2"]
    assert [h.key for h in wix.search("content:old")] == ["k1"]
