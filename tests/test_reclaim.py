"""Deleted documents are reclaimed: repeated full passes keep the index bounded.

The sysadmin run of 59d5feb found 1,749 live documents in 9,003 stored ones (84 segments,
325.7 MB against 58.8 MB fresh) after four forced full passes: Whoosh's ``MERGE_SMALL`` sizes
segments by ``doc_count_all()`` (deleted documents included), so a segment whose documents were
all replaced was never dropped.  These tests re-index the same keys on a real Whoosh index, the
way the writer commits (``merge=False`` per batch, ``merge=True`` when idle).
"""

from __future__ import annotations

import random
from datetime import datetime, timezone
from pathlib import Path

import pytest

from indexerd.index import IndexDoc, SearchIndex, open_index

UTC = timezone.utc
DOCS = 240
BATCH = 40
QUERIES = ("alpha", "word7 OR word11", "common", "title:doc", "beta gamma", "word200")


pytestmark = pytest.mark.usefixtures("indexes_closed")  # no analysis worker left behind


def doc(n: int) -> IndexDoc:
    rng = random.Random(n)
    words = " ".join(rng.choice(("alpha", "beta", "gamma", "delta", "epsilon", f"w{rng.randrange(5000)}"))
                     for _ in range(400))
    return IndexDoc(key=f"file:///d/{n}.txt", source="docs", url=f"file:///d/{n}.txt", path=f"/d/{n}.txt",
                    title=f"doc {n}", content=f"word{n} common {words}",
                    last_modified=datetime(2026, 1, 1, tzinfo=UTC), date_source="mtime",
                    media_type="text/plain", size=len(words))


def update(ix: SearchIndex, numbers) -> None:
    """Update the documents ``numbers`` in one commit without a merge (the live writer's hot path)."""
    s = ix.session()
    for n in numbers:
        s.update(doc(n))
    s.commit(merge=False)


def full_pass(ix: SearchIndex) -> None:
    """Every key once, committed in batches as the live writer does."""
    for start in range(0, DOCS, BATCH):
        update(ix, range(start, min(start + BATCH, DOCS)))


def idle_merge(ix: SearchIndex) -> None:
    ix.session().commit(merge=True)


def results(ix: SearchIndex) -> dict[str, list[str]]:
    return {q: sorted(h.key for h in ix.search(q, limit=1000)) for q in QUERIES}


def test_repeated_full_passes_keep_size_and_segments_bounded(tmp_path: Path) -> None:
    fresh = open_index(tmp_path / "fresh")
    full_pass(fresh)
    idle_merge(fresh)
    fresh_size, fresh_results = fresh.size_bytes(), results(fresh)
    assert fresh.doc_count() == DOCS

    ix = open_index(tmp_path / "again")
    full_pass(ix)
    idle_merge(ix)
    for _ in range(5):
        full_pass(ix)
        # without an idle merge: the replaced batches' segments hold no live document any more
        assert ix.segment_count() <= DOCS // BATCH + 2
        idle_merge(ix)
        assert ix.doc_count() == DOCS
        assert ix.segment_count() <= DOCS // BATCH + 2
        assert ix.size_bytes() <= 2 * fresh_size, (ix.size_bytes(), fresh_size)
        assert results(ix) == fresh_results
    stored = ix._ix.doc_count_all()
    assert stored <= DOCS * 4 // 3 + BATCH, stored  # deleted documents are reclaimed


def test_a_segment_whose_documents_were_all_replaced_is_dropped_at_commit(tmp_path: Path) -> None:
    ix = open_index(tmp_path)
    for _ in range(4):
        update(ix, range(10))
        assert ix.segment_count() == 1
        assert ix._ix.doc_count_all() == 10
    assert sorted(h.key for h in ix.search("common", limit=100)) == sorted(doc(n).key for n in range(10))


