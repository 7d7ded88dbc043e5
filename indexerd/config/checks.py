"""The checks msgspec's types cannot express: names, ranges, paths, URLs, regexes, the
``[http]`` listener; one function per table, each raising :class:`ConfigError` as
``FILE: KEY: what was expected``.

Ranges stay here rather than in ``msgspec.Meta(ge=...)`` constraints on the schema: msgspec's
error (``Expected `int` >= 1 - at `$.index.commit_batch```) does not say which value was given,
and ours do (``index.commit_batch: expected a whole number >= 1, got 0``), as tests/test_config.py
asserts."""

from __future__ import annotations

import os
import re

from indexerd.core.secrets import mask_url, mask_userinfo
from indexerd.config.schema import (
    Config,
    ExtractSettings,
    FilesystemSource,
    HttpSettings,
    SqlSource,
    WebSource,
)
from indexerd.core.errors import ConfigError

def _check_source_common(src, where: str, seen: dict[str, str], origin: str) -> None:
    """Checks every kind of source shares: a valid, unique name and a valid date order."""
    if not src.name or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", src.name):
        raise ConfigError(f"{origin}: {where}.name: expected a name of letters, digits, '-', '_', '.', "
                          f"got {src.name!r}")
    if src.name in seen:
        raise ConfigError(f"{origin}: {where}.name: duplicate source name {src.name!r} (also {seen[src.name]})")
    seen[src.name] = where
    if src.date_sources is not None:
        from indexerd.core.datechain import validate_order  # only here: ctl's start stays light

        try:
            validate_order(src.date_sources)
        except ValueError as e:
            raise ConfigError(f"{origin}: {where}.date_sources: {e}") from None


