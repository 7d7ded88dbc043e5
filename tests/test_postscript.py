"""PostScript (issue 33): real files written here, read by the real Ghostscript (``gs``, Debian
package ``ghostscript``, which .ci/run installs: these tests fail, not skip, without it).  The
words a page shows are indexed, never the PostScript code; a looping program is skipped
``timeout`` by gs's own bound; without gs the file is skipped ``unsupported-type``."""

from __future__ import annotations

import gzip
import json
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

import pytest
from conftest import CLI

from indexerd.core.errors import SkipDocument
from indexerd.extract import extract, guess_media_type, isolation
from indexerd.extract import formats as F
from indexerd.extract.isolation import Limits, WorkerPool
from indexerd.core.filekeys import path_to_key


def make_ps(words: str = "zebrafinch quokka", title: str = "Bird notes",
            more: str = "second line wallaby") -> bytes:
    """A one-page PostScript document showing ``words`` and ``more`` in Helvetica, with the
    DSC header comments ``%%Title:`` and ``%%CreationDate:``."""
    return (f"%!PS-Adobe-3.0\n%%Title: ({title})\n%%Creator: hand\n"
            "%%CreationDate: (D:20240305101112Z)\n%%Pages: 1\n%%EndComments\n"
            "/Helvetica findfont 12 scalefont setfont\n"
            f"72 720 moveto ({words}) show\n72 700 moveto ({more}) show\n"
            "(printedjunk) print\nshowpage\n%%EOF\n").encode()


def skip_of(data: bytes, name: str, **kw) -> SkipDocument:
    with pytest.raises(SkipDocument) as caught:
        extract(data, name=name, **kw)
    return caught.value


