-- sluice:readable-by 16
-- sluice.refuse_foreign_triggers (migration 29) named every trigger
-- Sluice did not make in its error, however many a role made: 300
-- triggers of 60-byte names made a 17 KB error for every statement
-- refused, which Sluice logs for each API write it answers 503. It names
-- the first 10 (in name order) and says how many there are
-- (TestForeignTriggersErrorIsBounded). Expand: the signature and the
-- SQLSTATE are the same.
CREATE OR REPLACE FUNCTION sluice.refuse_foreign_triggers() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    names text;
    n bigint;
BEGIN
    -- As migration 29: the look reads the table's few triggers and each
    -- one's function by its oid.
    IF EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = TG_RELID AND NOT t.tgisinternal
            AND (SELECT p.pronamespace FROM pg_proc p WHERE p.oid = t.tgfoid) <> 'sluice'::regnamespace) THEN
        SELECT count(*), string_agg(quote_ident(f.tgname), ', ' ORDER BY f.tgname) FILTER (WHERE f.k <= 10) INTO n, names
        FROM (SELECT t.tgname, row_number() OVER (ORDER BY t.tgname) AS k
            FROM pg_trigger t WHERE t.tgrelid = TG_RELID AND NOT t.tgisinternal
                AND (SELECT p.pronamespace FROM pg_proc p WHERE p.oid = t.tgfoid) <> 'sluice'::regnamespace) f;
        IF n > 10 THEN
            names := names || format(', and %s more', n - 10);
        END IF;
        RAISE EXCEPTION 'table %.% has % triggers Sluice did not make (%): it is not written while they are there; Sluice drops them within seconds', TG_TABLE_SCHEMA, TG_TABLE_NAME, n, names
            USING ERRCODE = 'SLFT1', HINT = 'Grant other roles only SELECT, INSERT, UPDATE, DELETE and TRUNCATE on Sluice''s tables, never ALL, TRIGGER or REFERENCES.';
    END IF;
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION sluice.refuse_foreign_triggers() FROM PUBLIC;