def test_deleting_every_document_leaves_an_empty_searchable_index(tmp_path: Path) -> None:
    ix = open_index(tmp_path)
    update(ix, range(5))
    s = ix.session()
    s.delete_many({doc(n).key for n in range(5)})
    s.commit(merge=False)
    assert ix.segment_count() == 0 and ix.doc_count() == 0
    assert ix.search("common") == []
    s = ix.session()
    s.update(doc(1))
    s.commit(merge=True)
    assert [h.key for h in ix.search("common")] == [doc(1).key]


def test_idle_merge_rewrites_a_segment_with_many_deletes(tmp_path: Path) -> None:
    ix = open_index(tmp_path)
    update(ix, range(100))
    update(ix, range(0, 100, 2))  # half of the big segment replaced: more than a third deleted
    before = results(ix)
    assert ix._ix.doc_count_all() == 150
    idle_merge(ix)
    assert ix._ix.doc_count_all() == 100 and ix.doc_count() == 100
    assert results(ix) == before


def test_idle_merge_keeps_a_segment_with_few_deletes(tmp_path: Path) -> None:
    ix = open_index(tmp_path)
    update(ix, range(90))
    update(ix, range(10))
    idle_merge(ix)
    assert ix._ix.doc_count_all() == 100  # a ninth deleted: not worth rewriting 80 documents


def test_live_edits_never_pile_up_more_small_segments_than_the_bound(tmp_path: Path) -> None:
    """Edits of a few documents each, the writer never idle (a live commit each): Whoosh only
    dropped empty segments, so small ones piled up without bound (41 after 50 idle minutes in
    a sysadmin's week).  A live commit now merges the small ones once ``MERGE_AT_SEGMENTS`` are
    there; every document stays found, once."""
    from indexerd.index.whoosh.mergepolicy import MERGE_AT_SEGMENTS

    ix = open_index(tmp_path)
    update(ix, range(DOCS))  # one big segment, as a first pass leaves
    seen = []
    for n in range(60):  # 60 live edits of 2 documents each
        update(ix, [n % DOCS, (n * 7 + 3) % DOCS])
        seen.append(ix.segment_count())
    assert max(seen) <= MERGE_AT_SEGMENTS, seen
    assert ix.doc_count() == DOCS
    assert sorted(h.key for h in ix.search("common", limit=1000)) == sorted(doc(n).key for n in range(DOCS))


def test_a_bulk_passs_commits_are_left_to_the_idle_merge(tmp_path: Path) -> None:
    """Commits of more than SMALL_SEGMENT_DOCS documents (a first pass) are not merged by live
    commits (a Whoosh merge costs about what indexing them again does); the idle maintenance
    merges them."""
    from indexerd.index.whoosh.mergepolicy import MERGE_AT_SEGMENTS, SMALL_SEGMENT_DOCS

    ix = open_index(tmp_path)
    size = SMALL_SEGMENT_DOCS + 1
    for start in range(0, size * (MERGE_AT_SEGMENTS + 2), size):
        update(ix, range(start, start + size))
    assert ix.segment_count() == MERGE_AT_SEGMENTS + 2
    ix.maintain()
    assert ix.segment_count() < MERGE_AT_SEGMENTS and ix.doc_count() == size * (MERGE_AT_SEGMENTS + 2)


def test_an_idle_maintenance_merges_until_a_round_changes_nothing(tmp_path: Path, caplog) -> None:
    """30 commits of 150 documents (a bulk pass's, too big for the live merge): one round of
    the small-segment merge leaves 18 segments, the rounds until nothing changes leave 6.
    Each round says so in the log (a daemon's merge after its first pass of 50,000 files ran
    for minutes at full CPU without a line)."""
    import logging
    import re
    from dataclasses import replace

    caplog.set_level(logging.INFO, logger="indexerd.index.whoosh.engine")

    ix = open_index(tmp_path)
    for start in range(0, 30 * 150, 150):
        s = ix.session()
        for n in range(start, start + 150):
            s.update(replace(doc(0), key=f"file:///d/{n}.txt", url=f"file:///d/{n}.txt", content=f"common w{n}"))
        s.commit(merge=False)
    assert ix.segment_count() == 30
    ix.maintain()
    assert ix.segment_count() <= 6 and ix.doc_count() == 30 * 150
    assert len(ix.search("common", limit=10_000)) == 30 * 150
    rounds = [r.getMessage() for r in caplog.records if "idle merge" in r.getMessage()]
    assert rounds and re.fullmatch(r"index: idle merge round 1: 30 -> \d+ segments in \d+\.\d s", rounds[0]), rounds
    assert rounds[-1].endswith(f"-> {ix.segment_count()} segments in " + rounds[-1].rsplit(" in ", 1)[1])


