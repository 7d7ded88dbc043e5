"""systemd service notifications (``sd_notify``), hand-written; a no-op outside systemd.  (Whether
stderr is the journal: :func:`indexerd.cli.logformat.is_journal_stream`.)

Outside contract relied on (``sd_notify(3)``, ``systemd.service(5)``):

- ``$NOTIFY_SOCKET`` is an absolute path, or starts with ``@`` for a Linux abstract socket
  (``@`` stands for a leading NUL byte).  One ``AF_UNIX``/``SOCK_DGRAM`` datagram carries
  newline-separated ``KEY=VALUE`` assignments.  (The ``vsock:`` form is not supported.)
- With ``NotifyAccess=main`` only the main process may send; threads of it may.
- ``$WATCHDOG_USEC`` is the ``WatchdogSec=`` deadline in µs; ``$WATCHDOG_PID``, when set, names
  the process it is meant for.  ``sd_watchdog_enabled(3)`` advises pinging at half the deadline.
- ``RELOADING=1`` must carry ``MONOTONIC_USEC=`` (``CLOCK_MONOTONIC`` in µs, systemd ≥ 253);
  the reload ends with the next ``READY=1``.

Every function returns True when the datagram was sent, False otherwise; none raises.  Why
hand-written: ``sdnotify`` swallows errors and ``systemd-python`` needs a compiler
(LIBRARIES.md §10).  Thread safety: all of this module is safe to call from any thread.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


def notify(message: str) -> bool:
    """Send ``message`` (``KEY=VALUE`` lines) as one datagram to ``$NOTIFY_SOCKET``.

    Returns:
        True when sent; False when ``$NOTIFY_SOCKET`` is unset or empty (not under systemd),
        is not an absolute path or ``@name``, or sending failed (logged as a warning).
    """
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr[0] == "@":
        target = "\0" + addr[1:]
    elif addr[0] == "/":
        target = addr
    else:
        log.warning("sd_notify: unsupported NOTIFY_SOCKET %r (need /path or @name)", addr)
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto(message.encode("utf-8"), target)
    except OSError as e:
        log.warning("sd_notify to %s failed: %s", addr, e)
        return False
    return True


def _one_line(text: str) -> str:
    return " ".join(text.splitlines())          # a newline would start a new assignment


def ready(status: str = "") -> bool:
    """Tell systemd start-up (or a reload) is complete, with an optional ``STATUS=`` line."""
    return notify("READY=1\nSTATUS=" + _one_line(status) if status else "READY=1")


def status(text: str) -> bool:
    """Set the one-line status ``systemctl status`` shows (newlines become spaces)."""
    return notify("STATUS=" + _one_line(text))


def stopping() -> bool:
    """Tell systemd the service is shutting down."""
    return notify("STOPPING=1")


def reloading() -> bool:
    """Tell systemd a reload started; send :func:`ready` when it is done."""
    usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    return notify(f"RELOADING=1\nMONOTONIC_USEC={usec}")


def watchdog_interval_seconds() -> float | None:
    """Seconds between ``WATCHDOG=1`` pings: half of ``$WATCHDOG_USEC``.

    Returns:
        None when ``$WATCHDOG_USEC`` is unset, not a positive integer, or ``$WATCHDOG_PID`` is
        set to another process's pid (e.g. a child that inherited the environment) or is not
        a number.
    """
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    try:
        if not usec or int(usec) <= 0:
            return None
        if pid and int(pid) != os.getpid():
            return None
    except ValueError:
        log.warning("sd_notify: ignoring WATCHDOG_USEC=%r WATCHDOG_PID=%r", usec, pid)
        return None
    return int(usec) / 2 / 1_000_000


class WatchdogPinger:
    """A thread sending ``WATCHDOG=1`` every :func:`watchdog_interval_seconds`.

    Does nothing (starts no thread) when no watchdog is configured.  Pings once at
    :meth:`start`, then every interval.

    Args:
        healthy: optional check called before each ping from the pinger thread (so it must be
            thread-safe and quick); when it returns False or raises, that ping is skipped, and
            systemd restarts the service once ``WatchdogSec=`` passes without one.  Without it
            the pings only prove this thread is alive.

    Thread safety: call :meth:`start` and :meth:`stop` from one thread.
    """

    def __init__(self, healthy: Callable[[], bool] | None = None) -> None:
        self.healthy = healthy
        self.interval_seconds: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Read the interval from the environment and start pinging; no-op if running or off."""
        if self._thread is not None:
            return
        self.interval_seconds = watchdog_interval_seconds()
        if self.interval_seconds is None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(self.interval_seconds,),
                                        name="indexerd-watchdog", daemon=True)
        self._thread.start()

    def stop(self, timeout_seconds: float = 5.0) -> None:
        """Stop the thread and wait up to ``timeout_seconds`` for it; safe to call twice."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join(timeout=timeout_seconds)

    def _run(self, interval_seconds: float) -> None:
        while True:
            if self._is_healthy():
                notify("WATCHDOG=1")
            if self._stop.wait(interval_seconds):
                return

    def _is_healthy(self) -> bool:
        if self.healthy is None:
            return True
        try:
            ok = bool(self.healthy())
        except Exception:
            log.exception("watchdog health check failed; not pinging")
            return False
        if not ok:
            log.warning("watchdog health check says unhealthy; not pinging")
        return ok
