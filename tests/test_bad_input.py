"""Bad input, end to end through the real CLI: each case gets a clear message and the run goes
on (exit 0, right counts), or -- bad config, newer store schema, a held lock, a corrupt index --
indexerd refuses to start with a specific exit code.  A good document indexed before each case
is still found after it."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import CLI


GOOD_WORD = "keeper"


def assert_balanced(s: dict) -> None:
    for c in [s, *s.get("sources", {}).values()]:
        assert c["seen"] == c["indexed"] + c["unchanged"] + c["skipped"] + c["errors"], c


def index_json(cli: CLI, *args: str, timeout: float = 60) -> dict:
    p = cli.run("index", "--json", *args, timeout=timeout)
    s = json.loads(p.stdout)
    assert_balanced(s)
    return s


def search_paths(cli: CLI, query: str, *args: str) -> list[str]:
    return [h["path"] for h in json.loads(cli.run("ctl", "search", query, "--json", *args, timeout=60).stdout)]


def explain(cli: CLI, path, *args: str) -> dict:
    return json.loads(cli.run("ctl", "explain", os.fsdecode(path), "--json", *args, timeout=60).stdout)


@pytest.fixture
def tree(tmp_path) -> Path:
    """A tree holding one good document (not indexed yet)."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "good.txt").write_text(f"{GOOD_WORD} document survives every bad case\n")
    return root


def index_good(cli: CLI, root: Path, *args: str) -> None:
    """Index the tree (``args`` default to the tree's path) and check the good document is found."""
    s = index_json(cli, *args, *([] if args else [str(root)]))
    assert s["indexed"] >= 1 and s["errors"] == 0
    assert search_paths(cli, GOOD_WORD, *args) == [str(root / "good.txt")]


def assert_good_found(cli: CLI, root: Path, *args: str) -> None:
    assert search_paths(cli, GOOD_WORD, *args) == [str(root / "good.txt")]


# -- refuse to start ----------------------------------------------------------------------------
def test_config_with_typo_refuses_to_start(tree, tmp_path, cli) -> None:
    state = tmp_path / "state-cfg"
    good_cfg = tmp_path / "good.toml"
    good_cfg.write_text(f'state_dir = "{state}"\n[[sources.filesystem]]\nname = "root"\npath = "{tree}"\n')
    index_good(cli, tree, "-c", str(good_cfg))

    bad_cfg = tmp_path / "bad.toml"
    bad_cfg.write_text(f'state_dir = "{state}"\n[[sources.filesystem]]\nname = "root"\npath = "{tree}"\n'
                       'exlcude = ["*.tmp"]\n')
    (tree / "new.txt").write_text("must not be indexed by a refused run\n")
    for cmd in (["index", "-c", str(bad_cfg)], ["check-config", "-c", str(bad_cfg)]):
        p = cli.run(*cmd, check=False)
        assert p.returncode == 2, (cmd, p.stderr)
        assert str(bad_cfg) in p.stderr
        assert "sources.filesystem[0].exlcude" in p.stderr
        assert "unknown key" in p.stderr
        assert "Traceback" not in p.stderr
        assert p.stdout == ""
    assert_good_found(cli, tree, "-c", str(good_cfg))
    assert search_paths(cli, "refused", "-c", str(good_cfg)) == []


def test_newer_store_schema_refuses_to_start(tree, cli) -> None:
    index_good(cli, tree)
    db = cli.state_dir / "state.sqlite3"
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version = 999")
    con.commit()
    con.close()
    (tree / "new.txt").write_text("not indexed by a refused run\n")

    p = cli.run("index", str(tree), check=False)
    assert p.returncode == 2, p.stderr
    assert "newer" in p.stderr and "999" in p.stderr and str(db) in p.stderr
    assert "Traceback" not in p.stderr
    p = cli.run("ctl", "report", "--dates", check=False)  # readers refuse it too
    assert p.returncode == 2 and "newer" in p.stderr
    # the store was not touched, and the index still serves searches
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 999
    con.close()
    assert_good_found(cli, tree)
    assert search_paths(cli, "refused") == []


