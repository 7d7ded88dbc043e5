"""A pass's counts (:class:`PassCounts`) and the named counters ``ctl status`` shows (:class:`Counters`).

Every document met in a pass lands in exactly one of ``indexed``, ``unchanged``, ``skipped`` or
``errors``, so ``seen = indexed + unchanged + skipped + errors``; ``deleted`` counts documents
removed because they are gone.  The invariant is kept in one place, :meth:`PassCounts.record`,
which takes a :class:`~indexerd.core.outcome.Verdict`; the pipeline calls it for every outcome.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from indexerd.core.outcome import Verdict

__all__ = ["PassCounts", "Counters"]


@dataclass
class PassCounts:
    """Counts of one pass over one source (or several, when summed).

    Counts change only through :meth:`record` (and :meth:`fail`, its shorthand for an error), so
    ``seen = indexed + unchanged + skipped + errors`` always holds.

    ``failed`` says why the source's whole pass failed (its root is missing, a statement failed,
    no seed host answered, the index commit failed), None when it ran; it is not a count and is
    not in :meth:`as_dict`.
    """

    seen: int = 0
    indexed: int = 0
    unchanged: int = 0
    skipped: int = 0
    deleted: int = 0
    errors: int = 0
    failed: str | None = field(default=None, compare=False)
    #: the message of the pass's latest error (a document's or the whole pass's), for status
    last_error: str | None = field(default=None, compare=False)
    #: in a cluster, this node's part in a web pass the nodes crawl together ended while the
    #: pass goes on on other nodes (nothing was left for this node): not a pass that ended
    left_to_others: bool = field(default=False, compare=False)
    #: the skipped and failed documents by reason (``binary``, ``too-large``, ``parse-error``...),
    #: for the one line a pass logs at its end instead of one line per document
    reasons: dict[str, int] = field(default_factory=dict, compare=False)

    def record(self, verdict: Verdict | str, n: int = 1, *, message: str | None = None,
               reason: str | None = None) -> None:
        """Count ``n`` items with ``verdict``: a document verdict also counts them as seen;
        ``deleted`` counts only deletions; ``redirect`` nothing.  ``message`` (errors) is kept as
        :attr:`last_error`; ``reason`` of a skipped or failed item is counted in :attr:`reasons`.

        Raises:
            ValueError: ``verdict`` is not a :class:`Verdict` value.
        """
        v = Verdict(verdict)
        if v is Verdict.REDIRECT:
            return
        if v is Verdict.DELETED:
            self.deleted += n
            return
        self.seen += n
        setattr(self, v.value, getattr(self, v.value) + n)
        if reason and v in (Verdict.SKIPPED, Verdict.ERRORS):
            self.reasons[reason] = self.reasons.get(reason, 0) + n
        if v is Verdict.ERRORS and message:
            self.last_error = message

    def revise_to_error(self, verdict: Verdict | str, message: str) -> None:
        """An item already counted with ``verdict`` failed afterwards (a SQL queue row indexed,
        then its acknowledgement failed): it moves to ``errors``.  A ``deleted`` item was not a
        seen document, so it is counted as one failed item."""
        v = Verdict(verdict)
        if v in (Verdict.INDEXED, Verdict.UNCHANGED, Verdict.SKIPPED, Verdict.ERRORS):
            self.seen -= 1
            setattr(self, v.value, getattr(self, v.value) - 1)
        self.record(Verdict.ERRORS, message=message)

    def fail(self, message: str) -> None:
        """Count one error (a document, a robots.txt, or the whole pass as its one item) and keep
        its message: ``record(Verdict.ERRORS, message=message)``."""
        self.record(Verdict.ERRORS, message=message)

    def add(self, other: "PassCounts") -> None:
        """Add ``other``'s counts to these; its last error wins, the first failure is kept."""
        for k in ("seen", "indexed", "unchanged", "skipped", "deleted", "errors"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.last_error = other.last_error or self.last_error
        self.failed = self.failed or other.failed
        for reason, n in other.reasons.items():
            self.reasons[reason] = self.reasons.get(reason, 0) + n

    def reasons_text(self) -> str:
        """The skipped and failed documents by reason, most first: ``"binary 100, too-large 2"``
        (empty when there are none)."""
        return ", ".join(f"{r} {n}" for r, n in sorted(self.reasons.items(), key=lambda rn: (-rn[1], rn[0])))

    def as_dict(self) -> dict[str, int]:
        """The six counts by name (``failed`` and ``last_error`` are not counts)."""
        return {k: getattr(self, k) for k in ("seen", "indexed", "unchanged", "skipped", "deleted", "errors")}


class Counters:
    """Named, thread-safe counters (``decide.content-unchanged``, ``skip.too-large`` ...)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._c: dict[str, int] = {}

    def inc(self, name: str, n: int = 1) -> None:
        """Add ``n`` to the counter ``name`` (created at 0)."""
        with self._lock:
            self._c[name] = self._c.get(name, 0) + n

    def snapshot(self) -> dict[str, int]:
        """Every counter by name, sorted; a copy."""
        with self._lock:
            return dict(sorted(self._c.items()))
