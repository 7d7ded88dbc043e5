"""Per-host slots: the delay policy as a pure function, and the slots under real threads."""

from __future__ import annotations

import itertools
import math
import threading
import time

import pytest

from indexerd.sources.web.politeness import HOST_SLOTS, HostSlots, PolitenessSettings, next_delay


S = PolitenessSettings()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- the policy -------------------------------------------------------------------------------

def test_delay_is_min_delay_for_fast_responses():
    assert next_delay(S, elapsed=0.1, ok=True, failures=0) == 1.0


def test_delay_is_good_guy_factor_times_response_time():
    assert next_delay(S, elapsed=3.0, ok=True, failures=0) == 6.0


def test_adaptive_part_is_capped_but_crawl_delay_is_not():
    assert next_delay(S, elapsed=100.0, ok=True, failures=0) == 30.0
    assert next_delay(S, elapsed=100.0, ok=True, failures=0, crawl_delay=45.0) == 45.0
    assert next_delay(S, elapsed=0.0, ok=True, failures=0, crawl_delay=2.5) == 2.5


def test_backoff_doubles_and_is_capped():
    got = [next_delay(S, elapsed=0.0, ok=False, failures=n) for n in (1, 2, 3, 9, 10, 5000)]
    assert got == [2.0, 4.0, 8.0, 512.0, 600.0, 600.0]


def test_error_never_shortens_the_delay():
    # A slow success set 30 s; a fast failure right after must not drop to 2 s.
    assert next_delay(S, elapsed=0.01, ok=False, failures=1, previous_delay=30.0) == 30.0


def test_retry_after_is_a_floor_and_capped():
    assert next_delay(S, elapsed=0.0, ok=False, failures=1, retry_after=120.0) == 120.0
    assert next_delay(S, elapsed=0.0, ok=False, failures=1, retry_after=10 ** 9) == 3600.0
    assert next_delay(S, elapsed=0.0, ok=True, failures=0, retry_after=0.5) == 1.0


def test_nan_and_negative_elapsed_count_as_zero():
    assert next_delay(S, elapsed=float("nan"), ok=True, failures=0) == 1.0
    assert next_delay(S, elapsed=-5.0, ok=True, failures=0) == 1.0


# -- the slots, with a fake clock -----------------------------------------------------------

def test_try_acquire_reports_in_flight_then_remaining_delay():
    clock = FakeClock()
    slots = HostSlots(clock)
    assert slots.try_acquire("a.test") == 0.0
    assert slots.try_acquire("a.test") == math.inf
    assert slots.try_acquire("b.test") == 0.0  # another host is independent
    assert slots.release("a.test", S, elapsed=2.0, ok=True) == 4.0
    assert slots.try_acquire("a.test") == pytest.approx(4.0)
    clock.now += 3.0
    assert slots.try_acquire("a.test") == pytest.approx(1.0)
    clock.now += 1.0
    assert slots.try_acquire("a.test") == 0.0


def test_failures_grow_reset_and_show_in_snapshot():
    clock = FakeClock()
    slots = HostSlots(clock)
    delays = []
    for _ in range(4):
        assert slots.try_acquire("h") == 0.0
        delays.append(slots.release("h", S, elapsed=0.0, ok=False))
        clock.now += delays[-1]
    assert delays == [2.0, 4.0, 8.0, 16.0]
    assert slots.failures("h") == 4
    assert slots.try_acquire("h") == 0.0
    assert slots.snapshot() == {"h": {"in_flight": True, "next_in": 0.0, "failures": 4, "last_delay": 16.0}}
    assert slots.release("h", S, elapsed=0.0, ok=True) == 1.0
    assert slots.failures("h") == 0
    assert slots.failures("unknown") == 0
    assert slots.snapshot()["h"] == {"in_flight": False, "next_in": 1.0, "failures": 0, "last_delay": 1.0}


def test_retry_after_through_release():
    clock = FakeClock()
    slots = HostSlots(clock)
    slots.try_acquire("h")
    assert slots.release("h", S, elapsed=0.0, ok=False, retry_after=120.0) == 120.0
    assert slots.try_acquire("h") == pytest.approx(120.0)