def test_locked_state_dir_exit_4(tree, cli) -> None:
    index_good(cli, tree)
    lock_path = cli.state_dir / "indexerd.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o640)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} daemon\n".encode(), 0)
        started = time.monotonic()
        p = cli.run("index", str(tree), check=False, timeout=30)
        assert time.monotonic() - started < 20  # refuses at once, does not wait for the lock
        assert p.returncode == 4, p.stderr
        assert "indexerd ctl scan" in p.stderr
        assert f"pid {os.getpid()}" in p.stderr and "daemon" in p.stderr
        assert "Traceback" not in p.stderr
        assert os.pread(fd, 100, 0) == f"{os.getpid()} daemon\n".encode()  # not overwritten
        assert_good_found(cli, tree)  # readers take no lock
    finally:
        os.close(fd)
    s = index_json(cli, str(tree))  # lock released: works again
    assert (s["seen"], s["unchanged"], s["errors"]) == (1, 1, 0)


# -- corrupt index ------------------------------------------------------------------------------
def _corrupt(state_dir: Path, what: str) -> None:
    ix = state_dir / "index"
    files = sorted(ix.glob("_MAIN_*.toc")) if what == "toc" else \
        sorted(set(ix.glob("*.seg")) | set(ix.glob("MAIN_*.trm")) | set(ix.glob("MAIN_*.pst")))
    assert files, list(ix.iterdir())
    for f in files:
        f.write_bytes(os.urandom(max(64, f.stat().st_size)))


@pytest.mark.parametrize("what", ["toc", "seg"])
def test_corrupt_index_search_says_rebuild(tree, cli, what) -> None:
    index_good(cli, tree)
    _corrupt(cli.state_dir, what)
    p = cli.run("ctl", "search", GOOD_WORD, "--json", check=False)
    assert p.returncode == 1
    assert "--rebuild" in p.stderr and str(cli.state_dir / "index") in p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("change", ["unchanged-tree", "new-file"])
def test_corrupt_index_index_exits_1(tree, cli, change) -> None:
    index_good(cli, tree)
    _corrupt(cli.state_dir, "toc")
    if change == "new-file":
        (tree / "new.txt").write_text("fresh document\n")
    p = cli.run("index", "--json", str(tree), check=False)
    assert p.returncode == 1, (p.stdout, p.stderr[-2000:])
    assert "--rebuild" in p.stderr


@pytest.mark.parametrize("what", ["toc", "seg"])
def test_corrupt_index_rebuild_recovers(tree, cli, what) -> None:
    index_good(cli, tree)
    _corrupt(cli.state_dir, what)
    (tree / "new.txt").write_text("fresh document added while broken\n")
    s = index_json(cli, "--rebuild", str(tree))
    assert (s["seen"], s["indexed"], s["errors"]) == (2, 2, 0)
    assert_good_found(cli, tree)
    assert search_paths(cli, "fresh") == [str(tree / "new.txt")]
    assert len(list(cli.state_dir.glob("index.broken-*"))) == 1  # moved aside, not deleted
    s = index_json(cli, str(tree))
    assert (s["seen"], s["indexed"], s["unchanged"]) == (2, 0, 2)


# -- documents that cannot be indexed -------------------------------------------------------------
def test_huge_sparse_file_skipped_unread(tree, cli) -> None:
    index_good(cli, tree)
    huge = tree / "huge.log"
    with open(huge, "wb") as fh:
        fh.truncate(2**31)
    started = time.monotonic()
    s = index_json(cli, str(tree), timeout=60)
    assert time.monotonic() - started < 15
    assert (s["seen"], s["indexed"], s["unchanged"], s["skipped"], s["errors"]) == (2, 0, 1, 1, 0)
    e = explain(cli, huge)
    assert (e["status"], e["reason"], e["size"]) == ("skipped", "too-large", 2**31)
    assert "while read" not in e["detail"]  # decided from the stat, not by reading
    assert "too-large" in " ".join(e["explanation"])
    assert_good_found(cli, tree)
    s = index_json(cli, str(tree))
    assert (s["skipped"], s["errors"], s["indexed"], s["unchanged"]) == (0, 0, 0, 2)


def _symlink_loop(root: Path) -> Path:
    (root / "py" / "lib").mkdir(parents=True)
    (root / "py" / "pyroot").mkdir()
    x = root / "py" / "lib" / "x.txt"
    x.write_text("looped\n")
    os.symlink("../pyroot", root / "py" / "lib" / "pyroot")
    os.symlink("../lib", root / "py" / "pyroot" / "lib")
    os.symlink(".", root / "man")
    return x


