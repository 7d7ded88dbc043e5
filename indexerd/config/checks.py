"""The checks msgspec's types cannot express: names, ranges, paths, URLs, regexes, the
``[http]`` listener; one function per table, each raising :class:`ConfigError` as
``FILE: KEY: what was expected``.

Ranges stay here rather than in ``msgspec.Meta(ge=...)`` constraints on the schema: msgspec's
error (``Expected `int` >= 1 - at `$.index.commit_batch```) does not say which value was given,
and ours do (``index.commit_batch: expected a whole number >= 1, got 0``), as tests/test_config.py
asserts."""

from __future__ import annotations

import re

from indexerd.config import engines
from indexerd.config.kinds import registered
from indexerd.config.schema import Config, ExtractSettings, HttpSettings, IndexSettings
from indexerd.core.errors import ConfigError
from indexerd.core.secrets import mask_url

#: ``[store] lease`` bounds (seconds): a node beats every quarter of its lease, so below 2 s a
#: store round trip on a busy server could miss a beat; above an hour a dead node's hosts wait
#: longer than any pass should
MIN_LEASE_SECONDS, MAX_LEASE_SECONDS = 2.0, 3600.0

#: a node's name (``node``, a filesystem source's ``node``)
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


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


def check_semantics(cfg: Config, origin: str) -> None:
    """Every check of :mod:`indexerd.config.checks` on a decoded config, tables in file order
    (each kind's own check is the one it registered: :mod:`indexerd.config.kinds`).

    Raises:
        ConfigError: the first problem found.
    """
    if cfg.log_level.lower() not in {"debug", "info", "warning", "error", "critical"}:
        raise ConfigError(f"{origin}: log_level: expected one of debug, info, warning, error, critical, "
                          f"got {cfg.log_level!r}")
    seen: dict[str, str] = {}
    for kind in registered().values():
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
    engines.check(cfg.index.engine, IndexSettings().engine, origin)  # as the index registered them
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


def _check_cluster(cfg: Config, origin: str) -> None:
    """``[store]`` and ``node``: a shared store needs the shared index (a document the store says is indexed must be searchable from every node)."""
    if cfg.node is not None and not NODE_NAME.fullmatch(cfg.node):
        raise ConfigError(f"{origin}: node: expected a name of letters, digits, '-', '_', '.' "
                          f"(at most 63), got {cfg.node!r}")
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
    if not MIN_LEASE_SECONDS <= st.lease <= MAX_LEASE_SECONDS:
        raise ConfigError(f"{origin}: store.lease: expected a duration from {MIN_LEASE_SECONDS:g} s to "
                          f"{MAX_LEASE_SECONDS:g} s, got {float(st.lease):g} s")
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
