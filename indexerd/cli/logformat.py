"""Log lines without control characters, for the terminal and the journal."""

from __future__ import annotations

import logging

from indexerd.output.terminal import UNSAFE_KEEP_NEWLINE, escape


class SafeLogFormatter(logging.Formatter):
    """A :class:`logging.Formatter` whose lines carry no control characters: log lines reach a
    terminal too (``indexerd index`` by hand) and name files and pages.  Newlines are kept (a
    traceback spans lines); everything else :func:`safe` escapes is escaped."""

    def format(self, record: logging.LogRecord) -> str:
        return UNSAFE_KEEP_NEWLINE.sub(escape, super().format(record))
