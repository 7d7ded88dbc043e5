"""The daemon's HTTP listener: the search page, the document and status pages, the JSON API
(``/api/search``, ``/api/status``, ``/api/explain``), ``/metrics`` and ``/healthz``.

Off unless ``[http] listen`` is set.  :mod:`.server` runs it (waitress) and connects it to the
daemon, :mod:`.app` routes and renders (werkzeug, Jinja2), :mod:`.pages` shapes what the search
page shows, :mod:`.auth` checks the token, :mod:`.metrics` keeps the Prometheus metrics.
"""
