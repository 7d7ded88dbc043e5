"""Single compressed files (``.gz``, ``.bz2``, ``.xz``, ``.zst``): bounded decompression.

The inner document is indexed under the compressed file's key; its type comes from the inner
name (``changelog.Debian.gz`` -> ``changelog.Debian``, plain text; ``index.html.gz`` -> HTML;
``x.tar.gz`` -> a tar archive, not indexed).  Decompression is streaming and stops as soon as
it has produced more than the size cap (``max_size`` applies to the decompressed bytes), so a
bomb costs at most ``max_size`` bytes and the time to produce them.  It runs in the calling
process: the standard decompressors are linear in their output, which the cap bounds, and the
input is fed a bounded piece at a time, so a file of many members costs time linear in its
size too; the extraction workers' time bound applies as well (``timeout``).

Outside contracts relied on: :mod:`gzip`, :mod:`bz2` and :mod:`lzma` decompressor objects
take ``max_length`` (``decompress(data, max_length)`` returns at most that much and keeps the
rest of the input) and raise ``EOFError``/``OSError``/``lzma.LZMAError`` on damage; a stream
that ends early is seen as ``eof`` being False.  Concatenated gzip members (``gzip -c a b``)
and multi-stream bzip2/xz are read whole, as ``zcat`` does.  ``.zst`` uses python-zstandard
(``zstandard``), whose ``ZstdDecompressor().decompressobj()`` has ``eof`` and ``unused_data``
but no ``max_length`` (see :class:`_Zstd`).
"""

from __future__ import annotations

import bz2
import lzma
import time
import zlib
from typing import Any, Callable

from indexerd.core.errors import SkipDocument
from indexerd.extract.formats import MEDIA_BZIP2, MEDIA_GZIP, MEDIA_XZ, MEDIA_ZSTD

ZSTD_FEED_BYTES = 256
#: The first piece of input a member's decompressor is fed (bytes); each further piece of the
#: same member doubles, up to :data:`MAX_FEED_BYTES`: an empty gzip member is 20 bytes.
FIRST_FEED_BYTES = 64
MAX_FEED_BYTES = 64 * 1024
_SUFFIXES = {MEDIA_GZIP: ((".tgz", ".tar"), (".gz", ""), (".z", "")),
             MEDIA_BZIP2: ((".tbz2", ".tar"), (".tbz", ".tar"), (".bz2", "")),
             MEDIA_XZ: ((".txz", ".tar"), (".xz", "")),
             MEDIA_ZSTD: ((".tzst", ".tar"), (".zst", ""))}


def inner_name(name: str | None, media_type: str) -> str:
    """The name of the document inside: the compression suffix removed (``a.html.gz`` ->
    ``a.html``; ``a.tgz`` -> ``a.tar``); ``"document"`` when nothing is left.  A URL's query
    and fragment are dropped first."""
    name = name or "document"
    if "://" in name:
        name = name.partition("#")[0].partition("?")[0]
    lower = name.lower()
    for suffix, replacement in _SUFFIXES.get(media_type, ()):
        if lower.endswith(suffix):
            return (name[: -len(suffix)] + replacement) or "document"
    return name


