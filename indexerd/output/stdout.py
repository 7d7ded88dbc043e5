"""Writing a command's output to standard output, for the full command line and the fast path
alike (imports only :mod:`os` and :mod:`sys`, so :mod:`indexerd.cli.entry` can use it)."""

from __future__ import annotations

import os
import sys


def write_stdout(text: str) -> str | None:
    """Write ``text`` to standard output and flush it (nothing when there is none, as ``print``
    does); None, or the one-line reason the write failed (a full disk).  After a failure what is
    left unwritten is dropped (standard output goes to ``/dev/null``), so the interpreter's exit
    does not fail again.

    Raises:
        BrokenPipeError: the reader went away (callers exit 0, as after ``print``).
    """
    if sys.stdout is None:
        return None
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
        return f"cannot write the output: {e.strerror or e}"
    return None
