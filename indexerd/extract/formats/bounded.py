"""Bounded reading of ZIP containers (OOXML, ODF, EPUB): a byte budget on what is inflated,
member names that are only ever looked up (never written to disk), library errors as
``parse-error``.

Outside contract relied on: :mod:`zipfile` inflates a member lazily through
``ZipFile.open(...).read(n)``, so counting the bytes it hands back bounds the work and the
memory of a member whose header lies about its size (a zip bomb); it raises ``BadZipFile``,
``zlib.error``, ``EOFError``, ``NotImplementedError`` (a compression method it lacks) or
``RuntimeError`` (an encrypted member) on damaged input.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
import zlib
from contextlib import contextmanager
from typing import Iterator

from indexerd.core.errors import SkipDocument

#: More members than this and the archive is not read (``too-large``): a real document has
#: tens to a few thousand (a 500-slide deck with images ~2,000).
MAX_MEMBERS = 20_000
READ_CHUNK_BYTES = 64 * 1024

#: Exceptions that mean "this file is damaged or hostile" from zipfile, zlib and the XML parser.
PARSE_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError,
    KeyError, IndexError, LookupError, UnicodeError, OSError, SyntaxError)


class Budget:
    """The decompressed bytes one document may still use (the source's ``max_size``).

    Not thread-safe: one per extraction.
    """

    def __init__(self, max_bytes: int, label: str) -> None:
        self.left = max_bytes
        self.max_bytes = max_bytes
        self.label = label

    def take(self, n: int) -> None:
        """Spend ``n`` bytes.

        Raises:
            SkipDocument: ``too-large`` once more than ``max_bytes`` were spent in all.
        """
        self.left -= n
        if self.left < 0:
            raise SkipDocument("too-large", f"{self.label}: more than max_size {self.max_bytes} "
                                            "bytes once decompressed")


class BoundedReader(io.RawIOBase):
    """A read-only stream over a ZIP member that charges every byte it returns to a
    :class:`Budget` (raising ``too-large`` past it)."""

    def __init__(self, raw, budget: Budget) -> None:
        super().__init__()
        self._raw = raw
        self._budget = budget

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = READ_CHUNK_BYTES
        chunk = self._raw.read(min(n, READ_CHUNK_BYTES))
        self._budget.take(len(chunk))
        return chunk

    def readinto(self, buffer) -> int:
        chunk = self.read(len(buffer))
        buffer[:len(chunk)] = chunk
        return len(chunk)

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


@contextmanager
def parse_errors(label: str) -> Iterator[None]:
    """Turn any library error raised inside the block into ``SkipDocument("parse-error")``
    (a :class:`SkipDocument` passes through; ``MemoryError`` too, for the worker to report)."""
    try:
        yield
    except SkipDocument:
        raise
    except MemoryError:
        raise
    except PARSE_ERRORS as exc:
        raise SkipDocument("parse-error", f"{label}: {type(exc).__name__}: {exc}") from exc


def safe_member_name(name: str) -> str | None:
    """The member name normalised (``a/./b`` -> ``a/b``), or ``None`` when it is absolute or
    climbs out of the archive (``../x``, ``/etc/passwd``, ``C:\\x``): such a member is never
    read.  Nothing here writes a member to disk; the check keeps a hostile name from aliasing
    another member."""
    name = name.replace("\\", "/")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return None
    normal = posixpath.normpath(name)
    if normal == ".." or normal.startswith("../"):
        return None
    return normal


class Archive:
    """A ZIP archive opened from bytes, with members looked up by their normalised names.

    Raises (constructor):
        SkipDocument: ``parse-error`` (not a ZIP, damaged central directory) or ``too-large``
            (more than :data:`MAX_MEMBERS` members).
    """

    def __init__(self, data: bytes, budget: Budget) -> None:
        self.budget = budget
        with parse_errors(budget.label):
            self.zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self.zip.infolist()
        if len(infos) > MAX_MEMBERS:
            raise SkipDocument("too-large", f"{budget.label}: {len(infos)} ZIP members > {MAX_MEMBERS}")
        self.members: dict[str, zipfile.ZipInfo] = {}
        #: member names refused by :func:`safe_member_name` (for the log)
        self.refused: list[str] = []
        for info in infos:
            safe = safe_member_name(info.filename)
            if safe is None:
                self.refused.append(info.filename)
            elif safe not in self.members:
                self.members[safe] = info

    def names(self) -> list[str]:
        """The safe member names, in archive order."""
        return list(self.members)

    def has(self, name: str) -> bool:
        return name in self.members

    def open(self, name: str) -> BoundedReader:
        """A stream of the member ``name`` charged to the budget.

        Raises:
            SkipDocument: ``parse-error`` for a missing or unreadable member.
        """
        info = self.members.get(name)
        if info is None:
            raise SkipDocument("parse-error", f"{self.budget.label}: no member {name!r}")
        with parse_errors(self.budget.label):
            return BoundedReader(self.zip.open(info), self.budget)

    def read(self, name: str) -> bytes:
        """The whole member ``name`` (charged to the budget; see :meth:`open`)."""
        with self.open(name) as stream, parse_errors(self.budget.label):
            parts = []
            while chunk := stream.read(READ_CHUNK_BYTES):
                parts.append(chunk)
            return b"".join(parts)
