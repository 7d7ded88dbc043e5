"""Faults (issue 7): the daemon killed with SIGKILL at random moments of a burst of changes, a
full state dir, a read-only state dir, and a one-shot ``indexerd index`` on a full disk.

The daemon runs through :class:`test_daemon.DaemonUnderTest` (its config, start, kill9, log and
``ctl`` helpers).  Polling loops ask the daemon through :func:`indexerd.daemon.control.request` in
process (the same JSON request ``indexerd ctl status`` sends): a CLI subprocess every 50 ms would
steal the CPU the daemon needs on a 2-core machine.  What is compared with the disk is read from
the index files themselves (:mod:`indexerd.index`, readers take no lock) -- every live
document, so a key indexed twice shows -- and from ``indexerd ctl search --json``.

The state dir of the disk-full and read-only cases is a small tmpfs (root only: mount); the
read-only case runs the daemon as ``nobody`` (``setpriv``) so that a ``chmod 0555`` denies
something (a tmpfs cannot be remounted read-only while the daemon holds files open for writing:
EBUSY).  Each skips with the precise reason when that is impossible.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

import pytest
from test_daemon import ENV, REPO, DaemonUnderTest, write

from indexerd.daemon.control import request
from indexerd.core.filekeys import path_to_key
from indexerd.index import open_index


SEED = int(os.environ.get("INDEXERD_FAULT_SEED", "20240107"))
KILLS = 20
NOBODY = 65534


# -- helpers ----------------------------------------------------------------------------------
def index_docs(state_dir: Path) -> list[tuple[str, str]]:
    """(key, stored text) of every live document in the index on disk, duplicates included.
    Opening it is itself a check: a corrupt index raises IndexUnavailable."""
    ix = open_index(state_dir, create=False)
    try:
        with ix._ix.reader() as r:
            return [(d["key"], zlib.decompress(d["text_z"]).decode("utf-8", "replace").strip())
                    for d in r.all_stored_fields()]
    finally:
        ix.close()


def live_docs(state_dir: Path) -> list[tuple[str, str | None]]:
    """(key, text) of every live document in the index on disk through the engine-neutral
    protocol, duplicates included: the keys as :meth:`~indexerd.index.SearchIndex.keys` streams
    them, each text as the snippet of a search for ``burstword`` (every file of the burst is one
    short line holding it, so the snippet is the whole line; None for a document it misses)."""
    ix = open_index(state_dir, create=False)
    try:
        keys = [k for k, _ in ix.keys()]
        texts = {h.key: h.snippet.strip() for h in ix.search("burstword", limit=len(keys) + 10)}
        return [(k, texts.get(k)) for k in keys]
    finally:
        ix.close()


def docs_of(d: DaemonUnderTest, state_dir: Path) -> list[tuple[str, str | None]]:
    """The index's documents as exactly as the daemon's engine lets a test read them: Whoosh's
    stored text itself (:func:`index_docs`), else :func:`live_docs` (burst files only)."""
    return index_docs(state_dir) if d.engine == "whoosh" else live_docs(state_dir)


def disk_docs(root: Path) -> dict[str, str]:
    """{key: text} of every (non-excluded) file under ``root``."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if f.endswith(".tmp"):
                continue
            p = os.path.join(dirpath, f)
            try:
                out[path_to_key(p)] = Path(p).read_text().strip()
            except FileNotFoundError:
                pass
    return out


def store_rows(state_dir: Path) -> dict[str, str]:
    from indexerd.core.store import open_store_in_dir

    with open_store_in_dir(state_dir, readonly=True) as st:
        return {r.key: r.status for r in st.iter_records()}


def status(d: DaemonUnderTest) -> dict:
    return request(d.sock, {"cmd": "status"}, timeout=10)