def test_release_without_acquire_raises():
    slots = HostSlots()
    with pytest.raises(RuntimeError):
        slots.release("h", S, elapsed=0.0, ok=True)


def test_process_wide_instance():
    assert isinstance(HOST_SLOTS, HostSlots)


# -- the slots, with real threads and the real clock ------------------------------------------

FAST = PolitenessSettings(min_delay=0.05, good_guy_factor=2.0, max_wait=0.3)


def _hammer(slots: HostSlots, host: str, n: int, work: float, spans: list, lock: threading.Lock) -> None:
    for _ in range(n):
        assert slots.acquire(host)
        t0 = time.monotonic()
        time.sleep(work)
        t1 = time.monotonic()
        with lock:
            spans.append((t0, t1))
        slots.release(host, FAST, elapsed=t1 - t0, ok=True)


def test_two_threads_on_one_host_never_overlap_and_keep_the_delay():
    slots = HostSlots()
    spans: list[tuple[float, float]] = []
    lock = threading.Lock()
    threads = [threading.Thread(target=_hammer, args=(slots, "one.test", 4, 0.01, spans, lock)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    spans.sort()
    assert len(spans) == 8
    for (s0, e0), (s1, _e1) in itertools.pairwise(spans):
        # the next request starts after the previous ended plus max(0.05, 2 x its time)
        assert s1 - e0 >= max(0.05, 2 * (e0 - s0)) - 0.002


@pytest.mark.alone  # a wall-clock bound (0.35 s)
def test_different_hosts_proceed_in_parallel():
    slots = HostSlots()
    spans: dict[str, list] = {"a.test": [], "b.test": []}
    lock = threading.Lock()
    threads = [threading.Thread(target=_hammer, args=(slots, h, 1, 0.2, spans[h], lock)) for h in spans]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    (a0, a1), (b0, b1) = spans["a.test"][0], spans["b.test"][0]
    assert max(a0, b0) < min(a1, b1)  # the two requests overlapped in time
    assert time.monotonic() - t0 < 0.35


@pytest.mark.alone  # a wall-clock bound (0.19-0.3 s)
def test_acquire_waits_for_the_delay():
    slots = HostSlots()
    assert slots.acquire("h")
    slots.release("h", PolitenessSettings(min_delay=0.2), elapsed=0.0, ok=True)
    t0 = time.monotonic()
    assert slots.acquire("h")
    assert 0.19 <= time.monotonic() - t0 < 0.3


@pytest.mark.alone  # a wall-clock bound (0.09-0.25 s)
def test_acquire_returns_false_when_cancelled():
    slots = HostSlots()
    assert slots.acquire("h")  # held: a second acquire waits for ever
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()
    t0 = time.monotonic()
    assert slots.acquire("h", cancel=cancel) is False
    assert 0.09 <= time.monotonic() - t0 < 0.25
    assert slots.acquire("h", cancel=cancel) is False  # already set: no wait at all


@pytest.mark.alone  # a wall-clock bound (0.09-0.25 s)
def test_acquire_gives_up_after_its_timeout():
    slots = HostSlots()
    assert slots.acquire("h")  # held by a robots.txt request
    t0 = time.monotonic()
    assert slots.acquire("h", timeout=0.1) is False  # a redirect of another host's robots.txt
    assert 0.09 <= time.monotonic() - t0 < 0.25
    slots.release("h", PolitenessSettings(min_delay=0.05), elapsed=0.0, ok=True)
    assert slots.acquire("h", timeout=1.0)  # free after the delay, within the timeout


@pytest.mark.alone  # a wall-clock bound (0.09-0.2 s)
def test_waiter_wakes_on_release():
    slots = HostSlots()
    assert slots.acquire("h")
    got: list[float] = []
    t = threading.Thread(target=lambda: (slots.acquire("h"), got.append(time.monotonic())))
    t.start()
    time.sleep(0.05)
    released = time.monotonic()
    slots.release("h", PolitenessSettings(min_delay=0.1), elapsed=0.0, ok=True)
    t.join(5)
    assert got and 0.09 <= got[0] - released < 0.2
