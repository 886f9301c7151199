-- Document ids sort in byte order: every listing and query orders by
-- _id COLLATE "C", whatever the server's locale, so that paging by id is
-- the same on every cluster and in Go. A table created before this
-- migration declared _id in the database's default collation, whose
-- primary key index cannot serve that order (an index serves only the
-- collation it was built with, and even a cluster created with the C
-- locale has "default", not "C"): every default-ordered read scanned and
-- sorted the whole class. Declaring the column "C" rebuilds the primary
-- key in byte order; no table is rewritten (the type stays text, and
-- equality is byte equality in both collations). New tables are created
-- this way (internal/postgres/ddl.go).
--
-- Each class table is locked while its index is rebuilt, all of them in
-- this one transaction: with very many class tables, the cluster may need
-- a higher max_locks_per_transaction for it.
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN
        SELECT c.oid::regclass
        FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = '_id' AND NOT a.attisdropped
        WHERE n.nspname ~ '^sluice_db_[0-9]+$'
          AND c.relkind = 'r'
          AND a.attcollation <> 'pg_catalog."C"'::regcollation
        ORDER BY c.oid
    LOOP
        EXECUTE format('ALTER TABLE %s ALTER COLUMN _id TYPE text COLLATE "C"', t);
    END LOOP;
END
$$;
