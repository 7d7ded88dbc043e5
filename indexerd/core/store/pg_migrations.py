"""The state store's schema on PostgreSQL: numbered steps, applied in order under a lock.

The tables and columns are those of the SQLite store (:mod:`.migrations`, whose comments say what
each column holds), with PostgreSQL's types: text columns that are keys or compared as ranges
use the ``"C"`` collation so that they sort byte-wise as SQLite's do (a key range by prefix and
``ORDER BY key`` must agree on both stores); nanosecond integers are ``bigint``.  Times stay
ISO 8601 UTC text (:mod:`.values`), so both stores hold the same values.

The version lives in ``store_schema`` (one row).  Several nodes may start at once: each step
runs in one transaction holding ``pg_advisory_xact_lock`` on :data:`MIGRATE_LOCK_KEY`, and
the version is read again under the lock.  A schema newer than :data:`PG_SCHEMA_VERSION` is
refused with :class:`~indexerd.core.errors.SchemaTooNew`.
"""

from __future__ import annotations

__all__ = ["PG_MIGRATIONS", "PG_SCHEMA_VERSION", "MIGRATE_LOCK_KEY"]

#: The advisory lock a migration holds (any 64-bit number no other part of indexerd uses).
MIGRATE_LOCK_KEY = 0x1DE8E2D_5707E

