"""The fused analyzer must give exactly Whoosh's StemmingAnalyzer tokens and positions."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings, strategies as st
from whoosh.analysis import StemmingAnalyzer

from indexerd.analysis import FusedStemmingAnalyzer

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
