"""The files a pass will read are held a chunk at a time (indexerd/sources/files/readqueue.py):
order kept across the temp file, small passes never spilled, a failed spill keeps them in
memory; a real pass whose files to read span several chunks indexes every one."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import one_pass

from indexerd.config import parse_config
from indexerd.sources.files import readqueue
from indexerd.sources.files.readqueue import ReadQueue


def test_entries_come_back_in_order_across_spilled_chunks(tmp_path) -> None:
    st = os.stat(tmp_path)
    q = ReadQueue(chunk=3)
    for i in range(11):
        q.append((f"/t/{i}", st))
    assert len(q) == 11 and q._file is not None and len(q._tail) == 2  # 3 chunks spilled
    assert [p for p, _ in q] == [f"/t/{i}" for i in range(11)]
    assert all(s.st_ino == st.st_ino for _, s in q)
    q.close()
    q.close()


def test_a_small_pass_never_touches_the_disk(tmp_path) -> None:
    q = ReadQueue(chunk=100)
    for i in range(99):
        q.append((f"/t/{i}", os.stat(tmp_path)))
    assert q._file is None and len(list(q)) == 99


def test_a_spill_that_fails_keeps_the_entries_in_memory(tmp_path, monkeypatch, caplog) -> None:
    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(readqueue.tempfile, "TemporaryFile", full)
    q = ReadQueue(chunk=2)
    for i in range(7):
        q.append((f"/t/{i}", os.stat(tmp_path)))
    assert [p for p, _ in q] == [f"/t/{i}" for i in range(7)]
    assert sum("keeping them in memory" in r.getMessage() for r in caplog.records) == 1


def test_a_first_pass_over_several_chunks_indexes_every_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(readqueue, "CHUNK", 7)
    made = []
    real = readqueue.tempfile.TemporaryFile

    def temp_file(*a, **k):
        made.append(k.get("prefix"))
        return real(*a, **k)

    monkeypatch.setattr(readqueue.tempfile, "TemporaryFile", temp_file)
    tree = tmp_path / "tree"
    for i in range(30):
        (tree / f"d{i % 4}").mkdir(parents=True, exist_ok=True)
        (tree / f"d{i % 4}" / f"f{i:02d}.txt").write_text(f"chunkword{i}\n", encoding="utf-8")
    cfg = parse_config(f'state_dir = "{tmp_path / "state"}"\n[[sources.filesystem]]\nname = "t"\n'
                       f'path = "{tree}"\nwatch = false\n')
    counts = one_pass(cfg)
    assert counts["indexed"] == 30 and counts["errors"] == 0, counts
    assert made == ["indexerd-readqueue-"]  # the 30 files to read went through the temp file
