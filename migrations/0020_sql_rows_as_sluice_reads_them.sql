-- sluice:readable-by 16
-- A row written in SQL is recorded, and checked, the same whatever the
-- writing role's session settings, is at most 16 MiB, has a key the API
-- can read, and no Float the API could not.
--
-- The capture functions record a row's image as row_to_json gives it, and
-- check it as to_jsonb gives it: in text that follows the session's
-- settings. With extra_float_digits = -15 a Float 3.14159265 was recorded
-- as 3; in time zone Asia/Kolkata a DateTime before 1900 was written with
-- the local mean time's offset, +05:53:28, which RFC 3339 (and so
-- Sluice's reader of the log) has no room for: the log lost the value
-- while the table kept it. And the functions' own SQL is read by the
-- session's standard_conforming_strings: off, the "\." of is_value's
-- DateTime pattern read as ".", and a list took "2020-01-01T00:00:00Z1Z"
-- (Postgres reads it as 01:00 UTC; the API cannot). Their SET fixed only
-- search_path; it now also fixes every setting that changes how a value
-- is written as text, or how their SQL reads: extra_float_digits = 3
-- (floats written exactly: the shortest exact text since Postgres 12),
-- TimeZone = 'UTC', DateStyle = 'ISO, MDY' and IntervalStyle = 'postgres'
-- (JSON writes times as ISO 8601 whatever DateStyle; fixed all the same,
-- so that nothing depends on it), and standard_conforming_strings = on.
--
-- They are fixed on each function a capture trigger calls (capture_change
-- and capture_truncate, which write the images) and on check_document,
-- which checks them. check_fields and is_value run only inside
-- check_document (no other role may execute them, migration 11), under
-- its settings; a SET on is_value, a SQL function, would keep it from
-- being inlined into check_fields' queries. bytea_output is left: no
-- column of Sluice's is bytea. The SETs cost about a microsecond a call.
--
-- A row written in SQL whose image is more than 16 MiB (16,777,216 bytes
-- of JSON, the text the log records) is refused, on INSERT and UPDATE,
-- with an error naming the cap (program_limit_exceeded). The only limit
-- was jsonb's, 256 MB: one row of 249 MB took a replica's heap to 1.7 GB
-- as the log was read (every reader of the log reads a change row whole,
-- and decodes its images), and stalled every database's streams. The
-- trigger cannot read Sluice's settings (max_body_bytes, which bounds an
-- API write, is each replica's own), so the cap is fixed, at a quarter
-- of max_body_bytes' default (64 MiB): another role's writes are bound
-- by no budget of Sluice's (connections, spool, rate), and an UPDATE
-- records the row before and after. A document the API wrote larger can
-- still be read and deleted in SQL, and updated to 16 MiB or less. It is
-- the image's text that is measured, once, as capture_change makes it to
-- record it (an ordinary row costs nothing more): jsonb's size does not
-- bound it (a number 1e-16000, a few bytes of jsonb, is written with
-- 16,000 zeros). Deletions are not bounded: the row is there already.
--
-- check_document refused a key holding whitespace or control characters
-- by a POSIX class, [[:space:][:cntrl:]], whose meaning is the locale's:
-- in the C locale (the embedded Postgres's) it took U+00A0, U+1680,
-- U+2000 to U+200A, U+2028, U+2029, U+202F, U+205F and U+3000, which the
-- API refuses, and GET then answered 400 for the document. It now refuses
-- exactly the characters the API does (schema.CheckKey: unicode.IsSpace,
-- unicode.IsControl), named by code point. Rows written before are left
-- as they are.
--
-- is_value took any JSON number as a Float, in a list or a subdocument
-- (a Float column is a float8, whose range Postgres keeps): 1e400 was
-- written, and the document and the log's images then read without the
-- field, while the API refuses it ("number 1e400 is out of Float
-- range"). A Float is now a number strconv.ParseFloat reads as a finite
-- float64: its magnitude under 2^1024 - 2^970, where ParseFloat starts
-- rounding to an infinity (numbers over the largest float64 and under
-- that are rounded to it, by the API as by the reader of the log). The
-- refusal is check_fields' for any value of the wrong kind, naming the
-- field ("field F.xs holds 1000…, which is not a float").
--
-- The bodies are those of migrations 11 (capture_change, with the image
-- made once), 14 (capture_truncate) and 17 (check_document, with the key
-- checked by code point; is_value, with floats in range). Binaries
-- that know migration 16 run beside it unchanged: they call the functions
-- as before.

CREATE OR REPLACE FUNCTION sluice.capture_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET extra_float_digits = 3 SET TimeZone = 'UTC' SET DateStyle = 'ISO, MDY'
SET IntervalStyle = 'postgres' SET standard_conforming_strings = on AS $$
DECLARE
    db bigint := TG_ARGV[0]::bigint;
    u bigint := sluice.tx_uid(db);
    i integer := sluice.next_change(u);
    img text;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        -- The row's image, made once: measured here, recorded below.
        img := row_to_json(NEW)::text;
        IF octet_length(img) > 16777216 THEN
            RAISE EXCEPTION 'document %: its row is % bytes as JSON, more than 16 MiB (16777216 bytes), the most Sluice records of a row written in SQL', NEW._id, octet_length(img)
                USING ERRCODE = 'program_limit_exceeded';
        END IF;
        PERFORM sluice.check_document(TG_TABLE_NAME, to_jsonb(NEW), TG_ARGV);
    END IF;
    IF TG_OP = 'INSERT' THEN
        IF NEW._commit_uid IS DISTINCT FROM u THEN
            RAISE EXCEPTION 'document %: _commit_uid is Sluice''s own: leave it out of an INSERT (and leave Sluice''s constraints deferred: no SET CONSTRAINTS … IMMEDIATE)', NEW._id
                USING ERRCODE = 'check_violation';
        END IF;
        INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        VALUES (u, i, ARRAY[NEW._id], ARRAY[1::smallint], NULL, '[' || img || ']');
    ELSIF TG_OP = 'UPDATE' THEN
        IF NEW._commit_uid IS DISTINCT FROM u THEN
            RAISE EXCEPTION 'document %: its commit ended while the statement ran (leave Sluice''s constraints deferred: no SET CONSTRAINTS … IMMEDIATE)', NEW._id
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        INSERT INTO sluice.changes (commit_uid, idx, doc_ids, ops, befores, afters)
        VALUES (u, i, ARRAY[NEW._id], ARRAY[2::smallint], '[' || row_to_json(OLD)::text || ']', '[' || img || ']');
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
    -- What schema.CheckKey refuses: Go's unicode.IsControl (U+0000 to
    -- U+001F, U+007F to U+009F) and unicode.IsSpace (tab to carriage
    -- return, space, U+0085, U+00A0, U+1680, U+2000 to U+200A, U+2028,
    -- U+2029, U+202F, U+205F, U+3000), by code point whatever the locale.
    -- (Text holds no U+0000; a UTF8 database holds no invalid UTF-8.)
    IF key = '' OR octet_length(key) > 255
        OR key ~ '[\u0001-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]' THEN
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

-- is_value: see migration 17; a float is a JSON number that
-- strconv.ParseFloat reads as a finite float64 (the API's check).
CREATE OR REPLACE FUNCTION sluice.is_value(v jsonb, kind text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN v IS NULL OR jsonb_typeof(v) = 'null' THEN false
        -- ParseFloat rounds a number to an infinity, and refuses it, from
        -- halfway between the largest float64 and 2^1024 on (a tie
        -- rounds to the even one, the infinity); one under is the
        -- largest float64. (A constant: folded when the query is planned.)
        WHEN kind = 'float' THEN CASE WHEN jsonb_typeof(v) = 'number'
            THEN abs(v::numeric) < 2::numeric ^ 1024 - 2::numeric ^ 970 ELSE false END
        WHEN kind = 'int' THEN CASE WHEN jsonb_typeof(v) = 'number' AND v::text ~ '^-?[0-9]{1,10}$'
            THEN v::text::bigint BETWEEN -2147483648 AND 2147483647 ELSE false END
        WHEN kind = 'bigint' THEN v::text ~ '^(0|-?[1-9][0-9]*)$'
            OR jsonb_typeof(v) = 'string' AND (v #>> '{}') ~ '^(0|-?[1-9][0-9]*)$'
        WHEN kind = 'bool' THEN jsonb_typeof(v) = 'boolean'
        WHEN kind = 'string' THEN jsonb_typeof(v) = 'string'
        WHEN kind = 'obj' THEN jsonb_typeof(v) = 'object'
        -- A timestamptz column as to_jsonb gives it (in UTC: capture_change
        -- fixes the time zone): within years 1 to 9999 in UTC; four digits
        -- first: not infinity, nor year 10000 and later; a year before 1
        -- reads as before 0001-01-01.
        WHEN kind = 'column time' THEN CASE WHEN jsonb_typeof(v) = 'string' AND (v #>> '{}') ~ '^[0-9]{4}-'
            THEN (v #>> '{}')::timestamptz >= '0001-01-01 00:00:00+00' AND (v #>> '{}')::timestamptz < '10000-01-01 00:00:00+00'
            ELSE false END
        -- A DateTime held as JSON (in a list, a subdocument): RFC 3339 as
        -- the API writes it (Postgres reads far more as times), then
        -- within years 1 to 9999 in UTC.
        WHEN kind = 'time' THEN CASE WHEN jsonb_typeof(v) = 'string'
                AND (v #>> '{}') ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$'
            THEN (v #>> '{}')::timestamptz >= '0001-01-01 00:00:00+00' AND (v #>> '{}')::timestamptz < '10000-01-01 00:00:00+00'
            ELSE false END
        ELSE true
    END
$$;
