"""Extraction in worker processes: the time bound, the memory bound, a worker that dies, many
threads at once; every bound hit is one skipped document and a fresh worker.  PDF too."""

from __future__ import annotations

import io
import os
import signal
import threading
import time
import zlib
from datetime import datetime, timezone

import pytest

from indexerd.core.datechain import DateEvidence, resolve_date
from indexerd.core.errors import SkipDocument
from indexerd.core.metamap import MetaMap
from indexerd.extract import MEDIA_PDF, extract
from indexerd.extract import formats as F
from indexerd.extract import isolation
from indexerd.extract.isolation import Limits, WorkerPool
from indexerd.extract.worker import run_extractor
from tests.test_extract import make_pdf
from tests.test_formats import make_docx, make_odf, million_empty_cells_xlsx


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


@pytest.fixture
def default_limits():
    """Set the process-wide pool's limits for one test (``set_limits(**limits)``); the default
    ones again afterwards."""

    def set_limits(**limits) -> None:
        isolation.configure(Limits(**limits))

    yield set_limits
    isolation.configure(Limits())


def hostile_pdf(pages: int, repeats: int) -> bytes:
    """The attack run's PDF: ``pages`` pages sharing one content stream of ``repeats`` ``Tj``
    operators (3 tokens each), Flate-compressed: 100,000 repeats are ~2 s a page in pypdf and
    400 KB of text, in a file of a few KB."""
    content = b"BT /F1 12 Tf 72 712 Td " + b"(slow) Tj " * repeats + b"ET"
    stream = zlib.compress(content, 9)
    kids = b" ".join(b"%d 0 R" % (5 + i) for i in range(pages))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
               b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(stream), stream),
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R "
                b"/Resources << /Font << /F1 4 0 R >> >> >>"] * pages
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


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


@pytest.mark.alone  # a wall-clock bound (3 s)
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


@pytest.mark.alone  # a memory bound (the worker's)
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
    cells = million_empty_cells_xlsx()   # built first: under load building it outlasted the timer,
    killer = threading.Timer(0.3, os.kill, (pid, signal.SIGKILL))   # which then killed an idle worker
    killer.start()
    try:
        with pytest.raises(SkipDocument) as caught:
            pool.extract(F.MEDIA_XLSX, cells, "cells.xlsx", 10**8)   # seconds of parsing
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


def _extract_within(seconds: float, data: bytes, **kw) -> SkipDocument | object:
    """``extract(data, **kw)`` in a thread: what it returned or the SkipDocument it raised;
    fails the test when it takes more than ``seconds``."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(extract(data, **kw))
        except SkipDocument as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"extract() still running after {seconds} s"
    return outcome[0]


@pytest.mark.alone  # a wall-clock bound (10 s)
def test_a_pdf_parses_in_a_worker_with_the_time_bound(default_limits) -> None:
    default_limits(timeout_seconds=1.0)
    data = hostile_pdf(2000, 100_000)  # ~2 s a page: over an hour in process
    assert len(data) < 400_000  # 316 KB (the attack run's was 332 KB)
    started = time.monotonic()
    result = _extract_within(20.0, data, name="slow.pdf")
    assert isinstance(result, SkipDocument), result
    assert (result.reason, result.detail) == ("timeout", "slow.pdf: extraction took more than 1 s")
    assert time.monotonic() - started < 10.0
    # the next PDF gets a fresh worker and keeps everything the PDF path gives
    ok = _extract_within(30.0, make_pdf(["Quarterly   figures"], {"Title": "Report",
                                                                  "ModDate": "D:20230501120000+02'00'"}),
                         name="next.pdf")
    assert not isinstance(ok, SkipDocument), ok
    assert (ok.title, ok.text, ok.media_type) == ("Report", "Quarterly figures", MEDIA_PDF)
    assert dict(ok.meta) == {"pdf:title": "Report", "pdf:moddate": "2023-05-01T10:00:00Z"}
    assert ok.document_date is None and len(isolation.default_pool().pids()) == 1
    # the date chain reads the PDF's /ModDate through the meta map, as before
    resolved = resolve_date(DateEvidence(fetched_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
                                         meta=ok.meta),
                            MetaMap.parse("pdf:moddate Last-Modified Y"), ("meta", "fallback"))
    assert (resolved.source, resolved.value) == (
        "meta:pdf:moddate", datetime(2023, 5, 1, 10, 0, tzinfo=timezone.utc))


def test_a_pdf_whose_text_passes_max_size_is_too_large(default_limits) -> None:
    default_limits(timeout_seconds=30.0)
    data = hostile_pdf(3, 20_000)  # 80 KB of text a page from 3 KB of file
    result = _extract_within(30.0, data, name="wordy.pdf", max_bytes=100_000)
    assert isinstance(result, SkipDocument), result
    assert (result.reason, result.detail) == (
        "too-large", "wordy.pdf: more than max_size 100000 bytes of text")
    result = _extract_within(30.0, data, name="wordy.pdf", max_bytes=300_000)
    assert not isinstance(result, SkipDocument) and len(result.text) == 3 * 80_000 + 2


def test_the_pdf_worker_gives_what_the_reader_gives(pool_factory) -> None:
    pool = pool_factory()
    data = make_pdf(["First line here", "second"], {"ModDate": "D:20230501120000"})
    got = pool.extract(MEDIA_PDF, data, "a.pdf", 10**7)
    assert got == run_extractor(MEDIA_PDF, data, "a.pdf", 10**7)
    assert (got.title, got.text, got.meta) == ("First line here", "First line here\nsecond",
                                               (("pdf:moddate", "2023-05-01T12:00:00Z"),))
