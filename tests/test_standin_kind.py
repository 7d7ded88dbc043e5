"""Issue 32's proof that a source kind declares everything about itself: tests/jsonl_kind.py, a
directory of JSON lines, is one module plus one registry entry (:func:`jsonl_kind.register`),
and with no other file changed it is a config table with its own checks, its secret is masked by
``check-config``, ``indexerd index`` indexes it, ``ctl search`` finds it, and a running daemon
shows it in ``ctl status`` and answers its verb (``ctl ingest``); the config's words for its
keys, its glob keys, the source its keys name and how a typed key is stored are its own too
(``ctl reindex``/``explain`` of its keys)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import jsonl_kind
from cliharness import LAUNCH, isolated_env, no_system_config, run_in_process
from conftest import stop_daemon
from daemonhttp import short_base
from indexerd.config import parse_config, to_toml
from indexerd.core.errors import ConfigError
from indexerd.sources import registry

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SECRET = "s3cret-api-key"


@pytest.fixture
def kind():
    """The stand-in kind registered for one test, then gone (the other tests see three kinds)."""
    jsonl_kind.register()
    try:
        yield jsonl_kind.KIND
    finally:
        registry.unregister("jsonl")
    assert "jsonl" not in registry.KINDS and "ingest" not in registry.VERBS


def _lines(path: Path, docs: list[dict]) -> None:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")


@pytest.fixture
def setup(kind):
    """A directory of JSON lines, a config with it as ``[[sources.jsonl]]``, the environment of
    commands; removed after."""
    base = short_base()
    (base / "lines").mkdir()
    _lines(base / "lines" / "a.jsonl", [
        {"id": 1, "title": "Ospreys", "text": "The osprey dives feet first for fish.", "date": "2024-01-02T00:00:00+00:00"},
        {"id": 2, "title": "Kestrels", "text": "A kestrel hovers over the verge.", "date": "2023-05-06T00:00:00+00:00"},
    ])
    cfg = base / "indexerd.toml"
    cfg.write_text(f'state_dir = "{base / "state"}"\ncontrol_socket = "{base / "s.sock"}"\n'
                   f'[index]\ncommit_interval = "0.2s"\n'
                   f'[[sources.jsonl]]\nname = "birds"\npath = "{base / "lines"}"\napi_key = "{SECRET}"\n',
                   encoding="utf-8")
    env = isolated_env(None)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(REPO), env.get("PYTHONPATH", "")])
    try:
        yield base, cfg, env, no_system_config(None)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_kinds_table_checks_and_secret_come_from_its_module(kind, tmp_path) -> None:
    cfg = parse_config(f'[[sources.jsonl]]\nname = "birds"\npath = "{tmp_path}"\napi_key = "{SECRET}"\n', "t.toml")
    assert cfg.sources.jsonl == [jsonl_kind.JsonlTable(name="birds", path=str(tmp_path), api_key=SECRET)]
    assert cfg.sources.web == []
    shown = to_toml(cfg)
    assert SECRET not in shown and 'api_key = "***"' in shown and "[[sources.jsonl]]" in shown
    with pytest.raises(ConfigError, match=r"^t\.toml: sources\.jsonl\[0\]\.path: expected an absolute path, got 'rel'$"):
        parse_config('[[sources.jsonl]]\nname = "birds"\npath = "rel"\n', "t.toml")
    with pytest.raises(ConfigError, match=r"sources\.jsonl\[0\]\.pth: unknown key \(did you mean 'path'\?\)"):
        parse_config('[[sources.jsonl]]\nname = "birds"\npth = "/x"\n', "t.toml")


def test_the_kind_declares_its_config_words_and_its_keys(kind, tmp_path) -> None:
    """The hooks the config, ``ctl`` and the daemon ask of a kind (registry.Kind): the words for a
    key of its table, which keys hold glob patterns, which source a key names, how a key typed
    is stored; none of them written in indexerd."""
    from indexerd.output.reports import normalise_key

    with pytest.raises(ConfigError, match=r"^t\.toml: sources\.jsonl\[0\]\.folder: unknown key \(did you mean 'path'\?\)$"):
        parse_config('[[sources.jsonl]]\nname = "birds"\nfolder = "/x"\n', "t.toml")
    with pytest.raises(ConfigError, match=r"^t\.toml: sources\.jsonl\[0\]\.include: expected a list \(of strings "
                                          r"or glob patterns\), got str$"):
        parse_config(f'[[sources.jsonl]]\nname = "birds"\npath = "{tmp_path}"\ninclude = "*.jsonl"\n', "t.toml")
    assert registry.kind_of_key("jsonl:birds/1") is kind and registry.kind_of_key("JSONL:birds/1") is kind
    assert registry.named_source("jsonl:birds/1") == "birds"
    with pytest.raises(ConfigError, match=r"^jsonl:birds: a JSON lines key is jsonl:<source>/<id>$"):
        registry.named_source("jsonl:birds")
    assert normalise_key("JSONL:birds/1") == "jsonl:birds/1"
    assert registry.key_file("jsonl:birds/1") is None   # its documents are lines, not files
    shown = run_in_process(["ctl", "reindex", "--help"], isolated_env(None), no_system_config(None))  # ctl's help
    assert shown.returncode == 0, shown.stderr
    assert "or a jsonl:<source>/<id> key" in " ".join(shown.stdout.split()), shown.stdout
    assert "  indexerd ctl reindex jsonl:birds/1\n" in shown.stdout, shown.stdout


def test_without_its_registry_entry_the_table_is_unknown(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"sources\.jsonl: unknown key"):
        parse_config(f'[[sources.jsonl]]\nname = "birds"\npath = "{tmp_path}"\n', "t.toml")


def test_check_config_index_and_search_through_the_command_line(setup) -> None:
    base, cfg, env, nosys = setup
    p = run_in_process(["check-config", "-c", str(cfg)], env, nosys)
    assert p.returncode == 0, p.stderr
    assert SECRET not in p.stdout + p.stderr and 'api_key = "***"' in p.stdout
    p = run_in_process(["index", "-c", str(cfg)], env, nosys)
    assert p.returncode == 0, p.stderr
    p = run_in_process(["ctl", "-c", str(cfg), "search", "osprey", "--json"], env, nosys)
    assert p.returncode == 0, p.stderr
    assert [h["key"] for h in json.loads(p.stdout)] == ["jsonl:birds/1"]


def test_a_daemon_shows_the_kind_in_status_and_answers_its_verb(setup) -> None:
    base, cfg, env, nosys = setup
    log = open(base / "daemon.log", "ab")
    # the daemon's process: the stand-in module registered first, as a package defining a kind would
    proc = subprocess.Popen([sys.executable, "-c", "import jsonl_kind; jsonl_kind.register(); " + LAUNCH, nosys,
                             "run", "-c", str(cfg), "--log-level", "info"],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    try:
        deadline, status = time.monotonic() + 60, None
        while time.monotonic() < deadline:   # ready: the first pass of the source has finished
            assert proc.poll() is None, (base / "daemon.log").read_text()
            p = run_in_process(["ctl", "-c", str(cfg), "status", "--json"], env, nosys)
            if p.returncode == 0:
                status = json.loads(p.stdout)
                if (status["sources"]["birds"].get("last_run") or {}).get("finished"):
                    break
            time.sleep(0.1)
        else:
            raise AssertionError(f"not ready: {status}\n{(base / 'daemon.log').read_text()}")
        birds = status["sources"]["birds"]
        assert birds["kind"] == "jsonl" and birds["documents"] == {"indexed": 2}, birds
        text = run_in_process(["ctl", "-c", str(cfg), "status"], env, nosys)
        assert text.returncode == 0 and "birds" in text.stdout, text.stderr

        _lines(base / "lines" / "b.jsonl", [{"id": 3, "title": "Merlins", "text": "A merlin chases pipits."}])
        p = run_in_process(["ctl", "-c", str(cfg), "ingest", "birds", "--wait"], env, nosys)
        assert p.returncode == 0, p.stderr
        p = run_in_process(["ctl", "-c", str(cfg), "search", "merlin", "--json"], env, nosys)
        assert p.returncode == 0 and [h["key"] for h in json.loads(p.stdout)] == ["jsonl:birds/3"], p.stdout + p.stderr
        p = run_in_process(["ctl", "-c", str(cfg), "explain", "JSONL:birds/1"], env, nosys)  # as the kind stores it
        assert p.returncode == 0 and "Ospreys" in p.stdout, p.stdout + p.stderr
        # ctl reindex KEY finds the source by its key, as for the three kinds of indexerd
        _lines(base / "lines" / "a.jsonl", [{"id": 1, "title": "Ospreys", "text": "An osprey eats a gurnard."}])
        p = run_in_process(["ctl", "-c", str(cfg), "reindex", "jsonl:birds/1"], env, nosys)
        assert p.returncode == 0, p.stdout + p.stderr
        p = run_in_process(["ctl", "-c", str(cfg), "search", "gurnard", "--json"], env, nosys)
        assert [h["key"] for h in json.loads(p.stdout)] == ["jsonl:birds/1"], p.stdout + p.stderr
        p = run_in_process(["ctl", "-c", str(cfg), "reindex", "jsonl:fish/1"], env, nosys)  # the source it names
        assert p.returncode == 2 and ("jsonl:fish/1: no JSON lines source named 'fish' (configured JSON lines "
                                      "sources: birds)") in p.stderr, p.stderr
        p = run_in_process(["ctl", "-c", str(cfg), "reindex", "jsonl:birds"], env, nosys)
        assert p.returncode == 2 and "jsonl:birds: a JSON lines key is jsonl:<source>/<id>" in p.stderr, p.stderr
    finally:
        why = stop_daemon(proc, 15)
        log.close()
    assert why is None, (base / "daemon.log").read_text()
