"""Extraction in worker processes: the time bound, the memory bound, a worker that dies, many
threads at once; every bound hit is one skipped document and a fresh worker."""

from __future__ import annotations

import io
import os
import signal
import threading
import time

import pytest

from indexerd.core.errors import SkipDocument
from indexerd.extract import formats as F
from indexerd.extract.isolation import Limits, WorkerPool
from indexerd.extract.worker import run_extractor
from tests.test_formats import make_docx, make_odf, million_empty_cells_xlsx

#: wall-clock or memory bounds: no other test runs beside these (tests/conftest.py)
pytestmark = pytest.mark.alone


@pytest.fixture
def pool_factory():
    pools: list[WorkerPool] = []

    def make(**limits) -> WorkerPool:
        pool = WorkerPool(Limits(**limits))
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        pids = pool.pids()
        pool.close()
        for pid in pids:
            assert not _alive(pid), f"worker {pid} outlived close()"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead: reaped by its Popen later
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_the_worker_gives_what_the_extractor_gives(pool_factory) -> None:
    pool = pool_factory()
    data = make_docx()
    assert pool.extract(F.MEDIA_DOCX, data, "a.docx", 10**7) == run_extractor(F.MEDIA_DOCX, data, "a.docx", 10**7)
    first = pool.pids()
    pool.extract(F.MEDIA_ODT, make_odf("odt"), "a.odt", 10**7)
    assert pool.pids() == first and pool.spawned == 1  # long-lived: the same worker again


def test_a_parse_over_the_time_bound_is_killed_and_skipped_as_timeout(pool_factory) -> None:
    pool = pool_factory(timeout_seconds=0.3)
    pool.extract(F.MEDIA_DOCX, make_docx(), "warm.docx", 10**7)  # the worker is up
    (worker_pid,) = pool.pids()
    started = time.monotonic()
    with pytest.raises(SkipDocument) as caught:
        pool.extract(F.MEDIA_XLSX, million_empty_cells_xlsx(), "cells.xlsx", 10**8)
    assert caught.value.reason == "timeout" and "cells.xlsx" in caught.value.detail
    assert time.monotonic() - started < 3.0
    assert not _alive(worker_pid)
    # the next document gets a new worker and is extracted
    assert "zebra budget" in pool.extract(F.MEDIA_DOCX, make_docx(), "next.docx", 10**7).text
    assert pool.spawned == 2


def test_a_parse_over_the_memory_bound_is_skipped_as_too_large(pool_factory) -> None:
    pool = pool_factory(memory_bytes=60 * 1024 * 1024)
    # ~25 MB of text in 5,000 paragraphs: the extracted lines alone pass the 60 MB bound
    big = make_docx(body=[("memory " * 800)] * 5000)
    with pytest.raises(SkipDocument) as caught:
        pool.extract(F.MEDIA_DOCX, big, "big.docx", 10**9)
    assert caught.value.reason == "too-large" and "memory" in caught.value.detail
    assert pool.extract(F.MEDIA_DOCX, make_docx(), "small.docx", 10**7).title == "Quarterly plan"


def test_a_worker_that_dies_mid_parse_is_a_parse_error(pool_factory) -> None:
    pool = pool_factory(timeout_seconds=30)
    pool.extract(F.MEDIA_DOCX, make_docx(), "warm.docx", 10**7)
    (pid,) = pool.pids()
    killer = threading.Timer(0.3, os.kill, (pid, signal.SIGKILL))
    killer.start()
    try:
        with pytest.raises(SkipDocument) as caught:
            pool.extract(F.MEDIA_XLSX, million_empty_cells_xlsx(), "cells.xlsx", 10**8)
    finally:
        killer.cancel()
    assert caught.value.reason == "parse-error" and "SIGKILL" in caught.value.detail
    assert pool.extract(F.MEDIA_DOCX, make_docx(), "after.docx", 10**7).title == "Quarterly plan"


def test_many_threads_share_the_workers(pool_factory) -> None:
    pool = pool_factory(workers=2)
    docs = [make_docx(title=f"Doc {n}", body=(f"word{n}",)) for n in range(8)]
    results: dict[int, str] = {}

    def work(n: int) -> None:
        results[n] = pool.extract(F.MEDIA_DOCX, docs[n], f"{n}.docx", 10**7).title

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == {n: f"Doc {n}" for n in range(8)}
    assert pool.spawned <= 2 and len(pool.pids()) <= 2


def test_skip_reasons_come_back_exactly(pool_factory) -> None:
    pool = pool_factory()
    for data, reason in ((b"PK\x03\x04 broken", "parse-error"), (make_docx(), "too-large")):
        with pytest.raises(SkipDocument) as caught:
            pool.extract(F.MEDIA_DOCX, data, "x.docx", 1000)
        assert caught.value.reason == reason
    assert len(pool.pids()) == 1  # a skip is not a lost worker


def test_closed_pool_refuses(pool_factory) -> None:
    pool = pool_factory()
    pool.extract(F.MEDIA_DOCX, make_docx(), "a.docx", 10**7)
    pool.close()
    pool.close()  # twice is fine
    with pytest.raises(RuntimeError):
        pool.extract(F.MEDIA_DOCX, make_docx(), "a.docx", 10**7)


def test_limits_are_checked() -> None:
    for bad in (dict(timeout_seconds=0), dict(memory_bytes=-1), dict(workers=0)):
        with pytest.raises(ValueError):
            Limits(**bad)
    assert io  # the module is used by the helpers imported above
