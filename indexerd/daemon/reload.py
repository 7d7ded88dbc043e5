"""The daemon's reload: SIGHUP or ``ctl reload`` re-reads the config in the main thread; a
refused config leaves the old one running; removed sources have their passes cancelled and are
forgotten before any new source's first pass (a renamed source shares its keys with its old name).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from indexerd.config import load_config
from indexerd.runtime import removal
from indexerd.core.errors import ConfigError, IndexerdError
from indexerd.core.plurals import counted
from indexerd.daemon import notify
from indexerd.extract import isolation
from indexerd.sources.registry import build_sources

if TYPE_CHECKING:
    from indexerd.daemon.main import Daemon

log = logging.getLogger(__name__)
UTC = timezone.utc

#: how long ``ctl reload`` waits for the main thread's reload (under the unit's 60 s start timeout)
RELOAD_WAIT_SECONDS = 50.0
#: How long (seconds) a reload waits for the cancelled pass of a removed source to end before it
#: forgets the source; a pass still running then forgets its source itself when it ends.
REMOVE_WAIT_SECONDS = 10.0


class Reloader:
    """Reloads of one daemon, and what ``ctl status`` says of the last one.

    Args:
        daemon: whose config, indexer, sources, states, jobs and live path a reload changes.

    :attr:`info` is the last reload's outcome: when (aware UTC), ok, error, how asked
    (``signal`` or ``ctl``), and when the config in use was loaded (guarded by the daemon's lock).
    """

    def __init__(self, daemon: Daemon) -> None:
        self.d = daemon
        self._waiters: list[tuple[threading.Event, dict]] = []
        self.info: dict = {"at": None, "ok": None, "error": None, "via": None, "loaded_at": daemon.started_at,
                           "pending_restart": []}
        #: what the last reload that succeeded could not apply (said to ``ctl reload``)
        self.warnings: list[str] = []
        #: the settings only a restart applies, as the daemon started with them
        self._at_start = _restart_only(daemon.cfg)

    def request(self) -> dict:
        """``ctl reload`` (a control thread): ask the main thread for a reload and wait for its
        outcome.

        Raises:
            ConfigError: the new config was refused (the old one stays; exit 2).
            IndexerdError: no outcome within :data:`RELOAD_WAIT_SECONDS`, or the daemon is stopping.
        """
        d = self.d
        done = threading.Event()
        slot: dict[str, Any] = {}
        with d.lock:
            self._waiters.append((done, slot))
        d.reload_event.set()
        if not done.wait(RELOAD_WAIT_SECONDS):
            raise IndexerdError(f"the reload did not finish within {RELOAD_WAIT_SECONDS:.0f} s")
        if slot.get("stopping"):
            raise IndexerdError("the daemon is stopping; the config was not reloaded")
        if slot["error"]:
            raise ConfigError(f"reload refused, still running on the old config: {slot['error']}")
        return {"config": d.config_path, "sources": len(d.sources), "warnings": slot.get("warnings", [])}

    def release_for_stop(self) -> None:
        """A stop: every ``ctl reload`` waiting gets its answer now instead of a timeout."""
        with self.d.lock:
            waiters, self._waiters = self._waiters, []
        for done, slot in waiters:
            slot["stopping"] = True
            done.set()

    def status(self) -> dict:
        """:attr:`info` with its times formatted (``ctl status`` "reload")."""
        from indexerd.core.dates import format_utc

        with self.d.lock:
            rl = dict(self.info)
        return {**rl, "at": format_utc(rl["at"]), "loaded_at": format_utc(rl["loaded_at"])}

    def run_now(self) -> None:
        """Run one reload in the main thread for a SIGHUP and every ``ctl reload`` waiting.

        A SIGHUP reload speaks systemd's reload protocol itself (``RELOADING=1`` ... ``READY=1``,
        sd_notify(3)); a ``ctl reload`` (the unit's ``ExecReload=``) does not: there systemd
        waits for that command, whose exit status tells ``systemctl reload`` the outcome.
        """
        d = self.d
        with d.lock:
            waiters, self._waiters = self._waiters, []
        signalled = not waiters
        if signalled:
            notify.reloading()
        error = self.reload()
        with d.lock:
            self.info = {**self.info, "at": datetime.now(UTC), "ok": error is None,
                         "error": error, "via": "signal" if signalled else "ctl"}
            if error is None:
                self.info["loaded_at"] = self.info["at"]
        if signalled:
            notify.ready(d.status_line())
        else:
            notify.status(d.status_line())
        for done, slot in waiters:
            slot["error"] = error
            slot["warnings"] = list(self.warnings)
            done.set()

    def reload(self) -> str | None:
        """Re-read the config; on any error keep the old one and return why (None: reloaded).
        What a reload that succeeded could not apply is in :attr:`warnings` (for ``ctl reload``)."""
        d = self.d
        try:
            new = load_config(d.config_path) if d.config_path else d.cfg
            new_sources = build_sources(new)
        except IndexerdError as e:
            log.error("reload refused, keeping the old config: %s", e)
            return str(e)
        old = d.sources
        removed = set(old) - set(new_sources)
        changed = {n for n, s in new_sources.items() if n not in old or old[n].cfg != s.cfg}
        self.warnings = []
        waiting = [name for name, (now, then) in zip(RESTART_ONLY, zip(_restart_only(new), self._at_start))
                   if now != then]
        if waiting:
            self.warnings.append(f"{_names(waiting)} changed: the daemon goes on with the settings it started "
                                 f"with until it is restarted (`systemctl restart indexerd`)")
            log.warning("reload: %s", self.warnings[-1])
        with d.lock:
            self.info["pending_restart"] = waiting
        d.cfg = new
        isolation.configure(isolation.Limits.from_config(new.extract))
        d.indexer.replace_sources(new, new_sources)
        still_running = self._end_passes_of(removed)
        try:  # before the new sources' first pass: a renamed source shares its keys with its old name
            removal.forget_sources(d.indexer.pipeline,
                                   [n for n in removal.removed_sources(d.indexer) if n not in still_running],
                                   cancel=d.stop_event)
        except IndexerdError as e:
            log.error("removing sources: %s; the rest is done at the next start", e)
        d.apply_sources(initial=False, changed=changed)
        log.info("reloaded %s: %s (%d new or changed, %d removed)", d.config_path,
                 counted(len(new_sources), "source"), len(changed), len(removed))
        return None

    def _end_passes_of(self, removed: set[str]) -> set[str]:
        """Cancel the running pass of each removed source and wait (at most
        :data:`REMOVE_WAIT_SECONDS` in all) until it has ended, so that nothing it writes can
        land after the source is forgotten.  A removed source's lock stays held: no later pass
        of it starts.  Returns the names whose pass had not ended in time (each forgets its
        source itself when it ends, see :meth:`Passes.forget_after_pass`)."""
        d = self.d
        by = time.monotonic() + REMOVE_WAIT_SECONDS
        ending = []
        with d.lock:
            for name in removed:
                st = d.states.pop(name, None)
                if st is not None:
                    st.removed = True
                    st.cancel.set()
                    ending.append((name, st))
        late = set()
        for name, st in ending:
            if st.lock.acquire(timeout=max(0.0, by - time.monotonic())):
                continue
            with d.lock:  # the pass reads forget_on_end under this lock after releasing its own
                if st.lock.acquire(blocking=False):
                    continue          # it ended just now: forgotten below, like the others
                st.forget_on_end = True
            late.add(name)
            log.warning("removed source %s: its pass is still running after %.0f s; it is forgotten "
                        "when that pass ends", name, REMOVE_WAIT_SECONDS)
        return late


#: The config tables only a restart applies: the index engine and its settings, the state dir,
#: the HTTP listener (its address, token and threads are bound when it starts).
RESTART_ONLY = ("[index]", "state_dir", "[http]")


def _restart_only(cfg) -> tuple:
    return (cfg.index, cfg.state_dir, cfg.http)


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]