def every_hit(ix: SearchIndex) -> dict[str, list[str]]:
    return {q: sorted(h.key for h in ix.search(q, limit=10_000)) for q in QUERIES}


def test_after_a_long_idle_the_small_segments_left_by_the_rounds_are_folded_into_one(tmp_path: Path,
                                                                                      monkeypatch) -> None:
    """Issue 29: the rounds of the small-segment merge stop at Whoosh's Fibonacci bound, which
    after a first pass leaves a few big segments and several small ones: an index bigger than a
    one-shot's.  The short maintenance leaves a thorough merge due; once ``merge_idle`` passes
    without a write, in an index past ``FULL_MERGE_MAX_DOCS``, it folds the smallest segments
    into one (smallest first, within ``THOROUGH_MERGE_MAX_DOCS`` live documents, never the
    largest), the answers the same; then nothing more is due."""
    from dataclasses import replace

    from indexerd.index.whoosh import mergepolicy

    monkeypatch.setattr(mergepolicy, "FULL_MERGE_MAX_DOCS", 1000)  # 3,000 documents: past it
    ix = open_index(tmp_path)
    for start in range(0, 50 * 60, 60):
        s = ix.session()
        for n in range(start, start + 60):
            s.update(replace(doc(0), key=f"file:///d/{n}.txt", url=f"file:///d/{n}.txt",
                             content=f"word{n} common {('alpha', 'beta gamma', 'delta')[n % 3]} w{n % 97}"))
        s.commit(merge=False)
    assert ix.maintenance_delay(50) == 2.0  # 16 live commits or more: the short idle
    ix.maintain()
    after_rounds = sorted((s.doc_count() for s in ix._ix._segments()), reverse=True)
    size_after_rounds, answers = ix.size_bytes(), every_hit(ix)
    from indexerd.index.whoosh.mergepolicy import THOROUGH_MERGE_MAX_DOCS

    small: list[int] = []
    for n in sorted(after_rounds[1:]):
        if sum(small) + n > THOROUGH_MERGE_MAX_DOCS:
            break
        small.append(n)
    assert len(small) >= 2 and max(small) > after_rounds[0] / 4, after_rounds  # a big one folded too
    assert ix.maintenance_delay(0) == ix.merge_idle_seconds  # the thorough merge is due
    ix.maintain()
    folded = sorted((s.doc_count() for s in ix._ix._segments()), reverse=True)
    rest = list(after_rounds)
    for n in small:
        rest.remove(n)
    assert folded == sorted(rest + [sum(small)], reverse=True), after_rounds
    assert ix.size_bytes() < size_after_rounds and every_hit(ix) == answers and ix.doc_count() == 50 * 60
    assert ix.maintenance_delay(0) is None


