"""TOML configuration -> validated, frozen settings.  The only home of defaults.

The file is found as ``-c PATH``, else ``$INDEXERD_CONFIG``, else ``/etc/indexerd/indexerd.toml``.
Validation is done by ``msgspec`` against the typed schema below; unknown keys are errors.  Every
error is re-raised as :class:`~indexerd.core.errors.ConfigError` naming the file, the key path
(``sources.filesystem[0].exclude``, 0-based like TOML tooling) and what was expected.

People write durations as strings (``"15m"``, ``"1h30m"``, ``"2d"``) and sizes as ``"20MB"``; the
config layer turns them into seconds (float) and bytes (int) once, here.  Nothing reads the
config at import time.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec

from indexerd.core.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_CONFIG_PATH = "/etc/indexerd/indexerd.toml"

#: Editor temp files, VCS folders and bytecode caches, excluded unless a source sets ``exclude``.
DEFAULT_EXCLUDES = (
    ".git/", ".hg/", ".svn/", ".bzr/", "_darcs/", "CVS/", "__pycache__/",
    "*.swp", "*.swx", "*.swo", "*~", ".#*", "4913", "*.tmp", ".~lock.*#", "*.pyc", "*.pyo",
)


#: ``Config.origin`` when no config file was read (``load_config`` found none)
DEFAULTS_ORIGIN = "<defaults>"


class Seconds(float):
    """A duration in seconds, written in the config as ``"15m"``, ``"1h30m"``, ``"2d"`` or a number."""


class Bytes(int):
    """A size in bytes, written in the config as ``"20MB"``, ``"512KiB"``, ``"1G"`` or a number."""


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "ki": 1024,
               "m": 1000**2, "mb": 1000**2, "mib": 1024**2, "mi": 1024**2,
               "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "gi": 1024**3,
               "t": 1000**4, "tb": 1000**4, "tib": 1024**4, "ti": 1024**4}


def parse_size(value: str | int) -> int:
    """Parse ``"20MB"`` (decimal), ``"20MiB"`` (binary), ``"512k"`` or a plain number into bytes.

    Raises:
        ValueError: for anything else, or a negative size.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a size like '20MB', got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"expected a non-negative size, got {value}")
        return value
    m = _SIZE_RE.match(str(value))
    unit = (m.group(2) or "").lower() if m else None
    if not m or unit not in _SIZE_UNITS:
        raise ValueError(f"expected a size like '20MB' or '512KiB', got {value!r}")
    return int(float(m.group(1)) * _SIZE_UNITS[unit])


#: The largest duration and size the config accepts: beyond them timers and reads overflow
#: (an interval of 3,000,000 days crashed APScheduler; a size of 10^35 bytes crashed read()).
MAX_SECONDS = 10 * 365 * 86400.0
MAX_BYTES = 10**15


def _dec_hook(type_: type, obj: Any) -> Any:
    if type_ is Seconds:
        from indexerd.core.dates import parse_duration

        if isinstance(obj, bool):
            raise ValueError(f"expected a duration like '15m', got {obj!r}")
        seconds = parse_duration(obj)
        if seconds > MAX_SECONDS:
            raise ValueError(f"expected a duration of at most 10 years, got {obj!r}")
        return Seconds(seconds)
    if type_ is Bytes:
        size = parse_size(obj)
        if size > MAX_BYTES:
            raise ValueError(f"expected a size of at most 1 PB, got {obj!r}")
        return Bytes(size)
    raise NotImplementedError(type_)


