"""Extraction in worker processes with a time and a memory bound (PDF and the formats of
:data:`indexerd.extract.formats.ISOLATED_TYPES`), as Recoll runs its filters as separate
processes: a parser that hangs, loops or exhausts memory on a hostile file costs one skipped
document and one re-spawned worker, never the daemon or the pass.

A :class:`WorkerPool` keeps up to ``workers`` long-lived processes (``python -m
indexerd.extract.worker``, started on first use).  A caller takes an idle worker (waiting while
all are busy: that wait is not part of the time bound), sends the document, and waits for the
reply at most ``timeout_seconds``:

- no reply in time: the worker is killed (SIGKILL) and the document skipped ``timeout``;
- the worker hit its address-space bound (``RLIMIT_AS``, a ``MemoryError`` in the parser):
  skipped ``too-large``, and that worker exits;
- the worker died (a signal: a crash in native code, the kernel's OOM killer): skipped
  ``parse-error`` naming the signal.

A skipped file is retried only when it changes: the file source reads a file again only when
its stat changes, a web page is asked with a conditional GET, and a document skipped ``timeout``
or ``parse-error`` read again with the same bytes keeps its verdict unextracted
(``indexerd.pipeline.stages.COSTLY_SKIPS``, ``indexerd.sources.files.scan``).  HTML, text and Markdown stay in the calling process
(the fast path; their extractors are linear by design, see ``indexerd.extract``); PDF does
not (pypdf's cost per page is the size of the page's content streams, which pages may share:
a 332 KB file of 2,000 pages cost ~30 h), nor do compressed files' inner documents of these
types.  Decompression runs in the calling process with the same time bound
(:mod:`indexerd.extract.formats.compressed`).

Thread-safe: any number of threads may call :meth:`WorkerPool.extract` at once.  One worker
process and its pipe protocol: :mod:`indexerd.extract.workerprocess` (imported at the first
worker's start).
"""

from __future__ import annotations

import atexit
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from indexerd.core.errors import EnvironmentFailure, SkipDocument
from indexerd.extract.formats import DocumentText

if TYPE_CHECKING:
    from indexerd.config import ExtractSettings
    from indexerd.extract.workerprocess import WorkerProcess

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Limits:
    """Bounds of the extraction workers.

    Attributes:
        timeout_seconds: wall-clock time one document may take in a worker (> 0).
        memory_bytes: address space one document may add to a worker's own (the worker's size
            after importing its libraries, about 60 MB); 0: no bound.
        workers: processes kept at most (each idle one costs about 30 MB resident).
    """

    timeout_seconds: float = 60.0
    memory_bytes: int = 1024 * 1024 * 1024
    workers: int = 2

    def __post_init__(self) -> None:
        if not self.timeout_seconds > 0 or self.memory_bytes < 0 or self.workers < 1:
            raise ValueError(f"bad extraction limits: {self!r}")

    @classmethod
    def from_config(cls, settings: ExtractSettings) -> Limits:
        """The limits the config's ``[extract]`` table sets (already checked)."""
        return cls(timeout_seconds=float(settings.timeout), memory_bytes=int(settings.memory),
                   workers=settings.workers)