def start_and_wait(d: DaemonUnderTest, timeout: float = 30.0) -> dict:
    """Start the daemon and wait until it answers and its start-up reconcile finished (as
    DaemonUnderTest.wait_ready, polling in process instead of a CLI run every 50 ms)."""
    d.start(wait=False)

    def ready():
        d.assert_alive()
        try:
            st = status(d)
        except Exception:  # noqa: BLE001 - not listening yet, or the stale socket of the last run
            return None
        return st if st["sources"]["docs"]["last_run"]["finished"] else None

    return wait_for(ready, timeout, "daemon ready", interval=0.02)


def scan_wait(d: DaemonUnderTest) -> dict:
    """What ``indexerd ctl scan docs --wait`` sends, in process."""
    return request(d.sock, {"cmd": "scan", "source": "docs", "wait": True}, timeout=60)["counts"]


def wait_for(fn, timeout: float, what: str, interval: float = 0.05):
    """Poll ``fn`` until it returns a truthy value; return it, or fail with the last value."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"{what}: not within {timeout} s (last: {str(last)[:1500]})", pytrace=False)


def compare(d: DaemonUnderTest, state: Path, root: Path) -> str | None:
    """None when the index and the store hold exactly the files on disk (no key twice), else why."""
    disk = disk_docs(root)
    docs = docs_of(d, state)
    keys = [k for k, _ in docs]
    dups = sorted({k for k in keys if keys.count(k) > 1})
    if dups:
        return f"keys indexed twice: {dups}"
    got = dict(docs)
    if got != disk:
        extra = sorted(set(got) - set(disk))
        missing = sorted(set(disk) - set(got))
        stale = sorted(k for k in set(got) & set(disk) if got[k] != disk[k])
        return f"index != disk: extra {extra[:5]}, missing {missing[:5]}, stale text {stale[:5]}"
    rows = store_rows(state)
    if set(rows) != set(disk) or set(rows.values()) - {"indexed"}:
        return f"store != disk: {sorted(set(rows) ^ set(disk))[:5]}, statuses {sorted(set(rows.values()))}"
    return None


def wait_caught_up(d: DaemonUnderTest, state: Path, what: str, timeout: float = 10.0) -> None:
    """Poll :func:`compare` until the index and the store equal the disk; fail with the last
    difference."""
    deadline = time.monotonic() + timeout
    while (why := compare(d, state, d.root)) is not None:
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout} s: {why}", pytrace=False)
        time.sleep(0.05)


# -- 1. kill -9 at random moments of a burst ---------------------------------------------------
class Burst:
    """A thread making random changes in ``root`` (seeded): create, edit, atomic save (temp file
    renamed over), delete, rename (also into another directory) and directory renames.  Every
    file holds one line ``w<serial> burstword``.  :meth:`pause` returns once no change is
    half-done."""

    def __init__(self, root: Path, rng: random.Random, max_files: int = 120) -> None:
        self.root, self.rng, self.max_files = root, rng, max_files
        self.serial = 0
        self.ops = 0
        self._go = threading.Event()
        self._stop = False
        self._busy = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="burst", daemon=True)
        self.error: BaseException | None = None
        self.dirs = ["", "d0", "d1", "d1/deep"]
        for sub in self.dirs[1:]:
            (root / sub).mkdir(parents=True, exist_ok=True)
        self._thread.start()

    def files(self) -> list[Path]:
        return [Path(dp) / f for dp, _, fs in os.walk(self.root) for f in fs if not f.endswith(".tmp")]

    def _text(self) -> str:
        self.serial += 1
        return f"w{self.serial:06d} burstword\n"

    def _new_path(self) -> Path:
        sub = self.rng.choice([d for d in self.dirs if (self.root / d).is_dir()] or [""])
        self.serial += 1
        return self.root / sub / f"f{self.serial:06d}.txt"

    def step(self) -> None:
        files = self.files()
        r = self.rng.random()
        if not files or (r < 0.35 and len(files) < self.max_files):
            write(self._new_path(), self._text())
            return
        f = self.rng.choice(files)
        if r < 0.55:
            write(f, self._text())                          # edit in place
        elif r < 0.65:
            tmp = f.with_name(f.name + ".tmp")               # atomic save
            write(tmp, self._text())
            os.replace(tmp, f)
        elif r < 0.80:
            f.unlink()
        elif r < 0.97:
            dst = self._new_path()
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.rename(f, dst)
        else:                                               # rename a directory inside the tree
            src = self.root / "d1"
            if src.is_dir():
                os.rename(src, self.root / "d1x")
                self.dirs = ["", "d0", "d1x", "d1x/deep"]
            elif (self.root / "d1x").is_dir():
                os.rename(self.root / "d1x", src)
                self.dirs = ["", "d0", "d1", "d1/deep"]

    def _run(self) -> None:
        while not self._stop:
            if not self._go.wait(0.1):
                continue
            with self._busy:
                if not self._go.is_set():
                    continue
                try:
                    self.step()
                    self.ops += 1
                except BaseException as e:  # noqa: BLE001 - reported by the test
                    self.error = e
                    self._stop = True
                    return
            time.sleep(0.002)

    def resume(self) -> None:
        self._go.set()

    def pause(self) -> None:
        self._go.clear()
        with self._busy:
            pass
        if self.error:
            raise self.error

    def stop(self) -> None:
        self._stop = True
        self._go.clear()
        self._thread.join(5)


@pytest.fixture
def base():
    d = Path(tempfile.mkdtemp(prefix="ixf"))   # short: AF_UNIX paths max out at 107 bytes
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def daemons(request, capsys):
    """Daemons a test starts; at teardown each is stopped if still running, and its log tail is
    printed when the test failed (as test_daemon's ``daemon`` fixture does)."""
    failed_before = request.session.testsfailed
    started: list[DaemonUnderTest] = []
    yield started
    for d in started:
        if d.alive():
            d.kill9()
    if request.session.testsfailed > failed_before:
        with capsys.disabled():
            for d in started:
                print(f"\n--- daemon log of {request.node.name} (tail) ---\n{d.log_tail(120)}")


@pytest.mark.slow
@pytest.mark.parametrize(("engine", "kills"), [("whoosh", KILLS), ("tantivy", 6), ("postgresql", 6),
                                               ("postgresql+store", 6)])
def test_kill9_at_random_moments_of_a_burst(base, daemons, engine, kills) -> None:
    """20 SIGKILLs on the default engine, 6 on the others (the same seed), and 6 with the state
    store on PostgreSQL too (``postgresql+store``: a one-node cluster), each 0.05-1.0 s after
    the burst resumed; every other one also right after a fresh start (so some land in the
    start-up reconcile).  After each: the index opens and holds no key twice; the restart is not
    blocked by a stale lock or socket; once caught up (``ctl scan --wait``, then polling) the index
    and the store hold exactly the files on disk with their current text, and ``ctl search``
    finds each once."""
    rng = random.Random(SEED)
    d = DaemonUnderTest(base, engine)
    daemons.append(d)
    state = base / "state"
    for i in range(20):
        write(d.root / f"seed{i:02d}.txt", f"s{i:02d} burstword\n")
    burst = Burst(d.root, rng)
    moments = []
    try:
        start_and_wait(d)
        for kill in range(kills):
            fresh = kill % 2 == 1
            if fresh:
                d.kill9()             # idle, just verified: an extra kill that changes nothing
                d.start(wait=False)   # the next kill may land in imports, the lock, the start-up reconcile
            burst.resume()
            delay = rng.uniform(0.05, 1.0)
            moments.append(round(delay, 3))
            time.sleep(delay)
            d.kill9()
            burst.pause()
            where = (f"{engine}: seed {SEED} (INDEXERD_FAULT_SEED), kill {kill + 1}/{kills} at {delay:.3f} s "
                     f"after {'a fresh start' if fresh else 'the burst resumed'}, {burst.ops} changes so far")
            # the index left behind opens and holds no key twice
            keys = [k for k, _ in docs_of(d, state)]
            assert len(keys) == len(set(keys)), f"{where}: a key twice in the index right after the kill"
            # no stale lock or socket blocks the restart
            start_and_wait(d)
            assert "in use" not in d.log_tail(20), where
            real_cli = kill % 10 == 9 or kill == kills - 1
            if real_cli:          # the real CLI now and then; in process (same request) otherwise
                out = json.loads(d.ctl_ok("scan", "docs", "--wait"))
            else:
                out = scan_wait(d)
            assert out["errors"] == 0, (where, out)
            wait_caught_up(d, state, f"{where}: index == disk after catching up")
            if real_cli:
                hits = [h["key"] for h in d.search("burstword", limit=1000)]
                assert len(hits) == len(set(hits)), f"{where}: ctl search returns a key twice"
                assert set(hits) == set(disk_docs(d.root)), f"{where}: ctl search != files on disk"
        assert burst.ops > 5 * kills, f"seed {SEED}: the burst made only {burst.ops} changes"
        assert "Traceback" not in d.log(), f"seed {SEED}: {d.log_tail()}"
        d.stop()
    finally:
        burst.stop()
        if d.alive():
            d.kill9()
    print(f"seed {SEED}: kill moments {moments}, {burst.ops} changes")


# -- 2. disk full / read-only state dir --------------------------------------------------------
def _mount_tmpfs(path: Path, size: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs for the state dir needs root")
    path.mkdir(exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                       check=False, capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def fill(path: Path) -> Path:
    """Write zeros to ``path/filler`` until the file system is full (ENOSPC)."""
    filler = path / "filler"
    chunk = b"\0" * 65536
    with open(filler, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(chunk)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    with open(filler, "ab", buffering=0) as fh:   # the last partial page
        try:
            while True:
                fh.write(b"\0" * 512)
        except OSError:
            pass
    return filler


@pytest.fixture
def tmpfs_state(base):
    state = base / "state"
    _mount_tmpfs(state, "3m")
    try:
        yield state
    finally:
        _umount(state)


def _writer_error(d: DaemonUnderTest):
    st = status(d)
    return st if st["writer"]["last_error"] else None


@pytest.mark.slow
def test_state_dir_full_while_changes_are_pending_then_space_returns(base, tmpfs_state, daemons) -> None:
    """The state dir's file system fills up while the daemon runs: edits, new files and a
    deletion cannot be committed.  The daemon stays up, ``ctl status`` shows the writer error,
    the log says it, searches keep answering from the last good index; once the filler is gone a
    reconcile makes every file searchable and the index is sound."""
    d = DaemonUnderTest(base)
    daemons.append(d)
    for i in range(5):
        write(d.root / f"old{i}.txt", f"oldword o{i}\n")
    try:
        d.start()
        d.wait_hits("oldword", 5)
        filler = fill(tmpfs_state)
        write(d.root / "old0.txt", "oldword o0 editedfull\n")
        for i in range(20):
            write(d.root / "new" / f"n{i:02d}.txt", f"fullword n{i:02d} " + "padding " * 200 + "\n")
        os.unlink(d.root / "old4.txt")
        st = wait_for(lambda: _writer_error(d), 10.0, "a writer error in ctl status")
        assert "No space left on device" in st["writer"]["last_error"], st["writer"]
        d.assert_alive()
        assert "No space left on device" in d.log()
        p = d.ctl("status")                     # the text form shows it too
        assert p.returncode == 0 and "writer error:" in p.stdout and "No space left" in p.stdout, p.stdout
        assert len(d.search("oldword")) >= 4    # the last committed index still answers
        index_docs(tmpfs_state)                 # and opens from disk

        os.unlink(filler)
        out = json.loads(d.ctl_ok("scan", "docs", "--wait"))
        assert out["errors"] == 0, out
        wait_caught_up(d, tmpfs_state, "index == disk after the space returned")
        assert len(d.search("fullword", limit=100)) == 20
        assert [h["key"] for h in d.search("editedfull")] == [d.key(d.root / "old0.txt")]
        d.assert_alive()
        d.stop()
    finally:
        if d.alive():
            d.kill9()


@pytest.mark.slow
def test_state_dir_full_live_changes_are_retried_without_a_manual_scan(base, tmpfs_state, daemons) -> None:
    """Same as above, but nobody runs ``ctl scan``: once space returns, the daemon itself must
    get the pending changes in (README: an edit is searchable in about 0.1 s)."""
    d = DaemonUnderTest(base)
    daemons.append(d)
    write(d.root / "old.txt", "oldword\n")
    try:
        d.start()
        filler = fill(tmpfs_state)
        for i in range(5):
            write(d.root / f"n{i}.txt", f"fullword n{i}\n")
        wait_for(lambda: _writer_error(d), 10.0, "a writer error in ctl status")
        os.unlink(filler)
        time.sleep(0.5)
        write(d.root / "after.txt", "afterword\n")   # a later change commits fine...
        d.wait_hits("afterword", 1)
        d.settle()
        # ...and the ones from the full disk must be searchable by now as well
        d.poll(lambda: d.search("fullword"), lambda h: len(h) == 5, 3.0, "changes made while full")
    finally:
        if d.alive():
            d.stop()


# -- 3. a read-only state dir (the daemon as nobody) -------------------------------------------
def _setpriv_prefix(cwd: Path) -> list[str]:
    """``setpriv`` to nobody, when running as root and nobody can import indexerd from here."""
    prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    if os.geteuid() != 0:
        return []           # already unprivileged: chmod denies for us
    if not shutil.which("setpriv"):
        pytest.skip("running as root (chmod denies nothing) and setpriv is not installed")
    p = subprocess.run([*prefix, sys.executable, "-c", "import indexerd.cli.main, whoosh, watchdog"],
                       check=False, capture_output=True, text=True, cwd=cwd, env=ENV, timeout=60)
    if p.returncode != 0:
        pytest.skip(f"running as root and nobody cannot run the venv's python ({sys.executable}): "
                    f"{p.stderr.strip()[-300:]}")
    return prefix


class NobodyDaemon(DaemonUnderTest):
    """The daemon run as ``nobody`` (root only); everything else as in DaemonUnderTest."""

    def __init__(self, base: Path, prefix: list[str]) -> None:
        super().__init__(base)
        self.prefix = prefix

    def start(self, sources: tuple[str, ...] = ("docs",), wait: bool = True) -> None:
        self._log_fh = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [*self.prefix, sys.executable, "-m", "indexerd.cli.main", "run", "-c", str(self.cfg), "--log-level", "info"],
            stdout=self._log_fh, stderr=subprocess.STDOUT, env=ENV, cwd=REPO)
        if wait:
            self.wait_ready(sources)


def _nobody_daemon(base: Path, daemons: list) -> tuple[NobodyDaemon, Path]:
    prefix = _setpriv_prefix(REPO)
    os.chmod(base, 0o755)
    d = NobodyDaemon(base, prefix)
    daemons.append(d)
    state = base / "state"
    write(d.root / "old.txt", "oldword\n")
    state.mkdir()
    if prefix:
        for p in (base, state, d.root):
            os.chown(p, NOBODY, NOBODY)
    return d, state


def _read_only_phase(d: NobodyDaemon, state: Path) -> None:
    """Start the daemon, make the state dir and its index dir read-only (0555), change six files;
    the daemon must say so and stay up, and searches answer from the last commit."""
    d.start()
    d.wait_hits("oldword", 1)
    os.chmod(state / "index", 0o555)
    os.chmod(state, 0o555)
    for i in range(5):
        write(d.root / f"ro{i}.txt", f"roword r{i}\n")
    write(d.root / "old.txt", "oldword editedro\n")
    st = wait_for(lambda: _writer_error(d), 10.0, "a writer error in ctl status")
    assert "Permission denied" in st["writer"]["last_error"], st["writer"]
    assert "Permission denied" in d.log()
    d.assert_alive()
    assert len(d.search("oldword")) == 1 and d.search("roword") == []
    index_docs(state)   # the index on disk still opens


def _writable_again(state: Path) -> None:
    os.chmod(state, 0o750)
    os.chmod(state / "index", 0o755)


def _assert_caught_up(d: DaemonUnderTest, state: Path) -> None:
    out = json.loads(d.ctl_ok("scan", "docs", "--wait"))
    assert out["errors"] == 0, out
    wait_caught_up(d, state, "index == disk")
    assert len(d.search("roword")) == 5
    assert len(d.search("editedro")) == 1


@pytest.mark.slow
def test_state_dir_read_only_while_the_daemon_runs_then_restart(base, daemons) -> None:
    """``chmod 0555`` on the state dir and its index dir under a running daemon (as nobody):
    it reports EACCES in ``ctl status`` and the log and stays up; writable again and restarted
    (kill -9: see the next test for why a SIGTERM is slow here), it gets every file in."""
    d, state = _nobody_daemon(base, daemons)
    _read_only_phase(d, state)
    _writable_again(state)
    d.kill9()
    d.start()
    _assert_caught_up(d, state)
    d.stop()



@pytest.mark.slow
def test_state_dir_read_only_then_writable_resumes_without_restart(base, daemons) -> None:
    """As above, but the daemon keeps running: once the state dir is writable again, a new edit
    is searchable within seconds, and a ``ctl scan`` gets the rest in."""
    d, state = _nobody_daemon(base, daemons)
    _read_only_phase(d, state)
    _writable_again(state)
    write(d.root / "after.txt", "afterword\n")
    d.wait_hits("afterword", 1, timeout=5.0)   # 15 s was not enough either in 3 of 3 runs
    _assert_caught_up(d, state)
    d.stop()


def test_oneshot_index_with_a_read_only_index_dir_does_not_claim_success(base) -> None:
    """As nobody: index a tree, make ``state/index`` read-only, add a file, index again.  The run
    must not say the new file was indexed (it cannot be searched); exit 1 like a failed commit."""
    from conftest import CLI

    prefix = _setpriv_prefix(REPO)
    os.chmod(base, 0o755)
    root, state = base / "root", base / "state"
    write(root / "good.txt", "keeper\n")
    state.mkdir()
    if prefix:
        for p in (base, state, root):
            os.chown(p, NOBODY, NOBODY)
    env = CLI(state).env

    def index():
        return subprocess.run([*prefix, sys.executable, "-m", "indexerd.cli.main", "index", "--json", str(root)],
                              check=False, capture_output=True, text=True, env=env, cwd=REPO, timeout=60)

    assert index().returncode == 0
    os.chmod(state / "index", 0o555)
    write(root / "new.txt", "newword\n")
    p = index()
    os.chmod(state / "index", 0o755)
    assert CLI(state).search("newword") == []          # it really is not searchable...
    assert "Permission denied" in p.stderr, p.stderr
    claimed = json.loads(p.stdout)["indexed"] if p.returncode == 0 else 0
    assert p.returncode == 1 and claimed == 0, (p.returncode, p.stdout)   # ...so do not say it is


# -- 4. one-shot ``indexerd index`` on a full state dir ----------------------------------------
def _oneshot_full(base: Path, state: Path, free_kb: int):
    """Index a tree, fill the state dir's tmpfs up to ``free_kb`` KiB, add 20 files, and run
    ``indexerd index`` once more.  Returns (cli, root, filler, completed process)."""
    from conftest import CLI

    root = base / "root"
    write(root / "good.txt", "keeper document\n")
    c = CLI(state)
    s = c.index(str(root))
    assert s["indexed"] == 1
    filler = fill(state)
    if free_kb:
        os.truncate(filler, os.path.getsize(filler) - free_kb * 1024)
    for i in range(20):
        write(root / f"n{i:02d}.txt", f"fresh n{i:02d} " + " ".join(f"pad{j}" for j in range(3000)) + "\n")
    p = c.run("index", "--json", str(root), check=False, timeout=60)
    return c, root, filler, p


def test_oneshot_index_on_a_full_state_dir_fails_cleanly_and_keeps_the_old_index(base, tmpfs_state) -> None:
    c, root, filler, p = _oneshot_full(base, tmpfs_state, free_kb=256)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr[-2000:])
    assert "No space left on device" in p.stderr
    assert "Traceback" not in p.stderr
    assert p.stdout == ""
    # the previous index is intact and still answers
    assert [h["path"] for h in c.search("keeper")] == [str(root / "good.txt")]
    assert c.search("fresh") == []
    index_docs(tmpfs_state)
    # space returns: the next run indexes everything, and the index is sound
    os.unlink(filler)
    s = c.index(str(root))
    assert (s["seen"], s["indexed"], s["unchanged"], s["errors"]) == (21, 20, 1, 0), s
    assert len(c.search("fresh", "--limit", "50")) == 20
    docs = index_docs(tmpfs_state)
    assert sorted(k for k, _ in docs) == sorted(disk_docs(root))


def test_oneshot_index_on_a_full_state_dir_names_it(base, tmpfs_state) -> None:
    _c, _root, _filler, p = _oneshot_full(base, tmpfs_state, free_kb=256)
    assert p.returncode == 1 and "No space left on device" in p.stderr
    assert str(tmpfs_state) in p.stderr, p.stderr[-1000:]


def test_oneshot_index_on_a_state_dir_full_to_the_last_byte(base, tmpfs_state) -> None:
    _c, _root, _filler, p = _oneshot_full(base, tmpfs_state, free_kb=0)
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    assert str(tmpfs_state) in p.stderr and "No space left on device" in p.stderr, p.stderr[-1000:]


@pytest.mark.slow
def test_full_state_dir_is_logged_once_scan_wait_fails_and_no_temp_toc_is_left(base, tmpfs_state, daemons) -> None:
    """Issue 18: on a full disk the log repeated one line per document, ``ctl scan --wait`` said
    "indexed 50, errors 0" with nothing searchable, and every failed commit left a
    ``_MAIN_N.toc.<time>`` file.  Now: the failure episode is logged once with a count, the
    ``--wait`` reply fails naming the commit failure, no temp TOC stays, and all recovers."""
    d = DaemonUnderTest(base)
    daemons.append(d)
    write(d.root / "old.txt", "oldword\n")
    d.start()
    filler = fill(tmpfs_state)
    n = 40
    for i in range(n):
        write(d.root / f"n{i:02d}.txt", f"fullword n{i:02d} " + "padding " * 200 + "\n")
    wait_for(lambda: _writer_error(d), 10.0, "a writer error in ctl status")
    p = d.ctl("scan", "docs", "--wait")
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert "the pass of docs failed" in p.stderr and "No space left on device" in p.stderr, p.stderr
    time.sleep(2.0)
    lines = [line for line in d.log().splitlines() if "No space left on device" in line]
    assert 1 <= len(lines) <= 8, "\n".join(lines)            # not one per document (40)
    # a write that failed inside a document left Whoosh's writer in it: every later document
    # then failed with "Called start_doc when already in a doc", one ERROR line each
    writer_lines = [line for line in d.log().splitlines() if "indexerd.pipeline.writer" in line and
                    ("ERROR" in line or "WARNING" in line)]
    assert len(writer_lines) <= 8 and not any("already in a doc" in line for line in writer_lines), \
        "\n".join(writer_lines)
    temps = [name for name in os.listdir(tmpfs_state / "index") if ".toc." in name]
    assert temps == [], temps
    os.unlink(filler)
    out = json.loads(d.ctl_ok("scan", "docs", "--wait"))
    assert out["errors"] == 0, out
    wait_caught_up(d, tmpfs_state, "index == disk after the space returned")
    assert len(d.search("fullword", limit=100)) == n
    assert "index writes work again" in d.log()
    d.stop()
