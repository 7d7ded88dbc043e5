"""The file source, in process: keys, include/exclude globs, and what a pass may delete.

Passes run through a real :class:`~indexerd.runtime.indexer.Indexer` built from a parsed config, on real
temp trees, with the real store and index: the SQLite store and Whoosh index in a temp state dir,
and (each test that builds an indexer) the store and the index on PostgreSQL.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from indexerd.config import parse_config
from indexerd.sources.files.table import DEFAULT_EXCLUDES
from indexerd.core.errors import IndexUnavailable
from indexerd.sources.files.globs import NameTest, PathMatcher, glob_regex
from indexerd.core.filekeys import key_to_path, path_to_key
from indexerd.sources.files.keys import display_path
from indexerd.runtime.indexer import Indexer
from conftest import layout_toml

#: The helpers whose tests run on every state store (conftest.pytest_generate_tests).
EVERY_STORE_CALLS = ("make_indexer(", "run_pass(tmp_path", "search(tmp_path", "pass_with_reads(")


# -- keys -----------------------------------------------------------------------------------------
PATHS = [
    "/srv/docs/notes.txt",
    "/srv/docs/with space/a#b?c%d&e+f;g=h.txt",
    "/srv/docs/café.txt",
    os.fsdecode(b"/srv/docs/caf\xe9.txt"),
    os.fsdecode(b"/srv/\xff\xfe/x~y@z!$'()*,.txt"),
    "/srv/docs/",
    "/",
]


@pytest.mark.parametrize("path", PATHS)
def test_path_to_key_is_as_uri(path) -> None:
    assert path_to_key(path) == Path(path).as_uri() + ("/" if path.endswith("/") and path != "/" else "")
    assert path_to_key(path).isascii()


@pytest.mark.parametrize("path", PATHS)
def test_key_to_path_round_trips_bytes(path) -> None:
    back = key_to_path(path_to_key(path))
    assert os.fsencode(back) == os.fsencode(path)


def test_non_utf8_key_shape() -> None:
    p = os.fsdecode(b"/root/caf\xe9.txt")
    assert path_to_key(p) == "file:///root/caf%E9.txt"
    assert display_path(p) == "/root/caf\ufffd.txt"
    json.dumps(path_to_key(p))  # a key is always valid text


def test_key_to_path_refuses_other_schemes() -> None:
    with pytest.raises(ValueError):
        key_to_path("https://example.test/a")


# -- globs ----------------------------------------------------------------------------------------
def test_directory_pattern_prunes_at_any_depth() -> None:
    m = PathMatcher(["*"], [".git/"])
    assert m.dir_excluded(".git", ".git")
    assert m.dir_excluded(".git", "a/b/.git")
    assert not m.path_selected("a/b/.git/config")
    assert m.path_selected("a/b/git/config")
    assert m.file_selected(".git", "sub/.git")  # a *file* named .git is not a directory
    assert m.path_selected("a/.gitignore")


def test_name_pattern_excludes_anywhere() -> None:
    m = PathMatcher(["*"], ["*.swp"])
    assert not m.file_selected("x.swp", "x.swp")
    assert not m.file_selected("x.swp", "a/b/c/x.swp")
    assert m.file_selected("x.swpx", "a/x.swpx")
    assert not m.path_selected("a/dir.swp/inner.txt")  # names match directories too


#: names around what a name test's fast paths (suffix, prefix, equality) might get wrong
ODD_NAMES = ["f0001234.txt", "a.swp", ".swp", "a.swpx", "x~", "~", ".#foo", ".#", "4913", "4913x", "x4913",
             "a.tmp", ".~lock.x#", ".~lock.#", ".~lockx#", "b.pyc", "a.pyo.txt", "a.c", "a.h", "foo1", "foo",
             "axxb", "ab", "#x", "x*", "x", "x ", "q.a b", "c#d", "zz#", "e!f", "e!", "\\#x", "README"]


@pytest.mark.parametrize("patterns", [
    list(DEFAULT_EXCLUDES),
    ["*.[ch]", "foo?", "a*b", "\\#x", "*\\*", "x ", "*.a b", "c#d", "*#", "e!*", "x\\ "],
    ["a*", "*b", "ax*xb", ".~lock.*#", "x*~", "q.*b", "*", "c#*", "README", "e!*f/", "4913/", "*.pyc/"],
])
def test_name_test_answers_as_the_patterns_regex(patterns) -> None:
    """The walk tests every file's and directory's name with str methods where a pattern is a
    name with at most one '*' (suffixes, prefixes, equalities, a prefix and a suffix): it must
    answer as gitignore's regex of the same patterns (pathspec's translation) does."""
    names_only = [p for p in patterns if not p.endswith("/")]
    regex = re.compile("|".join(f"(?:{glob_regex(p)})" for p in names_only))
    test = NameTest(names_only)
    for name in ODD_NAMES:
        assert test.match(name) == bool(regex.match(name)), name
    m = PathMatcher(["*"], patterns)
    for name in ODD_NAMES:
        assert m.file_selected(name, f"sub/{name}") != bool(regex.match(name)), name
    dirs = re.compile("|".join(f"(?:{glob_regex(p)})" for p in patterns))
    for name in ODD_NAMES:
        assert m.dir_excluded(name, f"sub/{name}") == bool(dirs.match(f"sub/{name}/")), name
        assert m.any_dir_excluded(f"top/{name}/x", last_too=False) == bool(dirs.match(f"top/{name}/")), name


def test_the_default_excludes_need_no_glob_translation() -> None:
    """Every default exclude is a name with at most one '*': a source without other patterns
    checks and matches them without importing pathspec (a start of ``indexerd index`` pays
    nothing for it)."""
    import subprocess
    import sys

    code = ("import sys; from indexerd.sources.files.globs import PathMatcher, check_glob; "
            "from indexerd.sources.files.table import DEFAULT_EXCLUDES as D; [check_glob(p) for p in D]; "
            "m = PathMatcher(['*'], list(D)); assert m.dir_excluded('.git', '.git'); "
            "assert not m.file_selected('a.swp', 'a.swp'); assert 'pathspec' not in sys.modules, 'imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_name_test_refuses_a_comment_or_negation_as_before() -> None:
    for bad in ("#c", "!x*", "!x"):
        with pytest.raises(ValueError):
            NameTest([bad])


def test_relative_pattern_is_anchored_at_the_root() -> None:
    m = PathMatcher(["*"], ["sub/*.txt"])
    assert not m.file_selected("a.txt", "sub/a.txt")
    assert m.file_selected("a.txt", "other/sub/a.txt")
    assert m.file_selected("a.txt", "a.txt")
    assert m.file_selected("a.html", "sub/a.html")
    m = PathMatcher(["*"], ["/top.txt"])
    assert not m.file_selected("top.txt", "top.txt")
    assert m.file_selected("top.txt", "a/top.txt")


def test_star_does_not_cross_a_slash() -> None:
    assert PathMatcher(["*"], ["sub/*.txt"]).file_selected("a.txt", "sub/deep/a.txt")
    assert not PathMatcher(["sub/*.txt"], []).file_selected("a.txt", "sub/deep/a.txt")


def test_include_selects_only_matching_names() -> None:
    m = PathMatcher(["*.html"], [])
    assert m.file_selected("a.html", "a.html")
    assert m.file_selected("b.html", "x/y/b.html")
    assert not m.file_selected("c.txt", "c.txt")
    assert not m.file_selected("a.htm", "a.htm")
    m = PathMatcher(["*.html", "notes/*.txt"], [])
    assert m.file_selected("n.txt", "notes/n.txt")
    assert not m.file_selected("n.txt", "other/n.txt")


def test_a_path_thousands_of_directories_deep_is_tested_in_linear_time() -> None:
    """The watch of a deep tree gets an event per directory (CI: 1,000 deletions, each tested
    in 0.15 s, held a new file's event for minutes): name patterns test each name, not each
    ancestor's whole path with a regex that backtracks over every '/'."""
    from indexerd.sources.files.table import DEFAULT_EXCLUDES

    m = PathMatcher(["*"], list(DEFAULT_EXCLUDES) + ["top/build/"])
    deep = "/".join(["d"] * 3000)
    t0 = time.monotonic()
    for _ in range(50):
        assert m.path_selected(f"{deep}/x.txt")
        assert not m.any_dir_excluded(deep, last_too=True)
    took = time.monotonic() - t0
    assert took < 5.0, f"50 tests of a 3,000-deep path took {took:.1f} s"  # quadratic: ~60 s
    assert not m.path_selected(f"{deep}/.git/{deep}/x.txt")
    assert m.any_dir_excluded(f"{deep}/__pycache__", last_too=True)
    assert not m.any_dir_excluded(f"{deep}/__pycache__", last_too=False)
    assert m.any_dir_excluded("top/build/d", last_too=False)  # relative patterns still anchored
    assert not m.any_dir_excluded("x/top/build/d", last_too=True)


def test_exclude_beats_include() -> None:
    m = PathMatcher(["*.html"], ["draft-*"])
    assert not m.file_selected("draft-1.html", "a/draft-1.html")
    assert m.file_selected("final.html", "a/final.html")


# -- passes through a real Indexer ------------------------------------------------------------------
def make_indexer(tmp_path: Path, root: Path, extra: str = "") -> Indexer:
    cfg = parse_config(f'state_dir = "{tmp_path / "state"}"\n'
                       f'[[sources.filesystem]]\nname = "tree"\npath = "{root}"\n{extra}'
                       f'{layout_toml(tmp_path / "state")}', "<test>")
    return Indexer(cfg)


def balanced(d: dict) -> bool:
    return d["seen"] == d["indexed"] + d["unchanged"] + d["skipped"] + d["errors"]


def run_pass(tmp_path: Path, root: Path, extra: str = "", *, check_balance: bool = True):
    ix = make_indexer(tmp_path, root, extra)
    ix.open("index")
    try:
        summary = ix.run_pass(progress=False)
        keys = ix.store.keys()
    finally:
        ix.close()
    d = summary.as_dict()
    if check_balance:
        assert balanced(d), d
    return d, keys


def search(tmp_path: Path, root: Path, query: str) -> list[str]:
    ix = make_indexer(tmp_path, root)
    try:
        return [h.path for h in ix.index().search(query, limit=50)]
    finally:
        ix.close()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def keys_of(root: Path, *rels: str) -> set[str]:
    return {(root / r).as_uri() for r in rels}


def test_include_html_only_in_a_walk(tmp_path) -> None:
    root = tmp_path / "root"
    for rel in ("a.html", "deep/er/b.html", "c.txt", "deep/d.txt"):
        write(root / rel, f"content of {rel}\n")
    d, keys = run_pass(tmp_path, root, 'include = ["*.html"]\n')
    assert keys == keys_of(root, "a.html", "deep/er/b.html")
    assert (d["seen"], d["indexed"]) == (2, 2)


def test_default_excludes_in_a_walk(tmp_path) -> None:
    root = tmp_path / "root"
    for rel in ("keep.txt", "sub/.git/config", ".git/HEAD", "sub/notes.txt.swp", "notes.txt~",
                ".#lock", "sub/deep/4913", "x.tmp"):
        write(root / rel, f"content of {rel}\n")
    d, keys = run_pass(tmp_path, root)
    assert keys == keys_of(root, "keep.txt")
    assert d["seen"] == 1


def test_unreadable_dir_protects_its_documents(tmp_path, monkeypatch) -> None:
    root = tmp_path / "root"
    write(root / "locked" / "inner.txt", "cloistered manuscript\n")
    write(root / "locked" / "deeper" / "more.txt", "cloistered appendix\n")
    write(root / "open" / "gone.txt", "ephemeral leaflet\n")
    write(root / "top.txt", "visible placard\n")
    d, keys = run_pass(tmp_path, root)
    assert d["indexed"] == 4

    locked = root / "locked"
    if os.geteuid() != 0:
        os.chmod(locked, 0)
    else:  # root reads anything: make the listing of that one directory fail as EACCES would
        real_scandir = os.scandir

        def scandir(path="."):
            if os.fspath(path) == str(locked):
                raise PermissionError(13, "Permission denied", os.fspath(path))
            return real_scandir(path)

        monkeypatch.setattr(os, "scandir", scandir)
    (root / "open" / "gone.txt").unlink()
    try:
        d, keys = run_pass(tmp_path, root)
    finally:
        os.chmod(locked, 0o755)
        monkeypatch.undo()
    # the really deleted file is deleted; nothing under the unlisted directory is
    assert (d["deleted"], d["errors"]) == (1, 0)
    assert keys == keys_of(root, "locked/inner.txt", "locked/deeper/more.txt", "top.txt")
    assert sorted(search(tmp_path, root, "cloistered")) == \
        [str(root / "locked/deeper/more.txt"), str(root / "locked/inner.txt")]
    assert search(tmp_path, root, "ephemeral") == []


def test_missing_root_deletes_nothing(tmp_path) -> None:
    root = tmp_path / "root"
    write(root / "a.txt", "durable record\n")
    write(root / "sub" / "b.txt", "durable annex\n")
    d, keys = run_pass(tmp_path, root)
    assert d["indexed"] == 2
    root.rename(tmp_path / "unmounted")
    d, keys2 = run_pass(tmp_path, root, check_balance=False)  # see the xfail test below
    assert (d["errors"], d["deleted"], d["indexed"], d["unchanged"], d["skipped"]) == (1, 0, 0, 0, 0)
    assert keys2 == keys
    assert len(search(tmp_path, root, "durable")) == 2
    (tmp_path / "unmounted").rename(root)  # back: nothing to do
    d, _ = run_pass(tmp_path, root)
    assert (d["seen"], d["unchanged"], d["errors"], d["deleted"]) == (2, 2, 0, 0)


def test_missing_root_summary_is_balanced(tmp_path) -> None:
    root = tmp_path / "root"
    write(root / "a.txt", "durable record\n")
    run_pass(tmp_path, root)
    root.rename(tmp_path / "unmounted")
    d, _ = run_pass(tmp_path, root, check_balance=False)
    assert d["errors"] == 1
    assert balanced(d), d


def test_counts_stay_balanced_when_the_index_cannot_be_opened(tmp_path) -> None:
    """A pass whose writes cannot happen either raises IndexUnavailable or reports every
    document exactly once (seen = indexed + unchanged + skipped + errors)."""
    root = tmp_path / "root"
    write(root / "a.txt", "first\n")
    run_pass(tmp_path, root)
    for toc in (tmp_path / "state" / "index").glob("_MAIN_*.toc"):
        toc.write_bytes(os.urandom(256))
    write(root / "b.txt", "second\n")
    ix = make_indexer(tmp_path, root)
    try:
        ix.open("index")  # the corrupt index is reported here, before any pass
        summary = ix.run_pass(progress=False)
    except IndexUnavailable:
        return
    finally:
        ix.close()
    d = summary.as_dict()
    assert d["seen"] == d["indexed"] + d["unchanged"] + d["skipped"] + d["errors"], d


def test_single_path_inside_a_source(tmp_path) -> None:
    root = tmp_path / "root"
    a = write(root / "a.txt", "lonely sentence\n")
    write(root / "b.txt", "other sentence\n")
    ix = make_indexer(tmp_path, root)
    ix.open("index")
    try:
        s = ix.run_pass(paths=[str(a)], progress=False).as_dict()
        assert list(s["sources"]) == ["tree"]  # a path inside a configured source belongs to it
        assert (s["seen"], s["indexed"]) == (1, 1)
        s = ix.run_pass(paths=[str(a)], progress=False).as_dict()
        assert (s["seen"], s["unchanged"]) == (1, 1)
        a.unlink()
        s = ix.run_pass(paths=[str(root)], progress=False).as_dict()
        assert (s["seen"], s["indexed"], s["deleted"]) == (1, 1, 1)
        assert ix.store.keys() == keys_of(root, "b.txt")
    finally:
        ix.close()


def test_error_verdict_is_retried_when_ctime_changes(tmp_path) -> None:
    """A file that failed stays unchanged while its stat is the same, and is retried once its
    status changes (chmod changes ctime only): unit-level check of FileSource.unchanged."""
    root = tmp_path / "root"
    f = write(root / "a.txt", "x\n")
    ix = make_indexer(tmp_path, root)
    src = next(iter(ix.sources.values()))
    st = os.stat(f)
    assert src.unchanged((st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino, "unreadable"), st)
    assert src.unchanged((st.st_mtime_ns, st.st_size, None, None, "new"), st)
    os.chmod(f, 0o600)
    st2 = os.stat(f)
    if st2.st_ctime_ns == st.st_ctime_ns:  # coarse clock: force a visible change
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
        st2 = os.stat(f)
    assert not src.unchanged((st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino, "unreadable"), st2)
    assert src.unchanged((st.st_mtime_ns, st.st_size, None, None, "new"), st2)  # a pre-schema-4 row


def test_too_large_is_retried_when_max_size_grows(tmp_path) -> None:
    root = tmp_path / "root"
    write(root / "big.txt", "word " * 300)  # 1,500 bytes
    d, _ = run_pass(tmp_path, root, 'max_size = "1KB"')
    assert (d["skipped"], d["indexed"]) == (1, 0)
    d, _ = run_pass(tmp_path, root, 'max_size = "1KB"')
    assert (d["unchanged"], d["skipped"]) == (1, 0)
    d, _ = run_pass(tmp_path, root, 'max_size = "2KB"')  # the admin raised the limit
    assert (d["indexed"], d["skipped"]) == (1, 0)


# -- issue 17: rewrites that keep size and mtime -----------------------------------------------
def pass_with_reads(tmp_path: Path, root: Path) -> tuple[dict, int]:
    """One pass; returns its counts and how many files it read (each read makes one decision)."""
    ix = make_indexer(tmp_path, root)
    ix.open("index")
    try:
        d = ix.run_pass(progress=False).as_dict()
        reads = sum(v for k, v in ix.pipeline.counters.snapshot().items() if k.startswith("decide."))
    finally:
        ix.close()
    return d, reads


def rewrite_keeping_stat(path: Path, data: bytes, *, replace: bool) -> None:
    """New content of the same size with the old mtime put back, in place (same inode: a
    restored backup, an editor writing in place then `touch -r`) or by rename over it (a new
    inode: `rsync -t`, a build with SOURCE_DATE_EPOCH writing a temp file then renaming)."""
    st = os.stat(path)
    assert len(data) == st.st_size
    if replace:
        tmp = path.with_name(path.name + ".new")
        tmp.write_bytes(data)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp, path)
    else:
        path.write_bytes(data)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_rewrite_that_keeps_size_and_mtime_is_reindexed(tmp_path) -> None:
    root = tmp_path / "root"
    inplace = write(root / "inplace.txt", "alphaword one\n")
    renamed = write(root / "renamed.txt", "bravoword two\n")
    copied = write(root / "copied.txt", "charlieword 3\n")
    spare = write(tmp_path / "spare.txt", "deltaword 333\n")  # same size as copied.txt
    os.utime(spare, ns=(os.stat(copied).st_atime_ns, os.stat(copied).st_mtime_ns))
    time.sleep(2.1)  # older than RACY_WINDOW_NS (even on a whole-second file system): trusted
    d, _ = pass_with_reads(tmp_path, root)
    assert d["indexed"] == 3
    rewrite_keeping_stat(inplace, b"echoword one\n\n"[:len("alphaword one\n")], replace=False)
    rewrite_keeping_stat(renamed, b"foxtrot two\n\n\n", replace=True)
    subprocess.run(["cp", "-p", str(spare), str(copied)], check=True)  # coreutils' cp -p
    assert os.stat(copied).st_mtime_ns == os.stat(spare).st_mtime_ns
    d, reads = pass_with_reads(tmp_path, root)
    assert (d["indexed"], reads) == (3, 3), d
    for gone in ("alphaword", "bravoword", "charlieword"):
        assert search(tmp_path, root, gone) == [], gone
    assert search(tmp_path, root, "echoword") == [str(inplace)]
    assert search(tmp_path, root, "foxtrot") == [str(renamed)]
    assert search(tmp_path, root, "deltaword") == [str(copied)]


