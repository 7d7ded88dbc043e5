"""The term-grouped posting pool against Whoosh's own: the same documents must give segment files
that are equal byte for byte, in memory and when the pool spills runs (tiny limits), with
updates and deletes inside a batch and a merge of older segments into the commit."""

from __future__ import annotations

import random
from datetime import datetime, timezone
from pathlib import Path

import pytest

from indexerd.config import IndexSettings, WhooshSettings
from indexerd.index import IndexDoc, open_index
from indexerd.index.whoosh.postingpool import TermPostingPool

UTC = timezone.utc


def opened(state: Path, limit: int):
    """The Whoosh index of ``state`` whose writer spills its posting buffer past ``limit`` bytes."""
    return open_index(state, IndexSettings(whoosh=WhooshSettings(writer_memory=limit)))


def docs(seed: int, n: int) -> list[IndexDoc]:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(3000)] + ["the", "running", "Grüße", "a.b.c", "x"]
    out = []
    for i in range(n):
        words = [rng.choice(vocab[: rng.randint(10, len(vocab))]) for _ in range(rng.randint(0, 400))]
        words.append("everywhere")  # one term in every document: posting lists of 3+ blocks
        key = f"file:///d/{rng.randint(0, n // 2)}.txt"  # keys repeat: updates inside a batch
        out.append(IndexDoc(key=key, source=rng.choice(["a", "b"]), url=key, path=f"/d/{i}",
                            title=" ".join(words[:5]), content=" ".join(words),
                            last_modified=datetime(2026, 1, 1 + i % 28, tzinfo=UTC), date_source="mtime",
                            media_type="text/plain", size=len(words)))
    return out


