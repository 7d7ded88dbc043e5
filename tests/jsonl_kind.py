"""A complete kind of source outside indexerd, in this one module: a directory of JSON lines
(``*.jsonl``, one document a line: ``{"id": ..., "title": ..., "text": ..., "date": ...}``).

Its config table ``[[sources.jsonl]]`` (``name``, ``path``, ``include``: glob patterns of the
files read, ``interval``, ``api_key``: a secret that ``check-config`` masks), its checks, the
words people write for ``path`` (``dir``, ``folder``), its key scheme (``jsonl:<source>/<id>``:
which source a key names, a key typed as ``JSONL:...`` stored as ``jsonl:...``), its name in
messages, ``ctl`` verb (``ingest``) and start-up rule are all declared here; :func:`register` is
its one registry entry.  tests/test_standin_kind.py proves that nothing else in indexerd has to
change for it: it indexes, searches, shows in ``ctl status``, masks its secret, answers its verb
and ``ctl reindex``/``explain`` of its keys.
"""

from __future__ import annotations

import fnmatch
import json
import os
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from indexerd.config import SourcePolicy
from indexerd.config.schema import _Struct
from indexerd.config.units import Seconds
from indexerd.core.decide import DecideSettings
from indexerd.core.errors import ConfigError
from indexerd.core.metamap import MetaMap
from indexerd.pipeline.fetched import Fetched, Policy
from indexerd.sources import registry


class JsonlTable(_Struct, frozen=True):
    """One ``[[sources.jsonl]]`` table."""

    name: str
    path: str
    include: list[str] = msgspec.field(default_factory=lambda: ["*.jsonl"])
    interval: Seconds = Seconds(3600.0)
    api_key: str | None = None
    refresh_time: Seconds | None = None
    strict_dates: bool | None = None
    date_sources: list[str] | None = None


def check_table(table: JsonlTable, where: str, origin: str) -> None:
    """An absolute directory path.

    Raises:
        ConfigError: as ``ORIGIN: WHERE.path: ...``.
    """
    if not os.path.isabs(table.path):
        raise ConfigError(f"{origin}: {where}.path: expected an absolute path, got {table.path!r}")


def mask_table(table: dict[str, Any]) -> None:
    """Hide ``api_key`` (builtins, in place)."""
    if table.get("api_key"):
        table["api_key"] = "***"


class JsonlDir:
    """The source: every line of every ``*.jsonl`` file of ``path`` is a document."""

    kind = "jsonl"
    key_prefixes = ("jsonl:",)
    unknown_reason = "no line has this id"

    def __init__(self, cfg: JsonlTable, policy: SourcePolicy, meta_map: MetaMap) -> None:
        self.cfg, self.name = cfg, cfg.name
        self.policy = Policy(meta_map=meta_map, date_order=policy.date_sources, max_bytes=policy.max_size_bytes,
                             settings=DecideSettings(refresh_time_seconds=policy.refresh_time_seconds,
                                                     strict_dates=policy.strict_dates))

    def check(self, where: str, *, files: bool) -> None:
        """The directory exists when ``files`` (``check-config``)."""
        if files and not os.path.isdir(self.cfg.path):
            raise ConfigError(f"{where}.path: no such directory: {self.cfg.path}")

    def _lines(self) -> dict[str, dict[str, Any]]:
        """Every line by its key, files in name order."""
        out = {}
        for file in sorted(Path(self.cfg.path).iterdir()):
            if not any(fnmatch.fnmatchcase(file.name, pattern) for pattern in self.cfg.include):
                continue
            for line in file.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    doc = json.loads(line)
                    out[f"jsonl:{self.name}/{doc['id']}"] = doc
        return out

    def _index(self, pipeline, key: str, doc: dict[str, Any], counts, forced: bool) -> None:
        data = str(doc.get("text", "")).encode("utf-8")
        date = datetime.fromisoformat(doc["date"]) if doc.get("date") else None
        f = Fetched(key=key, source=self.name, url=key, data=data, fetched_at=pipeline.clock(),
                    declared_type="text/plain", protocol_date=date, protocol_kind="column", size=len(data),
                    title=doc.get("title"))
        pipeline.handle(f, self.policy, counts, forced=forced, fallback_title=doc.get("title") or key)

    def run_pass(self, pipeline, counts, *, progress=None, forced: bool = False, start: str | None = None,
                 cancel: threading.Event | None = None, recheck: bool = False) -> None:
        """Index every line (a stand-in: a line removed is not deleted)."""
        for key, doc in self._lines().items():
            if cancel is not None and cancel.is_set():
                return
            self._index(pipeline, key, doc, counts, forced)

    def owns(self, key: str) -> bool:
        """A key of this source's scheme and name."""
        return key.startswith(f"jsonl:{self.name}/")

    def reindex(self, items: list[str], pipeline, counts, *, cancel: threading.Event | None = None) -> list[str]:
        """Read these keys' lines again; returns the keys no line has."""
        lines = self._lines()
        for key in items:
            if key in lines:
                self._index(pipeline, key, lines[key], counts, True)
        return [k for k in items if k not in lines]

    def on_forgotten(self, store, key: str) -> None:
        """Nothing to remember: the next pass reads every line."""

    def status_facts(self) -> dict[str, object]:
        """No tree root."""
        return {"root": None}

    def close(self) -> None:
        """Nothing held."""


def source_of_key(key: str) -> str:
    """The source a ``jsonl:<source>/<id>`` key names.

    Raises:
        ConfigError: no source or no id in it.
    """
    name, sep, line_id = key[len("jsonl:"):].partition("/")
    if not (name and sep and line_id):
        raise ConfigError(f"{key}: a JSON lines key is jsonl:<source>/<id>")
    return name


def canonical_key(text: str) -> str:
    """A key as typed (``JSONL:birds/1``) -> as stored (``jsonl:birds/1``): the scheme in lower case."""
    return "jsonl:" + text[len("jsonl:"):]


#: the one registry entry
KIND = registry.Kind("jsonl", JsonlTable, check_table, f"{__name__}:JsonlDir", verb="ingest", unit="lines",
                     mask=mask_table, key_schemes=("jsonl:",), verb_help="read a directory of JSON lines now",
                     verb_example="notes", paths=lambda table: [("path", table.path, "read")],
                     label="JSON lines", key_source=f"{__name__}:source_of_key",
                     key_form="a jsonl:<source>/<id> key", key_example="jsonl:birds/1",
                     canonical_key=f"{__name__}:canonical_key", glob_keys=("include",),
                     key_synonyms={"dir": "path", "folder": "path"})


def register() -> None:
    """Make the kind known to indexerd (the config, the command line, the daemon)."""
    registry.register(KIND)
