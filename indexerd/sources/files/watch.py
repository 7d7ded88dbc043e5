"""Live file watching: watchdog events -> a coalescing change queue -> the daemon's worker.

Outside contract relied on (watchdog 7 on Linux, ``InotifyObserver``, LIBRARIES.md §6):

- a close-after-write arrives as ``closed``; an editor's atomic save (write a temp file, rename it
  over the original) arrives as ``moved temp -> original`` with no event on the original name;
- a directory moved *out* of the tree gives one ``deleted``/``moved`` event for the directory and
  none for its files, and later writes in it may still arrive with paths that no longer exist;
- a directory moved *in* gives synthesised ``created`` events for its contents;
- a kernel queue overflow is not an event: watchdog only logs a WARNING on
  ``watchdog.observers.inotify_c`` ("Inotify queue overflowed"), so we hook that logger;
- the per-user watch limit (``fs.inotify.max_user_watches``) raises ``OSError(ENOSPC)``;
- a watch walks its tree with ``os.walk``, which recurses once per directory level on Python
  3.11: a tree about 1,000 levels deep raised ``RecursionError`` from ``schedule`` (when the
  watch is set up) or killed the emitter thread silently (when such a tree is moved in), and
  with it the watch of the whole tree; :mod:`~indexerd.sources.files.watchwalk` gives watchdog
  an iterative walk, so a deep tree is watched like any other;

So every path is ``stat``-ed again when it is processed (the queue holds paths, not facts), a
vanished directory removes every document under it, and an overflow or a watch-limit error asks
for a stat reconcile of the tree.  A watch that cannot be set up, or whose thread died, is
reported (:meth:`TreeWatcher.check`, the log, ``ctl status``, systemd's STATUS line); the daemon
sets it up again, and while that fails the tree is kept current by scheduled reconciles.

Directory ``modified`` events are ignored (they fire for every
file created inside); file ``modified`` bursts are debounced; ``closed`` and ``moved`` act after
:data:`SETTLE_SECONDS` (one timestamp tick, so the stat read with the file can be trusted).
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

from indexerd.sources.files.keys import RACY_WINDOW_FINE_NS

log = logging.getLogger(__name__)

#: how long a file's burst of ``modified``/``created`` events is left to settle (seconds)
DEFAULT_DEBOUNCE_SECONDS = 0.2
#: rate limit per path (a token bucket): HOT_AFTER processings in a burst, then one per
#: HOT_INTERVAL_SECONDS while the path keeps changing (an appended log); its latest state is
#: processed at most HOT_INTERVAL_SECONDS after its last change; other paths are not delayed
HOT_AFTER = 3
HOT_INTERVAL_SECONDS = 10.0
#: how long a file closed after writing or moved is left before it is read: just past one
#: timestamp tick (indexerd.sources.files.scan.RACY_WINDOW_FINE_NS), so its stat can be trusted and the next
#: reconcile need not read it again
SETTLE_SECONDS = RACY_WINDOW_FINE_NS / 1e9 + 0.02


@dataclass
class Change:
    """One path waiting to be processed.  ``was_dir`` is what the event said it was;
    ``first`` is when the first event of this burst arrived (monotonic seconds)."""

    source: str
    path: str
    was_dir: bool
    due: float
    first: float


class ChangeQueue:
    """Pending paths, one entry per path: a burst of events on one path is processed once.

    ``put(..., delay)``: ``delay=0`` makes the entry due now; a positive delay (debounce) pushes
    its due time back with each new event, but never past ``first + max_delay_seconds`` so a file
    that is written continuously is still indexed regularly.

    Rate limit per path, a token bucket: a file whose content keeps changing (events with a
    delay) may be taken ``hot_after`` times in a burst, then once per ``hot_interval_seconds``
    (its events meanwhile merge into one entry, due when the next token is; a deletion or a move,
    which is due at once, is not held back), so one file that changes all the time (an appended log) is read and indexed
    at most once per interval and cannot starve the others; its final state is still processed.
    Thread-safe.
    """

    def __init__(self, max_delay_seconds: float = 1.0, hot_after: int = HOT_AFTER,
                 hot_interval_seconds: float = HOT_INTERVAL_SECONDS) -> None:
        self._cv = threading.Condition()
        self._items: dict[str, Change] = {}
        self.max_delay_seconds = max_delay_seconds
        self.hot_after = hot_after
        self.hot_interval_seconds = hot_interval_seconds
        self._tokens: dict[str, tuple[float, float]] = {}  # path -> (tokens, at); absent: full

    def put(self, source: str, path: str, was_dir: bool, delay: float) -> None:
        now = time.monotonic()
        with self._cv:
            old = self._items.get(path)
            first = old.first if old else now
            due = min(now + delay, first + self.max_delay_seconds)
            if old is not None and delay == 0:
                due = min(due, old.due)
            tokens = self._tokens_at(path, now)
            held_back_ok = delay > 0 and not was_dir and (old is None or (old.due > now and not old.was_dir))
            if held_back_ok and tokens < 1.0:  # its content keeps changing: due when its next
                # token is (a deletion, a move or a directory, due at once, is never held back)
                due = max(due, now + (1.0 - tokens) * self.hot_interval_seconds)
            self._items[path] = Change(source, path, was_dir or (old.was_dir if old else False), due, first)
            self._cv.notify()

    def _tokens_at(self, path: str, now: float) -> float:
        """The path's tokens at ``now`` (``hot_after`` when full).  Call with the lock held."""
        tokens, at = self._tokens.get(path, (float(self.hot_after), now))
        return min(float(self.hot_after), tokens + (now - at) / self.hot_interval_seconds)

    def take_due(self, timeout: float) -> list[Change]:
        """Wait up to ``timeout`` seconds for due entries; return them (oldest due first)."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                now = time.monotonic()
                due = [c for c in self._items.values() if c.due <= now]
                if due:
                    for c in due:
                        del self._items[c.path]
                        self._tokens[c.path] = (max(0.0, self._tokens_at(c.path, now) - 1.0), now)
                    if len(self._tokens) > 4096:  # forget the paths whose bucket is full again
                        self._tokens = {p: v for p, v in self._tokens.items()
                                        if self._tokens_at(p, now) < self.hot_after}
                    return sorted(due, key=lambda c: c.due)
                nxt = min((c.due for c in self._items.values()), default=None)
                wait = deadline - now if nxt is None else min(deadline, nxt) - now
                if wait <= 0:
                    return []
                self._cv.wait(wait)

    def __len__(self) -> int:
        with self._cv:
            return len(self._items)

    def wake(self) -> None:
        with self._cv:
            self._cv.notify_all()


class _OverflowHook(logging.Handler):
    """Turns watchdog's overflow log lines into a callback (there is no overflow event)."""

    def __init__(self, callback: Callable[[], None]) -> None:
        super().__init__(logging.WARNING)
        self._callback = callback

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in record.getMessage().lower():
            try:
                self._callback()
            except Exception:  # pragma: no cover - never break logging
                pass


