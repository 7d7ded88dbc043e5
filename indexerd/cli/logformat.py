"""Log lines without control characters, for the terminal and the journal; whether stderr is the
journal (then lines carry no timestamp of their own)."""

from __future__ import annotations

import logging
import os

from indexerd.output.terminal import UNSAFE_KEEP_NEWLINE, escape


class SafeLogFormatter(logging.Formatter):
    """A :class:`logging.Formatter` whose lines carry no control characters: log lines reach a
    terminal too (``indexerd index`` by hand) and name files and pages.  Newlines are kept (a
    traceback spans lines); everything else :func:`safe` escapes is escaped."""

    def format(self, record: logging.LogRecord) -> str:
        return UNSAFE_KEEP_NEWLINE.sub(escape, super().format(record))


def is_journal_stream(fd: int = 2) -> bool:
    """True when file descriptor ``fd`` (default: stderr) is connected to the journal.

    The rule of ``sd_journal_stream_fd(3)`` and ``systemd.exec(5)``: ``$JOURNAL_STREAM`` holds
    ``DEVICE:INODE`` (decimal) of the journal stream systemd connected, and it counts only when it
    equals ``os.fstat(fd)``'s ``st_dev:st_ino``.  journald timestamps every line itself, so a
    logger writing there leaves its own timestamp out.  False when unset, malformed, ``fd`` is
    closed, or ``fd`` is something else now (a child redirected it, ``2>file``).
    """
    value = os.environ.get("JOURNAL_STREAM", "")
    dev, sep, ino = value.partition(":")
    if not sep or not dev.isdigit() or not ino.isdigit():
        return False
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (int(dev), int(ino))
