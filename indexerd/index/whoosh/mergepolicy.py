"""Which Whoosh segments a commit keeps, drops or rewrites: the index's merge policy.

Every update is a delete plus an add, and a deleted document stays in its segment until the
segment is rewritten.  Whoosh's own ``MERGE_SMALL`` sorts and sizes segments by
``doc_count_all()``, which counts deleted documents too, so a segment whose documents were all
replaced is never dropped and never merged: repeated full passes only grow the index.  The
policies here count live documents instead, and weigh deletes the way Lucene's
``TieredMergePolicy`` does (a segment with many deletes is worth rewriting).

A policy is called by Whoosh's ``SegmentWriter.commit(mergetype=...)`` with the writer and its
list of existing segments (deletions of this session already applied to them); it returns the
segments to keep as they are, after handing every segment to rewrite to ``writer.add_reader``
(which copies only the live documents into the writer's new segment).
"""

from __future__ import annotations

#: A segment whose deleted fraction exceeds this is rewritten by an idle merge (Lucene's
#: TieredMergePolicy favours segments with deletes; one third mirrors its reclaim weighting).
DELETED_FRACTION_TO_REWRITE = 1 / 3


def _live(seg) -> int:
    return seg.doc_count()


def _rewrite(writer, segments) -> None:
    from whoosh.reading import SegmentReader

    for seg in segments:
        reader = SegmentReader(writer.storage, writer.schema, seg)
        try:
            writer.add_reader(reader)
        finally:
            reader.close()


def drop_empty(writer, segments: list) -> list:
    """Keep every segment that still holds a live document; drop the others (no rewriting).

    Cheap enough for every commit: a dropped segment is only left out of the new TOC, and Whoosh
    removes its files after writing the TOC.  ``writer`` is unused (the policy signature)."""
    return [seg for seg in segments if _live(seg) > 0]


def _split_deleted(writer, segments: list) -> tuple[list, list]:
    """``(kept, rewrite)`` of the segments with a live document: those whose deleted fraction
    exceeds :data:`DELETED_FRACTION_TO_REWRITE` are to be rewritten."""
    kept, rewrite = [], []
    for seg in drop_empty(writer, segments):
        total = seg.doc_count_all()
        if total and (total - _live(seg)) / total > DELETED_FRACTION_TO_REWRITE:
            rewrite.append(seg)
        else:
            kept.append(seg)
    return kept, rewrite


def reclaim_and_merge_small(writer, segments: list) -> list:
    """Idle merge: drop empty segments, rewrite those whose deleted fraction exceeds
    :data:`DELETED_FRACTION_TO_REWRITE`, then merge small segments as Whoosh's ``MERGE_SMALL``
    does (the smallest ones, while their total stays under a Fibonacci bound) but sized by live
    documents.  Returns the segments kept unchanged."""
    from whoosh.util import fib

    kept, rewrite = _split_deleted(writer, segments)
    kept.sort(key=_live)
    small: list = []
    total_docs = sum(_live(s) for s in rewrite)
    for i, seg in enumerate(kept):
        total_docs += _live(seg)
        small.append(seg)
        if i > 3 and total_docs < fib(i + 5):
            break
    else:
        small = []  # no merge point: Whoosh's MERGE_SMALL then merges nothing
    if len(small) < 2:
        small = []
    chosen = rewrite + small
    _rewrite(writer, chosen)
    return [seg for seg in kept if seg not in small]


#: The thorough idle merge folds the smallest segments, all but the largest, into one, up to
#: this many live documents of them: a Whoosh merge rewrites every posting in Python and a live
#: edit waits for it (about 9 ms a document of bench/gen_corpus.py's files on the test machine,
#: so well under a minute).
THOROUGH_MERGE_MAX_DOCS = 5_000


