"""Helpers for bench/run_all.py: timing with process-tree peak RSS, deterministic 1% edits,
and the two engines (indexerd, Recoll) behind one small interface.

Nothing here imports from outside the repository; the Recoll configuration is the one of the
peer harness (noaspell, textunknownasplain, everything else default).
"""
from __future__ import annotations

import json, os, random, shutil, statistics, subprocess, sys, tempfile, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PY = sys.executable


# ---------------------------------------------------------------- measurement

def _children(pid: int) -> list[int]:
    out = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                out += [int(x) for x in open(f"/proc/{pid}/task/{t}/children").read().split()]
            except OSError:
                pass
    except OSError:
        pass
    return out


def _tree_mem_kb(pid: int) -> tuple[int, int]:
    """(RSS of the root process + private memory (USS) of each descendant, plain sum of RSS) over
    the process tree, in KiB. Counting only the descendants' private pages keeps a fork that has not
    exec'ed yet (Recoll forks its 400 MB indexer for every xdg-mime call) from counting the parent
    twice; summing PSS did not, because parent and child are read at different instants."""
    tree = rss = 0
    stack = [(pid, True)]
    while stack:
        p, root = stack.pop()
        try:
            f = {}
            for line in open(f"/proc/{p}/smaps_rollup"):
                k, _, v = line.partition(":")
                if k in ("Rss", "Private_Clean", "Private_Dirty"):
                    f[k] = int(v.split()[0])
        except OSError:
            continue
        rss += f.get("Rss", 0)
        tree += f.get("Rss", 0) if root else f.get("Private_Clean", 0) + f.get("Private_Dirty", 0)
        stack += [(c, False) for c in _children(p)]
    return tree, rss


def measure(cmd: list[str], env=None, cwd=None, poll=0.05, memory: bool = True) -> dict:
    """Run cmd; wall time, peak memory of the whole process tree (root RSS + descendants' private
    memory, polled every `poll` s), the largest single process's max RSS (rusage), cpu, stdout.
    ``memory=False``: no polling (the wall of a polled run is only known to within `poll`; a
    command of a fraction of a second is timed without it), the tree's peaks left 0."""
    out = tempfile.TemporaryFile(); err = tempfile.TemporaryFile()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=err)
    peak = peak_rss = 0
    while True:
        pid, status, ru = os.wait4(p.pid, 0 if not memory else os.WNOHANG)
        if pid:
            break
        a, b = _tree_mem_kb(p.pid)
        peak, peak_rss = max(peak, a), max(peak_rss, b)
        time.sleep(poll)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0); err.seek(0)
    so, se = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    return {"wall": wall, "peak_rss_mb": peak / 1024, "tree_rss_sum_mb": peak_rss / 1024,
            "maxrss_one_mb": ru.ru_maxrss / 1024, "cpu": ru.ru_utime + ru.ru_stime,
            "rc": p.returncode, "stdout": so, "stderr": se}


def daemon_status(sock: str, timeout: float = 10.0) -> dict:
    """A running daemon's ``ctl status`` reply (its control socket ``sock``), as a dict.

    Raises:
        OSError: nobody answers on ``sock``; ValueError: the reply is not JSON."""
    import socket

    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    try:
        s.connect(sock)
        s.sendall(b'{"cmd": "status"}\n')
        buf = b""
        while not buf.endswith(b"\n"):
            c = s.recv(1 << 20)
            if not c:
                break
            buf += c
    finally:
        s.close()
    return json.loads(buf)


def layout_head(state_dir: Path, layout: str, pg_url: str | None, tag: str) -> str:
    """The head of a bench config: ``state_dir``, quiet logs, and where state and index live:
    ``pg`` -- the store and the index on the server ``pg_url``, in schemas named after ``tag``;
    otherwise the SQLite store and the tantivy index in the state dir."""
    head = f'state_dir = "{state_dir}"\nlog_level = "warning"\n'
    if layout == "pg":
        return head + (f'[store]\nurl = "{pg_url}"\nschema = "st_{tag}"\n'
                       f'[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "{pg_url}"\n'
                       f'schema = "ix_{tag}"\n')
    return head + '[index]\nengine = "tantivy"\n'


def index_run(cfg: Path) -> dict:
    """``indexerd index`` with config ``cfg``, :func:`measure`d; RuntimeError with the end of its
    stderr when it fails."""
    # byte-compiled as an install is: a command started with PYTHONDONTWRITEBYTECODE=1 compiles
    # every module it imports (~0.05-0.1 s of an unchanged pass's whole command)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    m = measure([PY, "-m", "indexerd.cli.main", "-c", str(cfg), "index"], env=env, cwd=REPO)
    if m["rc"] != 0:
        raise RuntimeError(f"indexerd index exited {m['rc']}: {m['stderr'][-2000:]}")
    return m


