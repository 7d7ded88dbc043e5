"""Shared fixtures: a real corpus (../shared/corpus, else documents every Python install has),
temp state dirs, and the real CLI (tests/cliharness.py: in this process or a subprocess, in an
environment of its own)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from cliharness import CLI  # noqa: F401  (the tests import it from here)
from indexerd.index import engines as _engines  # noqa: F401  (registers the index engines with the config)
from indexerd.sources import registry as _registry  # noqa: F401  (registers the kinds of source with the config, as the CLI does)

REPO = Path(__file__).resolve().parents[1]

# ``ctl search`` memorises a config file's keys under $XDG_CACHE_HOME (indexerd/cli/configmemo.py):
# the tests' processes write theirs in a directory of this run, not in the user's home.
import atexit as _atexit  # noqa: E402
import tempfile as _tempfile  # noqa: E402

os.environ["XDG_CACHE_HOME"] = _tempfile.mkdtemp(prefix="indexerd-tests-cache-")
_atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], True)  # each run's own, gone with it

# -- parallel runs (pytest-xdist, ``-n 4`` in pyproject.toml) ---------------------------------------
# A test marked ``alone`` asserts a wall-clock or memory bound (an edit searchable within 2 s, a
# stop within 6.5 s, a peak RSS): it runs with no other test beside it.  Every test takes a
# shared lock for its whole run (set-up and teardown included) and an ``alone`` test the
# exclusive one; a turnstile taken first lets a waiting ``alone`` test in before new shared
# ones (flock alone would let the shared side starve it).  Without xdist nothing is locked.
def _run_lock_paths() -> tuple[Path, Path] | None:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run or not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    import tempfile

    base = Path(tempfile.gettempdir()) / f"indexerd-tests-{run}"
    return base.with_suffix(".lock"), base.with_suffix(".turnstile")


def _alone(item) -> bool:
    return item.get_closest_marker("alone") is not None


#: the exclusive lock an ``alone`` test keeps for the next test when that one is ``alone`` too
#: (the ``alone`` tests are one unit of one worker, :func:`pytest_xdist_make_scheduler`: the
#: other workers drain once for them all, not once each)
_KEPT_LOCK: list = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    paths = _run_lock_paths()
    if paths is None:
        yield
        return
    import fcntl

    alone = _alone(item)
    if _KEPT_LOCK:  # kept by the alone test before this one, which is alone too
        lock = _KEPT_LOCK.pop()
    else:
        lock = open(paths[0], "a")
        with open(paths[1], "a") as turnstile:  # closing a file releases its lock
            fcntl.flock(turnstile, fcntl.LOCK_EX)
            fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
    try:
        yield
    finally:
        if alone and nextitem is not None and _alone(nextitem):
            _KEPT_LOCK.append(lock)
        else:
            lock.close()


def pytest_configure(config):
    """The controller of a parallel run names a directory its workers write to (they inherit
    its environment): which tests are ``alone`` (:func:`pytest_xdist_make_scheduler`)."""
    if not os.environ.get("PYTEST_XDIST_WORKER") and "INDEXERD_TESTS_RUN_DIR" not in os.environ:
        os.environ["INDEXERD_TESTS_RUN_DIR"] = _tempfile.mkdtemp(prefix="indexerd-tests-run-")
        _atexit.register(shutil.rmtree, os.environ["INDEXERD_TESTS_RUN_DIR"], True)


def pytest_collection_modifyitems(session, config, items):
    """Every ``alone`` test first, then the files that cost most (:data:`FILE_SECONDS_TABLE`);
    a worker writes the tests that do not go with their file for its controller's scheduler."""
    try:
        cost = json.loads(FILE_SECONDS_TABLE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cost = {}
    first: dict[str, int] = {}
    for item in items:
        first.setdefault(item.nodeid.split("::", 1)[0], len(first))

    def key(item) -> tuple[bool, float, int]:
        path = item.nodeid.split("::", 1)[0]
        return not _alone(item), -float(cost.get(path, 0.0)), first[path]

    items.sort(key=key)  # stable: a file's tests keep their order otherwise
    worker, run = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("INDEXERD_TESTS_RUN_DIR")
    if worker and run:
        mine = Path(run) / f"units-{worker}.txt"
        units = ((i.nodeid, _unit(i)) for i in items)
        mine.with_suffix(".tmp").write_text("".join(f"{n}\t{u}\n" for n, u in units if u), encoding="utf-8")
        mine.with_suffix(".tmp").rename(mine)


def _unit(item) -> str | None:
    """The unit of work of a test that does not go with its file: ``alone``, or the name of its
    ``xdist_group`` (tests that must not run at the same time, e.g. on /run/indexerd); None:
    its file's."""
    if _alone(item):
        return "alone"
    group = item.get_closest_marker("xdist_group")
    if group is None:
        return None
    return "group:" + str(group.args[0] if group.args else group.kwargs.get("name", "default"))


def pytest_xdist_make_scheduler(config, log):
    """A worker's unit of work is a test file (its module fixtures, daemons and servers start
    once), except the ``alone`` tests: one unit, taken first, run by one worker one after
    another while it holds the exclusive lock (:data:`_KEPT_LOCK`), so the others drain once
    for them all; and each ``xdist_group``, one unit (``--dist loadgroup`` would name it in the
    node ids, but on pytest 9 that does nothing).  The scheduler is asked once every worker has
    collected (and written its tests' units, :func:`_unit`)."""
    from xdist.scheduler import LoadScopeScheduling

    run = Path(os.environ.get("INDEXERD_TESTS_RUN_DIR", "."))

    class FileOrUnit(LoadScopeScheduling):
        units: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.units is None:
                self.units = {}
                for listing in run.glob("units-*.txt"):
                    self.units.update(line.split("\t", 1) for line in listing.read_text(encoding="utf-8").splitlines())
            return self.units.get(nodeid) or nodeid.split("::", 1)[0]

    return FileOrUnit(config, log)


# -- the suite's budget: where its time goes, printed at the end of every run --------------------
# Per test file: the seconds its tests took (set-up, call and teardown) and how many of them ran
# ``alone`` (the other workers idle meanwhile): what to cut or split first.
_FILE_SECONDS: dict[str, list[float]] = {}


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::", 1)[0]
    spent = _FILE_SECONDS.setdefault(path, [0.0, 0.0])
    spent[0] += report.duration
    if "alone" in report.keywords:
        spent[1] += report.duration


def pytest_terminal_summary(terminalreporter, config):
    if not _FILE_SECONDS or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    rows = sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1][0])
    total, alone = sum(v[0] for v in _FILE_SECONDS.values()), sum(v[1] for v in _FILE_SECONDS.values())
    tr = terminalreporter
    tr.write_sep("=", f"seconds per test file: {total:.0f} s of tests, {alone:.0f} s of them alone")
    for path, (spent, by_alone) in rows[:25]:
        tr.write_line(f"{spent:8.1f} s  {by_alone:8.1f} s alone  {path}")
    if config.getoption("write_file_seconds"):
        FILE_SECONDS_TABLE.write_text(json.dumps({path: round(spent, 1) for path, (spent, _) in rows
                                                  if spent >= 1.0}, indent=0) + "\n", encoding="utf-8")
        tr.write_line(f"written: {FILE_SECONDS_TABLE}")


