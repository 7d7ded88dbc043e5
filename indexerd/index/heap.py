"""Giving the C heap's free memory back to the kernel after an index writer ends.

Outside contract relied on (glibc's allocator, ``malloc(3)``, ``mallopt(3)``, ``malloc_trim(3)``):
every thread that allocates gets one of up to eight *arenas* per core, and memory freed inside an
arena stays in the process (counted in its RSS) until that arena's top is trimmed.  tantivy's
writer (through its Python bindings, linked against glibc's ``malloc``) allocates its indexing
buffer, up to ``writer_memory``, in new threads at every session, and its merges in others, so
each session's buffer lands in whichever arena its threads got, and the freed buffers of earlier
sessions pile up beside the other threads' live blocks (a first index's anonymous memory grew
with every session: bench/RESULTS.md).  :func:`release_free_heap`
(``malloc_trim(0)``: every arena, free pages inside it too since glibc 2.8) after a session
ends hands those pages back.  Elsewhere (musl, macOS) both calls do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading

log = logging.getLogger(__name__)

_lock = threading.Lock()
_libc: ctypes.CDLL | None = None
_loaded = False


def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc (it has ``malloc_trim``), else None; looked up once."""
    global _libc, _loaded
    with _lock:
        if not _loaded:
            _loaded = True
            try:
                lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                lib.malloc_trim.argtypes = [ctypes.c_size_t]
                lib.malloc_trim.restype = ctypes.c_int
                _libc = lib
            except (OSError, AttributeError):  # no C library by that name, or not glibc
                _libc = None
        return _libc


def release_free_heap() -> bool:
    """Return the C heap's free pages to the kernel (glibc ``malloc_trim(0)``); True when
    something was released.  Costs a walk of every arena's free lists (once per writer session).
    Thread-safe (glibc locks each arena); does nothing without glibc."""
    lib = _glibc()
    if lib is None:
        return False
    return bool(lib.malloc_trim(0))
