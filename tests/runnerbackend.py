"""The search page's backend over a bare :class:`~indexerd.daemon.queries.QueryRunner` (no
daemon): what tests of the HTTP application's query path give :class:`SearchApp`."""

from __future__ import annotations

from indexerd.daemon.coverage import Coverage
from indexerd.daemon.queries import QueryRunner


class Backend:
    """The application's backend over ``runner``: one source ``notes`` of ``text/plain``, a
    complete index."""

    def __init__(self, runner: QueryRunner) -> None:
        self.runner = runner

    def search(self, req):
        return self.runner.run(req, via="http")

    def source_names(self):
        return ["notes"]

    def coverage(self):
        return Coverage()

    def media_types(self):
        return ["text/plain"]
