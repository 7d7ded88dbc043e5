#!/usr/bin/env python3
"""Queries through the running daemon (issue 14): ``ctl search`` as a process with the daemon
up, side by side with ``recollq`` in the same run; and the search page under load.

  bench/bench_http.py [TREE] [--clients 20] [--seconds 30] [--reps 3]

1. Copies TREE (default: ../shared/corpus, else /usr/share/doc/python3*) to a work dir, starts
   ``indexerd run`` on it with ``[http]`` on loopback and waits for the first pass; indexes the
   same copy with ``recollindex``.
2. ``ctl search`` vs ``recollq``: the 20 queries of bench/queries.txt, ``--reps`` times, one
   process per query, alternating per query (the order flips each time); again with ``indexerd``
   laid out as installed (no editable-install finder: :func:`installed_layout`) beside the
   interpreter's bare start; the same with the daemon stopped (``ctl search`` then opens the
   index itself), for reference.
3. The page: ``--clients`` threads each GET ``/?q=<query>`` (the whole search page, rendered)
   in a loop for ``--seconds``, while a writer appends a unique word to a file of the tree every
   0.25 s and polls ``/api/search`` until that word is found (edit-to-searchable through HTTP).
   Reports the page's response time p50/p95/max, requests per second, errors, and the
   edit-to-searchable p50/p95 twice: as the writer saw it through HTTP (its own poll, queued
   behind the clients, included) and as the daemon measured it (its
   ``indexerd_edit_to_searchable_seconds`` histogram read after each edit: the sum's step).

Prints one JSON object on stdout (progress on stderr).  bench/run_all.py runs it and adds its
rows to the table.
"""
from __future__ import annotations

import argparse, json, os, random, shutil, subprocess, sys, tempfile, threading, time  # noqa: E401
import urllib.parse
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import HERE, PY, REPO, Recoll, median, p95, rand_word, timed  # noqa: E402

T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def default_tree() -> str:
    for up in (REPO.parent, REPO.parent.parent):       # the main checkout or a worktree under wt/
        if (up / "shared" / "corpus").is_dir():
            return str(up / "shared" / "corpus")
    return next(str(p) for p in sorted(Path("/usr/share/doc").glob("python3*")) if p.is_dir())


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    def __init__(self, tree: str, work: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cfg = os.path.join(work, "indexerd.toml")
        Path(self.cfg).write_text(
            f'state_dir = "{work}/state"\ncontrol_socket = "{work}/s.sock"\n\n'
            f'[http]\nlisten = "127.0.0.1:{self.port}"\nthreads = 8\n\n'
            f'[[sources.filesystem]]\nname = "docs"\npath = "{tree}"\n', encoding="utf-8")
        self.env = {k: v for k, v in os.environ.items() if k not in ("INDEXERD_CONFIG", "STATE_DIRECTORY")}
        self.env["PYTHONPATH"] = str(REPO)
        self.log_path = os.path.join(work, "daemon.log")
        self.proc = None

    def ctl_cmd(self, *args: str) -> list[str]:
        """``indexerd ctl ...`` through this venv's console script, as a user runs it."""
        return [os.path.join(os.path.dirname(PY), "indexerd"), "ctl", "-c", self.cfg, *args]

    def installed_ctl_cmd(self, *args: str) -> list[str]:
        """``indexerd ctl ...`` as an installed package runs it (see :func:`installed_layout`)."""
        return [self.installed, "ctl", "-c", self.cfg, *args]

    def start(self, timeout: float = 900):
        self.proc = subprocess.Popen([PY, "-m", "indexerd.cli.main", "run", "-c", self.cfg],
                                     stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT, env=self.env,
                                     cwd=str(REPO))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            p = subprocess.run(self.ctl_cmd("status", "--json"), capture_output=True, text=True, env=self.env)
            if p.returncode == 0 and json.loads(p.stdout)["sources"]["docs"]["last_run"]["finished"]:
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited {self.proc.returncode}")
            time.sleep(0.5)
        raise RuntimeError("daemon not ready")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        self.proc = None

    def query(self, q: str) -> float:
        cmd = self.installed_ctl_cmd if getattr(self, "installed", None) else self.ctl_cmd
        t, p = timed(cmd("search", q, "--limit", "20"), env=self.env, cwd=str(REPO))
        if p.returncode != 0:
            raise RuntimeError(f"ctl search {q!r}: {p.stderr[-300:]}")
        return t


def installed_layout(work: str) -> str:
    """The ``indexerd`` console script as ``pip install indexerd`` (not ``-e``) lays it out: a
    venv whose site-packages reaches this venv's packages by a path line and indexerd by
    PYTHONPATH, so the start-up does not run setuptools' editable-install finder (a development
    checkout's import hook: pathlib, importlib.util, urllib.parse at every start).  Returns
    the script's path."""
    import sysconfig
    venv = os.path.join(work, "installed")
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", venv], check=True)
    site = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "indexerd-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    script = os.path.join(venv, "bin", "indexerd")
    import tomllib
    entry = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]["indexerd"]
    module, func = entry.split(":")                  # the console script pip would write
    Path(script).write_text(f"#!{venv}/bin/python\nimport sys\nfrom {module} import {func}\n"
                            f"if __name__ == '__main__':\n    sys.exit({func}())\n", encoding="utf-8")
    os.chmod(script, 0o755)
    return script


