"""The conformance suite: every index engine answers the text-analysis fixtures alike.

tests/fixtures/text-analysis/expected.json holds, for each query, the files that must be hit
(no more, no fewer), as the brute-force reference matcher computes them from the token-stream
contract (tests/test_query.py checks that).  Each engine indexes the fixtures (title and content
both the file's text, as the reference matcher assumes) and must give exactly those hits.

The Whoosh engine still analyses with its own ``StemmingAnalyzer`` and query parser (analysis
version 1; its side of the shared analyzer is in indexerd/index/whoosh/analysis.py, not wired
yet): it joins :data:`SHARED_ANALYSIS_ENGINES` when it is.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import ENGINE_NAMES, index_settings

from indexerd.index import IndexDoc, open_index

ROOT = Path(__file__).parent / "fixtures" / "text-analysis"
UTC = timezone.utc
#: The engines that index with the shared analyzer (indexerd/index/analysis.py).
SHARED_ANALYSIS_ENGINES = [e for e in ENGINE_NAMES if e != "whoosh"]


@pytest.mark.parametrize("index_engine", SHARED_ANALYSIS_ENGINES)
def test_every_engine_gives_the_expected_hits_of_the_text_analysis_fixtures(tmp_path, index_engine) -> None:
    expected = json.loads((ROOT / "expected.json").read_text(encoding="utf-8"))
    ix = open_index(tmp_path, index_settings(index_engine))
    try:
        s = ix.session()
        for p in sorted(ROOT.glob("*.txt")):
            text = p.read_text(encoding="utf-8")
            s.update(IndexDoc(key=f"file:///{p.name}", source="fixtures", url=f"file:///{p.name}", path=None,
                              title=text, content=text, last_modified=datetime(2024, 1, 1, tzinfo=UTC),
                              date_source="mtime", media_type="text/plain", size=len(text)))
        s.commit(merge=True)
        wrong = {}
        for query, names in expected.items():
            got = sorted(h.key.rsplit("/", 1)[-1] for h in ix.search(query, limit=50))
            if got != names:
                wrong[query] = {"got": got, "expected": names}
        assert not wrong, json.dumps(wrong, ensure_ascii=False, indent=1)
        assert ix.count() == len(list(ROOT.glob("*.txt")))
    finally:
        ix.close()