# -- longest file first (pytest-xdist, ``--dist loadfile --no-loadscope-reorder``) ---------------
# A worker takes the next file when it is nearly done with its own, in collection order: the
# files that cost most go first, so no long file starts near the end while the other workers
# idle (longest-processing-time-first scheduling).  What each file cost is the table
# tests/file_seconds.json (``pytest --write-file-seconds`` rewrites it from a whole run); a file
# it does not name comes after, in the usual order.
FILE_SECONDS_TABLE = Path(__file__).with_name("file_seconds.json")


def pytest_addoption(parser):
    parser.addoption("--write-file-seconds", action="store_true", default=False,
                     help="write each test file's seconds of this run to tests/file_seconds.json "
                          "(the order the next runs take the files in)")




SHARED_CORPUS = REPO.parent / "shared" / "corpus"
FIXED_MTIME = 1704067200  # 2024-01-01T00:00:00Z


def _engine_names() -> list[str]:
    """The index engines whose package is in this tree.  An engine's library missing (the test
    extra installs every one) is a failure of the tests that use it, never a skip."""
    import importlib.util

    from indexerd.index.base import ENGINES

    return [name for name in ENGINES if importlib.util.find_spec(f"indexerd.index.{name}") is not None]


#: Engines the engine-parametrised tests run on (``index_engine`` fixture, ``[index] engine``).
ENGINE_NAMES = _engine_names()


