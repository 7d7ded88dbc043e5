"""Per-host politeness: one request in flight per host, and a delay between two requests to it.

Every web source in the process shares :data:`HOST_SLOTS`, so two sources crawling one host share
its slot and its delay.  The delay policy is one pure function, :func:`next_delay`; :class:`HostSlots`
is the mechanism (a dict of small :class:`_Slot` objects under one lock and condition).

Sources of the rules:

- AltaVista's Scooter crawler: wait a multiple (the "good-guy factor") of the time the host took
  to answer before asking it again, so a slow host gets fewer requests.  Heritrix does the same
  with ``delayFactor`` 5 clamped to 3–30 s; the defaults here are 2 x, at least 1 s, at most 30 s.
- robots.txt ``Crawl-delay`` (not in RFC 9309, widely honoured): a floor on the delay.
- RFC 9110 §10.2.3 ``Retry-After`` on 429/503: a floor on the delay, capped at
  ``max_retry_after`` so a hostile value cannot park a host for ever.
- Exponential backoff after failures (5xx, 429, timeouts, connection errors), reset by a success.

In a cluster (a state store on PostgreSQL) the slots also take the host's lease in the shared
store (:mod:`indexerd.sources.web.hostleases`), so one request is in flight per host across every
node and the delay, computed by the same :func:`next_delay`, holds for all of them.

Times are ``time.monotonic()`` seconds (or the injected clock's).  The host key is whatever the
caller uses consistently; the crawler uses :func:`indexerd.sources.web.urls.host_key`
(``scheme://host:port``, the same key as robots.txt, which RFC 9309 §2.3 scopes to scheme, host
and port), so ``http`` and ``https`` of one server are two slots.
"""

from __future__ import annotations

import math
import threading
from typing import Any
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["HOST_SLOTS", "HostSlots", "PolitenessSettings", "next_delay"]

#: Exponent cap for the backoff: ``2.0 ** 60`` seconds is beyond any ``max_backoff`` anyway, and a
#: larger int exponent would overflow float conversion.
_MAX_EXPONENT = 60


@dataclass(frozen=True)
class PolitenessSettings:
    """How long to wait between two requests to one host (all values in seconds).

    Attributes:
        min_delay: at least this long between the end of one response and the next request.
        good_guy_factor: the adaptive wait is the last response time times this (AltaVista Scooter;
            Heritrix uses 5 x clamped to 3-30 s).
        max_wait: cap of the adaptive part only (not of Crawl-delay, Retry-After or the backoff).
        max_backoff: cap of the exponential backoff after repeated failures.
        max_retry_after: cap applied to a server's Retry-After (RFC 9110 §10.2.3).
    """

    min_delay: float = 1.0
    good_guy_factor: float = 2.0
    max_wait: float = 30.0
    max_backoff: float = 600.0
    max_retry_after: float = 3600.0


def next_delay(settings: PolitenessSettings, *, elapsed: float, ok: bool, failures: int,
               previous_delay: float = 0.0, crawl_delay: float | None = None,
               retry_after: float | None = None) -> float:
    """The delay (seconds) before the next request to a host; a pure function.

    Args:
        elapsed: seconds the last request took (send to end of body or failure); negative or NaN
            counts as 0.
        ok: False for 5xx, 429, timeout and connection errors.
        failures: consecutive failures *including* this one when ``ok`` is False.
        previous_delay: the delay set after the previous request to this host.
        crawl_delay: robots.txt Crawl-delay in seconds, or None.
        retry_after: the response's Retry-After in seconds (RFC 9110 §10.2.3), or None.

    Returns ``max(crawl_delay, min_delay, min(elapsed * good_guy_factor, max_wait))``; on a failure
    at least ``min(max_backoff, max(min_delay, 1) * 2 ** failures)`` and never less than
    ``previous_delay`` (an error never shortens the delay); then at least
    ``min(retry_after, max_retry_after)``.
    """
    elapsed = elapsed if elapsed > 0 else 0.0  # also maps NaN to 0
    delay = max(crawl_delay or 0.0, settings.min_delay, min(elapsed * settings.good_guy_factor, settings.max_wait))
    if not ok:
        # Backoff: base * 2 ** failures, capped; an error never shortens the wait.
        backoff = max(settings.min_delay, 1.0) * 2.0 ** min(max(failures, 0), _MAX_EXPONENT)
        delay = max(delay, min(settings.max_backoff, backoff), previous_delay)
    if retry_after is not None and retry_after > 0:
        # RFC 9110 §10.2.3: the server says when to come back; capped against hostile values.
        delay = max(delay, min(retry_after, settings.max_retry_after))
    return delay


