"""One source's pass in the daemon: under its lock, with its status, run record and metrics, and
what ``ctl ... --wait`` says about it afterwards.

A pass runs in a scheduler thread (the periodic job, ``ctl scan``, an overflow) or in a control
connection's thread (``ctl reindex``); each opens its own store connection (:meth:`Passes.pipeline`).
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from indexerd.sources.claims import STANDBY_SECONDS, Claim, claim_pass
from indexerd.core.errors import IndexerdError, IndexUnavailable, RetryLater, StoreError
from indexerd.runtime import removal
from indexerd.runtime.indexer import mark_pass_started
from indexerd.pipeline.stages import PassCounts, Pipeline
from indexerd.core.progress import Progress
from indexerd.sources.registry import kind

if TYPE_CHECKING:
    from indexerd.daemon.main import Daemon
    from indexerd.daemon.sourcestate import SourceState

log = logging.getLogger(__name__)
UTC = timezone.utc
#: Seconds a ``--wait`` request waits, the source's lock free, for the pass it queued to start.
RERUN_START_SECONDS = 10.0
#: Seconds a forced pass (``ctl reindex --source``) waits for the source's lock before it is
#: queued behind the pass holding it (forced all the same).
FORCED_LOCK_WAIT_SECONDS = 30.0


class PassFailed(IndexerdError):
    """A pass a control request waited for failed; the reply says why (exit 1)."""


class Passes:
    """Runs the passes of the daemon's sources.

    Args:
        daemon: the daemon whose sources, states, lock, stop event, jobs, live path and metrics
            a pass uses.
    """

    def __init__(self, daemon: Daemon) -> None:
        self.d = daemon

    @contextmanager
    def pipeline(self):
        """A :class:`Pipeline` on the daemon's writer with a store connection of this thread's own."""
        store = self.d.indexer.state.open_store()
        try:
            yield Pipeline(self.d.indexer.writer, store, self.d.indexer.counters)
        finally:
            store.close()

    def run(self, name: str, forced: bool = False, start: str | None = None, asked: bool = False,
            standby: bool = False) -> dict | None:
        """One pass of source ``name`` (the scheduled job, ``ctl scan``, overflow); returns its
        counts (:meth:`PassCounts.as_dict`), or None when the source is gone or another pass of
        it holds the lock (that one then runs again when it ends, unless this is a ``standby``
        call: a node asking again for a cluster pass, which the running one covers) or, in a
        cluster, another node runs it (``asked``: a request, not the schedule -- it runs even
        when another node completed a pass lately)."""
        d = self.d
        src = d.sources.get(name)
        st = d.states.get(name)
        if src is None or st is None:
            return None
        # a forced request waits for a running pass to end to run forced itself (in a cluster a
        # standby or join call may hold the lock a moment); past that it is queued, still forced
        if not st.lock.acquire(timeout=0.1 if not forced else FORCED_LOCK_WAIT_SECONDS):
            if standby and not asked:
                log.debug("%s: a pass is running here; the standby call is dropped", name)
                return None
            with d.lock:
                st.rerun = True  # the running pass starts another when it ends
                st.rerun_forced = st.rerun_forced or forced  # ... forced, whoever starts it
            log.info("%s: a pass is already running; another will follow it%s", name,
                     " (forced)" if forced else "")
            return None
        if st.removed:   # removed by a reload while this waited for the lock
            st.lock.release()
            return None
        with d.lock:
            forced = forced or st.rerun_forced  # a forced request queued behind the last pass
        if not forced and d.coverage.rebuild_pending(name):
            forced = True  # not a page, row or file may be skipped as unchanged: none is indexed
            log.info("%s: the index was rebuilt since its last pass: every document is read again", name)
        claim = self._claim(name, src, st, forced, asked)
        if not claim.run:
            st.lock.release()
            return None
        try:
            return self._run_claimed(name, src, st, forced, start, claim)
        finally:
            claim.release()  # released already unless the pass raised before it ended

    def _claim(self, name: str, src, st: SourceState, forced: bool, asked: bool) -> Claim:
        """In a cluster, whether this node runs the pass (:func:`~indexerd.sources.claims.claim_pass`);
        a node standing by for a pass another node runs asks again in a few seconds (still as a
        request when it was one: that pass may have started before the request)."""
        d = self.d
        if not d.indexer.state.shared:
            return Claim(True)
        node = d.indexer.node
        assert node is not None  # a shared store is opened with a node name
        try:
            shared = sum(1 for s in d.sources.values() if not (kind(s.kind).node_owned or kind(s.kind).pass_shared))
            claim = claim_pass(d.indexer.cluster_store, d.indexer.state.store_address, node, src,
                               forced=forced or asked, shared_sources=shared)
        except IndexerdError as e:
            claim = Claim(False, f"cannot reach the cluster's store: {e}", standby=True, error=True)
        with d.lock:
            changed = st.cluster_note != (claim.reason or None)
            st.cluster_note = claim.reason or None
            st.owned_elsewhere = not claim.run and claim.error and kind(src.kind).node_owned
        if not claim.run and changed:
            (log.warning if claim.error else log.info)("%s: not run on this node: %s", name, claim.reason)
        if claim.standby and not d.stop_event.is_set():
            d.jobs.run_later(name, claim.retry_in, asked=asked)
        return claim

    def _run_claimed(self, name: str, src, st: SourceState, forced: bool, start: str | None,
                     claim: Claim) -> dict | None:
        """The pass itself, under the source's lock (and in a cluster its claim)."""
        d = self.d
        counts = PassCounts()
        pass_error = None
        try:
            with d.lock:
                st.rerun = False  # this pass covers every request made before it started
                if forced:
                    st.rerun_forced = False
                st.passes_begun += 1
                st.current_number = st.passes_begun
                st.running, st.current = True, counts
                st.current_started = datetime.now(UTC)
                st.progress = Progress(name, tty=False, log_every_seconds=10, unit=kind(src.kind).unit,
                                       walk=kind(src.kind).walk)
            with self.pipeline() as pipeline:
                mark_pass_started(pipeline.store, name, src.kind, st.current_started, d.indexer.node)
                pipeline.urgent = False  # a pass commits about once a second, not per drain
                with d.lock:
                    recheck, st.recheck_asked = st.recheck_asked, False
                src.run_pass(pipeline, counts, progress=st.progress, forced=forced, start=start,
                             cancel=st.cancel, recheck=recheck)
                pipeline.flush(timeout=60)  # RetryLater: a write or commit of this pass failed
        except RetryLater as e:
            pass_error = f"index commit failed: {e}"
            log.error("%s: %s; what was not committed is retried", name, pass_error)
        except (StoreError, IndexUnavailable) as e:
            pass_error = f"{type(e).__name__}: {e}"
            if d.indexer.state.shared:  # the cluster's server unreachable now: tried again (2, 4, 8 ... s)
                log.error("%s: pass failed: %s; it is run again shortly", name, e)
                d.jobs.writer_failed({name})
            else:
                log.exception("%s: reconcile failed", name)
        except Exception as e:
            pass_error = f"{type(e).__name__}: {e}"
            log.exception("%s: reconcile failed", name)
        finally:
            if counts.left_to_others and not pass_error:
                self._left(name, st, claim, counts)
            else:
                self._ended(name, src, st, counts, pass_error or counts.failed, claim)  # raised, or the source says so
        if counts.left_to_others and not pass_error:
            return None
        if st.removed:
            log.info("%s: pass cancelled, the source was removed (%s)", name, st.last_counts)
            return st.last_counts
        by_reason = counts.reasons_text()
        log.info("%s: reconcile %s%s", name, st.last_counts, f"; skipped or failed: {by_reason}" if by_reason else "")
        d.live.rewatch_after_pass(name, src, st)
        return st.last_counts

    def _ended(self, name: str, src, st: SourceState, counts: PassCounts, pass_error: str | None,
               claim: Claim | None = None) -> None:
        """Record the pass that ended (status, run record, metrics), release the source's lock,
        then forget a source removed meanwhile or start the pass asked for meanwhile."""
        d = self.d
        started, finished = st.current_started, datetime.now(UTC)
        assert started is not None  # set when the pass began
        with d.lock:
            st.running, st.current = False, None
            st.last_started, st.last_finished = started, finished
            st.last_counts = st.last_part = counts.as_dict()
            st.pass_serial += 1
            st.last_number = st.current_number
            st.last_error = pass_error
            st.last_interrupted = d.stop_event.is_set()
            st.last_message = pass_error or counts.last_error
            if st.last_message:
                st.latest_error = (st.last_finished, st.last_message)
            rerun, st.rerun = st.rerun, False
        try:  # under the pass's lock: a reload removing the source forgets it after this
            if not (d.stop_event.is_set() or st.cancel.is_set()):  # interrupted: keeps its running mark
                with d.indexer.state.open_store() as store:
                    store.record_run(name, src.kind, st.last_started, st.last_finished, st.last_counts,
                                     completed=not pass_error)
        except IndexerdError as e:
            log.error("%s", e)
        d.metrics.observe_pass(name, src.kind, (finished - started).total_seconds(),
                               ok=not pass_error, ended_at=finished.timestamp())
        if claim is not None:
            claim.release()  # the run record is written: another node may take the source now
        st.lock.release()
        with d.lock:
            forget_now, st.forget_on_end = st.forget_on_end, False
        if forget_now:
            self.forget_after_pass(name)
        if rerun and not d.stop_event.is_set() and not st.removed:
            log.info("%s: another reconcile was requested during this one; running it now", name)
            d.jobs.run_soon({name})
        elif d.indexer.state.shared and not d.stop_event.is_set() and not st.removed:
            d.jobs.join_if_running(name)  # the next pass, begun on another node as this one ended

    def _left(self, name: str, st: SourceState, claim: Claim | None, counts: PassCounts) -> None:
        """This node's part in a web pass the cluster crawls together ended while the pass goes
        on elsewhere (nothing was left for it): no pass ended here, so no run record, status or
        metric changes (a ``--wait`` request gets ``counts``, this node's part); the node comes
        back in :data:`~indexerd.sources.claims.STANDBY_SECONDS` for what the pass may have for it
        then."""
        d = self.d
        with d.lock:
            st.running, st.current = False, None
            st.last_part = counts.as_dict()
            st.pass_serial += 1
            st.last_number = st.current_number
            rerun, st.rerun = st.rerun, False
        if claim is not None:
            claim.release()
        st.lock.release()
        if not d.stop_event.is_set() and not st.removed:
            if rerun:
                d.jobs.run_soon({name})
            else:
                d.jobs.run_later(name, STANDBY_SECONDS)

    def forget_after_pass(self, name: str) -> None:
        """Forget source ``name``, removed by a reload while its pass ran longer than
        :data:`~indexerd.daemon.reload.REMOVE_WAIT_SECONDS` (that pass's thread, after it ended)."""
        if name in self.d.sources:     # added again since: its new passes keep what they index
            return
        try:
            with self.pipeline() as pipeline:
                removal.forget_sources(pipeline, [name], cancel=self.d.stop_event)
        except IndexerdError as e:
            log.error("removing source %s: %s; the rest is done at the next start", name, e)

    def wait(self, name: str, forced: bool = False, fresh: bool = False) -> dict | None:
        """Run a pass of ``name`` now (``forced``: ``ctl reindex --source``) and return its
        counts (in a cluster: this node's part of
        the pass); when another pass of it holds the lock, wait for that one and return its
        counts instead -- or, when what held the lock ran no pass (a cluster node's standby
        call), for the pass the request queued behind it (never the counts of an older pass).
        A request the running pass does not cover -- ``forced``, or ``fresh`` (``ctl crawl
        --all``: the running pass may have begun before it was asked) -- waits for the pass
        queued behind the running one (forced when it is) and returns that pass's counts.

        Raises:
            PassFailed: in a cluster, this node was not to run it (another node runs it).
        """
        d = self.d
        st = d.states.get(name)
        serial = st.pass_serial if st is not None else 0
        begun = st.passes_begun if st is not None else 0
        counts = self.run(name, forced=forced, asked=True)
        st = d.states.get(name)
        if counts is not None or st is None:
            return counts
        own = forced or fresh  # only a pass begun after this request answers it

        def ended() -> bool:
            return st.last_number > begun if own else st.pass_serial != serial

        if ended():  # this node's part of a cluster pass, left to the others
            return st.last_part
        if st.cluster_note and d.indexer.state.shared:
            raise PassFailed(f"{name}: not run on this node: {st.cluster_note}")
        idle_since = time.monotonic()
        while not ended() and time.monotonic() - idle_since < RERUN_START_SECONDS:
            st.lock.acquire()  # another pass (or a standby call) holds the lock: wait for it
            st.lock.release()
            if not ended():
                if st.running:
                    idle_since = time.monotonic()
                time.sleep(0.1)  # the pass the request queued (``rerun``) starts in a moment
        return st.last_part if ended() else st.last_counts

    def raise_if_failed(self, names) -> None:
        """A ``--wait`` reply must not claim what was not committed or not done: fail naming each
        source whose pass failed (commit failed, root missing, statement failed, no site
        reachable) or was interrupted by the daemon's stop.

        Raises:
            PassFailed: exit code 1.
        """
        states = self.d.states
        cut = [n for n in names if n in states and states[n].last_interrupted]
        if cut:
            raise PassFailed("; ".join(f"the pass of {n} was interrupted: the daemon is stopping (its "
                                       f"counts are what was done before the stop; a web crawl resumes "
                                       f"at the next start, a forced one still forced)" for n in cut))
        failed = {n: states[n].last_error for n in names if n in states and states[n].last_error}
        if failed:
            raise PassFailed("; ".join(f"the pass of {n} failed: {why} (its counts are what was read, not "
                                       f"what is searchable; it is retried)" for n, why in failed.items()))