def test_chmod_or_touch_reads_once_and_reindexes_nothing(tmp_path) -> None:
    root = tmp_path / "root"
    a = write(root / "a.txt", "golfword\n")
    b = write(root / "b.txt", "hotelword\n")
    c = write(root / "c.txt", "indiaword\n")
    time.sleep(2.1)
    d, _ = pass_with_reads(tmp_path, root)
    assert d["indexed"] == 3
    d, reads = pass_with_reads(tmp_path, root)
    assert (d["unchanged"], reads) == (3, 0), d  # the unchanged pass reads nothing
    os.chmod(a, 0o600)
    st = os.stat(b)
    os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns))  # `touch -r b b`: only ctime moves
    d, reads = pass_with_reads(tmp_path, root)
    assert (d["indexed"], d["unchanged"], reads) == (0, 3, 2), d
    assert search(tmp_path, root, "golfword") == [str(a)]
    assert c.exists()


def test_racy_stat_is_read_again_at_the_next_pass() -> None:
    from indexerd.sources.files.keys import RACY_WINDOW_FINE_NS, trusted_ctime_ns

    now = 1_700_000_000_123_456_789
    fine = now - 30_000_000  # 30 ms before the read on a nanosecond file system: one tick away
    assert trusted_ctime_ns(fine, now) == 0
    assert trusted_ctime_ns(now - RACY_WINDOW_FINE_NS - 1, now) == now - RACY_WINDOW_FINE_NS - 1
    coarse = (now // 10**9 - 1) * 10**9  # whole seconds (ext3, FAT): a 1-2 s tick
    assert trusted_ctime_ns(coarse, now) == 0
    assert trusted_ctime_ns(coarse - 10**9, now) == coarse - 10**9
    assert trusted_ctime_ns(now + 5, now) == 0  # changed while read


@pytest.mark.sqlite_store
def test_old_state_dir_rows_without_ctime_read_nothing_and_get_a_baseline(tmp_path) -> None:
    """A store written before schema 5 (no ino column, ctime only on errors): opening it
    migrates, the next pass reads no file (judged on mtime and size), records each file's ctime
    and inode, and from then on a rewrite that keeps size and mtime is seen."""
    import sqlite3

    root = tmp_path / "root"
    files = [write(root / f"f{i}.txt", f"julietword number {i}\n") for i in range(5)]
    time.sleep(2.1)
    d, _ = pass_with_reads(tmp_path, root)
    assert d["indexed"] == 5
    db = tmp_path / "state" / "state.sqlite3"
    con = sqlite3.connect(db)
    from indexerd.core.store.migrations import MIGRATIONS

    step = next(i for i, m in enumerate(MIGRATIONS) if "ADD COLUMN ino" in m)
    # the later migrations add columns only: undo them too, so the store is a real version `step`
    later = [c for m in MIGRATIONS[step + 1:] for c in re.findall(r"ALTER TABLE (\w+) ADD COLUMN (\w+)", m)]
    # ... and the later index changes: the stat_rows covering index goes back to (source, key)
    reindexed = [n for m in MIGRATIONS[step + 1:] for n in re.findall(r"CREATE INDEX (\w+)", m)]
    # ... and the later tables, triggers and new indexes (the document counts, crawl_due)
    tables = [n for m in MIGRATIONS[step + 1:] for n in re.findall(r"CREATE TABLE (\w+)", m)]
    triggers = [n for m in MIGRATIONS[step + 1:] for n in re.findall(r"CREATE TRIGGER (\w+)", m)]
    assert len(later) == sum(m.count("ALTER TABLE") for m in MIGRATIONS[step + 1:]) and \
        reindexed[:1] in ([], ["documents_source"]) and set(reindexed[1:]) <= {"crawl_due", "crawl_requisites_requisite"}, \
        "a later migration is not undone here: rewrite this"
    undo = "DROP INDEX documents_source; CREATE INDEX documents_source ON documents(source, key);" if reindexed else ""
    undo += "".join(f"DROP INDEX {n};" for n in reindexed[1:])
    undo += "".join(f"DROP TRIGGER {n};" for n in triggers) + "".join(f"DROP TABLE {n};" for n in tables)
    undo += "".join(f"ALTER TABLE {t} DROP COLUMN {c};" for t, c in later)
    con.executescript(f"{undo} UPDATE documents SET ctime_ns = NULL; ALTER TABLE documents DROP COLUMN ino; "
                      f"PRAGMA user_version = {step};")
    con.close()
    d, reads = pass_with_reads(tmp_path, root)
    assert (d["unchanged"], d["indexed"], reads) == (5, 0, 0), d
    con = sqlite3.connect(db)
    rows = dict(((k, (c, i)) for k, c, i in con.execute("SELECT key, ctime_ns, ino FROM documents")))
    con.close()
    assert rows == {f.as_uri(): (os.stat(f).st_ctime_ns, os.stat(f).st_ino) for f in files}
    rewrite_keeping_stat(files[0], b"kiloword number 000\n", replace=False)
    d, reads = pass_with_reads(tmp_path, root)
    assert (d["indexed"], d["unchanged"], reads) == (1, 4, 1), d


# -- issue 18: many deletions at once ----------------------------------------------------------
@pytest.mark.alone  # a ratio of two timings in this process: the other worker's load skews it
def test_thousands_of_deleted_files_leave_in_one_batch(tmp_path) -> None:
    """3,000 files in 10 live segments, all deleted: the pass that sees it takes a small part of
    what deleting them key by key costs (Whoosh's delete_by_term opens a searcher over every
    segment per key, measured here on the same index), and every document leaves the index and
    the store."""
    import shutil

    from indexerd.index import open_index

    root = tmp_path / "root"
    n, segments = 3000, 10
    cfg = parse_config(f'state_dir = "{tmp_path / "state"}"\n[[sources.filesystem]]\nname = "tree"\n'
                       f'path = "{root}"\n', "<test>")
    ix = Indexer(cfg, live=True)
    ix.open("index")
    try:
        for s in range(segments):
            for i in range(n // segments):
                write(root / f"d{s}" / f"f{i}.txt", f"manyword s{s}x{i}\n")
            ix.run_pass(progress=False)
        assert ix.index().doc_count() == n and ix.index().segment_count() >= segments // 2
        keys = sorted(ix.store.keys())
    finally:
        ix.close()

    # the cost of the old way, on this index: one delete_by_term per key (a sample of 100)
    wi = open_index(tmp_path / "state")
    session = wi.session()
    t0 = time.perf_counter()
    for k in keys[::n // 100]:
        session._w.delete_by_term("key", k)
    per_key_seconds = (time.perf_counter() - t0) / len(keys[::n // 100])
    session.cancel()
    wi.close()

    shutil.rmtree(root)
    root.mkdir()
    ix = Indexer(cfg, live=True)
    ix.open("index")
    try:
        ix.pipeline.urgent = False  # as the daemon's scheduled reconcile
        t0 = time.perf_counter()
        d = ix.run_pass(progress=False).as_dict()
        elapsed = time.perf_counter() - t0
        assert d["deleted"] == n, d
        assert ix.index().doc_count() == 0
        assert ix.store.keys() == set()
    finally:
        ix.close()
    assert elapsed < n * per_key_seconds / 3, (elapsed, n * per_key_seconds)


def test_a_first_pass_over_many_binary_files_logs_a_handful_of_lines(tmp_path, caplog) -> None:
    """A sysadmin's first week: one INFO line per skipped binary file (100 of a pass's 128
    lines).  Now a skip is a debug line and the pass's summary counts them by reason."""
    import logging

    root = tmp_path / "tree"
    for i in range(100):
        write(root / "bin" / f"blob{i}.dat", "")
        (root / "bin" / f"blob{i}.dat").write_bytes(bytes(range(256)) * 4 + bytes([i]))
    write(root / "note.txt", "a note\n")
    with caplog.at_level(logging.INFO, logger="indexerd"):
        d, _keys = run_pass(tmp_path, root)
    assert (d["skipped"], d["indexed"]) == (100, 1), d
    info = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert len(info) <= 5, info
    assert any("skipped or failed: binary 100" in m for m in info), info


def test_a_worker_that_cannot_start_is_retried_at_the_next_pass(tmp_path, monkeypatch) -> None:
    """A sysadmin's first week: the extraction worker could not start (a venv on an interpreter
    the service user cannot execute); the documents were recorded parse-error and stayed out of
    the index until their stat changed.  Now it is an ``environment`` error, read again at the
    next pass without any change to the files."""
    from indexerd.extract import isolation, workerprocess

    root = tmp_path / "tree"
    write(root / "note.eml", "From: a@example.org\nSubject: hello\n\nenvironmentword in the body\n")
    write(root / "plain.txt", "plainword\n")
    blocked = tmp_path / "python-not-executable"
    blocked.write_text("#!/bin/sh\n")
    blocked.chmod(0o644)
    isolation.configure(isolation.Limits(), restart=True)  # a new pool: its first worker starts below
    monkeypatch.setattr(workerprocess, "worker_argv", lambda memory: [str(blocked), "-m", "indexerd.extract.worker"])
    d, _ = run_pass(tmp_path, root)
    assert (d["indexed"], d["errors"]) == (1, 1), d
    ix = make_indexer(tmp_path, root)
    ix.open("index")
    try:
        rec = ix.store.get("file://" + str(root / "note.eml"))
        assert (rec.status, rec.reason) == ("error", "environment"), rec
    finally:
        ix.close()
    monkeypatch.undo()
    isolation.configure(isolation.Limits(), restart=True)
    d, _ = run_pass(tmp_path, root)
    assert (d["indexed"], d["unchanged"], d["errors"]) == (1, 1, 0), d
    assert search(tmp_path, root, "environmentword") == [str(root / "note.eml")]


# -- a directory's removal racing its files' queued removals (CI run of 2026-12-05) ---------------
def test_a_directory_moved_away_while_a_files_removal_commits_deletes_each_document_once(tmp_path) -> None:
    """A live event removed one file of ``proj`` (queued in the writer); the directory's own
    event reads the store's keys below it, and the writer commits that removal before the
    directory's removal is queued.  Each document is decided gone once: the daemon's
    ``decide.gone`` counted 31 for a renamed directory of 30 files when the commit landed
    between the two reads."""
    from indexerd.pipeline.stages import PassCounts
    from indexerd.sources.files.live import apply_change

    root = tmp_path / "root"
    files = [write(root / "proj" / f"f{i}.txt", f"file {i}\n") for i in range(3)]
    ix = make_indexer(tmp_path, root)
    ix.open("index")
    try:
        assert ix.run_pass(progress=False).as_dict()["indexed"] == 3
        ix.flush()
        (root / "proj").rename(tmp_path / "elsewhere")
        pipeline, src = ix.pipeline, ix.sources["tree"]
        pipeline.gone(path_to_key(str(files[0])), PassCounts())  # queued, not committed
        read_keys = ix.store.keys_with_prefix

        def keys_then_commit(source: str, prefix: str) -> set[str]:
            keys = read_keys(source, prefix)
            ix.flush()  # the queued removal commits right after the read
            return keys

        ix.store.keys_with_prefix = keys_then_commit  # type: ignore[method-assign]
        counts = PassCounts()
        apply_change(src, pipeline, str(root / "proj"), True, counts)
        ix.flush()
        assert counts.deleted == 2
        assert ix.counters.snapshot().get("decide.gone") == 3
        assert ix.store.keys() == set()
    finally:
        ix.close()
