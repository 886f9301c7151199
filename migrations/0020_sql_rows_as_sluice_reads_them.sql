-- sluice:readable-by 16
-- A row written in SQL is recorded, and checked, the same whatever the
-- writing role's session settings.
--
-- The capture functions record a row's image as row_to_json gives it, and
-- check it as to_jsonb gives it, in text that follows the session's
-- settings: with extra_float_digits = -15 a Float 3.14159265 was recorded
-- as 3, and in time zone Asia/Kolkata a DateTime before 1900 with the
-- local mean time's offset, +05:53:28, which RFC 3339 (and so Sluice's
-- reader) has no room for: the log lost the value while the table kept
-- it. And their own SQL is read by the session's standard_conforming_
-- strings: off, the "\." of is_value's DateTime pattern read as ".", and
-- a list took "2020-01-01T00:00:00Z1Z" (Postgres reads it as 01:00 UTC;
-- the API cannot). Their function-level SET fixed only search_path; it now
-- fixes every setting that changes how a value is written as text, or how
-- the functions' SQL reads:
--
--   extra_float_digits = 3         floats written exactly (shortest
--                                  exact text since Postgres 12)
--   TimeZone = 'UTC'               times with offset +00:00
--   DateStyle = 'ISO, MDY'         (JSON writes times as ISO 8601 anyway;
--   IntervalStyle = 'postgres'      fixed so that no output depends on
--                                   the session)
--   standard_conforming_strings = on
--
-- on each function a capture trigger calls: capture_change and
-- capture_truncate, which write the images, and check_document, which
-- checks them. check_fields and is_value run only inside check_document
-- (no other role may execute them, migration 11), under its settings; a
-- SET on is_value, a SQL function, would keep it from being inlined into
-- check_fields' queries. bytea_output is not fixed: no column of Sluice's
-- is bytea. A SET costs about a microsecond per call.
--
-- The functions' bodies are those of migrations 11 (capture_change), 14
-- (capture_truncate) and 17 (check_document). Binaries that know
-- migration 16 run beside it unchanged: they call the functions as
-- before.

CREATE OR REPLACE FUNCTION sluice.capture_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET extra_float_digits = 3 SET TimeZone = 'UTC' SET DateStyle = 'ISO, MDY'
SET IntervalStyle = 'postgres' SET standard_conforming_strings = on AS $$
DECLARE
    db bigint := TG_ARGV[0]::bigint;
    u bigint := sluice.tx_uid(db);
    i integer := sluice.next_change(u);
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM sluice.check_document(TG_TABLE_NAME, to_jsonb(NEW), TG_ARGV);
        IF NEW._commit_uid IS DISTINCT FROM u THEN
            RAISE EXCEPTION 'document %: _commit_uid is Sluice''s own: leave it out of an INSERT (and leave Sluice''s constraints deferred: no SET CONSTRAINTS … IMMEDIATE)', NEW._id
                USING ERRCODE = 'check_violation';
        END IF;
        INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        VALUES (u, i, ARRAY[NEW._id], ARRAY[1::smallint], NULL, '[' || row_to_json(NEW)::text || ']');
    ELSIF TG_OP = 'UPDATE' THEN
        PERFORM sluice.check_document(TG_TABLE_NAME, to_jsonb(NEW), TG_ARGV);
        IF NEW._commit_uid IS DISTINCT FROM u THEN
            RAISE EXCEPTION 'document %: its commit ended while the statement ran (leave Sluice''s constraints deferred: no SET CONSTRAINTS … IMMEDIATE)', NEW._id
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        VALUES (u, i, ARRAY[NEW._id], ARRAY[2::smallint], '[' || row_to_json(OLD)::text || ']', '[' || row_to_json(NEW)::text || ']');
    ELSE
        INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        VALUES (u, i, ARRAY[OLD._id], ARRAY[3::smallint], '[' || row_to_json(OLD)::text || ']', NULL);
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION sluice.capture_truncate() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET extra_float_digits = 3 SET TimeZone = 'UTC' SET DateStyle = 'ISO, MDY'
SET IntervalStyle = 'postgres' SET standard_conforming_strings = on AS $$
DECLARE
    u bigint;
BEGIN
    IF sluice.is_writer() THEN
        RETURN NULL;
    END IF;
    u := sluice.tx_uid(TG_ARGV[0]::bigint);
    EXECUTE format('INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        SELECT $1, $2 + (row_number() OVER (ORDER BY t._id COLLATE "C"))::integer - 1, ARRAY[t._id], ARRAY[3::smallint],
            ''['' || row_to_json(t.*)::text || '']'', NULL
        FROM %I.%I t', TG_TABLE_SCHEMA, TG_TABLE_NAME) USING u, sluice.next_change(u);
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION sluice.check_document(class text, doc jsonb, spec text[]) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp SET extra_float_digits = 3 SET TimeZone = 'UTC' SET DateStyle = 'ISO, MDY'
SET IntervalStyle = 'postgres' SET standard_conforming_strings = on AS $$
DECLARE
    id text := doc ->> '_id';
    key text;
BEGIN
    IF id IS NULL OR left(id, length(class) + 1) <> class || '/' THEN
        RAISE EXCEPTION 'document id % of class %: an id is "%/<key>"', coalesce(quote_literal(id), 'NULL'), class, class
            USING ERRCODE = 'check_violation';
    END IF;
    key := substr(id, length(class) + 2);
    IF key = '' OR octet_length(key) > 255 OR key ~ '[[:space:][:cntrl:]]' THEN
        RAISE EXCEPTION 'document id %: the key must be 1 to 255 bytes without whitespace or control characters', quote_literal(id)
            USING ERRCODE = 'check_violation';
    END IF;
    -- No deeper than the API lets a document nest (schema.MaxDepth, 512,
    -- the row's own object counted): an item at level 512 that is an
    -- object or an array is the 513th level.
    IF jsonb_path_exists(doc, 'strict $.**{512} ? (@.type() == "object" || @.type() == "array")') THEN
        RAISE EXCEPTION 'document %: it nests objects and arrays deeper than 512 levels, the most a document may', id
            USING ERRCODE = 'check_violation';
    END IF;
    -- spec[first] is the database id (a trigger's TG_ARGV starts at 0).
    PERFORM sluice.check_fields(id, class, doc, spec[array_lower(spec, 1) + 1:]);
END
$$;
