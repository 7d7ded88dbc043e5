"""Text analysis of a session's documents in a worker process, on another core.

The engine-neutral analyzer (:mod:`indexerd.index.analysis`) and what an engine builds from its
tokens are pure Python: in one process they share one core with the index writer, while a first
index leaves the machine's other cores idle (bench/RESULTS.md).  A session with many documents
therefore sends them, :data:`BATCH_DOCS` at a time (fewer when they are big), to one worker
process, which runs the engine's *task* on them: a module-level function
``task(texts, fold_diacritics) -> list`` named ``"package.module:function"`` (each engine's
package names its own as ``TASK``), one answer per text tuple (title, content, ...).  The
session applies its operations strictly in the order they were made, so deletes and updates of
one key keep their meaning.  A small session (the daemon's live commits) never starts the
worker.

The worker is ``python -m indexerd.index.offload TASK FOLD`` (a fresh interpreter: no fork of a
threaded daemon, no re-import of the caller's main module) speaking length-prefixed pickles on
its stdin and stdout; it exits at the end of its stdin, so it never outlives indexerd.  A thread
here reads its answers as they come (the worker never blocks writing them).  If the worker fails
(killed, out of memory, too slow), the batch is analysed in this process and the worker is not
used again: slower, same results.
"""

from __future__ import annotations

import importlib
import logging
import pickle
import struct
import subprocess
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: Documents sent to the worker per request (amortises the pipe and pickling per request).
BATCH_DOCS = 32
#: Characters of text (title and content) after which a request is sent with fewer documents:
#: with the requests a session lets run ahead, this bounds the text it holds (big documents).
BATCH_CHARS = 1_000_000
#: Seconds a batch may take in the worker before it is analysed here instead.
BATCH_TIMEOUT_SECONDS = 300.0
_LEN = struct.Struct("!I")


def batch_full(docs: int, chars: int) -> bool:
    """Whether ``docs`` documents of ``chars`` characters of text make a request."""
    return docs >= BATCH_DOCS or chars >= BATCH_CHARS


def task_function(task: str) -> Callable[[list, bool], list]:
    """The function named ``"package.module:function"``.

    Raises:
        ImportError, AttributeError, ValueError: no such module or function.
    """
    module, _, name = task.partition(":")
    if not module or not name:
        raise ValueError(f"an offload task is 'package.module:function', not {task!r}")
    return getattr(importlib.import_module(module), name)


class OrderedBatches:
    """A session's operations in the order they were made: updates (documents) and deletes
    (keys), cut into batches (:func:`batch_full`); a full batch's texts go to ``worker`` at once,
    the last one is computed in-process when the session applies everything.

    Args:
        worker: the index's worker, or None (everything in-process).
        task: the engine's task (``texts, fold_diacritics -> answers``), run here when the
            worker is not used or fails.
        texts_of: a document -> its text tuple for ``task``.
        fold_diacritics: the task's second argument.
        ahead: batches the worker may run ahead before :meth:`update` waits for the oldest.

    Not thread-safe: one session (the writer thread) uses it.
    """

    def __init__(self, worker: "AnalysisWorker | None", task: Callable[[list, bool], list],
                 texts_of: Callable[[Any], tuple], fold_diacritics: bool, ahead: int) -> None:
        self._worker = worker
        self._task = task
        self._texts_of = texts_of
        self._fold = fold_diacritics
        self._ahead = ahead
        self._open: list = []  # operations not yet in a batch: a document, or a key (str)
        self._open_docs = self._open_chars = 0
        self._queue: deque = deque()  # batches in order: (operations, texts, pending answer)

    def update(self, doc) -> bool:
        """Queue ``doc`` (an object with ``title`` and ``content``); True when this filled a
        batch (then :meth:`apply` with ``block=self.behind()``)."""
        self._open.append(doc)
        self._open_docs += 1
        self._open_chars += len(doc.title) + len(doc.content)
        if not batch_full(self._open_docs, self._open_chars):
            return False
        self._send(self._worker)
        return True

    def delete(self, key: str) -> None:
        """Queue the delete of ``key``."""
        self._open.append(key)

    def behind(self) -> bool:
        """Whether more batches wait than the worker may run ahead."""
        return len(self._queue) > self._ahead

    def _send(self, worker: "AnalysisWorker | None") -> None:
        if self._open:
            ops, self._open, self._open_docs, self._open_chars = self._open, [], 0, 0
            texts = [self._texts_of(d) for d in ops if not isinstance(d, str)]
            self._queue.append((ops, texts, worker.submit(texts) if worker and texts else None))

    def apply(self, on_update: Callable[[Any, Any], None], on_delete: Callable[[str], None], *,
              block: bool, last: bool = False) -> None:
        """Hand the queued operations, in order, to ``on_update(doc, answer)`` and
        ``on_delete(key)``, batch by batch while the answers are ready (all of them with
        ``block``; with ``last`` the open operations too, computed here)."""
        if last:
            self._send(None)
        queue = self._queue
        while queue:
            ops, texts, pending = queue[0]
            if pending is not None and not block and not pending.ready():
                return
            if pending is not None:
                assert self._worker is not None  # a pending batch was sent to it
                answers = iter(self._worker.result(pending, texts))
            else:
                answers = iter(self._task(texts, self._fold))
            queue.popleft()
            for op in ops:
                if isinstance(op, str):
                    on_delete(op)
                else:
                    on_update(op, next(answers))
            block = block or self.behind()

    def clear(self) -> None:
        """Forget every queued operation."""
        self._open.clear()
        self._open_docs = self._open_chars = 0
        self._queue.clear()