def _has_repeated_segment(path: str) -> bool:
    parts = [p for p in path.split("/") if p]
    return any(parts[i:i + 2] == parts[j:j + 2] for i in range(len(parts)) for j in range(i + 1, len(parts)))


def test_symlink_loop_followed_b13(tree, tmp_path, cli) -> None:
    state = tmp_path / "state-b13"
    cfg = tmp_path / "b13.toml"
    cfg.write_text(f'state_dir = "{state}"\n[[sources.filesystem]]\nname = "root"\npath = "{tree}"\n'
                   "follow_symlinks = true\n")
    index_good(cli, tree, "-c", str(cfg))
    x = _symlink_loop(tree)
    started = time.monotonic()
    s = index_json(cli, "-c", str(cfg), timeout=30)
    assert time.monotonic() - started < 10
    assert (s["seen"], s["indexed"], s["unchanged"], s["skipped"], s["errors"]) == (2, 1, 1, 0, 0)
    assert search_paths(cli, "looped", "-c", str(cfg)) == [str(x)]
    rows = json.loads(cli.run("ctl", "report", "--dates", "--json", "-c", str(cfg)).stdout)
    keys = sorted(r["key"] for r in rows)
    assert keys == sorted([(tree / "good.txt").as_uri(), x.as_uri()])
    assert not any(_has_repeated_segment(k) for k in keys)
    assert_good_found(cli, tree, "-c", str(cfg))
    s = index_json(cli, "-c", str(cfg), timeout=30)
    assert (s["seen"], s["unchanged"], s["indexed"], s["deleted"]) == (2, 2, 0, 0)


def test_symlink_loop_not_followed_by_default(tree, cli) -> None:
    index_good(cli, tree)
    x = _symlink_loop(tree)
    s = index_json(cli, str(tree), timeout=30)
    assert (s["seen"], s["indexed"], s["unchanged"], s["errors"]) == (2, 1, 1, 0)
    assert search_paths(cli, "looped") == [str(x)]


def test_non_utf8_file_name_b14(tree, cli) -> None:
    index_good(cli, tree)
    raw = os.fsencode(tree) + b"/caf\xe9.txt"
    fd = os.open(raw, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"espresso\n")
    os.close(fd)
    s = index_json(cli, str(tree))
    assert (s["seen"], s["indexed"], s["errors"]) == (2, 1, 0)
    hits = json.loads(cli.run("ctl", "search", "espresso", "--json").stdout)
    assert len(hits) == 1
    assert os.fsencode(hits[0]["path"]) == raw
    assert hits[0]["key"] == tree.as_uri() + "/caf%E9.txt"
    # the text output shows the name without failing
    p = cli.run("ctl", "search", "espresso")
    assert "caf\ufffd.txt" in p.stdout
    assert explain(cli, raw)["reason"] == "new"
    assert_good_found(cli, tree)
    os.unlink(raw)
    s = index_json(cli, str(tree))
    assert (s["seen"], s["deleted"], s["errors"]) == (1, 1, 0)
    assert search_paths(cli, "espresso") == []


@pytest.mark.parametrize("name,content,reason", [
    ("fake.html", b"<html>" + bytes(range(256)) * 8 + b"\0\0\0", "binary"),
    ("empty.txt", b"", "empty"),
])
def test_unindexable_file_skipped(tree, cli, name, content, reason) -> None:
    index_good(cli, tree)
    (tree / name).write_bytes(content)
    s = index_json(cli, str(tree))
    assert (s["seen"], s["indexed"], s["unchanged"], s["skipped"], s["errors"]) == (2, 0, 1, 1, 0)
    e = explain(cli, tree / name)
    assert (e["status"], e["reason"]) == ("skipped", reason)
    assert_good_found(cli, tree)
    s = index_json(cli, str(tree))
    assert (s["skipped"], s["errors"], s["indexed"], s["unchanged"]) == (0, 0, 0, 2)


