"""Several ``indexerd run`` nodes on one PostgreSQL server (the cluster tests): their configs,
processes and the shared database as the tests read it, and a site of many loopback hosts.

Each node is a real process with its own state dir and control socket and one config naming it
(``node``), the shared store (``[store]``) and the shared index (``[index] engine =
"postgresql"``).  The site is one :class:`~httpsite.Site` per host on 127.0.0.N (the whole
127.0.0.0/8 range is loopback on Linux), each logging every request with its arrival and
completion times, so the tests judge politeness from the servers' own logs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from cliharness import LAUNCH, isolated_env, no_system_config, run_in_process
from conftest import stop_daemon
from httpsite import Hit, Site

REPO = Path(__file__).resolve().parents[1]
#: every node's and command's environment (tests/cliharness.py: no $INDEXERD_* or systemd
#: variables, XDG dirs of this run, no system config)
ENV = isolated_env(None)
NO_SYSTEM_CONFIG = no_system_config(None)


class Node:
    """One node: ``indexerd run -c <base>/<name>/indexerd.toml``."""

    def __init__(self, base: Path, name: str, common: str) -> None:
        self.name = name
        self.dir = base / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.cfg = self.dir / "indexerd.toml"
        self.cfg.write_text(f'state_dir = "{self.dir / "state"}"\ncontrol_socket = "{self.dir / "s.sock"}"\n'
                            f'node = "{name}"\nlog_level = "info"\n\n{common}', encoding="utf-8")
        self.log_path = self.dir / "daemon.log"
        self.proc: subprocess.Popen | None = None
        self._fh = None

    def start(self) -> None:
        self._fh = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-c", LAUNCH, NO_SYSTEM_CONFIG, "run", "-c", str(self.cfg)],
                                     stdout=self._fh, stderr=subprocess.STDOUT, env=ENV, cwd=REPO)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self._close()

    def stop(self) -> str | None:
        """SIGTERM; None after a clean exit 0 within 15 s, else why not."""
        if self.proc is None:
            return None
        why = stop_daemon(self.proc, 15.0)
        self._close()
        return why

    def _close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def ctl(self, *args: str) -> subprocess.CompletedProcess:
        """``indexerd ctl ARGS -c CFG`` through the CLI's main in this process."""
        return run_in_process(["ctl", *args, "-c", str(self.cfg)], ENV, NO_SYSTEM_CONFIG)

    def status(self) -> dict | None:
        p = self.ctl("status", "--json")
        return json.loads(p.stdout) if p.returncode == 0 else None

    def search(self, query: str, limit: int = 100) -> list[dict]:
        p = self.ctl("search", query, "--json", "--limit", str(limit))
        assert p.returncode == 0, f"{self.name}: ctl search {query!r}: {p.stderr}\n{self.log()[-3000:]}"
        return json.loads(p.stdout)


class SharedDb:
    """The tests' own look at the shared store and index (psycopg, autocommit)."""

    def __init__(self, url: str, store_schema: str, index_schema: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True)
        self.store = store_schema
        self.index = index_schema

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        try:
            cur = self.conn.execute(sql.format(s=self.store, i=self.index), params)
            return cur.fetchall() if cur.description else []
        except Exception as e:  # a table not created yet reads as empty
            if "does not exist" in str(e):
                return []
            raise

    def runs(self) -> dict[str, tuple]:
        """``{source: (completed_at, running_since, node)}``."""
        return {r[0]: r[1:] for r in self.rows("SELECT source, completed_at, running_since, node FROM {s}.source_runs")}

    def close(self) -> None:
        self.conn.close()


def page_html(title: str, word: str, links: list[str]) -> bytes:
    anchors = "".join(f'<a href="{u}">{u}</a> ' for u in links)
    return (f"<!doctype html><html><head><title>{title}</title></head><body><p>{word} clusterpage "
            f"text for the cluster test.</p>{anchors}</body></html>").encode()


def serve_tree(site: Site, prefix: str, pages: int, word: str, seconds: float) -> list[str]:
    """``pages`` HTML pages under ``prefix`` on ``site``: page j links to pages 2j+1, 2j+2 and
    back to page 0 (the seen set must drop that), each answering after ``seconds``; returns
    their paths."""
    paths = [f"{prefix}p{j}.html" for j in range(pages)]
    for j, path in enumerate(paths):
        links = [paths[k] for k in (2 * j + 1, 2 * j + 2) if k < pages] + [paths[0]]
        body = page_html(f"{word} {j}", f"{word}{j}", links)

        def handler(hit: Hit, body=body):
            time.sleep(seconds)
            return 200, {"Content-Type": "text/html; charset=utf-8"}, body

        site.add(path, handler=handler)
    site.add("/robots.txt", body=b"User-agent: *\nAllow: /\n", headers={"Content-Type": "text/plain"})
    return paths


def serve_web(sites: list[Site], pages: int, word: str, seconds: float) -> list[str]:
    """``pages`` HTML pages on each of ``sites`` (one web of many hosts): page j of site i links
    to pages 2j+1, 2j+2 and 0 of its site and to page j of the next site, each answering after
    ``seconds``; returns their URLs."""
    urls = []
    for i, site in enumerate(sites):
        nxt = sites[(i + 1) % len(sites)]
        for j in range(pages):
            links = [site.url(f"/p{k}.html") for k in (2 * j + 1, 2 * j + 2, 0) if k < pages]
            body = page_html(f"{word} {i} {j}", f"{word}{i}x{j}", links + [nxt.url(f"/p{j}.html")])

            def handler(hit: Hit, body=body):
                time.sleep(seconds)
                return 200, {"Content-Type": "text/html; charset=utf-8"}, body

            site.add(f"/p{j}.html", handler=handler)
            urls.append(site.url(f"/p{j}.html"))
        site.add("/robots.txt", body=b"User-agent: *\nAllow: /\n", headers={"Content-Type": "text/plain"})
    return urls


def overlaps_and_gaps(sites: list[Site]) -> tuple[list[str], float]:
    """From the servers' logs: the overlapping requests to one host (described), and the
    smallest gap (seconds) between the end of one response and the next request to its host."""
    overlaps, smallest = [], float("inf")
    for s in sites:
        hits = sorted(s.log, key=lambda h: h.arrived)  # robots.txt too: it is a request to the host
        for a, b in zip(hits, hits[1:]):
            end = a.completed if a.completed is not None else a.arrived
            if b.arrived < end:
                overlaps.append(f"{s.base}: {b.path} arrived {end - b.arrived:.3f} s before {a.path} ended")
            else:
                smallest = min(smallest, b.arrived - end)
    return overlaps, smallest


def wait_for(what: str, predicate, timeout: float, nodes: list[Node], poll: float = 0.25):
    """Poll ``predicate()`` until truthy (returned), else fail naming ``what`` with the nodes' logs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = predicate()
        if v:
            return v
        time.sleep(poll)
    logs = "\n".join(f"--- {n.name} ---\n{n.log()[-4000:]}" for n in nodes)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{logs}")
