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

-- check_fields checks the fields of doc, a document's row, against spec
-- (see check_document), naming them as fields of class, and then its
-- subdocuments at any depth against their types' specs, in which no key
-- but their fields' and "@type" is allowed. Besides the kinds of
-- migration 14, spec holds "sub:<field>:<Type>" (a subdocument, or a
-- list of them, of the @subdocument type Type) and, once, "types:<JSON>":
-- the spec of every subdocument type the class holds, by name, in which
-- "val:<field>:<kind>" checks a scalar field (a JSON value there, of
-- is_value's kind). Subdocuments are checked from a work list, not by
-- recursion: a document may nest 512 levels, and a plpgsql call per level
-- runs out of stack long before (about 450 levels with the default
-- max_stack_depth).
CREATE FUNCTION sluice.check_fields(id text, class text, doc jsonb, spec text[]) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    types jsonb;
    -- The work list: what each object is (a class, or Class.field...),
    -- the object, and its subdocument type (NULL: the row itself).
    whats text[] := ARRAY[class];
    objs jsonb[] := ARRAY[doc];
    typs text[] := ARRAY[NULL::text];
    n int;
    what text;
    obj jsonb;
    typ text;
    items text[];
    item text;
    kind text;
    field text;
    v jsonb;
    e jsonb;
    bad jsonb;
    allowed text[];
BEGIN
    SELECT substr(x, 7)::jsonb INTO types FROM unnest(spec) x WHERE x LIKE 'types:%' LIMIT 1;
    LOOP
        n := coalesce(array_length(objs, 1), 0);
        EXIT WHEN n = 0;
        what := whats[n];
        obj := objs[n];
        typ := typs[n];
        whats := whats[1:n - 1];
        objs := objs[1:n - 1];
        typs := typs[1:n - 1];
        IF typ IS NULL THEN
            items := spec;
        ELSE
            items := ARRAY(SELECT jsonb_array_elements_text(types -> typ));
            SELECT k INTO field FROM jsonb_object_keys(obj) k
                WHERE k <> '@type' AND NOT k = ANY (ARRAY(SELECT split_part(x, ':', 2) FROM unnest(items) x)) LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'document %: %.% is not a field of the subdocument', id, what, field USING ERRCODE = 'check_violation';
            END IF;
            IF obj ? '@type' AND obj -> '@type' IS DISTINCT FROM to_jsonb(typ) THEN
                RAISE EXCEPTION 'document %: % is a subdocument of type %, not %', id, what, typ, obj -> '@type' USING ERRCODE = 'check_violation';
            END IF;
        END IF;
        FOREACH item IN ARRAY items LOOP
            kind := split_part(item, ':', 1);
            field := split_part(item, ':', 2);
            v := obj -> field;
            IF v = 'null'::jsonb THEN
                v := NULL;
            END IF;
            IF kind = 'req' AND v IS NULL THEN
                RAISE EXCEPTION 'document %: field %.% is required', id, what, field USING ERRCODE = 'not_null_violation';
            ELSIF v IS NULL THEN
                CONTINUE;
            ELSIF kind = 'list' AND jsonb_typeof(v) <> 'array' THEN
                RAISE EXCEPTION 'document %: field %.% is a list: a JSON array, not %', id, what, field, v USING ERRCODE = 'check_violation';
            ELSIF kind = 'obj' AND jsonb_typeof(v) <> 'object' THEN
                RAISE EXCEPTION 'document %: field %.% is a subdocument: a JSON object, not %', id, what, field, v USING ERRCODE = 'check_violation';
            ELSIF kind = 'enum' THEN
                allowed := string_to_array(split_part(item, ':', 3), '|');
                IF jsonb_typeof(v) = 'array' THEN
                    IF EXISTS (SELECT 1 FROM jsonb_array_elements(v) x WHERE jsonb_typeof(x) <> 'string' OR NOT (x #>> '{}') = ANY (allowed)) THEN
                        RAISE EXCEPTION 'document %: field %.% holds a value that is not one of %', id, what, field, allowed USING ERRCODE = 'check_violation';
                    END IF;
                ELSIF jsonb_typeof(v) <> 'string' OR NOT (v #>> '{}') = ANY (allowed) THEN
                    RAISE EXCEPTION 'document %: field %.% is %, not one of %', id, what, field, v, allowed USING ERRCODE = 'check_violation';
                END IF;
            ELSIF kind = 'float' AND NOT sluice.is_value(v, 'float') THEN
                -- to_jsonb gives NaN and the infinities as strings.
                RAISE EXCEPTION 'document %: field %.% is a Float: a finite number, not %', id, what, field, v USING ERRCODE = 'check_violation';
            ELSIF kind = 'bigint' AND NOT sluice.is_value(v, 'bigint') THEN
                RAISE EXCEPTION 'document %: field %.% is a BigInt: a whole number, not %', id, what, field, v USING ERRCODE = 'check_violation';
            ELSIF kind = 'time' AND NOT sluice.is_value(v, 'column time') THEN
                RAISE EXCEPTION 'document %: field %.% is a DateTime: a time in years 1 to 9999 (UTC), not %', id, what, field, v USING ERRCODE = 'check_violation';
            ELSIF kind = 'elems' AND jsonb_typeof(v) = 'array' THEN
                SELECT x INTO bad FROM jsonb_array_elements(v) x WHERE NOT sluice.is_value(x, split_part(item, ':', 3)) LIMIT 1;
                IF FOUND THEN
                    RAISE EXCEPTION 'document %: field %.% holds %, which is not a % (list elements are never null)', id, what, field, bad, split_part(item, ':', 3)
                        USING ERRCODE = 'check_violation';
                END IF;
            ELSIF kind = 'val' AND NOT sluice.is_value(v, split_part(item, ':', 3)) THEN
                RAISE EXCEPTION 'document %: field %.% holds %, which is not a %', id, what, field, v, split_part(item, ':', 3)
                    USING ERRCODE = 'check_violation';
            ELSIF kind = 'sub' THEN
                -- A subdocument, or a list of them: onto the work list
                -- (a value that is not an object fails its obj: or
                -- elems: item).
                FOR e IN SELECT x FROM jsonb_array_elements(CASE jsonb_typeof(v) WHEN 'array' THEN v ELSE jsonb_build_array(v) END) x LOOP
                    IF jsonb_typeof(e) = 'object' THEN
                        whats := whats || (what || '.' || field);
                        objs := objs || e;
                        typs := typs || split_part(item, ':', 3);
                    END IF;
                END LOOP;
            END IF;
        END LOOP;
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
    PERFORM sluice.check_fields(id, class, doc, spec[array_lower(spec, 1) + 1:]);
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
        -- A timestamptz column as to_jsonb gives it, in the writer's
        -- time zone (an offset may have seconds): within years 1 to 9999
        -- in UTC; four digits first: not infinity, nor year 10000 and
        -- later; a year before 1 reads as before 0001-01-01.
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

-- Like every function of Sluice's but the column defaults', no other role
-- may execute it (migration 11).
REVOKE EXECUTE ON FUNCTION sluice.check_fields(text, text, jsonb, text[]) FROM PUBLIC;