def build(state: Path, batches: list[list[IndexDoc]], *, ours: bool, limit: int, merge_last: bool) -> dict:
    """Index ``batches`` (one commit each; the last one merges) and return {suffix: bytes} of
    the files of the final segments."""
    ix = opened(state, limit)
    for n, batch in enumerate(batches):
        s = ix.session()
        if not ours:  # Whoosh's own pool, with the same limit, and its own posting writer
            from whoosh.writing import PostingPool
            w = s._w
            assert w.__dict__.pop("_flush_segment", None) is not None
            assert w.__dict__.pop("add_document", None) is not None
            w.pool = PostingPool(w._tempstorage, w.newsegment, limitmb=max(1, limit // (1024 * 1024)))
            w.pool.limit = limit
        else:
            assert isinstance(s._w.pool, TermPostingPool) and "_flush_segment" in s._w.__dict__
        for d in batch:
            if d.size % 7 == 0:
                s.delete(d.key)
            else:
                s.update(d)
        s.commit(merge=merge_last and n == len(batches) - 1)
    files = {}
    for p in sorted((state / "index").iterdir()):
        if p.name.startswith("MAIN_") and p.name != "MAIN_WRITELOCK":
            seg, _, suffix = p.name.partition(".")
            files.setdefault(suffix, []).append(p.read_bytes())
    return {k: sorted(v) for k, v in files.items()}


@pytest.mark.parametrize("limit", [64 * 1024 * 1024, 200_000, 20_000])
def test_same_segment_bytes_as_whooshs_pool(tmp_path: Path, limit: int, monkeypatch) -> None:
    """Our pool, posting writer and add_document write Whoosh's own bytes (with Whoosh's block
    encoding: the faster one changes the blocks' bytes, see the next test)."""
    from indexerd.index.whoosh import postingwriter

    monkeypatch.setattr(postingwriter, "BLOCK_FORMAT", postingwriter.WHOOSHS_BLOCKS)
    batches = [docs(1, 420), docs(2, 120), docs(3, 90)]
    theirs = build(tmp_path / "theirs", batches, ours=False, limit=limit, merge_last=True)
    ours = build(tmp_path / "ours", batches, ours=True, limit=limit, merge_last=True)
    assert set(ours) == set(theirs) and "pst" in ours and "trm" in ours
    for suffix in theirs:
        assert ours[suffix] == theirs[suffix], suffix


def postings_of(state: Path) -> dict:
    """Every term of the index in ``state`` as Whoosh reads it: its statistics and its postings
    ``(docnum, weight, value)``."""
    from whoosh import index as windex

    ix = windex.open_dir(str(state / "index"))
    out = {}
    with ix.reader() as r:
        for fieldname, text in r.all_terms():
            ti = r.term_info(fieldname, text)
            m = r.postings(fieldname, text)
            items = []
            while m.is_active():
                items.append((m.id(), m.weight(), m.value()))
                m.next()
            out[fieldname, text] = (ti.weight(), ti.doc_frequency(), ti.min_length(), ti.max_length(),
                                    ti.max_weight(), ti.min_id(), ti.max_id(), items)
    ix.close()
    return out


def test_faster_blocks_read_back_as_whooshs(tmp_path: Path, monkeypatch) -> None:
    """With the posting writer's own block encoding (pickle protocol 4, a small zlib window,
    small blocks stored raw) the blocks differ in bytes, not in what Whoosh reads from them:
    every term's statistics and postings equal stock Whoosh's (blocks of 64 postings here, so
    that long lists span several; the next test holds the default size)."""
    from indexerd.index.whoosh import postingwriter

    assert postingwriter.BLOCK_FORMAT[:4] != postingwriter.WHOOSHS_BLOCKS[:4]
    monkeypatch.setattr(postingwriter, "BLOCK_FORMAT", postingwriter.BLOCK_FORMAT._replace(postings=64))
    batches = [docs(1, 420), docs(2, 120)]
    build(tmp_path / "theirs", batches, ours=False, limit=200_000, merge_last=True)
    build(tmp_path / "ours", batches, ours=True, limit=200_000, merge_last=True)
    theirs, ours = postings_of(tmp_path / "theirs"), postings_of(tmp_path / "ours")
    assert len(ours) > 3000 and ours.keys() == theirs.keys()
    assert max(len(v[-1]) for v in ours.values()) > 128  # a posting list of 3+ blocks
    assert ours == theirs


def test_blocks_hold_1024_postings(tmp_path: Path) -> None:
    """A new segment's posting blocks hold up to 1,024 postings (Whoosh writes 128), as the
    block headers say, and Whoosh's own matcher reads the long list back whole; so does the bulk
    scorer's reader, whose 16 KiB read-ahead window the list's ~30 positions a document outgrow."""
    import numpy as np
    from whoosh import index as windex

    from indexerd.index.whoosh.postingarrays import TermBlocks

    def filler(i: int) -> str:  # 30 more of the word, at random distances (positions that compress badly)
        rng = random.Random(i)
        return " ".join("zyx" if rng.random() < 0.3 else f"f{rng.randrange(50)}" for _ in range(100))

    ix = opened(tmp_path, 64 * 1024 * 1024)
    s = ix.session()
    for i in range(1100):
        s.update(IndexDoc(key=f"k{i}", source="a", url=f"k{i}", path=None, title="t", content=f"zyx w{i} " + filler(i),
                          last_modified=None, date_source="none", media_type="text/plain", size=1))
    s.commit(merge=False)
    ix.close()
    wix = windex.open_dir(str(tmp_path / "index"))
    with wix.reader() as r:
        assert TermBlocks(r.postings("content", "zyx"))._counts == [1024, 76]
        assert list(r.postings("content", "zyx").all_ids()) == list(range(1100))
        blocks = TermBlocks(r.postings("content", "zyx"))
        assert blocks._end - blocks._data[0][0] > 16384  # more than one window
        assert blocks.read(None).ids.tolist() == list(range(1100))
        m = r.postings("content", "zyx")
        theirs = {}
        while m.is_active():
            theirs[m.id()] = m.value()
            m.next()
        got = TermBlocks(r.postings("content", "zyx")).read(np.array([5, 1050]), values=True)
        assert got.ids.tolist() == [5, 1050] and got.values == [theirs[5], theirs[1050]]
    wix.close()


def test_spills_runs_and_cleans_up(tmp_path: Path) -> None:
    ix = opened(tmp_path, 20_000)
    s = ix.session()
    pool = s._w.pool
    batch = docs(4, 200)
    for d in batch:
        s.update(d)
    assert pool.runs_written >= 3
    s.commit(merge=False)
    leftovers = [p for p in tmp_path.rglob("*.trun")]
    assert leftovers == []
    assert ix.doc_count() == len({d.key for d in batch})  # the last write of a key wins
    assert [h.key for h in ix.search("content:w5", limit=1000)]  # searchable


def test_cancel_removes_spill_files(tmp_path: Path) -> None:
    ix = opened(tmp_path, 20_000)
    s = ix.session()
    for d in docs(5, 150):
        s.update(d)
    assert list(tmp_path.rglob("*.trun"))
    s.cancel()
    assert list(tmp_path.rglob("*.trun")) == []


def test_out_of_order_docnums_are_sorted() -> None:
    """Postings of a term that arrive with a docnum not above the last one are sorted as
    Whoosh sorts tuples (it never happens with the writer's own numbering; kept exact anyway)."""
    pool = TermPostingPool(None, limit_bytes=1 << 30)
    items = [("f", b"t", 5, 1.0, b"a"), ("f", b"t", 2, 1.0, b"b"), ("f", b"s", 9, 2.0, b""),
             ("f", b"t", 5, 0.5, b"c"), ("e", b"z", 1, 1.0, b"")]
    for it in items:
        pool.add(it)
    assert list(pool.iter_postings()) == sorted(items)
