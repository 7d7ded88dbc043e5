-- indexerd example: a main table and its change queue in PostgreSQL (the Aspire RDB connector model).
--
-- Every insert, update and delete of `articles` adds one row to `queue` (status W = waiting),
-- from a PL/pgSQL trigger in the same transaction as the change.  indexerd's pre_update_sql marks
-- a batch W -> I, its incremental_sql reads the I rows joined to `articles`, and its
-- post_update_sql marks each row C (complete) once the index has committed it.  A row that fails
-- stays I and is tried again at the next pass.
--
-- Rows are selected by status, never by "seq > last seen": a sequence number is taken when the
-- INSERT runs, not when its transaction commits, so a lower seq can become visible after a
-- higher one was processed (CASES B29).
--
-- Load it with:  psql -d app -f etc/sql-queue-postgresql.sql
-- and use etc/sql-postgresql.toml.  The script is idempotent.

CREATE TABLE IF NOT EXISTS articles (
    id      integer PRIMARY KEY,
    title   text,
    body    text,
    updated timestamptz DEFAULT now()
);

CREATE TABLE IF NOT EXISTS queue (
    seq     bigserial PRIMARY KEY,               -- the sequence: processing order
    id      integer NOT NULL,                    -- articles.id
    action  text NOT NULL CHECK (action IN ('I', 'U', 'D', 'N')),
    status  text NOT NULL DEFAULT 'W' CHECK (status IN ('W', 'I', 'C'))
);

-- pre_update_sql and incremental_sql select by status, in sequence order.
CREATE INDEX IF NOT EXISTS queue_status_seq ON queue (status, seq);

CREATE OR REPLACE FUNCTION articles_to_queue() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO queue (id, action) VALUES (NEW.id, 'I');
    ELSIF TG_OP = 'UPDATE' AND NEW.id = OLD.id THEN
        INSERT INTO queue (id, action) VALUES (NEW.id, 'U');
    ELSIF TG_OP = 'UPDATE' THEN               -- the id changed: a delete and an insert
        INSERT INTO queue (id, action) VALUES (OLD.id, 'D');
        INSERT INTO queue (id, action) VALUES (NEW.id, 'I');
    ELSE                                      -- DELETE
        INSERT INTO queue (id, action) VALUES (OLD.id, 'D');
    END IF;
    RETURN NULL;                              -- AFTER trigger: the result is ignored
END
$$;

DROP TRIGGER IF EXISTS articles_queue ON articles;
CREATE TRIGGER articles_queue
    AFTER INSERT OR UPDATE OR DELETE ON articles
    FOR EACH ROW EXECUTE FUNCTION articles_to_queue();

-- A read-only role for indexerd is enough for full_sql and incremental_sql; it needs UPDATE on
-- the queue for pre_update_sql / post_update_sql:
--   CREATE ROLE indexerd LOGIN PASSWORD '...';
--   GRANT SELECT ON articles TO indexerd;
--   GRANT SELECT, UPDATE ON queue TO indexerd;
--
-- Housekeeping (run from cron, not by indexerd): completed rows older than a week's worth.
-- DELETE FROM queue WHERE status = 'C' AND seq < (SELECT max(seq) - 100000 FROM queue);