def gs_children(pid: int) -> list[int]:
    """The live Ghostscript processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(") ", 1)[1].split()
            with open(f"/proc/{entry}/comm") as fh:
                comm = fh.read().strip()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z" and comm == "gs":
            found.append(int(entry))
    return found


@pytest.fixture
def pool():
    made = WorkerPool(Limits(timeout_seconds=2.0))
    yield made
    made.close()


def test_the_words_a_page_shows_title_and_date() -> None:
    ex = extract(make_ps(), name="birds.ps")
    assert ex.media_type == F.MEDIA_POSTSCRIPT
    assert ex.text.split("\n") == ["zebrafinch quokka", "second line wallaby"]
    assert ex.title == "Bird notes"
    assert ex.document_date == ("CreationDate", "2024-03-05T10:11:12Z")
    # the program is not text: no code, no comment, nothing it prints on its standard output
    for code in ("%!PS", "Helvetica", "findfont", "showpage", "printedjunk"):
        assert code not in ex.text and code not in ex.title
    # no %%Title: the first line; an unreadable %%CreationDate: no date
    bare = make_ps().replace(b"%%Title: (Bird notes)\n", b"").replace(b"D:20240305101112Z", b"soon")
    ex = extract(bare, name="bare.ps")
    assert (ex.title, ex.document_date) == ("zebrafinch quokka", None)


def test_an_eps_without_showpage_has_its_text() -> None:
    eps = (b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 200 50\n"
           b"/Helvetica findfont 10 scalefont setfont 5 20 moveto (figure caption okapi) show\n")
    ex = extract(eps, name="figure.eps")
    assert (ex.media_type, ex.text) == (F.MEDIA_POSTSCRIPT, "figure caption okapi")


def test_ps_gz_is_read_as_the_postscript_inside() -> None:
    ex = extract(gzip.compress(make_ps()), name="/papers/birds.ps.gz")
    assert ex.media_type == F.MEDIA_POSTSCRIPT
    assert ex.text.split("\n") == ["zebrafinch quokka", "second line wallaby"]
    assert "%!PS" not in ex.text and ex.title == "Bird notes"


@pytest.mark.parametrize(("name", "declared"), [
    (None, None), ("paper", None), ("notes.txt", None), ("download", "application/octet-stream"),
    ("https://example.test/get?id=3", "text/plain"), ("https://example.test/a", "image/x-eps"),
])
def test_a_file_starting_with_the_postscript_header_is_postscript_whatever_its_name(name, declared) -> None:
    assert guess_media_type(name, make_ps(), declared) == F.MEDIA_POSTSCRIPT
    ex = extract(make_ps(), declared, name=name)
    assert ex.text.startswith("zebrafinch quokka") and "%!PS" not in ex.text


def test_text_over_max_size_is_too_large() -> None:
    many = (b"%!PS\n/Helvetica findfont 12 scalefont setfont\n"
            b"1 1 5000 { pop 72 720 moveto (many words on many pages) show showpage } for\n")
    skipped = skip_of(many, "pages.ps", max_bytes=20_000)
    assert skipped.reason == "too-large" and "text" in skipped.detail


@pytest.mark.alone  # a wall-clock bound (1.5-2 s)
def test_an_endless_loop_is_ended_by_ghostscripts_own_bound(pool) -> None:
    """gs gets 80 % of the worker's 2 s: it is killed and the document skipped ``timeout``
    while the worker lives on (no re-spawn) and no gs process is left behind."""
    pool.extract(F.MEDIA_POSTSCRIPT, make_ps(), "warm.ps", 10**6)
    (worker,) = pool.pids()
    started = time.monotonic()
    with pytest.raises(SkipDocument) as caught:
        pool.extract(F.MEDIA_POSTSCRIPT, b"%!PS-Adobe-3.0\n{} loop\n", "loop.ps", 10**6)
    took = time.monotonic() - started
    assert caught.value.reason == "timeout", caught.value
    assert "Ghostscript ran more than 1.6 s" in caught.value.detail
    assert 1.5 < took < 2.0, took
    assert pool.pids() == [worker] and pool.spawned == 1
    assert gs_children(worker) == []
    assert not list(Path(tempfile.gettempdir()).glob("indexerd-worker-*/indexerd-gs-*"))
    assert "zebrafinch" in pool.extract(F.MEDIA_POSTSCRIPT, make_ps(), "next.ps", 10**6).text


@pytest.mark.alone  # a wall-clock bound (gs starts within 1 s)
def test_a_ghostscript_whose_worker_was_killed_ends_by_its_cpu_limit(pool) -> None:
    """A worker killed mid-document (the pool's bound, the OOM killer) cannot kill its gs: the
    CPU-time limit set on gs (ceil(1.6 s) + 1 = 3 s) ends a looping one on its own."""
    pool.extract(F.MEDIA_POSTSCRIPT, make_ps(), "warm.ps", 10**6)
    (worker,) = pool.pids()
    caught: list[SkipDocument] = []

    def run() -> None:
        try:
            pool.extract(F.MEDIA_POSTSCRIPT, b"%!PS\n{} loop\n", "loop.ps", 10**6)
        except SkipDocument as exc:
            caught.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 1.0
    while not (gs := gs_children(worker)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(gs) == 1, "gs did not start"
    os.kill(worker, signal.SIGKILL)
    thread.join(10)
    assert [c.reason for c in caught] == ["parse-error"]  # the worker died (SIGKILL)
    deadline = time.monotonic() + 8.0
    while _running(gs[0]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(gs[0]), "the orphaned gs still runs"
    assert not list(Path(tempfile.gettempdir()).glob("indexerd-worker-*/indexerd-gs-*"))


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_a_document_writes_no_file_outside_ghostscripts_own_temp_dir(tmp_path) -> None:
    """-dSAFER lets a job write in the temporary directory: gs's is a fresh one, removed after,
    so a document's ``file`` operator cannot write to /tmp (where ``tmp_path`` is)."""
    target = tmp_path / "escaped.txt"
    cwd_target = Path.cwd() / "escaped-cwd.txt"
    program = make_ps().replace(
        b"showpage\n",
        f"{{ ({target}) (w) file (owned) writestring }} stopped pop\n"
        f"{{ (escaped-cwd.txt) (w) file (owned) writestring }} stopped pop\nshowpage\n".encode())
    ex = extract(program, name="writer.ps")
    assert ex.text.split("\n") == ["zebrafinch quokka", "second line wallaby"]
    assert not target.exists() and not cwd_target.exists()


def test_without_ghostscript_a_file_is_skipped_unsupported_type_not_indexed_raw(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-gs-here"))
    isolation.configure(Limits(), restart=True)  # a new pool, whose workers get this PATH
    try:
        skipped = skip_of(make_ps(), "birds.ps")
        assert skipped.reason == "unsupported-type"
        assert "install the ghostscript package" in skipped.detail, skipped.detail
        assert skip_of(make_ps(), "paper").reason == "unsupported-type"
        assert skip_of(gzip.compress(make_ps()), "birds.ps.gz").reason == "unsupported-type"
    finally:
        monkeypatch.undo()
        isolation.configure(Limits(), restart=True)


def _tree(root: Path) -> dict[str, Path]:
    root.mkdir()
    files = {"birds.ps": make_ps(), "birds.ps.gz": gzip.compress(make_ps("gzipped kakapo")),
             "figure": make_ps("unnamed numbat")}
    for name, data in files.items():
        (root / name).write_bytes(data)
    return {name: root / name for name in files}


def test_postscript_words_are_searchable_end_to_end_and_the_code_is_not(tmp_path) -> None:
    paths = _tree(tmp_path / "root")
    cli = CLI(tmp_path / "state")
    s = cli.index(str(tmp_path / "root"))
    assert (s["indexed"], s["skipped"], s["errors"]) == (3, 0, 0), s
    for word, name in (("zebrafinch", "birds.ps"), ("kakapo", "birds.ps.gz"), ("numbat", "figure")):
        hits = cli.search(word)
        assert [h["path"] for h in hits] == [str(paths[name])], (word, hits)
        assert "%!PS" not in hits[0]["snippet"] and "findfont" not in hits[0]["snippet"], hits[0]
    assert [h["title"] for h in cli.search("wallaby") if h["path"] == str(paths["birds.ps"])] \
        == ["Bird notes"]
    for code in ("Helvetica", "findfont", "showpage", "printedjunk", "EndComments"):
        assert cli.search(code) == [], code


def test_without_ghostscript_end_to_end_nothing_is_indexed_raw(tmp_path) -> None:
    paths = _tree(tmp_path / "root")
    # a process of its own: this process's extraction workers started with gs on their PATH
    cli = CLI(tmp_path / "state", in_process=False)
    cli.env["PATH"] = str(tmp_path / "no-gs-here")
    s = cli.index(str(tmp_path / "root"))
    assert (s["indexed"], s["skipped"]) == (0, 3), s
    report = {r["key"]: r for r in json.loads(cli.run("ctl", "report", "--skipped", "--json").stdout)}
    for path in paths.values():
        assert report[path_to_key(str(path))]["reason"] == "unsupported-type", report
    for word in ("zebrafinch", "Helvetica", "findfont"):
        assert cli.search(word) == [], word


@pytest.mark.alone  # a wall-clock bound: the second pass must not pay Ghostscript's bound again
def test_a_file_that_hit_the_time_bound_is_not_read_again_while_unchanged(tmp_path) -> None:
    """A looping program costs Ghostscript's bound once (``timeout``); the next pass takes the
    verdict as it stands on the same stat (``unchanged``, no extraction, fast), whatever the
    verdict was; the file rewritten is read again."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "loop.ps").write_bytes(b"%!PS-Adobe-3.0\n{} loop\n")
    (root / "birds.ps").write_bytes(make_ps())
    cfg = tmp_path / "indexerd.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\n[extract]\ntimeout = "2s"\n'
                   f'[[sources.filesystem]]\nname = "t"\npath = "{root}"\nwatch = false\n', encoding="utf-8")
    cli = CLI(tmp_path / "state", cfg)
    started = time.monotonic()
    s = cli.index()
    assert time.monotonic() - started > 1.5  # gs ran into its 1.6 s
    assert (s["indexed"], s["skipped"]) == (1, 1), s
    report = {r["key"]: r for r in json.loads(cli.run("ctl", "report", "--skipped", "--json").stdout)}
    assert report[path_to_key(str(root / "loop.ps"))]["reason"] == "timeout", report
    for _ in range(2):
        started = time.monotonic()
        s = cli.index()
        took = time.monotonic() - started
        assert (s["unchanged"], s["indexed"], s["skipped"]) == (2, 0, 0), s
        assert took < 1.0, f"an unchanged pass took {took:.1f} s"
    (root / "loop.ps").write_bytes(make_ps(words="repaired kestrel"))
    s = cli.index()
    assert (s["indexed"], s["unchanged"]) == (1, 1), s
    assert [h["path"] for h in cli.search("kestrel")] == [str(root / "loop.ps")]
