-- sluice:readable-by 16
-- A row written in SQL is held to what the API writes, more closely:
--
--   * It may nest objects and arrays at most 512 levels deep, its own
--     object counted, as a document the API takes may (schema.MaxDepth).
--     Postgres takes about 12,000 levels; every reader of the log decodes
--     images inside arrays, and Go's JSON decoder refuses more than
--     10,000, so one deeper row made its commit unreadable: its
--     database's streams stopped, and with them the change feed of every
--     database of the replica.
--   * A DateTime in a list must be RFC 3339 (a date, "T", a time with at
--     most six decimals, and "Z" or an offset), as the API writes it:
--     Postgres reads "2020-01-01" or "2020-01-01 10:00 America/New_York"
--     as times too, which the API then could not read back.
--   * A BigInt in a list is written without leading zeros, as the API
--     writes it.
--
--   * A subdocument's fields are checked as the API checks them: each is
--     a field of its type, of its field's kind, required ones present,
--     its own subdocuments too (they were only checked to be objects).
--     The new checks are arguments of each table's capture trigger,
--     which Sluice makes again at start (internal/postgres/capture.go).
--
-- check_document, is_value and the new check_fields are functions:
-- binaries that know migration 16 run beside it unchanged. (They make
-- the capture triggers without the subdocuments' checks when they start;
-- this binary makes them again when it starts.)

-- check_fields checks the fields of doc, a document's row or one of its
-- subdocuments (closed: then no key but its fields' and "@type" is
-- allowed), against spec (see check_document) as the fields of what
-- (a class, or Class.field for a subdocument). Besides the kinds of
-- migration 14, spec holds "val:<field>:<kind>" (a subdocument's scalar
-- fields, kind as is_value's) and "sub:<field>:<Type>" (a subdocument, or
-- a list of them, of the @subdocument type Type), and once, at a class's
-- level, "types:<JSON>": the spec of every subdocument type the class
-- holds, by name, which sub: items look up.
CREATE FUNCTION sluice.check_fields(id text, what text, doc jsonb, spec text[], closed boolean, types jsonb DEFAULT NULL) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    class text := what;
    item text;
    kind text;
    field text;
    v jsonb;
    e jsonb;
    bad jsonb;
    allowed text[];
    sub text[];
    fields text[];