class TreeWatcher:
    """Watches the roots of the watched filesystem sources and feeds a :class:`ChangeQueue`.

    Args:
        queue: where changed paths go.
        accepts: ``accepts(source, path, is_dir) -> bool``: the source's globs (excluded paths
            such as ``.git/`` or editor temp files never enter the queue).
        on_overflow: called (from watchdog's thread) when events were lost; the daemon starts a
            reconcile of every watched tree.
        on_watch_limit: ``on_watch_limit(source)`` when the watch limit stops a tree from being
            watched; the daemon then relies on scheduled reconciles for it.

    :meth:`watch` returns False and :attr:`errors` names why when a tree cannot be watched;
    :meth:`check` finds watches whose thread died.
        debounce_seconds: settle time of ``modified``/``created`` bursts.

    Lifecycle: :meth:`start`, :meth:`watch` / :meth:`unwatch_all` at any time, :meth:`stop`
    (safe twice).
    """

    def __init__(self, queue: ChangeQueue, accepts: Callable[[str, str, bool], bool],
                 on_overflow: Callable[[], None], on_watch_limit: Callable[[str], None],
                 debounce_seconds: float = DEFAULT_DEBOUNCE_SECONDS) -> None:
        self.queue = queue
        self.accepts = accepts
        self.on_watch_limit = on_watch_limit
        self.debounce_seconds = debounce_seconds
        self._observer = self._new_observer()
        self._roots: dict[str, str] = {}  # root -> source
        self._watches: dict[str, object] = {}  # source -> watchdog's ObservedWatch
        #: why a source's tree is not watched (set by watch() and check(); cleared by watch())
        self.errors: dict[str, str] = {}
        self._thread_errors: dict[str, str] = {}  # thread name -> its uncaught exception
        self._prev_excepthook: Callable[[threading.ExceptHookArgs], object] | None = None
        self._lock = threading.Lock()
        self._hook = _OverflowHook(on_overflow)
        self._started = False

    @staticmethod
    def _new_observer():
        from watchdog.observers import Observer

        from indexerd.sources.files import watchwalk

        watchwalk.install()  # a tree of any depth keeps its watch
        return Observer()

    def start(self) -> None:
        # watchdog 7 logs one overflow on both inotify_c and inotify: hook the first only
        logging.getLogger("watchdog.observers.inotify_c").addHandler(self._hook)
        self._prev_excepthook = threading.excepthook
        threading.excepthook = self._thread_died
        self._observer.start()
        self._started = True

    def _thread_died(self, args) -> None:
        """Remember why a thread ended with an exception (watchdog's emitters die silently)."""
        if args.thread is not None:
            self._thread_errors[args.thread.name] = f"{args.exc_type.__name__}: {args.exc_value}"[:300]
        if self._prev_excepthook is not None:
            self._prev_excepthook(args)

    def watch(self, source: str, root: str) -> bool:
        """Watch ``root`` recursively for ``source``; False (and ``on_watch_limit``) on ENOSPC."""
        from watchdog.events import FileSystemEventHandler

        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event) -> None:  # noqa: D401 - watchdog callback
                watcher._on_event(source, event)

        try:
            watch = self._observer.schedule(Handler(), root, recursive=True)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EMFILE):
                log.error("cannot watch %s for source %s: %s (raise fs.inotify.max_user_watches); "
                          "relying on scheduled reconciles", root, source, e.strerror)
                self.errors[source] = f"watch limit: {e.strerror}"
                self.on_watch_limit(source)
                return False
            log.error("cannot watch %s for source %s: %s", root, source, e)
            self.errors[source] = str(e)
            return False
        except Exception as e:  # RecursionError: a tree too deep for watchdog's os.walk
            why = self._describe(f"{type(e).__name__}: {e}")
            log.error("cannot watch %s for source %s: %s; relying on scheduled reconciles",
                      root, source, why)
            self.errors[source] = why
            return False
        with self._lock:
            self._roots[root] = source
            self._watches[source] = watch
        self.errors.pop(source, None)
        return True

    def check(self) -> dict[str, str]:
        """``{source: why}`` for each watch whose thread has died since the last call (its
        watch is dropped: :meth:`watch` it again).  Thread-safe; cheap (call it every second)."""
        dead: dict[str, str] = {}
        if not self._started:
            return dead
        # the observer's threads serve every watch: the dispatcher and the one inotify reader
        shared = [t for t in (self._observer, getattr(self._observer, "_inotify_fd", None)) if t is not None]
        if any(not t.is_alive() for t in shared):
            why = next((self._thread_errors.pop(t.name) for t in shared if t.name in self._thread_errors),
                       "the inotify reader stopped")
            with self._lock:
                dead = {source: self._describe(why) for source in self._watches}
                self._watches.clear()
                self._roots.clear()
            old, self._observer = self._observer, self._new_observer()
            self._observer.start()
            try:
                old.stop()
                old.join(timeout=2)
            except Exception:  # pragma: no cover - it is dead already
                pass
            self.errors.update(dead)
            return dead
        emitters = {e.watch: e for e in list(self._observer.emitters)}
        with self._lock:
            items = list(self._watches.items())
        for source, watch in items:
            emitter = emitters.get(watch)
            if emitter is not None and emitter.is_alive():
                continue
            why = self._describe(self._thread_errors.pop(emitter.name if emitter is not None else "", "")
                                 or "the watch thread stopped")
            dead[source] = why
            self.errors[source] = why
            with self._lock:
                self._watches.pop(source, None)
                for root, src in list(self._roots.items()):
                    if src == source:
                        del self._roots[root]
            try:
                self._observer.unschedule(watch)
            except Exception:  # already gone with its thread
                pass
        return dead

    @staticmethod
    def _describe(why: str) -> str:
        return f"directory tree too deep to watch ({why})" if why.startswith("RecursionError") else why

    def unwatch_all(self) -> None:
        self._observer.unschedule_all()
        with self._lock:
            self._roots.clear()
            self._watches.clear()
        self.errors.clear()

    def watched_sources(self) -> set[str]:
        with self._lock:
            return set(self._roots.values())

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        logging.getLogger("watchdog.observers.inotify_c").removeHandler(self._hook)
        if threading.excepthook == self._thread_died and self._prev_excepthook is not None:
            threading.excepthook = self._prev_excepthook
        self._observer.stop()
        self._observer.join(timeout=5)

    # -- events ---------------------------------------------------------------------------
    def _offer(self, source: str, path: str, is_dir: bool, delay: float) -> None:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if self.accepts(source, path, is_dir):
            self.queue.put(source, path, is_dir, delay)

    def _on_event(self, source: str, event) -> None:
        kind = event.event_type
        if kind in ("opened", "closed_no_write"):
            return
        if event.is_directory and kind in ("modified", "attrib", "closed"):
            return  # fires for every file created inside; the file events carry the news
        if kind == "moved":
            self._offer(source, event.src_path, event.is_directory, 0.0)
            self._offer(source, event.dest_path, event.is_directory, 0.0 if event.is_directory else SETTLE_SECONDS)
        elif kind == "deleted":
            self._offer(source, event.src_path, event.is_directory, 0.0)
        elif kind == "closed":
            self._offer(source, event.src_path, event.is_directory, SETTLE_SECONDS)
        elif kind == "created" and event.is_directory:
            self._offer(source, event.src_path, True, 0.0)
        else:  # created / modified / attrib of a file: wait for the burst (or the close) to settle
            self._offer(source, event.src_path, False, self.debounce_seconds)