class _Struct(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    pass


class WhooshSettings(_Struct):
    """``[index.whoosh]``: the Whoosh engine's writer.

    ``writer_memory`` is the posting buffer of the writer before it spills a sorted run (bytes);
    ``merge_idle`` is how long the writer must be idle before it merges segments (daemon only).
    """

    writer_memory: Bytes = Bytes(16 * 1024 * 1024)
    merge_idle: Seconds = Seconds(600.0)


class TantivySettings(_Struct):
    """``[index.tantivy]``: the tantivy engine's writer.

    ``writer_memory`` is the memory budget of tantivy's writer, all threads together (bytes;
    tantivy needs at least 15 MB per thread); ``writer_threads`` the indexing threads (0: as
    tantivy chooses from the cores); ``analysis_worker``: analyse the text of big batches in a
    worker process, on another core (used only when the machine has more than one).
    """

    writer_memory: Bytes = Bytes(64 * 1024 * 1024)
    writer_threads: int = 1
    analysis_worker: bool = True


class PostgresqlSettings(_Struct):
    """``[index.postgresql]``: the shared index on a PostgreSQL server (``engine = "postgresql"``).

    ``url`` is a libpq URL (``postgresql://user@host:5432/db``; ``postgresql+psycopg://`` is
    accepted too) without the password, which comes from ``password_env`` or ``password_file``
    and is never logged or shown; ``schema`` holds the index's tables (created when missing);
    ``timeout`` bounds connecting and each statement (seconds).
    """

    url: str
    password_env: str | None = None
    password_file: str | None = None
    schema: str = "indexerd"
    timeout: Seconds = Seconds(30.0)


#: ``[index]`` keys of the Whoosh writer before engines had their own tables
_MOVED_INDEX_KEYS = ("writer_memory", "merge_idle")


class IndexSettings(_Struct):
    """``[index]``: which engine, and how the one writer batches and commits.

    ``engine`` is ``"whoosh"`` (the default) or ``"tantivy"`` (``pip install 'indexerd[tantivy]'``);
    each engine's own knobs are in its table, ``[index.whoosh]`` and ``[index.tantivy]``.
    ``commit_interval`` is the most a change may wait before it is searchable (seconds);
    ``commit_batch`` commits early once that many documents are pending; ``bulk_commit_batch``
    is the batch used by one-shot ``indexerd index`` passes (fewer, larger segments).
    ``writer_memory`` and ``merge_idle`` directly under ``[index]`` are the old names of
    ``[index.whoosh]``'s keys: still read (with a warning) and moved there by :func:`parse_config`,
    None afterwards.
    """

    engine: Literal["whoosh", "tantivy", "postgresql"] = "whoosh"
    commit_interval: Seconds = Seconds(1.0)
    commit_batch: int = 200
    bulk_commit_batch: int = 5000
    whoosh: WhooshSettings = WhooshSettings()
    tantivy: TantivySettings = TantivySettings()
    postgresql: PostgresqlSettings | None = None
    writer_memory: Bytes | None = None
    merge_idle: Seconds | None = None


class HttpSettings(_Struct):
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


class FilesystemSource(_Struct):
    """One ``[[sources.filesystem]]`` table: a local tree, scanned by stat and watched live."""

    name: str
    path: str
    include: list[str] = msgspec.field(default_factory=lambda: ["*"])
    exclude: list[str] = msgspec.field(default_factory=lambda: list(DEFAULT_EXCLUDES))
    follow_symlinks: bool = False
    watch: bool = True
    interval: Seconds = Seconds(3600.0)
    max_size: Bytes | None = None
    meta_map: str | None = None
    date_sources: list[str] | None = None
    refresh_time: Seconds | None = None
    strict_dates: bool | None = None


class SqlSource(_Struct):
    """One ``[[sources.sql]]`` table: a database change queue (the Aspire RDB connector model).

    ``url`` is an SQLAlchemy URL without the password; the password comes from
    ``password_env`` (an environment variable) or ``password_file`` and is never logged or shown.
    SQL texts may use ``{id}``, ``{sequenceId}``, ``{action}`` and ``{batchSize}``: they become
    bound parameters, never pasted into the SQL.
    """

    name: str
    url: str
    full_sql: str
    incremental_sql: str | None = None
    pre_update_sql: str | None = None
    post_update_sql: str | None = None
    interval: Seconds = Seconds(300.0)
    id_column: str = "id"
    sequence_column: str = "seq"
    action_column: str = "action"
    title_column: str | None = None
    text_columns: list[str] = []
    date_column: str | None = None
    batch_size: int = 1000
    max_size: Bytes | None = None
    password_env: str | None = None
    password_file: str | None = None
    date_sources: list[str] | None = None
    refresh_time: Seconds | None = None
    strict_dates: bool | None = None


class Politeness(_Struct):
    """``[sources.web.politeness]``: how hard one host may be asked (AltaVista Scooter's rule).

    The wait before the next request to a host is
    ``max(robots.txt Crawl-delay, min_delay, min(last response time x good_guy_factor, max_wait))``
    (seconds).  Heritrix, which still runs Scooter's rule, uses 5 x the fetch time clamped to
    3-30 s for the open web; the defaults here are for an intranet or a site you run yourself:
    at least 1 s between requests, and our share of the server's time at most a third (factor 2).
    Failures back off exponentially up to ``max_backoff``; ``Retry-After`` is honoured up to
    ``max_retry_after``, robots.txt ``Crawl-delay`` up to ``max_crawl_delay`` (a hostile
    ``Crawl-delay: 86400`` would otherwise park a crawl for a day per page).
    """

    min_delay: Seconds = Seconds(1.0)
    good_guy_factor: float = 2.0
    max_wait: Seconds = Seconds(30.0)
    max_backoff: Seconds = Seconds(600.0)
    max_retry_after: Seconds = Seconds(3600.0)
    max_crawl_delay: Seconds = Seconds(120.0)


class WebAuth(_Struct):
    """``[sources.web.auth]``: HTTP basic credentials, sent only to the source's allowed hosts.

    The password comes from ``password_env`` (an environment variable) or ``password_file``.
    """

    username: str
    password_env: str | None = None
    password_file: str | None = None


class WebSource(_Struct):
    """One ``[[sources.web]]`` table: a site crawled on an interval, optionally mirrored.

    ``max_hops`` is how many links may be followed from a seed (None: no limit); ``path_depth``
    is LCWA's depth spec on the URL path (``N``, ``>N``, ``<N``, ``N-M``, ``+N``, ``-N``);
    ``restrict`` regexes must all match, one of ``include`` must match (empty: all), none of
    ``exclude`` may; ``allowed_domains`` defaults to the seeds' hosts (subdomains included),
    ``allowed_ports`` to the seeds' ports (80 and 443 together).
    ``max_pages`` caps the requests of one pass; ``max_queued`` the URLs waiting in the
    frontier's memory (10 times more wait in the store, new ones beyond are dropped and counted); ``max_numbered_variants`` the
    URLs of one numbered-path pattern a pass queues (:mod:`indexerd.sources.web.traps`); ``gone_after`` is how many consecutive 404/410
    answers delete a page; ``workers`` fetch in parallel from one frontier (one request in
    flight per host whatever their number).  ``timeout`` bounds connect, each read and the
    whole request (seconds).  ``max_recrawl_interval`` bounds adaptive recrawl
    (:mod:`indexerd.sources.web.recrawl`): a page that never changes is still asked this often (at least
    ``interval``; equal to it, every page is asked at every pass).
    """

    name: str
    seeds: list[str]
    interval: Seconds = Seconds(3600.0)
    max_recrawl_interval: Seconds = Seconds(7 * 86400.0)
    max_hops: int | None = None
    path_depth: str | None = None
    restrict: list[str] = []
    include: list[str] = []
    exclude: list[str] = []
    allowed_domains: list[str] | None = None
    allowed_ports: list[int] | None = None
    max_pages: int = 100_000
    order: str = "breadth"
    user_agent: str = "indexerd/0.1 (+https://github.com/indexerd/indexerd)"
    politeness: Politeness = Politeness()
    max_size: Bytes | None = None
    timeout: Seconds = Seconds(30.0)
    mirror_dir: str | None = None
    meta_map: str | None = None
    auth: WebAuth | None = None
    sitemaps: bool = True
    gone_after: int = 1
    workers: int = 4
    max_query_variants: int = 100
    max_queued: int = 20_000
    max_numbered_variants: int = 1_000
    date_sources: list[str] | None = None
    refresh_time: Seconds | None = None
    strict_dates: bool | None = None


class Sources(_Struct):
    """``[sources]``: every kind of source, each a list of tables."""

    filesystem: list[FilesystemSource] = []
    sql: list[SqlSource] = []
    web: list[WebSource] = []


class ConfigFile(_Struct):
    """The keys of the TOML file (see :class:`Config`, which adds where it came from)."""

    state_dir: str | None = None
    control_socket: str | None = None
    log_level: str = "info"
    max_size: Bytes = Bytes(20 * 1000 * 1000)
    refresh_time: Seconds = Seconds(86400.0)
    strict_dates: bool = False
    meta_map: str | None = None
    index: IndexSettings = IndexSettings()
    http: HttpSettings = HttpSettings()
    sources: Sources = Sources()


class Config(ConfigFile):
    """The whole validated configuration.  Build it with :func:`load_config`.

    ``state_dir`` / ``control_socket`` are ``None`` here when unset; use :func:`resolve_state_dir`
    and :func:`resolve_control_socket` so that the daemon and every ``ctl`` call agree.
    ``origin`` is where it came from (a file path, ``<defaults>``), for messages; it is not a
    TOML key.
    """

    origin: str = DEFAULTS_ORIGIN


_PATH_RE = re.compile(r"\$\.?")


def _key_path(msg: str) -> tuple[str, str]:
    """Split msgspec's "what - at `$.a.b[0]`" into ("a.b[0]", "what")."""
    what, sep, where = msg.rpartition(" - at `")
    if not sep:
        return "", msg
    path = where.rstrip("`")
    path = _PATH_RE.sub("", path, count=1)
    return path, what


#: keys whose lists hold glob patterns (a filesystem source's selection); other lists do not
_GLOB_KEY_RE = re.compile(r"sources\.filesystem\[\d+\]\.(include|exclude)$")


def _friendly(what: str, path: str = "") -> str:
    what = what.replace("Object contains unknown field", "unknown key")
    items = "strings or glob patterns" if _GLOB_KEY_RE.search(path) else "strings"
    what = re.sub(r"Expected `array`, got `(\w+)`", rf"expected a list (of {items}), got \1", what)
    what = re.sub(r"Expected `([^`]+)`, got `(\w+)`", lambda m: f"expected {m.group(1).replace(' | null', '')}, got {m.group(2)}", what)
    what = what.replace("Object missing required field", "missing required key")
    if path == "index.engine":
        what = re.sub(r"Invalid enum value (.+)", r"expected 'whoosh', 'tantivy' or 'postgresql', got \1", what)
    return what


def parse_config(text: str | bytes, origin: str = "<string>") -> Config:
    """Validate TOML text into a :class:`Config`.

    Raises:
        ConfigError: ``"<origin>: <key.path>: <what was expected>"`` for a syntax error, an
            unknown key, a wrong type or value, a duplicate source name or a bad date order.
    """
    data = text.encode() if isinstance(text, str) else text
    try:
        raw = msgspec.toml.decode(data, type=ConfigFile, dec_hook=_dec_hook)
    except msgspec.ValidationError as e:
        path, what = _key_path(str(e))
        # "unknown key `x` - at `$.sources`" -> "sources.x: unknown key"
        m = re.match(r"Object contains unknown field `([^`]+)`", what)
        if m:
            path = f"{path}.{m.group(1)}" if path else m.group(1)
            what = "unknown key"
        m = re.match(r"Object missing required field `([^`]+)`", what)
        if m:
            path = f"{path}.{m.group(1)}" if path else m.group(1)
            what = "missing required key"
        raise ConfigError(f"{origin}: {path or '(top level)'}: {_friendly(what, path)}") from None
    except msgspec.DecodeError as e:
        raise ConfigError(f"{origin}: not valid TOML: {e}") from None
    cfg = Config(**msgspec.structs.asdict(raw), origin=origin)
    cfg = _move_old_index_keys(cfg, origin)
    _check_semantics(cfg, origin)
    return cfg


def _move_old_index_keys(cfg: Config, origin: str) -> Config:
    """Move ``[index] writer_memory``/``merge_idle`` (the names before engine tables) into
    ``[index.whoosh]``, with one warning each.

    Raises:
        ConfigError: the same key is set in both places.
    """
    moved = {k: getattr(cfg.index, k) for k in _MOVED_INDEX_KEYS if getattr(cfg.index, k) is not None}
    if not moved:
        return cfg
    defaults = WhooshSettings()
    for key in moved:
        if getattr(cfg.index.whoosh, key) != getattr(defaults, key):
            raise ConfigError(f"{origin}: index.{key}: set in [index.whoosh] too; keep only "
                              f"index.whoosh.{key}")
        log.warning("%s: index.%s: this key moved to [index.whoosh] (%s); read from [index] for now",
                    origin, key, f"index.whoosh.{key}")
    whoosh = msgspec.structs.replace(cfg.index.whoosh, **moved)
    index = msgspec.structs.replace(cfg.index, whoosh=whoosh, **{k: None for k in moved})
    return msgspec.structs.replace(cfg, index=index)


def _check_source_common(src, where: str, seen: dict[str, str], origin: str) -> None:
    """Checks every kind of source shares: a valid, unique name and a valid date order."""
    if not src.name or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", src.name):
        raise ConfigError(f"{origin}: {where}.name: expected a name of letters, digits, '-', '_', '.', "
                          f"got {src.name!r}")
    if src.name in seen:
        raise ConfigError(f"{origin}: {where}.name: duplicate source name {src.name!r} (also {seen[src.name]})")
    seen[src.name] = where
    if src.date_sources is not None:
        from indexerd.core.dates import validate_order  # only here: ctl's start stays light

        try:
            validate_order(src.date_sources)
        except ValueError as e:
            raise ConfigError(f"{origin}: {where}.date_sources: {e}") from None


def _check_web_source(src: WebSource, where: str, origin: str) -> None:
    """Seeds, scope regexes, depth spec, numbers and credentials of one web source."""
    from indexerd.sources.web.scope import Scope
    from indexerd.sources.web.urls import canonicalize

    if not src.seeds:
        raise ConfigError(f"{origin}: {where}.seeds: expected at least one http(s) URL")
    if src.max_recrawl_interval < src.interval:
        raise ConfigError(f"{origin}: {where}.max_recrawl_interval: expected a duration of at least the "
                          f"source's interval ({float(src.interval):g} s), got {float(src.max_recrawl_interval):g} s")
    for i, seed in enumerate(src.seeds):
        try:
            canonicalize(seed)
        except ValueError as e:
            shown = str(e).replace(repr(seed), repr(mask_userinfo(seed)))  # never print a seed's password
            raise ConfigError(f"{origin}: {where}.seeds[{i}]: {shown}") from None
    try:
        Scope(list(src.seeds), allowed_domains=src.allowed_domains, allowed_ports=src.allowed_ports,
              restrict=src.restrict,
              include=src.include, exclude=src.exclude, path_depth=src.path_depth, max_hops=src.max_hops)
    except ValueError as e:
        raise ConfigError(f"{origin}: {where}.{e}") from None
    if src.order not in ("breadth", "depth"):
        raise ConfigError(f"{origin}: {where}.order: expected 'breadth' or 'depth', got {src.order!r}")
    for key in ("max_pages", "gone_after", "workers", "max_query_variants", "max_queued", "max_numbered_variants"):
        if getattr(src, key) < 1:
            raise ConfigError(f"{origin}: {where}.{key}: expected a whole number >= 1, got {getattr(src, key)}")
    if src.workers > 64:
        raise ConfigError(f"{origin}: {where}.workers: expected at most 64 fetch threads (one request per "
                          f"host is in flight anyway), got {src.workers}")
    if src.timeout > 86400:
        raise ConfigError(f"{origin}: {where}.timeout: expected a duration of at most 1 day")
    if src.max_hops is not None and src.max_hops < 0:
        raise ConfigError(f"{origin}: {where}.max_hops: expected a whole number >= 0, got {src.max_hops}")
    if not src.user_agent.strip() or not re.match(r"[A-Za-z0-9_-]+", src.user_agent):
        raise ConfigError(f"{origin}: {where}.user_agent: expected a product token first, like "
                          f"'indexerd/0.1 (+https://example.org/bot)', got {src.user_agent!r}")
    if src.timeout <= 0:
        raise ConfigError(f"{origin}: {where}.timeout: expected a duration > 0")
    p = src.politeness
    if p.good_guy_factor < 0 or p.min_delay < 0 or p.max_wait < 0:
        raise ConfigError(f"{origin}: {where}.politeness: delays and factors must be >= 0")
    if src.mirror_dir is not None and not os.path.isabs(os.path.expanduser(src.mirror_dir)):
        raise ConfigError(f"{origin}: {where}.mirror_dir: expected an absolute path, got {src.mirror_dir!r}")
    if src.auth is not None:
        if bool(src.auth.password_env) == bool(src.auth.password_file):
            raise ConfigError(f"{origin}: {where}.auth: set exactly one of password_env or password_file")


def _check_semantics(cfg: Config, origin: str) -> None:
    if cfg.log_level.lower() not in {"debug", "info", "warning", "error", "critical"}:
        raise ConfigError(f"{origin}: log_level: expected one of debug, info, warning, error, critical, "
                          f"got {cfg.log_level!r}")
    seen: dict[str, str] = {}
    for kind, tables in (("filesystem", cfg.sources.filesystem), ("sql", cfg.sources.sql),
                         ("web", cfg.sources.web)):
        for i, src in enumerate(tables):
            where = f"sources.{kind}[{i}]"
            _check_source_common(src, where, seen, origin)
            if src.interval < 1:
                raise ConfigError(f"{origin}: {where}.interval: expected a duration of at least 1 s, "
                                  f"got {float(src.interval)} s")
            if kind == "web":
                _check_web_source(src, where, origin)
            elif kind == "filesystem":
                if not os.path.isabs(os.path.expanduser(src.path)):
                    raise ConfigError(f"{origin}: {where}.path: expected an absolute path, got {src.path!r}")
                for key in ("include", "exclude"):
                    for pat in getattr(src, key):
                        if not pat or pat.strip() != pat:
                            raise ConfigError(f"{origin}: {where}.{key}: expected a list of glob patterns, "
                                              f"got {pat!r}")
            else:
                if "://" not in src.url:
                    raise ConfigError(f"{origin}: {where}.url: expected an SQLAlchemy URL like "
                                      f"'sqlite:////var/lib/app.db', got {mask_url(src.url)!r}")
                if src.batch_size < 1:
                    raise ConfigError(f"{origin}: {where}.batch_size: expected a whole number >= 1, "
                                      f"got {src.batch_size}")
                if src.password_env and src.password_file:
                    raise ConfigError(f"{origin}: {where}: set password_env or password_file, not both")
    for key, value in (("index.commit_batch", cfg.index.commit_batch),
                       ("index.bulk_commit_batch", cfg.index.bulk_commit_batch)):
        if value < 1:
            raise ConfigError(f"{origin}: {key}: expected a whole number >= 1, got {value}")
    if cfg.index.commit_interval <= 0:
        raise ConfigError(f"{origin}: index.commit_interval: expected a duration > 0")
    if cfg.index.tantivy.writer_threads < 0:
        raise ConfigError(f"{origin}: index.tantivy.writer_threads: expected a whole number >= 0, "
                          f"got {cfg.index.tantivy.writer_threads}")
    pg = cfg.index.postgresql
    if cfg.index.engine == "postgresql" and pg is None:
        raise ConfigError(f"{origin}: index.postgresql.url: required when index.engine = 'postgresql'")
    if pg is not None and pg.password_env and pg.password_file:
        raise ConfigError(f"{origin}: index.postgresql: set password_env or password_file, not both")
    if cfg.index.engine != "whoosh":  # the default is a dependency; another needs its extra
        from indexerd.index.base import load_engine

        try:
            load_engine(cfg.index.engine)
        except ConfigError as e:
            raise ConfigError(f"{origin}: {e}") from None
    _check_http(cfg.http, origin)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is only reachable from this machine."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_http(http: HttpSettings, origin: str) -> None:
    """``[http]``: a parseable address; a token source for a non-loopback one; sane bounds.
    The token itself is read when the listener starts (the variable or file may appear later)."""
    if http.token_env and http.token_file:
        raise ConfigError(f"{origin}: http: set token_env or token_file, not both")
    for key, value, low in (("page_size", http.page_size, 1), ("threads", http.threads, 1)):
        if value < low or value > 100:
            raise ConfigError(f"{origin}: http.{key}: expected a whole number from {low} to 100, got {value}")
    if not 0 < http.query_timeout <= 60:
        raise ConfigError(f"{origin}: http.query_timeout: expected a duration over 0 and at most 60 s")
    if http.listen is None:
        return
    try:
        host, _port = http.address()
    except ConfigError as e:
        raise ConfigError(f"{origin}: {e}") from None
    if not is_loopback(host) and not (http.token_env or http.token_file):
        raise ConfigError(f"{origin}: http.listen: {http.listen!r} is not a loopback address, so the "
                          "listener needs a token: set http.token_env (an environment variable) or "
                          "http.token_file (a file whose first line is the token)")


def find_config_path(explicit: str | None) -> Path | None:
    """Return the config file to read: ``explicit``, else ``$INDEXERD_CONFIG``, else the system path.

    Returns None when nothing was asked for and the system file does not exist (callers that can
    work without a config, like ``indexerd index PATH``, then use the defaults).

    Raises:
        ConfigError: when an explicitly named file (flag or environment) does not exist.
    """
    for name, value in (("-c", explicit), ("INDEXERD_CONFIG", os.environ.get("INDEXERD_CONFIG"))):
        if value:
            p = Path(value).expanduser()
            if not p.is_file():
                raise ConfigError(f"{value}: config file not found (from {name})")
            return p
    p = Path(DEFAULT_CONFIG_PATH)
    return p if p.is_file() else None


def load_config(explicit: str | None = None, *, required: bool = False) -> Config:
    """Find, read and validate the configuration.

    Args:
        explicit: the ``-c`` argument, if any.
        required: raise when no config file is found instead of returning the defaults.

    Raises:
        ConfigError: file missing (when required or named), unreadable, or invalid.
    """
    path = find_config_path(explicit)
    if path is None:
        if required:
            raise ConfigError(f"no config file: pass -c PATH, set INDEXERD_CONFIG, or create {DEFAULT_CONFIG_PATH}")
        return Config()
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config: {e.strerror}") from None
    return parse_config(data, str(path))


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def resolve_state_dir(cfg: Config) -> Path:
    """Where the state store and the index live.

    ``state_dir`` from the config; else systemd's ``$STATE_DIRECTORY`` (first entry); else
    ``/var/lib/indexerd`` for root with a config file; else the user's state dir
    (``$XDG_STATE_HOME/indexerd``, ``~/.local/state/indexerd``).  Without a config file (the
    demo, ``indexerd index PATH``) root gets its own user state dir too: ``/var/lib/indexerd``
    is the service's, whose daemon would never remove documents of paths it was not given.
    """
    if cfg.state_dir:
        return Path(cfg.state_dir).expanduser()
    env = os.environ.get("STATE_DIRECTORY")
    if env:
        return Path(env.split(":")[0])
    if _is_root() and cfg.origin != DEFAULTS_ORIGIN:
        return Path("/var/lib/indexerd")
    from platformdirs import user_state_dir

    return Path(user_state_dir("indexerd", appauthor=False))


def resolve_control_socket(cfg: Config) -> Path:
    """Where the daemon's control socket lives.

    ``control_socket`` from the config; else ``$RUNTIME_DIRECTORY/indexerd.sock``; else
    ``/run/indexerd/indexerd.sock`` for root; else ``<state_dir>/indexerd.sock``.
    """
    if cfg.control_socket:
        return Path(cfg.control_socket).expanduser()
    env = os.environ.get("RUNTIME_DIRECTORY")
    if env:
        return Path(env.split(":")[0]) / "indexerd.sock"
    if _is_root():
        return Path("/run/indexerd/indexerd.sock")
    return resolve_state_dir(cfg) / "indexerd.sock"


@dataclass(frozen=True)
class SourcePolicy:
    """The effective per-source settings after applying top-level defaults (seconds, bytes)."""

    max_size_bytes: int
    refresh_time_seconds: float
    strict_dates: bool
    meta_map_path: str | None
    date_sources: tuple[str, ...] | None


def mask_url(url: str) -> str:
    """The URL with any password replaced by ``***`` (for messages and ``check-config``).

    Parsed by SQLAlchemy's own URL parser, so a password holding ``/``, ``?`` or ``#`` is masked
    whole; an unparseable URL keeps only its scheme.
    """
    try:
        from sqlalchemy.engine import make_url

        u = make_url(url)
        return u.render_as_string(hide_password=True) if u.password is not None else url
    except Exception:
        scheme = url.split("://", 1)[0] if "://" in url else "?"
        return f"{scheme}://***"


def mask_userinfo(url: str) -> str:
    """An http(s) URL with the password of its user info (``user:pw@``) replaced by ``***``,
    for ``check-config`` and messages; other URLs come back unchanged."""
    head, sep, rest = url.partition("://")
    netloc = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    if not sep or "@" not in netloc:
        return url
    userinfo, _, hostport = netloc.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    return f"{head}://{user}{':***' if colon else ''}@{hostport}{rest[len(netloc):]}"


def source_policy(cfg: Config, src: FilesystemSource | SqlSource | WebSource) -> SourcePolicy:
    """Merge a source's optional overrides with the top-level defaults."""
    max_size = getattr(src, "max_size", None)
    return SourcePolicy(
        max_size_bytes=int(max_size if max_size is not None else cfg.max_size),
        refresh_time_seconds=float(src.refresh_time if src.refresh_time is not None else cfg.refresh_time),
        strict_dates=bool(src.strict_dates if src.strict_dates is not None else cfg.strict_dates),
        meta_map_path=getattr(src, "meta_map", None) or cfg.meta_map,
        date_sources=tuple(src.date_sources) if src.date_sources is not None else None,
    )


def to_toml(cfg: Config) -> str:
    """Render the effective configuration (defaults filled in) as TOML, for ``check-config``."""
    def enc(obj: Any) -> Any:
        if isinstance(obj, Seconds):
            return float(obj)
        if isinstance(obj, Bytes):
            return int(obj)
        raise NotImplementedError(type(obj))

    data = msgspec.to_builtins(cfg, enc_hook=enc)
    data.pop("origin", None)
    for src in data.get("sources", {}).get("sql", []):
        src["url"] = mask_url(src["url"])
    for src in data.get("sources", {}).get("web", []):
        src["seeds"] = [mask_userinfo(u) for u in src["seeds"]]
    return _dump_toml(data)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        import json

        return json.dumps(v, ensure_ascii=False)  # JSON string escapes are valid TOML basic-string escapes
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(type(v))


def _dump_toml(data: dict, prefix: str = "") -> str:
    lines: list[str] = []
    tables: list[tuple[str, Any]] = []
    for k, v in data.items():
        if v is None:
            lines.append(f"# {k} = (unset)")
        elif isinstance(v, dict):
            tables.append((k, v))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            tables.append((k, v))
        else:
            lines.append(f"{k} = {_toml_value(v)}")
    out = "\n".join(lines)
    for k, v in tables:
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out += f"\n\n[{name}]\n" + _dump_toml(v, name + ".")
        else:
            for item in v:
                out += f"\n\n[[{name}]]\n" + _dump_toml(item, name + ".")
    return out.strip() + "\n"
