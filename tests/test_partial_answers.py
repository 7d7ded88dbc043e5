"""Answers say what the index is (issue 34): while a source's first pass or a rebuild of the
index runs, ``ctl search`` (text and ``--json``), ``/api/search`` and the search page say the
answer is partial, with the pass's progress, and still give what is indexed; ``ctl search``
exits 5 when such an answer is empty.

A real ``indexerd run`` crawls a loopback site whose second page is held at a gate, so the pass
stays in progress until the test opens it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from conftest import stop_daemon
from daemonhttp import ENV, REPO, free_port
from httpsite import Site
from httpsite import site as site_fixture

site = site_fixture
WAIT_SECONDS = 30.0
EXIT_PARTIAL_EMPTY = 5


class HeldCrawl:
    """A daemon crawling ``site``: ``/`` (says ``kestrel``) links to ``/held`` (says ``osprey``),
    which answers only once :attr:`gate` is set."""

    def __init__(self, base: Path, site: Site) -> None:
        self.base, self.site = base, site
        self.gate = threading.Event()
        self.port = free_port()
        self.cfg = base / "indexerd.toml"
        self.proc: subprocess.Popen | None = None
        site.add("/", body=b"<html><head><title>Start</title></head><body><main><p>A kestrel hovers."
                            b' <a href="/held">more</a></p></main></body></html>',
                 headers={"Content-Type": "text/html; charset=utf-8"})
        site.add("/held", handler=self._held)
        self.write_config()

    def _held(self, hit):
        self.gate.wait(WAIT_SECONDS)
        return (200, {"Content-Type": "text/html; charset=utf-8"},
                b"<html><head><title>Held</title></head><body><main><p>An osprey dives.</p></main></body></html>")

    def write_config(self, extra_index: str = "") -> None:
        self.cfg.write_text(f"""
