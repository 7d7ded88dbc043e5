#!/usr/bin/env python3
"""What going multi-node costs on one machine, and what several nodes buy on many slow hosts.

  bench/bench_cluster.py [TREE] [--reps 3] [--hosts 24] [--pages 12] [--delay 0.5]
                         [--page-seconds 0.1] [--only cost|scale|scale-site] [--late SECONDS]

Starts a throw-away PostgreSQL server (tests/pg.py, Unix socket; ``fsync = on`` and
``synchronous_commit = off`` set for the run: durable on a crash of the server, like the SQLite
store's WAL with ``synchronous = NORMAL``, the closest pair).  Then, in one run:

**cost** -- the same work on three layouts, alternating, ``--reps`` times each:
``sqlite+whoosh`` (the default: the SQLite store, the Whoosh index), ``sqlite+pg-index``
(the PostgreSQL index, the store still SQLite) and ``pg+pg`` (store and index on PostgreSQL: a
one-node cluster).  Steps: ``tree-first`` (``indexerd index`` of TREE, default the shared
corpus, from an empty state), ``tree-nochange`` (again, nothing changed), ``web-first`` (a crawl
of TREE's python-docs served by nginx on loopback, politeness off) and ``web-nochange`` (the
re-crawl: conditional GETs).  Wall time, median; ratios against ``sqlite+whoosh``.

**scale** -- ``--hosts`` loopback hosts (127.0.1.N, one Python server each) of ``--pages``
pages, each page answering after ``--page-seconds`` (0.1 s), crawled with a politeness delay of ``--delay`` s, as 12
web sources of hosts/12 hosts each; 1, 2 and 3 nodes (``indexerd run`` processes on the shared
store and index) start together; wall time from the start until every source's pass is
recorded complete in the shared store, requests/s from the servers' logs.

**scale-site** -- the same hosts as *one* web source (a seed on each host, its pages linking
across hosts): every node takes part in the one pass, host by host (the shared frontier); wall
time until the pass is over for the cluster.
"""
from __future__ import annotations

import argparse
from collections import Counter
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

LAYOUTS = ("sqlite+whoosh", "sqlite+pg-index", "pg+pg")
#: web sources of the scale step (a node runs at most 4 passes at once: the daemon's pool)
SOURCES = 12
ENV = {k: v for k, v in os.environ.items() if k not in ("INDEXERD_CONFIG", "STATE_DIRECTORY", "RUNTIME_DIRECTORY",
                                                         "NOTIFY_SOCKET", "PYTHONDONTWRITEBYTECODE")}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def default_tree() -> str:
    shared = REPO.parent / "shared" / "corpus"
    return str(shared) if shared.is_dir() else str(REPO / "tests" / "fixtures")


class Layout:
    """The config head of one layout (a fresh schema for each repetition)."""

    def __init__(self, pg_url: str) -> None:
        self.url = pg_url
        self.n = 0

    def toml(self, layout: str) -> str:
        self.n += 1
        out = ""
        if layout != "sqlite+whoosh":
            out += f'[index]\nengine = "postgresql"\n[index.postgresql]\nurl = "{self.url}"\nschema = "bix{self.n}"\n'
        if layout == "pg+pg":
            out += f'[store]\nurl = "{self.url}"\nschema = "bst{self.n}"\n'
        return out


def indexerd(*args: str, cfg: Path) -> float:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "indexerd.cli.main", *args, "-c", str(cfg)], env=ENV, cwd=REPO,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"indexerd {' '.join(args)} exited {p.returncode}: {p.stderr[-2000:]}")
    return time.perf_counter() - t0


def cost(tree: str, reps: int, layouts: Layout, work: Path) -> dict:
    from nginxsite import Nginx

    docs = Path(tree) / "python-docs"
    site_root = docs if docs.is_dir() else Path(tree)
    times: dict[tuple[str, str], list[float]] = {}
    with Nginx(site_root, work / "nginx") as ngx:
        for rep in range(reps):
            for layout in LAYOUTS:
                d = work / f"{layout}-{rep}"
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir(parents=True)
                head = f'state_dir = "{d / "state"}"\nlog_level = "warning"\n' + layouts.toml(layout)
                tree_cfg = d / "tree.toml"
                tree_cfg.write_text(head + f'[[sources.filesystem]]\nname = "tree"\npath = "{tree}"\n')
                web_cfg = d / "web.toml"
                web_cfg.write_text(head.replace(str(d / "state"), str(d / "webstate")) +
                                   f'[[sources.web]]\nname = "site"\nseeds = ["{ngx.base}/index.html"]\n'
                                   'sitemaps = false\n[sources.web.politeness]\nmin_delay = "0s"\n'
                                   'good_guy_factor = 0.0\n')
                for step, cfg in (("tree-first", tree_cfg), ("tree-nochange", tree_cfg),
                                  ("web-first", web_cfg), ("web-nochange", web_cfg)):
                    t = indexerd("index", cfg=cfg)
                    times.setdefault((layout, step), []).append(t)
                    log(f"rep {rep + 1} {layout:16} {step:14} {t:7.2f} s")
    out = {}
    for (layout, step), ts in times.items():
        out.setdefault(step, {})[layout] = statistics.median(ts)
    return out