# -- the PostgreSQL engine's server: one per session (per xdist worker), started by the first test
# that runs on the postgresql engine; missing server binaries make those tests fail, never skip
_PG_INDEX = {"url": None, "schema": None}
_PG_SCHEMAS = itertools.count(1)


def engine_toml(engine: str, *, fresh: bool = False, schema: str | None = None) -> str:
    """The ``[index]`` table choosing ``engine``; for postgresql with its ``[index.postgresql]``
    table on the session's server, in the current test's schema (``fresh``: a new schema, for a
    test that builds several independent indexes; ``schema``: that one)."""
    text = f'[index]\nengine = "{engine}"\n'
    if engine != "postgresql":
        return text
    if _PG_INDEX["url"] is None:
        raise RuntimeError("the postgresql engine needs the pg_index_server fixture (see _engine_fixtures)")
    schema = schema or (f"ix{next(_PG_SCHEMAS)}" if fresh else _PG_INDEX["schema"])
    return text + f'[index.postgresql]\nurl = "{_PG_INDEX["url"]}"\nschema = "{schema}"\n'


@pytest.fixture
def indexes_closed(request, monkeypatch):
    """Every index the test's module opens with its ``open_index`` is closed when the test ends
    (its analysis worker process with it), whatever the test closed itself (``close`` is safe
    twice)."""
    from indexerd.index import open_index as opening_for_real

    opened = []

    def opening(*args, **kwargs):
        ix = opening_for_real(*args, **kwargs)
        opened.append(ix)
        return ix

    monkeypatch.setattr(request.module, "open_index", opening)
    yield
    for ix in reversed(opened):
        ix.close()


def one_pass(config) -> dict:
    """The totals of one pass of every source of ``config`` through the real indexer (opened for
    ``index``, closed after)."""
    from indexerd.runtime.indexer import Indexer

    ix = Indexer(config)
    ix.open("index")
    try:
        return ix.run_pass(progress=False).totals.as_dict()
    finally:
        ix.close()


def index_settings(engine: str, text: str = ""):
    """The ``[index]`` settings of a config choosing ``engine`` (``text``: more TOML)."""
    from indexerd.config import parse_config

    head, table, pg = engine_toml(engine).partition("[index.postgresql]")
    return parse_config(f"{head}{text}\n{table}{pg}", "<test>").index


@pytest.fixture(scope="session")
def pg_index_server():
    """The PostgreSQL server of the postgresql engine's tests (tests/pg.py), one database.
    Fails (PgUnavailable) when the server binaries are missing: never a skip."""
    from pg import PgServer

    server = PgServer.start()
    try:
        server.wait_ready()
        _PG_INDEX["url"] = server.create_database("indexerd_index")
        yield server
    finally:
        _PG_INDEX["url"] = None
        server.stop()


#: The state stores (and index) a web test built on ``test_web.Crawl`` runs on: the SQLite
#: default, and a one-node cluster (the store and the index on PostgreSQL: every pass then runs
#: through the shared frontier, :mod:`indexerd.sources.web.sharedfrontier`).
CRAWL_STORES = ("sqlite", "postgresql+store")
_CRAWL_STORE = {"kind": "sqlite"}


