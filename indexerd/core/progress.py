"""Progress of a long pass: a bar on a terminal, one log line a while elsewhere (the daemon).

A pass has two phases: the walk (files found, total unknown) and the work (documents to read
and index, total known).  ``tqdm`` draws the bar on stderr only when stderr is a terminal; it is
imported only then, so scripted and daemon runs never pay for it.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

log = logging.getLogger(__name__)

class Progress:
    """Progress for one source's pass.

    Args:
        label: shown before the bar / in the log line (the source name).
        tty: force the bar on or off; None means "when stderr is a terminal".
        log_every_seconds: interval of the log line when there is no bar.
        unit: what the walk counts (``files``, ``rows``, ``pages``: the source kind's
            :attr:`~indexerd.sources.registry.Kind.unit`).
        walk: the walk phase's line, ``{n}`` the count so far (the kind's
            :attr:`~indexerd.sources.registry.Kind.walk`: a SQL load reads the rows it counts, a
            tree walk only finds); None: ``{n} <unit> found``.

    Not thread-safe: one pass, one Progress.
    """

    def __init__(self, label: str, *, tty: bool | None = None, log_every_seconds: float = 10.0,
                 unit: str = "files", walk: str | None = None) -> None:
        self.label = label
        self.unit = unit
        self.walk = walk if walk is not None else "{n} " + unit + " found"
        self.tty = sys.stderr.isatty() if tty is None else tty
        self.log_every_seconds = log_every_seconds
        self.found = 0
        self.done = 0
        self.total = 0
        self._bar: Any = None  # a tqdm bar once drawn on a terminal
        self._last_log = time.monotonic()
        self._started = time.monotonic()

    def tick_walk(self, n: int = 1) -> None:
        """``n`` more files (rows, pages: :attr:`unit`) found by the walk."""
        before, self.found = self.found, self.found + n
        if self.found // 2000 != before // 2000:
            line = f"{self.label}: " + self.walk.format(n=self.found)
            if self.tty:
                sys.stderr.write(f"\r{line}")
                sys.stderr.flush()
            else:
                self._maybe_log(line)

    def start_work(self, total: int) -> None:
        """The walk is over; ``total`` documents need reading."""
        self.total = total
        if self.tty and self.found >= 2000:
            sys.stderr.write("\r" + " " * 60 + "\r")
        if self.tty and total:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=self.label, unit="doc", file=sys.stderr,
                             dynamic_ncols=True, leave=False, mininterval=0.2)
        elif total:
            log.info("%s: %d %s found, %d to read", self.label, self.found, self.unit, total)

    def tick_work(self, item: str = "") -> None:
        """One document done."""
        self.done += 1
        if self._bar is not None:
            self._bar.update(1)
        else:
            self._maybe_log(f"{self.label}: {self.done}/{self.total} documents read")

    def tick_crawl(self, done: int, queued: int) -> None:
        """One more page of a crawl: ``done`` fetched so far, ``queued`` still in the frontier
        (the total grows as links are found)."""
        self.done, self.total = done, done + queued
        if self.tty:
            if self._bar is None:
                from tqdm import tqdm

                self._bar = tqdm(total=self.total, desc=self.label, unit="page", file=sys.stderr,
                                 dynamic_ncols=True, leave=False, mininterval=0.2)
            self._bar.total = self.total
            self._bar.update(done - self._bar.n)
        else:
            self._maybe_log(f"{self.label}: {done} pages fetched, {queued} queued")

    def _maybe_log(self, msg: str) -> None:
        now = time.monotonic()
        if now - self._last_log >= self.log_every_seconds:
            self._last_log = now
            elapsed = now - self._started
            log.info("%s (%.0f s)", msg, elapsed)

    def close(self) -> None:
        """Remove the bar; safe to call twice."""
        bar, self._bar = self._bar, None
        if bar is not None:
            bar.close()
