"""One exception tree for indexerd, grouped by what the caller does next.

Every class says whether retrying the same operation later is safe (``retry_safe``) and which
process exit code the CLI maps it to (``exit_code``).  The tree:

- :class:`IndexerdError` -- the root.
  - :class:`ConfigError` -- bad configuration or usage; refuse to start (exit 2).
  - :class:`QueryError` -- a malformed search query or time span (exit 2).
  - :class:`SkipDocument` -- this one document cannot be indexed; log it, record the reason and
    go on with the next.  ``reason`` is a fixed word (``too-large``, ``binary``, ...).
  - :class:`RetryLater` -- a transient failure (I/O hiccup, locked resource); retry is safe.
  - :class:`StoreError` -- the SQLite state store cannot be used (exit 1).
    - :class:`SchemaTooNew` -- the store was written by a newer indexerd; refuse to start.
  - :class:`IndexUnavailable` -- the full-text index cannot be opened or written (exit 1).
  - :class:`StateDirLocked` -- another indexerd process holds the state dir (exit 4).
  - :class:`DaemonNotRunning` -- a ``ctl`` command needs the daemon and none answers (exit 3).
  - :class:`UnknownKey` -- ``ctl explain``/``forget``/``reindex`` of a key indexerd does not
    know (exit 1).
"""

from __future__ import annotations

import errno


class IndexerdError(Exception):
    """Root of every error indexerd raises on purpose.

    Attributes:
        retry_safe: True when the same call may succeed if repeated later.
        exit_code: the CLI's exit status for this error.
    """

    retry_safe = False
    exit_code = 1


class ConfigError(IndexerdError):
    """The configuration (file, key, value) or the command line is wrong; nothing was started.

    The message names the file, the key path (``sources.filesystem[0].exclude``) and what was
    expected.
    """

    exit_code = 2


class QueryError(IndexerdError):
    """A search query, ``--since`` span or similar user expression could not be parsed."""

    exit_code = 2


class SkipDocument(IndexerdError):
    """One document cannot be indexed; the pass goes on with the next.

    Args:
        reason: a fixed, documented word stored with the document: ``too-large``, ``binary``,
            ``empty``, ``unsupported-type``, ``unreadable``, ``vanished``, ``not-a-file``,
            ``parse-error``, ``noindex``.
        detail: free text for the log (file name, URL, what went wrong).
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class EnvironmentFailure(IndexerdError):
    """This machine, not the document, failed to read a document: a helper process that cannot
    start, EACCES or ENOSPC on indexerd's own files, no memory or file descriptors left.  The
    document is recorded as an error with reason ``environment`` and read again at the next
    pass whatever its stat says (its text was never judged)."""

    retry_safe = True


#: ``errno`` values of an :class:`OSError` met while extracting a document in memory: the
#: environment's (permissions on our own helpers, a full disk, exhausted limits), never the
#: document's.
ENVIRONMENT_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.EMFILE,
                                errno.ENFILE, errno.ENOMEM, errno.EAGAIN, errno.ENOEXEC, errno.ENOENT})


def is_environment_failure(exc: BaseException) -> bool:
    """Whether ``exc``, raised while a document was extracted, is the environment's fault
    (:class:`EnvironmentFailure`, or an :class:`OSError` with an :data:`ENVIRONMENT_ERRNOS`)."""
    return isinstance(exc, EnvironmentFailure) or (isinstance(exc, OSError) and exc.errno in ENVIRONMENT_ERRNOS)


class RetryLater(IndexerdError):
    """A transient failure; the same operation may succeed later."""

    retry_safe = True


class StoreError(IndexerdError):
    """The SQLite state store cannot be opened, read or written."""


class SchemaTooNew(StoreError):
    """The state store's schema version is newer than this code understands."""

    exit_code = 2


class IndexUnavailable(IndexerdError):
    """The full-text index cannot be opened, or is corrupt; the message says which directory."""


class StateDirLocked(IndexerdError):
    """Another indexerd process (daemon or one-shot ``index``) holds the state directory."""

    exit_code = 4


class DaemonNotRunning(IndexerdError):
    """A ``ctl`` command needs the daemon's control socket and nothing answers there."""

    exit_code = 3


class UnknownKey(IndexerdError):
    """A document key (path, URL, ``sql:`` key) that no stored document and no configured source
    has; ``ctl explain``, ``forget`` and ``reindex`` all exit 1 on it."""
