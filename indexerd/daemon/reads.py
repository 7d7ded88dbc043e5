"""The read-only ``ctl`` commands answered by the running daemon: ``search``, ``report``,
``changed`` and ``explain``.

The daemon's index is open and warm, so ``ctl search`` through it costs the query alone; the
client (:mod:`indexerd.cli.ctl`) prints the reply exactly as it prints what it reads from the
state dir itself when no daemon answers.  Each request names the state dir the client would
read (``state_dir``); a daemon that serves another one answers ``other_state_dir`` and the
client reads its own (a user's own index is never answered from the service's).

Replies (besides ``ok``): ``search`` -> ``hits`` (as ``--json`` prints them) and ``scores``
(full precision, for the text form) and, while the index is partial (a rebuild or a first pass
runs: :mod:`indexerd.daemon.coverage`), ``coverage`` (``{"partial": true, "progress": [...]}``)
and ``coverage_text``; when a read replica that lags answered, ``replica_lag_seconds`` and
``replica_lag_text`` (:func:`indexerd.daemon.queries.replica_lag_text`); when nothing matched
and a query near it finds something, ``suggestion`` (:func:`indexerd.daemon.queries.suggestion_json`);
with ``"facets": true`` in the request (``ctl search`` itself never asks: it prints none),
``facets`` (:func:`indexerd.daemon.queries.facets_json`), and never ``rendered``;
or with ``render``, when the index is complete, ``rendered``: the text ``ctl search``
prints (:func:`indexerd.output.terminal.search_reply_text`, sent as
:func:`indexerd.daemon.control.encode` frames it), except with ``--json`` and a suggestion
(which goes to standard error: the full command line prints it); ``report``/``changed`` -> ``rows``, or ``too_many`` when
over :data:`MAX_ROWS` (the client then reads the store itself); ``explain`` -> ``explain``
(``None`` for an unknown key: the client words the error with the key as typed).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone

from indexerd.core.errors import ConfigError
from indexerd.daemon.queries import SearchRequest, facets_json, hits_json, replica_lag_text, suggestion_json

UTC = timezone.utc
#: rows a report or changed list may carry in one reply (the client reads more itself)
MAX_ROWS = 200_000


def other_state_dir(req: dict, own: str) -> str | None:
    """``own`` when the request names a different state dir, else None."""
    asked = req.get("state_dir")
    if asked is None:
        return None
    same = os.path.realpath(asked) == os.path.realpath(own)
    return None if same else own


def _own_state_dir(handler):
    """``handler`` answering only a request for the daemon's own state dir (else
    ``other_state_dir``: the client reads its own)."""
    def answer(daemon, req: dict) -> dict:
        elsewhere = other_state_dir(req, str(daemon.indexer.state.path))
        if elsewhere is not None:
            return {"other_state_dir": elsewhere}
        return handler(daemon, req)

    answer.__doc__ = handler.__doc__
    return answer


def _store(daemon):
    return daemon.indexer.state.open_store(readonly=True)


def _explain(daemon, req: dict) -> dict:
    """``ctl explain KEY``."""
    from indexerd.output import reports

    with _store(daemon) as store:
        return {"explain": reports.explain(store, _text(req, "key"))}


def _report(daemon, req: dict) -> dict:
    """``ctl report [SOURCE] [--skipped]``: the dates report, or the skipped documents."""
    from indexerd.output import reports

    report = reports.skipped_report if req.get("report") == "skipped" else reports.date_report
    with _store(daemon) as store:
        return _rows(report(store, req.get("source")))


def _changed(daemon, req: dict) -> dict:
    """``ctl changed SINCE``."""
    from indexerd.output import reports

    with _store(daemon) as store:
        return _rows(reports.changed(store, _text(req, "since")))


def _text(req: dict, name: str) -> str:
    value = req.get(name)
    if not isinstance(value, str):
        raise ConfigError(f"bad request: {name!r} must be a string")
    return value


def _rows(rows) -> dict:
    out: list = []
    for row in rows:
        if len(out) >= MAX_ROWS:
            return {"too_many": True}
        out.append(row)
    return {"rows": out}


def _search(daemon, req: dict) -> dict:
    """``ctl search QUERY [--since SPAN] [--limit N] [--sort S]``: through the daemon's query
    runner; with ``render`` (``{"tty": bool, "json": bool}``) the printed text instead of the
    hits, unless the index is partial (then ``coverage``) or a lagging read replica answered
    (then ``replica_lag_seconds``)."""
    from indexerd.core.timespans import parse_since

    render = req.get("render")
    if render is not None and not all(isinstance(render.get(k, False), bool) for k in ("tty", "json")):
        raise ConfigError("render: tty and json must be true or false")

    want_facets = req.get("facets", False)
    if not isinstance(want_facets, bool):
        raise ConfigError("facets must be true or false")
    limit = req.get("limit", 10)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ConfigError(f"--limit must be 1 or more, got {limit}")
    since = until = None
    if req.get("since"):
        since, until = parse_since(_text(req, "since"), datetime.now(UTC))
    result = daemon.queries.run(SearchRequest(query=_text(req, "query"), since=since, until=until,
                                              limit=limit, sort=req.get("sort") or "relevance",
                                              facets=want_facets),
                                via="ctl", unbounded=True)
    hits, scores = hits_json(result.hits), [h.score for h in result.hits]
    suggestion = suggestion_json(result.suggestion)
    cov = daemon.coverage.current()
    lag = result.replica_lag_seconds
    if cov.partial or lag is not None or want_facets:   # never rendered: the full command line says it
        out: dict = {"hits": hits, "scores": scores}
        if want_facets:
            out["facets"] = facets_json(result.facets)
        if suggestion is not None:
            out["suggestion"] = suggestion
        if cov.partial:                  # (and picks the exit code)
            out.update(coverage=cov.as_json(), coverage_text=cov.text())
        if lag is not None:
            out.update(replica_lag_seconds=lag, replica_lag_text=replica_lag_text(lag))
        return out
    if render is not None and not (render.get("json", False) and suggestion is not None):
        from indexerd.output.terminal import search_reply_text

        return {"rendered": search_reply_text(req["query"], hits, scores, as_json=render.get("json", False),
                                              tty=render.get("tty", False), suggestion=suggestion)}
    out = {"hits": hits, "scores": scores}
    return {**out, "suggestion": suggestion} if suggestion is not None else out


#: read command -> handler(daemon, request) -> reply fields (:data:`indexerd.daemon.commands.COMMANDS`
#: holds them with the others).  Each raises ConfigError for a bad field (exit 2), QueryError for a
#: malformed query or span (exit 2), QueryTimeout when the query took too long (exit 1).
HANDLERS = {name: _own_state_dir(h) for name, h in
            (("search", _search), ("report", _report), ("changed", _changed), ("explain", _explain))}
