"""Bounded decompression (indexerd.extract.formats.compressed): linear in the input whatever
its members, bounded in time, and the same bytes as the command-line tools give."""

from __future__ import annotations

import bz2
import gzip
import lzma
import random
import shutil
import subprocess
import time

import pytest

from indexerd.core.errors import SkipDocument
from indexerd.extract import extract
from indexerd.extract import formats as F
from indexerd.extract.formats.compressed import decompress


MAX_BYTES = 20_000_000


def _zstd(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


def _text(seed: int, n_bytes: int) -> bytes:
    """Words that compress about 3:1 (several feed pieces of input per member)."""
    rng = random.Random(seed)
    words = [bytes(rng.choice(b"abcdefghij") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    out = bytearray()
    while len(out) < n_bytes:
        out += rng.choice(words) + b" "
    return bytes(out[:n_bytes])


@pytest.mark.alone  # a wall-clock bound (15 s)
def test_a_gzip_of_950000_empty_members_is_read_in_linear_time() -> None:
    hostile = gzip.compress(b"") * 950_000  # 19 MB, the attack run's file
    assert len(hostile) == 950_000 * 20
    started = time.monotonic()
    assert decompress(hostile, F.MEDIA_GZIP, "empty.txt.gz", MAX_BYTES, timeout_seconds=60.0) == b""
    took = time.monotonic() - started
    print(f"950,000 empty gzip members: {took:.2f} s")
    assert took < 15.0  # it took 22 min 47 s when each member copied the rest of the input
    with pytest.raises(SkipDocument) as caught:
        extract(hostile, name="empty.txt.gz")
    assert caught.value.reason == "empty"


@pytest.mark.alone  # a wall-clock bound (1 s)
def test_decompression_past_its_time_bound_is_a_timeout() -> None:
    hostile = gzip.compress(b"") * 950_000
    started = time.monotonic()
    with pytest.raises(SkipDocument) as caught:
        decompress(hostile, F.MEDIA_GZIP, "empty.txt.gz", MAX_BYTES, timeout_seconds=0.05)
    assert (caught.value.reason, caught.value.detail) == (
        "timeout", "empty.txt.gz: decompression took more than 0.05 s")
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize(("media", "compress"), [
    (F.MEDIA_GZIP, gzip.compress), (F.MEDIA_BZIP2, bz2.compress), (F.MEDIA_XZ, lzma.compress),
    (F.MEDIA_ZSTD, _zstd)])
def test_concatenated_streams_give_the_same_bytes(media, compress) -> None:
    parts = [_text(1, 300_000), b"", b"x", _text(2, 1_000_000)]
    # a member, tar-style zero padding, members of 0 and 1 byte, a large one
    data = compress(parts[0]) + b"\0" * 512 + b"".join(compress(p) for p in parts[1:])
    assert decompress(data, media, "a", MAX_BYTES, timeout_seconds=60.0) == b"".join(parts)


@pytest.mark.skipif(shutil.which("gzip") is None, reason="needs the gzip command")
def test_gzip_c_a_b_gives_the_bytes_zcat_gives(tmp_path) -> None:
    (tmp_path / "a").write_bytes(_text(3, 500_000))
    (tmp_path / "b").write_bytes(b"second file\n")
    data = subprocess.run(["gzip", "-c", "a", "b"], cwd=tmp_path, capture_output=True,
                          check=True).stdout
    zcat = subprocess.run(["gzip", "-dc"], input=data, capture_output=True, check=True).stdout
    assert decompress(data, F.MEDIA_GZIP, "ab.gz", MAX_BYTES, timeout_seconds=60.0) == zcat
    assert zcat == (tmp_path / "a").read_bytes() + b"second file\n"


@pytest.mark.parametrize(("media", "compress"), [
    (F.MEDIA_GZIP, gzip.compress), (F.MEDIA_BZIP2, bz2.compress), (F.MEDIA_XZ, lzma.compress),
    (F.MEDIA_ZSTD, _zstd)])
def test_a_truncated_stream_and_the_cap_as_before(media, compress) -> None:
    data = compress(_text(4, 400_000))
    with pytest.raises(SkipDocument) as caught:
        decompress(data[: len(data) // 2], media, "cut", MAX_BYTES, timeout_seconds=60.0)
    assert caught.value.reason == "parse-error"
    with pytest.raises(SkipDocument) as caught:
        decompress(data, media, "big", 399_999, timeout_seconds=60.0)
    assert caught.value.reason == "too-large"
    assert decompress(data, media, "fits", 400_000, timeout_seconds=60.0) == _text(4, 400_000)
