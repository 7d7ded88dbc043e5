"""JSON and JSON Lines (a new-user trial: a ``.json`` file was indexed as its raw text, so its
escapes glued words together -- ``naïve\\nnext`` one token --, text escaped as ``\\u00e9`` could
not be found by its word, and keys and punctuation crowded the snippets).  Now its strings
(unescaped), keys and numbers are the text; a malformed document is indexed as its raw text and
logged; a large one is parsed in an extraction worker, under its time and memory bound.  Real
files through the real indexer and ``indexerd index``, on every engine; real worker processes.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import sys
from pathlib import Path

import pytest
from conftest import CLI
from test_hostile_files import run_measured
from test_index_conformance import build

from indexerd.core.errors import SkipDocument
from indexerd.core.filekeys import path_to_key
from indexerd.extract import MEDIA_JSON, MEDIA_JSON_LINES, MEDIA_TEXT, extract, guess_media_type
from indexerd.extract.isolation import Limits, WorkerPool
from indexerd.extract.jsontext import IN_PROCESS_MAX_BYTES, read_json

#: the trial's document, as its bytes on disk (escapes and all)
MSG = b'{"msg": "caf\\u00e9 na\\u00efve\\nnext"}'


def skip_of(data: bytes, name: str, **kw) -> SkipDocument:
    with pytest.raises(SkipDocument) as caught:
        extract(data, name=name, **kw)
    return caught.value


def records_json(target_bytes: int) -> bytes:
    """An API dump of about ``target_bytes``: an array of user records (escaped accents, a line
    break in a string, numbers, booleans, null), the last one holding the word ``omegarecord``."""
    records = []
    size = 2
    i = 0
    while size < target_bytes:
        rec = {"id": i, "name": f"Zo\u00eb Example {i}", "email": f"user{i}@example.test",
               "tags": ["alpha", "beta"], "bio": "caf\u00e9 na\u00efve\nsecond line", "score": 12.5,
               "active": True, "manager": None}
        records.append(rec)
        size += len(json.dumps(rec)) + 2
        i += 1
    records[-1]["bio"] = "omegarecord"
    return json.dumps(records).encode()


# -- what the text is -----------------------------------------------------------------------------

def test_strings_are_unescaped_into_their_words() -> None:
    ex = extract(MSG, name="msg.json")
    assert ex.media_type == MEDIA_JSON and ex.notes == ()
    assert ex.text == "msg: café naïve\nnext"
    assert "\\u" not in ex.text and '"' not in ex.text
    assert ex.title == "msg.json"  # no title member: named as a plain file of that name


def test_keys_numbers_and_document_order() -> None:
    data = (b'{"server": {"host": "db.example.test", "port": 5432, "ratio": 1.50, "big": 2e3},\n'
            b' "tags": ["red", "", "blue"], "debug": false, "owner": null, "quote": "say \\"hi\\"",\n'
            b' "nan": NaN, "emoji": "\\ud83d\\ude00 ok"}')
    ex = extract(data, name="app.json")
    assert ex.text.split("\n") == [
        "server", "host: db.example.test", "port: 5432", "ratio: 1.50", "big: 2e3",  # as written
        "tags", "red", "blue", "debug", "owner", 'quote: say "hi"', "nan", "emoji: \U0001F600 ok"]


@pytest.mark.parametrize(("data", "name", "title"), [
    (b'{"title": "Quarterly report", "name": "q3"}', "r.json", "Quarterly report"),
    (b'{"name": "left-pad", "version": "1.3.0"}', "package.json", "left-pad"),
    (b'{"Title": "  Two\\n lines  "}', "t.json", "Two lines"),          # one line, any case
    (b'{"title": 42, "name": ""}', "n.json", "n.json"),                 # not a string, empty
    (b'{"meta": {"title": "nested"}}', "m.json", "m.json"),             # not top-level
    (b'[{"title": "in an array"}]', "a.json", "a.json"),
    (b'{"x": "y"}', "https://example.test/api/items?page=2", "items?page=2"),  # as plain text
])
def test_title_from_a_top_level_title_or_name(data: bytes, name: str, title: str) -> None:
    assert extract(data, name=name).title == title


def test_several_values_one_after_another_are_one_document() -> None:
    ex = extract(b'{"a": "one"}\n{"a": "two"} [3]', name="dump.json")
    assert (ex.text, ex.notes) == ("a: one\na: two\n3", ())


def test_json_lines_each_line_a_value_and_a_bad_line_kept_as_raw_text() -> None:
    data = b'{"event": "login", "user": "ren\\u00e9e"}\n\n{"event": "logout"\n["ok", 1]\n'
    ex = extract(data, name="events.jsonl")
    assert ex.media_type == MEDIA_JSON_LINES
    assert ex.text == 'event: login\nuser: renée\n{"event": "logout"\nok\n1'
    assert ex.notes == ("1 of 3 lines are not JSON (first: line 3: Expecting ',' delimiter: "
                        "column 19); those indexed as raw text",)


@pytest.mark.parametrize(("data", "why"), [
    (b'{\n  "name": "trailing",\n}', "not JSON (Expecting property name enclosed in double quotes: "
                                     "line 3 column 1); indexed as raw text"),
    (b'// settings\n{"a": 1}', "not JSON (Expecting value: line 1 column 1); indexed as raw text"),
    (b'{"a": "unterminated', "not JSON (Unterminated string starting at: line 1 column 7); "
                             "indexed as raw text"),
    (b"[" * 100_000 + b"]" * 100_000, "nested deeper than the JSON parser's limit; indexed as raw text"),
])
def test_a_malformed_document_is_its_raw_text_with_the_reason(data: bytes, why: str) -> None:
    ex = extract(data, name="bad.json")
    assert ex.notes == (why,)
    assert ex.media_type == MEDIA_JSON
    assert ex.text == data.decode().strip()  # all of it: never lost


def test_nul_and_lone_surrogates_are_not_passed_to_the_index() -> None:
    ex = extract(b'{"a": "x\\u0000y", "b": "half \\ud800 pair", "c": "\\udc00"}', name="s.json")
    assert ex.text == "a: xy\nb: half \ufffd pair\nc: \ufffd"
    ex.text.encode("utf-8")  # strict: no surrogate left


@pytest.mark.parametrize("data", [b"{}", b"[]", b"null", b'[true, false, null, ""]', b'{"": ""}'])
def test_no_key_string_or_number_is_empty(data: bytes) -> None:
    assert skip_of(data, "e.json").reason == "empty"


def test_bom_utf16_and_a_compressed_json() -> None:
    assert extract(b"\xef\xbb\xbf" + MSG, name="b.json").text == "msg: café naïve\nnext"
    utf16 = '{"msg": "naïve"}'.encode("utf-16")
    assert extract(utf16, name="u.json").text == "msg: naïve"
    ex = extract(gzip.compress(MSG), name="msg.json.gz")
    assert (ex.media_type, ex.text) == (MEDIA_JSON, "msg: café naïve\nnext")


@pytest.mark.parametrize(("name", "declared", "expected"), [
    ("a.json", None, MEDIA_JSON),
    ("notebook.ipynb", None, MEDIA_JSON),
    ("map.geojson", None, MEDIA_JSON),
    ("a.jsonl", None, MEDIA_JSON_LINES),
    ("a.ndjson", None, MEDIA_JSON_LINES),
    ("https://example.test/api/items", "application/json; charset=utf-8", MEDIA_JSON),
    ("https://example.test/x", "application/ld+json", MEDIA_JSON),       # RFC 6839 +json
    ("https://example.test/x", "application/vnd.api+json", MEDIA_JSON),
    ("https://example.test/x", "text/json", MEDIA_JSON),
    ("https://example.test/x", "application/x-ndjson", MEDIA_JSON_LINES),
    ("https://example.test/x.json", "text/plain", MEDIA_TEXT),           # the server's word wins
    ("data", None, MEDIA_TEXT),                                          # never guessed from bytes
])
def test_json_by_declared_type_or_extension(name: str, declared: str | None, expected: str) -> None:
    assert guess_media_type(name, b'{"a": 1}', declared) == expected


def test_a_binary_file_named_json_is_binary() -> None:
    assert skip_of(b"\x00\x01\x02{}" * 100, "blob.json").reason == "binary"


def test_over_max_size_is_too_large() -> None:
    assert skip_of(MSG, "msg.json", max_bytes=10).reason == "too-large"


# -- where it is parsed ---------------------------------------------------------------------------

def test_a_large_document_is_read_in_a_worker_with_the_same_text() -> None:
    data = records_json(IN_PROCESS_MAX_BYTES + 200_000)
    ex = extract(data, name="big.json")  # through the process-wide worker pool
    assert ex.text == read_json(data, MEDIA_JSON, "big.json", len(data)).text
    assert "omegarecord" in ex.text and "bio: café naïve\nsecond line" in ex.text
    assert ex.encoding == "utf-8" and ex.notes == ()


def test_the_workers_memory_bound_holds_for_a_hostile_document() -> None:
    """Ten million bytes of empty objects (a dict per 3 bytes, ~250 MB of them) under a 64 MiB
    bound: ``too-large``, and the next document is read by a fresh worker."""
    hostile = b"[" + b"{}," * 3_333_333 + b"{}]"
    pool = WorkerPool(Limits(memory_bytes=64 * 1024 * 1024, timeout_seconds=60))
    try:
        with pytest.raises(SkipDocument) as caught:
            pool.extract(MEDIA_JSON, hostile, "hostile.json", 20_000_000)
        assert caught.value.reason == "too-large", caught.value
        doc = pool.extract(MEDIA_JSON, MSG, "msg.json", 20_000_000)
        assert doc.text == "msg: café naïve\nnext" and pool.spawned == 2
    finally:
        pool.close()


# -- through the indexer --------------------------------------------------------------------------

def json_tree(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "msg.json").write_bytes(MSG)
    (root / "bad.json").write_bytes(b'{\n  "note": "wombatword in a broken file",\n}\n')
    (root / "events.jsonl").write_bytes(b'{"event": "deploy", "by": "ra\\u00fal"}\n')
    (root / "package.json").write_bytes(b'{"name": "quokka-tools", "description": "stripes"}')


def test_words_found_and_snippets_clean_on_every_engine(tmp_path, index_engine) -> None:
    json_tree(tmp_path / "tree")
    ix = build(tmp_path, tmp_path / "tree", index_engine)
    try:
        for word, name in (("café", "msg.json"), ("naïve", "msg.json"), ("next", "msg.json"),
                           ("wombatword", "bad.json"), ("raúl", "events.jsonl"),
                           ("deploy", "events.jsonl"), ("stripes", "package.json")):
            hits = ix.search(word)
            assert [Path(h.path).name for h in hits] == [name], (ix.engine, word)
            assert "\\u" not in hits[0].snippet and "\\n" not in hits[0].snippet, (ix.engine, hits[0].snippet)
        (hit,) = ix.search("café")
        assert "café naïve" in hit.snippet and "{" not in hit.snippet, (ix.engine, hit.snippet)
        (hit,) = ix.search("stripes")
        assert hit.title == "quokka-tools", (ix.engine, hit.title)
    finally:
        ix.close()


def test_a_malformed_file_is_indexed_as_text_and_logged_by_indexerd_index(tmp_path) -> None:
    root = tmp_path / "tree"
    json_tree(root)
    cli = CLI(tmp_path / "state")
    p = cli.run("index", "--json", str(root))
    s = json.loads(p.stdout)
    assert (s["indexed"], s["skipped"], s["errors"]) == (4, 0, 0), s
    bad = root / "bad.json"
    warnings = [line for line in p.stderr.splitlines() if "bad.json" in line]
    assert len(warnings) == 1 and "WARNING" in warnings[0], p.stderr
    assert ("not JSON (Expecting property name enclosed in double quotes: line 3 column 1); "
            "indexed as raw text") in warnings[0]
    assert [h["path"] for h in cli.search("wombatword")] == [str(bad)]
    # unchanged: not read again, so not logged again
    p = cli.run("index", "--json", str(root))
    assert json.loads(p.stdout)["unchanged"] == 4 and "bad.json" not in p.stderr, p.stderr


def test_the_fallback_is_logged_and_counted_by_the_pipeline(tmp_path, caplog) -> None:
    from indexerd.config import load_config
    from indexerd.runtime.indexer import Indexer

    json_tree(tmp_path / "tree")
    cfg = tmp_path / "indexerd.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\n[[sources.filesystem]]\nname = "t"\n'
                   f'path = "{tmp_path / "tree"}"\nwatch = false\n', encoding="utf-8")
    ix = Indexer(load_config(str(cfg)))
    ix.open("index")
    try:
        with caplog.at_level(logging.WARNING, logger="indexerd.pipeline.stages"):
            assert ix.run_pass(progress=False).totals.as_dict()["indexed"] == 4
        assert ix.counters.snapshot().get("extract.fallback") == 1
    finally:
        ix.close()
    key = path_to_key(str(tmp_path / "tree" / "bad.json"))
    assert [r.getMessage() for r in caplog.records if "raw text" in r.getMessage()] == [
        f"extraction of {key}: not JSON (Expecting property name enclosed in double quotes: line 3 "
        "column 1); indexed as raw text"]


@pytest.mark.slow
@pytest.mark.alone  # a time and memory bound
def test_a_10mb_json_stays_under_the_bounds_and_a_hostile_one_is_too_large(tmp_path) -> None:
    """A 10 MB API dump is indexed, its last record found, in bounded time and daemon memory
    (the parse runs in a worker, under its own bound); 10 MB of empty objects under a 192 MiB
    worker bound is skipped ``too-large`` and the pass goes on."""
    root = tmp_path / "tree"
    root.mkdir()
    (root / "dump.json").write_bytes(records_json(10_000_000))
    (root / "empties.json").write_bytes(b"[" + b"{}," * 3_333_333 + b"{}]")
    (root / "msg.json").write_bytes(MSG)
    cfg = tmp_path / "indexerd.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\n[extract]\nmemory = "192MiB"\n'
                   f'[[sources.filesystem]]\nname = "t"\npath = "{root}"\nwatch = false\n', encoding="utf-8")
    cli = CLI(tmp_path / "state", cfg)
    code, out, err, secs, rss_mb = run_measured(
        [sys.executable, "-m", "indexerd.cli.main", "index", "-c", str(cfg), "--json"], cli.env, timeout=120)
    assert code == 0, err[-2000:]
    s = json.loads(out)
    assert (s["indexed"], s["skipped"], s["errors"]) == (2, 1, 0), (s, err[-2000:])
    skipped = {r["key"]: r for r in json.loads(cli.run("ctl", "report", "--skipped", "--json").stdout)}
    assert skipped[path_to_key(str(root / "empties.json"))]["reason"] == "too-large", skipped
    assert [h["path"] for h in cli.search("omegarecord")] == [str(root / "dump.json")]
    assert secs < 60, f"{secs:.1f} s"
    assert rss_mb < 400, f"indexerd index peaked at {rss_mb:.0f} MB"
    assert os.path.getsize(root / "dump.json") >= 10_000_000
