"""Whether the index holds what its sources have: the answers of a search made while a rebuild
or a source's first pass runs are partial, and say so with that pass's progress.

A source is *incomplete* while it never completed a pass, or while its last completed pass
ended before the index was last rebuilt (:data:`~indexerd.runtime.recovery.REBUILT_AT_KEY`, which
:func:`indexerd.runtime.recovery.rebuild` records in the state store: another engine or text
analysis, or a corrupt index moved aside).  Its progress is what ``ctl status`` counts for its
running pass (:class:`indexerd.core.progress.Progress`).

:func:`incomplete_sources` and :func:`coverage` are pure; :class:`CoverageWatch` reads the
store and the daemon's per-source state.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from indexerd.core.errors import IndexerdError
from indexerd.core.progress import Progress
from indexerd.runtime.recovery import rebuild_pending, rebuilt_at

#: how long a read of the store's run records is reused (seconds); a pass ending here refreshes it
READ_TTL_SECONDS = 2.0
#: why a source is incomplete
REBUILD, FIRST_PASS = "rebuild", "first pass"


@dataclass(frozen=True)
class SourceCoverage:
    """One incomplete source: ``why`` (:data:`REBUILD` or :data:`FIRST_PASS`), whether its pass
    runs now, the documents (``unit``: files, pages, rows) it has read so far, and how many it
    will read (None while unknown: a tree's walk, a crawl finding pages as it goes)."""

    source: str
    why: str
    running: bool
    done: int = 0
    total: int | None = None
    unit: str = "documents"

    def as_json(self) -> dict:
        return {"source": self.source, "why": self.why, "running": self.running, "done": self.done,
                "total": self.total, "unit": self.unit}

    def text(self) -> str:
        """``docs 120 of 500 files``, ``site 3 pages so far``, ``docs waiting for its pass``."""
        if not self.running:
            return f"{self.source} waiting for its pass"
        if self.total is not None:
            return f"{self.source} {self.done} of {self.total} {self.unit}"
        return f"{self.source} {self.done} {self.unit} so far"


@dataclass(frozen=True)
class Coverage:
    """What the index holds of its sources: complete when ``sources`` is empty."""

    sources: tuple[SourceCoverage, ...] = ()

    @property
    def partial(self) -> bool:
        return bool(self.sources)

    def as_json(self) -> dict:
        """``{"partial": bool, "progress": [SourceCoverage.as_json(), ...]}``."""
        return {"partial": self.partial, "progress": [s.as_json() for s in self.sources]}

    @property
    def doing(self) -> str:
        """``rebuilding from the sources``, ``first pass`` or both; empty when complete."""
        whys = {s.why for s in self.sources}
        return ", ".join(w for w, why in (("rebuilding from the sources", REBUILD), ("first pass", FIRST_PASS))
                         if why in whys)

    def progress_text(self) -> str:
        """Each incomplete source's :meth:`SourceCoverage.text`, comma-separated."""
        return ", ".join(s.text() for s in self.sources)

    def text(self) -> str:
        """One line for people; empty when complete: ``the index is incomplete (rebuilding
        from the sources: docs 120 of 500 files); these are the hits indexed so far``."""
        if not self.partial:
            return ""
        return f"the index is incomplete ({self.doing}: {self.progress_text()}); these are the hits indexed so far"


def incomplete_sources(names: Iterable[str], runs: Mapping[str, dict], rebuilt_at: datetime | None,
                       *, completed_here: Mapping[str, datetime] | None = None) -> dict[str, str]:
    """The configured sources ``names`` whose documents the index may not hold yet, each with
    why (:data:`FIRST_PASS`, :data:`REBUILD`).

    Args:
        runs: the store's :meth:`source_runs` (``completed_at``: aware UTC or None).
        rebuilt_at: when the index was last rebuilt (aware UTC), None if never.
        completed_here: passes this process saw complete (source -> its end, aware UTC), newer
            than what ``runs`` may have been read with.
    """
    out = {}
    for name in names:
        done = (runs.get(name) or {}).get("completed_at")
        here = (completed_here or {}).get(name)
        if here is not None and (done is None or here > done):
            done = here
        if done is None:
            out[name] = FIRST_PASS
        elif rebuilt_at is not None and done < rebuilt_at:
            out[name] = REBUILD
    return out


def coverage(incomplete: Mapping[str, str], progress: Mapping[str, tuple[bool, Progress | None]]) -> Coverage:
    """The :class:`Coverage` of ``incomplete`` (:func:`incomplete_sources`) given each source's
    ``(running, Progress or None)``.  A pass's total is known once its walk is over (files,
    rows); a crawl's never is (it finds pages as it goes)."""
    out = []
    for name in sorted(incomplete):
        running, prog = progress.get(name, (False, None))
        done, total, unit = 0, None, "documents"
        if prog is not None:
            unit = prog.unit
            done = prog.done
            if prog.total and unit != "pages":
                total = prog.total
        out.append(SourceCoverage(name, incomplete[name], running, done, total, unit))
    return Coverage(tuple(out))


class CoverageWatch:
    """The daemon's :class:`Coverage` now (``d``: the running daemon: its sources, per-source
    state under ``d.lock``, and its state store).

    The store's run records and rebuild time are read at most every :data:`READ_TTL_SECONDS`
    (other nodes of a cluster end passes too); a pass this daemon ends counts at once.  A store
    that cannot be read counts as the last read (none: complete).  Thread-safe.
    """

    def __init__(self, d) -> None:
        self.d = d
        self._lock = threading.Lock()
        self._read: tuple[float, dict, datetime | None] = (-1e9, {}, None)

    def _runs(self, fresh: bool = False) -> tuple[dict, datetime | None]:
        with self._lock:
            at, runs, rebuilt = self._read
            if not fresh and time.monotonic() - at < READ_TTL_SECONDS:
                return runs, rebuilt
            try:
                with self.d.indexer.state.open_store(readonly=True) as store:
                    runs, rebuilt = store.source_runs(), rebuilt_at(store)
            except IndexerdError:
                pass
            self._read = (time.monotonic(), runs, rebuilt)
            return runs, rebuilt

    def current(self) -> Coverage:
        """The coverage now (the store read at most :data:`READ_TTL_SECONDS` ago)."""
        runs, rebuilt = self._runs()
        return coverage(incomplete_sources(list(self.d.sources), runs, rebuilt,
                                           completed_here=self._completed_here()), self._progress())

    def rebuild_pending(self, name: str) -> bool:
        """Whether source ``name``'s next pass must read everything again, unconditionally (a
        forced pass: :func:`indexerd.runtime.recovery.rebuild_pending`), read from the store now."""
        runs, rebuilt = self._runs(fresh=True)
        run = dict(runs.get(name) or {})
        here = self._completed_here().get(name)
        if here is not None and (run.get("completed_at") is None or here > run["completed_at"]):
            run["completed_at"] = here
        return rebuild_pending(run or None, rebuilt)

    def _completed_here(self) -> dict[str, datetime]:
        d = self.d
        with d.lock:
            return {n: st.last_finished for n, st in d.states.items()
                    if st.last_finished is not None and st.last_error is None
                    and not st.last_interrupted and st.last_started is not None
                    and st.last_started >= d.started_at}

    def _progress(self) -> dict[str, tuple[bool, Progress | None]]:
        d = self.d
        with d.lock:
            return {n: (st.running, st.progress if st.running else None) for n, st in d.states.items()}