def test_fifo_skipped_without_hanging(tree, cli) -> None:
    index_good(cli, tree)
    os.mkfifo(tree / "pipe")
    started = time.monotonic()
    s = index_json(cli, str(tree), timeout=30)
    assert time.monotonic() - started < 10
    assert (s["seen"], s["indexed"], s["unchanged"], s["skipped"], s["errors"]) == (2, 0, 1, 1, 0)
    assert explain(cli, tree / "pipe")["reason"] == "not-a-file"
    assert_good_found(cli, tree)


# -- permission denied ----------------------------------------------------------------------------
NOBODY = 65534


def _setpriv_works(cwd: str) -> bool:
    if not shutil.which("setpriv"):
        return False
    try:
        p = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                            sys.executable, "-c", "import indexerd.cli.main, whoosh"],
                           capture_output=True, timeout=30, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0


class _Runner:
    """Runs the CLI as the current user, or (as root) as nobody through setpriv."""

    def __init__(self, state: Path, as_nobody: bool, cwd: str) -> None:
        self.cli = CLI(state)
        self.prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if as_nobody else []
        self.cwd = cwd

    def run(self, *args: str) -> subprocess.CompletedProcess:
        cmd = [*self.prefix, sys.executable, "-m", "indexerd.cli.main", *args]
        p = subprocess.run(cmd, capture_output=True, text=True, env=self.cli.env, timeout=60, cwd=self.cwd)
        assert p.returncode == 0, (cmd, p.stdout, p.stderr)
        return p


def test_permission_denied_file() -> None:
    as_root = os.geteuid() == 0
    base = Path(tempfile.mkdtemp(prefix="indexerd-perm-"))
    try:
        os.chmod(base, 0o755)
        cwd = str(base)
        if as_root and not _setpriv_works(cwd):
            pytest.skip("running as root (chmod 000 denies nothing) and setpriv cannot run the CLI as nobody")
        root = base / "root"
        root.mkdir(mode=0o755)
        (root / "good.txt").write_text(f"{GOOD_WORD} document\n")
        os.chmod(root / "good.txt", 0o644)
        state = base / "state"
        state.mkdir(mode=0o755)
        if as_root:
            os.chown(state, NOBODY, NOBODY)
        r = _Runner(state, as_root, cwd)
        json.loads(r.run("index", "--json", str(root)).stdout)
        secret = root / "secret.txt"
        secret.write_text("classified\n")
        os.chmod(secret, 0o000)

        s = json.loads(r.run("index", "--json", str(root)).stdout)
        assert_balanced(s)
        assert (s["seen"], s["indexed"], s["unchanged"], s["skipped"], s["errors"]) == (2, 0, 1, 0, 1)
        e = json.loads(r.run("ctl", "explain", str(secret), "--json").stdout)
        assert (e["status"], e["reason"]) == ("error", "unreadable")
        assert "Permission denied" in e["detail"]
        hits = json.loads(r.run("ctl", "search", GOOD_WORD, "--json").stdout)
        assert [h["path"] for h in hits] == [str(root / "good.txt")]
        s = json.loads(r.run("index", "--json", str(root)).stdout)
        assert (s["seen"], s["unchanged"], s["errors"], s["skipped"], s["indexed"]) == (2, 2, 0, 0, 0)
        # the admin fixes the permission (ctime changes, mtime does not): the file is retried
        os.chmod(secret, 0o644)
        s = json.loads(r.run("index", "--json", str(root)).stdout)
        assert (s["seen"], s["indexed"], s["unchanged"], s["errors"]) == (2, 1, 1, 0)
        hits = json.loads(r.run("ctl", "search", "classified", "--json").stdout)
        assert [h["path"] for h in hits] == [str(secret)]
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- all at once ---------------------------------------------------------------------------------
def test_every_bad_input_in_one_tree_then_a_clean_second_run(tree, cli) -> None:
    index_good(cli, tree)
    (tree / "fake.html").write_bytes(os.urandom(4096) + b"\0" * 64)
    (tree / "empty.txt").write_bytes(b"")
    os.mkfifo(tree / "pipe")
    with open(tree / "huge.log", "wb") as fh:
        fh.truncate(2**31)
    _symlink_loop(tree)
    fd = os.open(os.fsencode(tree) + b"/caf\xe9.txt", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"espresso\n")
    os.close(fd)

    started = time.monotonic()
    s = index_json(cli, str(tree), timeout=60)
    assert time.monotonic() - started < 15
    # good.txt unchanged; x.txt and caf\xe9.txt indexed; fake.html, empty.txt, pipe, huge.log skipped
    assert (s["seen"], s["indexed"], s["unchanged"], s["skipped"], s["errors"], s["deleted"]) == (7, 2, 1, 4, 0, 0)
    assert_good_found(cli, tree)
    assert len(search_paths(cli, "looped")) == 1
    assert len(search_paths(cli, "espresso")) == 1

    s = index_json(cli, str(tree), timeout=60)
    assert (s["seen"], s["indexed"], s["unchanged"], s["skipped"], s["errors"], s["deleted"]) == (7, 0, 7, 0, 0, 0)


