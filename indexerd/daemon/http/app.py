"""The HTTP listener's WSGI application: the search page, the document and status pages, the
JSON API, ``/metrics`` and ``/healthz``.

Built on werkzeug (routing, requests, responses) and Jinja2 (templates with autoescaping on for
every template, so a value from a document, a ``<script>`` title, is shown as text).  The pages
are plain server-rendered HTML with one stylesheet; no script runs on them.

The application knows the daemon only through a *backend* object with these methods (the
daemon's :class:`indexerd.daemon.http.server.DaemonBackend`; tests may pass their own):

- ``search(SearchRequest) -> SearchResult`` (bounded: :mod:`indexerd.daemon.queries`);
- ``coverage() -> Coverage`` (:mod:`indexerd.daemon.coverage`: whether a rebuild or a first pass
  runs, so that answers are partial, and its progress);
- ``explain(key) -> dict | None`` (``ctl explain --json``'s object);
- ``preview(key, query) -> Preview | None`` (:mod:`indexerd.daemon.preview`: the stored text
  with the query's matches marked);
- ``open_original(key) -> Original | None`` (:mod:`indexerd.sources.files.originals`: a
  file inside a configured tree, opened for ``/raw``);
- ``status() -> dict`` (``ctl status --json``'s object);
- the search result carries the facets (counts per media type and source, each a link that
  adds ``media_type:``/``source:`` to the query) and, on 0 hits, a suggestion
  (:class:`~indexerd.daemon.queries.SearchResult`); ``/help`` describes the query language;
- ``healthy() -> bool``; ``source_names() -> list[str]``; ``media_types() -> list[str]``;
- ``metrics() -> bytes`` (the Prometheus text exposition).

A document is shown from what the index and the state store hold; the one file opened besides
the templates and the stylesheet is a download's (``/raw``), and only through
:func:`~indexerd.sources.files.originals.open_original` (a stored ``file:`` key inside a
configured tree, confined as the tree reads it), sent as an attachment with its stored media
type and ``nosniff``, so a stored HTML file never renders as this origin's page.

Access: when a token is set (:mod:`indexerd.daemon.http.auth`), every request must carry it;
without one (loopback only) only this machine's loopback names are answered as ``Host``, and
only the local users who may open the control socket (:mod:`indexerd.daemon.http.peer`).
"""

from __future__ import annotations

import json
import logging
import os
from importlib import resources
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from werkzeug.exceptions import HTTPException, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response
from werkzeug.wsgi import wrap_file

from indexerd.core.dates import format_utc
from indexerd.core.errors import ConfigError, IndexerdError
from indexerd.daemon.http import pages
from indexerd.daemon.http.auth import HostCheck, TokenCheck
from indexerd.daemon.http.peer import PeerCheck
from indexerd.daemon.queries import (MAX_RESULTS, SearchRequest, facets_json, hits_json, replica_lag_text,
                                     suggestion_json)
from indexerd.output.terminal import replica_lag_words

log = logging.getLogger(__name__)

_HERE = resources.files("indexerd.daemon.http")
_CSP = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
_PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: every page and API call only reads: anything but GET (and HEAD) is 405
_READ = ("GET", "HEAD")

URLS = Map([
    Rule("/", endpoint="search", methods=_READ),
    Rule("/doc", endpoint="document", methods=_READ),
    Rule("/raw", endpoint="raw", methods=_READ),
    Rule("/status", endpoint="status", methods=_READ),
    Rule("/help", endpoint="help", methods=_READ),
    Rule("/api/search", endpoint="api_search", methods=_READ),
    Rule("/api/status", endpoint="api_status", methods=_READ),
    Rule("/api/explain", endpoint="api_explain", methods=_READ),
    Rule("/metrics", endpoint="metrics", methods=_READ),
    Rule("/healthz", endpoint="healthz", methods=_READ),
    Rule("/static/<name>", endpoint="static", methods=_READ),
], strict_slashes=False)

_STATIC = {"style.css": "text/css; charset=utf-8"}