#: Step i moves the schema from version i to i + 1.  ``{s}`` is the schema's quoted name.
PG_MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1: the documents, meta, source_runs and crawl tables of SQLite schema 9, and the
    # cluster's nodes (heartbeats) and host leases (the politeness slot of a host, across nodes)
    """
    CREATE TABLE {s}.documents (
        key                  text COLLATE "C" PRIMARY KEY,
        source               text COLLATE "C" NOT NULL,
        status               text NOT NULL,
        reason               text,
        detail               text,
        title                text,
        media_type           text,
        size                 bigint,
        mtime_ns             bigint,
        last_modified        text COLLATE "C",
        date_source          text,
        date_notes           text,
        etag                 text,
        last_modified_header text,
        content_hash         text,
        indexed_at           text COLLATE "C",
        checked_at           text COLLATE "C",
        decided_at           text COLLATE "C",
        ctime_ns             bigint,
        ino                  bigint
    );
    CREATE INDEX documents_source ON {s}.documents(source, key) INCLUDE (mtime_ns, size, ctime_ns, ino, reason, status);
    CREATE INDEX documents_last_modified ON {s}.documents(last_modified);
    CREATE INDEX documents_hash ON {s}.documents(source, content_hash);
    CREATE TABLE {s}.meta (
        key   text COLLATE "C" PRIMARY KEY,
        value text
    );
    CREATE TABLE {s}.source_runs (
        source        text COLLATE "C" PRIMARY KEY,
        kind          text NOT NULL,
        started_at    text,
        finished_at   text,
        counts        text,
        completed_at  text,
        running_since text,
        node          text COLLATE "C"
    );
    CREATE TABLE {s}.crawl (
        source          text COLLATE "C" NOT NULL,
        url             text COLLATE "C" NOT NULL,
        pass_id         bigint NOT NULL,
        state           text NOT NULL,
        hops            integer NOT NULL,
        seed_depth      integer NOT NULL,
        seq             bigint NOT NULL,
        via             text NOT NULL,
        origin          text,
        redirects       integer NOT NULL DEFAULT 0,
        doc_key         text COLLATE "C",
        links           text,
        sitemap_lastmod text,
        gone_count      integer NOT NULL DEFAULT 0,
        fail_count      integer NOT NULL DEFAULT 0,
        last_status     integer,
        last_outcome    text,
        checked_at      text,
        recrawl_seconds double precision,
        due_at          text COLLATE "C",
        due_reason      text,
        changefreq      text,
        PRIMARY KEY (source, url)
    );
    CREATE INDEX crawl_pass ON {s}.crawl(source, pass_id, state);
    CREATE TABLE {s}.nodes (
        name         text COLLATE "C" PRIMARY KEY,
        host         text NOT NULL,
        pid          integer NOT NULL,
        version      text NOT NULL,
        started_at   text NOT NULL,
        heartbeat_at timestamptz NOT NULL,
        stopped_at   timestamptz,
        working_on   text NOT NULL DEFAULT '',
        sources      text NOT NULL DEFAULT '[]'
    );
    CREATE TABLE {s}.host_leases (
        host          text COLLATE "C" PRIMARY KEY,
        node          text COLLATE "C",
        lease_until   timestamptz NOT NULL,
        next_allowed  timestamptz NOT NULL,
        failures      integer NOT NULL DEFAULT 0,
        last_delay    double precision NOT NULL DEFAULT 0,
        requests      bigint NOT NULL DEFAULT 0
    );
    """,
    # 1 -> 2: robots.txt verdicts shared by every node (one fetch per host per expiry for the
    # whole cluster): the verdict, the body to parse with each source's token, until when
    """
    CREATE TABLE {s}.robots (
        host        text COLLATE "C" PRIMARY KEY,
        status      text NOT NULL,             -- ok | allow-all | unreachable
        body        bytea,
        detail      text NOT NULL DEFAULT '',
        fetched_at  timestamptz NOT NULL,
        expires_at  timestamptz NOT NULL
    );
    """,
    # 2 -> 3: the shared frontier's hosts: which node crawls which host of a web source's pass
    # (indexerd.core.store.sharedfrontier), whether URLs wait for it (pending) or its node still
    # works on it (active)
    """
    CREATE TABLE {s}.crawl_hosts (
        source       text COLLATE "C" NOT NULL,
        host         text COLLATE "C" NOT NULL,
        pass_id      bigint NOT NULL,
        node         text COLLATE "C",
        claim_until  timestamptz,
        pending      boolean NOT NULL DEFAULT true,
        active       boolean NOT NULL DEFAULT false,
        PRIMARY KEY (source, host)
    );
    """,
    # 3 -> 4: a new web pass selects the known URLs that are due by their next-due time (NULL:
    # never scheduled) instead of reading every row of its source; the documents per source and
    # status are counted as rows change.  Several nodes write documents at once, so each
    # statement appends its changes (statement-level triggers over the transition tables: no
    # row two writers would both lock); readers sum them, and fold them into one row per
    # (source, status) now and then (DocumentRows.counts_by_source)
    """
    CREATE INDEX crawl_due ON {s}.crawl(source, due_at);
    CREATE TABLE {s}.document_counts (
        source  text COLLATE "C" NOT NULL,
        status  text NOT NULL,
        n       bigint NOT NULL
    );
    CREATE INDEX document_counts_source ON {s}.document_counts(source, status);
    INSERT INTO {s}.document_counts(source, status, n) SELECT source, status, count(*) FROM {s}.documents
        GROUP BY source, status;
    CREATE FUNCTION {s}.document_counts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO {s}.document_counts(source, status, n) SELECT source, status, count(*) FROM new_rows
            GROUP BY source, status;
        RETURN NULL;
    END $$;
    CREATE FUNCTION {s}.document_counts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO {s}.document_counts(source, status, n) SELECT source, status, -count(*) FROM old_rows
            GROUP BY source, status;
        RETURN NULL;
    END $$;
    CREATE FUNCTION {s}.document_counts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO {s}.document_counts(source, status, n)
            SELECT source, status, sum(n) FROM (
                SELECT source, status, -1 AS n FROM old_rows
                UNION ALL SELECT source, status, 1 FROM new_rows) d
            GROUP BY source, status HAVING sum(n) != 0;
        RETURN NULL;
    END $$;
    CREATE TRIGGER document_counts_insert AFTER INSERT ON {s}.documents
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {s}.document_counts_inserted();
    CREATE TRIGGER document_counts_delete AFTER DELETE ON {s}.documents
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION {s}.document_counts_deleted();
    CREATE TRIGGER document_counts_update AFTER UPDATE ON {s}.documents
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION {s}.document_counts_updated();
    """,
    # 4 -> 5: the fencing token of a host claim (indexerd.core.store.sharedfrontier): a number
    # from one sequence, drawn anew each time a node claims the host (a new claim, a take-over,
    # a claim again), so it grows at every hand-over, across passes too; a write of a page
    # fetched under an older one is refused (0: never claimed).  What each node fetched of each
    # host in a web source's pass (GET requests the server answered, and those it did not),
    # added to by the node as it goes: the cluster pass's totals and each node's share, read by
    # any node's status from a few rows per host
    """
    CREATE SEQUENCE {s}.crawl_claim_tokens;
    ALTER TABLE {s}.crawl_hosts ADD COLUMN claim_token bigint NOT NULL DEFAULT 0;
    CREATE TABLE {s}.crawl_node_counts (
        source   text COLLATE "C" NOT NULL,
        pass_id  bigint NOT NULL,
        host     text COLLATE "C" NOT NULL,
        node     text COLLATE "C" NOT NULL,
        fetched  bigint NOT NULL DEFAULT 0,
        errors   bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (source, pass_id, host, node)
    );
    """,
    # 5 -> 6: which kept file references which page requisite, as SQLite's 10 -> 11 (whose
    # comment says why the requisites known before are marked referenced by the page '')
    """
    CREATE TABLE {s}.crawl_requisites (
        source     text COLLATE "C" NOT NULL,
        page       text COLLATE "C" NOT NULL,
        requisite  text COLLATE "C" NOT NULL,
        nested     integer NOT NULL DEFAULT 0,
        PRIMARY KEY (source, page, requisite)
    );
    CREATE INDEX crawl_requisites_requisite ON {s}.crawl_requisites(source, nested, requisite);
    INSERT INTO {s}.crawl_requisites(source, page, requisite, nested)
        SELECT source, '', url, 0 FROM {s}.crawl WHERE via = 'requisite' OR last_outcome = 'requisite';
    """,
    # 6 -> 7: the seconds without a heartbeat after which a node counts as dead, its own (1.5
    # times its ``[store] lease``: indexerd.core.store.cluster.ClusterTimings); the nodes
    # registered before had the fixed 30 s
    """
    ALTER TABLE {s}.nodes ADD COLUMN dead_seconds double precision NOT NULL DEFAULT 30;
    """,
)

PG_SCHEMA_VERSION = len(PG_MIGRATIONS)