def decompress(data: bytes, media_type: str, label: str, max_bytes: int, *,
               timeout_seconds: float) -> bytes:
    """The decompressed bytes of ``data`` (every concatenated stream), at most ``max_bytes``.

    Linear in ``len(data)`` whatever the number of members: each decompressor is fed pieces
    of the input (:data:`FIRST_FEED_BYTES`, doubling up to :data:`MAX_FEED_BYTES`), so what a
    member leaves unused is a copy of at most its last piece, not of the rest of the input
    (a gzip of 950,000 empty members took 22 min when each member copied the rest).

    Args:
        timeout_seconds: wall-clock bound of the whole decompression (the extraction
            workers' bound, :class:`indexerd.extract.isolation.Limits`), checked between pieces.

    Raises:
        SkipDocument: ``too-large`` as soon as more than ``max_bytes`` came out (the rest is
            never decompressed); ``parse-error`` for a damaged or truncated stream (a
            ``.gz`` cut short is not indexed in part: its text would change when it is
            completed, and a damaged one could be anything); ``timeout`` past
            ``timeout_seconds``.
    """
    factory = _DECOMPRESSORS[media_type]
    deadline = time.monotonic() + timeout_seconds
    view = memoryview(data)
    end = len(data)
    out = bytearray()
    at = 0
    try:
        while at < end:
            engine = factory()
            piece = FIRST_FEED_BYTES
            while True:
                if time.monotonic() > deadline:
                    raise SkipDocument("timeout", f"{label}: decompression took more than "
                                                  f"{timeout_seconds:g} s")
                chunk = view[at:at + piece]
                at += len(chunk)
                out += engine.decompress(chunk, max_bytes + 1 - len(out))
                while len(out) <= max_bytes and not engine.eof and not engine.needs_input:
                    more = engine.decompress(b"", max_bytes + 1 - len(out))
                    if not more:
                        break
                    out += more
                if len(out) > max_bytes:
                    raise SkipDocument("too-large", f"{label}: more than max_size {max_bytes} "
                                                    "bytes once decompressed")
                if engine.eof:
                    at -= len(engine.unused_data)
                    break
                if at >= end:
                    raise SkipDocument("parse-error", f"{label}: the compressed stream ends "
                                                      "early (truncated)")
                piece = min(2 * piece, MAX_FEED_BYTES)
            at = _past_zeros(data, at)  # tar-style zero padding after a member
    except SkipDocument:
        raise
    except (EOFError, OSError, ValueError, lzma.LZMAError, zlib.error) as exc:
        raise SkipDocument("parse-error", f"{label}: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:  # zstandard.ZstdError and other decoder errors
        raise SkipDocument("parse-error", f"{label}: {type(exc).__name__}: {exc}") from exc
    return bytes(out)


def _past_zeros(data: bytes, at: int) -> int:
    """The offset of the first byte at or after ``at`` that is not NUL (``len(data)`` if none),
    looked at a piece at a time."""
    while at < len(data):
        piece = data[at:at + MAX_FEED_BYTES]
        kept = piece.lstrip(b"\x00")
        at += len(piece) - len(kept)
        if kept:
            break
    return at


class _Gzip:
    """A gzip member decompressor with the bz2/lzma interface (``decompress(data, max_length)``,
    ``eof``, ``unused_data``, ``needs_input``) over :func:`zlib.decompressobj` (wbits 16+15:
    gzip header and trailer checked, CRC included)."""

    def __init__(self) -> None:
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.needs_input = False

    def decompress(self, data: bytes | memoryview, max_length: int) -> bytes:
        tail = self._z.unconsumed_tail
        source = tail + data if tail else data  # the tail is at most one fed piece
        out = self._z.decompress(source, max(max_length, 1))
        self.needs_input = not self._z.unconsumed_tail and not self._z.eof
        return out

    @property
    def eof(self) -> bool:
        return self._z.eof

    @property
    def unused_data(self) -> bytes:
        return self._z.unused_data


class _Zstd:
    """The same interface over python-zstandard's ``decompressobj`` (one frame per object).

    It has no ``max_length``: the input is fed in :data:`ZSTD_FEED_BYTES` pieces, so one call
    overshoots the cap by at most what that many input bytes can expand to (a zstd RLE block
    is 4 bytes for 128 KiB: 256 bytes -> 8 MiB at worst)."""

    def __init__(self) -> None:
        import zstandard

        self._z = zstandard.ZstdDecompressor().decompressobj()
        self._tail: bytes | memoryview = b""
        self.needs_input = False

    def decompress(self, data: bytes | memoryview, max_length: int) -> bytes:
        source = bytes(self._tail) + bytes(data) if self._tail else data
        out = bytearray()
        i = 0
        while i < len(source) and len(out) < max_length and not self._z.eof:
            out += self._z.decompress(source[i:i + ZSTD_FEED_BYTES])
            i += ZSTD_FEED_BYTES
        self._tail = source[i:]
        self.needs_input = not self._tail and not self._z.eof
        return bytes(out)

    @property
    def eof(self) -> bool:
        return self._z.eof

    @property
    def unused_data(self) -> bytes:
        return self._z.unused_data + self._tail if self._z.eof else b""


_DECOMPRESSORS: dict[str, Callable[[], Any]] = {MEDIA_GZIP: _Gzip, MEDIA_BZIP2: bz2.BZ2Decompressor,
                  MEDIA_XZ: lambda: lzma.LZMADecompressor(format=lzma.FORMAT_AUTO),
                  MEDIA_ZSTD: _Zstd}
