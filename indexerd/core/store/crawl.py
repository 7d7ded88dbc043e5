"""Crawl rows (web sources): the frontier and seen set of a pass, what each URL taught us.

Written only by the one pass of its web source (and ``ctl forget``'s schedule change); see
:data:`indexerd.core.store.WRITES_OUTSIDE_THE_WRITER`.  The typed view of a row is
:class:`indexerd.sources.web.urlstate.UrlState`.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from indexerd.core.store.connection import META_UPSERT, StoreConnection

__all__ = ["CrawlRows", "REQUISITES_ADD", "REQUISITES_CLEAR", "REQUISITES_MARK", "Requisites", "requisite_rows"]

#: What one kept file references (:meth:`CrawlRows.crawl_write`): ``(nested, [URL, ...])``,
#: ``nested`` when the referrer is itself a page requisite (a stylesheet, a redirect).
Requisites = tuple[bool, list[str]]
#: SQL: forget what one referrer references (``source, page``).
REQUISITES_CLEAR = "DELETE FROM crawl_requisites WHERE source = ? AND page = ?"
#: The referrer of the marks :data:`REQUISITES_MARK` leaves (``nested`` 2; no URL is ``-``).
TO_CHECK = "-"
#: SQL (before :data:`REQUISITES_CLEAR`): mark what one referrer referenced, to be checked by
#: the next pass (:meth:`CrawlRows.crawl_requisites_to_check`) whatever its schedule
#: (``source, page``; a fenced write appends a condition before the conflict clause).
REQUISITES_MARK = ("INSERT INTO crawl_requisites(source, page, requisite, nested) SELECT source, "
                   f"'{TO_CHECK}', requisite, 2 FROM crawl_requisites WHERE source = ? AND page = ? AND nested < 2")
#: The conflict clause of :data:`REQUISITES_MARK`.
MARK_CONFLICT = " ON CONFLICT(source, page, requisite) DO NOTHING"
#: SQL: one reference (``source, page, requisite, nested``).
REQUISITES_ADD = ("INSERT INTO crawl_requisites(source, page, requisite, nested) VALUES (?, ?, ?, ?) "
                  "ON CONFLICT(source, page, requisite) DO NOTHING")


def requisite_rows(source: str, requisites: dict[str, Requisites | None],
                   deletes: Iterable[str] = ()) -> tuple[list[tuple], list[tuple]]:
    """The arguments of :data:`REQUISITES_CLEAR` (every referrer named, and every URL
    deleted) and of :data:`REQUISITES_ADD` (the new references) for a write."""
    cleared = [(source, u) for u in dict.fromkeys([*requisites, *deletes])]
    added = [(source, page, url, int(nested)) for page, refs in requisites.items() if refs is not None
             for nested, urls in (refs,) for url in dict.fromkeys(urls)]
    return cleared, added


class CrawlRows(StoreConnection):
    """The ``crawl`` table: rows by source, the overflow on disk, outlinks, one URL's schedule."""

    #: The crawl columns kept in memory during a pass; ``links`` (JSON, kilobytes per page) is
    #: read only when a 304 needs it (:meth:`crawl_links`).
    CRAWL_COLUMNS = ("url", "pass_id", "state", "hops", "seed_depth", "seq", "via", "origin", "redirects",
                     "doc_key", "sitemap_lastmod", "gone_count", "fail_count", "last_status",
                     "last_outcome", "checked_at", "recrawl_seconds", "due_at", "due_reason", "changefreq")

    def crawl_rows(self, source: str) -> dict[str, dict]:
        """Every crawl row of ``source`` as ``{url: {column: value}}`` (without ``links``),
        except the frontier's overflow on disk (state ``spilled``: :meth:`crawl_spilled`): the
        whole source at once, for tests and inspection; a pass reads :meth:`crawl_state_row`
        and :meth:`crawl_rows_chunked`."""
        cur = self._db.execute(f"SELECT {', '.join(self.CRAWL_COLUMNS)} FROM crawl WHERE source = ? "
                               "AND state != 'spilled'", (source,))
        return {r["url"]: dict(r) for r in cur}

    def crawl_state_row(self, source: str, url: str, *, spilled: bool = False) -> dict | None:
        """The crawl row of ``url`` in ``source`` (without ``links``), or None when it has none
        or (unless ``spilled``) only a place in the frontier's overflow (state ``spilled``)."""
        found = self.crawl_state_rows(source, [url], spilled=spilled)
        return found.get(url)

    #: URLs asked in one query by :meth:`crawl_state_rows`.
    STATE_ROWS_CHUNK = 500

    def crawl_state_rows(self, source: str, urls: Iterable[str], *, spilled: bool = False) -> dict[str, dict]:
        """The crawl rows of those of ``urls`` that have one in ``source``, as ``{url: {column:
        value}}`` (without ``links``; a row in the frontier's overflow, state ``spilled``, only
        when ``spilled``); :data:`STATE_ROWS_CHUNK` URLs a query."""
        urls = list(dict.fromkeys(urls))
        found: dict[str, dict] = {}
        cols = ", ".join(self.CRAWL_COLUMNS)
        only = "" if spilled else " AND state != 'spilled'"
        for i in range(0, len(urls), self.STATE_ROWS_CHUNK):
            part = urls[i:i + self.STATE_ROWS_CHUNK]
            cur = self._db.execute(f"SELECT {cols} FROM crawl WHERE source = ? "
                                   f"AND url IN ({', '.join('?' * len(part))}){only}", (source, *part))
            found.update((r["url"], dict(r)) for r in cur)
        return found

    def crawl_rows_chunked(self, source: str, *, chunk: int = 2000) -> Iterator[dict]:
        """The rows of :meth:`crawl_rows` in URL order, read ``chunk`` at a time by URL (keyset
        pagination on the primary key: each chunk one whole query, no cursor left open)."""
        last, op = "", ">="
        while True:
            rows = self._db.execute(f"SELECT {', '.join(self.CRAWL_COLUMNS)} FROM crawl WHERE source = ? "
                                    f"AND url {op} ? AND state != 'spilled' ORDER BY url LIMIT ?",
                                    (source, last, chunk)).fetchall()
            yield from (dict(r) for r in rows)
            if len(rows) < chunk:
                return
            last, op = rows[-1]["url"], ">"

    #: What makes a row a page asked in some pass and not confirmed gone (a new pass asks it
    #: again when due: :attr:`indexerd.sources.web.urlstate.UrlState.asked_before`).
    _ASKED_BEFORE = ("last_status IS NOT NULL AND via != 'sitemapfile' "
                     "AND (last_outcome IS NULL OR last_outcome != 'gone')")

    def crawl_due_rows(self, source: str, before_pass: int, due_by: str) -> list[dict]:
        """The rows of ``source`` a new pass asks again because they are due: pages asked in
        a pass before ``before_pass`` (not sitemap files, not confirmed gone) whose ``due_at``
        is NULL (never scheduled) or at most ``due_by`` (the store's time text,
        :func:`~indexerd.core.store.values.to_db_time`), without ``links``.

        Read through the ``crawl_due`` index (source, due_at), two range scans: the cost is
        the due rows', not the source's (a source knowing 10 M URLs with 2 due reads 2 rows)."""
        cols = ", ".join(self.CRAWL_COLUMNS)
        found: list[dict] = []
        for cond, args in (("due_at IS NULL", ()), ("due_at <= ?", (due_by,))):
            # "+pass_id": no index on it, so SQLite's planner takes crawl_due, not crawl_pass
            cur = self._db.execute(f"SELECT {cols} FROM crawl WHERE source = ? AND {cond} AND +pass_id < ? "
                                   f"AND state != 'spilled' AND {self._ASKED_BEFORE}",
                                   (source, *args, before_pass))
            found.extend(dict(r) for r in cur)
        return found

    def crawl_pass_rows(self, source: str, pass_id: int) -> list[dict]:
        """The rows of pass ``pass_id`` of ``source`` (not the frontier's overflow), without
        ``links``, in discovery order: what that pass queued and asked, through the
        ``crawl_pass`` index (the cost is that pass's work, not the source's)."""
        cur = self._db.execute(f"SELECT {', '.join(self.CRAWL_COLUMNS)} FROM crawl WHERE source = ? "
                               "AND pass_id = ? AND state != 'spilled' ORDER BY seq", (source, pass_id))
        return [dict(r) for r in cur]

    def crawl_indexed_unstored(self, source: str, pass_id: int) -> list[dict]:
        """The rows of pass ``pass_id`` of ``source`` that say their page was indexed
        (``last_outcome`` ``indexed:...``; ``Verdict.INDEXED:...`` as older rows spell it) while
        the store holds no document under their key (``doc_key``, else the URL): the crawl row
        was written and the document's write was lost (a failed commit, a database restart,
        ``kill -9`` before the commit).  One query; the cost is that pass's rows (through
        ``crawl_pass``) and one key lookup each, and only the lost ones are returned."""
        cur = self._db.execute(
            f"SELECT {', '.join('c.' + c for c in self.CRAWL_COLUMNS)} FROM crawl c WHERE c.source = ? "
            "AND c.pass_id = ? AND c.state = 'done' AND (substr(c.last_outcome, 1, 8) = 'indexed:' "
            "OR substr(c.last_outcome, 1, 16) = 'Verdict.INDEXED:') "
            "AND NOT EXISTS (SELECT 1 FROM documents d WHERE d.key = coalesce(c.doc_key, c.url))",
            (source, pass_id))
        return [dict(r) for r in cur]

    def crawl_forget_unasked(self, source: str, pass_id: int) -> int:
        """Delete the rows pass ``pass_id`` of ``source`` queued and never asked (a pass a
        stop ended before it asked them; a finished pass forgets its own): they are found
        again if still linked.  Returns how many were deleted."""
        where = ("WHERE source = ? AND pass_id = ? AND state = 'queued' AND last_status IS NULL "
                 "AND via != 'sitemapfile' AND doc_key IS NULL")
        n = self._db.execute(f"SELECT count(*) FROM crawl {where}", (source, pass_id)).fetchone()[0]
        if n:
            self._exec_many(f"DELETE FROM crawl {where}", [(source, pass_id)])
        return n

    def crawl_spilled(self, source: str, pass_id: int, limit: int) -> list[dict]:
        """At most ``limit`` rows of the frontier's overflow on disk (state ``spilled``) of pass
        ``pass_id``, best first (fewest hops, then discovery order)."""
        cur = self._db.execute(f"SELECT {', '.join(self.CRAWL_COLUMNS)} FROM crawl WHERE source = ? "
                               "AND state = 'spilled' AND pass_id = ? ORDER BY hops, seq LIMIT ?",
                               (source, pass_id, limit))
        return [dict(r) for r in cur]

    def crawl_drop_spilled(self, source: str, since_pass: int) -> None:
        """Forget the frontier's overflow on disk of ``source`` left by pass ``since_pass`` and
        later (a pass finished or began; an older pass's overflow was dropped by its own end or
        by the next start), through ``crawl_pass``: the cost is those passes' rows."""
        self._exec_many("DELETE FROM crawl WHERE source = ? AND pass_id >= ? AND state = 'spilled'",
                        [(source, since_pass)])

    def crawl_orphan_keys(self, source: str) -> list[str]:
        """The keys of ``source``'s indexed documents whose page no crawl row will ask again:
        no row under that URL (a page first fetched by a process killed before its row was
        written: its document committed, its row not), or a row that says the page is gone
        (its deletion's commit lost).  Read after an interrupted pass only: the cost is the
        source's indexed documents, one key lookup each (``documents_source``, the crawl's
        primary key).  A document kept under a canonical key other than its URL is listed too
        (asking it once more is harmless)."""
        cur = self._db.execute(
            "SELECT d.key FROM documents d LEFT JOIN crawl c ON c.source = d.source AND c.url = d.key "
            "WHERE d.source = ? AND d.status = 'indexed' AND (c.url IS NULL OR c.last_outcome = 'gone') "
            "ORDER BY d.key", (source,))
        return [r[0] for r in cur]

    def crawl_links(self, source: str, url: str) -> str | None:
        """The JSON list of outlinks stored for ``url`` at its last parse, or None."""
        row = self._db.execute("SELECT links FROM crawl WHERE source = ? AND url = ?", (source, url)).fetchone()
        return row[0] if row is not None else None

    def crawl_write(self, source: str, rows: Iterable[dict], deletes: Iterable[str] = (),
                    meta: dict[str, str] | None = None, links: dict[str, str | None] | None = None,
                    requisites: dict[str, Requisites | None] | None = None) -> None:
        """Upsert crawl rows (dicts with every column of :attr:`CRAWL_COLUMNS`), set the
        ``links`` of the URLs in ``links``, replace the page requisites of the URLs in
        ``requisites`` (``{referrer: (nested, [requisite URL, ...]) or None}``, None: it
        references none any more; ``nested``: the referrer is itself a requisite), delete URLs
        (and the requisites they referenced) and set meta keys, in one transaction.  A row's
        stored ``links`` and requisites are kept unless ``links`` or ``requisites`` names its URL."""
        cols = ("source",) + self.CRAWL_COLUMNS
        updates = ", ".join(f"{c} = excluded.{c}" for c in self.CRAWL_COLUMNS if c != "url")
        sql = (f"INSERT INTO crawl({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
               f"ON CONFLICT(source, url) DO UPDATE SET {updates}")
        deletes = list(deletes)
        cleared, added = requisite_rows(source, requisites or {}, deletes)
        self._transaction([
            (sql, [(source,) + tuple(r[c] for c in self.CRAWL_COLUMNS) for r in rows]),
            ("UPDATE crawl SET links = ? WHERE source = ? AND url = ?",
             [(v, source, u) for u, v in (links or {}).items()]),
            ("DELETE FROM crawl WHERE source = ? AND url = ?", [(source, u) for u in deletes]),
            (REQUISITES_MARK + MARK_CONFLICT, cleared),
            (REQUISITES_CLEAR, cleared),
            (REQUISITES_ADD, added),
            (META_UPSERT, list((meta or {}).items()))])

    #: Candidates asked at once by :meth:`crawl_requisites_referenced`.
    REFERENCED_CHUNK = 2000

    def crawl_requisites_referenced(self, source: str, urls: Iterable[str]) -> set[str]:
        """Those of the page requisites ``urls`` of ``source`` that a page still needs: a page
        kept in the mirror references it (its ``crawl_requisites`` row is not ``nested``), or a
        requisite that such a page needs does (a stylesheet's ``@import`` or font, a
        requisite's redirect), through any number of stylesheets.  A requisite referenced only
        by other requisites no page needs (a cycle of ``@import`` included) is not.

        Only URLs with a crawl row are asked about (the due requisites of a pass; a referrer
        that is a requisite has one too).  Level by level, :data:`REFERENCED_CHUNK` URLs a
        query: which have a page referrer (each URL's crawl row by primary key, then one
        referrer found or not by the ``crawl_requisites_requisite`` index on (source, nested,
        requisite)), then the ``nested`` referrers of the others, asked the same way.  The cost
        is the URLs and the stylesheets above them, not how many pages share one (a recursive
        query did the same walk, but SQLite's planner, with statistics, scanned the references
        at each step: bench/RESULTS.md)."""
        asked = list(dict.fromkeys(urls))
        level, seen = list(asked), set(asked)
        parents: dict[str, list[str]] = {}   # a URL -> its nested referrers
        live: set[str] = set()               # URLs a page references
        while level:
            live.update(self._referenced_by_a_page(source, level))
            rest = [u for u in level if u not in live]
            level = []
            for child, parent in self._nested_referrers(source, rest):
                parents.setdefault(child, []).append(parent)
                if parent not in seen:
                    seen.add(parent)
                    level.append(parent)
        needed = set(live)                   # and, down the references, what they need
        children: dict[str, list[str]] = {}
        for child, above in parents.items():
            for parent in above:
                children.setdefault(parent, []).append(child)
        todo = list(live)
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in needed:
                    needed.add(child)
                    todo.append(child)
        return needed.intersection(asked)

    def _referenced_by_a_page(self, source: str, urls: list[str]) -> set[str]:
        """Those of ``urls`` (with a crawl row) that some ``crawl_requisites`` row not ``nested``
        references."""
        found: set[str] = set()
        for i in range(0, len(urls), self.REFERENCED_CHUNK):
            part = urls[i:i + self.REFERENCED_CHUNK]
            cur = self._db.execute(
                f"SELECT c.url FROM crawl c WHERE c.source = ? AND c.url IN ({', '.join('?' * len(part))}) "
                "AND EXISTS (SELECT 1 FROM crawl_requisites r WHERE r.source = ? AND r.nested = 0 "
                "AND r.requisite = c.url)", (source, *part, source))
            found.update(r[0] for r in cur)
        return found

    def _nested_referrers(self, source: str, urls: list[str]) -> list[tuple[str, str]]:
        """``(url, referrer)`` for each ``nested`` reference to one of ``urls``."""
        pairs: list[tuple[str, str]] = []
        for i in range(0, len(urls), self.REFERENCED_CHUNK):
            part = urls[i:i + self.REFERENCED_CHUNK]
            cur = self._db.execute(
                "SELECT requisite, page FROM crawl_requisites WHERE source = ? AND nested = 1 "
                f"AND requisite IN ({', '.join('?' * len(part))})", (source, *part))
            pairs.extend((r[0], r[1]) for r in cur)
        return pairs

    def crawl_drop_requisites(self, source: str, urls: Iterable[str]) -> None:
        """Forget the page requisites ``urls`` of ``source`` no page needs any more
        (:meth:`crawl_requisites_referenced`): their crawl rows are deleted, not kept as
        tombstones (a row would only grow the table: if a page references the URL again it is
        a new requisite, fetched whole, its file being gone), and so are the requisites they
        referenced themselves (a stylesheet's), which may then be needed by nothing either:
        those are marked to be checked (:meth:`crawl_requisites_to_check`).  One transaction."""
        keys = [(source, u) for u in dict.fromkeys(urls)]
        self._transaction([("DELETE FROM crawl WHERE source = ? AND url = ?", keys),
                           (REQUISITES_MARK + MARK_CONFLICT, keys), (REQUISITES_CLEAR, keys)])

    def crawl_requisites_to_check(self, source: str) -> list[str]:
        """The URLs a referrer of ``source`` referenced before its references were replaced or
        cleared since the last pass began (a page parsed again, its file removed, its row
        deleted): a requisite among them may be needed by nothing now, and the next pass
        checks it whether or not it is due (:mod:`indexerd.sources.web.orphans`), so its file
        leaves the mirror at the next pass, not when adaptive recrawl would ask it again.
        Through the ``crawl_requisites_requisite`` index; the cost is what changed."""
        cur = self._db.execute("SELECT requisite FROM crawl_requisites WHERE source = ? AND nested = 2 "
                               "ORDER BY requisite", (source,))
        return [r[0] for r in cur]

    def crawl_requisites_checked(self, source: str, urls: Iterable[str]) -> None:
        """Forget the marks :meth:`crawl_requisites_to_check` returned for ``urls``: checked."""
        self._exec_many("DELETE FROM crawl_requisites WHERE source = ? AND page = ? AND requisite = ?",
                        [(source, TO_CHECK, u) for u in dict.fromkeys(urls)])

    def crawl_trust_requisite_references(self, source: str) -> None:
        """Drop the mark the schema 11 migration (PostgreSQL: 6) put on the requisites known
        before references were kept (the referrer ``''``): called once a ``ctl reindex
        --source`` pass has finished, which parsed every page and recorded what each needs,
        so from then on a requisite no page references is one no page needs."""
        self._exec_many("DELETE FROM crawl_requisites WHERE source = ? AND page = ''", [(source,)])

    def crawl_row(self, source: str, url: str) -> dict | None:
        """The crawl row of ``url`` in web source ``source`` (by primary key), or None."""
        row = self._db.execute(f"SELECT source, {', '.join(self.CRAWL_COLUMNS)} FROM crawl WHERE source = ? "
                               "AND url = ?", (source, url)).fetchone()
        return dict(row) if row is not None else None

    def crawl_due_now(self, source: str, key: str, reason: str) -> None:
        """Make the page indexed under ``key`` (its crawl row's URL, or a redirect's target
        ``doc_key``) due at the next pass of ``source``: its adaptive-recrawl ``due_at`` is
        cleared (None is due: :func:`indexerd.sources.web.recrawl.is_due`), its learnt interval kept."""
        self._exec_many("UPDATE crawl SET due_at = NULL, due_reason = ? "
                        "WHERE source = ? AND (url = ? OR doc_key = ?)", [(reason, source, key, key)])