def ctl_vs_recollq(d: Daemon, rc: Recoll, queries: list[str], reps: int) -> dict:
    ix, rq = [], []
    for r in range(reps):
        for i, q in enumerate(queries):
            if (i + r) % 2 == 0:
                ix.append(d.query(q)); rq.append(rc.query(q))
            else:
                rq.append(rc.query(q)); ix.append(d.query(q))
    return {"ctl": ix, "recollq": rq}


def page_load(d: Daemon, tree: str, queries: list[str], clients: int, seconds: float) -> dict:
    stop = threading.Event()
    lat: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client(n: int):
        rng = random.Random(n)
        while not stop.is_set():
            q = rng.choice(queries)
            url = d.url + "/?" + urllib.parse.urlencode({"q": q})
            t = time.perf_counter()
            try:
                with urllib.request.urlopen(url, timeout=30) as r:
                    body = r.read()
                    ok = r.status == 200 and b'id="summary"' in body
            except Exception as e:  # noqa: BLE001 -- every failure counts as an error
                ok, body = False, repr(e).encode()
            dt = time.perf_counter() - t
            with lock:
                lat.append(dt)
                if not ok:
                    errors.append(body[:200].decode("utf-8", "replace"))

    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(tree) for f in fs if f.endswith((".txt", ".html")))
    saved = {}
    edit_lat: list[float] = []
    daemon_lat: list[float] = []     # the daemon's own edit-to-searchable of each edit (its histogram)

    def edit_histogram() -> tuple[float, float]:
        with urllib.request.urlopen(d.url + "/metrics", timeout=30) as r:
            fams = {f.name: f for f in text_string_to_metric_families(r.read().decode("utf-8"))}
        samples = {s.name: s.value for s in fams["indexerd_edit_to_searchable_seconds"].samples}
        return samples["indexerd_edit_to_searchable_seconds_sum"], samples["indexerd_edit_to_searchable_seconds_count"]

    def editor():
        rng = random.Random(7)
        before = edit_histogram()
        while not stop.is_set():
            f = rng.choice(files)
            if f not in saved:
                saved[f] = Path(f).read_bytes()
            word = rand_word(rng, "pageedit")
            t = time.perf_counter()
            with open(f, "a", encoding="utf-8") as fh:
                fh.write(f"\n{word}\n")
            while not stop.is_set():
                with urllib.request.urlopen(d.url + "/api/search?q=" + word, timeout=30) as r:
                    if json.loads(r.read())["total"] > 0:
                        edit_lat.append(time.perf_counter() - t)
                        after = edit_histogram()
                        if after[1] - before[1] == 1:      # exactly this edit's latency
                            daemon_lat.append(after[0] - before[0])
                        before = after
                        break
                if time.perf_counter() - t > 30:
                    edit_lat.append(float("inf"))
                    break
                time.sleep(0.01)
            stop.wait(0.25)

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(clients)]
    threads.append(threading.Thread(target=editor, daemon=True))
    started = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(60)
    wall = time.perf_counter() - started
    for f, data in saved.items():
        Path(f).write_bytes(data)
    return {"requests": len(lat), "errors": len(errors), "error_samples": errors[:5], "seconds": wall,
            "rps": len(lat) / wall, "p50": median(lat), "p95": p95(lat), "max": max(lat),
            "edits": len(edit_lat), "edit_p50": median(edit_lat) if edit_lat else None,
            "edit_p95": p95(edit_lat) if edit_lat else None,
            "daemon_edits": len(daemon_lat), "daemon_edit_p50": median(daemon_lat) if daemon_lat else None,
            "daemon_edit_p95": p95(daemon_lat) if daemon_lat else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tree", nargs="?", default=None)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    # byte-compile indexerd as an install does (a session with PYTHONDONTWRITEBYTECODE=1 would
    # otherwise compile every module at every `ctl` start and time the compiler)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([PY, "-m", "compileall", "-q", str(REPO / "indexerd")], check=True, capture_output=True)
    queries = [q.strip() for q in (HERE / "queries.txt").read_text().splitlines() if q.strip() and not q.startswith("#")]
    work = a.work or tempfile.mkdtemp(prefix="ixd-bench-http-")
    src = a.tree or default_tree()
    tree = os.path.join(work, "tree")
    shutil.copytree(src, tree, symlinks=True)
    out = {"tree": src, "files": sum(len(f) for _, _, f in os.walk(tree)), "clients": a.clients,
           "seconds": a.seconds, "queries": len(queries), "reps": a.reps}
    rc = Recoll(tree, work)
    rc.fresh()
    log(f"recollindex {tree}")
    rc.index()
    os.makedirs(os.path.join(work, "ixd"), exist_ok=True)
    d = Daemon(tree, os.path.join(work, "ixd"))
    try:
        log("indexerd run (first pass)")
        d.start()
        for q in queries[:3]:                         # warm both: page cache, the daemon's searcher
            d.query(q); rc.query(q)
        log(f"ctl search (daemon up) vs recollq, {len(queries)} queries x {a.reps}")
        up = ctl_vs_recollq(d, rc, queries, a.reps)
        out["ctl_daemon_up"] = {"p50": median(up["ctl"]), "p95": p95(up["ctl"]),
                                "recollq_p50": median(up["recollq"]), "recollq_p95": p95(up["recollq"]),
                                "ratio_p50": median(up["ctl"]) / median(up["recollq"])}
        log(f"  {out['ctl_daemon_up']}")
        d.installed = installed_layout(work)
        log(f"the same, `indexerd ctl search` laid out as installed ({d.installed})")
        d.query(queries[0])
        inst = ctl_vs_recollq(d, rc, queries, a.reps)
        out["ctl_installed_daemon_up"] = {"p50": median(inst["ctl"]), "p95": p95(inst["ctl"]),
                                          "recollq_p50": median(inst["recollq"]),
                                          "ratio_p50": median(inst["ctl"]) / median(inst["recollq"])}
        log(f"  {out['ctl_installed_daemon_up']}")
        bare = [timed([os.path.join(work, "installed", "bin", "python"), "-c", "pass"])[0] for _ in range(20)]
        out["python_startup_p50"] = median(bare)
        log(f"  python -c pass p50 {median(bare):.4f} s")
        d.installed = None
        log(f"page: {a.clients} clients for {a.seconds:.0f} s, edits every 0.25 s")
        out["page"] = page_load(d, tree, queries, a.clients, a.seconds)
        log(f"  { {k: v for k, v in out['page'].items() if k != 'error_samples'} }")
    finally:
        d.stop()
    log("ctl search (daemon down) vs recollq, for reference")
    down = ctl_vs_recollq(d, rc, queries, 1)
    out["ctl_daemon_down"] = {"p50": median(down["ctl"]), "recollq_p50": median(down["recollq"]),
                              "ratio_p50": median(down["ctl"]) / median(down["recollq"])}
    log(f"  {out['ctl_daemon_down']}")
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
