"""Exact phrases on Whoosh by position sets (indexerd/index/whoosh/phrase.py) give what Whoosh's
own ``Phrase`` gives: the same documents, in the same order, with the same scores, on a real
index of several segments -- repeated words, a phrase at a text's start and end, words present
but apart or reversed, three and four words, a word no document has."""

from __future__ import annotations

import random
from datetime import datetime, timezone
from pathlib import Path

from whoosh import query as wq

from indexerd.index.base import IndexDoc
from indexerd.index.whoosh.engine import WhooshIndex
from indexerd.index.whoosh.phrase import ExactPhrase

UTC = timezone.utc
WORDS = ["alpha", "beta", "gamma", "delta", "omega"]


def doc(key: str, text: str) -> IndexDoc:
    return IndexDoc(key=key, source="s", url=key, path=None, title=key, content=text,
                    last_modified=datetime(2024, 1, 1, tzinfo=UTC), date_source="mtime",
                    media_type="text/plain", size=len(text))


def test_exact_phrases_match_what_whooshs_phrase_matches(tmp_path: Path) -> None:
    rng = random.Random(7)
    ix = WhooshIndex.open(tmp_path, create=True)
    fixed = ["alpha beta gamma", "beta alpha", "alpha alpha beta", "alpha zeta beta", "gamma delta",
             "delta alpha beta alpha beta", "beta", "omega omega omega"]
    texts = fixed + [" ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 40))) for _ in range(300)]
    for start in range(0, len(texts), 60):  # several segments
        s = ix.session()
        for i in range(start, min(start + 60, len(texts))):
            s.update(doc(f"k{i}", texts[i]))
        s.commit(merge=False)
    phrases = [["alpha", "beta"], ["beta", "alpha"], ["alpha", "alpha"], ["alpha", "beta", "gamma"],
               ["omega", "omega", "omega"], ["delta", "alpha", "beta", "alpha"], ["alpha", "nowhere"],
               ["gamma", "delta"]]
    with ix._searchers.searcher() as searcher:
        for words in phrases:
            ours = [(h["key"], round(h.score, 9)) for h in searcher.search(ExactPhrase("content", words), limit=None)]
            stock = [(h["key"], round(h.score, 9)) for h in searcher.search(wq.Phrase("content", words), limit=None)]
            assert ours == stock, words
            assert ours or words == ["alpha", "nowhere"], words
        assert "k0" in {h["key"] for h in searcher.search(ExactPhrase("content", ["alpha", "beta", "gamma"]), limit=None)}
    # through the engine's query language too
    assert "k2" in {h.key for h in ix.search('"alpha alpha beta"', limit=1000)}
    assert "k3" not in {h.key for h in ix.search('"alpha beta"', limit=1000)}
    ix.close()