BEGIN
    IF types IS NULL THEN
        SELECT substr(x, 7)::jsonb INTO types FROM unnest(spec) x WHERE x LIKE 'types:%' LIMIT 1;
    END IF;
    IF closed THEN
        fields := ARRAY(SELECT split_part(x, ':', 2) FROM unnest(spec) x);
        SELECT k INTO field FROM jsonb_object_keys(doc) k WHERE k <> '@type' AND NOT k = ANY (fields) LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'document %: %.% is not a field of the subdocument', id, what, field USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    FOREACH item IN ARRAY spec LOOP
        kind := split_part(item, ':', 1);
        field := split_part(item, ':', 2);
        v := doc -> field;
        IF v = 'null'::jsonb THEN
            v := NULL;
        END IF;
        IF kind = 'req' AND v IS NULL THEN
            RAISE EXCEPTION 'document %: field %.% is required', id, class, field USING ERRCODE = 'not_null_violation';
        ELSIF v IS NULL THEN
            CONTINUE;
        ELSIF kind = 'list' AND jsonb_typeof(v) <> 'array' THEN
            RAISE EXCEPTION 'document %: field %.% is a list: a JSON array, not %', id, class, field, v USING ERRCODE = 'check_violation';
        ELSIF kind = 'obj' AND jsonb_typeof(v) <> 'object' THEN
            RAISE EXCEPTION 'document %: field %.% is a subdocument: a JSON object, not %', id, class, field, v USING ERRCODE = 'check_violation';
        ELSIF kind = 'enum' THEN
            allowed := string_to_array(split_part(item, ':', 3), '|');
            IF jsonb_typeof(v) = 'array' THEN
                IF EXISTS (SELECT 1 FROM jsonb_array_elements(v) e WHERE jsonb_typeof(e) <> 'string' OR NOT (e #>> '{}') = ANY (allowed)) THEN
                    RAISE EXCEPTION 'document %: field %.% holds a value that is not one of %', id, class, field, allowed USING ERRCODE = 'check_violation';
                END IF;
            ELSIF jsonb_typeof(v) <> 'string' OR NOT (v #>> '{}') = ANY (allowed) THEN
                RAISE EXCEPTION 'document %: field %.% is %, not one of %', id, class, field, v, allowed USING ERRCODE = 'check_violation';
            END IF;
        ELSIF kind = 'float' AND NOT sluice.is_value(v, 'float') THEN
            -- to_jsonb gives NaN and the infinities as strings.
            RAISE EXCEPTION 'document %: field %.% is a Float: a finite number, not %', id, class, field, v USING ERRCODE = 'check_violation';
        ELSIF kind = 'bigint' AND NOT sluice.is_value(v, 'bigint') THEN
            RAISE EXCEPTION 'document %: field %.% is a BigInt: a whole number, not %', id, class, field, v USING ERRCODE = 'check_violation';
        ELSIF kind = 'time' AND NOT sluice.is_value(v, 'time') THEN
            RAISE EXCEPTION 'document %: field %.% is a DateTime: a time in years 1 to 9999 (UTC), not %', id, class, field, v USING ERRCODE = 'check_violation';
        ELSIF kind = 'elems' AND jsonb_typeof(v) = 'array' THEN
            SELECT x INTO bad FROM jsonb_array_elements(v) x WHERE NOT sluice.is_value(x, split_part(item, ':', 3)) LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'document %: field %.% holds %, which is not a % (list elements are never null)', id, class, field, bad, split_part(item, ':', 3)
                    USING ERRCODE = 'check_violation';
            END IF;
        ELSIF kind = 'val' AND NOT sluice.is_value(v, split_part(item, ':', 3)) THEN
            RAISE EXCEPTION 'document %: field %.% holds %, which is not a %', id, class, field, v, split_part(item, ':', 3)
                USING ERRCODE = 'check_violation';
        ELSIF kind = 'sub' THEN
            -- A subdocument, or a list of them (whose shape "obj:" and
            -- "elems:" checked): their fields, as the type's spec says.
            sub := ARRAY(SELECT jsonb_array_elements_text(types -> split_part(item, ':', 3)));
            FOR e IN SELECT x FROM jsonb_array_elements(CASE jsonb_typeof(v) WHEN 'array' THEN v ELSE jsonb_build_array(v) END) x LOOP
                IF jsonb_typeof(e) = 'object' THEN
                    PERFORM sluice.check_fields(id, class || '.' || field, e, sub, true, types);
                END IF;
            END LOOP;
        END IF;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION sluice.check_document(class text, doc jsonb, spec text[]) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
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
    PERFORM sluice.check_fields(id, class, doc, spec[array_lower(spec, 1) + 1:], false);
END
$$;

CREATE OR REPLACE FUNCTION sluice.is_value(v jsonb, kind text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN v IS NULL OR jsonb_typeof(v) = 'null' THEN false
        WHEN kind = 'float' THEN jsonb_typeof(v) = 'number'
        WHEN kind = 'int' THEN CASE WHEN jsonb_typeof(v) = 'number' AND v::text ~ '^-?[0-9]{1,10}$'
            THEN v::text::bigint BETWEEN -2147483648 AND 2147483647 ELSE false END
        WHEN kind = 'bigint' THEN v::text ~ '^(0|-?[1-9][0-9]*)$'
            OR jsonb_typeof(v) = 'string' AND (v #>> '{}') ~ '^(0|-?[1-9][0-9]*)$'
        WHEN kind = 'bool' THEN jsonb_typeof(v) = 'boolean'
        WHEN kind = 'string' THEN jsonb_typeof(v) = 'string'
        WHEN kind = 'obj' THEN jsonb_typeof(v) = 'object'
        -- RFC 3339 as the API writes it (Postgres reads far more as
        -- times), then within years 1 to 9999 in UTC.
        WHEN kind = 'time' THEN CASE WHEN jsonb_typeof(v) = 'string'
                AND (v #>> '{}') ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$'
            THEN (v #>> '{}')::timestamptz >= '0001-01-01 00:00:00+00' AND (v #>> '{}')::timestamptz < '10000-01-01 00:00:00+00'
            ELSE false END
        ELSE true
    END
$$;

-- Like every function of Sluice's but the column defaults', no other role
-- may execute it (migration 11).
REVOKE EXECUTE ON FUNCTION sluice.check_fields(text, text, jsonb, text[], boolean, jsonb) FROM PUBLIC;