def _read_frame(f) -> bytes | None:
    head = f.read(_LEN.size)
    if len(head) < _LEN.size:
        return None
    (n,) = _LEN.unpack(head)
    body = f.read(n)
    return body if len(body) == n else None


def _write_frame(f, payload: bytes) -> None:
    f.write(_LEN.pack(len(payload)))
    f.write(payload)
    f.flush()


class Pending:
    """One request in flight: :meth:`ready` without waiting, :meth:`wait` for the answer."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self.value: list | None = None  # None after done: the worker failed

    def ready(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float) -> bool:
        return self._done.wait(timeout)

    def finish(self, value: list | None) -> None:
        self.value = value
        self._done.set()


class AnalysisWorker:
    """One worker process (started at the first batch) shared by every session of an index.

    Thread safety: one session at a time submits (the writer thread); :meth:`close` may come
    from another thread.
    """

    def __init__(self, task: str, fold_diacritics: bool) -> None:
        self.task = task
        self.fold_diacritics = fold_diacritics
        self._proc: subprocess.Popen | None = None
        self._pending: deque[Pending] = deque()
        self._broken = False
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen | None:
        try:
            proc = subprocess.Popen([sys.executable, "-m", __name__, self.task,
                                     "fold" if self.fold_diacritics else "nofold"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as e:
            log.warning("text analysis stays in this process: cannot start a worker: %s", e)
            self._broken = True
            return None
        threading.Thread(target=_read_answers, args=(weakref.ref(self), proc),
                         name="analysis-worker-reader", daemon=True).start()
        # an index dropped without close() must not leave the process behind (its reader
        # thread holds it, and the process waits on the pipe for ever)
        weakref.finalize(self, _end_process, proc)
        return proc

    def _answered(self, body: bytes | None, value: list | None) -> bool:
        """The worker's next answer (``body`` None: the worker is gone) to the oldest pending
        request (to every one when gone); False once gone."""
        with self._lock:
            if body is None:
                self._broken = True
                pending, self._pending = list(self._pending), deque()
            else:
                pending = [self._pending.popleft()] if self._pending else []
        for p in pending:
            p.finish(value)
        return body is not None

    def submit(self, texts: list[tuple[str, str]]) -> Pending | None:
        """Send ``texts`` to the worker; returns the request for :meth:`result`, or None when
        the worker is unavailable (the caller analyses in-process)."""
        with self._lock:
            if self._broken:
                return None
            if self._proc is None:
                self._proc = self._start()
                if self._proc is None:
                    return None
            proc = self._proc
            p = Pending()
            self._pending.append(p)
        try:
            _write_frame(proc.stdin, pickle.dumps(texts, protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:  # the worker died: its reader fails every pending request
            self._break()
        return p

    def result(self, pending: Pending | None, texts: list[tuple[str, str]]) -> list:
        """The analysis of ``texts`` submitted as ``pending`` (None: analysed here now)."""
        if pending is not None:
            if pending.wait(BATCH_TIMEOUT_SECONDS) and pending.value is not None:
                return pending.value
            log.warning("text analysis worker failed (%s); analysing in this process from now on",
                        "no answer in time" if not pending.ready() else "it ended")
            self._break()
        return task_function(self.task)(texts, self.fold_diacritics)

    def _break(self) -> None:
        with self._lock:
            self._broken = True
        self.close()

    def close(self) -> None:
        """Stop the worker process (safe to call twice)."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            _end_process(proc)


def _read_answers(worker: "weakref.ref[AnalysisWorker]", proc: subprocess.Popen) -> None:
    """The reader thread: each answer of ``proc`` to its :class:`AnalysisWorker`, until the
    process ends or the worker is gone (the thread holds it only while handing an answer over)."""
    while True:
        try:
            body = _read_frame(proc.stdout)
            value = None if body is None else pickle.loads(body)
        except Exception:  # a broken pipe or a garbled answer: the worker is gone
            body, value = None, None
        owner = worker()
        if owner is None or not owner._answered(body, value):
            return
        del owner


def _end_process(proc: subprocess.Popen) -> None:
    """End a worker process: its input closed (it stops at the end of its stream), killed
    after 2 s; safe to call twice."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(2.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def serve(task: Callable[[list, bool], list], fold_diacritics: bool) -> None:
    """The worker's loop: a request on stdin, ``task``'s answer on stdout, until stdin ends."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        body = _read_frame(stdin)
        if body is None:
            return
        _write_frame(stdout, pickle.dumps(task(pickle.loads(body), fold_diacritics),
                                          protocol=pickle.HIGHEST_PROTOCOL))


def main(argv: list[str], task: Callable[[list, bool], list] | None = None) -> int:
    """The worker process (``argv``: ``TASK FOLD``, or ``FOLD`` when ``task`` is given):
    :func:`serve` until its stdin ends.  SIGINT is ignored: Ctrl-C reaches the whole process
    group, and indexerd, interrupted, still commits what it read, which needs this worker's
    answers to the batches in flight (when the worker ended there, indexerd computed them again
    itself and logged a worker failure); the worker ends when indexerd closes its stdin or is
    gone.  When indexerd is gone (killed while a batch was in the worker: the answer meets a
    closed pipe) it exits at once without a traceback in indexerd's log, which is also this
    process's standard error."""
    import os
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if task is None:
        task, argv = task_function(argv[0]), argv[1:]
    try:
        serve(task, argv[:1] != ["nofold"])
    except (BrokenPipeError, KeyboardInterrupt):
        # nothing left to flush to a closed pipe at exit (the standard library's recipe for
        # SIGPIPE, docs.python.org/3/library/signal.html#note-on-sigpipe)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