def merge_small_into_one(writer, segments: list) -> list:
    """The thorough idle merge, after ``merge_idle`` seconds without a write: drop empty
    segments, rewrite those whose deleted fraction exceeds :data:`DELETED_FRACTION_TO_REWRITE`,
    and merge the smallest segments into one, smallest first, while their live documents stay
    within :data:`THOROUGH_MERGE_MAX_DOCS` (never the largest).  The rounds of
    :func:`reclaim_and_merge_small` stop where its Fibonacci bound does (after a daemon's first
    pass of 10,000 files: three segments of 2,800 documents and eight of 200), which leaves the
    index larger than a one-shot ``indexerd index``'s, each segment carrying its own term
    dictionary; this folds the eight and one of the three (bench/RESULTS.md).  Returns the
    segments kept unchanged."""
    kept, rewrite = _split_deleted(writer, segments)
    small: list = []
    if len(kept) > 1:
        largest = max(kept, key=_live)
        budget = THOROUGH_MERGE_MAX_DOCS
        for seg in sorted((seg for seg in kept if seg is not largest), key=_live):
            if _live(seg) > budget:
                break
            small.append(seg)
            budget -= _live(seg)
    if len(small) < 2:
        small = []
    _rewrite(writer, rewrite + small)
    return [seg for seg in kept if seg not in small]


#: The thorough idle merge folds every segment into one while the index holds at most this many
#: live documents: one segment answers a query about a quarter faster than the ten a first
#: index of 50,000 files leaves (bench/RESULTS.md).  A Whoosh merge rewrites every posting in
#: Python (~2.7 ms a document of bench/gen_corpus.py's files: 50,000 in about 2 minutes), and
#: gives way to any write that arrives meanwhile
#: (:exc:`indexerd.index.whoosh.postingpool.MergeInterrupted`).
FULL_MERGE_MAX_DOCS = 100_000


def merge_thoroughly(writer, segments: list) -> list:
    """The thorough idle merge, after ``merge_idle`` seconds without a write: every segment
    with a live document rewritten into one (:func:`merge_all_into_one`) while they hold at most
    :data:`FULL_MERGE_MAX_DOCS` live documents and the writer's pool can stop it for a waiting
    write (indexerd's pool: not stock Whoosh's), else :func:`merge_small_into_one`.  Returns the
    segments kept unchanged."""
    if sum(_live(seg) for seg in segments) <= FULL_MERGE_MAX_DOCS and hasattr(writer.pool, "interrupted"):
        return merge_all_into_one(writer, segments)
    return merge_small_into_one(writer, segments)


def merge_all_into_one(writer, segments: list) -> list:
    """Drop empty segments and rewrite every other one into the writer's new segment (one left
    alone is rewritten only when more than :data:`DELETED_FRACTION_TO_REWRITE` of it is
    deleted).  Returns the segments kept unchanged."""
    kept, rewrite = _split_deleted(writer, segments)
    if len(kept) + len(rewrite) > 1:
        rewrite, kept = rewrite + kept, []
    _rewrite(writer, rewrite)
    return kept


#: Segments at which :func:`bounded` merges the small ones, and what is small (live documents).
MERGE_AT_SEGMENTS = 12
SMALL_SEGMENT_DOCS = 100


def bounded(writer, segments: list) -> list:
    """A live commit's policy: drop empty segments; once :data:`MERGE_AT_SEGMENTS` are left,
    merge every segment of at most :data:`SMALL_SEGMENT_DOCS` live documents into one.  Live
    edits make segments of a few documents, cheap to merge, which this keeps from piling up
    while the writer is never idle; the segments of a bulk pass (a commit batch each) are left
    to the idle maintenance (:func:`reclaim_and_merge_small`, in rounds), since a Whoosh merge
    rewrites every posting in Python and would slow the pass about as much as indexing again
    (bench/RESULTS.md)."""
    kept = drop_empty(writer, segments)
    if len(kept) < MERGE_AT_SEGMENTS:
        return kept
    small = [seg for seg in kept if _live(seg) <= SMALL_SEGMENT_DOCS]
    if len(small) < 2:
        return kept
    _rewrite(writer, small)
    return [seg for seg in kept if seg not in small]
