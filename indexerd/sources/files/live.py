"""A tree's live changes: which watcher events concern it, and one changed path applied.

The watcher (:mod:`indexerd.sources.files.watch`) queues paths, not events; the daemon's change
worker hands each to :func:`apply_change`, which looks at what the path is *now*.
"""

from __future__ import annotations

import logging
import stat as stat_mod
import threading
from typing import TYPE_CHECKING

from indexerd.core.filekeys import path_to_key

from indexerd.sources.files.keys import display_path

if TYPE_CHECKING:
    from indexerd.pipeline.stages import PassCounts, Pipeline
    from indexerd.sources.files.scan import FileSource

log = logging.getLogger(__name__)


def accepts(src: FileSource, path: str, is_dir: bool) -> bool:
    """Whether an event of ``path`` concerns ``src``: below its root (not the root itself),
    selected by its include/exclude rules; a directory when no component of it is excluded."""
    if not src.contains(path) or path == src.root:
        return False
    rel = src.relpath(path)
    if is_dir:
        return not src.matcher.any_dir_excluded(rel, last_too=True)
    return src.matcher.path_selected(rel)


def apply_change(src: FileSource, pipeline: Pipeline, path: str, was_dir: bool, counts: PassCounts, *,
                 cancel: threading.Event | None = None) -> None:
    """Process one path from the change queue.  What the path is *now* decides, not what the
    events said (a file may have been replaced by a directory of the same name, or the reverse,
    between them): a directory is scanned, and a document stored for a file of that name is
    deleted; anything else (a file, a symlink the source does not follow, nothing) deletes every
    document stored below a directory of that name, then is handled as one path.

    ``was_dir``: the events said the path was a directory.  ``cancel`` ends a scan early.
    """
    key = path_to_key(path)
    st = src.stat_path(path)
    if st is not None and stat_mod.S_ISDIR(st.st_mode):
        if pipeline.stored(key) is not None:  # None too when its removal is queued
            pipeline.gone(key, counts, "replaced by a directory")
        src.scan(pipeline, counts, start=path, cancel=cancel)  # moved in or created
    else:
        if was_dir or st is None:
            # nothing can be below a path that is not a directory: a directory moved out,
            # deleted or replaced by a file takes all its documents with it
            below = pipeline.still_stored(pipeline.store.keys_with_prefix(src.name, key.rstrip("/") + "/"))
            pipeline.gone_many(below, counts, "deleted or moved away")
        src.handle_path(path, pipeline, counts)
    if counts.indexed or counts.deleted or counts.skipped or counts.errors:
        log.info("%s: %s %s", src.name, display_path(path), counts.as_dict())