class PgForBench:
    """A throw-away PostgreSQL server (tests/pg.py) when ``"pg" in layouts``, else nothing;
    a context manager whose value is the URL of its ``bench`` database (or None)."""

    def __init__(self, layouts) -> None:
        self.server = None
        self.wanted = "pg" in layouts

    def __enter__(self) -> str | None:
        if not self.wanted:
            return None
        sys.path.insert(0, str(REPO / "tests"))
        from pg import PgServer

        self.server = PgServer.start()
        self.server.wait_ready()
        return self.server.create_database("bench")

    def __exit__(self, *exc) -> None:
        if self.server is not None:
            self.server.stop()


def timed(cmd, env=None, cwd=None) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    return time.perf_counter() - t, p


def du(path) -> int:
    if os.path.isfile(path):
        return sum(os.lstat(p).st_blocks * 512 for p in (path, path + "-wal", path + "-shm") if os.path.exists(p))
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except OSError:
                pass
    return total


def walk_floor(tree: str, reps: int = 5) -> float:
    """Bare os.scandir + stat walk, timed inside Python: what any scanner must pay."""
    def walk(top):
        n, stack = 0, [top]
        while stack:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    else:
                        e.stat(follow_symlinks=False); n += 1
        return n
    walk(tree)
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); walk(tree); ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def warm(tree: str) -> None:
    for root, _, files in os.walk(tree):
        for f in files:
            try:
                with open(os.path.join(root, f), "rb") as fh:
                    while fh.read(1 << 20):
                        pass
            except OSError:
                pass


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def p95(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[int(0.95 * (len(xs) - 1))] if xs else None


# ---------------------------------------------------------------- 1% edits (as peer-bench/lib/mutate.py)

def pick(tree: str, pct: float = 1) -> list[str]:
    files = []
    for root, dirs, names in os.walk(tree):
        dirs.sort()
        files += [os.path.join(root, n) for n in names if os.path.isfile(os.path.join(root, n))]
    files.sort()
    step = max(1, round(100 / float(pct)))
    return files[step // 2::step]


def append_token(paths: list[str], token: str) -> list:
    saved = []
    for p in paths:
        st = os.stat(p)
        saved.append((p, st.st_size, st.st_atime_ns, st.st_mtime_ns))
        line = f"\n<p>{token}</p>\n" if p.endswith((".html", ".htm")) else f"\n{token}\n"
        with open(p, "a") as f:
            f.write(line)
    return saved


def restore(saved: list) -> None:
    for p, size, at, mt in saved:
        os.truncate(p, size)
        os.utime(p, ns=(at, mt))


def rand_word(rng: random.Random, prefix: str) -> str:
    return prefix + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10))


# ---------------------------------------------------------------- engines