class SearchApp:
    """A WSGI application over ``backend`` (see the module docstring).

    Args:
        backend: the daemon's side of the page.
        token: who may ask (:class:`TokenCheck`); ``TokenCheck(None)`` lets every request in.
        page_size: hits per search page.
        hosts: which ``Host`` values are answered (:class:`HostCheck`); default: every one.
        peers: which local users are answered (:class:`PeerCheck`; a loopback listener without
            a token has one); None: every one.  ``/healthz`` answers every user.
    """

    def __init__(self, backend, token: TokenCheck, *, page_size: int = pages.PAGE_SIZE,
                 hosts: HostCheck | None = None, peers: PeerCheck | None = None) -> None:
        self.backend = backend
        self.token = token
        self.hosts = hosts or HostCheck(None)
        self.peers = peers
        self.page_size = page_size
        self.env = Environment(loader=FileSystemLoader(str(_HERE / "templates")),
                               autoescape=select_autoescape(default=True, default_for_string=True),
                               trim_blocks=True, lstrip_blocks=True)
        self.env.globals["replica_lag_words"] = replica_lag_words
        self._static = {name: (_HERE / "static" / name).read_bytes() for name in _STATIC}

    # -- WSGI --------------------------------------------------------------------------------
    def __call__(self, environ, start_response):
        request = Request(environ)
        adapter = URLS.bind_to_environ(environ)
        try:
            denied = self.hosts.deny(request) or self.token.deny(request) \
                or self._peer_denied(request)
            if denied is not None:
                response = self._as_api_error(request, denied)
            else:
                endpoint, values = adapter.match()
                response = getattr(self, "on_" + endpoint)(request, adapter, **values)
        except HTTPException as e:
            response = self._error(request, adapter, e.code, e.description)
            if getattr(e, "valid_methods", None):  # a 405 names what is allowed (RFC 9110, 15.5.6)
                response.headers["Allow"] = ", ".join(e.valid_methods)
        except Exception:
            log.exception("HTTP %s %s failed", request.method, request.path)
            response = self._error(request, adapter, 500, "internal error (logged by the daemon)")
        response.headers.setdefault("Content-Security-Policy", _CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        return response(environ, start_response)

    # -- helpers -----------------------------------------------------------------------------
    def _as_api_error(self, request: Request, denied: Response) -> Response:
        """A refusal (401, 421) as the API's errors are (``{"error": ...}``) on ``/api/``, as
        it is (plain text) elsewhere; its headers (``WWW-Authenticate``) kept."""
        if not request.path.startswith("/api/"):
            return denied
        response = self._json({"error": denied.get_data(as_text=True).strip()}, denied.status_code)
        for name, value in denied.headers.items():
            if name.lower() not in ("content-type", "content-length"):
                response.headers[name] = value
        return response

    def _peer_denied(self, request: Request) -> Response | None:
        if self.peers is None or request.path == "/healthz":
            return None
        why = self.peers.deny(request.environ)
        if why is None:
            return None
        log.info("HTTP %s %s refused: %s", request.method, request.path[:100], why)
        return Response(f"{why}; set [http] token_file (or token_env) to let other users in "
                        f"with the token\n", status=401, content_type="text/plain; charset=utf-8")

    def _render(self, adapter, template: str, status: int = 200, **context) -> Response:
        def url_for(endpoint, **values):
            return adapter.build(endpoint, values)

        html = self.env.get_template(template).render(url_for=url_for, **context)
        return Response(html, status=status, content_type="text/html; charset=utf-8")

    @staticmethod
    def _json(obj, status: int = 200) -> Response:
        return Response(json.dumps(obj, ensure_ascii=True), status=status,
                        content_type="application/json")

    def _error(self, request, adapter, code: int, message: str) -> Response:
        if request.path.startswith("/api/"):
            return self._json({"error": message}, status=code)
        return self._render(adapter, "error.html", status=code, code=code, message=message)

    def _search(self, form: pages.SearchForm, page_size: int):
        req = SearchRequest(query=form.q, sources=form.sources, media_types=form.media_types,
                            since=form.since(), until=form.until(), sort=form.sort,
                            offset=(form.page - 1) * page_size, limit=page_size, facets=True)
        return self.backend.search(req)

    # -- pages -------------------------------------------------------------------------------
    def on_search(self, request, adapter):
        asked = "q" in request.args
        form, result, error, status = pages.SearchForm(), None, None, 200
        coverage = None
        try:
            form = pages.read_form(request.args)
            last = MAX_RESULTS // self.page_size
            if form.q and form.page > last:  # not the API's "offset + limit" wording
                raise ConfigError(f"page {form.page} is past the last page ({last}): a search shows at most "
                                  f"{MAX_RESULTS} hits; narrow the query to see others")
            if form.q:
                result = self._search(form, self.page_size)
                coverage = self.backend.coverage()
        except IndexerdError as e:         # malformed query or field, a timeout: said on the page
            error, status = str(e), 400 if isinstance(e, ConfigError) or e.exit_code == 2 else 503
            if form == pages.SearchForm():  # the form itself was refused: keep what was typed
                form = pages.SearchForm(q=request.args.get("q", "")[:pages.MAX_QUERY_CHARS])
        views, total_pages = [], 0
        if result is not None:
            views = [pages.hit_view(h, format_utc) for h in result.hits]
            total_pages = max(1, -(-min(result.total, MAX_RESULTS) // self.page_size))
            if form.page > total_pages:
                error = f"page {form.page} is past the last page ({total_pages}) of this search's hits"

        def page_url(n):
            return adapter.build("search", {}) + "?" + _query_string(form.params(page=n))

        def search_url(q):
            return adapter.build("search", {}) + "?" + _query_string(form.params(q=q, page=1))

        def folder_url(hit):
            narrowed = pages.folder_query(form.q, hit.path)
            if narrowed is None:
                return None
            return adapter.build("search", {}) + "?" + _query_string(form.params(q=narrowed, page=1))

        return self._render(adapter, "search.html", status=status, form=form, asked=asked, error=error,
                            result=_ResultView(result, views) if result is not None else None,
                            coverage=coverage, search_url=search_url,
                            facets=pages.facet_views(form.q, result.facets) if result is not None else [],
                            pages=total_pages, page_numbers=pages.page_numbers(form.page, total_pages),
                            page_url=page_url, folder_url=folder_url, sources=self.backend.source_names(),
                            media_types=sorted(set(self.backend.media_types()) | set(form.media_types)))

    def on_document(self, request, adapter):
        key = request.args.get("key", "")
        q = request.args.get("q", "")[:pages.MAX_QUERY_CHARS]
        doc = self.backend.explain(key) if key else None
        if doc is None:
            raise NotFound(f"{key or '(no key)'}: not known to indexerd")
        facts = [(k, v) for k, v in doc.items() if k != "explanation" and v is not None]
        preview, preview_error = None, None
        try:
            preview = self.backend.preview(doc["key"], q)
        except IndexerdError as e:       # a query timeout, no index: the rest of the page stands
            preview_error = str(e)
        raw_url = (adapter.build("raw", {"key": doc["key"]}) if pages.raw_file(doc["key"])
                   and doc.get("status") == "indexed" else None)
        return self._render(adapter, "document.html", doc=doc, facts=facts, q=q,
                            web_url=pages.web_url(doc.get("key", "")), raw_url=raw_url,
                            preview=pages.preview_view(preview) if preview is not None else None,
                            preview_error=preview_error)

    def on_raw(self, request, adapter):
        key = request.args.get("key", "")
        doc = self.backend.explain(key) if pages.raw_file(key) else None
        original = self.backend.open_original(doc["key"]) if doc is not None else None
        if original is None:         # one answer for unknown, outside every tree, a symlink out
            raise NotFound(f"{key or '(no key)'}: no file of a configured tree to download")
        fh = os.fdopen(original.fd, "rb")
        response = Response(wrap_file(request.environ, fh), direct_passthrough=True,
                            content_type=pages.download_type(doc.get("media_type")))
        response.content_length = original.size_bytes
        response.headers.set("Content-Disposition", "attachment",
                             filename=pages.download_name(original.filename))
        response.headers["Cache-Control"] = "private, no-cache"
        return response

    def on_status(self, request, adapter):
        return self._render(adapter, "status.html", st=self.backend.status())

    def on_help(self, request, adapter):
        return self._render(adapter, "help.html")

    def on_static(self, request, adapter, name):
        if name not in self._static:
            raise NotFound()
        return Response(self._static[name], content_type=_STATIC[name],
                        headers={"Cache-Control": "max-age=3600"})

    # -- API ---------------------------------------------------------------------------------
    def on_api_search(self, request, adapter):
        try:
            form = pages.read_form(request.args)
            limit = int(request.args.get("limit", self.page_size))
            if not form.q:
                raise ConfigError("q: the query is empty")
            result = self._search(form, limit)
            coverage = self.backend.coverage()
        except ValueError:
            return self._json({"error": f"limit must be a number, got {request.args.get('limit')!r}"}, 400)
        except IndexerdError as e:
            return self._json({"error": str(e)}, 400 if e.exit_code == 2 else 503)
        return self._json({"query": form.q, "total": result.total,
                           "offset": result.offset, "elapsed_seconds": round(result.elapsed_seconds, 6),
                           **coverage.as_json(), "replica_lag_seconds": result.replica_lag_seconds,
                           "facets": facets_json(result.facets), "suggestion": suggestion_json(result.suggestion),
                           "query_help": adapter.build("help", {}), "hits": hits_json(result.hits)})

    def on_api_status(self, request, adapter):
        return self._json(self.backend.status())

    def on_api_explain(self, request, adapter):
        key = request.args.get("key", "")
        doc = self.backend.explain(key) if key else None
        if doc is None:
            return self._json({"error": f"{key or '(no key)'}: not known to indexerd"}, 404)
        return self._json(doc)

    def on_metrics(self, request, adapter):
        return Response(self.backend.metrics(), content_type=_PROMETHEUS_TYPE)

    def on_healthz(self, request, adapter):
        ok = self.backend.healthy()
        return Response("ok\n" if ok else "unhealthy\n", status=200 if ok else 503,
                        content_type="text/plain; charset=utf-8", headers={"Cache-Control": "no-store"})


class _ResultView:
    """A :class:`SearchResult` with its hits as :class:`pages.HitView`."""

    def __init__(self, result, views) -> None:
        self.hits = views
        self.total = result.total
        self.offset = result.offset
        self.elapsed_seconds = result.elapsed_seconds
        #: on 0 hits, a query near it that finds something (indexerd.index.suggest.Suggestion), else None
        self.suggestion = result.suggestion
        lag = result.replica_lag_seconds
        #: the page's note when a lagging read replica answered, else None
        self.replica_lag_text = replica_lag_text(lag) if lag is not None else None


def _query_string(pairs) -> str:
    return urlencode(pairs)
