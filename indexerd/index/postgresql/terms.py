"""The terms a PostgreSQL index's writers put in its ``terms`` table (for "did you mean":
:meth:`indexerd.index.postgresql.engine.PgIndex.similar_terms`), as this process remembers them:
a session sends only the terms not yet seen committed (:mod:`indexerd.index.postgresql.session`).
"""

from __future__ import annotations

#: The longest term (characters) kept in the ``terms`` table.
MAX_TERM_CHARS = 40
#: Terms a process remembers having committed to the ``terms`` table (about 60 MB at most).
MAX_REMEMBERED_TERMS = 500_000


class RecordedTerms:
    """The terms this process saw committed to the ``terms`` table (not thread-safe: the one
    writer thread uses it)."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def unrecorded(self, terms: set[str]) -> list[str]:
        """The terms of ``terms`` a session should add to the ``terms`` table: those not seen
        committed there, of 2 to :data:`MAX_TERM_CHARS` characters (a longer word is no typo to
        correct), sorted."""
        return sorted(t for t in terms if 2 <= len(t) <= MAX_TERM_CHARS and t not in self._seen)

    def remember(self, terms: set[str]) -> None:
        """Note ``terms`` as committed to the ``terms`` table (forgotten all at once past
        :data:`MAX_REMEMBERED_TERMS`: then each is looked up in the table again)."""
        if len(self._seen) + len(terms) > MAX_REMEMBERED_TERMS:
            self._seen.clear()
        self._seen.update(terms)
