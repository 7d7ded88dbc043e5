-- indexerd example: a main table and its change queue in SQLite (the Aspire RDB connector model).
--
-- Every insert, update and delete of `articles` adds one row to `queue` (status W = waiting).
-- indexerd's pre_update_sql marks a batch W -> I, its incremental_sql reads the I rows joined to
-- `articles`, and its post_update_sql marks each row C (complete) once the index has committed it.
-- A row that fails stays I and is tried again at the next pass.
--
-- Load it with:  sqlite3 /var/lib/app/app.db < etc/sql-queue-sqlite.sql
-- and use etc/sql-sqlite.toml.  The script is idempotent (IF NOT EXISTS everywhere).

-- WAL: the application keeps writing while indexerd reads (readers never block the writer).
PRAGMA journal_mode = WAL;

CREATE TABLE IF NOT EXISTS articles (
    id      INTEGER PRIMARY KEY,
    title   TEXT,
    body    TEXT,
    updated TEXT            -- ISO 8601, e.g. '2024-03-01T12:00:00Z' (no zone = UTC)
);

CREATE TABLE IF NOT EXISTS queue (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,   -- the sequence: processing order
    id      INTEGER NOT NULL,                    -- articles.id
    action  TEXT NOT NULL CHECK (action IN ('I', 'U', 'D', 'N')),
    status  TEXT NOT NULL DEFAULT 'W' CHECK (status IN ('W', 'I', 'C'))
);

-- pre_update_sql and incremental_sql select by status, in sequence order.
CREATE INDEX IF NOT EXISTS queue_status_seq ON queue (status, seq);

CREATE TRIGGER IF NOT EXISTS articles_queue_insert AFTER INSERT ON articles
BEGIN
    INSERT INTO queue (id, action) VALUES (NEW.id, 'I');
END;

-- An update that keeps the id is a U; one that changes the id deletes the old document
-- and inserts the new one.
CREATE TRIGGER IF NOT EXISTS articles_queue_update AFTER UPDATE ON articles
WHEN NEW.id = OLD.id
BEGIN
    INSERT INTO queue (id, action) VALUES (NEW.id, 'U');
END;

CREATE TRIGGER IF NOT EXISTS articles_queue_update_id AFTER UPDATE ON articles
WHEN NEW.id <> OLD.id
BEGIN
    INSERT INTO queue (id, action) VALUES (OLD.id, 'D');
    INSERT INTO queue (id, action) VALUES (NEW.id, 'I');
END;

CREATE TRIGGER IF NOT EXISTS articles_queue_delete AFTER DELETE ON articles
BEGIN
    INSERT INTO queue (id, action) VALUES (OLD.id, 'D');
END;

-- Housekeeping (run from cron, not by indexerd): completed rows older than the newest 10,000.
-- DELETE FROM queue WHERE status = 'C' AND seq < (SELECT MAX(seq) - 10000 FROM queue);
