"""The real ``indexerd`` command line for tests, in an environment of its own.

:class:`CLI` runs ``indexerd ARGS`` either in this process (``indexerd.cli.main.main(argv)``,
its stdout, stderr and exit code captured: milliseconds instead of the ~0.5 s an interpreter
and the imports cost) or in a subprocess (``python -m indexerd.cli.main``: the entry point
itself, signals, a process to kill).  Either way the command sees the same environment:

- no system config: ``/etc/indexerd/indexerd.toml`` is replaced by a path that does not exist
  (a config file on the test machine must not change what a test asserts);
- no ``$INDEXERD_*`` variable of the caller, no systemd variables (``STATE_DIRECTORY``,
  ``RUNTIME_DIRECTORY``, ``NOTIFY_SOCKET``, ``WATCHDOG_*``, ``JOURNAL_STREAM``); then
  ``STATE_DIRECTORY`` = the test's state dir and whatever the test adds (:attr:`CLI.env`);
- the XDG base directories (``XDG_CONFIG_HOME``, ``XDG_CACHE_HOME``, ``XDG_DATA_HOME``,
  ``XDG_STATE_HOME``) under the state dir's parent, never the user's home; ``COLUMNS=80``.

In this process a command runs with ``os.environ`` set to that environment, the root logger
without pytest's handlers (so ``_setup_logging`` writes the log to the captured stderr, as the
subprocess would) and with SIGINT/SIGTERM handlers as they were; all of it is put back after,
and one command runs at a time (a lock).  An ``index`` command starts ``RACY_WINDOW_FINE_NS``
(50 ms) after the call, as a subprocess never started sooner: a file a test wrote just before is
then out of the racy window at the pass, as the tests written for subprocesses expect.  What stays process-wide (imported modules, the
extraction worker pool, the web crawler's per-host slots) is what the daemon's own passes
share too.  ``timeout`` applies to subprocesses only; in this process pytest-timeout bounds a
hung command.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

#: the caller's variables a command must never see (prefixes and names)
_DROPPED_PREFIXES = ("INDEXERD_", "WATCHDOG_", "XDG_")
_DROPPED = ("STATE_DIRECTORY", "RUNTIME_DIRECTORY", "NOTIFY_SOCKET", "JOURNAL_STREAM", "LISTEN_FDS", "LISTEN_PID")

#: a subprocess's entry: ``python -c LAUNCH NO_SYSTEM_CONFIG ARGS...`` is ``python -m
#: indexerd.cli.main ARGS...`` with the system config path replaced first
LAUNCH = ("import sys; import indexerd.config.load as L; L.DEFAULT_CONFIG_PATH = sys.argv.pop(1); "
          "from indexerd.cli.main import main; sys.exit(main(sys.argv[1:]))")

_ONE_AT_A_TIME = threading.Lock()


_RUN_HOME: list[Path] = []


def _run_home() -> Path:
    """A directory of this test process (removed at its exit): the XDG directories and the
    absent system config of commands that have no state dir of their own."""
    if not _RUN_HOME:
        _RUN_HOME.append(Path(tempfile.mkdtemp(prefix="indexerd-tests-home-")))
        atexit.register(shutil.rmtree, _RUN_HOME[0], True)
    return _RUN_HOME[0]


def isolated_env(state_dir: Path | None, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a command of the test whose state dir is ``state_dir``: ``base``
    (default ``os.environ``) without the variables listed in this module's docstring, with
    ``STATE_DIRECTORY`` and the XDG directories (under ``state_dir``'s parent, ``xdg/...``).
    ``state_dir`` None: no ``STATE_DIRECTORY`` (the command finds its state dir in its config),
    the XDG directories in a directory of this test process."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith(_DROPPED_PREFIXES) and k not in _DROPPED}
    xdg = (_run_home() if state_dir is None else Path(state_dir).parent) / "xdg"
    for name in ("CONFIG", "CACHE", "DATA", "STATE"):
        env[f"XDG_{name}_HOME"] = str(xdg / name.lower())
    if state_dir is not None:
        env["STATE_DIRECTORY"] = str(state_dir)
    env["COLUMNS"] = "80"   # argparse wraps help at the terminal's width: the same in both ways
    return env


def no_system_config(state_dir: Path | None) -> str:
    """The path given in place of ``/etc/indexerd/indexerd.toml``: beside ``state_dir`` (None:
    in a directory of this test process), never created."""
    return str((_run_home() if state_dir is None else Path(state_dir).parent) / "no-system-config" / "indexerd.toml")


@contextlib.contextmanager
def _environment(env: dict[str, str], system_config: str):
    import indexerd.config.load as load

    saved_env, saved_path = dict(os.environ), load.DEFAULT_CONFIG_PATH
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    saved_signals = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    os.environ.clear()
    os.environ.update(env)
    load.DEFAULT_CONFIG_PATH = system_config
    root.handlers = []
    try:
        yield
    finally:
        for handler in root.handlers:
            if handler not in saved_handlers:
                handler.close()
        root.handlers = saved_handlers
        root.setLevel(saved_level)
        load.DEFAULT_CONFIG_PATH = saved_path
        os.environ.clear()
        os.environ.update(saved_env)
        for sig, handler in saved_signals.items():
            signal.signal(sig, handler)


def run_in_process(argv: list[str], env: dict[str, str], system_config: str) -> subprocess.CompletedProcess:
    """``indexerd ARGV`` through ``indexerd.cli.main.main`` in this process with ``env`` as
    ``os.environ``: a CompletedProcess with its exit code (argparse's SystemExit included), stdout
    and stderr as text.  Must run in the main thread (the commands set signal handlers)."""
    from indexerd.cli.main import main
    from indexerd.sources.files.keys import RACY_WINDOW_FINE_NS

    if argv and argv[0] == "index":
        # a subprocess took longer than this to start: tests expect the files they just wrote to
        # be older than the racy window at the pass (their stat trusted, the next pass reads nothing)
        time.sleep(RACY_WINDOW_FINE_NS / 1e9)
    out, err = io.StringIO(), io.StringIO()
    with _ONE_AT_A_TIME, _environment(env, system_config), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse: --help (0), bad usage (2)
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
    return subprocess.CompletedProcess(["indexerd", *argv], code, out.getvalue(), err.getvalue())


class CLI:
    """Runs the real ``indexerd`` with its own state dir (see the module docstring).

    ``config``: the ``-c`` file given to ``index``, ``check-config`` and ``ctl`` commands.
    ``in_process``: the default for :meth:`run`; ``env``: the environment a command gets
    (edit it to add variables).
    """

    def __init__(self, state_dir: Path, config: Path | None = None, *, in_process: bool = True) -> None:
        self.state_dir = state_dir
        self.config = config
        self.in_process = in_process
        self.env = isolated_env(state_dir)
        self.system_config = no_system_config(state_dir)

    def argv(self, *args: str) -> list[str]:
        """``args`` with ``-c CONFIG`` after the command (and after ``ctl VERB``) when a config is
        set and the command takes one."""
        argv = list(args)
        if self.config is not None and args and args[0] in ("index", "check-config"):
            argv[1:1] = ["-c", str(self.config)]
        elif self.config is not None and args and args[0] == "ctl":
            argv[2:2] = ["-c", str(self.config)]
        return argv

    def command(self, *args: str) -> list[str]:
        """The subprocess command line of ``indexerd ARGS`` (for ``subprocess.Popen``)."""
        return [sys.executable, "-c", LAUNCH, self.system_config, *self.argv(*args)]

    def run(self, *args: str, check: bool = True, timeout: float = 300,
            in_process: bool | None = None) -> subprocess.CompletedProcess:
        """``indexerd ARGS``: a CompletedProcess (``returncode``, ``stdout``, ``stderr`` as text).

        ``in_process``: None for this CLI's default.  ``check``: raise AssertionError (with
        both streams) on a non-zero exit.  ``timeout``: seconds, for a subprocess only."""
        argv = self.argv(*args)
        if self.in_process if in_process is None else in_process:
            p = run_in_process(argv, self.env, self.system_config)
        else:
            p = subprocess.run(self.command(*args), capture_output=True, text=True, env=self.env, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"indexerd {argv} exited {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}")
        return p

    def index(self, *args: str) -> dict:
        return json.loads(self.run("index", "--json", *args).stdout)

    def search(self, query: str, *args: str) -> list[dict]:
        return json.loads(self.run("ctl", "search", query, "--json", *args).stdout)
