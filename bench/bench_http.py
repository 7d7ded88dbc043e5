#!/usr/bin/env python3
"""Queries through the running daemon (issue 14): ``ctl search`` as a process with the daemon
up, side by side with ``recollq`` in the same run; and the search page under load.

  bench/bench_http.py [TREE] [--clients 20] [--seconds 30] [--reps 3]

1. Copies TREE (default: ../shared/corpus, else /usr/share/doc/python3*) to a work dir, starts
   ``indexerd run`` on it with ``[http]`` on loopback and waits for the first pass; indexes the
   same copy with ``recollindex``.
2. ``ctl search`` vs ``recollq``: the 20 queries of bench/queries.txt, ``--reps`` times, one
   process per query, alternating per query (the order flips each time); the same with the
   daemon stopped (``ctl search`` then opens the index itself), for reference.
3. The page: ``--clients`` threads each GET ``/?q=<query>`` (the whole search page, rendered)
   in a loop for ``--seconds``, while a writer appends a unique word to a file of the tree every
   0.25 s and polls ``/api/search`` until that word is found (edit-to-searchable through HTTP).
   Reports the page's response time p50/p95/max, requests per second, errors, and the
   edit-to-searchable p50/p95.

Prints one JSON object on stdout (progress on stderr).  bench/run_all.py runs it and adds its
rows to the table.
"""
from __future__ import annotations

import argparse, json, os, random, shutil, subprocess, sys, tempfile, threading, time  # noqa: E401
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import HERE, PY, REPO, Recoll, median, p95, rand_word, timed  # noqa: E402

T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def default_tree() -> str:
    shared = REPO.parent / "shared" / "corpus"
    if shared.is_dir():
        return str(shared)
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
        return [PY, "-m", "indexerd.cli.main", "ctl", "-c", self.cfg, *args]

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
        t, p = timed(self.ctl_cmd("search", q, "--limit", "20"), env=self.env, cwd=str(REPO))
        if p.returncode != 0:
            raise RuntimeError(f"ctl search {q!r}: {p.stderr[-300:]}")
        return t


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

    def editor():
        rng = random.Random(7)
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
            "edit_p95": p95(edit_lat) if edit_lat else None}


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
