"""One extraction worker process of :class:`indexerd.extract.isolation.WorkerPool`: started as
``python -m indexerd.extract.worker`` with its memory bound, its temp dir, and the frames it
exchanges with the pool (a 4-byte big-endian length, then a msgpack value) read within a
deadline; the ways it can be lost, as the skip reason they give the document."""

from __future__ import annotations

import logging
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

from indexerd.core.errors import EnvironmentFailure

log = logging.getLogger("indexerd.extract.isolation")  # its lines, as before they moved here

_HEADER = struct.Struct(">I")
#: How long a new worker may take to import its libraries (not part of any document's bound).
STARTUP_SECONDS = 60.0
#: A reply larger than this is refused (parse-error): text is bounded by the input's size.
MAX_REPLY_BYTES = 512 * 1024 * 1024


class WorkerLost(Exception):
    """The worker cannot be used any more; ``reason``/``detail`` say what to skip with."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def worker_argv(memory_bytes: int) -> list[str]:
    """The command of an extraction worker: this interpreter running
    :mod:`indexerd.extract.worker` with its memory bound (bytes)."""
    return [sys.executable, "-m", "indexerd.extract.worker", str(memory_bytes)]


class WorkerProcess:
    """One child process, its pipes and its temp dir (its ``TMPDIR``: where Ghostscript's
    scratch dirs go, removed with the worker, so a worker killed mid-document leaves none).

    Raises (on creation): EnvironmentFailure when the process cannot be started."""

    def __init__(self, memory_bytes: int) -> None:
        env = dict(os.environ)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        try:
            self.scratch = tempfile.mkdtemp(prefix="indexerd-worker-")
        except OSError as e:
            raise EnvironmentFailure(f"cannot make an extraction worker's temp dir: "
                                     f"{e.strerror or e}") from None
        env["TMPDIR"] = self.scratch
        try:
            self.proc = subprocess.Popen(worker_argv(memory_bytes), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, close_fds=True, env=env)
        except OSError as e:
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise EnvironmentFailure(f"cannot start an extraction worker ({worker_argv(memory_bytes)[0]}): "
                                     f"{e.strerror or e}") from None
        self.calls = 0

    def wait_ready(self, timeout_seconds: float) -> None:
        """Wait for the worker's ``ready`` frame (its imports done, its limit set), so that
        start-up never counts against a document's time bound.

        Raises:
            WorkerLost: it did not start in time or ended.
        """
        import msgspec

        deadline = time.monotonic() + timeout_seconds
        header = self._read(_HEADER.size, deadline, timeout_seconds, "worker start")
        (size,) = _HEADER.unpack(header)
        reply = msgspec.msgpack.decode(self._read(size, deadline, timeout_seconds, "worker start"))
        if not isinstance(reply, dict) or "ready" not in reply:
            self.kill()
            raise WorkerLost("parse-error", f"the extraction worker did not start: {reply!r}")

    def call(self, request: bytes, timeout_seconds: float, label: str) -> dict:
        import msgspec

        deadline = time.monotonic() + timeout_seconds
        stdin = self.proc.stdin
        assert stdin is not None  # Popen(stdin=PIPE)
        try:
            stdin.write(_HEADER.pack(len(request)) + request)
            stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise self._lost(label, f"cannot send: {exc}") from None
        header = self._read(_HEADER.size, deadline, timeout_seconds, label)
        (size,) = _HEADER.unpack(header)
        if size > MAX_REPLY_BYTES:
            raise WorkerLost("parse-error", f"{label}: reply of {size} bytes refused")
        self.calls += 1
        return msgspec.msgpack.decode(self._read(size, deadline, timeout_seconds, label))

    def _read(self, n: int, deadline: float, timeout_seconds: float, label: str) -> bytes:
        assert self.proc.stdout is not None  # Popen(stdout=PIPE)
        fd = self.proc.stdout.fileno()
        parts: list[bytes] = []
        got = 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.kill()
                raise WorkerLost("timeout", f"{label}: extraction took more than "
                                             f"{timeout_seconds:g} s")
            chunk = os.read(fd, min(n - got, 1 << 20))
            if not chunk:
                raise self._lost(label, "no reply")
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def _lost(self, label: str, what: str) -> WorkerLost:
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            return WorkerLost("parse-error", f"{label}: the extraction worker died ({name})")
        return WorkerLost("parse-error", f"{label}: the extraction worker ended ({what}, "
                                          f"exit {code})")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # unkillable (D state): leave it to the kernel
            log.warning("extraction worker %d did not end after SIGKILL", self.proc.pid)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        shutil.rmtree(self.scratch, ignore_errors=True)

    def close(self) -> None:
        """End the worker: close its input (it exits), kill it if it lingers."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        self.kill()