def scale(hosts: int, pages: int, delay: float, layouts: Layout, work: Path, node_counts=(1, 2, 3),
          one_site: bool = False, page_seconds: float = 0.1, reps: int = 1, late: float | None = None) -> dict:
    """The scale step, ``reps`` times, the node counts in alternating order (1,2,3 then 3,2,1);
    ``one_site``: one web source over every host instead of 12 (seeded on each, its pages
    linking across hosts: the shared frontier, host by host); ``late``: the last node starts
    that many seconds after the others (a node joining mid-pass).  Each count's runs, and their
    median wall, requests/s and each node's delay from its start to its first request."""
    runs_by_count: dict[int, list[dict]] = {c: [] for c in node_counts}
    for rep in range(reps):
        order = list(node_counts) if rep % 2 == 0 else list(reversed(node_counts))
        for count in order:
            r = _scale_once(hosts, pages, delay, layouts, work, count, one_site, page_seconds, late)
            r["rep"] = rep + 1
            runs_by_count[count].append(r)
    results = {}
    for count, rs in runs_by_count.items():
        results[count] = {"wall": statistics.median(r["wall"] for r in rs), "rps": statistics.median(r["rps"] for r in rs),
                          "span": statistics.median(r["span"] for r in rs),
                          "requests": rs[0]["requests"], "sources_by_node": rs[-1]["sources_by_node"],
                          "asked_twice": max(r["asked_twice"] for r in rs), "runs": rs}
    return results


