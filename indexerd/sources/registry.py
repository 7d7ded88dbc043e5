"""The kinds of source: each one's config table, checks, facts and factory, in one table.

Every kind is registered with the config when this module is imported
(:func:`indexerd.config.kinds.register`; the command line, the daemon and the runtime import
it): the config decodes ``[[sources.<kind>]]`` into :attr:`Kind.table`, checks it with
:attr:`Kind.check` and masks its secrets with :attr:`Kind.mask`; :func:`build_sources` makes the :class:`~indexerd.sources.base.Source` of
every table; the daemon and ``ctl`` read a kind's facts (:attr:`Kind.verb`, :attr:`Kind.unit`,
:attr:`Kind.reconcile_at_start`) here.  This module and the sources themselves are the only
places that know one kind from another.

A kind's implementation is imported when a source of that kind is built (a config without web
sources never imports the crawler).
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from indexerd.config import kinds as config_kinds
from indexerd.config.policy import source_policy
from indexerd.config.schema import Config
from indexerd.core.errors import ConfigError
from indexerd.sources.base import Source
from indexerd.sources.files.table import (FilesystemSource, adhoc_filesystem_source, check_filesystem_source,
                                          filesystem_paths)
from indexerd.sources.sql.table import SqlSource, check_sql_source, mask_sql_source, sql_paths
from indexerd.sources.web.table import WebSource, check_web_source, mask_web_source, web_paths

if TYPE_CHECKING:
    from indexerd.core.metamap import MetaMap

log = logging.getLogger(__name__)


#: what ``ctl reindex`` says of a key no configured source owns, unless its kind words it
UNOWNED = "no configured source has this key"


@dataclass(frozen=True)
class Kind:
    """One kind of source.

    Attributes:
        name: ``Source.kind`` and the config table ``[[sources.<name>]]``.
        table: the msgspec struct of one table (a field of :class:`~indexerd.config.Sources`).
        check: ``check(table, where, origin)``: the table's own config checks (raises
            ConfigError naming ``where``).
        mask: ``mask(table)`` hides the secrets of one table as builtins, in place, for
            ``check-config``; None: it holds none.
        key_schemes: what the keys of its documents start with (``sql:``), so that ``ctl``
            tells a key from a path without building a source.
        meta_prefixes: the store's meta keys a source of the kind keeps, as templates of
            ``{source}`` (``sql:{source}:``): forgotten with a removed source.
        verb_help: ``ctl <verb> --help``'s line (``poll a SQL source now``).
        verb_example: a source name for ``ctl <verb>``'s example.
        paths: ``paths(table)``: the paths a source of the kind needs, as ``(key, path, need)``:
            ``key`` the table's key naming it (``mirror_dir``), ``need`` ``"read"`` (a tree it
            only reads), ``"dir"`` (a directory it writes, created if missing) or ``"sqlite"``
            (a database file written in place, its journal beside it); for ``check-config``'s
            and the daemon start's access warnings.  None: it needs none.
        recheck_help: the help of ``ctl <verb> --all`` (ask everything known again, with
            validators: :meth:`Source.run_pass`'s ``recheck``), or None: no such option.
        implementation: ``"module:Class"`` of the :class:`~indexerd.sources.base.Source`,
            constructed as ``Class(table, policy, meta_map)``.
        verb: the ``ctl`` command asking the daemon for a pass (``scan``, ``poll``, ``crawl``).
        unit: what a pass's walk counts, for progress (``files``, ``rows``, ``pages``).
        walk: the progress line of a pass's walk, ``{n}`` the count so far (``loading, {n} rows
            read``); None: ``{n} <unit> found``.
        reconcile_at_start: the daemon's first pass after a start runs at once, whatever the
            last pass (a tree: its stat reconcile is cheap and its watch was off); otherwise
            when its interval since the last completed pass is due.
        shared_status: ``module:function`` returning what ``ctl status`` shows of the state all
            sources of the kind share (the web's politeness slots by host), or None.
        node_owned: in a cluster, a source of the kind belongs to one node (a tree is on one
            machine); otherwise its passes run on one node at a time, under a lock
            (:mod:`indexerd.sources.claims`).
        pass_shared: in a cluster, every live node takes part in a pass of a source of the
            kind (the web's frontier is shared, host by host:
            :mod:`indexerd.sources.web.sharedfrontier`); its lock is for beginning a pass, and a
            node joins a pass that runs (the source's ``pass_running(store)``).
        lock_name: ``module:function`` giving ``(lock kind, name)`` of the lock a pass of a
            source takes in a cluster (a SQL queue's is named by its database and query, so two
            sources on one queue exclude each other); None: ``("source", its name)``.
        cluster_join: ``module:function`` called as ``join(node, open_store)`` when the process
            joins a cluster (the state its sources of the kind share across the process goes
            to the store: the web's politeness slots and robots.txt verdicts); it returns the
            callable that undoes it.  None: nothing to share.
        label: how a message names the kind (``SQL``: "no SQL source named 'x'"); ``""``: its name.
        key_source: ``module:function`` giving the name of the source a key of the kind names
            (``sql:articles/42`` -> ``articles``; raises ConfigError for a malformed key), so that
            ``ctl reindex`` asks that source; None: its keys name no source (a URL belongs to
            the source whose scope owns it).
        key_file: ``module:function`` giving the local file a key of the kind is (a ``file:``
            key's path, undecodable bytes kept as surrogates; raises ValueError for a malformed
            key): shown as that path, read through the tree's confinement, downloadable from
            the search page.  None: its keys are no local files (shown as they are).
        canonical_key: ``module:function`` turning a key of the kind as typed into the key it is
            stored under (a URL canonicalised; ValueError: kept as typed); None: as typed.
        unowned: what ``ctl reindex`` says of a key of the kind no configured source owns.
        adhoc_table: ``adhoc_table(path)``: the table of a source for a directory named on the
            command line (``indexerd index PATH``), or None: the kind makes none.
        key_form: how ``ctl``'s help names what may be typed for a document of the kind (``a
            sql:<source>/<id> key``); ``""``: nothing of its own.
        key_example: a key (or path) of the kind for ``ctl reindex``'s examples; ``""``: none.
        glob_keys: the keys of its table that hold glob patterns (for the config's error text).
        key_synonyms: words people write for a key of its table that is spelled otherwise
            (``root`` for ``path``), for the config's "did you mean".
    """

    name: str
    table: type
    check: Callable[[Any, str, str], None]
    implementation: str
    verb: str
    unit: str
    reconcile_at_start: bool = False
    shared_status: str | None = None
    node_owned: bool = False
    pass_shared: bool = False
    lock_name: str | None = None
    cluster_join: str | None = None
    mask: Callable[[dict[str, Any]], None] | None = None
    key_schemes: tuple[str, ...] = ()
    meta_prefixes: tuple[str, ...] = ()
    verb_help: str = ""
    verb_example: str = "NAME"
    recheck_help: str | None = None
    paths: Callable[[Any], list[tuple[str, str, str]]] | None = None
    walk: str | None = None
    label: str = ""
    key_source: str | None = None
    key_file: str | None = None
    canonical_key: str | None = None
    unowned: str = UNOWNED
    adhoc_table: Callable[[str], Any] | None = None
    key_form: str = ""
    key_example: str = ""
    glob_keys: tuple[str, ...] = ()
    key_synonyms: Mapping[str, str] = field(default_factory=dict, hash=False)  # a Kind stays hashable

    def cluster_lock(self, src) -> tuple[str, str]:
        """``(lock kind, name)`` of the lock a pass of ``src`` takes in a cluster."""
        return _load(self.lock_name)(src) if self.lock_name else ("source", src.name)

    def source_class(self) -> type:
        """The implementation class (imported on first use)."""
        return _load(self.implementation)


def _load(ref: str):
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


#: Every kind, in the order the config checks and builds them (which decides the wording of a
#: duplicate-name error: the first table of a name wins).
KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("filesystem", FilesystemSource, check_filesystem_source,
         "indexerd.sources.files.scan:FileSource", verb="scan", unit="files", reconcile_at_start=True,
         node_owned=True, key_schemes=("file:",), paths=filesystem_paths,
         verb_help="reconcile a filesystem source now", verb_example="docs", walk="scanning, {n} files found",
         key_form="a file path", key_example="~/docs/a.html",
         key_file="indexerd.core.filekeys:key_to_path", adhoc_table=adhoc_filesystem_source,
         glob_keys=("include", "exclude"), key_synonyms={"root": "path", "dir": "path", "directory": "path"}),
    Kind("sql", SqlSource, check_sql_source,
         "indexerd.sources.sql.feed:SqlFeed", verb="poll", unit="rows", mask=mask_sql_source,
         lock_name="indexerd.sources.sql.feed:queue_lock_name", key_schemes=("sql:",),
         meta_prefixes=("sql:{source}:",), paths=sql_paths, verb_help="poll a SQL source now", verb_example="articles",
         label="SQL", key_source="indexerd.sources.sql.keys:source_of_key", walk="loading, {n} rows read",
         key_form="a sql:<source>/<id> key", key_example="sql:articles/42"),
    Kind("web", WebSource, check_web_source,
         "indexerd.sources.web.source:WebCrawlSource", verb="crawl", unit="pages", mask=mask_web_source,
         shared_status="indexerd.sources.web.politeness:hosts_status", pass_shared=True,
         cluster_join="indexerd.sources.web.cluster:join_cluster", key_schemes=("http://", "https://"),
         meta_prefixes=("web:{source}:",), paths=web_paths, verb_help="crawl a web source now", verb_example="intranet",
         recheck_help="ask every known page now with its validators (If-None-Match / "
                      "If-Modified-Since), whatever adaptive recrawl scheduled; an unchanged "
                      "page costs a 304 (`ctl reindex --source` is the unconditional one)",
         canonical_key="indexerd.sources.web.urls:canonicalize",
         unowned="not inside any configured web source's scope",
         key_form="a URL", key_example="https://intranet.example/page.html",
         key_synonyms={"url": "seeds", "urls": "seeds", "seed": "seeds"}),
)}

#: ``ctl`` verb -> kind name (``scan`` -> ``filesystem``)
VERBS: dict[str, str] = {k.verb: k.name for k in KINDS.values()}


def register(k: Kind) -> None:
    """Add (or replace) the kind ``k``: in :data:`KINDS`, :data:`VERBS` and the config's tables
    (:mod:`indexerd.config.kinds`).  The three kinds here are registered at import; a kind of
    another package (a test's stand-in) calls this once."""
    KINDS[k.name] = k
    VERBS[k.verb] = k.name
    config_kinds.register(k)


def unregister(name: str) -> None:
    """Remove the kind ``name`` registered by :func:`register` (a test's, after it)."""
    k = KINDS.pop(name, None)
    if k is not None:
        VERBS.pop(k.verb, None)
    config_kinds.unregister(name)


for _k in KINDS.values():
    config_kinds.register(_k)


def kind(name: str) -> Kind:
    """The :class:`Kind` named ``name``.

    Raises:
        ConfigError: no such kind (naming the known ones).
    """
    try:
        return KINDS[name]
    except KeyError:
        raise ConfigError(f"unknown kind of source {name!r} (known: {', '.join(KINDS)})") from None


def is_key(text: str) -> bool:
    """Whether ``text`` is a document key (``sql:rows/7``, ``file:///a``, a URL) rather than a
    path: it starts with a kind's :attr:`Kind.key_schemes` (:func:`kind_of_key`), or is a URL."""
    return "://" in text or kind_of_key(text) is not None


def key_forms() -> str:
    """What may be typed for a document, every kind's :attr:`Kind.key_form` joined (``a file
    path, a sql:<source>/<id> key or a URL``), for ``ctl``'s help."""
    forms = [k.key_form for k in KINDS.values() if k.key_form]
    return forms[0] if len(forms) == 1 else f"{', '.join(forms[:-1])} or {forms[-1]}"


def kind_of_key(key: str) -> Kind | None:
    """The kind whose :attr:`Kind.key_schemes` ``key`` starts with (compared without case: a
    URI's scheme is case-insensitive, RFC 3986 section 3.1), or None: a path, or no kind's key."""
    return next((k for k in KINDS.values() for s in k.key_schemes if key[:len(s)].lower() == s.lower()), None)


def named_source(key: str) -> str | None:
    """The name of the source ``key`` names by its kind's :attr:`Kind.key_source`
    (``sql:articles/42`` -> ``articles``), or None: its kind's keys name no source, or it is no
    kind's key.

    Raises:
        ConfigError: a malformed key of a kind whose keys name their source.
    """
    k = kind_of_key(key)
    return str(_load(k.key_source)(key)) if k is not None and k.key_source else None


def key_file(key: str) -> str | None:
    """The local file ``key`` is (:attr:`Kind.key_file`: a ``file:`` key's path), or None: the
    key of a kind whose keys are no files, or of no kind.

    Raises:
        ValueError: a malformed key of a kind whose keys are files.
    """
    k = kind_of_key(key)
    return _load(k.key_file)(key) if k is not None and k.key_file else None


def canonical_key(text: str) -> str:
    """A key as typed -> the key it is stored under, by its kind's :attr:`Kind.canonical_key`
    (a URL canonicalised); as typed when its kind has none or it cannot be parsed."""
    k = kind_of_key(text)
    if k is None or not k.canonical_key:
        return text
    try:
        return str(_load(k.canonical_key)(text))
    except ValueError:
        return text


def adhoc_table(path: str) -> tuple[str, Any]:
    """``(kind name, table)`` of a source for the directory ``path`` named on the command line
    (``indexerd index PATH``): the first kind with an :attr:`Kind.adhoc_table`.

    Raises:
        ConfigError: no kind makes one.
    """
    for k in KINDS.values():
        if k.adhoc_table is not None:
            return k.name, k.adhoc_table(path)
    raise ConfigError(f"{path}: no kind of source indexes a path named on the command line")


def source_paths(cfg: Config) -> list[tuple[str, str, str]]:
    """Every path the configured sources need, in config order (kinds in :data:`KINDS` order):
    ``(key, path, need)`` with ``key`` the whole key path (``sources.web[0].mirror_dir``) and
    ``need`` as in :attr:`Kind.paths`."""
    return [(f"sources.{k.name}[{i}].{key}", path, need)
            for k in KINDS.values() if k.paths is not None
            for i, table in enumerate(getattr(cfg.sources, k.name))
            for key, path, need in k.paths(table)]


def meta_prefixes(source: str) -> list[str]:
    """The store's meta-key prefixes a source named ``source`` may have written, whatever its
    kind (a removed source's kind is not known any more): every kind's
    :attr:`Kind.meta_prefixes`."""
    return [t.format(source=source) for k in KINDS.values() for t in k.meta_prefixes]


def configured_names(cfg: Config) -> list[str]:
    """The names of every source ``cfg`` configures, kinds in :data:`KINDS` order (nothing
    built: for readers that need only the names)."""
    return [table.name for k in KINDS.values() for table in getattr(cfg.sources, k.name)]


def of_kind(sources: Mapping[str, Source], name: str) -> list[str]:
    """The names of the sources of kind ``name``, in order."""
    return [n for n, s in sources.items() if s.kind == name]


def load_meta_map(path: str | None, cache: dict[str, MetaMap]) -> MetaMap:
    """The meta map at ``path`` (parsed once per path), or the default map.

    Raises:
        ConfigError: the file is malformed or unreadable.
    """
    from indexerd.core.metamap import DEFAULT_META_MAP, MetaMap  # not at import: the config imports this

    if not path:
        return DEFAULT_META_MAP
    if path not in cache:
        cache[path] = MetaMap.load(os.path.expanduser(path))
    return cache[path]


def build_source(cfg: Config, kind_name: str, table, cache: dict[str, MetaMap] | None = None) -> Source:
    """The source of one config ``table`` of kind ``kind_name`` (its policy from ``cfg``)."""
    pol = source_policy(cfg, table)
    return kind(kind_name).source_class()(table, pol, load_meta_map(pol.meta_map_path,
                                                                      {} if cache is None else cache))


def build_sources(cfg: Config, *, check_files: bool = False) -> dict[str, Source]:
    """Construct every configured source by name, kinds in :data:`KINDS` order, but for a
    filesystem source whose ``node`` names another node (:func:`~indexerd.config.resolve_node_name`); meta maps are
    read (and refused if malformed) here, and each source's check-time tests run
    (:meth:`Source.check`: a SQL source's password and URL; its SQLite file only when
    ``check_files``, as ``check-config`` asks -- for the daemon and ``indexerd index`` a missing
    file fails that source's passes, like a missing tree root).  Nothing connects yet.

    Raises:
        ConfigError: a malformed meta map, an unset ``password_env``, a bad URL, a missing SQLite
            file (with ``check_files``), as ``FILE: sources.<kind>[N].KEY: ...``.
    """
    from indexerd.config import resolve_node_name

    cache: dict[str, MetaMap] = {}
    out: dict[str, Source] = {}
    node: str | None = None  # this node's name, asked when a source names one
    for k in KINDS.values():
        for i, table in enumerate(getattr(cfg.sources, k.name)):
            wanted = getattr(table, "node", None)
            if wanted is not None and wanted != (node := node or resolve_node_name(cfg)):
                # a tree of another node of the cluster (`node` of the source); said, so that a
                # misspelt node name does not drop a source silently
                log.info("source %s: belongs to node %s, this node is %s: not run here", table.name,
                         table.node, node)
                continue
            src = build_source(cfg, k.name, table, cache)
            src.check(f"{cfg.origin}: sources.{k.name}[{i}]", files=check_files)
            out[table.name] = src
    return out


def shared_status(sources: Iterable[Source]) -> dict:
    """What ``ctl status`` shows of the state shared by the sources of each kind present
    (``{"hosts": {...}}`` with web sources), merged; ``{}`` when no kind has any."""
    out: dict = {}
    for name in dict.fromkeys(s.kind for s in sources):
        ref = KINDS[name].shared_status
        if ref is not None:
            out.update(_load(ref)())
    return out


def join_cluster(node: str, open_store: Callable[[], Any]) -> Callable[[], None]:
    """The process joins the cluster as ``node``: every kind's :attr:`Kind.cluster_join` (a
    kind's implementation imported only here, in a cluster); returns what undoes them all, in
    the reverse order."""
    undo = [_load(k.cluster_join)(node, open_store) for k in KINDS.values() if k.cluster_join]

    def leave() -> None:
        for step in reversed(undo):
            step()
    return leave