state_dir = "{self.base / 'state'}"
control_socket = "{self.base / 's.sock'}"
[index]
commit_interval = "0.2s"
{extra_index}
[http]
listen = "127.0.0.1:{self.port}"
[[sources.web]]
name = "site"
seeds = ["{self.site.url('/')}"]
sitemaps = false
workers = 1
interval = "1d"
[sources.web.politeness]
min_delay = "0s"
good_guy_factor = 0.0
""", encoding="utf-8")

    def start(self) -> None:
        self.log = open(self.base / "daemon.log", "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "indexerd.cli.main", "run", "-c", str(self.cfg),
                                      "--log-level", "info"], stdout=self.log, stderr=subprocess.STDOUT,
                                     env=ENV, cwd=REPO)

    def stop(self) -> None:
        if self.proc is not None:
            why = stop_daemon(self.proc, 15)
            self.log.close()
            self.proc = None
            assert why is None, why

    def ctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "indexerd.cli.main", "ctl", "-c", str(self.cfg), *args],
                              capture_output=True, text=True, env=ENV, cwd=REPO, timeout=60)

    def get(self, path: str) -> bytes:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=30) as r:
            return r.read()

    def await_held(self) -> None:
        """Until the crawl asks for ``/held`` and ``/`` is searchable."""
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            held = any(h.path == "/held" for h in self.site.log)
            if held and json.loads(self.ctl("search", "kestrel", "--json").stdout or "[]"):
                return
            assert self.proc is not None and self.proc.poll() is None, self.daemon_log()
            time.sleep(0.1)
        raise AssertionError(f"the crawl never reached /held with / searchable:\n{self.daemon_log()}")

    def await_pass_end(self, serial_before: int = 0) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            p = self.ctl("status", "--json")
            if p.returncode == 0:
                s = json.loads(p.stdout)["sources"]["site"]
                if not s["running"] and (s["last_run"] or {}).get("finished") and s["last_run"]["counts"]:
                    if s["last_run"]["counts"].get("indexed", 0) + s["last_run"]["counts"].get("unchanged", 0) >= 2:
                        return
            time.sleep(0.1)
        raise AssertionError(f"the pass did not end:\n{self.daemon_log()}")

    def daemon_log(self) -> str:
        return (self.base / "daemon.log").read_text(encoding="utf-8", errors="replace")[-4000:]


@pytest.fixture
def crawl(site):
    base = Path(tempfile.mkdtemp(prefix="ixp"))  # short: the control socket path
    c = HeldCrawl(base, site)
    yield c
    c.gate.set()
    c.stop()
    shutil.rmtree(base, ignore_errors=True)


def _check_partial(c: HeldCrawl, why: str) -> None:
    """While /held is held: every way of asking says the answer is partial, with progress."""
    p = c.ctl("search", "kestrel", "--json")
    assert p.returncode == 0, p.stderr
    assert [h["title"] for h in json.loads(p.stdout)] == ["Start"]  # what is there is still given
    said = json.loads(p.stderr.strip().splitlines()[-1])
    assert said["partial"] is True
    [prog] = said["progress"]
    assert (prog["source"], prog["why"], prog["running"], prog["unit"], prog["total"]) == \
        ("site", why, True, "pages", None)
    assert prog["done"] >= 1

    p = c.ctl("search", "osprey")            # not indexed yet: empty, and partial
    assert p.returncode == EXIT_PARTIAL_EMPTY, (p.returncode, p.stdout, p.stderr)
    assert p.stdout == "no documents match 'osprey'\n"
    doing = "rebuilding from the sources" if why == "rebuild" else "first pass"
    assert f"the index is incomplete ({doing}: site {prog['done']} pages so far)" in p.stderr

    console = subprocess.run(      # the console script's fast path leaves a partial answer to the full one
        [sys.executable, "-c", "import sys; from indexerd.cli.entry import main; sys.exit(main())",
         "ctl", "-c", str(c.cfg), "search", "osprey"], capture_output=True, text=True, env=ENV, cwd=REPO, timeout=60)
    assert (console.returncode, console.stdout) == (EXIT_PARTIAL_EMPTY, p.stdout)
    assert "the index is incomplete" in console.stderr

    p = c.ctl("search", "osprey", "--json")
    assert (p.returncode, p.stdout) == (EXIT_PARTIAL_EMPTY, "[]\n")
    assert json.loads(p.stderr.strip().splitlines()[-1])["partial"] is True

    api = json.loads(c.get("/api/search?q=kestrel"))
    assert api["partial"] is True and api["total"] == 1
    assert [(x["source"], x["why"], x["running"]) for x in api["progress"]] == [("site", why, True)]

    page = c.get("/?q=osprey").decode()
    assert '<p class="partial" id="partial" role="status">The index is incomplete' in page
    assert f"({doing}:" in page and "site " in page and " pages so far" in page


def _check_complete(c: HeldCrawl) -> None:
    p = c.ctl("search", "osprey")
    assert p.returncode == 0 and "Held" in p.stdout and p.stderr == "", (p.stdout, p.stderr)
    p = c.ctl("search", "nothingmatchesthis")
    assert (p.returncode, p.stderr) == (0, "")  # complete and empty: 0, as always
    api = json.loads(c.get("/api/search?q=osprey"))
    assert (api["partial"], api["progress"], api["total"]) == (False, [], 1)
    assert 'id="partial"' not in c.get("/?q=osprey").decode()


def test_a_first_pass_in_progress_makes_every_answer_say_it_is_partial(crawl):
    crawl.start()
    crawl.await_held()
    _check_partial(crawl, "first pass")
    crawl.gate.set()
    crawl.await_pass_end()
    _check_complete(crawl)


def test_a_rebuild_after_an_analysis_change_makes_answers_partial_until_its_pass_ends(crawl):
    crawl.gate.set()
    crawl.start()
    crawl.await_pass_end()
    _check_complete(crawl)
    crawl.stop()
    crawl.gate.clear()
    crawl.site.log.clear()
    crawl.write_config("fold_diacritics = false")   # another text analysis: the index is rebuilt
    crawl.start()                                     # the site's pass runs at once, not in a day
    crawl.await_held()
    _check_partial(crawl, "rebuild")
    crawl.gate.set()
    crawl.await_pass_end()
    _check_complete(crawl)


def test_without_a_daemon_a_search_says_which_sources_have_not_completed_a_pass(tmp_path):
    """``ctl search`` with no daemon reads the index itself, and the state store for what is
    not in it yet: a source added to the config but never passed makes the answer partial
    (stderr, exit 5 when empty), as the daemon's answer would."""
    for name, word in (("a", "kestrel"), ("b", "osprey")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f.txt").write_text(f"A {word} note\n", encoding="utf-8")
    cfg = tmp_path / "indexerd.toml"

    def config(*names: str) -> None:
        cfg.write_text(f'state_dir = "{tmp_path / "state"}"\ncontrol_socket = "{tmp_path / "s.sock"}"\n'
                       + "".join(f'[[sources.filesystem]]\nname = "{n}"\npath = "{tmp_path / n}"\n' for n in names),
                       encoding="utf-8")

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "indexerd.cli.main", *args], capture_output=True, text=True,
                              env=ENV, cwd=REPO, timeout=60)

    config("a")
    assert cli("index", "-c", str(cfg)).returncode == 0
    p = cli("ctl", "search", "kestrel", "-c", str(cfg))
    assert (p.returncode, p.stderr) == (0, "") and "f.txt" in p.stdout   # complete: nothing said
    config("a", "b")                                                      # b never passed yet
    p = cli("ctl", "search", "kestrel", "-c", str(cfg), "--json")
    assert p.returncode == 0 and len(json.loads(p.stdout)) == 1
    said = json.loads(p.stderr.strip().splitlines()[-1])
    assert said["partial"] is True
    assert [(x["source"], x["why"], x["running"]) for x in said["progress"]] == [("b", "first pass", False)]
    p = cli("ctl", "search", "osprey", "-c", str(cfg))
    assert p.returncode == EXIT_PARTIAL_EMPTY, (p.returncode, p.stdout, p.stderr)
    assert "the index is incomplete (first pass: b)" in p.stderr
    assert cli("index", "-c", str(cfg)).returncode == 0
    p = cli("ctl", "search", "osprey", "-c", str(cfg))
    assert (p.returncode, p.stderr) == (0, "") and "f.txt" in p.stdout
