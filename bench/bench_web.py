#!/usr/bin/env python3
"""The web source against wget and HTTrack on one nginx-served site (issue 5's benchmark).

  bench/bench_web.py [SITE] [--reps 3] [--peers indexerd,wget,wget-head,httrack]
                     [--httrack-cap 1500] [--quick] [--rows-json PATH]

SITE defaults to $BENCH_DATA/site (/tmp/bench-data/site): the Debian python3-doc HTML tree,
every mtime 2024-01-01 (the peer harness's recipe; built here when missing, installing
python3-doc with apt).  It is copied to a temp dir (mtimes kept) and served there by nginx on
127.0.0.1 (a free port, generated config, access log in JSON with $request_time, $status,
$body_bytes_sent, $bytes_sent and the conditional headers); the copy is what gets touched and
edited, so SITE itself is never changed.

Per tool and repetition, from an empty state / mirror dir:
  first      the first crawl (pages/s = HTML pages answered 200 / wall time)
  nochange   a re-crawl with nothing changed: requests, body bytes, wall time
  touch1pct  the peer harness's 1%: every 100th file of the sorted tree gets a new mtime (same
             bytes); then a re-crawl; then the mtimes are put back
  edit1pct   every 100th of the sorted .html pages gets a new word appended (new size, new mtime);
             then a re-crawl: how many of those pages the tool downloaded again ("every changed
             page found"), and for indexerd how many it re-indexed and whether the word is found
             there; then the files are put back exactly.
Requests and bytes come from nginx's access log (the step's lines, by User-Agent).

Tools: indexerd (`indexerd index -c CFG --json`, a `[[sources.web]]` with politeness OFF for the
loopback server: min_delay = "0s", good_guy_factor = 0, and a mirror_dir, as wget keeps files), `wget --mirror -N -np` (If-Modified-
Since), wget-head (`--no-if-modified-since`: HEAD per URL, the peer harness's second mode), and
`httrack --disable-security-limits` / `--update`.  HTTrack paces itself at about 1 request/s on
loopback (peer README), so it runs ONE repetition on its own nginx and its own copy of the site,
in parallel with the others (it uses ~1% CPU), capped at --httrack-cap seconds per step.

Output: a markdown table (metric | indexerd | wget | wget-head | httrack; medians of the reps) on
stdout, and bench/out/web.json.  --rows-json PATH writes the table rows for bench/run_all.py.
Adaptive recrawl (requests per pass over hundreds of simulated passes) is measured by
bench/bench_recrawl.py on the same kind of nginx site.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nginxsite import Nginx, NginxError  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
PY = sys.executable
FIXED_MTIME = 1704067200  # 2024-01-01T00:00:00Z
T0 = time.perf_counter()
UA = {"indexerd": "indexerd", "wget": "Wget", "wget-head": "Wget", "httrack": "HTTrack"}


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the site

def build_site(site: Path) -> None:
    """The peer harness's site recipe (corpus.sh, part b): python3-doc's HTML tree as shipped,
    every file and directory with mtime 2024-01-01 00:00:00 UTC."""
    if subprocess.run(["dpkg", "-s", "python3-doc"], capture_output=True).returncode != 0:
        log("installing Debian package python3-doc (the site corpus)")
        subprocess.run(["apt-get", "update", "-q"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-q", "python3-doc"], check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    pyhtml = os.path.realpath("/usr/share/doc/python3-doc/html")
    site.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(pyhtml, site, symlinks=False)
    for root, dirs, files in os.walk(site):
        for n in dirs + files:
            os.chmod(os.path.join(root, n), 0o755 if n in dirs else 0o644)
            os.utime(os.path.join(root, n), (FIXED_MTIME, FIXED_MTIME))
    os.utime(site, (FIXED_MTIME, FIXED_MTIME))
    log(f"built {site}")


def all_files(d: Path) -> list[Path]:
    out = []
    for root, dirs, names in os.walk(d):
        dirs.sort()
        out += [Path(root, n) for n in names if os.path.isfile(os.path.join(root, n))]
    return sorted(out, key=str)


def pick(files: list[Path], pct: float = 1.0) -> list[Path]:
    """The peer harness's lib/mutate.py pick: every (100/pct)th of the sorted paths."""
    step = max(1, round(100 / pct))
    return files[step // 2::step]


def save(paths: list[Path]) -> list[tuple]:
    return [(p, p.stat().st_size, p.stat().st_atime_ns, p.stat().st_mtime_ns) for p in paths]


def restore(rec: list[tuple]) -> None:
    for p, size, atime, mtime in rec:
        os.truncate(p, size)
        os.utime(p, ns=(atime, mtime))


# ---------------------------------------------------------------- nginx (bench/nginxsite.py)

def start_nginx(root: Path, prefix: Path) -> Nginx:
    try:
        ngx = Nginx(root, prefix)
    except NginxError as e:
        sys.exit(f"bench_web: {e}")
    ngx.url = ngx.base + "/"
    return ngx


# ---------------------------------------------------------------- the tools

class Tool:
    """One crawler: ``first()`` from empty, ``update()`` after it; both return (wall, extra)."""

    name = "?"

    def __init__(self, url: str, work: Path):
        self.url, self.work = url, work

    def reset(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)

    def _run(self, cmd: list[str], env=None, timeout=None) -> tuple[float, subprocess.CompletedProcess | None]:
        t = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            return float("inf"), None
        return time.perf_counter() - t, p


class Indexerd(Tool):
    name = "indexerd"

    def reset(self) -> None:
        super().reset()
        self.cfg = self.work / "indexerd.toml"
        state = self.work / "state"
        self.cfg.write_text(f"""\
state_dir = "{state}"
control_socket = "{state}/indexerd.sock"
log_level = "warning"

[[sources.web]]
name = "site"
seeds = ["{self.url}"]
workers = 4
mirror_dir = "{self.work / 'mirror'}"   # files kept, as wget keeps them (page requisites too)

# Loopback server of our own: politeness off for the benchmark.
[sources.web.politeness]
min_delay = "0s"
good_guy_factor = 0
""")
        self.env = dict(os.environ, STATE_DIRECTORY=str(state), PYTHONPATH=str(REPO))

    def crawl(self, first: bool):
        # a re-crawl asks every known page with its validators (--recheck), as the peers do; a
        # plain pass asks only what adaptive recrawl made due (bench/bench_recrawl.py measures that)
        wall, p = self._run([PY, "-m", "indexerd.cli.main", "index", "-c", str(self.cfg), "--json",
                             *([] if first else ["--recheck"])], env=self.env)
        if p.returncode != 0:
            raise RuntimeError(f"indexerd index exited {p.returncode}: {p.stderr[-2000:]}")
        return wall, json.loads(p.stdout)

    def search(self, word: str) -> list[str]:
        p = subprocess.run([PY, "-m", "indexerd.cli.main", "ctl", "search", "-c", str(self.cfg), word, "--json",
                            "--limit", "1000"], capture_output=True, text=True, env=self.env)
        return [h["url"] for h in json.loads(p.stdout)]


class Wget(Tool):
    name = "wget"
    extra: list[str] = []

    def crawl(self, first: bool):
        # exit status 8 = some 404s (the docs have broken links): expected
        wall, p = self._run(["wget", "--mirror", "-N", "-np", "-q", *self.extra, "-P", str(self.work), self.url])
        return wall, {"rc": p.returncode}


class WgetHead(Wget):
    name = "wget-head"
    extra = ["--no-if-modified-since"]


class HTTrack(Tool):
    name = "httrack"
    cap = 1500.0

    def crawl(self, first: bool):
        cmd = ["httrack", self.url, "-O", str(self.work), "-q", "--disable-security-limits"]
        wall, p = self._run(cmd + ([] if first else ["--update"]), timeout=self.cap)
        return wall, {"rc": None if p is None else p.returncode, "capped": p is None}


TOOLS = {"indexerd": Indexerd, "wget": Wget, "wget-head": WgetHead, "httrack": HTTrack}


# ---------------------------------------------------------------- one repetition of one tool

def stats(es: list[dict]) -> dict:
    st: dict[str, int] = {}
    for e in es:
        k = f"{e['method']} {e['status']}"
        st[k] = st.get(k, 0) + 1
    return {"requests": len(es), "body_bytes": sum(e["body_bytes"] for e in es),
            "bytes": sum(e["bytes"] for e in es), "by_status": dict(sorted(st.items())),
            "html_200": len({e["uri"] for e in es if e["status"] == 200 and e["method"] == "GET"
                             and e["uri"].endswith((".html", "/"))})}


def one_rep(tool: Tool, ngx: Nginx, site: Path, rep: int) -> dict:
    ua = UA[tool.name]
    tool.reset()
    res: dict = {}

    def step(name: str, first: bool = False) -> dict:
        m = ngx.mark()
        wall, extra = tool.crawl(first)
        es = ngx.log(m, ua)
        r = {"wall": wall, **stats(es), "extra": {k: v for k, v in extra.items() if k != "sources"}}
        res[name] = r
        log(f"  {tool.name} rep {rep} {name}: {wall:.3f} s, {r['requests']} requests, "
            f"{r['body_bytes']:,} body bytes, {r['by_status']}")
        return r | {"_entries": es}

    f = step("first", first=True)
    res["first"]["pages_per_s"] = f["html_200"] / f["wall"] if f["wall"] else None
    fetched = {e["uri"] for e in f["_entries"] if e["status"] == 200}
    step("nochange")

    files = all_files(site)
    touched = pick(files)
    rec = save(touched)
    now = time.time()
    for p in touched:
        os.utime(p, (now, now))
    try:
        t = step("touch1pct")
    finally:
        restore(rec)
    tur = {"/" + p.relative_to(site).as_posix() for p in touched}
    res["touch1pct"]["touched"] = len(tur)
    res["touch1pct"]["touched_reachable"] = len(tur & fetched)
    res["touch1pct"]["touched_refetched"] = len({e["uri"] for e in t["_entries"]
                                                 if e["uri"] in tur and e["status"] == 200 and e["method"] == "GET"})

    html = [p for p in files if p.suffix == ".html"]
    edited = pick(html)
    rec = save(edited)
    token = f"zqxbench{rep}edit"
    later = FIXED_MTIME + 86400
    for p in edited:
        with open(p, "a") as fh:
            fh.write(f"\n<p>{token}</p>\n")
        os.utime(p, (later, later))
    try:
        e = step("edit1pct")
        if isinstance(tool, Indexerd):
            res["edit1pct"]["token_found_in"] = len(tool.search(token))
    finally:
        restore(rec)
    eur = {"/" + p.relative_to(site).as_posix() for p in edited}
    res["edit1pct"]["edited"] = len(eur)
    res["edit1pct"]["edited_reachable"] = len(eur & fetched)
    res["edit1pct"]["edited_refetched"] = len({x["uri"] for x in e["_entries"]
                                               if x["uri"] in eur and x["status"] == 200 and x["method"] == "GET"
                                               and x["body_bytes"] > 0})
    return res


def run_tool(name: str, site_src: Path, tmp: Path, reps: int, out: dict, cap: float) -> None:
    """A tool's repetitions on its own copy of the site: used for HTTrack in a thread."""
    site = tmp / f"site-{name}"
    shutil.copytree(site_src, site)
    ngx = start_nginx(site, tmp / f"nginx-{name}")
    try:
        tool = TOOLS[name](ngx.url, tmp / f"work-{name}")
        if isinstance(tool, HTTrack):
            tool.cap = cap
        out[name] = [one_rep(tool, ngx, site, r) for r in range(1, reps + 1)]
    except Exception as e:  # report, do not lose the other tools' figures
        log(f"{name} failed: {e!r}")
        out.setdefault(name, [])
        out[name + ".error"] = repr(e)
    finally:
        ngx.stop()


# ---------------------------------------------------------------- table

def med(runs: list[dict], step: str, key: str):
    xs = [r[step][key] for r in runs if step in r and r[step].get(key) is not None]
    return statistics.median(xs) if xs else None


def fs(x):
    if x is None:
        return "n/a"
    if x == float("inf"):
        return "> cap"
    return f"{x * 1e3:.0f} ms" if x < 1 else f"{x:.2f} s" if x < 100 else f"{x:.0f} s"


def fb(x):
    return "n/a" if x is None else f"{x / 1e6:.2f} MB" if x >= 1e6 else f"{x / 1e3:.1f} kB" if x >= 1e3 else f"{x:.0f} B"


def fn(x, nd=0):
    return "n/a" if x is None else f"{x:,.{nd}f}"


def table(results: dict, peers: list[str]) -> list[list[str]]:
    rows = []

    def row(metric, fmt, step, key, extra=None):
        cells = []
        for p in peers:
            runs = results.get(p) or []
            v = med(runs, step, key)
            c = fmt(v)
            if extra and runs:
                c += extra(runs)
            cells.append(c if runs else "not run")
        rows.append([metric, *cells])

    def statuses(step):
        def f(runs):
            st = runs[len(runs) // 2][step]["by_status"] if step in runs[len(runs) // 2] else {}
            return " (" + ", ".join(f"{v} {k}" for k, v in st.items()) + ")" if st else ""
        return f

    row("first crawl: wall", fs, "first", "wall")
    row("first crawl: HTML pages fetched (200)", fn, "first", "html_200")
    row("first crawl: pages/s", lambda v: fn(v, 0), "first", "pages_per_s")
    row("first crawl: requests", fn, "first", "requests")
    row("first crawl: body bytes", fb, "first", "body_bytes")
    row("re-crawl, nothing changed: wall", fs, "nochange", "wall")
    row("re-crawl, nothing changed: requests", fn, "nochange", "requests", statuses("nochange"))
    row("re-crawl, nothing changed: body bytes", fb, "nochange", "body_bytes")
    row("re-crawl, nothing changed: bytes sent (headers too)", fb, "nochange", "bytes")
    row("re-crawl after touching 1% (mtime only): wall", fs, "touch1pct", "wall")
    row("… requests", fn, "touch1pct", "requests", statuses("touch1pct"))
    row("… body bytes", fb, "touch1pct", "body_bytes")
    row("… touched files re-downloaded / touched reachable", lambda v: fn(v), "touch1pct", "touched_refetched",
        lambda runs: f" / {runs[0]['touch1pct']['touched_reachable']} (of {runs[0]['touch1pct']['touched']} touched)")
    row("re-crawl after editing 1% of pages: wall", fs, "edit1pct", "wall")
    row("… requests", fn, "edit1pct", "requests", statuses("edit1pct"))
    row("… body bytes", fb, "edit1pct", "body_bytes")
    row("every changed page found: edited pages re-downloaded / edited", fn, "edit1pct", "edited_refetched",
        lambda runs: f" / {runs[0]['edit1pct']['edited_reachable']} reachable"
                     f" ({runs[0]['edit1pct']['edited']} edited)")
    ix = results.get("indexerd") or []
    if ix:
        def ixrow(metric, f):
            vals = [f(r) for r in ix]
            rows.append([metric, " / ".join(str(v) for v in vals) + (" (per run)" if len(vals) > 1 else ""),
                         *["–" for p in peers if p != "indexerd"]])
        ixrow("indexerd re-indexed: nothing changed / touched 1% / edited 1%",
              lambda r: f"{r['nochange']['extra'].get('indexed')}, {r['touch1pct']['extra'].get('indexed')}, "
                        f"{r['edit1pct']['extra'].get('indexed')}")
        ixrow("indexerd: edited word found in (pages)", lambda r: r["edit1pct"].get("token_found_in"))
    return rows


def render(rows, peers) -> str:
    head = ["metric", *peers]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


# ---------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("site", nargs="?", default=os.path.join(os.environ.get("BENCH_DATA", "/tmp/bench-data"), "site"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--peers", default="indexerd,wget,wget-head,httrack")
    ap.add_argument("--httrack-reps", type=int, default=1)
    ap.add_argument("--httrack-cap", type=float, default=1500.0, help="seconds per HTTrack step (then killed)")
    ap.add_argument("--quick", action="store_true", help="1 repetition, no HTTrack (it needs ~15 min)")
    ap.add_argument("--rows-json", help="also write the table rows as JSON (for bench/run_all.py)")
    a = ap.parse_args()
    peers = [p for p in a.peers.split(",") if p]
    if a.quick:
        a.reps = 1
        peers = [p for p in peers if p != "httrack"]
    for p in peers:
        if p not in TOOLS:
            ap.error(f"unknown peer {p}")
        exe = {"wget-head": "wget", "indexerd": None}.get(p, p)
        if exe and shutil.which(exe) is None:
            log(f"installing {exe} (Debian package)")
            subprocess.run(["apt-get", "install", "-y", "-q", exe], env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    src = Path(a.site)
    if not src.is_dir():
        build_site(src)
    tmp = Path(tempfile.mkdtemp(prefix="bench-web-"))
    results: dict = {}
    started = datetime.now(timezone.utc)
    try:
        th = None
        if "httrack" in peers:  # its own nginx and site copy, in parallel (it sleeps, ~1% cpu)
            th = threading.Thread(target=run_tool, args=("httrack", src, tmp, a.httrack_reps, results,
                                                         a.httrack_cap), daemon=True)
            th.start()
        site = tmp / "site"
        shutil.copytree(src, site)
        ngx = start_nginx(site, tmp / "nginx")
        try:
            seq = [p for p in peers if p != "httrack"]
            tools = {p: TOOLS[p](ngx.url, tmp / f"work-{p}") for p in seq}
            for r in range(1, a.reps + 1):
                order = seq if r % 2 else list(reversed(seq))  # alternate the order per repetition
                for p in order:
                    log(f"{p} rep {r}")
                    results.setdefault(p, []).append(one_rep(tools[p], ngx, site, r))
        finally:
            ngx.stop()
        if th is not None:
            log("waiting for HTTrack")
            th.join()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    wall = time.perf_counter() - T0
    rows = table(results, peers)
    notes = [
        f"site: {src} ({len(all_files(src))} files), served by nginx on 127.0.0.1; "
        f"medians of {a.reps} run(s) (HTTrack: {a.httrack_reps if 'httrack' in peers else 0}, "
        "on its own nginx and copy of the site, in parallel)",
        "indexerd politeness OFF for the loopback server: min_delay = \"0s\", good_guy_factor = 0 (workers = 4; "
        "still one request in flight per host)",
        "wget = wget --mirror -N -np (If-Modified-Since); wget-head = same with --no-if-modified-since "
        "(HEAD per URL); httrack = httrack --disable-security-limits, then --update",
        "requests/bytes from nginx's access log (by User-Agent); body bytes = $body_bytes_sent",
        "the edit step comes after the touched files' mtimes were put back, so their validators changed "
        "again: a conditional GET re-downloads them (indexerd: 200, same text, not re-indexed); wget-head "
        "compares dates and skips them (now older than its copy)",
        f"bench wall time {wall:.0f} s",
    ]
    md = render(rows, peers) + "\n\n" + "\n".join(f"- {n}" for n in notes)
    print(md)
    OUT.mkdir(exist_ok=True)
    clean = {p: [{s: {k: v for k, v in d.items() if not k.startswith("_")} if isinstance(d, dict) else d
                  for s, d in run.items()} for run in runs] if isinstance(runs, list) else runs
             for p, runs in results.items()}
    (OUT / "web.json").write_text(json.dumps({
        "started": started.isoformat(), "site": str(src), "reps": a.reps, "peers": peers,
        "politeness": {"min_delay": "0s", "good_guy_factor": 0}, "wall_seconds": wall,
        "table": [["metric", *peers], *rows], "notes": notes, "runs": clean}, indent=1, default=str))
    if a.rows_json:
        def peer_cell(r):
            return "; ".join(f"{p} {c}" for p, c in zip(peers, r[1:]) if p != "indexerd")
        ix = peers.index("indexerd") + 1 if "indexerd" in peers else None
        Path(a.rows_json).write_text(json.dumps(
            [[f"web: {r[0]}", r[ix] if ix else "not run", peer_cell(r), "", "", ""] for r in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