def test_an_index_left_with_many_segments_is_merged_by_the_next_daemon(tmp_path: Path) -> None:
    """A daemon stopped right after its first pass (before its 2 s idle merge: 50,000 files
    left 252 segments, queries 3x slower than the one-shot index's 15) left them for good: the
    next daemon counts its own commits only, and made none.  An index opened with 16 segments or
    more owes the short idle merge; once done, the thorough one is due after ``merge_idle``."""
    from dataclasses import replace

    ix = open_index(tmp_path)
    for start in range(0, 20 * 120, 120):       # a bulk pass: commits of more than 100 documents
        s = ix.session()
        for n in range(start, start + 120):
            s.update(replace(doc(0), key=f"file:///d/{n}.txt", url=f"file:///d/{n}.txt", content=f"word{n} common"))
        s.commit(merge=False)
    ix.close()
    ix = open_index(tmp_path)                    # the next daemon: no commit of its own yet
    try:
        assert ix.segment_count() == 20
        assert ix.maintenance_delay(0) == 2.0    # the short idle merge is owed
        assert ix.maintenance_delay(0) == 2.0    # (still, until it has run)
        ix.maintain()
        assert ix.segment_count() < 16 and ix.doc_count() == 20 * 120
        assert ix.maintenance_delay(0) == ix.merge_idle_seconds   # then the thorough one
    finally:
        ix.close()


def test_short_merges_go_on_while_their_rounds_leave_many_segments(tmp_path: Path, monkeypatch) -> None:
    """A short idle merge does at most MAINTENANCE_ROUNDS rounds; when they leave 16 segments or
    more (having merged some), the next short idle goes on, not ``merge_idle`` (10 minutes)
    later: a daemon's 252 segments took about 20 rounds."""
    from dataclasses import replace

    from indexerd.index.whoosh import engine, mergepolicy

    monkeypatch.setattr(mergepolicy, "SMALL_SEGMENT_DOCS", 5)   # commits of 10: a bulk pass's
    ix = open_index(tmp_path)
    for start in range(0, 60 * 10, 10):
        s = ix.session()
        for n in range(start, start + 10):
            s.update(replace(doc(0), key=f"file:///d/{n}.txt", url=f"file:///d/{n}.txt", content=f"word{n} common"))
        s.commit(merge=False)
    try:
        rounds = engine.MAINTENANCE_ROUNDS
        engine.MAINTENANCE_ROUNDS = 1              # (so that one maintenance cannot finish it)
        try:
            assert ix.maintenance_delay(0) == 2.0
            before = ix.segment_count()
            ix.maintain()
            assert 16 <= ix.segment_count() < before
            assert ix.maintenance_delay(0) == 2.0  # more rounds owed at once
            while ix.segment_count() >= 16:
                ix.maintain()
        finally:
            engine.MAINTENANCE_ROUNDS = rounds
        assert ix.maintenance_delay(0) == ix.merge_idle_seconds and ix.doc_count() == 60 * 10
    finally:
        ix.close()
    ix = open_index(tmp_path)       # an index with a few segments owes the thorough merge only
    try:
        assert ix.segment_count() > 1 and ix.maintenance_delay(0) == ix.merge_idle_seconds
        ix.maintain()
        assert ix.segment_count() == 1 and ix.doc_count() == 60 * 10
        assert ix.maintenance_delay(0) is None
    finally:
        ix.close()


def one_shot_index(path: Path, commits: int = 6, per_commit: int = 50) -> None:
    """An index as ``indexerd index`` leaves it: a segment per commit batch, no idle merge."""
    from dataclasses import replace

    ix = open_index(path)
    for start in range(0, commits * per_commit, per_commit):
        s = ix.session()
        for n in range(start, start + per_commit):
            s.update(replace(doc(n), content=f"word{n} common {('alpha', 'beta gamma', 'delta')[n % 3]}"))
        s.commit(merge=False)
    ix.close()


