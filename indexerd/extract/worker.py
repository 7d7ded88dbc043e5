"""The extraction worker: a child process that parses one document at a time for
:mod:`indexerd.extract.isolation`, under an address-space limit (the worker's own size after its imports plus the bound).

Run as ``python -m indexerd.extract.worker MEMORY_BYTES``.  It reads requests from stdin and
writes replies to stdout, each a frame: a 4-byte big-endian length, then a msgpack value.

- first, unasked, once its libraries are imported and its limit set: ``{"ready": pid}``
- request: ``[media_type, label, max_bytes, data, timeout_seconds]`` (the document's time
  bound: extractors that run a program of their own end it before the parent ends the worker)
- reply: ``{"ok": [title, text, media_type, date_property, date_value, meta]}`` or
  ``{"skip": [reason, detail], "retire": bool}`` (``retire``: the worker exits after
  this reply, its memory state no longer to be trusted after a ``MemoryError``).

It ends at end of input (the parent closed the pipe or died) and, when its parent dies
mid-parse, within a second (a thread watches ``getppid()``; Linux's ``PR_SET_PDEATHSIG`` is
not used: it fires when the parent *thread* that spawned the worker ends, and the daemon's
threads come and go).  Limits: ``RLIMIT_AS`` (virtual memory;
a ``malloc`` past it fails, which Python raises as ``MemoryError``) set before any document is
read; the time bound is the parent's (it kills the worker).
"""

from __future__ import annotations

import importlib
import os
import resource
import struct
import sys
import threading
import time
from typing import BinaryIO

from indexerd.core.errors import SkipDocument
from indexerd.extract import formats as F
from indexerd.extract.extracted import MEDIA_JSON, MEDIA_JSON_LINES, MEDIA_PDF

#: media type -> (module, function); every function has the signature
#: ``(data, media_type, label, max_bytes) -> DocumentText``.
EXTRACTORS: dict[str, tuple[str, str]] = {
    **dict.fromkeys((F.MEDIA_DOCX, F.MEDIA_XLSX, F.MEDIA_PPTX),
                    ("indexerd.extract.formats.ooxml", "extract_ooxml")),
    **dict.fromkeys((F.MEDIA_ODT, F.MEDIA_ODS, F.MEDIA_ODP),
                    ("indexerd.extract.formats.odf", "extract_odf")),
    F.MEDIA_EPUB: ("indexerd.extract.formats.epub", "extract_epub"),
    F.MEDIA_RTF: ("indexerd.extract.formats.rtf", "extract_rtf"),
    F.MEDIA_EML: ("indexerd.extract.formats.mail", "extract_eml"),
    F.MEDIA_MBOX: ("indexerd.extract.formats.mail", "extract_mbox"),
    F.MEDIA_SVG: ("indexerd.extract.formats.svg", "extract_svg"),
    MEDIA_PDF: ("indexerd.extract.pdf", "read_pdf"),
    **dict.fromkeys((MEDIA_JSON, MEDIA_JSON_LINES), ("indexerd.extract.jsontext", "read_json")),
    F.MEDIA_POSTSCRIPT: ("indexerd.extract.formats.postscript", "extract_postscript"),
}
#: Extractors that run a program (Ghostscript) and take its wall-time bound as
#: ``timeout_seconds=``: a share of the worker's (:func:`.postscript.ghostscript_seconds`).
TIMED_EXTRACTORS = frozenset({F.MEDIA_POSTSCRIPT})
_HEADER = struct.Struct(">I")
PARENT_POLL_SECONDS = 1.0


def run_extractor(media_type: str, data: bytes, label: str, max_bytes: int,
                  timeout_seconds: float | None = None) -> F.DocumentText:
    """Run the extractor for ``media_type`` in this process (the worker's job; tests call it
    directly to compare).  ``timeout_seconds``: the time the document may take in the worker
    (``None``: unknown); only :data:`TIMED_EXTRACTORS` use it.

    Raises:
        SkipDocument: from the extractor; ``unsupported-type`` for a type not in
            :data:`EXTRACTORS`.
    """
    entry = EXTRACTORS.get(media_type)
    if entry is None:
        raise SkipDocument("unsupported-type", f"{label}: {media_type} has no extractor")
    module = importlib.import_module(entry[0])
    if media_type in TIMED_EXTRACTORS:
        from indexerd.extract.formats.postscript import ghostscript_seconds

        return getattr(module, entry[1])(data, media_type, label, max_bytes,
                                         timeout_seconds=ghostscript_seconds(timeout_seconds))
    return getattr(module, entry[1])(data, media_type, label, max_bytes)


def read_frame(stream: BinaryIO) -> bytes | None:
    """One frame's payload, or ``None`` at a clean end of input.

    Raises:
        EOFError: the input ended inside a frame.
    """
    header = stream.read(_HEADER.size)
    if not header:
        return None
    if len(header) < _HEADER.size:
        raise EOFError("input ended inside a frame header")
    (size,) = _HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        raise EOFError("input ended inside a frame")
    return payload


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def _answer(request: list) -> dict:
    media_type, label, max_bytes, data, *rest = request
    try:
        result = run_extractor(media_type, data, label, max_bytes, rest[0] if rest else None)
    except SkipDocument as exc:
        return {"skip": [exc.reason, exc.detail], "retire": False}
    except MemoryError:
        return {"skip": ["too-large", f"{label}: the extraction ran out of its memory bound"],
                "retire": True}
    except RecursionError:
        return {"skip": ["parse-error", f"{label}: nested too deeply"], "retire": False}
    except Exception as exc:  # a library bug on a hostile file: this document only
        return {"skip": ["parse-error", f"{label}: {type(exc).__name__}: {exc}"[:500]],
                "retire": False}
    return {"ok": [result.title, result.text, result.media_type, result.date_property,
                   result.date_value, [list(pair) for pair in result.meta]]}


def _die_with_parent(parent_pid: int) -> None:
    """Exit at once when the parent process is gone (this process re-parented)."""

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_SECONDS)
            if os.getppid() != parent_pid:
                os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _address_space_bytes() -> int:
    """This process's virtual memory size now (Linux ``/proc/self/statm``; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def main(argv: list[str]) -> int:
    """Serve requests until end of input.

    ``argv[0]``: the memory bound in bytes (0: none): the address space one document may add
    to the worker's own once its libraries are imported (``RLIMIT_AS`` is set to the sum).
    """
    import msgspec

    memory_bytes = int(argv[0]) if argv else 0
    parent_pid = os.getppid()
    if parent_pid == 1:  # the parent is already gone
        return 0
    _die_with_parent(parent_pid)
    for name in {module for module, _ in EXTRACTORS.values()}:
        importlib.import_module(name)  # before the limit: imports are not a document's cost
    from indexerd.extract import extract  # noqa: F401  (EPUB and mail HTML parts)
    import pypdf  # noqa: F401
    import selectolax.lexbor  # noqa: F401

    if memory_bytes > 0:
        limit = _address_space_bytes() + memory_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing printed by a library can corrupt the frames
    encoder, decoder = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder()
    write_frame(stdout, encoder.encode({"ready": os.getpid()}))
    while True:
        payload = read_frame(stdin)
        if payload is None:
            return 0
        reply = _answer(decoder.decode(payload))
        del payload
        write_frame(stdout, encoder.encode(reply))
        if reply.get("retire"):
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