# -- a document that goes bad after it was indexed -------------------------------------------------
def test_indexed_document_that_goes_bad_leaves_the_index(tree, tmp_path, cli) -> None:
    state = tmp_path / "state-small"
    cfg = tmp_path / "small.toml"
    cfg.write_text(f'state_dir = "{state}"\nmax_size = "1KB"\n'
                   f'[[sources.filesystem]]\nname = "root"\npath = "{tree}"\n')
    index_good(cli, tree, "-c", str(cfg))
    emptied = tree / "emptied.txt"
    grown = tree / "grown.txt"
    emptied.write_text("tangerine\n")
    grown.write_text("pomegranate\n")
    s = index_json(cli, "-c", str(cfg))
    assert s["indexed"] == 2
    assert search_paths(cli, "tangerine", "-c", str(cfg)) == [str(emptied)]

    emptied.write_bytes(b"")
    grown.write_text("pomegranate " * 200)  # 2400 bytes > 1KB
    s = index_json(cli, "-c", str(cfg))
    assert (s["seen"], s["indexed"], s["unchanged"], s["skipped"], s["errors"]) == (3, 0, 1, 2, 0)
    # the old text no longer matches the document: it is gone from search, the row says why
    assert search_paths(cli, "tangerine", "-c", str(cfg)) == []
    assert search_paths(cli, "pomegranate", "-c", str(cfg)) == []
    assert explain(cli, emptied, "-c", str(cfg))["reason"] == "empty"
    assert explain(cli, grown, "-c", str(cfg))["reason"] == "too-large"
    assert_good_found(cli, tree, "-c", str(cfg))


def test_lost_index_directory_is_rebuilt_from_the_tree(tree, cli) -> None:
    (tree / "second.txt").write_text("second document\n")
    index_good(cli, tree)
    shutil.rmtree(cli.state_dir / "index")
    s = index_json(cli, str(tree))
    assert (s["seen"], s["indexed"], s["errors"]) == (2, 2, 0)  # the store's rows are re-indexed
    assert_good_found(cli, tree)
    assert search_paths(cli, "second") == [str(tree / "second.txt")]
    s = index_json(cli, str(tree))
    assert (s["seen"], s["unchanged"]) == (2, 2)


def test_missing_configured_root_warns_in_check_config_and_fails_index(tmp_path) -> None:
    """A configured tree that is not there (an unmounted disk): ``check-config`` accepts the config
    with a warning naming the source; ``indexerd index -c`` keeps the tree's documents and exits 1
    naming the root (it used to exit 0 with ``errors 1``); once the tree is back, exit 0."""
    root = tmp_path / "tree"
    root.mkdir()
    (root / "kept.txt").write_text("durable keeper words\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\n[[sources.filesystem]]\nname = "disk"\n'
                   f'path = "{root}"\n')
    cli = CLI(tmp_path / "state", config=cfg)
    assert cli.index()["indexed"] == 1
    root.rename(tmp_path / "unmounted")
    p = cli.run("check-config", check=False)
    assert p.returncode == 0 and "# " in p.stdout
    assert f"source disk: path {root} does not exist" in p.stderr
    p = cli.run("index", "--json", check=False)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert json.loads(p.stdout)["errors"] == 1
    assert f"source disk: root {root} is missing or not a directory; nothing is deleted" in p.stderr
    assert [h["path"] for h in cli.search("keeper")] == [str(root / "kept.txt")]
    (tmp_path / "unmounted").rename(root)
    assert cli.run("index", check=False).returncode == 0