def test_a_daemon_merges_an_index_of_several_segments_into_one_after_a_long_idle(tmp_path: Path, caplog) -> None:
    """Issue 31: one segment answers a query about a quarter faster than the ten an ``indexerd
    index`` of 50,000 files leaves.  A daemon opening such an index owes the thorough merge after
    ``merge_idle`` (its own commits or not); below ``FULL_MERGE_MAX_DOCS`` it merges every
    segment into one, without the short rounds first, the answers the same."""
    one_shot_index(tmp_path)
    ix = open_index(tmp_path)
    try:
        answers = every_hit(ix)
        assert ix.segment_count() == 6
        assert ix.maintenance_delay(0) == ix.merge_idle_seconds
        with caplog.at_level("INFO", logger="indexerd.index.whoosh.engine"):
            ix.maintain()
        assert ix.segment_count() == 1 and every_hit(ix) == answers and ix.doc_count() == 300
        assert [r.getMessage().split(":")[1].strip() for r in caplog.records] == ["thorough idle merge"]
        assert ix.maintenance_delay(0) is None
    finally:
        ix.close()


def test_an_idle_merge_gives_way_to_a_waiting_write(tmp_path: Path, caplog) -> None:
    """A merge of everything takes minutes at 50,000 documents; a write that arrives meanwhile
    does not wait for it: the merge is cancelled where it stands (the index as it was, every
    answer the same, no file of the unfinished segment left behind) and is due again at the
    next long idle."""
    one_shot_index(tmp_path)
    ix = open_index(tmp_path)
    try:
        answers, files = every_hit(ix), sorted(p.name for p in (tmp_path / "index").iterdir())
        assert ix.maintenance_delay(0) == ix.merge_idle_seconds
        asked = []

        def interrupted() -> bool:
            asked.append(1)
            return len(asked) > 1            # the write arrives while the merge copies postings

        with caplog.at_level("INFO", logger="indexerd.index.whoosh.engine"):
            ix.maintain(interrupted=interrupted)
        assert len(asked) == 2
        assert ix.segment_count() == 6 and every_hit(ix) == answers
        assert "gave way to a write" in caplog.text and "stopped after" in caplog.text
        assert sorted(p.name for p in (tmp_path / "index").iterdir()) == files
        update(ix, [1000])                   # the write goes through
        assert ix.maintenance_delay(0) == ix.merge_idle_seconds   # still due
        ix.maintain()
        assert ix.segment_count() == 1 and ix.doc_count() == 301
    finally:
        ix.close()


def test_the_live_writer_lets_a_file_event_through_a_long_idle_merge(tmp_path: Path, monkeypatch) -> None:
    """End to end in the daemon's writer: after ``merge_idle`` it starts merging an index of
    several segments into one; a live edit submitted meanwhile is searchable in well under the
    merge's time (the merge gives way), and the merge finishes at the next idle."""
    import threading
    import time
    from dataclasses import replace

    from indexerd.config import IndexSettings, WhooshSettings
    from indexerd.core.store import DocumentRecord
    from indexerd.index.whoosh import mergepolicy
    from indexerd.pipeline.writer import IndexWriter

    one_shot_index(tmp_path, commits=6, per_commit=800)
    started, calls = threading.Event(), []
    real = mergepolicy.merge_all_into_one

    def merge_all(writer, segments):
        calls.append(time.monotonic())
        started.set()
        return real(writer, segments)

    monkeypatch.setattr(mergepolicy, "merge_all_into_one", merge_all)
    ix = open_index(tmp_path, IndexSettings(whoosh=WhooshSettings(merge_idle=0.2)))
    w = IndexWriter(ix, tmp_path / "state.sqlite3", live=True, commit_interval_seconds=1.0)
    try:
        assert started.wait(30)
        t0 = time.monotonic()
        edit = replace(doc(5000), content="quokkaword")
        w.submit_index(edit, DocumentRecord(key=edit.key, source="docs"))
        while not ix.search("quokkaword") and time.monotonic() - t0 < 30:
            time.sleep(0.02)
        took = time.monotonic() - t0
        while ix.segment_count() > 1 and time.monotonic() - t0 < 60:
            time.sleep(0.05)
        merged = time.monotonic() - t0
        assert ix.doc_count() == 4801 and len(calls) >= 2      # interrupted, then done again
    finally:
        w.close()
        ix.close()
    assert took < (merged - (calls[-1] - t0)) and took < 5, (took, merged)