def pytest_generate_tests(metafunc):
    """Every test that builds a ``Crawl``, or calls one of its module's ``EVERY_STORE_CALLS``
    (the helpers that build an indexer from :func:`layout_toml`), runs on each of
    :data:`CRAWL_STORES`; ``@pytest.mark.sqlite_store`` keeps a test on SQLite (it opens the
    SQLite file itself)."""
    import inspect

    if metafunc.function is None or metafunc.definition.get_closest_marker("sqlite_store"):
        return
    calls = ("Crawl(",) + tuple(getattr(metafunc.module, "EVERY_STORE_CALLS", ()))
    source = inspect.getsource(metafunc.function)
    if any(call in source for call in calls):
        metafunc.parametrize("_crawl_store", CRAWL_STORES, indirect=True)


_LAYOUT_SCHEMAS: dict[str, tuple[str, str]] = {}


def state_schemas(state_dir) -> tuple[str, str]:
    """``(store schema, index schema)`` of one state dir of this test on the session's server:
    new ones the first time, the same ones after (two state dirs are two clusters, as two
    SQLite state dirs are two stores and two indexes)."""
    key = str(state_dir)
    if key not in _LAYOUT_SCHEMAS:
        _LAYOUT_SCHEMAS[key] = (fresh_schema(), fresh_schema("ix"))
    return _LAYOUT_SCHEMAS[key]


def layout_toml(state_dir) -> str:
    """The TOML tables that put the current test's state store and index where its
    ``_crawl_store`` parameter says: nothing for SQLite (the embedded default), else ``[index]``
    on the postgresql engine and ``[store]`` on the session's server, in schemas of this state
    dir's own (:func:`state_schemas`)."""
    if _CRAWL_STORE["kind"] == "sqlite":
        return ""
    store, index = state_schemas(state_dir)
    return "\n" + engine_toml("postgresql", schema=index) + store_toml(store)


@pytest.fixture(autouse=True)
def _crawl_store(request):
    _CRAWL_STORE["kind"] = getattr(request, "param", "sqlite")
    yield
    _CRAWL_STORE["kind"] = "sqlite"