def _scale_once(hosts: int, pages: int, delay: float, layouts: Layout, work: Path, count: int, one_site: bool,
                page_seconds: float, late: float | None) -> dict:
    """One run of :func:`scale` with ``count`` nodes."""
    from cluster import Node, SharedDb, serve_tree, serve_web
    from httpsite import Site

    results = {}
    for count in (count,):
        sites = [Site(f"127.0.1.{10 + i}").start() for i in range(hosts)]
        try:
            head = layouts.toml("pg+pg")
            store_schema = head.split('schema = "')[-1].split('"')[0]
            web = ""
            if one_site:
                serve_web(sites, pages, "w", page_seconds)
                names = {"site"}
                seeds = ", ".join(f'"{s.url("/p0.html")}"' for s in sites)
                web = (f'[[sources.web]]\nname = "site"\nseeds = [{seeds}]\ninterval = "1h"\n'
                       f'sitemaps = false\ntimeout = "10s"\nallowed_domains = {json.dumps([s.address for s in sites])}\n'
                       f'allowed_ports = {json.dumps(sorted({s.port for s in sites}))}\n'
                       f'[sources.web.politeness]\nmin_delay = "{delay}s"\ngood_guy_factor = 2.0\n\n')
            else:
                for i, s in enumerate(sites):
                    serve_tree(s, "/", pages, f"h{i}", page_seconds)
                names = {f"part{g}" for g in range(SOURCES)}
                for g, group in enumerate(sites[i::SOURCES] for i in range(SOURCES)):
                    seeds = ", ".join(f'"{s.url("/p0.html")}"' for s in group)
                    web += (f'[[sources.web]]\nname = "part{g}"\nseeds = [{seeds}]\ninterval = "1h"\n'
                            f'sitemaps = false\ntimeout = "10s"\n[sources.web.politeness]\nmin_delay = "{delay}s"\n'
                            'good_guy_factor = 2.0\n\n')
            base = work / f"scale-{count}"
            shutil.rmtree(base, ignore_errors=True)
            # each node signs its requests, so the servers' logs say who asked
            # (a product token: letters, so n1 signs "bench-a")
            nodes = [Node(base, f"n{i + 1}", head + web.replace('name = "site"\n', f'name = "site"\n'
                                                                 f'user_agent = "bench-{chr(97 + i)}/1.0"\n'))
                     for i in range(count)]
            db = SharedDb(layouts.url, store_schema, "unused")
            t0 = time.monotonic()
            started: dict[str, float] = {}
            for i, n in enumerate(nodes):
                if late is not None and count > 1 and i == count - 1:
                    while time.monotonic() - t0 < late:
                        time.sleep(0.05)
                started[f"bench-{chr(97 + i)}"] = time.monotonic()
                n.start()
            while True:
                runs = db.runs()
                finished = not one_site or '"finished"' in str(db.rows("SELECT value FROM {s}.meta WHERE key = "
                                                                      "'web:site:pass'"))
                if finished and set(runs) >= names and all(runs[n][0] and not runs[n][1] for n in names):
                    break
                if time.monotonic() - t0 > 1800:
                    raise RuntimeError("the crawl did not end within 30 min")
                time.sleep(0.2)
            wall = time.monotonic() - t0
            requests = sum(len(s.log) for s in sites)
            asked = Counter(f"{h.method} {s.base}{h.path}" for s in sites for h in s.log)
            twice = sorted(u for u, c in asked.items() if c > 1)
            if twice:
                log(f"{count} node(s): asked more than once: {twice[:10]}")
            by_node = {}
            if one_site:  # hosts per node
                for _, node in db.rows("SELECT host, node FROM {s}.crawl_hosts"):
                    by_node[node] = by_node.get(node, 0) + 1
            for name, (_, _, node) in runs.items() if not one_site else ():
                by_node[node] = by_node.get(node, 0) + 1
            first: dict[str, float] = {}
            for s in sites:
                for h in s.log:
                    agent = (h.header("User-Agent") or "").split("/")[0]
                    if agent in started:
                        first[agent] = min(first.get(agent, float("inf")), h.arrived - started[agent])
            for n in nodes:
                n.stop()
            db.close()
            to_first = {f"n{ord(a[-1]) - 96}": round(v, 2) for a, v in sorted(first.items())} if one_site else {}
            # the crawl itself, without the processes' start-up: first request to last answer
            hits = [h for s in sites for h in s.log]
            span = max(h.completed or h.arrived for h in hits) - min(h.arrived for h in hits)
            results[count] = {"wall": wall, "requests": requests, "rps": requests / wall, "sources_by_node": by_node,
                              "asked_twice": len(twice), "first_request_s": to_first, "span": span,
                              "span_rps": requests / span}
            log(f"{count} node(s): {wall:.1f} s, {requests} requests, {requests / wall:.1f}/s, "
                f"{'hosts' if one_site else 'sources'} {by_node}, first request after start {to_first}, "
                f"first request to last answer {span:.1f} s ({requests / span:.1f}/s)")
        finally:
            for s in sites:
                s.close()
    return results[count]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tree", nargs="?", default=default_tree())
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--hosts", type=int, default=24)
    ap.add_argument("--pages", type=int, default=12)
    ap.add_argument("--delay", type=float, default=0.5)
    ap.add_argument("--page-seconds", type=float, default=0.1, help="how long each page takes to answer")
    ap.add_argument("--only", choices=("cost", "scale", "scale-site"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--nodes", default="1,2,3", help="node counts of the scale steps")
    ap.add_argument("--late", type=float, default=None,
                    help="scale-site: the last node starts this many seconds after the others")
    args = ap.parse_args()
    from pg import PgServer

    work = Path(args.work or tempfile.mkdtemp(prefix="bench-cluster-"))
    counts = tuple(int(n) for n in args.nodes.split(","))
    server = PgServer.start()
    try:
        server.wait_ready()
        server.admin("ALTER SYSTEM SET fsync = on")
        server.admin("ALTER SYSTEM SET synchronous_commit = off")
        server.admin("SELECT pg_reload_conf()")
        url = server.create_database("bench")
        layouts = Layout(url)
        out: dict = {"tree": args.tree}
        if args.only in (None, "cost"):
            out["cost"] = cost(args.tree, args.reps, layouts, work)
        if args.only in (None, "scale"):
            out["scale"] = scale(args.hosts, args.pages, args.delay, layouts, work, counts, page_seconds=args.page_seconds,
                                 reps=args.reps)
        if args.only in (None, "scale-site"):
            out["scale-site"] = scale(args.hosts, args.pages, args.delay, layouts, work, counts, one_site=True,
                                      page_seconds=args.page_seconds, reps=args.reps, late=args.late)
    finally:
        server.stop()
    print(json.dumps(out, indent=1))
    if "cost" in out:
        print("\n| step | " + " | ".join(LAYOUTS) + " | pg+pg / sqlite+whoosh |")
        print("| --- |" + " ---: |" * (len(LAYOUTS) + 1))
        for step, row in out["cost"].items():
            base = row["sqlite+whoosh"]
            print(f"| {step} | " + " | ".join(f"{row[k]:.2f} s" for k in LAYOUTS) + f" | {row['pg+pg'] / base:.2f}x |")
    for step, unit in (("scale", "sources"), ("scale-site", "hosts")):
        if step not in out:
            continue
        print(f"\n{step} (medians of {args.reps})\n| nodes | wall | requests | requests/s | speed-up | crawl span "
              f"| speed-up | {unit} per node | walls | spans | first request after start |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | --- |")
        one = next(iter(out[step].values()))
        for n, r in out[step].items():
            walls = " / ".join(f"{x['wall']:.1f}" for x in r["runs"])
            spans = " / ".join(f"{x['span']:.1f}" for x in r["runs"])
            firsts = "; ".join(str(x.get("first_request_s")) for x in r["runs"])
            print(f"| {n} | {r['wall']:.1f} s | {r['requests']} | {r['rps']:.1f} | {one['wall'] / r['wall']:.2f}x | "
                  f"{r['span']:.1f} s | {one['span'] / r['span']:.2f}x | {r['sources_by_node']} | {walls} | {spans} "
                  f"| {firsts} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
