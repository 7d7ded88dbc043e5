"""PassCounts: the invariant ``seen = indexed + unchanged + skipped + errors`` is kept by one method."""

import re
from pathlib import Path

import pytest

from indexerd.core.counts import PassCounts
from indexerd.core.outcome import Verdict

PACKAGE = Path(__file__).resolve().parent.parent / "indexerd"


def _invariant(c: PassCounts) -> bool:
    return c.seen == c.indexed + c.unchanged + c.skipped + c.errors


def test_record_counts_each_verdict_once_and_keeps_the_invariant():
    c = PassCounts()
    for v in (Verdict.INDEXED, Verdict.UNCHANGED, Verdict.UNCHANGED, Verdict.SKIPPED):
        c.record(v)
    c.record(Verdict.DELETED, 5)
    c.record(Verdict.REDIRECT)
    c.record("errors", message="boom: file:///x")
    assert c.as_dict() == {"seen": 5, "indexed": 1, "unchanged": 2, "skipped": 1, "deleted": 5, "errors": 1}
    assert c.last_error == "boom: file:///x"
    assert _invariant(c)


def test_revise_to_error_moves_a_counted_item_and_counts_a_failed_delete_as_seen():
    c = PassCounts()
    c.record(Verdict.INDEXED)
    c.record(Verdict.DELETED)
    c.revise_to_error(Verdict.INDEXED, "ack failed")
    assert (c.seen, c.indexed, c.errors) == (1, 0, 1)
    c.revise_to_error("deleted", "ack failed for a delete")
    assert (c.seen, c.errors, c.deleted) == (2, 2, 1)
    assert _invariant(c) and c.last_error == "ack failed for a delete"


def test_an_unknown_verdict_is_refused():
    with pytest.raises(ValueError):
        PassCounts().record("maybe")


def test_no_module_changes_a_pass_count_by_hand():
    """Only PassCounts itself touches its fields: a source that wrote ``counts.seen += 1`` could
    break the invariant (issue 11)."""
    rx = re.compile(r"counts\.(seen|indexed|unchanged|skipped|deleted|errors)\s*[-+]?=")
    offenders = [f"{p.relative_to(PACKAGE)}:{n}" for p in PACKAGE.rglob("*.py")
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if rx.search(line)]
    assert offenders == []