@pytest.fixture(autouse=True)
def _engine_fixtures(request):
    """A test parametrised with the postgresql engine (``postgresql``, ``postgresql+store``)
    gets the server and a schema of its own."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and any(isinstance(v, str) and v.startswith("postgresql")
                                    for v in callspec.params.values()):
        request.getfixturevalue("pg_index_server")
        _PG_INDEX["schema"] = f"ix{next(_PG_SCHEMAS)}"
    yield


def fresh_schema(prefix: str = "st") -> str:
    """A schema name no other test of this session (worker) has used."""
    return f"{prefix}{next(_PG_SCHEMAS)}"


def pg_store_address(schema: str | None = None):
    """A :class:`~indexerd.core.store.PgStoreAddress` on the session's server, in a new schema
    (needs the pg_index_server fixture)."""
    from indexerd.core.store import PgStoreAddress

    if _PG_INDEX["url"] is None:
        raise RuntimeError("a PostgreSQL store needs the pg_index_server fixture")
    return PgStoreAddress.from_settings(
        type("S", (), {"url": _PG_INDEX["url"], "schema": schema or f"st{next(_PG_SCHEMAS)}",
                       "password_env": None, "password_file": None, "timeout": 30.0})())


def store_toml(schema: str | None = None, lease: str | None = None) -> str:
    """The ``[store]`` table of a config whose state store is on the session's server
    (``lease``: its ``lease`` key, e.g. ``"6s"``; None: the default)."""
    if _PG_INDEX["url"] is None:
        raise RuntimeError("a PostgreSQL store needs the pg_index_server fixture")
    return (f'[store]\nurl = "{_PG_INDEX["url"]}"\nschema = "{schema or f"st{next(_PG_SCHEMAS)}"}"\n'
            + (f'lease = "{lease}"\n' if lease else ""))


@pytest.fixture(params=["sqlite", "postgresql"])
def store_kind(request) -> str:
    """Run a test on each state store (the postgresql one needs the session's server)."""
    if request.param == "postgresql":
        request.getfixturevalue("pg_index_server")
    return request.param


@pytest.fixture
def open_any_store(store_kind, tmp_path):
    """``open_any_store(readonly=False)``: a connection to one store of ``store_kind`` for this
    test (the same store at every call); closed at the end."""
    from indexerd.core.store import open_store

    location = tmp_path / "state.sqlite3" if store_kind == "sqlite" else pg_store_address()
    opened = []

    def opener(*, readonly: bool = False):
        s = open_store(location, readonly=readonly)
        opened.append(s)
        return s

    yield opener
    for s in opened:
        s.close()


@pytest.fixture(params=ENGINE_NAMES)
def index_engine(request) -> str:
    """Each index engine in turn (its name, as in ``[index] engine``)."""
    return request.param


def _fallback_corpus(dest: Path) -> None:
    """Real documents without ../shared: pydoc HTML of stdlib modules and stdlib text files.

    Layout mirrors the shared corpus's known answers: library/asyncio-eventloop.html is the page
    about the asyncio event loop, tutorial/controlflow.html mentions for/range, library/sqlite3.html
    documents sqlite3, text/GPL-3.txt holds "GNU General Public License".
    """
    import importlib
    import pydoc

    pages = {
        "library/asyncio-eventloop.html": "asyncio.events",
        "library/sqlite3.html": "sqlite3",
        "tutorial/controlflow.html": "builtins",
        "library/json.html": "json",
        "library/pathlib.html": "pathlib",
        "library/argparse.html": "argparse",
        "library/email.html": "email.utils",
        "library/http.html": "http.client",
        "library/shutil.html": "shutil",
        "library/textwrap.html": "textwrap",
    }
    for rel, modname in pages.items():
        mod = importlib.import_module(modname)
        html = pydoc.HTMLDoc().page(pydoc.describe(mod), pydoc.HTMLDoc().document(mod))
        if modname == "asyncio.events":
            html = html.replace("<title>", "<title>asyncio Event Loop: ", 1)
        p = dest / "python-docs" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(html, encoding="utf-8")
    text = dest / "text"
    text.mkdir(parents=True, exist_ok=True)
    lic = Path(os.__file__).parent / "LICENSE.txt"
    body = lic.read_text(encoding="utf-8", errors="replace") if lic.exists() else ""
    (text / "GPL-3.txt").write_text(
        "GNU GENERAL PUBLIC LICENSE\nThis is the GNU General Public License, version 3.\n\n" + body,
        encoding="utf-8")
    for name in ("this.py", "antigravity.py", "colorsys.py"):
        src = Path(os.__file__).parent / name
        if src.exists():
            shutil.copy(src, text / (name + ".txt"))


@pytest.fixture(scope="session")
def corpus_src(tmp_path_factory) -> Path:
    """A read-only source corpus: the shared one when present, else a generated fallback."""
    if SHARED_CORPUS.is_dir():
        return SHARED_CORPUS
    dest = tmp_path_factory.mktemp("fallback-corpus")
    _fallback_corpus(dest)
    return dest


def copy_corpus(src: Path, dest: Path) -> Path:
    """Copy ``src`` to ``dest`` writable, with every file's mtime set to 2024-01-01T00:00:00Z."""
    shutil.copytree(src, dest)
    for dirpath, dirs, files in os.walk(dest):
        os.chmod(dirpath, 0o755)
        for f in files:
            p = os.path.join(dirpath, f)
            os.chmod(p, 0o644)
            os.utime(p, (FIXED_MTIME, FIXED_MTIME))
    return dest


@pytest.fixture
def corpus(tmp_path, corpus_src) -> Path:
    """A private, writable copy of the corpus with every mtime set to 2024-01-01T00:00:00Z."""
    return copy_corpus(corpus_src, tmp_path / "corpus")


def stop_daemon(proc: subprocess.Popen, timeout: float) -> str | None:
    """SIGCONT + SIGTERM a daemon and wait up to ``timeout`` s.  Returns None after a clean exit 0,
    else why not (it is killed with SIGKILL when it did not exit in time)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)  # in case a test left it stopped
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            return f"the daemon did not exit within {timeout} s of SIGTERM (killed)"
    if proc.returncode != 0:
        return f"the daemon exited {proc.returncode} after SIGTERM, expected 0"
    return None


@pytest.fixture
def cli(tmp_path) -> CLI:
    return CLI(tmp_path / "state")
