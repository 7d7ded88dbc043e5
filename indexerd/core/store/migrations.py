"""The state store's schema: numbered migration steps, and applying them in order.

A database whose ``PRAGMA user_version`` is newer than :data:`SCHEMA_VERSION` is refused with
:class:`~indexerd.core.errors.SchemaTooNew`; an older one is moved forward one step at a time, each
step and its new version number in one transaction (a failed step leaves the previous version).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from indexerd.core.errors import SchemaTooNew, StoreError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate"]

#: Numbered migration steps; index i moves the schema from version i to i + 1.
MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1: the first release
    """
    CREATE TABLE documents (
        key                  TEXT PRIMARY KEY,
        source               TEXT NOT NULL,
        status               TEXT NOT NULL,      -- indexed | skipped | error
        reason               TEXT,               -- last decision or skip reason (a fixed word)
        detail               TEXT,               -- human text for errors and skips
        title                TEXT,
        media_type           TEXT,
        size                 INTEGER,
        mtime_ns             INTEGER,            -- files: stat mtime in ns at the last verdict
        last_modified        TEXT,               -- the resolved date (ISO UTC)
        date_source          TEXT,               -- meta:<name> | header | mtime | column | sitemap | fallback
        date_notes           TEXT,               -- why each date candidate was taken or dropped
        etag                 TEXT,               -- web: ETag as received
        last_modified_header TEXT,               -- web: Last-Modified exactly as received
        content_hash         TEXT,
        indexed_at           TEXT,
        checked_at           TEXT,
        decided_at           TEXT
    );
    CREATE INDEX documents_source ON documents(source, key);
    CREATE INDEX documents_last_modified ON documents(last_modified);
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT
    );
    CREATE TABLE source_runs (
        source      TEXT PRIMARY KEY,
        kind        TEXT NOT NULL,
        started_at  TEXT,
        finished_at TEXT,
        counts      TEXT                         -- JSON of the pass summary
    );
    """,
    # 1 -> 2: the status-change time of files whose last verdict was an error, so that fixing a
    # permission (which changes ctime, not mtime) makes the next pass retry them
    """
    ALTER TABLE documents ADD COLUMN ctime_ns INTEGER;
    """,
    # 2 -> 3: the web crawler's frontier and seen set (so a crawl resumes after a restart), with
    # what each URL taught us: where it led (doc_key), its links at the last parse (followed again
    # on a 304), its sitemap date, and its run of 404s and failures
    """
    CREATE TABLE crawl (
        source          TEXT NOT NULL,
        url             TEXT NOT NULL,           -- canonical URL as requested
        pass_id         INTEGER NOT NULL,        -- the pass the state below belongs to
        state           TEXT NOT NULL,           -- queued | done
        hops            INTEGER NOT NULL,        -- links followed from a seed
        seed_depth      INTEGER NOT NULL,        -- path depth of that seed (LCWA +N / -N)
        seq             INTEGER NOT NULL,        -- discovery order within the pass
        via             TEXT NOT NULL,           -- seed | link | sitemap | sitemapfile | recheck | redirect
        origin          TEXT,                    -- redirect hops: the URL first requested
        redirects       INTEGER NOT NULL DEFAULT 0,
        doc_key         TEXT,                    -- the document key it resolved to
        links           TEXT,                    -- JSON list of canonical outlinks at the last parse
        sitemap_lastmod TEXT,
        gone_count      INTEGER NOT NULL DEFAULT 0,  -- consecutive 404/410 answers
        fail_count      INTEGER NOT NULL DEFAULT 0,  -- consecutive 5xx / timeouts / connection errors
        last_status     INTEGER,
        last_outcome    TEXT,
        checked_at      TEXT,
        PRIMARY KEY (source, url)
    );
    CREATE INDEX crawl_pass ON crawl(source, pass_id, state);
    """,
    # 3 -> 4: look documents up by content hash (a web page with the bytes of another page of
    # its host is that page's alias, not a document of its own)
    """
    CREATE INDEX documents_hash ON documents(source, content_hash);
    """,
    # 4 -> 5: files: the inode number at the last verdict.  From this version ``ctime_ns`` is
    # kept for every file verdict, not only errors, so a rewrite that keeps size and mtime is seen
    # (see indexerd.sources.files.scan).  Old rows keep NULL in both: the next scan records them as they are,
    # without reading the file
    """
    ALTER TABLE documents ADD COLUMN ino INTEGER;
    """,
    # 5 -> 6: adaptive recrawl: each URL's learnt interval, when it is next due and why, and the
    # sitemap's changefreq hint (NULL: never scheduled, due at the next pass)
    """
    ALTER TABLE crawl ADD COLUMN recrawl_seconds REAL;
    ALTER TABLE crawl ADD COLUMN due_at TEXT;
    ALTER TABLE crawl ADD COLUMN due_reason TEXT;
    ALTER TABLE crawl ADD COLUMN changefreq TEXT;
    """,
    # 6 -> 7: per source, the end of its last completed pass (a web or SQL source runs at start
    # only when its interval since then is due) and the start of a pass that has not ended (it was
    # interrupted: it resumes at start); a pass recorded before counts as completed
    """
    ALTER TABLE source_runs ADD COLUMN completed_at TEXT;
    ALTER TABLE source_runs ADD COLUMN running_since TEXT;
    UPDATE source_runs SET completed_at = finished_at;
    """,
    # 7 -> 8: the scan's change test reads every row of a tree (stat_rows) from one covering index
    # instead of a row lookup per document; it still serves key ranges by source (its prefix is
    # the index it replaces)
    """
    DROP INDEX documents_source;
    CREATE INDEX documents_source ON documents(source, key, mtime_ns, size, ctime_ns, ino, reason);
    """,
    # 8 -> 9: the node that ran a source's passes (a cluster's filesystem sources belong to one
    # node, and only that node may forget them); NULL on a single machine
    """
    ALTER TABLE source_runs ADD COLUMN node TEXT;
    """,
    # 9 -> 10: a new web pass selects the known URLs that are due by their next-due time (NULL:
    # never scheduled) instead of reading every row of its source; the documents per source and
    # status are counted as rows change (status and metrics read the counts, not the table)
    """
    CREATE INDEX crawl_due ON crawl(source, due_at);
    CREATE TABLE document_counts (
        source  TEXT NOT NULL,
        status  TEXT NOT NULL,
        n       INTEGER NOT NULL,
        PRIMARY KEY (source, status)
    );
    INSERT INTO document_counts(source, status, n) SELECT source, status, count(*) FROM documents
        GROUP BY source, status;
    CREATE TRIGGER document_counts_insert AFTER INSERT ON documents BEGIN
        INSERT INTO document_counts(source, status, n) VALUES (NEW.source, NEW.status, 1)
            ON CONFLICT(source, status) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER document_counts_delete AFTER DELETE ON documents BEGIN
        UPDATE document_counts SET n = n - 1 WHERE source = OLD.source AND status = OLD.status;
    END;
    CREATE TRIGGER document_counts_update AFTER UPDATE OF source, status ON documents
        WHEN OLD.source != NEW.source OR OLD.status != NEW.status BEGIN
        UPDATE document_counts SET n = n - 1 WHERE source = OLD.source AND status = OLD.status;
        INSERT INTO document_counts(source, status, n) VALUES (NEW.source, NEW.status, 1)
            ON CONFLICT(source, status) DO UPDATE SET n = n + 1;
    END;
    """,
    # 10 -> 11: which kept file references which page requisite (a page kept in the mirror, or
    # a stylesheet or redirect that is itself a requisite: ``nested``), so a requisite no page
    # references any more is dropped instead of asked forever (indexerd.sources.web.orphans).
    # The requisites known before are marked referenced by the page '' (their referrers were
    # never recorded): kept until a finished ``ctl reindex --source`` pass has parsed every page
    """
    CREATE TABLE crawl_requisites (
        source     TEXT NOT NULL,
        page       TEXT NOT NULL,            -- the referrer's URL ('': known before this table)
        requisite  TEXT NOT NULL,            -- the URL it needs to display
        nested     INTEGER NOT NULL DEFAULT 0,  -- 1: the referrer is itself a requisite
        PRIMARY KEY (source, page, requisite)
    );
    CREATE INDEX crawl_requisites_requisite ON crawl_requisites(source, nested, requisite);
    INSERT INTO crawl_requisites(source, page, requisite, nested)
        SELECT source, '', url, 0 FROM crawl WHERE via = 'requisite' OR last_outcome = 'requisite';
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)



def migrate(db: sqlite3.Connection, path: Path, *, readonly: bool) -> None:
    """Bring the database on ``db`` (the store file ``path``) to :data:`SCHEMA_VERSION`.

    Raises:
        SchemaTooNew: the file was written by a newer indexerd.
        StoreError: it needs migration and ``readonly`` is set (the message says to run
            ``indexerd index`` once).
        sqlite3.DatabaseError: a step failed (rolled back; the caller names the file).
    """
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(f"{path}: state store schema version {version} is newer than this "
                           f"indexerd understands ({SCHEMA_VERSION}); upgrade indexerd")
    if version == SCHEMA_VERSION:
        return
    if readonly:
        raise StoreError(f"{path}: state store needs migration; run `indexerd index` once")
    for step in range(version, SCHEMA_VERSION):
        # executescript commits any open transaction first, so the BEGIN goes in the script
        try:
            db.executescript(f"BEGIN IMMEDIATE;{MIGRATIONS[step]};"
                             f"PRAGMA user_version = {step + 1};COMMIT;")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