def check_web_source(src: WebSource, where: str, origin: str) -> None:
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
              include=src.include, exclude=src.exclude, path_depth=src.path_depth, max_hops=src.max_hops,
              requisite_domains=src.requisite_domains)
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
    token = (src.user_agent.split("/")[0].split() or [""])[0]
    if not re.fullmatch(r"[A-Za-z_-]+", token):  # RFC 9309 2.2.1: the robots.txt product token
        raise ConfigError(f"{origin}: {where}.user_agent: expected a product token of letters, '_' and '-' "
                          f"first (the name robots.txt rules are matched by, RFC 9309), like "
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


def check_filesystem_source(src: FilesystemSource, where: str, origin: str) -> None:
    """An absolute root path and glob patterns without surrounding blanks."""
    if not os.path.isabs(os.path.expanduser(src.path)):
        raise ConfigError(f"{origin}: {where}.path: expected an absolute path, got {src.path!r}")
    for key in ("include", "exclude"):
        for pat in getattr(src, key):
            if not pat or pat.strip() != pat:
                raise ConfigError(f"{origin}: {where}.{key}: expected a list of glob patterns, "
                                  f"got {pat!r}")


def check_sql_source(src: SqlSource, where: str, origin: str) -> None:
    """An SQLAlchemy URL, a batch size, at most one password source."""
    if "://" not in src.url:
        raise ConfigError(f"{origin}: {where}.url: expected an SQLAlchemy URL like "
                          f"'sqlite:////var/lib/app.db', got {mask_url(src.url)!r}")
    if src.batch_size < 1:
        raise ConfigError(f"{origin}: {where}.batch_size: expected a whole number >= 1, "
                          f"got {src.batch_size}")
    if src.password_env and src.password_file:
        raise ConfigError(f"{origin}: {where}: set password_env or password_file, not both")


def check_semantics(cfg: Config, origin: str) -> None:
    """Every check of :mod:`indexerd.config.checks` on a decoded config, tables in file order
    (each kind's own check comes from :mod:`indexerd.sources.registry`).

    Raises:
        ConfigError: the first problem found.
    """
    from indexerd.sources.registry import KINDS  # its entries name the checks above

    if cfg.log_level.lower() not in {"debug", "info", "warning", "error", "critical"}:
        raise ConfigError(f"{origin}: log_level: expected one of debug, info, warning, error, critical, "
                          f"got {cfg.log_level!r}")
    seen: dict[str, str] = {}
    for kind in KINDS.values():
        for i, src in enumerate(getattr(cfg.sources, kind.name)):
            where = f"sources.{kind.name}[{i}]"
            _check_source_common(src, where, seen, origin)
            if src.interval < 1:
                raise ConfigError(f"{origin}: {where}.interval: expected a duration of at least 1 s, "
                                  f"got {float(src.interval)} s")
            kind.check(src, where, origin)
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
    if pg is not None:
        _no_password_in_url(pg.url, "index.postgresql.url", origin)
        if pg.read_url is not None:
            _no_password_in_url(pg.read_url, "index.postgresql.read_url", origin)
    if cfg.index.engine != "whoosh":  # the default is a dependency; another needs its extra
        from indexerd.index.base import load_engine

        try:
            load_engine(cfg.index.engine)
        except ConfigError as e:
            raise ConfigError(f"{origin}: {e}") from None
    _check_cluster(cfg, origin)
    _check_http(cfg.http, origin)
    _check_extract(cfg.extract, origin)


def _no_password_in_url(url: str, key: str, origin: str) -> None:
    """A server URL the state dir records (for ``ctl`` and the crash reconcile, without its
    password) must not carry the password: it goes in ``password_env`` or ``password_file``."""
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(url)
        has = parts.password is not None or any(k.lower() == "password" for k, _ in parse_qsl(parts.query))
    except ValueError:
        has = False
    if has:
        raise ConfigError(f"{origin}: {key}: the URL holds a password, which indexerd never writes to disk "
                          f"(ctl and the crash reconcile read the address the state dir records); "
                          f"give it with password_env or password_file instead")


_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def _check_cluster(cfg: Config, origin: str) -> None:
    """``[store]``, ``node`` and the filesystem sources' ``node``: a shared store needs the
    shared index (a document the store says is indexed must be searchable from every node)."""
    if cfg.node is not None and not _NODE_NAME.fullmatch(cfg.node):
        raise ConfigError(f"{origin}: node: expected a name of letters, digits, '-', '_', '.' "
                          f"(at most 63), got {cfg.node!r}")
    for i, src in enumerate(cfg.sources.filesystem):
        if src.node is not None and not _NODE_NAME.fullmatch(src.node):
            raise ConfigError(f"{origin}: sources.filesystem[{i}].node: expected a node name, got {src.node!r}")
    st = cfg.store
    if st is None:
        return
    if not st.url.startswith(("postgresql://", "postgresql+psycopg://", "postgres://")):
        raise ConfigError(f"{origin}: store.url: expected a postgresql:// URL, got {mask_url(st.url)!r}")
    if st.password_env and st.password_file:
        raise ConfigError(f"{origin}: store: set password_env or password_file, not both")
    _no_password_in_url(st.url, "store.url", origin)
    if st.read_url is not None:
        if not st.read_url.startswith(("postgresql://", "postgresql+psycopg://", "postgres://")):
            raise ConfigError(f"{origin}: store.read_url: expected a postgresql:// URL, got {mask_url(st.read_url)!r}")
        _no_password_in_url(st.read_url, "store.read_url", origin)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", st.schema):
        raise ConfigError(f"{origin}: store.schema: expected a plain SQL name (letters, digits, _), got {st.schema!r}")
    if cfg.index.engine != "postgresql":
        raise ConfigError(f"{origin}: store.url: a state store on PostgreSQL is shared by several nodes, "
                          f"so the index must be shared too: set [index] engine = \"postgresql\" "
                          f"(it is {cfg.index.engine!r})")
    if cfg.index.postgresql is not None and cfg.index.postgresql.url == st.url and \
            cfg.index.postgresql.schema == st.schema:
        raise ConfigError(f"{origin}: store.schema: the store and the index need schemas of their own "
                          f"(both are {st.schema!r})")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is only reachable from this machine."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_extract(extract: ExtractSettings, origin: str) -> None:
    """``[extract]``: a time bound over 0 and at most a day, 1 to 64 workers."""
    if not 0 < extract.timeout <= 86400:
        raise ConfigError(f"{origin}: extract.timeout: expected a duration over 0 and at most 1 day, "
                          f"got {extract.timeout:g} s")
    if not 1 <= extract.workers <= 64:
        raise ConfigError(f"{origin}: extract.workers: expected a whole number from 1 to 64, "
                          f"got {extract.workers}")


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