class WorkerPool:
    """Long-lived extraction workers with :class:`Limits` (see the module docstring)."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._lock = threading.Lock()
        self._idle: list[WorkerProcess] = []
        self._busy: set[WorkerProcess] = set()
        self._slots = threading.BoundedSemaphore(self.limits.workers)
        self._closed = False
        #: workers started in all (the first ones and each re-spawn), for tests and status
        self.spawned = 0

    def extract(self, media_type: str, data: bytes, label: str, max_bytes: int) -> DocumentText:
        """Extract one document in a worker.

        Args:
            media_type: PDF or one of :data:`indexerd.extract.formats.ISOLATED_TYPES`.
            data: the whole document.
            label: file name or URL for messages.
            max_bytes: the source's size cap, applied to decompressed bytes by the extractor.

        Raises:
            SkipDocument: the extractor's (``too-large``, ``parse-error``), or ``timeout``,
                ``too-large`` (memory bound), ``parse-error`` (the worker died).
            EnvironmentFailure: no worker could be started (the document is read again later).
            RuntimeError: the pool is closed.
        """
        import msgspec

        # a file name that is not UTF-8 (lone surrogates) cannot be sent as text: the worker
        # gets it with "?" in their place, and the details it sends back get the name again
        wire_label = label.encode("utf-8", "replace").decode("utf-8")
        request = msgspec.msgpack.encode([media_type, wire_label, max_bytes, data,
                                          self.limits.timeout_seconds])
        from indexerd.extract.workerprocess import WorkerLost

        with self._slots:
            worker = self._take()
            try:
                reply = worker.call(request, self.limits.timeout_seconds, label)
            except WorkerLost as lost:
                self._drop(worker)
                log.warning("extraction of %s: %s", label, lost.detail)
                raise SkipDocument(lost.reason, lost.detail) from None
            except BaseException:
                self._drop(worker)
                raise
            if reply.get("retire"):
                self._drop(worker)
            else:
                self._give_back(worker)
        if "ok" in reply:
            title, text, kind, date_property, date_value, meta = reply["ok"]
            return DocumentText(title, text, kind, date_property, date_value,
                                tuple((str(k), str(v)) for k, v in meta))
        reason, detail = reply["skip"]
        if wire_label != label and detail.startswith(wire_label):
            detail = label + detail[len(wire_label):]
        raise SkipDocument(reason, detail)

    def _take(self) -> WorkerProcess:
        from indexerd.extract.workerprocess import STARTUP_SECONDS, WorkerLost, WorkerProcess

        with self._lock:
            if self._closed:
                raise RuntimeError("the extraction pool is closed")
            while self._idle:
                worker = self._idle.pop()
                if worker.alive():
                    self._busy.add(worker)
                    return worker
                worker.kill()
            self.spawned += 1
        worker = WorkerProcess(self.limits.memory_bytes)  # outside the lock: start-up takes ~0.3 s
        with self._lock:
            self._busy.add(worker)
        try:
            worker.wait_ready(STARTUP_SECONDS)
        except WorkerLost as lost:
            self._drop(worker)
            raise EnvironmentFailure(f"cannot start an extraction worker: {lost.detail}") from None
        return worker

    def _give_back(self, worker: WorkerProcess) -> None:
        with self._lock:
            self._busy.discard(worker)
            if self._closed:
                worker.close()
            else:
                self._idle.append(worker)

    def _drop(self, worker: WorkerProcess) -> None:
        with self._lock:
            self._busy.discard(worker)
        worker.kill()

    def pids(self) -> list[int]:
        """Process ids of the live workers (idle and busy)."""
        with self._lock:
            return [w.proc.pid for w in [*self._idle, *self._busy] if w.alive()]

    def close(self) -> None:
        """End every idle worker now and each busy one when its call returns.  Safe to call
        twice."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()


_default: WorkerPool | None = None
_default_lock = threading.Lock()


def default_pool() -> WorkerPool:
    """The process-wide pool (created on first use with :func:`configure`'s limits, ended at
    interpreter exit)."""
    global _default
    with _default_lock:
        if _default is None or _default._closed:
            _default = WorkerPool(_configured)
            atexit.register(_default.close)
        return _default


_configured = Limits()


def configure(limits: Limits, *, restart: bool = False) -> None:
    """Set the limits of the process-wide pool; a running pool is closed (its workers end) and
    the next extraction starts one with the new limits.  The same limits again change nothing,
    unless ``restart`` (new workers, which see this process's environment as it is now)."""
    global _configured, _default
    with _default_lock:
        if limits == _configured and not restart:
            return
        _configured = limits
        old, _default = _default, None
    if old is not None:
        old.close()
