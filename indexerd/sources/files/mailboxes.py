"""Mailboxes in a tree: an mbox file (RFC 4155) gives one document per message.

Each message is a document of its own, keyed ``<file key>#<Message-ID>`` (percent-encoded; the
message's ordinal ``n<N>`` when it has none or repeats an earlier one, see
:func:`indexerd.extract.formats.mail.message_fragment`), extracted as ``message/rfc822`` in an
extraction worker like any ``.eml`` file: sender, recipients and subject are searchable, and the
``Date:`` header is the message's ``document`` date source.  ``max_size`` applies to each
message, not to the file: a mailbox of any size is read line by line, one message in memory at
a time (:func:`indexerd.extract.formats.mail.iter_mbox`), and a message over the cap is skipped
``too-large`` under its own key while the others are indexed.

The file's own key keeps its stat (so an unchanged mailbox costs one ``stat`` in the next scan,
as any file) with status ``skipped`` and reason ``container`` -- it is not itself in the index.
When the file changes every message is read again (the decision then finds most of them
unchanged by date and content hash) and messages no longer in it are deleted; when the file is
gone, :meth:`indexerd.sources.files.scan.FileSource.scan` deletes its messages with it.

Recoll keys the messages of an mbox the same way (one sub-document per message, its ``ipath``
the message number).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import IO

from indexerd.pipeline.fetched import Fetched
from indexerd.pipeline.stages import PassCounts, Pipeline
from indexerd.extract.formats import MBOX_NAMES, MEDIA_EML, MEDIA_MBOX
from indexerd.extract.sniff import SNIFF_BYTES, classify

#: The reason stored on a mailbox file's own row (its messages are the documents).
CONTAINER = "container"


def is_mailbox(name: str, head: bytes) -> bool:
    """True when a file named ``name`` (its base name) starting with ``head`` is an mbox, as
    :func:`indexerd.extract.extract` would type it (the extension ``.mbox``/``.mbx``, a
    mailbox name such as ``inbox``, or a ``From_`` line followed by mail headers)."""
    return classify(name, head[:SNIFF_BYTES], None, None)[0] == MEDIA_MBOX


def may_be_mailbox(name: str) -> bool:
    """Could a file of this name be an mbox (no extension, or ``.mbox``/``.mbx``)?  A file too
    large for ``max_size`` is opened to look at its first bytes only when this holds."""
    base = name.rpartition("/")[2].lower()
    dot = base.rfind(".")
    return dot <= 0 or base[dot:] in (".mbox", ".mbx") or base in MBOX_NAMES


def index_mailbox(source, key: str, path: str, stream: IO[bytes], file_size: int,
                  stat_facts: dict, mtime: datetime, pipeline: Pipeline, counts: PassCounts, *,
                  forced: bool = False) -> str:
    """Index each message of the mbox read from ``stream`` (binary, at its start) and record
    the file's own row; returns the file's verdict (``skipped``: a container).

    Args:
        source: the :class:`~indexerd.sources.files.scan.FileSource` (its ``name``,
            ``policy.max_size_bytes`` and ``pipeline_policy``).
        key: the file's key; ``path`` its path; ``file_size`` its size in bytes (stored on
            its row for the next scan's change test).
        stat_facts: ``mtime_ns``, ``ctime_ns``, ``ino`` of the open file (stored on every row).
        mtime: the file's mtime (aware UTC), each message's protocol date.

    Raises:
        OSError: reading the file failed part way (the caller records it ``unreadable``).
    """
    from indexerd.extract.formats.mail import iter_mbox, message_fragment  # a pass without mail skips its import

    max_size = source.policy.max_size_bytes
    name = os.path.basename(path)
    seen_ids: set[str] = set()
    keys: list[str] = []
    for message in iter_mbox(stream, max_size):
        child = f"{key}#{message_fragment(message, seen_ids)}"
        keys.append(child)
        label = f"{path} message {message.ordinal}"
        if message.data is None:
            pipeline.skip(child, source.name, "too-large",
                          f"{label}: {message.size} bytes > max_size {max_size}", counts,
                          size=message.size, **stat_facts)
            continue
        f = Fetched(key=child, source=source.name, url=child, data=message.data,
                    fetched_at=pipeline.clock(), path=path, name=name, declared_type=MEDIA_EML,
                    protocol_date=mtime, protocol_kind="mtime", size=message.size, **stat_facts)
        pipeline.handle(f, source.pipeline_policy, counts, forced=forced,
                        fallback_title=f"{name} message {message.ordinal}")
    gone = pipeline.still_stored(pipeline.store.keys_with_prefix(source.name, key + "#") - set(keys))
    if gone:
        pipeline.gone_many(gone, counts, "no longer in the mailbox")
    return pipeline.skip(key, source.name, CONTAINER,
                         f"{MEDIA_MBOX}: {len(keys)} messages indexed, keyed {key}#ID (the Message-ID "
                         f"without <>, percent-encoded){f'; the first is {keys[0]}' if keys else ''}",
                         counts, size=file_size, **stat_facts).verdict


def children(pipeline: Pipeline, source_name: str, key: str) -> set[str]:
    """The stored keys of the messages of the mailbox ``key`` (empty for any other file)."""
    return pipeline.store.keys_with_prefix(source_name, key + "#")