class Indexerd:
    """indexerd with one index engine (``whoosh``, the default, or another), through a config
    file of the bench's own holding only ``[index] engine = ...``."""

    def __init__(self, tree: str, work: str, engine: str = "whoosh"):
        self.engine = engine
        self.name = "indexerd" if engine == "whoosh" else f"indexerd-{engine}"
        suffix = "" if engine == "whoosh" else f"-{engine}"
        self.tree, self.state = tree, os.path.join(work, f"indexerd{suffix}-state")
        self.env = dict(os.environ, STATE_DIRECTORY=self.state, PYTHONPATH=str(REPO))
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)  # byte-compiled as an install is
        # always a config of the bench's own: without one, indexerd reads the machine's
        # /etc/indexerd/indexerd.toml when there is one
        conf = os.path.join(work, f"indexerd{suffix}.toml")
        os.makedirs(work, exist_ok=True)
        Path(conf).write_text(f'[index]\nengine = "{engine}"\n')
        self.env["INDEXERD_CONFIG"] = conf
        self.command = [PY, "-m", "indexerd.cli.main"]

    def fresh(self):
        shutil.rmtree(self.state, ignore_errors=True)

    def index(self, memory: bool = True) -> dict:
        """One ``indexerd index --json TREE`` (``memory``: see :func:`measure`), through
        :attr:`command` (this venv's ``python -m indexerd.cli.main``; the console script of
        ``bench_http.installed_layout`` for a start as a user's install runs it)."""
        m = measure([*self.command, "index", "--json", self.tree], env=self.env, cwd=str(REPO), memory=memory)
        if m["rc"] != 0:
            raise RuntimeError(f"indexerd index failed: {m['stderr'][-2000:]}")
        s = json.loads(m["stdout"])
        m.update(pass_s=s["elapsed_seconds"], indexed=s["indexed"], unchanged=s["unchanged"], seen=s["seen"],
                 skipped=s["skipped"], errors=s["errors"])
        return m

    def sizes(self) -> dict:
        return {"total": du(self.state), "index": du(os.path.join(self.state, "index")),
                "store": du(os.path.join(self.state, "state.sqlite3"))}

    def ndocs(self) -> int | None:
        import sqlite3
        try:
            with sqlite3.connect(os.path.join(self.state, "state.sqlite3")) as c:
                for (t,) in c.execute("select name from sqlite_master where type='table'"):
                    if t in ("documents", "docs", "files"):
                        return c.execute(f"select count(*) from {t}").fetchone()[0]
        except sqlite3.Error:
            pass
        return None

    def query_cmd(self, q: str, limit: int = 20) -> list[str]:
        """``indexerd ctl search`` through this venv's console script, as a user runs it."""
        return [os.path.join(os.path.dirname(PY), "indexerd"), "ctl", "search", q, "--limit", str(limit)]

    def query(self, q: str) -> float:
        t, p = timed(self.query_cmd(q), env=self.env, cwd=str(REPO))
        if p.returncode != 0:
            raise RuntimeError(f"ctl search {q!r}: {p.stderr[-500:]}")
        return t

    def hits_paths(self, q: str) -> set[str]:
        p = subprocess.run([PY, "-m", "indexerd.cli.main", "ctl", "search", q, "--json", "--limit", "100000"],
                           env=self.env, cwd=str(REPO), capture_output=True, text=True)
        return {h["path"] for h in json.loads(p.stdout)} if p.returncode == 0 else set()


#: ``idxniceprio = 0``: recollindex at the priority indexerd runs at (its default, 19, lowers
#: its own priority, and it then loses the CPU to anything else the machine runs).
RECOLL_CONF = """topdirs = {tree}
idxniceprio = 0
noaspell = 1
textunknownasplain = 1
loglevel = 2
logfilename = {conf}/recoll.log
"""


class Recoll:
    """Recoll as the peer harness runs it (peer-bench/run_recoll.sh): same recoll.conf."""
    name = "Recoll"

    def __init__(self, tree: str, work: str):
        self.tree, self.conf = tree, os.path.join(work, "recoll-conf")

    def write_conf(self, extra: str = ""):
        os.makedirs(self.conf, exist_ok=True)
        Path(self.conf, "recoll.conf").write_text(RECOLL_CONF.format(tree=self.tree, conf=self.conf) + extra)

    def fresh(self):
        shutil.rmtree(self.conf, ignore_errors=True)
        self.write_conf()

    def index(self, memory: bool = True) -> dict:
        # cwd: recollindex may leave files in the current directory
        m = measure(["recollindex", "-c", self.conf], cwd=self.conf, memory=memory)
        if m["rc"] != 0:
            raise RuntimeError(f"recollindex failed: {m['stderr'][-2000:]}")
        st = self.idxstatus()
        m.update(indexed=int(st.get("dbtotdocs", 0) or 0))
        return m

    def idxstatus(self) -> dict:
        try:
            return dict(l.split(" = ", 1) for l in Path(self.conf, "idxstatus.txt").read_text().splitlines() if " = " in l)
        except OSError:
            return {}

    def sizes(self) -> dict:
        return {"total": du(self.conf), "index": du(os.path.join(self.conf, "xapiandb")), "store": 0}

    def query_cmd(self, q: str, limit: int = 20) -> list[str]:
        return ["recollq", "-c", self.conf, "-n", str(limit), q]

    def query(self, q: str) -> float:
        t, p = timed(self.query_cmd(q))
        if p.returncode != 0:
            raise RuntimeError(f"recollq {q!r}: {p.stderr[-500:]}")
        return t

    def count(self, q: str) -> int:
        p = subprocess.run(["recollq", "-c", self.conf, "-n", "1", q], capture_output=True, text=True)
        for line in p.stdout.splitlines():
            if line.endswith(" results"):
                return int(line.split()[0])
        return 0

    def hits_paths(self, q: str) -> set[str]:
        p = subprocess.run(["recollq", "-c", self.conf, "-b", "-n", "100000", q], capture_output=True, text=True)
        return {l[len("file://"):] for l in p.stdout.splitlines() if l.startswith("file://")}