class _Slot:
    """One host's state: a request in flight?, when the next may start, failures, last delay."""

    __slots__ = ("failures", "in_flight", "last_delay", "next_at")

    def __init__(self) -> None:
        self.in_flight = False
        self.next_at = -math.inf
        self.failures = 0
        self.last_delay = 0.0


class HostSlots:
    """Per-host slots: at most one request in flight per host, and a delay between requests.

    Thread-safe: one lock and one condition guard every slot.  ``clock`` is ``time.monotonic`` (a
    test may inject its own).  Hosts are never forgotten; the crawler's host count is bounded by
    its configured sources.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._slots: dict[str, _Slot] = {}
        self._cond = threading.Condition(threading.Lock())
        #: in a cluster, the host leases of the shared store
        #: (:class:`~indexerd.sources.web.hostleases.HostLeases`), taken after the local slot
        self.shared: Any = None  # HostLeases in a cluster (sources/web/cluster.py)

    def _wait_locked(self, host: str) -> float:
        slot = self._slots.get(host)
        if slot is None:
            slot = self._slots[host] = _Slot()
        if slot.in_flight:
            return math.inf
        left = slot.next_at - self._clock()
        if left > 0:
            return left
        if self.shared is not None:
            # across nodes: the host's lease row says whether another node's request is in
            # flight, and when the next may start; its failures and last delay are the host's
            wait, slot.failures, slot.last_delay = self.shared.try_acquire(host)
            if wait > 0:
                return wait
        slot.in_flight = True
        return 0.0

    def try_acquire(self, host: str) -> float:
        """Take the host's slot if it is free and its delay has passed.

        Returns 0.0 when the slot is now ours (the caller must :meth:`release` it), else the
        seconds until the host may be ready (``math.inf`` while another request is in flight).
        """
        with self._cond:
            return self._wait_locked(host)

    def acquire(self, host: str, *, cancel: threading.Event | None = None, timeout: float | None = None) -> bool:
        """Block until :meth:`try_acquire` succeeds; True then, False if ``cancel`` was set or
        ``timeout`` seconds (None: no limit) passed first.

        ``cancel`` is polled every 0.05 s at most (an Event cannot wake a Condition).
        """
        by = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if cancel is not None and cancel.is_set():
                    return False
                wait = self._wait_locked(host)
                if wait == 0.0:
                    return True
                if by is not None:
                    left = by - time.monotonic()
                    if left <= 0:
                        return False
                    wait = min(wait, left)
                if cancel is not None:
                    wait = min(wait, 0.05)
                self._cond.wait(None if wait == math.inf else wait)

    def release(self, host: str, settings: PolitenessSettings, *, elapsed: float, ok: bool,
                crawl_delay: float | None = None, retry_after: float | None = None) -> float:
        """Free the slot and set when the next request may start; returns that delay (seconds).

        The delay counts from now (the end of the response) and is :func:`next_delay` of the
        arguments: ``ok=False`` (5xx, 429, timeout, connection error) adds one failure and backs
        off exponentially, ``ok=True`` resets the failures.

        Raises:
            RuntimeError: the host's slot was not acquired.
        """
        with self._cond:
            slot = self._slots.get(host)
            if slot is None or not slot.in_flight:
                raise RuntimeError(f"release of {host!r} without acquire")
            slot.failures = 0 if ok else slot.failures + 1
            delay = next_delay(settings, elapsed=elapsed, ok=ok, failures=slot.failures,
                               previous_delay=slot.last_delay, crawl_delay=crawl_delay, retry_after=retry_after)
            slot.in_flight = False
            slot.last_delay = delay
            slot.next_at = self._clock() + delay
            if self.shared is not None:
                self.shared.release(host, delay, slot.failures)
            self._cond.notify_all()
            return delay

    def failures(self, host: str) -> int:
        """Consecutive failures recorded for ``host`` (0 for an unknown host)."""
        with self._cond:
            slot = self._slots.get(host)
            return slot.failures if slot is not None else 0

    def snapshot(self) -> dict[str, dict]:
        """Per host: ``in_flight`` (bool), ``next_in`` (seconds until ready, >= 0), ``failures``,
        ``last_delay`` (seconds) -- for ``ctl status``."""
        with self._cond:
            now = self._clock()
            return {host: {"in_flight": s.in_flight, "next_in": max(0.0, s.next_at - now),
                           "failures": s.failures, "last_delay": s.last_delay}
                    for host, s in sorted(self._slots.items())}


#: The process-wide slots: every web source shares them, so two sources on one host share its slot.
HOST_SLOTS = HostSlots()


def hosts_status() -> dict:
    """``ctl status``'s ``hosts``: the process-wide slots' :meth:`HostSlots.snapshot` (the web
    kind's shared status in :mod:`indexerd.sources.registry`)."""
    return {"hosts": HOST_SLOTS.snapshot()}
