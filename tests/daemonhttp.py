"""A real ``indexerd run`` with its HTTP listener on loopback, for the page, API and metrics
tests (tests/test_http_page.py, tests/test_http_api.py) and the ctl-through-the-daemon tests.

The tree it serves is made here so that the expected answers are known: a top hit for
``falcon``, 25 documents for ``bird`` (three pages of 10), two sources, three media types,
dates spread over 2021-2024, and a hostile document whose title and text carry ``<script>`` and
``"><img onerror=...>``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from cliharness import LAUNCH, isolated_env, no_system_config, run_in_process
from conftest import stop_daemon

REPO = Path(__file__).resolve().parents[1]
READY_TIMEOUT = 60.0
#: the daemon's and ctl's environment (tests/cliharness.py: no $INDEXERD_* or systemd variables,
#: XDG dirs of this run, no system config)
ENV = isolated_env(None)
NO_SYSTEM_CONFIG = no_system_config(None)

#: the title of the hostile document: a script and an attribute break-out with an onerror
HOSTILE_TITLE = '<script>window.__pwned="title"</script>"><img src=x onerror="window.__pwned=\'img\'">'
HOSTILE_TEXT = 'kestrel <script>alert(1)</script> "><img src=x onerror=alert(2)>'
BIRD_DOCS = 25


def utc(y: int, m: int, d: int) -> float:
    return datetime(y, m, d, 12, tzinfo=timezone.utc).timestamp()


def _write(path: Path, text: str, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (mtime, mtime))


def _escape_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def make_tree(base: Path) -> tuple[Path, Path]:
    """``notes`` and ``papers`` trees; returns their roots."""
    notes, papers = base / "notes", base / "papers"
    _write(notes / "falcon.html",
           "<html><head><title>Peregrine falcon</title></head><body><main><h1>Peregrine falcon</h1>"
           "<p>The peregrine falcon is the fastest falcon; a falcon stoops at prey. falcon falcon.</p>"
           "</main></body></html>", utc(2024, 3, 1))
    _write(papers / "falcon-note.txt", "Notes on raptors\n\nA falcon was seen once.\n", utc(2022, 6, 1))
    for i in range(BIRD_DOCS):
        tree = notes if i % 2 else papers
        ext = ".md" if i % 3 == 0 else ".txt"
        head = f"# Bird number {i:02d}\n\n" if ext == ".md" else f"Bird number {i:02d}\n\n"
        _write(tree / f"birds/bird-{i:02d}{ext}", head + f"A bird sighting, entry {i}. bird song.\n",
               utc(2021 + i % 4, 1 + i % 12, 1 + i % 28))
    _write(notes / "hostile.html",
           f"<html><head><title>{_escape_html(HOSTILE_TITLE)}</title></head><body><main>"
           f"<p>{_escape_html(HOSTILE_TEXT)}</p></main></body></html>", utc(2023, 5, 5))
    _write(papers / "hostile.txt", HOSTILE_TEXT + "\n", utc(2023, 5, 6))
    return notes, papers


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpDaemon:
    """One ``indexerd run`` with ``[http]`` on; ``base`` holds the trees, state and log.
    ``token``: required on every request, read by the daemon from an environment variable
    (``token_in="env"``) or from a file (``"file"``)."""

    def __init__(self, base: Path, *, listen_host: str = "127.0.0.1", token: str | None = None,
                 token_in: str = "env") -> None:
        self.base = base
        self.notes, self.papers = make_tree(base)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.sock = base / "s.sock"
        self.cfg = base / "indexerd.toml"
        self.log_path = base / "daemon.log"
        self.env = dict(ENV)
        http = [f'listen = "{listen_host}:{self.port}"', "page_size = 10"]
        if token and token_in == "file":           # the token file: its first line, the rest ignored
            (base / "http-token").write_text(token + "\nignored\n", encoding="utf-8")
            http.append(f'token_file = "{base / "http-token"}"')
        elif token:
            self.env["INDEXERD_TEST_TOKEN"] = token
            http.append('token_env = "INDEXERD_TEST_TOKEN"')
        self.cfg.write_text("\n".join([
            f'state_dir = "{base / "state"}"', f'control_socket = "{self.sock}"', "",
            "[index]", 'commit_interval = "0.2s"', "",
            "[http]", *http, "",
            "[[sources.filesystem]]", 'name = "notes"', f'path = "{self.notes}"', "",
            "[[sources.filesystem]]", 'name = "papers"', f'path = "{self.papers}"', ""]),
            encoding="utf-8")
        self.token = token
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCH, NO_SYSTEM_CONFIG, "run", "-c", str(self.cfg), "--log-level", "info"],
            stdout=self._log, stderr=subprocess.STDOUT, env=self.env, cwd=REPO)
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the daemon exited {self.proc.returncode}:\n{self.log()}")
            p = self.ctl("status", "--json")
            if p.returncode == 0:
                st = json.loads(p.stdout)
                if all((s.get("last_run") or {}).get("finished") for s in st["sources"].values()):
                    if self.get("/healthz", check=False)[0] == 200:
                        return
            time.sleep(0.1)
        raise AssertionError(f"the daemon was not ready within {READY_TIMEOUT} s:\n{self.log()}")

    def stop(self) -> None:
        if self.proc is not None:
            why = stop_daemon(self.proc, 15)
            self._log.close()
            self.proc = None
            assert why is None, f"{why}\n{self.log()}"

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-4000:]

    def ctl(self, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        """``indexerd ctl -c CFG ARGS`` through the CLI's main in this process (``env``: its
        environment, default the daemon's)."""
        return run_in_process(["ctl", "-c", str(self.cfg), *args], env or self.env, NO_SYSTEM_CONFIG)

    def get(self, path: str, *, headers: dict | None = None, check: bool = True) -> tuple[int, object, bytes]:
        """GET ``path``; (status, headers, body).  The token is sent when the daemon has one."""
        h = dict(headers or {})
        if self.token and "Authorization" not in h:
            h["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.url + path, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            if check:
                raise
            return e.code, e.headers, e.read()
        except OSError:
            if check:
                raise
            return 0, {}, b""

    def get_json(self, path: str):
        status, _, body = self.get(path)
        assert status == 200
        return json.loads(body)


def short_base() -> Path:
    """A short temp dir (AF_UNIX paths hold at most 107 bytes)."""
    return Path(tempfile.mkdtemp(prefix="ixh"))


@contextmanager
def serving(d: HttpDaemon) -> Iterator[HttpDaemon]:
    """``d`` started, then stopped and its base dir removed (a module fixture's body)."""
    try:
        d.start()
        yield d
    finally:
        d.stop()
        shutil.rmtree(d.base, ignore_errors=True)
