"""One file of a tree read and handed to the pipeline: the read the scan and the watcher share."""

from __future__ import annotations

import os
import stat as stat_mod
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from indexerd.pipeline.fetched import Fetched
from indexerd.pipeline.stages import PassCounts, Pipeline
from indexerd.extract.sniff import SNIFF_BYTES
from indexerd.sources.files import confined, mailboxes
from indexerd.core.filekeys import path_to_key
from indexerd.sources.files.keys import display_path, trusted_ctime_ns

if TYPE_CHECKING:
    from indexerd.sources.files.scan import FileSource

UTC = timezone.utc


def read_file(src: FileSource, path: str, st: os.stat_result, pipeline: Pipeline, counts: PassCounts, *,
              forced: bool = False) -> str:
    """Read one file of ``src`` (its stat ``st`` already taken) and hand it to the pipeline;
    returns the verdict.

    Opened below the root without following a swapped-in symlink
    (:func:`indexerd.sources.files.confined.open_below`); at most ``max_size + 1`` bytes read
    (a mailbox is read per message instead); a file gone since the walk is deleted if stored,
    an unreadable one skipped as ``unreadable`` with the errno's text.  Times are UTC."""
    key = path_to_key(path)
    max_size = src.policy.max_size_bytes
    name = os.path.basename(path)
    title = display_path(name)
    stat_facts: dict[str, Any] = dict(mtime_ns=st.st_mtime_ns, ctime_ns=st.st_ctime_ns, ino=st.st_ino)
    if not stat_mod.S_ISREG(st.st_mode):
        return pipeline.skip(key, src.name, "not-a-file", f"{display_path(path)} is not a regular file",
                             counts, size=st.st_size, title=title, **stat_facts).verdict
    if st.st_size > max_size and not mailboxes.may_be_mailbox(name):
        return pipeline.skip(key, src.name, "too-large",
                             f"{display_path(path)}: {st.st_size} bytes > max_size {max_size}",
                             counts, size=st.st_size, title=title, **stat_facts).verdict
    read_at_ns = time.time_ns()
    try:
        fd = confined.open_below(src.root, path, follow_symlinks=src.cfg.follow_symlinks)
        with os.fdopen(fd, "rb") as fh:
            st2 = os.fstat(fh.fileno())
            stat_facts = dict(mtime_ns=st2.st_mtime_ns, ino=st2.st_ino,
                              ctime_ns=trusted_ctime_ns(st2.st_ctime_ns, read_at_ns))
            if not stat_mod.S_ISREG(st2.st_mode):
                return pipeline.skip(key, src.name, "not-a-file", display_path(path), counts,
                                     size=st2.st_size, title=title, **stat_facts).verdict
            data = fh.read(min(max_size + 1, SNIFF_BYTES))
            if mailboxes.may_be_mailbox(name) and mailboxes.is_mailbox(name, data):
                fh.seek(0)
                return mailboxes.index_mailbox(
                    src, key, path, fh, st2.st_size, stat_facts,
                    datetime.fromtimestamp(st2.st_mtime_ns / 1e9, UTC), pipeline, counts,
                    forced=forced)
            if st2.st_size > max_size:
                return pipeline.skip(key, src.name, "too-large",
                                     f"{display_path(path)}: {st2.st_size} bytes > max_size "
                                     f"{max_size}", counts, size=st2.st_size, title=title,
                                     **stat_facts).verdict
            if len(data) <= max_size:
                data += fh.read(max_size + 1 - len(data))
    except (FileNotFoundError, confined.NotARealDirectory):  # gone, or a directory on the
        # way was swapped for a symlink or a file: what is there now is not this key's file
        stored = pipeline.stored(key)
        if stored is not None:
            return pipeline.gone(key, counts, "vanished").verdict
        return "vanished"
    except OSError as e:
        return pipeline.skip(key, src.name, "unreadable", f"{display_path(path)}: {e.strerror}", counts,
                             size=st.st_size, status="error", title=title, **stat_facts).verdict
    if len(data) > max_size:
        return pipeline.skip(key, src.name, "too-large",
                             f"{display_path(path)}: grew past max_size {max_size} while read",
                             counts, size=len(data), title=title, **stat_facts).verdict
    mtime = datetime.fromtimestamp(st2.st_mtime_ns / 1e9, UTC)
    f = Fetched(key=key, source=src.name, url=key, data=data, fetched_at=pipeline.clock(), path=path,
                name=name, protocol_date=mtime, protocol_kind="mtime", size=len(data), **stat_facts)
    return pipeline.handle(f, src.pipeline_policy, counts, forced=forced, fallback_title=title).verdict
