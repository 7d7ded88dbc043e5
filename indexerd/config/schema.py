"""The typed schema of the TOML file: one frozen msgspec struct per table, and its defaults (a kind
of source declares its own table: :mod:`indexerd.config.kinds`).  Unknown keys are errors (``forbid_unknown_fields``); durations and sizes decode through
:mod:`indexerd.config.units`."""

from __future__ import annotations

from typing import Any

import msgspec

from indexerd.config.units import Bytes, Seconds
from indexerd.core.errors import ConfigError

#: ``Config.origin`` when no config file was read (``load_config`` found none)
DEFAULTS_ORIGIN = "<defaults>"


class _Struct(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    pass


class WhooshSettings(_Struct, frozen=True):
    """``[index.whoosh]``: the Whoosh engine's writer.

    ``writer_memory`` is the posting buffer of the writer before it spills a sorted run (bytes);
    ``merge_idle`` is how long the writer must be idle before it merges segments (daemon only);
    ``analysis_worker``: compute the postings of big batches in a worker process, on another
    core (used only when the machine has more than one).
    """

    writer_memory: Bytes = Bytes(16 * 1024 * 1024)
    merge_idle: Seconds = Seconds(600.0)
    analysis_worker: bool = True


class TantivySettings(_Struct, frozen=True):
    """``[index.tantivy]``: the tantivy engine's writer.

    ``writer_memory`` is the memory budget of tantivy's writer, all threads together (bytes;
    tantivy needs at least 15 MB per thread); ``writer_threads`` the indexing threads (0: as
    tantivy chooses from the cores); ``analysis_worker``: analyse the text of big batches in a
    worker process, on another core (used only when the machine has more than one).
    """

    writer_memory: Bytes = Bytes(64 * 1024 * 1024)
    writer_threads: int = 1
    analysis_worker: bool = True


class PostgresqlSettings(_Struct, frozen=True):
    """``[index.postgresql]``: the shared index on a PostgreSQL server (``engine = "postgresql"``).

    ``url`` is a libpq URL (``postgresql://user@host:5432/db``; ``postgresql+psycopg://`` is
    accepted too) without the password, which comes from ``password_env`` or ``password_file``
    and is never logged or shown; ``schema`` holds the index's tables (created when missing);
    ``timeout`` bounds connecting and each statement (seconds).
    ``read_url`` (optional) names a read-only server that searches and counts use, a streaming
    replication hot standby of ``url``'s server (same roles, so the same password); every write
    and the index's bookkeeping still go to ``url``.  None: everything reads ``url``.
    """

    url: str
    read_url: str | None = None
    password_env: str | None = None
    password_file: str | None = None
    schema: str = "indexerd"
    timeout: Seconds = Seconds(30.0)


class StoreSettings(_Struct, frozen=True):
    """``[store]``: the state store on a PostgreSQL server instead of the state dir's SQLite
    file, so that several nodes share it (see README, "Running on several machines").

    ``url`` is a libpq URL (``postgresql://user@host:5432/db``; ``postgresql+psycopg://`` is
    accepted too) without the password, which comes from ``password_env`` or ``password_file``
    and is never logged or shown; ``schema`` holds the store's tables (created when missing; not
    the index's schema); ``timeout`` bounds connecting and each statement (seconds).
    ``read_url`` (optional) names a read-only server, a streaming-replication hot standby of
    ``url``'s, for the store's reads that serve searches (the content hashes that collapse
    identical hits, the media types of the search form); everything else reads and writes ``url``.
    ``lease`` (seconds) is how long this node's hold on a web host lasts without renewal; the
    node beats every quarter of it and counts as dead 1.5 times it after its last beat
    (:class:`~indexerd.core.store.cluster.ClusterTimings`).
    """

    url: str
    read_url: str | None = None
    password_env: str | None = None
    password_file: str | None = None
    schema: str = "indexerd_state"
    timeout: Seconds = Seconds(30.0)
    lease: Seconds = Seconds(20.0)


#: ``[index]`` keys of the Whoosh writer before engines had their own tables
_MOVED_INDEX_KEYS = ("writer_memory", "merge_idle")


class IndexSettings(_Struct, frozen=True):
    """``[index]``: which engine, and how the one writer batches and commits.

    ``engine`` is ``"whoosh"`` (the default), ``"tantivy"`` (``pip install 'indexerd[tantivy]'``)
    or ``"postgresql"`` (a shared index on a server, ``pip install 'indexerd[postgresql]'``): one
    of the engines :mod:`indexerd.index.engines` registers (:mod:`indexerd.config.engines`
    checks the name and that it loads); each engine's own knobs are in its table, ``[index.whoosh]``, ``[index.tantivy]``, ``[index.postgresql]``.
    ``commit_interval`` is the most a change may wait before it is searchable (seconds);
    ``commit_batch`` commits early once that many documents are pending; ``bulk_commit_batch``
    is the batch used by one-shot ``indexerd index`` passes (fewer, larger segments).
    ``fold_diacritics`` (default true): a word matches with or without its accents (``cafe``
    finds ``café`` and back, as Recoll's ``unac``); false keeps them apart.  Changing it rebuilds
    the index from the sources at the next start.
    ``collapse_duplicates`` (default true): identical documents (the same content hash) are one
    hit of ``ctl search``, ``/api/search`` and the search page, listing the others' keys
    (``also_at``); false shows each.
    ``writer_memory`` and ``merge_idle`` directly under ``[index]`` are the old names of
    ``[index.whoosh]``'s keys: still read (with a warning) and moved there by :func:`parse_config`,
    None afterwards.
    """

    engine: str = "whoosh"
    commit_interval: Seconds = Seconds(1.0)
    commit_batch: int = 200
    bulk_commit_batch: int = 5000
    fold_diacritics: bool = True
    collapse_duplicates: bool = True
    whoosh: WhooshSettings = WhooshSettings()
    tantivy: TantivySettings = TantivySettings()
    postgresql: PostgresqlSettings | None = None
    writer_memory: Bytes | None = None
    merge_idle: Seconds | None = None


class HttpSettings(_Struct, frozen=True):
    """``[http]``: the daemon's HTTP listener (search page, JSON API, ``/metrics``, ``/healthz``).

    Off unless ``listen`` is set (``"127.0.0.1:8080"``, ``"[::1]:8080"``, ``"0.0.0.0:8080"``).
    A ``listen`` address that is not loopback needs a token: ``token_env`` names an environment
    variable holding it, or ``token_file`` a file whose first line is it (at least 16
    characters); with a token set, every request must carry it, on loopback too.
    ``query_timeout`` bounds one query (seconds); ``page_size`` is hits per page; ``threads``
    the requests served at once.
    """

    listen: str | None = None
    token_env: str | None = None
    token_file: str | None = None
    query_timeout: Seconds = Seconds(5.0)
    page_size: int = 10
    threads: int = 8

    def address(self) -> tuple[str, int]:
        """``listen`` as (host, port); the host without IPv6 brackets.

        Raises:
            ConfigError: not ``HOST:PORT`` with a port 0-65535.
        """
        host, sep, port = (self.listen or "").rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not sep or not host or not port.isdigit() or int(port) > 65535:
            raise ConfigError(f"http.listen: expected HOST:PORT such as \"127.0.0.1:8080\", got {self.listen!r}")
        return host, int(port)


class ExtractSettings(_Struct, frozen=True):
    """``[extract]``: the bounds of the extraction workers that parse PDF, Office, OpenDocument,
    EPUB, RTF, mail and SVG (:class:`indexerd.extract.isolation.Limits`).

    ``timeout`` is the wall-clock time one document may take (seconds; then the worker is
    killed and the document skipped ``timeout``; decompression has the same bound);
    ``memory`` the address space one document may add to a worker (bytes; 0: no bound);
    ``workers`` the worker processes at most.  A reload applies them (the workers are
    replaced as they finish).
    """

    timeout: Seconds = Seconds(60.0)
    memory: Bytes = Bytes(1024 * 1024 * 1024)
    workers: int = 2


class Sources(_Struct, frozen=True):
    """``[sources]``: one list of tables per kind of source, the kinds being those registered
    with :mod:`indexerd.config.kinds` (the struct a file decodes into has a field per kind;
    a kind the file does not use reads as an empty list here).

    Raises:
        AttributeError: reading a name that is no registered kind.
    """

    def __getattr__(self, name: str) -> list[Any]:
        from indexerd.config.kinds import registered

        if name in registered():
            return []
        raise AttributeError(f"no kind of source {name!r}")


class ConfigFile(_Struct, frozen=True):
    """The keys of the TOML file (see :class:`Config`, which adds where it came from)."""

    state_dir: str | None = None
    control_socket: str | None = None
    node: str | None = None
    log_level: str = "info"
    max_size: Bytes = Bytes(20 * 1000 * 1000)
    refresh_time: Seconds = Seconds(86400.0)
    strict_dates: bool = False
    meta_map: str | None = None
    index: IndexSettings = IndexSettings()
    store: StoreSettings | None = None
    http: HttpSettings = HttpSettings()
    extract: ExtractSettings = ExtractSettings()
    sources: Sources = Sources()


class Config(ConfigFile, frozen=True):
    """The whole validated configuration.  Build it with :func:`load_config`.

    ``state_dir`` / ``control_socket`` are ``None`` here when unset; use :func:`resolve_state_dir`
    and :func:`resolve_control_socket` so that the daemon and every ``ctl`` call agree.
    ``origin`` is where it came from (a file path, ``<defaults>``), for messages; it is not a
    TOML key.
    """

    origin: str = DEFAULTS_ORIGIN
