"""Single compressed files (``.gz``, ``.bz2``, ``.xz``, ``.zst``): bounded decompression.

The inner document is indexed under the compressed file's key; its type comes from the inner
name (``changelog.Debian.gz`` -> ``changelog.Debian``, plain text; ``index.html.gz`` -> HTML;
``x.tar.gz`` -> a tar archive, not indexed).  Decompression is streaming and stops as soon as
it has produced more than the size cap (``max_size`` applies to the decompressed bytes), so a
bomb costs at most ``max_size`` bytes and the time to produce them.  It runs in the calling
process: the standard decompressors are linear in their output, which the cap bounds.

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
import zlib
from typing import Any, Callable

from indexerd.core.errors import SkipDocument
from indexerd.extract.formats import MEDIA_BZIP2, MEDIA_GZIP, MEDIA_XZ, MEDIA_ZSTD

ZSTD_FEED_BYTES = 256
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


def decompress(data: bytes, media_type: str, label: str, max_bytes: int) -> bytes:
    """The decompressed bytes of ``data`` (every concatenated stream), at most ``max_bytes``.

    Raises:
        SkipDocument: ``too-large`` as soon as more than ``max_bytes`` came out (the rest is
            never decompressed); ``parse-error`` for a damaged or truncated stream (a
            ``.gz`` cut short is not indexed in part: its text would change when it is
            completed, and a damaged one could be anything).
    """
    factory = _DECOMPRESSORS[media_type]
    out = bytearray()
    pending = data
    try:
        while pending:
            engine = factory()
            chunk = engine.decompress(pending, max_bytes + 1 - len(out))
            out += chunk
            while len(out) <= max_bytes and not engine.eof:
                if engine.needs_input if hasattr(engine, "needs_input") else False:
                    break
                more = engine.decompress(b"", max_bytes + 1 - len(out))
                if not more:
                    break
                out += more
            if len(out) > max_bytes:
                raise SkipDocument("too-large", f"{label}: more than max_size {max_bytes} bytes "
                                                "once decompressed")
            if not engine.eof:
                raise SkipDocument("parse-error", f"{label}: the compressed stream ends early "
                                                  "(truncated)")
            pending = engine.unused_data.lstrip(b"\x00")  # tar-style zero padding after a member
    except SkipDocument:
        raise
    except (EOFError, OSError, ValueError, lzma.LZMAError, zlib.error) as exc:
        raise SkipDocument("parse-error", f"{label}: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:  # zstandard.ZstdError and other decoder errors
        raise SkipDocument("parse-error", f"{label}: {type(exc).__name__}: {exc}") from exc
    return bytes(out)


class _Gzip:
    """A gzip member decompressor with the bz2/lzma interface (``decompress(data, max_length)``,
    ``eof``, ``unused_data``, ``needs_input``) over :func:`zlib.decompressobj` (wbits 16+15:
    gzip header and trailer checked, CRC included)."""

    def __init__(self) -> None:
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.needs_input = False

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if data:
            out = self._z.decompress(data, max(max_length, 1))
        else:
            out = self._z.decompress(self._z.unconsumed_tail, max(max_length, 1))
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
        self._tail = b""
        self.needs_input = False

    def decompress(self, data: bytes, max_length: int) -> bytes:
        source = data or self._tail
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
