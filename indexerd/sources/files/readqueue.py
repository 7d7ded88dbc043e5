"""The files a tree's pass will read, found by its walk: in memory a chunk at a time, the rest in a
temp file.

The walk and the store's rows are merged first (the pass must know what is gone before it
deletes anything), so every file to read is known before the first is read.  On a first pass
that is every file of the tree: a path and a stat each, about 1 KB in memory per file, over a
gigabyte at 10^6 files (bench/RESULTS.md).  :class:`ReadQueue` keeps at most :data:`CHUNK`
entries in memory and pickles each full chunk to an unnamed temp file, read back in order.
"""

from __future__ import annotations

import logging
import os
import tempfile
from typing import IO, Iterator

log = logging.getLogger(__name__)

__all__ = ["CHUNK", "ReadQueue"]

#: Entries kept in memory; each full chunk goes to the temp file.
CHUNK = 10_000


class ReadQueue:
    """``(path, os.stat_result)`` entries in walk order, appended then iterated once.

    A pass of fewer than :data:`CHUNK` files never touches the disk.  The temp file is made in
    :func:`tempfile.gettempdir` (``$TMPDIR``, the service's private ``/tmp``), unnamed, so it
    is gone when closed or when the process dies.  A spill that fails (a full temp directory)
    keeps the entries in memory and logs it once: the pass goes on.
    """

    def __init__(self, chunk: int | None = None) -> None:
        self.chunk = chunk or CHUNK
        self._tail: list[tuple[str, os.stat_result]] = []
        self._file: IO[bytes] | None = None
        self._spilled = 0
        self._spill_failed = False

    def append(self, entry: tuple[str, os.stat_result]) -> None:
        self._tail.append(entry)
        if len(self._tail) >= self.chunk and not self._spill_failed:
            self._spill()

    def __len__(self) -> int:
        return self._spilled + len(self._tail)

    def __iter__(self) -> Iterator[tuple[str, os.stat_result]]:
        """Every entry in the order appended (the spilled chunks, then those in memory)."""
        if self._file is not None:
            import pickle  # only once a chunk was spilled

            self._file.flush()
            self._file.seek(0)
            for _ in range(self._spilled // self.chunk):
                yield from pickle.load(self._file)
        yield from self._tail

    def close(self) -> None:
        """Drop the temp file (safe twice)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def _spill(self) -> None:
        import pickle  # a pass with few files to read never spills

        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="indexerd-readqueue-")
            pickle.dump(self._tail, self._file, protocol=pickle.HIGHEST_PROTOCOL)
        except OSError as e:
            self._spill_failed = True
            log.warning("cannot spill the files to read to a temp file (%s): keeping them in memory", e)
            return
        self._spilled += len(self._tail)
        self._tail = []
